//! Fixtures captured on Linux 6.18 from a packet socket (PACKET_VNET_HDR) on a veth whose
//! peer had the default offloads (tx checksumming, TSO, USO on): the `virtio_net_hdr` and the
//! frame, byte for byte. Checked with `wire`'s views.

use wire::{EthernetFrame, Ipv4Packet, Ipv6Packet, TcpFlags, TcpPacket, UdpPacket};

use super::*;

pub(crate) fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn vnet(b: &str) -> VnetHdr {
    VnetHdr::parse(hex(b).as_slice().try_into().unwrap())
}

/// A SYN from 198.18.0.2:33482 to 198.18.0.1:5001, checksum partial (field = pseudo sum).
pub(crate) const SYN_VNET: &str = "01000000000022001000";
pub(crate) const SYN: &str = "020000000b01020000000a0108004500003cde4740004006d04cc6120002c612000182ca1389df3ad5c400000000a002faf08c560000020405b40402080a1b680b34000000000103030a";

/// The headers of a TSO frame of the same connection (gso_size 1448, PSH|ACK).
pub(crate) const TSO_VNET: &str = "01014200a80522001000";
const TSO_HDRS: &str = "020000000b01020000000a01080045001c7cde4940004006b40ac6120002c612000182ca1389df3ad5c5bd8787dc8018003fa89600000101080a1b680b380e884b33";

/// The headers of a UDP_SEGMENT send of 2500 bytes (gso_size 1000) from port 40000 to 9999;
/// the payload was `0..250` ten times.
const USO_VNET: &str = "01052a00e80322000600";
const USO_HDRS: &str =
    "020000000b01020000000a010800450009e06cd0000040117815c6120002c61200019c40270f09cc9605";

fn ipv4_tcp(frame: &[u8]) -> (Ipv4Packet<&[u8]>, TcpPacket<&[u8]>) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!(u16::from(eth.ethertype()), 0x0800);
    assert!(ip.verify_checksum(), "IPv4 header checksum");
    assert_eq!(usize::from(ip.total_len()), frame.len() - 14);
    let tcp = TcpPacket::new_checked(&frame[14 + ip.header_len()..]).unwrap();
    (ip, tcp)
}

#[test]
fn a_partial_syn_is_completed_from_its_vnet_header() {
    let h = vnet(SYN_VNET);
    assert!(h.needs_csum() && !h.is_gso());
    let mut f = hex(SYN);
    let (ip, tcp) = ipv4_tcp(&f);
    assert!(!tcp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()), "the fixture is partial");
    complete_at(&mut f, usize::from(h.csum_start), usize::from(h.csum_offset)).unwrap();
    let (ip, tcp) = ipv4_tcp(&f);
    assert!(tcp.flags().contains(TcpFlags::SYN));
    assert!(tcp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()));
}

#[test]
fn the_xdp_rule_completes_partial_and_keeps_complete_checksums() {
    let mut f = hex(SYN);
    assert!(complete_if_partial(&mut f));
    let done = f.clone();
    let (ip, tcp) = ipv4_tcp(&f);
    assert!(tcp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()));
    // A complete checksum is not the pseudo sum: left alone.
    assert!(!complete_if_partial(&mut f));
    assert_eq!(f, done);
    // A corrupt checksum other than the pseudo sum: left alone, the receiver drops it.
    f[14 + 20 + 16] ^= 0x40;
    let corrupt = f.clone();
    assert!(!complete_if_partial(&mut f));
    assert_eq!(f, corrupt);
    // A fragment, a short header, ARP, a cut frame: nothing to do, no panic.
    let mut frag = hex(SYN);
    frag[14 + 6] |= 0x20;
    assert!(!complete_if_partial(&mut frag));
    for n in 0..hex(SYN).len() {
        let mut cut = hex(SYN)[..n].to_vec();
        assert!(!complete_if_partial(&mut cut));
    }
}

#[test]
fn the_xdp_rule_handles_udp_ipv6_and_vlan_tags() {
    // The first UDP segment, partial again: field = pseudo sum of its own length.
    let segs = uso_segments();
    let mut f = segs[0].clone();
    let (src, dst) = ([198, 18, 0, 2].into(), [198, 18, 0, 1].into());
    let pseudo = wire::checksum::pseudo_header_v4(&src, &dst, 17, 1008);
    f[40..42].copy_from_slice(&wire::checksum::fold(u64::from(pseudo)).to_be_bytes());
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    tagged.extend_from_slice(&f[12..]);
    assert!(complete_if_partial(&mut f));
    assert_eq!(f, segs[0]);
    assert!(complete_if_partial(&mut tagged));
    assert_eq!(&tagged[16..], &segs[0][12..]);
    // IPv6 TCP.
    let mut v6 = tcp6_frame(b"hello", 0x18);
    let (src, dst) = (
        Ipv6Packet::new_unchecked(&v6[14..]).src_addr(),
        Ipv6Packet::new_unchecked(&v6[14..]).dst_addr(),
    );
    let pseudo = wire::checksum::pseudo_header_v6(&src, &dst, 6, 25);
    v6[54 + 16..54 + 18].copy_from_slice(&wire::checksum::fold(u64::from(pseudo)).to_be_bytes());
    assert!(complete_if_partial(&mut v6));
    assert!(TcpPacket::new_checked(&v6[54..]).unwrap().verify_checksum_v6(&src, &dst));
}

