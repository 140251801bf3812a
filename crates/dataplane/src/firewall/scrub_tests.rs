use super::*;
use wire::checksum::checksum;

/// A SYN as Linux sends it, 192.168.0.104:41970 -> 192.168.0.1:80: DF, TTL 64, options MSS
/// 1460, SACK permitted, timestamps, NOP, window scale 7 (checksums filled by `fill`).
const SYN_V4: [u8; 60] = [
    0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x68,
    0xc0, 0xa8, 0x00, 0x01, //
    0xa3, 0xf2, 0x00, 0x50, 0x3a, 0x1b, 0x2c, 0x4d, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0,
    0x00, 0x00, 0x00, 0x00, //
    0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x9c, 0x27, 0x24, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x03, 0x03, 0x07,
];

/// The IPv4 header checksum, recomputed.
fn ip_ck(ip: &[u8]) -> u16 {
    let mut h = ip[..20].to_vec();
    h[10..12].fill(0);
    checksum(&h)
}

/// The TCP checksum of IPv4 packet `ip` (a 20-byte header), recomputed over the
/// pseudo-header and segment (`modulate`'s tests use it too).
pub(crate) fn tcp_ck_v4(ip: &[u8]) -> u16 {
    let seg = &ip[20..];
    let mut b = ip[12..20].to_vec();
    b.extend_from_slice(&[0, proto::TCP]);
    b.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    b.extend_from_slice(seg);
    b[12 + 16..12 + 18].fill(0);
    checksum(&b)
}

