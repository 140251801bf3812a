//! `af-to`'s packet translation (NAT64 and NAT46): an IPv6 packet rebuilt as IPv4 and an IPv4
//! packet rebuilt as IPv6, as RFC 7915 ("IP/ICMP Translation Algorithm") says, into a new frame (the
//! headers differ in length). TCP and UDP keep their payload, with the port the translation
//! chose and a checksum over the new pseudo-header; ICMPv6 echo becomes ICMPv4 echo and back
//! (RFC 7915 sections 4.2 and 5.2); an ICMPv4 error about a translated flow becomes the
//! ICMPv6 error it stands for, with the packet it quotes translated back (section 4.2, "ICMP
//! Error Messages"). Anything else is not translated (`None`): the caller drops it.

use fw::packet::proto;
use wire::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum};

const V6: usize = 40;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// The checksum of an L4 message `msg` whose checksum field is at `ck` (taken as zero),
/// with the partial sum `pseudo` of its pseudo-header (0: none, ICMPv4).
fn l4_checksum(msg: &[u8], ck: usize, pseudo: u32) -> u16 {
    let field = u64::from(!be16(msg, ck).unwrap_or(0));
    !fold(u64::from(pseudo) + u64::from(sum(msg)) + field)
}

/// The offset of the checksum of protocol `p` in its header.
fn checksum_at(p: u8) -> usize {
    match p {
        proto::TCP => 16,
        proto::UDP => 6,
        _ => 2,
    }
}

/// The L2 header of `frame` up to `l3`, with `ethertype`, written at the start of `out`.
fn l2(frame: &[u8], l3: usize, ethertype: u16, out: &mut [u8]) -> Option<()> {
    out.get_mut(..l3)?.copy_from_slice(frame.get(..l3)?);
    put16(out, l3.checked_sub(2)?, ethertype);
    Some(())
}

/// An IPv4 header at the start of `out`: `len` bytes of payload of protocol `p`.
fn v4_header(out: &mut [u8], tos: u8, len: usize, ttl: u8, p: u8, src: u32, dst: u32) {
    out[..20].fill(0);
    out[0] = 0x45;
    out[1] = tos;
    put16(out, 2, (20 + len) as u16);
    // RFC 7915 section 5.1: DF set (the IPv6 sender does path MTU discovery), ID zero.
    out[6] = 0x40;
    out[8] = ttl;
    out[9] = p;
    out[12..16].copy_from_slice(&src.to_be_bytes());
    out[16..20].copy_from_slice(&dst.to_be_bytes());
    let ck = wire::checksum::checksum(&out[..20]);
    put16(out, 10, ck);
}

/// An IPv6 header at the start of `out`: `len` bytes of payload of protocol `p`.
fn v6_header(out: &mut [u8], tc: u8, len: usize, hop: u8, p: u8, src: u128, dst: u128) {
    out[0] = 0x60 | (tc >> 4);
    out[1] = tc << 4;
    out[2..4].fill(0);
    put16(out, 4, len as u16);
    out[6] = p;
    out[7] = hop;
    out[8..24].copy_from_slice(&src.to_be_bytes());
    out[24..40].copy_from_slice(&dst.to_be_bytes());
}

/// Which port of a TCP or UDP packet a translation sets (an echo's identifier either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortField {
    /// The source port: a client's packet, its source translated (NAT64 out, NAT46 out).
    Src,
    /// The destination port: a reply, back to the client's own port.
    Dst,
}

impl PortField {
    fn at(self) -> usize {
        if self == PortField::Src { 0 } else { 2 }
    }
}

/// The IPv4 frame for the IPv6 frame `frame` (IP header at `l3`, no extension header) of a
/// flow translated to `src` -> `dst` with `port` in `field`, built in `out`: its length. TCP,
/// UDP and echo requests and replies only.
pub(crate) fn to_v4(
    frame: &[u8],
    l3: usize,
    (src, port, dst): (u32, u16, u32),
    field: PortField,
    out: &mut [u8],
) -> Option<usize> {
    let ip = frame.get(l3..)?;
    let len = usize::from(be16(ip, 4)?);
    let l4 = ip.get(V6..V6 + len)?;
    let tc = (ip[0] << 4) | (ip[1] >> 4);
    let (p, hop) = (ip[6], ip[7]);
    let p4 = match p {
        proto::TCP if len >= 20 => proto::TCP,
        proto::UDP if len >= 8 => proto::UDP,
        proto::ICMPV6 if len >= 8 && matches!(l4[0], 128 | 129) => proto::ICMP,
        _ => return None,
    };
    let end = l3 + 20 + len;
    let out = out.get_mut(..end)?;
    l2(frame, l3, 0x0800, out)?;
    v4_header(&mut out[l3..], tc, len, hop, p4, src, dst);
    let msg = &mut out[l3 + 20..];
    msg.copy_from_slice(l4);
    if p4 == proto::ICMP {
        msg[0] = if msg[0] == 128 { 8 } else { 0 };
        put16(msg, 4, port);
        let ck = l4_checksum(msg, 2, 0);
        put16(msg, 2, ck);
    } else {
        put16(msg, field.at(), port);
        let pseudo = pseudo_header_v4(&src.into(), &dst.into(), p4, len as u32);
        let ck = l4_checksum(msg, checksum_at(p4), pseudo);
        put16(msg, checksum_at(p4), if p4 == proto::UDP && ck == 0 { 0xffff } else { ck });
    }
    Some(end)
}

