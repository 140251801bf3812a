//! The router-originated ICMP errors and echo replies (`wire::icmp_reply`) on real frames:
//! every reply is parsed back with the crate's views and every checksum verified.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::build::{UdpFlow, udp_frame, udp_frame_vlan};
use wire::icmp_reply::{IcmpError, echo_reply, icmp_error, should_send_error};
use wire::{
    EtherType, EthernetFrame, Icmpv4Packet, Icmpv4Type, Icmpv6Packet, Icmpv6Type, IpProtocol,
    Ipv4Packet, Ipv6Packet, MacAddr, parse_l2,
};

const ROUTER_MAC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0xaa, 0x01]);
const ROUTER_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);

fn router_v6() -> Ipv6Addr {
    "2001:db8::fe".parse().unwrap()
}

/// A DNS query for example.com/A from 192.168.1.10:53124 (3c:22:fb:12:34:56) to 8.8.8.8:53,
/// as captured on Ethernet (TTL 64, DF, ident 0x1c46): the fixture of `ipv4.rs`.
const DNS_QUERY: [u8; 71] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x3c, 0x22, 0xfb, 0x12, 0x34, 0x56, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x39, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x4c, 0xac, 0xc0, 0xa8, 0x01, 0x0a, 0x08, 0x08,
    0x08, 0x08, 0xcf, 0x84, 0x00, 0x35, 0x00, 0x25, 0xe2, 0xec, 0xab, 0xcd, 0x01, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63,
    0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
];

/// ICMPv4 echo request 10.0.0.1 -> 10.0.0.2, id 0x42 seq 7, 16 data bytes 00..0f (the
/// fixture of `icmpv4.rs`), behind an Ethernet header 02:..:01 -> 02:..:aa:01.
fn icmpv4_echo() -> Vec<u8> {
    let ip = [
        0x45, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0x26, 0xcf, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0xbf, 0x76, 0x00, 0x42, 0x00, 0x07, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    ];
    let mut f = vec![0x02, 0x00, 0x00, 0x00, 0xaa, 0x01, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f.resize(60, 0); // Ethernet padding, never quoted or echoed
    f
}

/// ICMPv6 echo request 2001:db8::1 -> 2001:db8::2, id 0x1234 seq 1, data "abcdefgh" (the
/// fixture of `icmpv6.rs`), behind an Ethernet header.
fn icmpv6_echo() -> Vec<u8> {
    let ip = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x10, 0x3a, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x80, 0x75, 0x12,
        0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    ];
    let mut f = vec![0x02, 0x00, 0x00, 0x00, 0xaa, 0x01, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd];
    f.extend_from_slice(&ip);
    f
}

/// QinQ (S-tag VID 100 PCP 3, C-tag VID 200) broadcast frame carrying the IPv4 echo request
/// (the fixture of `ethernet.rs`).
const QINQ_ECHO: [u8; 66] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0xa8, 0x60, 0x64,
    0x81, 0x00, 0x00, 0xc8, 0x08, 0x00, 0x45, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01,
    0x26, 0xcf, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0xbf, 0x76, 0x00, 0x42,
    0x00, 0x07, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d,
    0x0e, 0x0f,
];

fn flow(src: &str, dst: &str) -> UdpFlow {
    UdpFlow {
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        dst_mac: ROUTER_MAC,
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        src_port: 1234,
        dst_port: 5678,
        ttl: 1,
    }
}

fn udp(src: &str, dst: &str, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; 2048];
    let n = udp_frame(&flow(src, dst), len, &mut b).unwrap();
    b.truncate(n);
    b
}

