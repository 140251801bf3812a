//! Reading and rewriting the addresses and ports of an IPv6 packet for NAT66. IPv6 has no
//! header checksum; TCP's, UDP's and ICMPv6's cover a pseudo-header with both addresses
//! (RFC 8200 section 8.1), so an address change is folded into the L4 checksum
//! incrementally (RFC 1624 eqn. 3), with the port or query identifier. For an ICMPv6 error
//! the quoted packet is rewritten too (its address, port and, when quoted, L4 checksum) and
//! the ICMPv6 checksum computed again over the whole message: errors are rare, and every
//! byte of the quote is under that checksum.

use fw::nat::six::Key6;
use fw::packet::proto;
use wire::checksum::{fold, pseudo_header_v6, sum, update32};

use super::nat_rewrite::End;

/// The IPv6 header's length.
const HDR: usize = 40;

/// What kind of packet NAT66 sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind6 {
    /// TCP or UDP with its ports.
    Ports,
    /// An ICMPv6 echo request (`request`) or reply: the identifier stands for both ports.
    Query { request: bool },
    /// An ICMPv6 error quoting the flow `inner` (as quoted) at offset `at`.
    Error { inner: Key6, at: usize },
    /// Another protocol: addresses only.
    Other,
    /// A fragment (or a header chain NAT does not walk): NAT does not reassemble.
    Fragment,
}

/// An IPv6 packet as NAT66 reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tuple6 {
    pub key: Key6,
    pub kind: Kind6,
    /// Offset of the L4 header.
    pub l4: usize,
    pub tcp_flags: u8,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn addr(b: &[u8], at: usize) -> Option<u128> {
    Some(u128::from_be_bytes(b.get(at..at + 16)?.try_into().ok()?))
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    if let Some(w) = b.get_mut(at..at + 2) {
        w.copy_from_slice(&v.to_be_bytes());
    }
}

/// `ck` updated for a 128-bit field changing from `old` to `new`.
fn update128(mut ck: u16, old: u128, new: u128) -> u16 {
    for k in (0..4).rev() {
        ck = update32(ck, (old >> (32 * k)) as u32, (new >> (32 * k)) as u32);
    }
    ck
}

/// The protocol after the extension headers NAT walks (hop-by-hop, routing, destination
/// options), and where it starts; `None` for a fragment header or a chain cut short.
fn upper(ip: &[u8]) -> Option<(u8, usize)> {
    let (mut nh, mut at) = (*ip.get(6)?, HDR);
    for _ in 0..4 {
        match nh {
            0 | 43 | 60 => {
                nh = *ip.get(at)?;
                at += (usize::from(*ip.get(at + 1)?) + 1) * 8;
            }
            44 => return None,
            _ => return Some((nh, at)),
        }
    }
    None
}

/// Reads the flow of `ip` (an IPv6 packet the classify pass validated). `None` if its L4
/// header is cut short.
pub(crate) fn read6(ip: &[u8]) -> Option<Tuple6> {
    let end = (HDR + usize::from(be16(ip, 4)?)).min(ip.len());
    let ip = ip.get(..end)?;
    let mut key = Key6 { src: addr(ip, 8)?, dst: addr(ip, 24)?, ..Key6::default() };
    let Some((p, l4)) = upper(ip) else {
        key.proto = 44;
        return Some(Tuple6 { key, kind: Kind6::Fragment, l4: HDR, tcp_flags: 0 });
    };
    key.proto = p;
    let t = ip.get(l4..)?;
    let (kind, tcp_flags) = match p {
        proto::TCP | proto::UDP => {
            if t.len() < if p == proto::TCP { 20 } else { 8 } {
                return None;
            }
            (key.sport, key.dport) = (be16(t, 0)?, be16(t, 2)?);
            (Kind6::Ports, if p == proto::TCP { t[13] } else { 0 })
        }
        proto::ICMPV6 if t.len() >= 8 => match t[0] {
            128 | 129 => {
                key.sport = be16(t, 4)?;
                key.dport = key.sport;
                (Kind6::Query { request: t[0] == 128 }, 0)
            }
            1..=4 => (Kind6::Error { inner: quoted6(ip, l4 + 8)?, at: l4 + 8 }, 0),
            _ => (Kind6::Other, 0),
        },
        proto::ICMPV6 => return None,
        _ => (Kind6::Other, 0),
    };
    Some(Tuple6 { key, kind, l4, tcp_flags })
}

