//! Frame builders for the packet generator and tests. Each writes a complete
//! Ethernet frame (no FCS) with valid checksums into the start of the
//! caller's buffer and returns its length. Payload and padding bytes are zero.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{
    ArpOperation, ArpPacket, Error, EtherType, EthernetFrame, Icmpv4Packet, Icmpv4Type,
    Icmpv6Packet, Icmpv6Type, IpProtocol, Ipv4Packet, Ipv6Packet, MacAddr, UdpPacket, VlanHeader,
};

/// Minimum Ethernet frame length without FCS (IEEE 802.3 clause 4.4.2:
/// 64 bytes minimum including the 4-byte FCS).
pub const MIN_FRAME_LEN: usize = 60;

const ETH: usize = 14;
const VLAN: usize = 4;
const UDP: usize = 8;

/// Addresses and ports of a UDP flow. `src` and `dst` must be the same family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpFlow {
    /// Ethernet source.
    pub src_mac: MacAddr,
    /// Ethernet destination.
    pub dst_mac: MacAddr,
    /// IP source.
    pub src: IpAddr,
    /// IP destination.
    pub dst: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
}

/// Writes the Ethernet header (and the 802.1Q tag) and returns the L3 offset.
fn write_l2(
    frame: &mut [u8],
    src: MacAddr,
    dst: MacAddr,
    vid: Option<u16>,
    et: EtherType,
) -> usize {
    let mut eth = EthernetFrame::new_unchecked(&mut *frame);
    eth.set_dst_addr(dst);
    eth.set_src_addr(src);
    match vid {
        None => {
            eth.set_ethertype(et);
            ETH
        }
        Some(vid) => {
            eth.set_ethertype(EtherType::Vlan);
            let mut tag = VlanHeader::new_unchecked(&mut frame[ETH..]);
            tag.set_vid(vid);
            tag.set_inner_ethertype(et);
            ETH + VLAN
        }
    }
}

/// Zero `len` bytes of `buf` (at least `MIN_FRAME_LEN`) and return them.
fn frame_buf(buf: &mut [u8], len: usize) -> Result<(&mut [u8], usize), Error> {
    let len = len.max(MIN_FRAME_LEN);
    let frame = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    frame.fill(0);
    Ok((frame, len))
}

fn write_ipv4(ip: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, proto: IpProtocol) {
    let len = ip.len();
    let mut p = Ipv4Packet::new_unchecked(ip);
    p.set_version(4);
    p.set_header_len(20);
    p.set_total_len(len as u16);
    p.set_ttl(ttl);
    p.set_protocol(proto);
    p.set_src_addr(src);
    p.set_dst_addr(dst);
    p.fill_checksum();
}

fn write_ipv6(ip: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, nh: IpProtocol) {
    let len = ip.len();
    let mut p = Ipv6Packet::new_unchecked(ip);
    p.set_version(6);
    p.set_payload_len((len - Ipv6Packet::<&[u8]>::HEADER_LEN) as u16);
    p.set_next_header(nh);
    p.set_hop_limit(hop_limit);
    p.set_src_addr(src);
    p.set_dst_addr(dst);
}

fn write_udp(
    flow: &UdpFlow,
    vid: Option<u16>,
    ip_len: usize,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let (iph, et) = match (flow.src, flow.dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => (20, EtherType::Ipv4),
        (IpAddr::V6(_), IpAddr::V6(_)) => (40, EtherType::Ipv6),
        _ => return Err(Error::Malformed),
    };
    let ip_len = ip_len.max(iph + UDP);
    let udp_len = ip_len - iph;
    if udp_len > usize::from(u16::MAX) || (iph == 20 && ip_len > usize::from(u16::MAX)) {
        return Err(Error::BadLength);
    }
    let l2 = ETH + if vid.is_some() { VLAN } else { 0 };
    let (frame, len) = frame_buf(buf, l2 + ip_len)?;
    let l3 = write_l2(frame, flow.src_mac, flow.dst_mac, vid, et);
    let ip = &mut frame[l3..l3 + ip_len];
    let mut u = UdpPacket::new_unchecked(&mut ip[iph..]);
    u.set_src_port(flow.src_port);
    u.set_dst_port(flow.dst_port);
    u.set_len(udp_len as u16);
    match (flow.src, flow.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            u.fill_checksum_v4(&s, &d);
            write_ipv4(ip, s, d, flow.ttl, IpProtocol::Udp);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            u.fill_checksum_v6(&s, &d);
            write_ipv6(ip, s, d, flow.ttl, IpProtocol::Udp);
        }
        _ => unreachable!("families checked above"),
    }
    Ok(len)
}