/// Parses an ICMPv4 error frame completely; returns (type, code, rest, quote).
fn parse_v4_error(f: &[u8], to: MacAddr, dst: Ipv4Addr) -> (Icmpv4Type, u8, u32, Vec<u8>) {
    let eth = EthernetFrame::new_checked(f).unwrap();
    assert_eq!((eth.dst_addr(), eth.src_addr()), (to, ROUTER_MAC));
    let l2 = parse_l2(f).unwrap();
    assert_eq!(l2.ethertype, EtherType::Ipv4);
    let ip = Ipv4Packet::new_checked(&f[l2.l3_offset..]).unwrap();
    assert!(ip.verify_checksum());
    assert!(usize::from(ip.total_len()) <= 576);
    assert_eq!((ip.src_addr(), ip.dst_addr()), (ROUTER_V4, dst));
    assert_eq!((ip.protocol(), ip.ttl(), ip.dscp_ecn()), (IpProtocol::Icmp, 64, 0xc0));
    assert!(ip.dont_frag() && !ip.is_fragment());
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum());
    assert!(icmp.msg_type().is_error());
    (icmp.msg_type(), icmp.code(), icmp.rest_of_header(), icmp.data().to_vec())
}

/// Parses an ICMPv6 error frame completely; returns (type, code, rest, quote).
fn parse_v6_error(f: &[u8], to: MacAddr, dst: Ipv6Addr) -> (Icmpv6Type, u8, u32, Vec<u8>) {
    let eth = EthernetFrame::new_checked(f).unwrap();
    assert_eq!((eth.dst_addr(), eth.src_addr()), (to, ROUTER_MAC));
    let l2 = parse_l2(f).unwrap();
    assert_eq!(l2.ethertype, EtherType::Ipv6);
    let ip = Ipv6Packet::new_checked(&f[l2.l3_offset..]).unwrap();
    assert!(40 + usize::from(ip.payload_len()) <= 1280);
    assert_eq!((ip.src_addr(), ip.dst_addr()), (router_v6(), dst));
    assert_eq!((ip.next_header(), ip.hop_limit()), (IpProtocol::Icmpv6, 64));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
    assert!(icmp.msg_type().is_error());
    (icmp.msg_type(), icmp.code(), icmp.rest_of_header(), icmp.data().to_vec())
}

#[test]
fn time_exceeded_v4_quotes_whole_small_datagram() {
    let mut buf = [0u8; 1600];
    let v4 = IpAddr::V4(ROUTER_V4);
    let n = icmp_error(&DNS_QUERY, IcmpError::TimeExceeded, v4, ROUTER_MAC, &mut buf).unwrap();
    assert_eq!(n, 14 + 20 + 8 + 57);
    let from = MacAddr([0x3c, 0x22, 0xfb, 0x12, 0x34, 0x56]);
    let (t, code, rest, quote) = parse_v4_error(&buf[..n], from, Ipv4Addr::new(192, 168, 1, 10));
    assert_eq!((t, code, rest), (Icmpv4Type::TimeExceeded, 0, 0));
    assert_eq!(quote, &DNS_QUERY[14..]);
}

#[test]
fn unreachable_and_frag_needed_v4_truncate_to_576() {
    let big = udp("10.0.0.1", "10.9.9.9", 1514);
    let mut buf = [0u8; 1600];
    let src = MacAddr([2, 0, 0, 0, 0, 9]);
    let to = Ipv4Addr::new(10, 0, 0, 1);
    for (err, code, rest) in [
        (IcmpError::NoRoute, 0, 0),
        (IcmpError::AddressUnreachable, 1, 0),
        (IcmpError::PacketTooBig { mtu: 1400 }, 4, 1400),
        (IcmpError::PacketTooBig { mtu: 100_000 }, 4, 0xffff),
        (IcmpError::Refused { code: 3, code6: 4 }, 3, 0),
        (IcmpError::Refused { code: 13, code6: 1 }, 13, 0),
    ] {
        let n = icmp_error(&big, err, IpAddr::V4(ROUTER_V4), ROUTER_MAC, &mut buf).unwrap();
        assert_eq!(n, 14 + 576);
        let (t, c, r, quote) = parse_v4_error(&buf[..n], src, to);
        assert_eq!((t, c, r), (Icmpv4Type::DestUnreachable, code, rest), "{err:?}");
        assert_eq!(quote.len(), 548);
        assert_eq!(quote, &big[14..14 + 548]);
        // The quote starts with the original header (RFC 792), checksum still valid.
        let orig = Ipv4Packet::new_unchecked(&quote[..]);
        assert_eq!((orig.total_len(), orig.dst_addr()), (1500, Ipv4Addr::new(10, 9, 9, 9)));
        assert!(orig.verify_checksum());
    }
    // The smallest UDP frame (60 bytes, 46 of them IP) is quoted whole.
    let tiny = udp("10.0.0.1", "10.9.9.9", 60);
    let n = icmp_error(&tiny, IcmpError::NoRoute, IpAddr::V4(ROUTER_V4), ROUTER_MAC, &mut buf);
    assert_eq!(n, Ok(14 + 20 + 8 + 46));
    assert_eq!(
        icmp_error(&big, IcmpError::NoRoute, IpAddr::V4(ROUTER_V4), ROUTER_MAC, &mut buf[..589]),
        Err(wire::Error::BufferTooSmall)
    );
}