/// The fixture with correct checksums.
fn fill(mut ip: Vec<u8>) -> Vec<u8> {
    let c = ip_ck(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let c = tcp_ck_v4(&ip);
    ip[36..38].copy_from_slice(&c.to_be_bytes());
    ip
}

fn checksums_hold(ip: &[u8]) {
    assert_eq!(u16::from_be_bytes([ip[10], ip[11]]), ip_ck(ip), "IPv4 header checksum");
    assert_eq!(u16::from_be_bytes([ip[36], ip[37]]), tcp_ck_v4(ip), "TCP checksum");
}

fn opts(f: impl FnOnce(&mut ScrubOpts)) -> ScrubOpts {
    let mut o = ScrubOpts::default();
    f(&mut o);
    o
}

fn scrub(ip: &mut [u8], o: &ScrubOpts) -> (Result<(), DropReason>, ScrubCounts) {
    let mut c = ScrubCounts::default();
    let r = scrub_v4(ip, o, &mut || 0xbeef, &mut c);
    (r, c)
}

#[test]
fn a_syn_has_its_mss_clamped_with_correct_checksums() {
    let mut ip = fill(SYN_V4.to_vec());
    checksums_hold(&ip);
    let (r, c) = scrub(&mut ip, &opts(|o| o.max_mss = 1400));
    assert_eq!(r, Ok(()));
    assert_eq!(&ip[40..44], &[0x02, 0x04, 0x05, 0x78], "MSS 1400");
    checksums_hold(&ip);
    assert_eq!(c, ScrubCounts { packets: 1, mss_clamped: 1, ..ScrubCounts::default() });
    // Only the MSS word changed.
    let orig = fill(SYN_V4.to_vec());
    let changed: Vec<usize> = (0..ip.len()).filter(|&i| ip[i] != orig[i]).collect();
    assert!(changed.iter().all(|&i| matches!(i, 36 | 37 | 42 | 43)), "{changed:?}");
    // A smaller MSS stays; a larger limit changes nothing.
    let before = ip.clone();
    let (_, c) = scrub(&mut ip, &opts(|o| o.max_mss = 1440));
    assert_eq!((ip, c.mss_clamped), (before, 0));
}

#[test]
fn an_mss_at_an_odd_offset_is_clamped_with_a_correct_checksum() {
    // NOP, MSS 1460, SACK permitted, NOP x3 ... : the MSS value at segment offset 23.
    let mut ip = SYN_V4.to_vec();
    ip[40..52]
        .copy_from_slice(&[0x01, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01]);
    let mut ip = fill(ip);
    let (r, c) = scrub(&mut ip, &opts(|o| o.max_mss = 1200));
    assert_eq!((r, c.mss_clamped), (Ok(()), 1));
    assert_eq!(&ip[41..45], &[0x02, 0x04, 0x04, 0xb0]);
    checksums_hold(&ip);
    // An option that runs past the header ends the walk: the MSS-like bytes it holds stay.
    let mut bad = SYN_V4.to_vec();
    bad[40..46].copy_from_slice(&[0x03, 0x28, 0x02, 0x04, 0x05, 0xb4]);
    let mut bad = fill(bad);
    let before = bad.clone();
    let (r, c) = scrub(&mut bad, &opts(|o| o.max_mss = 1200));
    assert_eq!((r, c.mss_clamped, bad), (Ok(()), 0, before));
}

#[test]
fn df_is_cleared_the_ttl_raised_the_tos_set_the_id_randomized() {
    let mut ip = fill(SYN_V4.to_vec());
    ip[8] = 5;
    ip[1] = 0x03; // ECN CE
    let mut ip = fill(ip);
    let o = opts(|o| {
        o.no_df = true;
        o.min_ttl = 64;
        o.set_tos = Some(0x10);
        o.random_id = true;
    });
    let (r, c) = scrub(&mut ip, &o);
    assert_eq!(r, Ok(()));
    assert_eq!(ip[6] & 0x40, 0, "DF cleared");
    assert_eq!(ip[8], 64, "TTL raised");
    assert_eq!(ip[1], 0x13, "TOS set, ECN kept");
    assert_eq!(&ip[4..6], &[0xbe, 0xef], "random id");
    checksums_hold(&ip);
    assert_eq!(
        c,
        ScrubCounts {
            packets: 1,
            df_cleared: 1,
            id_randomized: 1,
            ttl_raised: 1,
            tos_set: 1,
            mss_clamped: 0,
            tcp_cleared: 0
        }
    );
    // A TTL above min-ttl stays; a fragment keeps its id.
    let mut ip = fill(SYN_V4.to_vec());
    ip[6] = 0x20; // MF: a first fragment
    let mut ip = fill(ip);
    let (_, c) = scrub(
        &mut ip,
        &opts(|o| {
            o.min_ttl = 10;
            o.random_id = true;
        }),
    );
    assert_eq!((ip[8], &ip[4..6], c.ttl_raised, c.id_randomized), (64, &[0x1c, 0x46][..], 0, 0));
}

#[test]
fn pf_s_illegal_tcp_flags_are_dropped_and_reserved_bits_cleared() {
    let with_flags = |f: u8| {
        let mut ip = SYN_V4.to_vec();
        ip[33] = f;
        fill(ip)
    };
    for f in [SYN | RST, SYN | FIN, 0, FIN, PSH, URG, FIN | PSH] {
        assert_eq!(
            scrub(&mut with_flags(f), &ScrubOpts::default()).0,
            Err(DropReason::ScrubBadTcp),
            "flags {f:#x}"
        );
    }
    for f in [SYN, SYN | ACK, ACK, RST, RST | ACK, FIN | ACK, PSH | ACK, URG | ACK] {
        assert_eq!(scrub(&mut with_flags(f), &ScrubOpts::default()).0, Ok(()), "flags {f:#x}");
    }
    let mut ip = SYN_V4.to_vec();
    ip[32] = 0xa0 | 0x0f; // reserved bits
    ip[38..40].copy_from_slice(&[0x12, 0x34]); // urgent pointer without URG
    let mut ip = fill(ip);
    let (r, c) = scrub(&mut ip, &ScrubOpts::default());
    assert_eq!((r, c.tcp_cleared), (Ok(()), 1));
    assert_eq!((ip[32], &ip[38..40]), (0xa0, &[0u8, 0][..]));
    checksums_hold(&ip);
    let mut ip = SYN_V4.to_vec();
    ip[32] = 0x40; // data offset 4
    assert_eq!(scrub(&mut fill(ip), &ScrubOpts::default()).0, Err(DropReason::ScrubBadTcp));
}

#[test]
fn ipv6_hop_limit_traffic_class_and_mss() {
    // 2001:db8::1 -> 2001:db8::2, TCP SYN with MSS 1440, hop limit 3, traffic class 0x01.
    let mut ip = vec![0x60, 0x10, 0x00, 0x00, 0x00, 24, proto::TCP, 3];
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ip.extend_from_slice(&[
        0xa3, 0xf2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, SYN, 0xff, 0xff, 0, 0, 0, 0, 0x02,
        0x04, 0x05, 0xa0,
    ]);
    let ck = |ip: &[u8]| {
        let mut b = ip[8..40].to_vec();
        b.extend_from_slice(&[0, 0, 0, 24, 0, 0, 0, proto::TCP]);
        b.extend_from_slice(&ip[40..]);
        b[40 + 16..40 + 18].fill(0);
        checksum(&b)
    };
    let c0 = ck(&ip);
    ip[56..58].copy_from_slice(&c0.to_be_bytes());
    let mut c = ScrubCounts::default();
    let o = opts(|o| {
        o.min_ttl = 64;
        o.set_tos = Some(0xb8);
        o.max_mss = 1220;
    });
    scrub_v6(&mut ip, &o, &mut c).unwrap();
    assert_eq!(ip[7], 64);
    assert_eq!((ip[0], ip[1]), (0x6b, 0x90), "traffic class 0xb9: EF, ECN kept");
    assert_eq!(&ip[62..64], &1220u16.to_be_bytes());
    assert_eq!(u16::from_be_bytes([ip[56], ip[57]]), ck(&ip));
    assert_eq!((c.ttl_raised, c.tos_set, c.mss_clamped), (1, 1, 1));
}

/// [`rewrite`]'s incremental update against the checksum recomputed from scratch, for
/// random buffers and changes of 1 to 4 bytes at any offset, odd ones included.
#[test]
fn incremental_checksums_match_a_full_recomputation() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..5000 {
        let len = 4 + (next() % 60) as usize;
        let mut buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // The checksum field at 0..2, the changes after it.
        buf[0..2].fill(0);
        let c = checksum(&buf);
        buf[0..2].copy_from_slice(&c.to_be_bytes());
        let n = 1 + (next() as usize) % 4.min(len - 2);
        let at = 2 + (next() as usize) % (len - 2 - n + 1);
        let new: Vec<u8> = (0..n).map(|_| next() as u8).collect();
        rewrite(&mut buf, at, &new, 0);
        assert_eq!(&buf[at..at + n], &new[..]);
        assert_eq!(
            checksum(&buf),
            0,
            "a buffer holding its own checksum sums to 0: len {len}, at {at}, {n} bytes"
        );
    }
}
