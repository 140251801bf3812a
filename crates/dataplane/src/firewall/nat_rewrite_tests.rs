//! Byte fixtures: each pair is the same packet before and after translation, both built with
//! every checksum computed from scratch (by a short script, not by this code). The rewrite
//! must turn one into the other byte for byte, and back.

use super::*;
use proptest::prelude::*;

const UDP_IN: &[u8] = &[
    0x45, 0x00, 0x00, 0x21, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0xea, 0x47, 0x0a, 0x00, 0x00, 0x02,
    0xc6, 0x33, 0x64, 0x09, 0x9c, 0x40, 0x00, 0x35, 0x00, 0x0d, 0xeb, 0x4d, 0x68, 0x65, 0x6c, 0x6c,
    0x6f,
];
const UDP_OUT: &[u8] = &[
    0x45, 0x00, 0x00, 0x21, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x32, 0x48, 0xc0, 0x00, 0x02, 0x01,
    0xc6, 0x33, 0x64, 0x09, 0xc3, 0x51, 0x00, 0x35, 0x00, 0x0d, 0x0c, 0x3d, 0x68, 0x65, 0x6c, 0x6c,
    0x6f,
];
const UDP0_IN: &[u8] = &[
    0x45, 0x00, 0x00, 0x21, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0xea, 0x47, 0x0a, 0x00, 0x00, 0x02,
    0xc6, 0x33, 0x64, 0x09, 0x9c, 0x40, 0x00, 0x35, 0x00, 0x0d, 0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c,
    0x6f,
];
const UDP0_OUT: &[u8] = &[
    0x45, 0x00, 0x00, 0x21, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x32, 0x48, 0xc0, 0x00, 0x02, 0x01,
    0xc6, 0x33, 0x64, 0x09, 0xc3, 0x51, 0x00, 0x35, 0x00, 0x0d, 0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c,
    0x6f,
];
const TCP_IN: &[u8] = &[
    0x45, 0x00, 0x00, 0x28, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0xea, 0x4b, 0x0a, 0x00, 0x00, 0x02,
    0xc6, 0x33, 0x64, 0x09, 0x9c, 0x40, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0xff, 0xff, 0xdb, 0x0d, 0x00, 0x00,
];
const TCP_OUT: &[u8] = &[
    0x45, 0x00, 0x00, 0x28, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x32, 0x4c, 0xc0, 0x00, 0x02, 0x01,
    0xc6, 0x33, 0x64, 0x09, 0xc3, 0x51, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0xff, 0xff, 0xfb, 0xfc, 0x00, 0x00,
];
const RDR_IN: &[u8] = &[
    0x45, 0x00, 0x00, 0x2b, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x20, 0x80, 0xcb, 0x00, 0x71, 0x05,
    0xc0, 0x00, 0x02, 0x01, 0x80, 0xe8, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x12, 0xff, 0xff, 0x3a, 0x10, 0x00, 0x00, 0x78, 0x79, 0x7a,
];
const RDR_OUT: &[u8] = &[
    0x45, 0x00, 0x00, 0x2b, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0xd8, 0x7c, 0xcb, 0x00, 0x71, 0x05,
    0x0a, 0x00, 0x00, 0x05, 0x80, 0xe8, 0x1f, 0x90, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x12, 0xff, 0xff, 0xd2, 0xcc, 0x00, 0x00, 0x78, 0x79, 0x7a,
];
const ECHO_IN: &[u8] = &[
    0x45, 0x00, 0x00, 0x24, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0xea, 0x54, 0x0a, 0x00, 0x00, 0x02,
    0xc6, 0x33, 0x64, 0x09, 0x08, 0x00, 0x54, 0x35, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64,
    0x65, 0x66, 0x67, 0x68,
];
const ECHO_OUT: &[u8] = &[
    0x45, 0x00, 0x00, 0x24, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x32, 0x55, 0xc0, 0x00, 0x02, 0x01,
    0xc6, 0x33, 0x64, 0x09, 0x08, 0x00, 0xa3, 0x17, 0xc3, 0x51, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64,
    0x65, 0x66, 0x67, 0x68,
];
const TIMEX_WIRE: &[u8] = &[
    0x45, 0x00, 0x00, 0x38, 0x00, 0x07, 0x40, 0x00, 0x40, 0x01, 0x3c, 0xbb, 0xcb, 0x00, 0x71, 0x01,
    0xc0, 0x00, 0x02, 0x01, 0x0b, 0x00, 0x25, 0x2f, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x21,
    0x1c, 0x46, 0x40, 0x00, 0x01, 0x11, 0x71, 0x48, 0xc0, 0x00, 0x02, 0x01, 0xc6, 0x33, 0x64, 0x09,
    0xc3, 0x51, 0x00, 0x35, 0x00, 0x0d, 0x0c, 0x3d,
];
const TIMEX_STACK: &[u8] = &[
    0x45, 0x00, 0x00, 0x38, 0x00, 0x07, 0x40, 0x00, 0x40, 0x01, 0xf4, 0xba, 0xcb, 0x00, 0x71, 0x01,
    0x0a, 0x00, 0x00, 0x02, 0x0b, 0x00, 0x6d, 0x2f, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x21,
    0x1c, 0x46, 0x40, 0x00, 0x01, 0x11, 0x29, 0x48, 0x0a, 0x00, 0x00, 0x02, 0xc6, 0x33, 0x64, 0x09,
    0x9c, 0x40, 0x00, 0x35, 0x00, 0x0d, 0xeb, 0x4d,
];
const UNREACH_WIRE: &[u8] = &[
    0x45, 0x00, 0x00, 0x44, 0x00, 0x07, 0x40, 0x00, 0x40, 0x01, 0x4e, 0x74, 0xc6, 0x33, 0x64, 0x09,
    0xc0, 0x00, 0x02, 0x01, 0x03, 0x03, 0xe9, 0x55, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x28,
    0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x32, 0x4c, 0xc0, 0x00, 0x02, 0x01, 0xc6, 0x33, 0x64, 0x09,
    0xc3, 0x51, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0x50, 0x02, 0xff, 0xff,
    0xfb, 0xfc, 0x00, 0x00,
];
const UNREACH_STACK: &[u8] = &[
    0x45, 0x00, 0x00, 0x44, 0x00, 0x07, 0x40, 0x00, 0x40, 0x01, 0x06, 0x74, 0xc6, 0x33, 0x64, 0x09,
    0x0a, 0x00, 0x00, 0x02, 0x03, 0x03, 0x31, 0x56, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x28,
    0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0xea, 0x4b, 0x0a, 0x00, 0x00, 0x02, 0xc6, 0x33, 0x64, 0x09,
    0x9c, 0x40, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0x50, 0x02, 0xff, 0xff,
    0xdb, 0x0d, 0x00, 0x00,
];
const TIMEX_ECHO_WIRE: &[u8] = &[
    0x45, 0x00, 0x00, 0x38, 0x00, 0x07, 0x40, 0x00, 0x40, 0x01, 0x3c, 0xbb, 0xcb, 0x00, 0x71, 0x01,
    0xc0, 0x00, 0x02, 0x01, 0x0b, 0x00, 0x86, 0x95, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x24,
    0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0x32, 0x55, 0xc0, 0x00, 0x02, 0x01, 0xc6, 0x33, 0x64, 0x09,
    0x08, 0x00, 0xa3, 0x17, 0xc3, 0x51, 0x00, 0x01,
];
const TIMEX_ECHO_STACK: &[u8] = &[
    0x45, 0x00, 0x00, 0x38, 0x00, 0x07, 0x40, 0x00, 0x40, 0x01, 0xf4, 0xba, 0xcb, 0x00, 0x71, 0x01,
    0x0a, 0x00, 0x00, 0x02, 0x0b, 0x00, 0x86, 0x95, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x24,
    0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0xea, 0x54, 0x0a, 0x00, 0x00, 0x02, 0xc6, 0x33, 0x64, 0x09,
    0x08, 0x00, 0x54, 0x35, 0x12, 0x34, 0x00, 0x01,
];

