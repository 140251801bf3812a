//! The crate's promise: `new_checked` never panics, and after it succeeds no
//! getter or `payload()` panics, whatever the bytes. Random vectors plus
//! mutated real fixtures are thrown at every parser.

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wire::*;

fn eth(b: &[u8]) {
    let _ = parse_l2(b);
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
        if let Ok(v) = VlanHeader::new_checked(f.payload()) {
            let _ = (v.pcp(), v.dei(), v.vid(), v.inner_ethertype(), v.payload());
        }
    }
    if let Ok(v) = VlanHeader::new_checked(b) {
        let _ = (v.pcp(), v.dei(), v.vid(), v.inner_ethertype(), v.payload());
    }
}

fn arp(b: &[u8]) {
    if let Ok(a) = ArpPacket::new_checked(b) {
        let _ = (a.operation(), a.hardware_type(), a.protocol_type(), a.hardware_len());
        let _ = (a.protocol_len(), a.sender_hw_addr(), a.sender_proto_addr());
        let _ = (a.target_hw_addr(), a.target_proto_addr());
    }
}

fn ipv4(b: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (p.version(), p.header_len(), p.dscp_ecn(), p.dscp(), p.ecn(), p.total_len());
        let _ = (p.ident(), p.dont_frag(), p.more_frags(), p.frag_offset(), p.is_fragment());
        let _ = (p.ttl(), p.protocol(), p.checksum(), p.src_addr(), p.dst_addr());
        let _ = (p.dst_addr_u32(), p.src_addr_u32(), p.options(), p.header_bytes());
        let _ = (p.payload(), p.verify_checksum());
        assert!(p.payload().len() + p.header_len() == usize::from(p.total_len()));
        let mut v = b.to_vec();
        let mut m = Ipv4Packet::new_checked(&mut v[..]).unwrap();
        m.decrement_ttl();
        m.fill_checksum();
        let _ = (m.payload_mut().len(), m.options_mut().len());
        assert!(m.verify_checksum());
    }
}

fn ipv6(b: &[u8]) {
    if let Ok(p) = Ipv6Packet::new_checked(b) {
        let _ = (p.version(), p.traffic_class(), p.flow_label(), p.payload_len());
        let _ = (p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr());
        let _ = (p.dst_addr_u128(), p.payload());
        if let Ok((_, off)) = p.upper_layer() {
            assert!(off >= 40 && off <= 40 + usize::from(p.payload_len()));
        }
    }
}

fn icmpv4(b: &[u8]) {
    if let Ok(p) = Icmpv4Packet::new_checked(b) {
        let _ = (p.msg_type(), p.msg_type().is_error(), p.code(), p.checksum());
        let _ = (p.echo_ident(), p.echo_seq(), p.mtu(), p.pointer(), p.rest_of_header());
        let _ = (p.data(), p.verify_checksum());
    }
}

fn icmpv6(b: &[u8]) {
    if let Ok(p) = Icmpv6Packet::new_checked(b) {
        let _ = (p.msg_type(), p.code(), p.checksum(), p.echo_ident(), p.echo_seq());
        let _ = (p.mtu(), p.pointer(), p.data(), p.ndp_target_addr());
        let _ = p.verify_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::UNSPECIFIED);
    }
}

fn udp(b: &[u8]) {
    if let Ok(p) = UdpPacket::new_checked(b) {
        let _ = (p.src_port(), p.dst_port(), p.len(), p.is_empty(), p.checksum(), p.payload());
        let _ = p.verify_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::BROADCAST);
        let _ = p.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::UNSPECIFIED);
    }
}

fn tcp(b: &[u8]) {
    if let Ok(p) = TcpPacket::new_checked(b) {
        let _ = (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number(), p.header_len());
        let _ = (p.flags(), p.window_len(), p.checksum(), p.urgent(), p.options(), p.payload());
        let _ = (p.mss(), p.verify_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::BROADCAST));
        let _ = p.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::UNSPECIFIED);
    }
}

