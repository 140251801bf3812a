//! ICMP messages a router originates: errors about packets it cannot forward (ICMPv4,
//! RFC 792 / RFC 1812 4.3; ICMPv6, RFC 4443) and echo replies to pings addressed to it.
//!
//! Every builder takes the received frame (Ethernet, optionally with one or two VLAN tags,
//! then the IP packet) and writes a complete reply frame into the start of the caller's
//! buffer, returning its length (at least [`MIN_FRAME_LEN`], zero-padded). The reply goes back
//! to the frame's Ethernet source (the previous hop) from `router_mac`, carrying the same VLAN
//! tags; a router whose return path differs should rewrite the destination MAC after a route
//! lookup. All checksums are filled.
//!
//! Before building an error call [`should_send_error`] (the RFC 1812 4.3.2.7 and RFC 4443
//! 2.4(e) rules), then a rate limiter (RFC 1812 4.3.2.8, RFC 4443 2.4(f)).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::build::MIN_FRAME_LEN;
use crate::{
    Error, EtherType, EthernetFrame, Icmpv4Packet, Icmpv4Type, Icmpv6Packet, Icmpv6Type,
    IpProtocol, Ipv4Packet, Ipv6Packet, L2Header, MacAddr, parse_l2,
};

/// Largest ICMPv4 error datagram (IP header included), RFC 1812 4.3.2.3.
pub const MAX_ICMPV4_ERROR_LEN: usize = 576;
/// Largest ICMPv6 error packet (IPv6 header included): the IPv6 minimum MTU, RFC 4443 2.4(c).
pub const MAX_ICMPV6_ERROR_LEN: usize = 1280;
/// TTL / hop limit of originated messages (the Linux default, RFC 1700's recommended 64).
pub const DEFAULT_TTL: u8 = 64;
/// DSCP/ECN byte of ICMPv4 errors: precedence 6, internetwork control (RFC 1812 4.3.2.5).
pub const ICMP_ERROR_TOS: u8 = 0xc0;

/// An error the router reports about a packet it received, in either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcmpError {
    /// TTL / hop limit reached zero in transit: ICMPv4 11/0, ICMPv6 3/0.
    TimeExceeded,
    /// No route to the destination: ICMPv4 3/0 (net unreachable), ICMPv6 1/0 (no route).
    NoRoute,
    /// The destination is on-link but does not answer address resolution: ICMPv4 3/1 (host
    /// unreachable), ICMPv6 1/3 (address unreachable).
    AddressUnreachable,
    /// The packet is larger than the next hop's MTU (and may not be fragmented): ICMPv4 3/4
    /// with the next-hop MTU (RFC 1191 4, clamped to 16 bits), ICMPv6 2 (RFC 4443 3.2).
    PacketTooBig {
        /// MTU of the next-hop link.
        mtu: u32,
    },
    /// A firewall rule refused the packet (pf's `block return-icmp`): destination unreachable
    /// with `code` for IPv4 (type 3, e.g. 3 port unreachable, 13 administratively
    /// prohibited) or `code6` for IPv6 (type 1, e.g. 4 port unreachable, 1 administratively
    /// prohibited).
    Refused { code: u8, code6: u8 },
}

impl IcmpError {
    /// ICMPv4 (type, code, rest-of-header word).
    fn v4(self) -> (Icmpv4Type, u8, u32) {
        use crate::icmpv4::{time_exceeded, unreachable};
        match self {
            IcmpError::TimeExceeded => (Icmpv4Type::TimeExceeded, time_exceeded::TTL, 0),
            IcmpError::NoRoute => (Icmpv4Type::DestUnreachable, unreachable::NET, 0),
            IcmpError::AddressUnreachable => (Icmpv4Type::DestUnreachable, unreachable::HOST, 0),
            IcmpError::PacketTooBig { mtu } => (
                Icmpv4Type::DestUnreachable,
                unreachable::FRAG_NEEDED,
                mtu.min(u32::from(u16::MAX)),
            ),
            IcmpError::Refused { code, .. } => (Icmpv4Type::DestUnreachable, code, 0),
        }
    }

    /// ICMPv6 (type, code, rest-of-header word).
    fn v6(self) -> (Icmpv6Type, u8, u32) {
        match self {
            IcmpError::TimeExceeded => (Icmpv6Type::TimeExceeded, 0, 0),
            IcmpError::NoRoute => (Icmpv6Type::DestUnreachable, 0, 0),
            IcmpError::AddressUnreachable => (Icmpv6Type::DestUnreachable, 3, 0),
            IcmpError::PacketTooBig { mtu } => (Icmpv6Type::PacketTooBig, 0, mtu),
            IcmpError::Refused { code6, .. } => (Icmpv6Type::DestUnreachable, code6, 0),
        }
    }
}

