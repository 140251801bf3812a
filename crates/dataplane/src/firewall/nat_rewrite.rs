//! Reading and rewriting the addresses and ports of an IPv4 packet for NAT, with every
//! checksum they are part of updated incrementally (RFC 1624 eqn. 3, `wire::checksum`): the
//! IPv4 header's, TCP's and UDP's (pseudo-header and port; a UDP checksum of zero means "none"
//! and stays zero, RFC 768), ICMP's (the query identifier). For an ICMP error the outer
//! header and the quoted packet are rewritten together, as pf's `pf_change_icmp` does: the
//! quoted header's address and checksum, its port, its UDP checksum (TCP's lies beyond the 8
//! quoted bytes RFC 792 guarantees, and is updated only if quoted), and the ICMP checksum
//! over all of these.

use fw::nat::table::NatKey;
use fw::packet::proto;
use wire::checksum::{update16, update32};

/// Which end of a packet a translation rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    Src,
    Dst,
}

/// What kind of packet NAT sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// TCP or UDP with its ports.
    Ports,
    /// An ICMP query or reply: the identifier stands for both ports. `request`: it may
    /// start a translation.
    Query { request: bool },
    /// An ICMP error; `inner` is the quoted packet's flow (as quoted) and `at` the offset of
    /// the quoted IP header.
    Error { inner: NatKey, at: usize },
    /// Another protocol: addresses only.
    Other,
    /// A fragment: NAT does not reassemble.
    Fragment,
}

/// An IPv4 packet as NAT reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tuple {
    pub key: NatKey,
    pub kind: Kind,
    /// Offset of the L4 header.
    pub l4: usize,
    /// TCP flags (0 for other protocols), for the translation's timeout.
    pub tcp_flags: u8,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// ICMP query types and their replies (echo, timestamp, information, address mask).
fn icmp_query(t: u8) -> Option<bool> {
    match t {
        8 | 13 | 15 | 17 => Some(true),
        0 | 14 | 16 | 18 => Some(false),
        _ => None,
    }
}

/// ICMP error types that quote a packet (unreachable, source quench, redirect, time exceeded,
/// parameter problem).
fn icmp_error(t: u8) -> bool {
    matches!(t, 3 | 4 | 5 | 11 | 12)
}

/// Reads the flow of `ip` (an IPv4 packet the classify pass validated: version, header and
/// total length within the buffer). `None` if its L4 header is cut short.
pub(crate) fn read(ip: &[u8]) -> Option<Tuple> {
    let ihl = usize::from(*ip.first()? & 0x0f) * 4;
    let end = usize::from(be16(ip, 2)?).min(ip.len());
    let p = *ip.get(9)?;
    let (src, dst) = (be32(ip, 12)?, be32(ip, 16)?);
    let mut key = NatKey { src, dst, sport: 0, dport: 0, proto: p };
    let frag = be16(ip, 6)? & 0x3fff != 0;
    if frag && matches!(p, proto::TCP | proto::UDP | proto::ICMP) {
        return Some(Tuple { key, kind: Kind::Fragment, l4: ihl, tcp_flags: 0 });
    }
    let l4 = ip.get(ihl..end)?;
    let (kind, tcp_flags) = match p {
        proto::TCP | proto::UDP => {
            let min = if p == proto::TCP { 20 } else { 8 };
            if l4.len() < min {
                return None;
            }
            key.sport = be16(l4, 0)?;
            key.dport = be16(l4, 2)?;
            (Kind::Ports, if p == proto::TCP { l4[13] } else { 0 })
        }
        proto::ICMP => {
            if l4.len() < 8 {
                return None;
            }
            if let Some(request) = icmp_query(l4[0]) {
                key.sport = be16(l4, 4)?;
                key.dport = key.sport;
                (Kind::Query { request }, 0)
            } else if icmp_error(l4[0]) {
                let at = ihl + 8;
                (Kind::Error { inner: quoted(ip.get(..end)?, at)?, at }, 0)
            } else {
                (Kind::Other, 0)
            }
        }
        _ => (Kind::Other, 0),
    };
    Some(Tuple { key, kind, l4: ihl, tcp_flags })
}

