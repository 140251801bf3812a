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
pub(crate) fn build(
    frame: &[u8],
    l3: usize,
    v4: bool,
    back: bool,
    s: Segment,
    out: &mut [u8; MAX_FRAME],
) -> Option<usize> {
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
        let (a, b) = (
            Ipv4Addr::from(<[u8; 4]>::try_from(src).ok()?),
            Ipv4Addr::from(<[u8; 4]>::try_from(dst).ok()?),
        );
        TcpPacket::new_unchecked(&mut t[..]).fill_checksum_v4(&a, &b);
    } else {
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        h[6] = fw::packet::proto::TCP;
        h[7] = if back { 64 } else { ip[7] };
        h[8..24].copy_from_slice(src);
        h[24..40].copy_from_slice(dst);
        let (a, b) = (
            Ipv6Addr::from(<[u8; 16]>::try_from(src).ok()?),
            Ipv6Addr::from(<[u8; 16]>::try_from(dst).ok()?),
        );
        TcpPacket::new_unchecked(&mut t[..]).fill_checksum_v6(&a, &b);
    }
    Some(l3 + ip_len + tcp_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::checksum::checksum;

    const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    const HOST: [u8; 6] = [2, 0, 0, 0, 0, 0xa2];
    const ROUTER: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// An IPv6 SYN from A6:40000 to B6:80 (hop limit 61), options MSS 1440 and wscale 7,
    /// with a hop-by-hop extension header in front of it.
    fn syn6() -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&ROUTER);
        f.extend_from_slice(&HOST);
        f.extend_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 8 + 28, 0, 61]);
        f.extend_from_slice(&A6);
        f.extend_from_slice(&B6);
        f.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop: PadN
        f.extend_from_slice(&[
            0x9c, 0x40, 0, 80, 0, 0, 0x30, 0x39, 0, 0, 0, 0, 0x70, 0x02, 0xfa, 0xf0, 0, 0, 0, 0,
        ]);
        f.extend_from_slice(&[2, 4, 0x05, 0xa0, 1, 3, 3, 7]);
        f
    }

    fn word(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    #[test]
    fn ipv6_syn_answered_with_a_syn_ack() {
        let f = syn6();
        assert_eq!(mss_of(&f, 14, false), Some(1440));
        let mut out = [0u8; MAX_FRAME];
        let s = Segment { seq: 0xdead_beef, ack: 12346, flags: 0x12, win: 0, mss: Some(1440) };
        let n = build(&f, 14, false, true, s, &mut out).unwrap();
        let g = &out[..n];
        assert_eq!(n, 14 + 40 + 24, "no extension header, MSS only");
        assert_eq!((&g[..6], &g[6..12]), (&HOST[..], &ROUTER[..]), "back to the sender");
        assert_eq!(
            (g[20], g[21], u16::from_be_bytes([g[18], g[19]])),
            (6, 64, 24),
            "TCP next, hop limit 64, payload length"
        );
        assert_eq!((&g[22..38], &g[38..54]), (&B6[..], &A6[..]), "from B to A");
        let t = &g[54..];
        assert_eq!(
            (u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]])),
            (80, 40000)
        );
        assert_eq!(
            (word(t, 4), word(t, 8), t[12], t[13], &t[14..16]),
            (0xdead_beef, 12346, 0x60, 0x12, &[0u8, 0][..])
        );
        assert_eq!(&t[20..24], &[2, 4, 0x05, 0xa0]);
        let tcp = TcpPacket::new_checked(t).unwrap();
        assert!(tcp.verify_checksum_v6(&Ipv6Addr::from(B6), &Ipv6Addr::from(A6)));
    }

    #[test]
    fn tagged_ipv4_ack_forwarded_as_a_syn() {
        // 802.1Q tag 100; IPv4 with 4 bytes of options (NOP x4), TTL 50; an ACK with data.
        let mut f = Vec::new();
        f.extend_from_slice(&ROUTER);
        f.extend_from_slice(&HOST);
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64, 0x08, 0x00]);
        let total: u16 = 24 + 20 + 5;
        f.extend_from_slice(&[
            0x46,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            1,
            0,
            0,
            50,
            6,
            0,
            0,
            10,
            0,
            0,
            1,
            10,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
        ]);
        let c = checksum(&f[18..42]);
        f[28..30].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&[
            0x9c, 0x40, 0, 80, 0, 0, 0x30, 0x3a, 0, 0, 0, 9, 0x50, 0x18, 1, 0, 0, 0, 0, 0,
        ]);
        f.extend_from_slice(b"hello");
        let mut out = [0u8; MAX_FRAME];
        let s = Segment { seq: 12345, ack: 0, flags: 0x02, win: 256, mss: Some(1400) };
        let n = build(&f, 18, true, false, s, &mut out).unwrap();
        let g = &out[..n];
        assert_eq!(n, 18 + 20 + 24, "a plain IPv4 header, no data");
        assert_eq!(
            &g[..18],
            &f[..18],
            "the link-layer header as received (the forward path rewrites it)"
        );
        assert_eq!(
            (g[18], g[26], u16::from_be_bytes([g[20], g[21]])),
            (0x45, 50, 44),
            "TTL kept for the forward path"
        );
        assert_eq!(checksum(&g[18..38]), 0, "IP header checksum holds");
        assert_eq!(
            (&g[30..34], &g[34..38]),
            (&[10u8, 0, 0, 1][..], &[10u8, 1, 1, 1][..]),
            "its own direction"
        );
        let t = &g[38..];
        assert_eq!(
            (word(t, 4), word(t, 8), t[13], u16::from_be_bytes([t[14], t[15]])),
            (12345, 0, 0x02, 256)
        );
        let tcp = TcpPacket::new_checked(t).unwrap();
        assert!(tcp.verify_checksum_v4(&Ipv4Addr::new(10, 0, 0, 1), &Ipv4Addr::new(10, 1, 1, 1)));
        assert!(build(&f[..40], 18, true, false, s, &mut out).is_none(), "a header cut short");
    }
}