/// Whether an IPv4 source "defines a single host" (RFC 1812 4.3.2.7, 5.3.7): not 0.0.0.0,
/// not limited broadcast, not multicast, not loopback, not class E.
fn single_host_v4(a: Ipv4Addr) -> bool {
    !(a.is_unspecified()
        || a.is_broadcast()
        || a.is_multicast()
        || a.is_loopback()
        || a.octets()[0] >= 240)
}

/// Whether the router may send `err` about the received `frame`.
///
/// No ICMPv4 error (RFC 1812 4.3.2.7) about: an ICMP error (types 3, 4, 5, 11, 12; a message
/// too short to show its type counts as one); a datagram to an IP broadcast or multicast
/// address or sent as a link-layer broadcast or multicast; a non-initial fragment; a datagram
/// whose source is not a single host (0.0.0.0, 255.255.255.255, multicast, loopback, class E).
/// Directed broadcasts cannot be recognised without the interface's prefix: the caller checks.
///
/// No ICMPv6 error (RFC 4443 2.4(e)) about: an ICMPv6 error (types 0..=127) or Redirect; a
/// packet to a multicast address or sent as link-layer multicast/broadcast, except Packet
/// Too Big (e.3-e.5, so path MTU discovery works for multicast); a packet from the
/// unspecified, a multicast or the loopback address (e.6). Also, as for IPv4, no error about a
/// non-first fragment, whose upper-layer type cannot be checked, nor about a packet whose
/// extension-header chain does not parse.
///
/// Frames that are not IPv4/IPv6 or do not parse get `false`.
pub fn should_send_error(frame: &[u8], err: IcmpError) -> bool {
    let Ok(l2) = parse_l2(frame) else {
        return false;
    };
    let ll_group = frame[0] & 0x01 != 0; // I/G bit: multicast or broadcast (IEEE 802 9.2)
    let l3 = &frame[l2.l3_offset..];
    match l2.ethertype {
        EtherType::Ipv4 => {
            let Ok(ip) = Ipv4Packet::new_checked(l3) else {
                return false;
            };
            let dst = ip.dst_addr();
            if ll_group || dst.is_multicast() || dst.is_broadcast() {
                return false;
            }
            if !single_host_v4(ip.src_addr()) || ip.frag_offset() != 0 {
                return false;
            }
            if ip.protocol() == IpProtocol::Icmp {
                return match ip.payload().first() {
                    Some(&t) => !Icmpv4Type::from(t).is_error(),
                    None => false,
                };
            }
            true
        }
        EtherType::Ipv6 => {
            let Ok(ip) = Ipv6Packet::new_checked(l3) else {
                return false;
            };
            let src = ip.src_addr();
            if src.is_unspecified() || src.is_multicast() || src.is_loopback() {
                return false;
            }
            let ptb = matches!(err, IcmpError::PacketTooBig { .. });
            if (ll_group || ip.dst_addr().is_multicast()) && !ptb {
                return false;
            }
            match ip.upper_layer() {
                Ok((IpProtocol::Ipv6Frag, _)) | Err(_) => false,
                Ok((IpProtocol::Icmpv6, off)) => match l3.get(off) {
                    Some(&t) => {
                        let t = Icmpv6Type::from(t);
                        !t.is_error() && t != Icmpv6Type::Redirect
                    }
                    None => false,
                },
                Ok(_) => true,
            }
        }
        _ => false,
    }
}

/// The first `len` bytes of `buf` (at least [`MIN_FRAME_LEN`]), zeroed.
pub(crate) fn out_frame(buf: &mut [u8], len: usize) -> Result<&mut [u8], Error> {
    let len = len.max(MIN_FRAME_LEN);
    let frame = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    frame.fill(0);
    Ok(frame)
}

/// Writes the reply's Ethernet header: to the received frame's source, from `router_mac`, with
/// the received VLAN tags and `et` as the innermost EtherType. Returns the L3 offset.
pub(crate) fn reply_l2(
    out: &mut [u8],
    received: &[u8],
    l2: &L2Header,
    router_mac: MacAddr,
    et: EtherType,
) -> usize {
    let rx = EthernetFrame::new_unchecked(received);
    let mut eth = EthernetFrame::new_unchecked(&mut *out);
    eth.set_dst_addr(rx.src_addr());
    eth.set_src_addr(router_mac);
    let off = l2.l3_offset;
    out[12..off].copy_from_slice(&received[12..off]);
    out[off - 2..off].copy_from_slice(&u16::from(et).to_be_bytes());
    off
}