/// How an IPv4 packet's addresses map to IPv6. NAT64's reply: its new source (the server's
/// IPv4 address in the rule's /96) and destination (the IPv6 client) and port or echo
/// identifier (the destination port); for an error, the quoted packet's new source (the
/// client and its port) and destination. NAT46's client packet: the rule's source address
/// and port (the source port), the destination in the rule's prefix.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Back {
    pub src: u128,
    pub dst: u128,
    pub port: u16,
    pub field: PortField,
    /// For an ICMP error: the quote's source, its port, and its destination.
    pub quote: Option<(u128, u16, u128)>,
}

/// The IPv6 frame for the IPv4 reply `frame` (IP header at `l3`) mapped back as `back` says,
/// built in `out`: its length.
pub(crate) fn to_v6(frame: &[u8], l3: usize, back: &Back, out: &mut [u8]) -> Option<usize> {
    let ip = frame.get(l3..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let total = usize::from(be16(ip, 2)?).min(ip.len());
    if be16(ip, 6)? & 0x3fff != 0 || total < ihl {
        return None;
    }
    let l4 = ip.get(ihl..total)?;
    let (tos, ttl, p) = (ip[1], ip[8], ip[9]);
    let mut msg = [0u8; 1500];
    let len = match p {
        proto::TCP | proto::UDP if l4.len() >= checksum_at(p) + 2 => {
            let m = msg.get_mut(..l4.len())?;
            m.copy_from_slice(l4);
            put16(m, back.field.at(), back.port);
            l4.len()
        }
        proto::ICMP if l4.len() >= 8 && matches!(l4[0], 0 | 8) => {
            let m = msg.get_mut(..l4.len())?;
            m.copy_from_slice(l4);
            m[0] = if l4[0] == 8 { 128 } else { 129 };
            put16(m, 4, back.port);
            l4.len()
        }
        proto::ICMP if l4.len() >= 8 + 20 => icmp_error(l4, back, &mut msg)?,
        _ => return None,
    };
    let p6 = if p == proto::ICMP { proto::ICMPV6 } else { p };
    let end = l3 + V6 + len;
    let out = out.get_mut(..end)?;
    l2(frame, l3, 0x86dd, out)?;
    v6_header(&mut out[l3..], tos, len, ttl, p6, back.src, back.dst);
    let m = &mut out[l3 + V6..];
    m.copy_from_slice(&msg[..len]);
    let pseudo = pseudo_header_v6(&back.src.into(), &back.dst.into(), p6, len as u32);
    let ck = l4_checksum(m, checksum_at(p6), pseudo);
    put16(m, checksum_at(p6), ck);
    Some(end)
}

/// The ICMPv6 error for the ICMPv4 error `l4` (RFC 7915 section 4.2), its quote translated
/// back, written into `msg`: its length. Unreachable and time exceeded only.
fn icmp_error(l4: &[u8], back: &Back, msg: &mut [u8]) -> Option<usize> {
    let (quote_src, quote_port, quote_dst) = back.quote?;
    let (typ, code) = (l4[0], l4[1]);
    let (t6, c6, word) = match (typ, code) {
        (11, c) => (3, c, 0),
        (3, 0 | 1 | 5..=8 | 11 | 12) => (1, 0, 0),
        (3, 2) => (4, 1, 6),
        (3, 3) => (1, 4, 0),
        // Fragmentation needed: packet too big, the IPv6 MTU 20 bytes more (at least 1280).
        (3, 4) => (2, 0, u32::from(be16(l4, 6)?).saturating_add(20).max(1280)),
        (3, 9 | 10 | 13) => (1, 1, 0),
        _ => return None,
    };
    msg[..8].fill(0);
    msg[0] = t6;
    msg[1] = c6;
    msg[4..8].copy_from_slice(&word.to_be_bytes());
    let q = &l4[8..];
    let qihl = usize::from(q[0] & 0x0f) * 4;
    let qp = q[9];
    let quoted = q.get(qihl..)?;
    let qp6 = if qp == proto::ICMP { proto::ICMPV6 } else { qp };
    // The quoted IPv6 header, then as much of the quoted payload as fits in 1280 bytes.
    let room = 1280 - V6 - 8 - V6;
    let qlen = quoted.len().min(room);
    let declared = usize::from(be16(q, 2)?).saturating_sub(qihl);
    v6_header(&mut msg[8..], q[1], declared, q[8], qp6, quote_src, quote_dst);
    let body = &mut msg[8 + V6..8 + V6 + qlen];
    body.copy_from_slice(&quoted[..qlen]);
    match qp {
        proto::TCP | proto::UDP if qlen >= 2 => put16(body, 0, quote_port),
        proto::ICMP if qlen >= 8 => {
            body[0] = if body[0] == 8 { 128 } else { 129 };
            put16(body, 4, quote_port);
        }
        _ => {}
    }
    // A quoted datagram that is whole gets a valid checksum (tools may check it).
    if qlen == declared && qlen >= checksum_at(qp6) + 2 {
        let pseudo = pseudo_header_v6(&quote_src.into(), &quote_dst.into(), qp6, qlen as u32);
        let ck = l4_checksum(body, checksum_at(qp6), pseudo);
        put16(body, checksum_at(qp6), ck);
    }
    Some(8 + V6 + qlen)
}

/// How an ICMPv6 error about a NAT46 flow maps to ICMPv4: the error's new source and
/// destination, and the quoted packet's new source, port (or echo identifier) and destination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorTo4 {
    pub src: u32,
    pub dst: u32,
    pub quote: (u32, u16, u32),
}