/// The flow of the packet an ICMPv6 error quotes at `at` (ports or identifier 0 when not
/// quoted or behind extension headers).
fn quoted6(ip: &[u8], at: usize) -> Option<Key6> {
    let q = ip.get(at..)?;
    if q.len() < HDR || q[0] >> 4 != 6 {
        return None;
    }
    let mut key = Key6 { src: addr(q, 8)?, dst: addr(q, 24)?, proto: q[6], ..Key6::default() };
    match key.proto {
        proto::TCP | proto::UDP if q.len() >= HDR + 4 => {
            (key.sport, key.dport) = (be16(q, HDR)?, be16(q, HDR + 2)?);
        }
        proto::ICMPV6 if q.len() >= HDR + 8 && matches!(q[HDR], 128 | 129) => {
            key.sport = be16(q, HDR + 4)?;
            key.dport = key.sport;
        }
        _ => {}
    }
    Some(key)
}

/// The offset of an address field for `end`.
fn addr_at(end: End) -> usize {
    if end == End::Src { 8 } else { 24 }
}

/// The offset of the L4 checksum of protocol `p` from its header, if it has one.
fn checksum_at(p: u8) -> Option<usize> {
    match p {
        proto::TCP => Some(16),
        proto::UDP => Some(6),
        proto::ICMPV6 => Some(2),
        _ => None,
    }
}

/// Rewrites `end`'s address to `to` and its port (a query's identifier) to `port` in `ip`
/// read as `t`, the L4 checksum updated.
pub(crate) fn rewrite6(ip: &mut [u8], t: &Tuple6, end: End, to: u128, port: u16) {
    let at = addr_at(end);
    let Some(old) = addr(ip, at) else { return };
    ip[at..at + 16].copy_from_slice(&to.to_be_bytes());
    let l4 = t.l4;
    let port_at = match t.kind {
        Kind6::Ports => Some(l4 + if end == End::Src { 0 } else { 2 }),
        Kind6::Query { .. } => Some(l4 + 4),
        _ => None,
    };
    let Some(ck_at) =
        checksum_at(t.key.proto).map(|c| l4 + c).filter(|_| t.kind != Kind6::Fragment)
    else {
        return;
    };
    let Some(mut ck) = be16(ip, ck_at) else { return };
    ck = update128(ck, old, to);
    if let Some(p_at) = port_at
        && let Some(old_port) = be16(ip, p_at)
    {
        put16(ip, p_at, port);
        ck = wire::checksum::update16(ck, old_port, port);
    }
    put16(ip, ck_at, ck);
}

/// The ICMPv6 error `ip` (read as `t`): the outer `outer` address becomes `to`, the quoted
/// packet's `inner` end becomes `inner_to`, and the ICMPv6 checksum is computed again.
pub(crate) fn rewrite_error6(
    ip: &mut [u8],
    t: &Tuple6,
    outer: End,
    to: u128,
    inner: End,
    inner_to: (u128, u16),
) {
    let Kind6::Error { inner: q, at } = t.kind else { return };
    let end = (HDR + usize::from(be16(ip, 4).unwrap_or(0))).min(ip.len());
    let a_at = at + addr_at(inner);
    let old_a = if inner == End::Src { q.src } else { q.dst };
    let (new_a, new_port) = inner_to;
    if a_at + 16 <= end {
        ip[a_at..a_at + 16].copy_from_slice(&new_a.to_be_bytes());
    }
    let l4 = at + HDR;
    let port_at = match q.proto {
        proto::TCP | proto::UDP => l4 + if inner == End::Src { 0 } else { 2 },
        _ => l4 + 4,
    };
    let has_port = q.sport != 0 || q.dport != 0;
    let old_port = be16(ip, port_at).filter(|_| has_port && port_at + 2 <= end);
    if old_port.is_some() {
        put16(ip, port_at, new_port);
    }
    if let Some(c) = checksum_at(q.proto).map(|c| l4 + c).filter(|&c| c + 2 <= end)
        && let Some(ck) = be16(ip, c)
    {
        let mut ck = update128(ck, old_a, new_a);
        if let Some(old_port) = old_port {
            ck = wire::checksum::update16(ck, old_port, new_port);
        }
        put16(ip, c, ck);
    }
    let o = addr_at(outer);
    ip[o..o + 16].copy_from_slice(&to.to_be_bytes());
    put16(ip, t.l4 + 2, icmp6_checksum(&ip[..end], t.l4));
}