#[test]
fn icmpv6_errors_truncate_to_1280() {
    let big = udp("2001:db8::1", "2001:db8:9::9", 1514);
    let mut buf = [0u8; 1600];
    let src = MacAddr([2, 0, 0, 0, 0, 9]);
    let to: Ipv6Addr = "2001:db8::1".parse().unwrap();
    for (err, t, code, rest) in [
        (IcmpError::TimeExceeded, Icmpv6Type::TimeExceeded, 0, 0),
        (IcmpError::NoRoute, Icmpv6Type::DestUnreachable, 0, 0),
        (IcmpError::AddressUnreachable, Icmpv6Type::DestUnreachable, 3, 0),
        (IcmpError::PacketTooBig { mtu: 1480 }, Icmpv6Type::PacketTooBig, 0, 1480),
        (IcmpError::Refused { code: 3, code6: 4 }, Icmpv6Type::DestUnreachable, 4, 0),
        (IcmpError::Refused { code: 13, code6: 1 }, Icmpv6Type::DestUnreachable, 1, 0),
    ] {
        let n = icmp_error(&big, err, IpAddr::V6(router_v6()), ROUTER_MAC, &mut buf).unwrap();
        assert_eq!(n, 14 + 1280);
        let (ty, c, r, quote) = parse_v6_error(&buf[..n], src, to);
        assert_eq!((ty, c, r), (t, code, rest), "{err:?}");
        assert_eq!(quote, &big[14..14 + 1232]);
    }
    // A small packet is quoted whole.
    let f = icmpv6_echo();
    let n = icmp_error(&f, IcmpError::TimeExceeded, IpAddr::V6(router_v6()), ROUTER_MAC, &mut buf);
    let n = n.unwrap();
    assert_eq!(n, 14 + 40 + 8 + 56);
    let from = MacAddr([2, 0, 0, 0, 0, 1]);
    let (_, _, _, quote) = parse_v6_error(&buf[..n], from, "2001:db8::1".parse().unwrap());
    assert_eq!(quote, &f[14..]);
}