fn all(b: &[u8]) {
    eth(b);
    arp(b);
    ipv4(b);
    ipv6(b);
    icmpv4(b);
    icmpv6(b);
    udp(b);
    tcp(b);
    // Also feed each layer what a real decoder would.
    if let Ok(l2) = parse_l2(b) {
        let l3 = &b[l2.l3_offset..];
        arp(l3);
        if let Ok(p) = Ipv4Packet::new_checked(l3) {
            icmpv4(p.payload());
            udp(p.payload());
            tcp(p.payload());
        }
        if let Ok(p) = Ipv6Packet::new_checked(l3)
            && let Ok((_, off)) = p.upper_layer()
        {
            let end = 40 + usize::from(p.payload_len());
            let ul = &l3[off..end];
            icmpv6(ul);
            udp(ul);
            tcp(ul);
        }
    }
}

/// Real frames: a QinQ ICMP echo, an ARP request, IPv4/UDP DNS, IPv4/TCP SYN
/// with options, IPv6 with HBH + fragment + UDP.
fn fixtures() -> Vec<Vec<u8>> {
    let hex = |s: &str| -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    };
    vec![
        hex("ffffffffffff 020000000001 88a8 6064 8100 00c8 0800
             4500002c00004000400126cf0a0000010a000002 0800bf76004200070001020304050607
             08090a0b0c0d0e0f"),
        hex("ffffffffffff 00070daff454 0806 0001080006040001 00070daff454 18a6ac01
             000000000000 18a6ad9f 000000000000000000000000000000000000"),
        hex("001122334455 3c22fb123456 0800 450000391c46400040114cacc0a8010a08080808
             cf8400350025e2ecabcd01000001000000000000076578616d706c6503636f6d0000010001"),
        hex("001122334455 3c22fb123456 0800 4500003c3a2f40004006c0b10a0000015db8d822
             a8ca00505eed123400000000a002faf0bc9f0000020405b40402080a0a1b2c3d0000000001030307"),
        hex("001122334455 3c22fb123456 86dd 6000abcd001e004020010db8000000000000000000000001
             20010db8000000000000000000000002 2c00010400000000 11000001deadbeef
             13881770000e357268656c6c6f21"),
    ]
}

#[test]
fn fixtures_parse() {
    for f in fixtures() {
        assert!(parse_l2(&f).is_ok());
        all(&f);
    }
}

#[test]
fn every_prefix_of_every_fixture() {
    for f in fixtures() {
        for n in 0..=f.len() {
            all(&f[..n]);
            let l3 = &f[14.min(n)..n];
            all(l3);
        }
    }
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let fx = fixtures();
    (
        0..fx.len(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(move |(i, muts, cut, l3)| {
            let mut v = fx[i].clone();
            if l3 {
                let off = parse_l2(&v).map(|l| l.l3_offset).unwrap_or(14);
                v.drain(..off);
            }
            for (idx, byte) in muts {
                let j = idx.index(v.len());
                v[j] = byte;
            }
            let keep = cut.index(v.len() + 1);
            v.truncate(keep.max(v.len() - v.len().min(8)));
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        all(&b);
    }

    #[test]
    fn mutated_fixtures_never_panic(b in mutated()) {
        all(&b);
    }

    #[test]
    fn ip_version_nibble_forced(mut b in proptest::collection::vec(any::<u8>(), 20..200), v6 in any::<bool>()) {
        // Bias random data towards getting past the version check.
        b[0] = if v6 { 0x60 | (b[0] & 0x0f) } else { 0x40 | (b[0] & 0x0f) };
        all(&b);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn decrement_ttl_equals_full_recompute(mut b in proptest::collection::vec(any::<u8>(), 20..80), ihl in 5u8..=15) {
        let hl = usize::from(ihl) * 4;
        b.resize(b.len().max(hl), 0);
        b[0] = 0x40 | ihl;
        let total = b.len() as u16;
        b[2..4].copy_from_slice(&total.to_be_bytes());
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        let before = p.ttl();
        p.decrement_ttl();
        prop_assert_eq!(p.ttl(), before.wrapping_sub(1));
        let inc = p.checksum();
        p.fill_checksum();
        prop_assert_eq!(inc, p.checksum());
    }
}