/// The ICMPv6 checksum of the message at `l4` of `ip` (RFC 4443 section 2.3).
fn icmp6_checksum(ip: &[u8], l4: usize) -> u16 {
    let (Some(src), Some(dst)) = (addr(ip, 8), addr(ip, 24)) else { return 0 };
    let msg = &ip[l4..];
    let pseudo = pseudo_header_v6(&src.into(), &dst.into(), proto::ICMPV6, msg.len() as u32);
    // The checksum field itself counts as zero: its word subtracted (added complemented).
    let field = u64::from(!be16(msg, 2).unwrap_or(0));
    !fold(u64::from(pseudo) + u64::from(sum(msg)) + field)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u128 = 0xfd00_0000_0000_0000_0000_0000_0000_0002;
    const B: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;
    const EXT: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;

    /// An IPv6 packet of protocol `p` from `src` to `dst` with the L4 bytes `l4`, its
    /// checksum (at `ck`) computed in full.
    fn packet(p: u8, src: u128, dst: u128, l4: &[u8], ck: usize) -> Vec<u8> {
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[p, 64]);
        ip.extend_from_slice(&src.to_be_bytes());
        ip.extend_from_slice(&dst.to_be_bytes());
        ip.extend_from_slice(l4);
        if ck + 2 <= l4.len() {
            let c = full_checksum(&ip, p);
            put16(&mut ip, HDR + ck, c);
        }
        ip
    }

    /// The L4 checksum of `ip` computed from scratch (the reference).
    fn full_checksum(ip: &[u8], p: u8) -> u16 {
        let msg = &ip[HDR..];
        let pseudo = pseudo_header_v6(
            &addr(ip, 8).unwrap().into(),
            &addr(ip, 24).unwrap().into(),
            p,
            msg.len() as u32,
        );
        let at = checksum_at(p).unwrap();
        let mut zeroed = msg.to_vec();
        zeroed[at..at + 2].fill(0);
        !fold(u64::from(pseudo) + u64::from(sum(&zeroed)))
    }

    fn valid(ip: &[u8], p: u8) -> bool {
        be16(ip, HDR + checksum_at(p).unwrap()) == Some(full_checksum(ip, p))
    }

    #[test]
    fn tcp_udp_and_echo_rewritten_with_valid_checksums() {
        let mut tcp = [0u8; 20];
        tcp[..4].copy_from_slice(&[0x9c, 0x40, 0, 80]);
        tcp[12] = 0x50;
        tcp[13] = 0x02;
        let udp = [0xa4, 0x10, 0x00, 0x35, 0, 12, 0, 0, 1, 2, 3, 4];
        let echo = [128, 0, 0, 0, 0x12, 0x34, 0, 1, 9, 9];
        for (p, l4, ck) in
            [(proto::TCP, &tcp[..], 16), (proto::UDP, &udp[..], 6), (58, &echo[..], 2)]
        {
            let mut ip = packet(p, A, B, l4, ck);
            let t = read6(&ip).unwrap();
            assert_eq!((t.key.src, t.key.dst, t.key.proto), (A, B, p));
            rewrite6(&mut ip, &t, End::Src, EXT, 50001);
            let t2 = read6(&ip).unwrap();
            assert_eq!((t2.key.src, t2.key.sport), (EXT, 50001), "proto {p}");
            assert!(valid(&ip, p), "proto {p}: checksum after the source");
            rewrite6(&mut ip, &t2, End::Dst, A, 8080);
            assert!(valid(&ip, p), "proto {p}: checksum after the destination");
        }
        let t = read6(&packet(58, A, B, &echo, 2)).unwrap();
        assert_eq!((t.kind, t.key.sport), (Kind6::Query { request: true }, 0x1234));
    }

    /// A router's "time exceeded" about a translated UDP datagram: the outer destination
    /// and the quoted source go back to the inside host, every checksum valid.
    #[test]
    fn errors_translate_their_quote() {
        let udp = [0xc3, 0x51, 0x82, 0x9b, 0, 12, 0, 0, 1, 2, 3, 4];
        let quoted = packet(proto::UDP, EXT, B, &udp, 6);
        let mut msg = vec![3, 0, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&quoted);
        let router = B - 1;
        let mut ip = packet(58, router, EXT, &msg, 2);
        let t = read6(&ip).unwrap();
        let Kind6::Error { inner, .. } = t.kind else { panic!("{t:?}") };
        assert_eq!((inner.src, inner.sport, inner.dst), (EXT, 0xc351, B));
        rewrite_error6(&mut ip, &t, End::Dst, A, End::Src, (A, 40000));
        assert!(valid(&ip, 58), "ICMPv6 checksum");
        assert_eq!(addr(&ip, 24), Some(A));
        let q = &ip[HDR + 8..];
        assert_eq!((addr(q, 8), be16(q, HDR)), (Some(A), Some(40000)));
        assert!(valid(q, proto::UDP), "the quoted datagram's checksum");
    }

    #[test]
    fn fragments_and_short_headers() {
        let mut ip = packet(proto::UDP, A, B, &[0; 8], 6);
        ip[6] = 44;
        assert_eq!(read6(&ip).unwrap().kind, Kind6::Fragment);
        let ip = packet(proto::TCP, A, B, &[0; 12], 16);
        assert_eq!(read6(&ip), None, "a TCP header cut short");
        assert_eq!(read6(&[0x60; 20]), None);
    }
}