#[test]
fn errors_keep_vlan_tags_and_reject_family_mismatch() {
    let mut b = vec![0u8; 2048];
    let n = udp_frame_vlan(&flow("10.0.0.1", "10.9.9.9"), 42, 200, &mut b).unwrap();
    let mut buf = [0u8; 1600];
    let v4 = IpAddr::V4(ROUTER_V4);
    let m = icmp_error(&b[..n], IcmpError::TimeExceeded, v4, ROUTER_MAC, &mut buf).unwrap();
    let l2 = parse_l2(&buf[..m]).unwrap();
    assert_eq!((l2.vlans, l2.l3_offset), ([Some(42), None], 18));
    let (t, ..) =
        parse_v4_error(&buf[..m], MacAddr([2, 0, 0, 0, 0, 9]), Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(t, Icmpv4Type::TimeExceeded);

    let v6 = IpAddr::V6(router_v6());
    let e = icmp_error(&DNS_QUERY, IcmpError::TimeExceeded, v6, ROUTER_MAC, &mut buf);
    assert_eq!(e, Err(wire::Error::Malformed));
    let e = icmp_error(&icmpv6_echo(), IcmpError::NoRoute, v4, ROUTER_MAC, &mut buf);
    assert_eq!(e, Err(wire::Error::Malformed));
    let e = icmp_error(&DNS_QUERY[..30], IcmpError::NoRoute, v4, ROUTER_MAC, &mut buf);
    assert_eq!(e, Err(wire::Error::Truncated));
}

/// Rewrites bytes of a frame's IPv4 header and fixes its checksum.
fn v4_with(frame: &[u8], edit: impl FnOnce(&mut Ipv4Packet<&mut [u8]>)) -> Vec<u8> {
    let mut f = frame.to_vec();
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    edit(&mut ip);
    ip.fill_checksum();
    f
}

#[test]
fn should_send_error_v4_rules() {
    let te = IcmpError::TimeExceeded;
    assert!(should_send_error(&DNS_QUERY, te));
    // Not in response to an ICMP error (RFC 1812 4.3.2.7) ...
    let mut err = vec![0u8; 200];
    let n = icmp_error(&DNS_QUERY, te, IpAddr::V4(ROUTER_V4), ROUTER_MAC, &mut err).unwrap();
    assert!(!should_send_error(&err[..n], te));
    // ... but to an echo request, yes.
    assert!(should_send_error(&icmpv4_echo(), te));
    for t in [3u8, 4, 5, 11, 12] {
        let mut f = icmpv4_echo();
        f[34] = t;
        assert!(!should_send_error(&f, te), "ICMP type {t}");
    }
    // An ICMP datagram too short to show its type.
    let f = v4_with(&icmpv4_echo(), |ip| ip.set_total_len(20));
    assert!(!should_send_error(&f, te));
    // Sources that are not a single host.
    for src in ["0.0.0.0", "255.255.255.255", "224.0.0.1", "127.0.0.1", "240.0.0.1"] {
        let f = v4_with(&DNS_QUERY, |ip| ip.set_src_addr(src.parse().unwrap()));
        assert!(!should_send_error(&f, te), "source {src}");
    }
    // Destinations that are broadcast or multicast.
    for dst in ["255.255.255.255", "239.1.2.3"] {
        let f = v4_with(&DNS_QUERY, |ip| ip.set_dst_addr(dst.parse().unwrap()));
        assert!(!should_send_error(&f, te), "destination {dst}");
    }
    // Link-layer broadcast and multicast.
    let mut f = DNS_QUERY;
    f[..6].copy_from_slice(&[0xff; 6]);
    assert!(!should_send_error(&f, te));
    f[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0, 0, 1]);
    assert!(!should_send_error(&f, IcmpError::PacketTooBig { mtu: 1280 }));
    // Fragments: the first one yes, later ones never.
    let first = v4_with(&DNS_QUERY, |ip| ip.set_more_frags(true));
    assert!(should_send_error(&first, te));
    let later = v4_with(&DNS_QUERY, |ip| ip.set_frag_offset(1480));
    assert!(!should_send_error(&later, te));
    // Not IP, or broken.
    assert!(!should_send_error(&DNS_QUERY[..20], te));
    let mut arp = DNS_QUERY;
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert!(!should_send_error(&arp, te));
}

