//! Full-size tables with a realistic length mix, checked against the reference.

use std::time::Instant;

use lpm::reference::{Ipv4Reference, Ipv6Reference};
use lpm::{Ipv4Lpm, Ipv6Lpm};

use crate::data::{Rng, realistic_v4, realistic_v6};
use crate::fam::{V4, V6, addresses, check_lookups};

const MIB: usize = 1 << 20;

#[test]
fn ipv4_one_million_prefixes() {
    let mut rng = Rng(0x5eed_0004);
    let prefixes = realistic_v4(&mut rng, 1_000_000);
    let t0 = Instant::now();
    let fast = Ipv4Lpm::new();
    for &(p, len, nh) in &prefixes {
        assert_eq!(fast.insert(p, len, nh), Ok(None));
    }
    let build = t0.elapsed();
    let mut reference = Ipv4Reference::new();
    for &(p, len, nh) in &prefixes {
        reference.insert(p, len, nh).unwrap();
    }
    assert_eq!(fast.len(), 1_000_000);
    let pl: Vec<(u32, u8)> = prefixes.iter().map(|&(p, l, _)| (p, l)).collect();
    let addrs = addresses::<V4>(&mut rng, &pl, 1_000_000);
    check_lookups::<V4>(&fast, &reference, &addrs).unwrap();
    eprintln!(
        "ipv4 1M: build {build:?}, memory {} MiB, {:?}",
        fast.memory_bytes() / MIB,
        fast.tbl8_stats()
    );
    // Churn on the full table: delete 10%, replace 10%, recheck.
    for &(p, len, nh) in prefixes.iter().step_by(5) {
        assert_eq!(fast.remove(p, len), reference.remove(p, len));
        let (p, len) = pl[(p as usize * 7 + 1) % pl.len()];
        assert_eq!(fast.insert(p, len, nh), reference.insert(p, len, nh));
    }
    let addrs = addresses::<V4>(&mut rng, &pl, 200_000);
    check_lookups::<V4>(&fast, &reference, &addrs).unwrap();
}

#[test]
fn ipv6_200k_prefixes() {
    let mut rng = Rng(0x5eed_0006);
    let prefixes = realistic_v6(&mut rng, 200_000);
    let t0 = Instant::now();
    let fast = Ipv6Lpm::new();
    for &(p, len, nh) in &prefixes {
        assert_eq!(fast.insert(p, len, nh), Ok(None));
    }
    let build = t0.elapsed();
    let mut reference = Ipv6Reference::new();
    for &(p, len, nh) in &prefixes {
        reference.insert(p, len, nh).unwrap();
    }
    assert_eq!(fast.len(), 200_000);
    let pl: Vec<(u128, u8)> = prefixes.iter().map(|&(p, l, _)| (p, l)).collect();
    let addrs = addresses::<V6>(&mut rng, &pl, 1_000_000);
    check_lookups::<V6>(&fast, &reference, &addrs).unwrap();
    eprintln!(
        "ipv6 200k: build {build:?}, memory {} MiB, {:?}",
        fast.memory_bytes() / MIB,
        fast.tbl8_stats()
    );
    for &(p, len, _) in prefixes.iter().step_by(4) {
        assert_eq!(fast.remove(p, len), reference.remove(p, len));
    }
    let addrs = addresses::<V6>(&mut rng, &pl, 200_000);
    check_lookups::<V6>(&fast, &reference, &addrs).unwrap();
}