/// A UDP frame of `frame_len` bytes (Ethernet header included, FCS
/// excluded). Lengths below 60 are raised to 60 (18 bytes of UDP payload for
/// IPv4); a length too small for the headers is raised to the minimum that
/// fits them (62 for IPv6). Returns the actual length.
///
/// Errors: `Malformed` if the address families differ, `BadLength` if the
/// IP/UDP length fields would overflow, `BufferTooSmall` if `buf` is short.
pub fn udp_frame(flow: &UdpFlow, frame_len: usize, buf: &mut [u8]) -> Result<usize, Error> {
    write_udp(flow, None, frame_len.max(MIN_FRAME_LEN) - ETH, buf)
}

/// Like [`udp_frame`] with an 802.1Q tag (VID `vid & 0xfff`, PCP 0) after
/// the source address; `frame_len` includes the 4-byte tag.
pub fn udp_frame_vlan(
    flow: &UdpFlow,
    vid: u16,
    frame_len: usize,
    buf: &mut [u8],
) -> Result<usize, Error> {
    write_udp(flow, Some(vid), frame_len.max(MIN_FRAME_LEN) - ETH - VLAN, buf)
}

/// A UDP frame whose IP packet (header included) is `ip_len` bytes, for
/// IMIX-style size mixes; raised to fit the headers, and the Ethernet frame
/// is zero-padded to 60 bytes (the padding is outside the IP length).
pub fn udp_frame_ip_len(flow: &UdpFlow, ip_len: usize, buf: &mut [u8]) -> Result<usize, Error> {
    write_udp(flow, None, ip_len, buf)
}

/// An ICMPv4 echo request from `flow.src` to `flow.dst` (ports ignored) with
/// the given identifier, sequence number and data. Padded to 60 bytes.
pub fn icmpv4_echo_frame(
    flow: &UdpFlow,
    ident: u16,
    seq: u16,
    data: &[u8],
    buf: &mut [u8],
) -> Result<usize, Error> {
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (flow.src, flow.dst) else {
        return Err(Error::Malformed);
    };
    let ip_len = 20 + 8 + data.len();
    if ip_len > usize::from(u16::MAX) {
        return Err(Error::BadLength);
    }
    let (frame, len) = frame_buf(buf, ETH + ip_len)?;
    write_l2(frame, flow.src_mac, flow.dst_mac, None, EtherType::Ipv4);
    let ip = &mut frame[ETH..ETH + ip_len];
    let mut icmp = Icmpv4Packet::new_unchecked(&mut ip[20..]);
    icmp.set_msg_type(Icmpv4Type::EchoRequest);
    icmp.set_echo_ident(ident);
    icmp.set_echo_seq(seq);
    icmp.data_mut().copy_from_slice(data);
    icmp.fill_checksum();
    write_ipv4(ip, src, dst, flow.ttl, IpProtocol::Icmp);
    Ok(len)
}

/// An ICMPv6 echo request from `flow.src` to `flow.dst` (ports ignored).
pub fn icmpv6_echo_frame(
    flow: &UdpFlow,
    ident: u16,
    seq: u16,
    data: &[u8],
    buf: &mut [u8],
) -> Result<usize, Error> {
    let (IpAddr::V6(src), IpAddr::V6(dst)) = (flow.src, flow.dst) else {
        return Err(Error::Malformed);
    };
    let ip_len = 40 + 8 + data.len();
    if ip_len - 40 > usize::from(u16::MAX) {
        return Err(Error::BadLength);
    }
    let (frame, len) = frame_buf(buf, ETH + ip_len)?;
    write_l2(frame, flow.src_mac, flow.dst_mac, None, EtherType::Ipv6);
    let ip = &mut frame[ETH..ETH + ip_len];
    let mut icmp = Icmpv6Packet::new_unchecked(&mut ip[40..]);
    icmp.set_msg_type(Icmpv6Type::EchoRequest);
    icmp.set_echo_ident(ident);
    icmp.set_echo_seq(seq);
    icmp.data_mut().copy_from_slice(data);
    icmp.fill_checksum(&src, &dst);
    write_ipv6(ip, src, dst, flow.ttl, IpProtocol::Icmpv6);
    Ok(len)
}