#[test]
fn should_send_error_v6_rules() {
    let te = IcmpError::TimeExceeded;
    let ptb = IcmpError::PacketTooBig { mtu: 1280 };
    let big = udp("2001:db8::1", "2001:db8:9::9", 200);
    assert!(should_send_error(&big, te));
    assert!(should_send_error(&icmpv6_echo(), te)); // an informational message
    // Never about an ICMPv6 error (types < 128) or a Redirect.
    let mut err = vec![0u8; 1600];
    let n = icmp_error(&big, te, IpAddr::V6(router_v6()), ROUTER_MAC, &mut err).unwrap();
    assert!(!should_send_error(&err[..n], te));
    assert!(!should_send_error(&err[..n], ptb));
    let mut redirect = icmpv6_echo();
    redirect[54] = 137;
    assert!(!should_send_error(&redirect, te));
    // Sources that do not identify one node (e.6).
    for src in ["::", "ff02::1", "::1"] {
        let mut f = big.clone();
        f[22..38].copy_from_slice(&src.parse::<Ipv6Addr>().unwrap().octets());
        assert!(!should_send_error(&f, te), "source {src}");
        assert!(!should_send_error(&f, ptb), "source {src}");
    }
    // To a multicast group or as link-layer multicast: only Packet Too Big (e.3, e.4).
    let mut mc = big.clone();
    mc[38..54].copy_from_slice(&"ff0e::1".parse::<Ipv6Addr>().unwrap().octets());
    mc[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    assert!(!should_send_error(&mc, te));
    assert!(!should_send_error(&mc, IcmpError::NoRoute));
    assert!(should_send_error(&mc, ptb));
    let mut llb = big.clone();
    llb[..6].copy_from_slice(&[0xff; 6]);
    assert!(!should_send_error(&llb, te));
    assert!(should_send_error(&llb, ptb));
    // Fragment headers: the first fragment is judged by what follows, later ones never.
    let frag = |offset: u16| {
        let mut f = big[..54].to_vec();
        f[20] = 44; // next header: Fragment
        f.extend_from_slice(&[17, 0, (offset >> 8) as u8, offset as u8 | 1, 0, 0, 0, 7]);
        f.extend_from_slice(&big[54..]);
        let plen = (f.len() - 54) as u16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f
    };
    assert!(should_send_error(&frag(0), te));
    assert!(!should_send_error(&frag(1448), te));
    assert!(!should_send_error(&frag(1448), ptb));
}

#[test]
fn echo_reply_v4() {
    let req = icmpv4_echo();
    let mut buf = [0u8; 200];
    let n = echo_reply(&req, ROUTER_MAC, &mut buf).unwrap();
    assert_eq!(n, 60);
    let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
    assert_eq!((eth.dst_addr(), eth.src_addr()), (MacAddr([2, 0, 0, 0, 0, 1]), ROUTER_MAC));
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 0, 0, 2));
    assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!((ip.total_len(), ip.ttl(), ip.protocol()), (44, 64, IpProtocol::Icmp));
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum());
    assert_eq!((icmp.msg_type(), icmp.code()), (Icmpv4Type::EchoReply, 0));
    assert_eq!((icmp.echo_ident(), icmp.echo_seq()), (0x42, 7));
    assert_eq!(icmp.data(), &req[42..58]);
    // Only the type changed, so the checksum moved by exactly 0x0800 (RFC 1624).
    assert_eq!(icmp.checksum(), 0xbf76 + 0x0800);

    // Broadcast destination, bad checksum, a reply instead of a request, a fragment: refused.
    let bcast = v4_with(&req, |ip| ip.set_dst_addr(Ipv4Addr::BROADCAST));
    assert_eq!(echo_reply(&bcast, ROUTER_MAC, &mut buf), Err(wire::Error::Malformed));
    let mut bad = req.clone();
    bad[50] ^= 1;
    assert_eq!(echo_reply(&bad, ROUTER_MAC, &mut buf), Err(wire::Error::Malformed));
    let mut reply = req.clone();
    reply[34] = 0;
    assert_eq!(echo_reply(&reply, ROUTER_MAC, &mut buf), Err(wire::Error::Malformed));
    let frag = v4_with(&req, |ip| ip.set_more_frags(true));
    assert_eq!(echo_reply(&frag, ROUTER_MAC, &mut buf), Err(wire::Error::Malformed));
    assert_eq!(echo_reply(&DNS_QUERY, ROUTER_MAC, &mut buf), Err(wire::Error::Malformed));
}