const LAN: u32 = 0x0a00_0002; // 10.0.0.2
const EXT: u32 = 0xc000_0201; // 192.0.2.1
const SRV: u32 = 0x0a00_0005; // 10.0.0.5

fn rewritten(input: &[u8], end: End, addr: u32, port: u16) -> Vec<u8> {
    let mut p = input.to_vec();
    let t = read(&p).expect("readable");
    rewrite(&mut p, &t, end, addr, port);
    // The fast path's rewrite gives the same bytes wherever it applies.
    let mut q = input.to_vec();
    if let Some((key, _)) = read_plain(&q) {
        assert_eq!((key, t.kind), (t.key, Kind::Ports));
        rewrite_plain(&mut q, key.proto, end, addr, port, false);
        assert_eq!(q, p, "rewrite_plain");
        // With the TTL: the same, and what the forwarding's own decrement gives.
        if input[8] > 1 {
            let mut r = input.to_vec();
            rewrite_plain(&mut r, key.proto, end, addr, port, true);
            let mut want = p.clone();
            wire::Ipv4Packet::new_unchecked(&mut want[..]).decrement_ttl();
            assert_eq!(r, want, "rewrite_plain with the TTL");
        }
    }
    p
}

/// Checks every checksum of an IPv4 packet from scratch.
fn checksums_valid(ip: &[u8]) -> bool {
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if wire::checksum::checksum(&ip[..ihl]) != 0 {
        return false;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let l4 = &ip[ihl..total];
    let pseudo = |len: usize| {
        let src = std::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = std::net::Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        wire::checksum::pseudo_header_v4(&src, &dst, ip[9], len as u32)
    };
    match ip[9] {
        6 => {
            wire::checksum::fold(u64::from(pseudo(l4.len())) + u64::from(wire::checksum::sum(l4)))
                == 0xffff
        }
        17 if l4[6..8] == [0, 0] => true,
        17 => {
            wire::checksum::fold(u64::from(pseudo(l4.len())) + u64::from(wire::checksum::sum(l4)))
                == 0xffff
        }
        1 => {
            wire::checksum::checksum(l4) == 0
                && (!matches!(l4[0], 3 | 11) || checksums_valid_quoted(&l4[8..]))
        }
        _ => true,
    }
}

/// The quoted header of an ICMP error: its own header checksum.
fn checksums_valid_quoted(q: &[u8]) -> bool {
    let ihl = usize::from(q[0] & 0x0f) * 4;
    wire::checksum::checksum(&q[..ihl]) == 0
}

#[test]
fn fixtures_have_valid_checksums() {
    for p in [
        UDP_IN,
        UDP_OUT,
        UDP0_IN,
        TCP_IN,
        TCP_OUT,
        RDR_IN,
        RDR_OUT,
        ECHO_IN,
        ECHO_OUT,
        TIMEX_WIRE,
        TIMEX_STACK,
        UNREACH_WIRE,
        UNREACH_STACK,
        TIMEX_ECHO_WIRE,
        TIMEX_ECHO_STACK,
    ] {
        assert!(checksums_valid(p));
    }
}

#[test]
fn nat_source_of_udp_tcp_and_echo() {
    assert_eq!(rewritten(UDP_IN, End::Src, EXT, 50001), UDP_OUT);
    assert_eq!(rewritten(UDP_OUT, End::Dst, 0xc633_6409, 53), UDP_OUT, "no change");
    assert_eq!(rewritten(TCP_IN, End::Src, EXT, 50001), TCP_OUT);
    assert_eq!(rewritten(ECHO_IN, End::Src, EXT, 50001), ECHO_OUT);
    // And back: the reply direction rewrites the other end; here the same packet is
    // restored, which is what un-translating a translated packet must give.
    assert_eq!(rewritten(TCP_OUT, End::Src, LAN, 40000), TCP_IN);
    assert_eq!(rewritten(ECHO_OUT, End::Src, LAN, 0x1234), ECHO_IN);
}

#[test]
fn udp_zero_checksum_stays_zero() {
    let out = rewritten(UDP0_IN, End::Src, EXT, 50001);
    assert_eq!(out, UDP0_OUT);
    assert_eq!(&out[26..28], &[0, 0]);
}

#[test]
fn rdr_destination() {
    assert_eq!(rewritten(RDR_IN, End::Dst, SRV, 8080), RDR_OUT);
    assert_eq!(rewritten(RDR_OUT, End::Dst, EXT, 80), RDR_IN);
}

#[test]
fn reads_flows_and_quoted_flows() {
    let t = read(UDP_IN).unwrap();
    assert_eq!(
        (t.key, t.kind),
        (NatKey { src: LAN, dst: 0xc633_6409, sport: 40000, dport: 53, proto: 17 }, Kind::Ports)
    );
    assert_eq!(read(ECHO_IN).unwrap().kind, Kind::Query { request: true });
    assert_eq!(read(ECHO_IN).unwrap().key.sport, 0x1234);
    let t = read(TIMEX_WIRE).unwrap();
    assert_eq!(
        t.kind,
        Kind::Error {
            inner: NatKey { src: EXT, dst: 0xc633_6409, sport: 50001, dport: 53, proto: 17 },
            at: 28
        }
    );
    let t = read(TIMEX_ECHO_WIRE).unwrap();
    assert!(matches!(
        t.kind,
        Kind::Error { inner: NatKey { sport: 50001, dport: 50001, proto: 1, .. }, .. }
    ));
    // Cut short: no flow.
    assert!(read(&TCP_IN[..30]).is_none());
}

#[test]
fn icmp_errors_are_translated_with_their_quoted_packet() {
    for (wire_form, stack_form, port) in [
        (TIMEX_WIRE, TIMEX_STACK, 40000),
        (UNREACH_WIRE, UNREACH_STACK, 40000),
        (TIMEX_ECHO_WIRE, TIMEX_ECHO_STACK, 0x1234),
    ] {
        // Inbound: the outer destination and the quoted source go back to the inside host.
        let mut p = wire_form.to_vec();
        let t = read(&p).unwrap();
        rewrite_error(&mut p, &t, End::Dst, LAN, End::Src, (LAN, port));
        assert_eq!(p, stack_form);
        assert!(checksums_valid(&p));
        // Outbound (the reverse): outer destination and quoted source to the outside form.
        let t = read(&p).unwrap();
        rewrite_error(&mut p, &t, End::Dst, EXT, End::Src, (EXT, 50001));
        assert_eq!(p, wire_form);
    }
}

fn udp_packet(src: u32, dst: u32, sport: u16, dport: u16, payload: &[u8], zero: bool) -> Vec<u8> {
    let mut p = vec![0u8; 28 + payload.len()];
    p[0] = 0x45;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.to_be_bytes());
    p[16..20].copy_from_slice(&dst.to_be_bytes());
    let ck = wire::checksum::checksum(&p[..20]);
    p[10..12].copy_from_slice(&ck.to_be_bytes());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    if !zero {
        let ps = wire::checksum::pseudo_header_v4(
            &src.into(),
            &dst.into(),
            17,
            (8 + payload.len()) as u32,
        );
        let ck = !wire::checksum::fold(u64::from(ps) + u64::from(wire::checksum::sum(&p[20..])));
        p[26..28].copy_from_slice(&(if ck == 0 { 0xffff } else { ck }).to_be_bytes());
    }
    p
}

