//! The TCP reset a firewall sends back for a segment it refuses (pf's `block return-rst`),
//! built as RFC 9293 3.10.7.1 ("Reset Generation", connection in a non-synchronized state:
//! the firewall never saw the connection) says:
//!
//! * the segment has ACK: `<SEQ=SEG.ACK><CTL=RST>`;
//! * otherwise: `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`, where SEG.LEN counts the data
//!   and one for each of SYN and FIN (3.3.1).
//!
//! The reset comes from the refused segment's destination (address and port) to its source,
//! as if the destination had answered: that is what the sender's TCP accepts. No reset
//! answers a reset (3.10.7.1: "an incoming segment containing a RST is discarded"), nor a
//! segment sent to a broadcast or multicast address (link-layer or IP), from a source that is
//! not a single host, or in fragments (SEG.LEN is the datagram's, which a fragment does not
//! show).

use core::net::Ipv4Addr;

use crate::icmp_reply::{DEFAULT_TTL, out_frame, reply_l2, write_ipv4_header, write_ipv6_header};
use crate::{
    Error, EtherType, IpProtocol, Ipv4Packet, Ipv6Packet, MacAddr, TcpFlags, TcpPacket, parse_l2,
};

/// Bytes of the reset's TCP header (no options, no data).
const TCP_LEN: usize = 20;

/// The reset's sequence number, acknowledgment number and flags for a segment with `seq`,
/// `ack`, `flags` and `data_len` bytes of data (RFC 9293 3.10.7.1); `None` for a reset.
pub fn reset_for(
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    data_len: u32,
) -> Option<(u32, u32, TcpFlags)> {
    if flags.0 & TcpFlags::RST.0 != 0 {
        return None;
    }
    if flags.0 & TcpFlags::ACK.0 != 0 {
        return Some((ack, 0, TcpFlags::RST));
    }
    let len = data_len
        + u32::from(flags.0 & TcpFlags::SYN.0 != 0)
        + u32::from(flags.0 & TcpFlags::FIN.0 != 0);
    Some((0, seq.wrapping_add(len), TcpFlags::RST | TcpFlags::ACK))
}

/// Whether an IPv4 source is a single host (RFC 1812 4.3.2.7's test, as for ICMP errors).
fn single_host_v4(a: Ipv4Addr) -> bool {
    !(a.is_unspecified()
        || a.is_broadcast()
        || a.is_multicast()
        || a.is_loopback()
        || a.octets()[0] >= 240)
}

/// Writes the 20-byte reset for `seg` into `out` (from `seg`'s destination port to its source
/// port, window 0); the caller fills the checksum. `data_len`: the segment's data bytes.
fn write_reset(out: &mut [u8], seg: &TcpPacket<&[u8]>, data_len: usize) -> Result<(), Error> {
    let (seq, ack, flags) =
        reset_for(seg.seq_number(), seg.ack_number(), seg.flags(), data_len as u32)
            .ok_or(Error::Malformed)?;
    let mut tcp = TcpPacket::new_unchecked(out);
    tcp.set_src_port(seg.dst_port());
    tcp.set_dst_port(seg.src_port());
    tcp.set_seq_number(seq);
    tcp.set_ack_number(ack);
    tcp.set_header_len(TCP_LEN);
    tcp.set_flags(flags);
    tcp.set_window_len(0);
    tcp.set_urgent(0);
    Ok(())
}