/// The TSO fixture's headers with FIN|PSH|ACK|CWR and 2 * 1448 + 100 payload bytes (the
/// sender's byte pattern), IP total length and header checksum set to match.
pub(crate) fn tso_fin_frame() -> Vec<u8> {
    let mut f = hex(TSO_HDRS);
    let payload = 2 * 1448 + 100;
    f.extend((0..payload).map(|i| (i * 7 + 3) as u8));
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[14 + 20 + 13] = 0x80 | 0x19;
    f
}

#[test]
fn a_tso_frame_with_fin_becomes_three_segments() {
    let f = tso_fin_frame();
    let plan = GsoPlan::new(&f, &vnet(TSO_VNET), None, 1984).unwrap();
    assert_eq!(plan.segments(), 3);
    let (ip0, tcp0) = ipv4_tcp(&f);
    let (seq0, id0) = (tcp0.seq_number(), ip0.ident());
    let mut payload = Vec::new();
    for i in 0..3 {
        let mut out = vec![0u8; plan.segment_len(i)];
        plan.write(&f, i, &mut out).unwrap();
        let (ip, tcp) = ipv4_tcp(&out);
        assert!(tcp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()), "segment {i}");
        assert_eq!(tcp.payload().len(), if i < 2 { 1448 } else { 100 });
        assert_eq!(tcp.seq_number(), seq0.wrapping_add(1448 * i as u32));
        assert_eq!(ip.ident(), id0.wrapping_add(i as u16));
        assert_eq!(tcp.options(), tcp0.options());
        let flags = tcp.flags();
        assert!(flags.contains(TcpFlags::ACK));
        assert_eq!(flags.contains(TcpFlags::FIN), i == 2, "FIN only on the last");
        assert_eq!(flags.contains(TcpFlags::PSH), i == 2, "PSH only on the last");
        assert_eq!(flags.contains(TcpFlags::CWR), i == 0, "CWR only on the first");
        payload.extend_from_slice(tcp.payload());
    }
    assert_eq!(payload, tcp0.payload());
}

#[test]
fn tcp_segments_shrink_to_fit_and_carry_the_vlan_tag_back() {
    let f = tso_fin_frame();
    let plan = GsoPlan::new(&f, &vnet(TSO_VNET), Some((0x8100, 20)), 1000).unwrap();
    assert_eq!(plan.segments(), (2 * 1448 + 100usize).div_ceil(1000 - 66 - 4));
    let mut out = vec![0u8; plan.segment_len(0)];
    assert_eq!(out.len(), 1000);
    plan.write(&f, 0, &mut out).unwrap();
    assert_eq!(&out[12..16], &[0x81, 0x00, 0x00, 20]);
    let untagged: Vec<u8> = out[..12].iter().chain(&out[16..]).copied().collect();
    let (ip, tcp) = ipv4_tcp(&untagged);
    assert!(tcp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()));
}

fn uso_segments() -> Vec<Vec<u8>> {
    let mut f = hex(USO_HDRS);
    f.extend((0..2500).map(|i| (i % 250) as u8));
    let plan = GsoPlan::new(&f, &vnet(USO_VNET), None, 1984).unwrap();
    (0..plan.segments())
        .map(|i| {
            let mut out = vec![0u8; plan.segment_len(i)];
            plan.write(&f, i, &mut out).unwrap();
            out
        })
        .collect()
}