/// Writes a 20-byte IPv4 header over the start of `ip` (whose length is the total length)
/// and fills its checksum.
pub(crate) fn write_ipv4_header(
    ip: &mut [u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    tos: u8,
    ident: u16,
    dont_frag: bool,
) {
    let len = ip.len() as u16;
    let mut p = Ipv4Packet::new_unchecked(ip);
    p.set_version(4);
    p.set_header_len(20);
    p.set_dscp_ecn(tos);
    p.set_total_len(len);
    p.set_ident(ident);
    p.clear_flags();
    p.set_dont_frag(dont_frag);
    p.set_ttl(DEFAULT_TTL);
    p.set_protocol(IpProtocol::Icmp);
    p.set_src_addr(src);
    p.set_dst_addr(dst);
    p.fill_checksum();
}

/// Writes a 40-byte IPv6 header over the start of `ip` (whose length is 40 + payload).
pub(crate) fn write_ipv6_header(ip: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8) {
    let payload = (ip.len() - Ipv6Packet::<&[u8]>::HEADER_LEN) as u16;
    let mut p = Ipv6Packet::new_unchecked(ip);
    p.set_version(6);
    p.set_payload_len(payload);
    p.set_next_header(IpProtocol::Icmpv6);
    p.set_hop_limit(hop_limit);
    p.set_src_addr(src);
    p.set_dst_addr(dst);
}

/// Builds the frame reporting `err` about the received `frame`, from the router's address
/// `src` (the address of the interface the error leaves through, RFC 1812 4.3.2.4 and RFC 4443
/// 2.2) and `router_mac`, into `buf`; returns its length.
///
/// ICMPv4: quotes the received IP header and as much of its data as keeps the error datagram
/// within 576 bytes (RFC 1812 4.3.2.3), TOS 0xc0 (4.3.2.5), TTL 64, DF set (at most 576 bytes,
/// so RFC 6864 4.1 lets the ID be 0). ICMPv6: quotes as much of the packet as keeps the error
/// within 1280 bytes (RFC 4443 2.4(c)), hop limit 64. Ethernet padding is never quoted.
///
/// Errors: `Malformed` if the frame is not IPv4/IPv6 or `src` is of the other family, the
/// parse errors of the IP header, `BufferTooSmall` if `buf` cannot hold the frame (1322 bytes
/// always suffice).
pub fn icmp_error(
    frame: &[u8],
    err: IcmpError,
    src: IpAddr,
    router_mac: MacAddr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let l2 = parse_l2(frame)?;
    let l3 = &frame[l2.l3_offset..];
    match (l2.ethertype, src) {
        (EtherType::Ipv4, IpAddr::V4(src)) => {
            let rx = Ipv4Packet::new_checked(l3)?;
            let quote_len = usize::from(rx.total_len()).min(MAX_ICMPV4_ERROR_LEN - 20 - 8);
            let ip_len = 20 + 8 + quote_len;
            let len = l2.l3_offset + ip_len;
            let out = out_frame(buf, len)?;
            let off = reply_l2(out, frame, &l2, router_mac, EtherType::Ipv4);
            let ip = &mut out[off..off + ip_len];
            let (t, code, rest) = err.v4();
            let mut icmp = Icmpv4Packet::new_unchecked(&mut ip[20..]);
            icmp.set_msg_type(t);
            icmp.set_code(code);
            icmp.set_rest_of_header(rest);
            icmp.data_mut().copy_from_slice(&l3[..quote_len]);
            icmp.fill_checksum();
            write_ipv4_header(ip, src, rx.src_addr(), ICMP_ERROR_TOS, 0, true);
            Ok(len.max(MIN_FRAME_LEN))
        }
        (EtherType::Ipv6, IpAddr::V6(src)) => {
            let rx = Ipv6Packet::new_checked(l3)?;
            let whole = Ipv6Packet::<&[u8]>::HEADER_LEN + usize::from(rx.payload_len());
            let quote_len = whole.min(MAX_ICMPV6_ERROR_LEN - 40 - 8);
            let ip_len = 40 + 8 + quote_len;
            let len = l2.l3_offset + ip_len;
            let out = out_frame(buf, len)?;
            let off = reply_l2(out, frame, &l2, router_mac, EtherType::Ipv6);
            let ip = &mut out[off..off + ip_len];
            let dst = rx.src_addr();
            let (t, code, rest) = err.v6();
            let mut icmp = Icmpv6Packet::new_unchecked(&mut ip[40..]);
            icmp.set_msg_type(t);
            icmp.set_code(code);
            icmp.set_rest_of_header(rest);
            icmp.data_mut().copy_from_slice(&l3[..quote_len]);
            icmp.fill_checksum(&src, &dst);
            write_ipv6_header(ip, src, dst, DEFAULT_TTL);
            Ok(len.max(MIN_FRAME_LEN))
        }
        _ => Err(Error::Malformed),
    }
}

/// Builds the echo reply to the ICMPv4 or ICMPv6 echo request in `frame` (addressed to the
/// router): addresses swapped (the reply comes from the address the request was sent to),
/// identifier, sequence number and data kept, type 0 / 129, TTL / hop limit 64, checksums
/// recomputed. IPv4 options and IPv6 extension headers of the request are not echoed; the
/// IPv4 TOS byte and identification are kept.
///
/// Errors: `Malformed` if the frame is not an echo request, its checksum is wrong (RFC 1122
/// 3.2.2: discard), it was sent to a multicast or broadcast address (choosing a unicast source
/// for that reply, RFC 4443 4.2, is left to the caller), or it is an IPv4 or IPv6 fragment
/// (a reply needs the whole request: reassembly is not done here); the parse errors;
/// `BufferTooSmall`.
pub fn echo_reply(frame: &[u8], router_mac: MacAddr, buf: &mut [u8]) -> Result<usize, Error> {
    let l2 = parse_l2(frame)?;
    let l3 = &frame[l2.l3_offset..];
    match l2.ethertype {
        EtherType::Ipv4 => {
            let rx = Ipv4Packet::new_checked(l3)?;
            let (src, dst) = (rx.src_addr(), rx.dst_addr());
            if rx.protocol() != IpProtocol::Icmp
                || rx.is_fragment()
                || dst.is_multicast()
                || dst.is_broadcast()
            {
                return Err(Error::Malformed);
            }
            let req = Icmpv4Packet::new_checked(rx.payload())?;
            if req.msg_type() != Icmpv4Type::EchoRequest || !req.verify_checksum() {
                return Err(Error::Malformed);
            }
            let icmp_len = rx.payload().len();
            let ip_len = 20 + icmp_len;
            let len = l2.l3_offset + ip_len;
            let out = out_frame(buf, len)?;
            let off = reply_l2(out, frame, &l2, router_mac, EtherType::Ipv4);
            let ip = &mut out[off..off + ip_len];
            ip[20..].copy_from_slice(rx.payload());
            let mut icmp = Icmpv4Packet::new_unchecked(&mut ip[20..]);
            icmp.set_msg_type(Icmpv4Type::EchoReply);
            icmp.set_code(0);
            icmp.fill_checksum();
            write_ipv4_header(ip, dst, src, rx.dscp_ecn(), rx.ident(), rx.dont_frag());
            Ok(len.max(MIN_FRAME_LEN))
        }
        EtherType::Ipv6 => {
            let rx = Ipv6Packet::new_checked(l3)?;
            let (src, dst) = (rx.src_addr(), rx.dst_addr());
            if dst.is_multicast() || dst.is_unspecified() {
                return Err(Error::Malformed);
            }
            let (IpProtocol::Icmpv6, off) = rx.upper_layer()? else {
                return Err(Error::Malformed);
            };
            let end = Ipv6Packet::<&[u8]>::HEADER_LEN + usize::from(rx.payload_len());
            let req = Icmpv6Packet::new_checked(&l3[off..end])?;
            if req.msg_type() != Icmpv6Type::EchoRequest || !req.verify_checksum(&src, &dst) {
                return Err(Error::Malformed);
            }
            let body = &l3[off..end];
            let ip_len = 40 + body.len();
            if ip_len - 40 > usize::from(u16::MAX) {
                return Err(Error::BadLength);
            }
            let len = l2.l3_offset + ip_len;
            let out = out_frame(buf, len)?;
            let l3_off = reply_l2(out, frame, &l2, router_mac, EtherType::Ipv6);
            let ip = &mut out[l3_off..l3_off + ip_len];
            ip[40..].copy_from_slice(body);
            let mut icmp = Icmpv6Packet::new_unchecked(&mut ip[40..]);
            icmp.set_msg_type(Icmpv6Type::EchoReply);
            icmp.set_code(0);
            icmp.fill_checksum(&dst, &src);
            write_ipv6_header(ip, dst, src, DEFAULT_TTL);
            Ok(len.max(MIN_FRAME_LEN))
        }
        _ => Err(Error::Malformed),
    }
}