#[test]
fn echo_reply_keeps_qinq_tags() {
    let mut buf = [0u8; 200];
    let n = echo_reply(&QINQ_ECHO, ROUTER_MAC, &mut buf).unwrap();
    // Same tags (PCP included), from the router back to the sender.
    assert_eq!(&buf[12..22], &QINQ_ECHO[12..22]);
    assert_eq!(&buf[..6], &QINQ_ECHO[6..12]);
    let l2 = parse_l2(&buf[..n]).unwrap();
    assert_eq!(l2.vlans, [Some(100), Some(200)]);
    let ip = Ipv4Packet::new_checked(&buf[22..n]).unwrap();
    assert!(ip.verify_checksum());
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum() && icmp.msg_type() == Icmpv4Type::EchoReply);
}

#[test]
fn echo_reply_v6() {
    let req = icmpv6_echo();
    let mut buf = [0u8; 200];
    let n = echo_reply(&req, ROUTER_MAC, &mut buf).unwrap();
    assert_eq!(n, req.len());
    let ip = Ipv6Packet::new_checked(&buf[14..n]).unwrap();
    let (s, d) = (ip.src_addr(), ip.dst_addr());
    assert_eq!((s, d), ("2001:db8::2".parse().unwrap(), "2001:db8::1".parse().unwrap()));
    assert_eq!((ip.hop_limit(), ip.payload_len()), (64, 16));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&s, &d));
    assert_eq!(icmp.msg_type(), Icmpv6Type::EchoReply);
    assert_eq!((icmp.echo_ident(), icmp.echo_seq(), icmp.data()), (0x1234, 1, &b"abcdefgh"[..]));

    let mut mc = req.clone();
    mc[38..54].copy_from_slice(&"ff02::1".parse::<Ipv6Addr>().unwrap().octets());
    assert_eq!(echo_reply(&mc, ROUTER_MAC, &mut buf), Err(wire::Error::Malformed));
    let mut bad = req.clone();
    bad[60] ^= 0x40;
    assert_eq!(echo_reply(&bad, ROUTER_MAC, &mut buf), Err(wire::Error::Malformed));
    assert_eq!(echo_reply(&req, ROUTER_MAC, &mut buf[..69]), Err(wire::Error::BufferTooSmall));
}

mod never_panic {
    use super::*;
    use proptest::prelude::*;
    use wire::ndisc::{arp_reply, neighbor_advert};

    /// Every builder and check on `frame`: no panic, and any frame built parses back.
    fn all(frame: &[u8]) {
        let mut buf = [0u8; 1400];
        for err in [
            IcmpError::TimeExceeded,
            IcmpError::PacketTooBig { mtu: 1280 },
            IcmpError::Refused { code: 3, code6: 4 },
        ] {
            let _ = should_send_error(frame, err);
            for src in [IpAddr::V4(ROUTER_V4), IpAddr::V6(router_v6())] {
                if let Ok(n) = icmp_error(frame, err, src, ROUTER_MAC, &mut buf) {
                    assert!(parse_l2(&buf[..n]).is_ok());
                }
            }
        }
        let _ = echo_reply(frame, ROUTER_MAC, &mut buf);
        if let Ok(n) = wire::tcp_reset::tcp_reset(frame, 0, ROUTER_MAC, &mut buf) {
            assert!(parse_l2(&buf[..n]).is_ok());
        }
        let _ = arp_reply(frame, ROUTER_MAC, ROUTER_V4, &mut buf);
        let _ = neighbor_advert(frame, ROUTER_MAC, router_v6(), &mut buf);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn random_bytes(frame in proptest::collection::vec(any::<u8>(), 0..200)) {
            all(&frame);
        }

        #[test]
        fn mutated_fixtures(pick in 0usize..4, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
            let mut f = match pick {
                0 => DNS_QUERY.to_vec(),
                1 => icmpv4_echo(),
                2 => icmpv6_echo(),
                _ => QINQ_ECHO.to_vec(),
            };
            for (at, v) in flips {
                let i = at % f.len();
                f[i] = v;
            }
            f.truncate(cut % (f.len() + 1));
            all(&f);
        }
    }
}