proptest! {
    /// Translate then translate back gives the original packet, and every checksum is valid
    /// after each step (recomputed from scratch).
    #[test]
    fn translate_and_back(src: u32, dst: u32, sport: u16, dport: u16, to_addr: u32, to_port: u16, payload in proptest::collection::vec(any::<u8>(), 0..64), zero: bool, src_end: bool) {
        let p = udp_packet(src, dst, sport, dport, &payload, zero);
        let end = if src_end { End::Src } else { End::Dst };
        let (orig_addr, orig_port) = if src_end { (src, sport) } else { (dst, dport) };
        let once = rewritten(&p, end, to_addr, to_port);
        prop_assert!(checksums_valid(&once));
        let back = rewritten(&once, end, orig_addr, orig_port);
        prop_assert!(checksums_valid(&back));
        // 0 and 0xffff are the same checksum in ones' complement; a from-scratch UDP
        // checksum is never 0, so the packet comes back byte for byte.
        prop_assert_eq!(back, p);
    }

    /// The same for TCP segments of random content, via an ICMP error quoting them too.
    #[test]
    fn tcp_and_quoting_errors(src: u32, dst: u32, sport: u16, dport: u16, to_addr: u32, to_port: u16, payload in proptest::collection::vec(any::<u8>(), 0..40)) {
        let mut p = udp_packet(src, dst, sport, dport, &payload, false);
        // Make it TCP: a 20-byte header in front of the payload, checksum from scratch.
        let mut seg = vec![0u8; 20];
        seg[0..2].copy_from_slice(&sport.to_be_bytes());
        seg[2..4].copy_from_slice(&dport.to_be_bytes());
        seg[12] = 5 << 4;
        seg[13] = 0x18;
        seg.extend_from_slice(&payload);
        p.truncate(20);
        p[9] = 6;
        p[2..4].copy_from_slice(&((20 + seg.len()) as u16).to_be_bytes());
        p[10..12].copy_from_slice(&[0, 0]);
        let ck = wire::checksum::checksum(&p[..20]);
        p[10..12].copy_from_slice(&ck.to_be_bytes());
        let ps = wire::checksum::pseudo_header_v4(&src.into(), &dst.into(), 6, seg.len() as u32);
        let ck = !wire::checksum::fold(u64::from(ps) + u64::from(wire::checksum::sum(&seg)));
        seg[16..18].copy_from_slice(&ck.to_be_bytes());
        p.extend_from_slice(&seg);
        prop_assert!(checksums_valid(&p));
        let once = rewritten(&p, End::Src, to_addr, to_port);
        prop_assert!(checksums_valid(&once));
        prop_assert_eq!(rewritten(&once, End::Src, src, sport), p.clone());
        // An ICMP error (from 192.0.2.99) quoting the segment, sent back to its source.
        let mut e = udp_packet(0xc000_0263, src, 0, 0, &[], true);
        e.truncate(20);
        e[9] = 1;
        let mut icmp = vec![3u8, 3, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&p);
        let ck = wire::checksum::checksum(&icmp);
        icmp[2..4].copy_from_slice(&ck.to_be_bytes());
        e[2..4].copy_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
        e[10..12].copy_from_slice(&[0, 0]);
        let ck = wire::checksum::checksum(&e[..20]);
        e[10..12].copy_from_slice(&ck.to_be_bytes());
        e.extend_from_slice(&icmp);
        prop_assert!(checksums_valid(&e));
        let mut x = e.clone();
        let t = read(&x).unwrap();
        rewrite_error(&mut x, &t, End::Dst, to_addr, End::Src, (to_addr, to_port));
        prop_assert!(checksums_valid(&x));
        // The quoted TCP segment is valid for its rewritten addresses too.
        let quoted = x[28..].to_vec();
        prop_assert!(checksums_valid(&quoted));
        let t = read(&x).unwrap();
        rewrite_error(&mut x, &t, End::Dst, src, End::Src, (src, sport));
        prop_assert_eq!(x, e);
    }
}