/// Builds the reset answering the TCP segment in `frame` (Ethernet, optionally VLAN-tagged,
/// then IPv4 or IPv6), into `buf`; returns the frame's length. The frame goes back to the
/// received frame's Ethernet source from `router_mac` with the same VLAN tags; its IP
/// header has TTL / hop limit `ttl` (0: 64), IPv4 DF set and identification 0 (RFC 6864
/// 4.1: an atomic datagram).
///
/// Errors: `Malformed` for what gets no reset (not TCP, a reset, a fragment, a broadcast or
/// multicast destination, a source that is not a single host); the parse errors;
/// `BufferTooSmall`.
pub fn tcp_reset(
    frame: &[u8],
    ttl: u8,
    router_mac: MacAddr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let ttl = if ttl == 0 { DEFAULT_TTL } else { ttl };
    let l2 = parse_l2(frame)?;
    if frame[0] & 0x01 != 0 {
        return Err(Error::Malformed); // link-layer multicast or broadcast (I/G bit)
    }
    let l3 = &frame[l2.l3_offset..];
    match l2.ethertype {
        EtherType::Ipv4 => {
            let rx = Ipv4Packet::new_checked(l3)?;
            let (src, dst) = (rx.src_addr(), rx.dst_addr());
            if rx.protocol() != IpProtocol::Tcp
                || rx.is_fragment()
                || dst.is_multicast()
                || dst.is_broadcast()
                || !single_host_v4(src)
            {
                return Err(Error::Malformed);
            }
            let seg = TcpPacket::new_checked(rx.payload())?;
            let data_len = rx.payload().len() - seg.header_len();
            let ip_len = 20 + TCP_LEN;
            let len = l2.l3_offset + ip_len;
            let out = out_frame(buf, len)?;
            let off = reply_l2(out, frame, &l2, router_mac, EtherType::Ipv4);
            let ip = &mut out[off..off + ip_len];
            write_reset(&mut ip[20..], &seg, data_len)?;
            TcpPacket::new_unchecked(&mut ip[20..]).fill_checksum_v4(&dst, &src);
            write_ipv4_header(ip, dst, src, 0, 0, true);
            let mut p = Ipv4Packet::new_unchecked(ip);
            p.set_protocol(IpProtocol::Tcp);
            p.set_ttl(ttl);
            p.fill_checksum();
            Ok(len.max(crate::build::MIN_FRAME_LEN))
        }
        EtherType::Ipv6 => {
            let rx = Ipv6Packet::new_checked(l3)?;
            let (src, dst) = (rx.src_addr(), rx.dst_addr());
            if dst.is_multicast()
                || dst.is_unspecified()
                || src.is_unspecified()
                || src.is_multicast()
                || src.is_loopback()
                || has_fragment_header(l3, &rx)
            {
                return Err(Error::Malformed);
            }
            let (IpProtocol::Tcp, at) = rx.upper_layer()? else {
                return Err(Error::Malformed);
            };
            let end = Ipv6Packet::<&[u8]>::HEADER_LEN + usize::from(rx.payload_len());
            let body = l3.get(at..end).ok_or(Error::Truncated)?;
            let seg = TcpPacket::new_checked(body)?;
            let data_len = body.len() - seg.header_len();
            let ip_len = 40 + TCP_LEN;
            let len = l2.l3_offset + ip_len;
            let out = out_frame(buf, len)?;
            let off = reply_l2(out, frame, &l2, router_mac, EtherType::Ipv6);
            let ip = &mut out[off..off + ip_len];
            write_reset(&mut ip[40..], &seg, data_len)?;
            TcpPacket::new_unchecked(&mut ip[40..]).fill_checksum_v6(&dst, &src);
            write_ipv6_header(ip, dst, src, ttl);
            Ipv6Packet::new_unchecked(ip).set_next_header(IpProtocol::Tcp);
            Ok(len.max(crate::build::MIN_FRAME_LEN))
        }
        _ => Err(Error::Malformed),
    }
}

/// Whether an IPv6 packet's extension headers include a Fragment header (RFC 8200 4.5):
/// walked as far as [`Ipv6Packet::upper_layer`] walks.
fn has_fragment_header(b: &[u8], ip: &Ipv6Packet<&[u8]>) -> bool {
    let mut nh = ip.next_header();
    let mut off = Ipv6Packet::<&[u8]>::HEADER_LEN;
    for _ in 0..=crate::ipv6::MAX_EXT_HEADERS {
        match nh {
            IpProtocol::Ipv6Frag => return true,
            IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                let Some(h) = b.get(off..off + 2) else { return false };
                nh = IpProtocol::from(h[0]);
                off += (usize::from(h[1]) + 1) * 8;
            }
            _ => return false,
        }
    }
    false
}
