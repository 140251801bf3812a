//! Hand-written cases: errors, /0 and host routes, pool exhaustion, grace periods.

use lpm::{Ipv4Lpm, Ipv6Lpm, LpmError, MAX_NEXT_HOP};

const fn assert_send_sync<T: Send + Sync>() {}
const _: () = assert_send_sync::<Ipv4Lpm>();
const _: () = assert_send_sync::<Ipv6Lpm>();
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<lpm::Reader>()
};

#[test]
fn ipv4_basics() {
    let t = Ipv4Lpm::with_tbl8_groups(16);
    assert_eq!(t.insert(0, 33, 1), Err(LpmError::InvalidPrefixLen(33)));
    assert_eq!(t.remove(0, 40), Err(LpmError::InvalidPrefixLen(40)));
    assert_eq!(t.insert(0, 0, MAX_NEXT_HOP + 1), Err(LpmError::NextHopTooLarge(MAX_NEXT_HOP + 1)));
    assert_eq!(t.lookup(0x0a00_0001), None);
    assert_eq!(t.insert(0xdead_beef, 0, 1), Ok(None)); // masked: default route
    assert_eq!(t.insert(0x0a00_0000, 8, 2), Ok(None));
    assert_eq!(t.insert(0x0a01_0203, 32, MAX_NEXT_HOP), Ok(None));
    assert_eq!(t.insert(0x0a01_0280, 25, 4), Ok(None));
    assert_eq!(t.lookup(0x0b00_0000), Some(1));
    assert_eq!(t.lookup(0x0a01_0203), Some(MAX_NEXT_HOP));
    assert_eq!(t.lookup(0x0a01_0204), Some(2));
    assert_eq!(t.lookup(0x0a01_02ff), Some(4));
    assert_eq!(t.tbl8_stats().in_use, 1);
    assert_eq!(t.insert(0x0a01_0203, 32, 5), Ok(Some(MAX_NEXT_HOP)));
    assert_eq!(t.insert(0x0a01_02ff, 24, 6), Ok(None)); // /24 under the group
    assert_eq!(t.lookup(0x0a01_0204), Some(6));
    assert_eq!(t.lookup(0x0a01_0203), Some(5));
    assert_eq!(t.remove(0x0a01_0203, 32), Ok(Some(5)));
    assert_eq!(t.remove(0x0a01_0203, 32), Ok(None));
    assert_eq!(t.remove(0x0a01_0280, 25), Ok(Some(4)));
    assert_eq!(t.tbl8_stats().in_use, 0, "uniform group collapsed");
    assert_eq!(t.lookup(0x0a01_02ff), Some(6));
    assert_eq!(t.remove(0x0a01_0200, 24), Ok(Some(6)));
    assert_eq!(t.lookup(0x0a01_02ff), Some(2));
    assert_eq!(t.remove(0, 0), Ok(Some(1)));
    assert_eq!(t.lookup(0x0b00_0000), None);
    assert_eq!(t.len(), 1);
    let addrs: Vec<u32> = (0..21).map(|i| 0x0a00_0000 + i * 0x0100_0000 / 8).collect();
    let mut out = vec![Some(99); addrs.len()];
    t.lookup_batch(&addrs, &mut out);
    let want: Vec<_> = addrs.iter().map(|&a| t.lookup(a)).collect();
    assert_eq!(out, want);
    assert_eq!(&out[..3], &[Some(2), Some(2), Some(2)]);
}

#[test]
fn ipv6_basics() {
    let t = Ipv6Lpm::with_tbl8_groups(64);
    let p = 0x2001_0db8_0000_0000_0000_0000_0000_0000u128;
    assert_eq!(t.insert(p, 129, 1), Err(LpmError::InvalidPrefixLen(129)));
    assert_eq!(t.insert(1, 0, 1), Ok(None));
    assert_eq!(t.insert(p, 32, 2), Ok(None));
    assert_eq!(t.insert(p | 1, 128, 3), Ok(None));
    assert_eq!(t.tbl8_stats().in_use, 13);
    assert_eq!(t.lookup(p | 1), Some(3));
    assert_eq!(t.lookup(p | 2), Some(2));
    assert_eq!(t.lookup(!p), Some(1));
    assert_eq!(t.remove(p | 1, 128), Ok(Some(3)));
    assert_eq!(t.tbl8_stats().in_use, 1, "chain collapsed up to the /32's group");
    assert_eq!(t.lookup(p | 1), Some(2));
    assert_eq!(t.remove(p, 32), Ok(Some(2)));
    assert_eq!(t.tbl8_stats().in_use, 0);
    assert_eq!(t.lookup(p | 1), Some(1));
}

#[test]
fn exhausted_pool_leaves_table_unchanged() {
    let t = Ipv4Lpm::with_tbl8_groups(2);
    t.insert(0x0a00_0000, 8, 1).unwrap();
    t.insert(0x0a00_0001, 32, 2).unwrap();
    t.insert(0x0a00_0101, 32, 3).unwrap();
    assert_eq!(t.insert(0x0a00_0201, 32, 4), Err(LpmError::Tbl8Exhausted));
    assert_eq!(t.len(), 3);
    assert_eq!(t.lookup(0x0a00_0201), Some(1));
    // Another prefix in an existing group needs no new group.
    assert_eq!(t.insert(0x0a00_0102, 31, 5), Ok(None));
    let t6 = Ipv6Lpm::with_tbl8_groups(3);
    assert_eq!(t6.insert(7, 128, 1), Err(LpmError::Tbl8Exhausted)); // needs 13
    assert_eq!(t6.len(), 0);
    assert_eq!(t6.lookup(7), None);
}

#[test]
fn retired_groups_wait_for_readers() {
    let t = Ipv4Lpm::with_tbl8_groups(1);
    let reader = t.reader();
    t.insert(0x0a00_0001, 32, 1).unwrap();
    t.remove(0x0a00_0001, 32).unwrap();
    let s = t.tbl8_stats();
    assert_eq!((s.in_use, s.awaiting_grace_period), (0, 1));
    // The reader has not reported since the group was retired: no reuse.
    assert_eq!(t.insert(0x0b00_0001, 32, 2), Err(LpmError::Tbl8Exhausted));
    reader.quiescent();
    assert_eq!(t.insert(0x0b00_0001, 32, 2), Ok(None));
    assert_eq!(t.tbl8_stats().reused, 1);
    t.remove(0x0b00_0001, 32).unwrap();
    reader.offline(); // an offline reader does not hold back reclamation
    assert_eq!(t.insert(0x0c00_0001, 32, 3), Ok(None));
    reader.online();
    t.remove(0x0c00_0001, 32).unwrap();
    drop(reader); // neither does a dropped one
    assert_eq!(t.insert(0x0d00_0001, 32, 3), Ok(None));
    assert_eq!(t.tbl8_stats().reused, 3);
}

/// A table larger than an entry can name is an error, not a panic (a router configured
/// for it says so and stops before touching anything).
#[test]
fn too_many_groups_is_an_error() {
    let too_many = 1u32 << 30;
    assert_eq!(
        lpm::Ipv4Lpm::try_with_tbl8_groups(too_many).err(),
        Some(lpm::LpmError::TooManyGroups(too_many))
    );
    assert_eq!(
        lpm::Ipv6Lpm::try_with_tbl8_groups(u32::MAX).err(),
        Some(lpm::LpmError::TooManyGroups(u32::MAX))
    );
    assert!(lpm::Ipv4Lpm::try_with_tbl8_groups(16).is_ok());
}