/// An ARP request (to broadcast, target MAC zero) or reply (to
/// `target_mac`), padded to 60 bytes.
pub fn arp_frame(
    op: ArpOperation,
    sender_mac: MacAddr,
    sender_ip: Ipv4Addr,
    target_mac: MacAddr,
    target_ip: Ipv4Addr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let (frame, len) = frame_buf(buf, ETH + ArpPacket::<&[u8]>::LEN)?;
    let (dst, tha) = match op {
        ArpOperation::Request => (MacAddr::BROADCAST, MacAddr::ZERO),
        _ => (target_mac, target_mac),
    };
    write_l2(frame, sender_mac, dst, None, EtherType::Arp);
    let mut arp = ArpPacket::new_unchecked(&mut frame[ETH..]);
    arp.init_ethernet_ipv4();
    arp.set_operation(op);
    arp.set_sender_hw_addr(sender_mac);
    arp.set_sender_proto_addr(sender_ip);
    arp.set_target_hw_addr(tha);
    arp.set_target_proto_addr(target_ip);
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_l2;

    fn flow4() -> UdpFlow {
        UdpFlow {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
            src_port: 1234,
            dst_port: 5678,
            ttl: 64,
        }
    }

    fn flow6() -> UdpFlow {
        UdpFlow {
            src: IpAddr::V6("2001:db8::1".parse().unwrap()),
            dst: IpAddr::V6("2001:db8:1::1".parse().unwrap()),
            ..flow4()
        }
    }

    /// Parse a built frame completely and check every checksum.
    fn check_udp(frame: &[u8], flow: &UdpFlow) -> (usize, usize) {
        let l2 = parse_l2(frame).unwrap();
        let l3 = &frame[l2.l3_offset..];
        let udp_payload_len = match (flow.src, flow.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let ip = Ipv4Packet::new_checked(l3).unwrap();
                assert!(ip.verify_checksum());
                assert_eq!((ip.src_addr(), ip.dst_addr(), ip.ttl()), (s, d, flow.ttl));
                let u = UdpPacket::new_checked(ip.payload()).unwrap();
                assert!(u.verify_checksum_v4(&s, &d) && u.checksum() != 0);
                assert_eq!((u.src_port(), u.dst_port()), (flow.src_port, flow.dst_port));
                assert!(u.payload().iter().all(|&b| b == 0));
                u.payload().len()
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let ip = Ipv6Packet::new_checked(l3).unwrap();
                assert_eq!(ip.upper_layer(), Ok((IpProtocol::Udp, 40)));
                assert_eq!(ip.hop_limit(), flow.ttl);
                let u = UdpPacket::new_checked(ip.payload()).unwrap();
                assert!(u.verify_checksum_v6(&s, &d));
                u.payload().len()
            }
            _ => unreachable!(),
        };
        (l2.l3_offset, udp_payload_len)
    }

    #[test]
    fn udp_sizes() {
        let mut buf = [0xaau8; 2000];
        let f = flow4();
        assert_eq!(udp_frame(&f, 60, &mut buf), Ok(60));
        assert_eq!(check_udp(&buf[..60], &f), (14, 18));
        assert_eq!(udp_frame(&f, 0, &mut buf), Ok(60));
        assert_eq!(udp_frame(&f, 1514, &mut buf), Ok(1514));
        assert_eq!(check_udp(&buf[..1514], &f), (14, 1472));
        let f6 = flow6();
        assert_eq!(udp_frame(&f6, 60, &mut buf), Ok(62));
        assert_eq!(check_udp(&buf[..62], &f6), (14, 0));
        assert_eq!(udp_frame(&f6, 1514, &mut buf), Ok(1514));
        assert_eq!(check_udp(&buf[..1514], &f6), (14, 1452));
    }

    #[test]
    fn udp_ip_len_and_vlan() {
        let mut buf = [0x55u8; 1600];
        let f = flow4();
        // IMIX small packet: 28-byte IP (no UDP payload), padded to 60.
        assert_eq!(udp_frame_ip_len(&f, 28, &mut buf), Ok(60));
        assert_eq!(check_udp(&buf[..60], &f), (14, 0));
        assert!(buf[42..60].iter().all(|&b| b == 0));
        assert_eq!(udp_frame_ip_len(&f, 576, &mut buf), Ok(590));
        assert_eq!(udp_frame_ip_len(&f, 1, &mut buf), Ok(60));
        let n = udp_frame_vlan(&f, 0x123, 64, &mut buf).unwrap();
        assert_eq!(n, 64);
        let l2 = parse_l2(&buf[..n]).unwrap();
        assert_eq!(l2.vlans, [Some(0x123), None]);
        assert_eq!(check_udp(&buf[..n], &f), (18, 18));
        assert_eq!(udp_frame_vlan(&flow6(), 7, 0, &mut buf), Ok(66));
    }

    #[test]
    fn udp_errors() {
        let mut buf = [0u8; 100];
        assert_eq!(udp_frame(&flow4(), 101, &mut buf), Err(Error::BufferTooSmall));
        assert_eq!(udp_frame(&flow4(), 0, &mut buf[..59]), Err(Error::BufferTooSmall));
        let mixed = UdpFlow { dst: flow6().dst, ..flow4() };
        assert_eq!(udp_frame(&mixed, 60, &mut buf), Err(Error::Malformed));
        let mut big = vec![0u8; 70_000];
        assert_eq!(udp_frame_ip_len(&flow4(), 65_536, &mut big), Err(Error::BadLength));
        assert_eq!(udp_frame_ip_len(&flow6(), 65_575, &mut big), Ok(65_589));
        assert_eq!(udp_frame_ip_len(&flow6(), 65_576, &mut big), Err(Error::BadLength));
    }

    #[test]
    fn echo_and_arp() {
        let mut buf = [0u8; 200];
        let n = icmpv4_echo_frame(&flow4(), 9, 10, b"ping", &mut buf).unwrap();
        assert_eq!(n, 60);
        let ip = Ipv4Packet::new_checked(&buf[14..n]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len(), 32);
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum());
        assert_eq!((icmp.echo_ident(), icmp.echo_seq(), icmp.data()), (9, 10, &b"ping"[..]));
        assert_eq!(icmpv4_echo_frame(&flow6(), 0, 0, &[], &mut buf), Err(Error::Malformed));

        let n = icmpv6_echo_frame(&flow6(), 1, 2, b"pong", &mut buf).unwrap();
        assert_eq!(n, 14 + 40 + 12);
        let ip = Ipv6Packet::new_checked(&buf[14..n]).unwrap();
        let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
        assert_eq!(icmp.msg_type(), Icmpv6Type::EchoRequest);
        assert_eq!(icmpv6_echo_frame(&flow4(), 0, 0, &[], &mut buf), Err(Error::Malformed));

        let n = arp_frame(
            ArpOperation::Request,
            MacAddr([2, 0, 0, 0, 0, 1]),
            Ipv4Addr::new(10, 0, 0, 1),
            MacAddr::BROADCAST,
            Ipv4Addr::new(10, 0, 0, 2),
            &mut buf,
        )
        .unwrap();
        assert_eq!(n, 60);
        let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
        assert!(eth.dst_addr().is_broadcast());
        let arp = ArpPacket::new_checked(eth.payload()).unwrap();
        assert_eq!(arp.operation(), ArpOperation::Request);
        assert_eq!(arp.target_hw_addr(), MacAddr::ZERO);
        assert_eq!(arp.target_proto_addr(), Ipv4Addr::new(10, 0, 0, 2));
    }
}
