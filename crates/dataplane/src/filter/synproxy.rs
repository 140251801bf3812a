//! `synproxy state`'s packets (`fw::state::ProxyStep`): the router's SYN-ACK to a client,
//! its SYN to the server, its ACKs to both once the server answered. Each is built from the
//! packet that called for it, into that packet's buffer (or a copy's): the same link-layer
//! header (VLAN tags included), a fresh IP header (IPv4 without options, IPv6 without
//! extension headers) and a TCP header with at most the MSS option, no data. An answer
//! (`back`) goes to the packet's sender: MAC, IP addresses and ports swapped, TTL 64; a
//! forwarded one keeps the packet's direction and TTL, and takes its route.

use core::net::{Ipv4Addr, Ipv6Addr};

use wire::TcpPacket;
use wire::checksum::checksum;

use super::modulate::{Target, target};

/// The largest frame built: two VLAN tags, an IPv6 header, a TCP header with the MSS.
pub(crate) const MAX_FRAME: usize = 22 + 40 + 24;

/// The MSS the router offers and passes on when the client's SYN has none (RFC 9293 3.7.1).
pub(crate) const DEFAULT_MSS: u16 = 536;

/// The TCP fields of a segment to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub win: u16,
    pub mss: Option<u16>,
}

/// The MSS option of the TCP SYN in `frame` (IP header at `l3`, family `v4`).
pub(crate) fn mss_of(frame: &[u8], l3: usize, v4: bool) -> Option<u16> {
    let ip = frame.get(l3..)?;
    let Target::Segment { off, .. } = target(ip, v4)? else { return None };
    TcpPacket::new_checked(ip.get(off..)?).ok()?.mss()
}

/// Builds into `out` segment `s` between the ends of the TCP packet in `frame` (IP header
/// at `l3`): back to its sender (`back`) or on its way. Returns the frame's length; `None`
/// for a packet that is not a TCP segment with its whole header.
pub(crate) fn build(frame: &[u8], l3: usize, v4: bool, back: bool, s: Segment, out: &mut [u8; MAX_FRAME]) -> Option<usize> {
    let ip = frame.get(l3..)?;
    let Target::Segment { off, .. } = target(ip, v4)? else { return None };
    let ports = ip.get(off..off + 4)?;
    let ip_len = if v4 { 20 } else { 40 };
    let tcp_len = if s.mss.is_some() { 24 } else { 20 };
    if l3 < 14 || l3 + ip_len + tcp_len > MAX_FRAME {
        return None;
    }
    out[..l3].copy_from_slice(&frame[..l3]);
    if back {
        out[..6].copy_from_slice(&frame[6..12]);
        out[6..12].copy_from_slice(&frame[..6]);
    }
    let (h, t) = out[l3..l3 + ip_len + tcp_len].split_at_mut(ip_len);
    h.fill(0);
    t.fill(0);
    // Addresses and ports in the segment's direction.
    let (sa, da) = if v4 { (12..16, 16..20) } else { (8..24, 24..40) };
    let (src, dst) = if back { (&ip[da], &ip[sa]) } else { (&ip[sa], &ip[da]) };
    let (sp, dp) = if back { (&ports[2..4], &ports[..2]) } else { (&ports[..2], &ports[2..4]) };
    t[..2].copy_from_slice(sp);
    t[2..4].copy_from_slice(dp);
    t[4..8].copy_from_slice(&s.seq.to_be_bytes());
    t[8..12].copy_from_slice(&s.ack.to_be_bytes());
    t[12] = ((tcp_len / 4) as u8) << 4;
    t[13] = s.flags;
    t[14..16].copy_from_slice(&s.win.to_be_bytes());
    if let Some(mss) = s.mss {
        t[20] = 2;
        t[21] = 4;
        t[22..24].copy_from_slice(&mss.to_be_bytes());
    }
    if v4 {
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((ip_len + tcp_len) as u16).to_be_bytes());
        h[6] = 0x40; // DF
        h[8] = if back { 64 } else { ip[8] };
        h[9] = fw::packet::proto::TCP;
        h[12..16].copy_from_slice(src);
        h[16..20].copy_from_slice(dst);
        let c = checksum(h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let (a, b) = (Ipv4Addr::from(<[u8; 4]>::try_from(src).ok()?), Ipv4Addr::from(<[u8; 4]>::try_from(dst).ok()?));
        TcpPacket::new_unchecked(&mut t[..]).fill_checksum_v4(&a, &b);
    } else {
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        h[6] = fw::packet::proto::TCP;
        h[7] = if back { 64 } else { ip[7] };
        h[8..24].copy_from_slice(src);
        h[24..40].copy_from_slice(dst);
        let (a, b) = (Ipv6Addr::from(<[u8; 16]>::try_from(src).ok()?), Ipv6Addr::from(<[u8; 16]>::try_from(dst).ok()?));
        TcpPacket::new_unchecked(&mut t[..]).fill_checksum_v6(&a, &b);
    }
    Some(l3 + ip_len + tcp_len)
}