/// The flow of the packet an ICMP error quotes at `at` (its ports, or a query's identifier
/// in both; 0 when not quoted).
fn quoted(ip: &[u8], at: usize) -> Option<NatKey> {
    let q = ip.get(at..)?;
    if q.len() < 20 || q[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(q[0] & 0x0f) * 4;
    let mut key = NatKey { src: be32(q, 12)?, dst: be32(q, 16)?, sport: 0, dport: 0, proto: q[9] };
    let first = be16(q, 6)? & 0x1fff == 0;
    match key.proto {
        proto::TCP | proto::UDP if first => {
            key.sport = be16(q, ihl)?;
            key.dport = be16(q, ihl + 2)?;
        }
        proto::ICMP if first && icmp_query(*q.get(ihl)?).is_some() => {
            key.sport = be16(q, ihl + 4)?;
            key.dport = key.sport;
        }
        _ => {}
    }
    Some(key)
}

/// The flow and TCP flags of the common packet, read with no parsing beyond it: IPv4
/// without options, not a fragment, TCP (20-byte header at least) or UDP. `None` for any
/// other packet, which [`read`] then takes.
#[inline(always)]
pub(crate) fn read_plain(ip: &[u8]) -> Option<(NatKey, u8)> {
    let h: &[u8; 40] = match ip.first_chunk::<28>() {
        Some(h) if h[0] == 0x45 && (h[6] & 0x3f) | h[7] == 0 && h[9] == proto::UDP => {
            let key = NatKey {
                src: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
                dst: u32::from_be_bytes([h[16], h[17], h[18], h[19]]),
                sport: u16::from_be_bytes([h[20], h[21]]),
                dport: u16::from_be_bytes([h[22], h[23]]),
                proto: proto::UDP,
            };
            return Some((key, 0));
        }
        _ => ip.first_chunk()?,
    };
    if h[0] != 0x45
        || (h[6] & 0x3f) | h[7] != 0
        || h[9] != proto::TCP
        || u16::from_be_bytes([h[2], h[3]]) < 40
    {
        return None;
    }
    let key = NatKey {
        src: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
        dst: u32::from_be_bytes([h[16], h[17], h[18], h[19]]),
        sport: u16::from_be_bytes([h[20], h[21]]),
        dport: u16::from_be_bytes([h[22], h[23]]),
        proto: proto::TCP,
    };
    Some((key, h[33]))
}

/// [`rewrite`] for a packet [`read_plain`] took (`proto`: its protocol): one fold per
/// checksum, RFC 1624 eqn. 3 with every changed word summed at once. The sums run on the
/// words as they lie in memory, unswapped: a ones'-complement sum of byte-swapped words is
/// the byte-swapped sum (RFC 1071, section 2(B)), so no field needs converting. With `ttl`
/// the TTL (above 1, the caller checked) is decremented too, in the same header checksum
/// update: the forwarding's decrement and the translation's in one.
#[inline(always)]
pub(crate) fn rewrite_plain(ip: &mut [u8], p: u8, end: End, addr: u32, port: u16, ttl: bool) {
    if p == proto::TCP {
        if let Some(h) = ip.first_chunk_mut::<38>() {
            rewrite_header(h, false, end, addr, port, ttl);
        }
    } else if let Some(h) = ip.first_chunk_mut::<28>() {
        rewrite_header(h, true, end, addr, port, ttl);
    }
}

/// [`rewrite_plain`] on the first `N` bytes of the packet, its L4 checksum the last two (a
/// fixed length: the offsets need no bounds checks).
#[inline(always)]
fn rewrite_header<const N: usize>(
    h: &mut [u8; N],
    udp: bool,
    end: End,
    addr: u32,
    port: u16,
    ttl: bool,
) {
    let ck_at = N - 2;
    let (a_at, p_at) = if end == End::Src { (12, 20) } else { (16, 22) };
    let word = |h: &[u8; N], at: usize| u16::from_ne_bytes([h[at], h[at + 1]]);
    let (new, new_port) = (addr.to_be_bytes(), port.to_be_bytes());
    // ~m + m' of the address words: the header's and the pseudo-header's change.
    let delta = u32::from(!word(h, a_at))
        + u32::from(!word(h, a_at + 2))
        + u32::from(u16::from_ne_bytes([new[0], new[1]]))
        + u32::from(u16::from_ne_bytes([new[2], new[3]]));
    let port_delta = u32::from(!word(h, p_at)) + u32::from(u16::from_ne_bytes(new_port));
    h[a_at..a_at + 4].copy_from_slice(&new);
    h[p_at..p_at + 2].copy_from_slice(&new_port);
    let mut ip_delta = delta;
    if ttl {
        let old = word(h, 8);
        h[8] = h[8].wrapping_sub(1);
        ip_delta += u32::from(!old) + u32::from(word(h, 8));
    }
    let ip_ck = !fold32(u32::from(!word(h, 10)) + ip_delta);
    h[10..12].copy_from_slice(&ip_ck.to_ne_bytes());
    let ck = word(h, ck_at);
    if udp && ck == 0 {
        return;
    }
    let ck = !fold32(u32::from(!ck) + delta + port_delta);
    // RFC 768: a computed UDP checksum of zero is sent as all ones (the same either way round).
    let ck = if udp && ck == 0 { 0xffff } else { ck };
    h[ck_at..ck_at + 2].copy_from_slice(&ck.to_ne_bytes());
}

/// A ones'-complement sum of at most 2^16 16-bit words folded to 16 bits.
#[inline(always)]
fn fold32(sum: u32) -> u16 {
    let sum = (sum & 0xffff) + (sum >> 16);
    ((sum & 0xffff) + (sum >> 16)) as u16
}

/// Offsets of an address and a port field for `end` (IP header, L4 header).
fn addr_at(end: End) -> usize {
    if end == End::Src { 12 } else { 16 }
}

/// Rewrites `end`'s address to `addr` and its port (a query's identifier) to `port` in the
/// packet `ip` read as `t` ([`read`]), updating the checksums.
pub(crate) fn rewrite(ip: &mut [u8], t: &Tuple, end: End, addr: u32, port: u16) {
    let at = addr_at(end);
    let old = be32(ip, at).unwrap_or(0);
    if old != addr {
        put32(ip, at, addr);
        let ck = update32(be16(ip, 10).unwrap_or(0), old, addr);
        put16(ip, 10, ck);
    }
    let l4 = t.l4;
    match (t.kind, t.key.proto) {
        (Kind::Ports, p) => {
            let ck_at = l4 + if p == proto::TCP { 16 } else { 6 };
            let port_at = l4 + if end == End::Src { 0 } else { 2 };
            let old_port = be16(ip, port_at).unwrap_or(0);
            put16(ip, port_at, port);
            let ck = be16(ip, ck_at).unwrap_or(0);
            if p == proto::UDP && ck == 0 {
                return;
            }
            let ck = update16(update32(ck, old, addr), old_port, port);
            // RFC 768: a computed UDP checksum of zero is sent as all ones.
            put16(ip, ck_at, if p == proto::UDP && ck == 0 { 0xffff } else { ck });
        }
        (Kind::Query { .. }, _) => {
            let old_id = be16(ip, l4 + 4).unwrap_or(0);
            put16(ip, l4 + 4, port);
            let ck = update16(be16(ip, l4 + 2).unwrap_or(0), old_id, port);
            put16(ip, l4 + 2, ck);
        }
        _ => {}
    }
}

/// The ICMP error `ip` (read as `t`, `Kind::Error`): the outer header's `outer` address
/// becomes `addr`, and the quoted packet's `inner` end becomes `inner_to` (address, port or
/// identifier), every checksum involved updated.
pub(crate) fn rewrite_error(
    ip: &mut [u8],
    t: &Tuple,
    outer: End,
    addr: u32,
    inner: End,
    inner_to: (u32, u16),
) {
    let Kind::Error { inner: q, at } = t.kind else { return };
    let icmp_ck = t.l4 + 2;
    // A 16-bit word of the ICMP message changes: the ICMP checksum follows (every field
    // changed here sits at an even offset from the ICMP header).
    let set = |ip: &mut [u8], off: usize, v: u16| {
        if let Some(old) = be16(ip, off) {
            put16(ip, off, v);
            let ck = update16(be16(ip, icmp_ck).unwrap_or(0), old, v);
            put16(ip, icmp_ck, ck);
        }
    };
    let end = usize::from(be16(ip, 2).unwrap_or(0)).min(ip.len());
    let ihl = usize::from(ip[at] & 0x0f) * 4;
    let (a_at, old_a) = (at + addr_at(inner), if inner == End::Src { q.src } else { q.dst });
    let (new_a, new_port) = inner_to;
    // The quoted IP header: address and header checksum.
    set(ip, a_at, (new_a >> 16) as u16);
    set(ip, a_at + 2, new_a as u16);
    let qck = update32(be16(ip, at + 10).unwrap_or(0), old_a, new_a);
    set(ip, at + 10, qck);
    let l4 = at + ihl;
    match q.proto {
        proto::TCP | proto::UDP if q.sport != 0 || q.dport != 0 => {
            let port_at = l4 + if inner == End::Src { 0 } else { 2 };
            let old_port = be16(ip, port_at).unwrap_or(0);
            set(ip, port_at, new_port);
            let ck_at = l4 + if q.proto == proto::TCP { 16 } else { 6 };
            if ck_at + 2 <= end
                && let Some(ck) = be16(ip, ck_at)
                && !(q.proto == proto::UDP && ck == 0)
            {
                let ck = update16(update32(ck, old_a, new_a), old_port, new_port);
                set(ip, ck_at, if q.proto == proto::UDP && ck == 0 { 0xffff } else { ck });
            }
        }
        proto::ICMP if q.sport != 0 && l4 + 8 <= end => {
            let old_id = be16(ip, l4 + 4).unwrap_or(0);
            set(ip, l4 + 4, new_port);
            let ck = update16(be16(ip, l4 + 2).unwrap_or(0), old_id, new_port);
            set(ip, l4 + 2, ck);
        }
        _ => {}
    }
    // The outer header (ICMPv4 has no pseudo-header: the ICMP checksum is not involved).
    let o = addr_at(outer);
    let old = be32(ip, o).unwrap_or(0);
    put32(ip, o, addr);
    let ck = update32(be16(ip, 10).unwrap_or(0), old, addr);
    put16(ip, 10, ck);
}

#[cfg(test)]
#[path = "nat_rewrite_tests.rs"]
mod tests;