/// The most of the quoted packet's payload an ICMPv4 error carries: the error within 576
/// bytes (RFC 1812 4.3.2.3).
const QUOTE4: usize = 576 - 20 - 8 - 20;

/// The ICMPv4 error for the ICMPv6 error `frame` (IP header at `l3`, no extension header)
/// about a translated flow, as RFC 7915 section 5.2 maps it, the packet it quotes translated
/// back as `to` says, built in `out`: its length. Destination unreachable, packet too big,
/// time exceeded, and "unrecognized next header" (protocol unreachable) only.
pub(crate) fn error_to_v4(frame: &[u8], l3: usize, to: &ErrorTo4, out: &mut [u8]) -> Option<usize> {
    let ip = frame.get(l3..)?;
    let len = usize::from(be16(ip, 4)?).min(ip.len().checked_sub(V6)?);
    let l4 = ip.get(V6..V6 + len)?;
    if ip[6] != proto::ICMPV6 || l4.len() < 8 + V6 {
        return None;
    }
    let (t4, c4, word) = match (l4[0], l4[1]) {
        (1, 0 | 2 | 3) => (3, 1, 0),
        (1, 1) => (3, 10, 0),
        (1, 4) => (3, 3, 0),
        // Packet too big: fragmentation needed, the IPv4 MTU 20 bytes less.
        (2, _) => {
            let mtu6 = u32::from_be_bytes(l4[4..8].try_into().ok()?);
            (3, 4, mtu6.saturating_sub(20).min(0xffff))
        }
        (3, c) => (11, c, 0),
        (4, 1) => (3, 2, 0),
        _ => return None,
    };
    let q = &l4[8..];
    let qp = q[6];
    let qp4 = match qp {
        proto::TCP | proto::UDP => qp,
        proto::ICMPV6 => proto::ICMP,
        _ => return None,
    };
    let declared = usize::from(be16(q, 4)?);
    let quoted = &q[V6..];
    let qlen = quoted.len().min(declared).min(QUOTE4);
    let (src, port, dst) = to.quote;
    let mut msg = [0u8; 8 + 20 + QUOTE4];
    msg[0] = t4;
    msg[1] = c4;
    msg[4..8].copy_from_slice(&word.to_be_bytes());
    let tc = (q[0] << 4) | (q[1] >> 4);
    v4_header(&mut msg[8..], tc, declared, q[7], qp4, src, dst);
    let body = &mut msg[28..28 + qlen];
    body.copy_from_slice(&quoted[..qlen]);
    match qp4 {
        proto::TCP | proto::UDP if qlen >= 2 => put16(body, 0, port),
        proto::ICMP if qlen >= 8 => {
            body[0] = if body[0] == 128 { 8 } else { 0 };
            put16(body, 4, port);
        }
        _ => {}
    }
    // A quoted datagram that is whole gets a valid checksum (tools may check it).
    if qlen == declared && qlen >= checksum_at(qp4) + 2 {
        let pseudo = if qp4 == proto::ICMP {
            0
        } else {
            pseudo_header_v4(&src.into(), &dst.into(), qp4, qlen as u32)
        };
        let ck = l4_checksum(body, checksum_at(qp4), pseudo);
        put16(body, checksum_at(qp4), ck);
    }
    let n = 28 + qlen;
    let end = l3 + 20 + n;
    let out = out.get_mut(..end)?;
    l2(frame, l3, 0x0800, out)?;
    let outer_tc = (ip[0] << 4) | (ip[1] >> 4);
    v4_header(&mut out[l3..], outer_tc, n, ip[7], proto::ICMP, to.src, to.dst);
    let m = &mut out[l3 + 20..];
    m.copy_from_slice(&msg[..n]);
    let ck = l4_checksum(m, 2, 0);
    put16(m, 2, ck);
    Some(end)
}

#[cfg(test)]
#[path = "afto_rewrite_tests.rs"]
mod tests;