#[test]
fn a_udp_gso_frame_becomes_datagrams_of_gso_size() {
    let segs = uso_segments();
    assert_eq!(segs.len(), 3);
    let mut data = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        let ip = Ipv4Packet::new_checked(&s[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.ident(), 0x6cd0 + i as u16);
        let udp = UdpPacket::new_checked(&s[34..]).unwrap();
        assert!(udp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()), "datagram {i}");
        assert_eq!(usize::from(udp.len()), 8 + if i < 2 { 1000 } else { 500 });
        assert_eq!((udp.src_port(), udp.dst_port()), (40000, 9999));
        data.extend_from_slice(udp.payload());
    }
    assert_eq!(data, (0..2500).map(|i| (i % 250) as u8).collect::<Vec<_>>());
    // A datagram cannot be cut: gso_size beyond the frame buffer is refused.
    let mut f = hex(USO_HDRS);
    f.extend((0..2500).map(|i| (i % 250) as u8));
    assert_eq!(GsoPlan::new(&f, &vnet(USO_VNET), None, 1000), Err(OffloadError::Unsupported));
}

/// Ethernet/IPv6/TCP from 2001:db8:a::2 to 2001:db8:b::2 with `payload` and `flags`.
fn tcp6_frame(payload: &[u8], flags: u8) -> Vec<u8> {
    let mut f = hex("020000000b01020000000a0186dd");
    let len = (20 + payload.len()) as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[6, 64]);
    f.extend_from_slice(&hex("20010db8000a00000000000000000002"));
    f.extend_from_slice(&hex("20010db8000b00000000000000000002"));
    f.extend_from_slice(&hex("d43113890000100000002000500000ff00000000"));
    f[54 + 13] = flags;
    f.extend_from_slice(payload);
    f
}

#[test]
fn a_tcpv6_gso_frame_is_cut_too() {
    let payload: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();
    let f = tcp6_frame(&payload, 0x19);
    let h = VnetHdr {
        flags: flags::NEEDS_CSUM,
        gso_type: gso_type::TCPV6,
        gso_size: 1400,
        csum_start: 54,
        csum_offset: 16,
        hdr_len: 74,
    };
    let plan = GsoPlan::new(&f, &h, None, 1984).unwrap();
    assert_eq!(plan.segments(), 3);
    let mut got = Vec::new();
    for i in 0..3 {
        let mut out = vec![0u8; plan.segment_len(i)];
        plan.write(&f, i, &mut out).unwrap();
        let ip = Ipv6Packet::new_checked(&out[14..]).unwrap();
        assert_eq!(usize::from(ip.payload_len()), out.len() - 54);
        let tcp = TcpPacket::new_checked(&out[54..]).unwrap();
        assert!(tcp.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()));
        assert_eq!(tcp.flags().contains(TcpFlags::FIN), i == 2);
        got.extend_from_slice(tcp.payload());
    }
    assert_eq!(got, payload);
}

#[test]
fn bad_metadata_is_refused_never_a_panic() {
    let f = tso_fin_frame();
    let h = vnet(TSO_VNET);
    let bad = |h: VnetHdr| GsoPlan::new(&f, &h, None, 1984);
    assert_eq!(bad(VnetHdr { gso_size: 0, ..h }), Err(OffloadError::Malformed));
    assert_eq!(
        bad(VnetHdr { gso_type: gso_type::TCPV6, ..h }),
        Err(OffloadError::Malformed),
        "TCPv6 on an IPv4 frame"
    );
    assert_eq!(
        bad(VnetHdr { gso_type: gso_type::UDP_L4, ..h }),
        Err(OffloadError::Malformed),
        "UDP on a TCP frame"
    );
    assert_eq!(
        bad(VnetHdr { gso_type: gso_type::UDP, ..h }),
        Err(OffloadError::Unsupported),
        "UFO"
    );
    assert_eq!(bad(VnetHdr { gso_type: 2, ..h }), Err(OffloadError::Unsupported));
    assert!(bad(VnetHdr { gso_type: gso_type::TCPV4 | gso_type::ECN, ..h }).is_ok());
    // Every truncation of the frame: refused (IP length no longer matches), no panic.
    for n in 0..f.len() {
        assert!(GsoPlan::new(&f[..n], &h, None, 1984).is_err(), "cut at {n}");
    }
    // Writing with the wrong buffer or another frame: refused.
    let plan = GsoPlan::new(&f, &h, None, 1984).unwrap();
    assert!(plan.write(&f, 0, &mut [0u8; 10]).is_err());
    assert!(plan.write(&f[..100], 0, &mut vec![0u8; plan.segment_len(0)]).is_err());
    assert!(
        plan.write(&f, 3, &mut vec![0u8; plan.segment_len(3)]).is_err(),
        "past the last segment"
    );
    // Checksum positions outside the frame.
    let mut syn = hex(SYN);
    assert_eq!(complete_at(&mut syn, 34, 40), Err(OffloadError::Malformed));
    assert_eq!(complete_at(&mut syn, usize::MAX, 16), Err(OffloadError::Malformed));
    assert_eq!(complete_at(&mut syn, 200, 0), Err(OffloadError::Malformed));
}
