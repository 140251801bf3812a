//! Finishing partial TCP/UDP checksums (CHECKSUM_PARTIAL).

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum};

use super::{ETH_IPV4, ETH_IPV6, OffloadError, PROTO_TCP, PROTO_UDP, l3_start};

/// Finishes a partial checksum as the kernel's `skb_checksum_help` does: the ones'-complement
/// sum of `frame[start..]` (the field already holds the pseudo-header sum), complemented,
/// stored at `start + offset`. A result of zero is stored as 0xffff, the same number in
/// ones' complement, which UDP needs (RFC 768: zero means "no checksum").
pub fn complete_at(frame: &mut [u8], start: usize, offset: usize) -> Result<(), OffloadError> {
    let field = start.checked_add(offset).ok_or(OffloadError::Malformed)?;
    if field.checked_add(2).is_none_or(|end| end > frame.len()) {
        return Err(OffloadError::Malformed);
    }
    let c = !fold(u64::from(sum(&frame[start..])));
    frame[field..field + 2].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    Ok(())
}

/// For ports that carry no offload metadata (AF_XDP): finishes the TCP or UDP checksum of an
/// unfragmented IPv4 or IPv6 (no extension header) packet whose checksum field equals the
/// folded pseudo-header sum, the value a CHECKSUM_PARTIAL sender leaves there. Returns
/// whether it rewrote the field.
///
/// Safe for a complete checksum: if the field is correct, finishing it computes the same
/// value again (the sum over the segment with the field is then `!pseudo`, and `!` of it is
/// the field). So the rule changes only a wrong checksum that happens to equal the
/// pseudo-header sum, 1 in 65536 of corrupt packets, which it "repairs".
#[inline]
pub fn complete_if_partial(frame: &mut [u8]) -> bool {
    // The common case first and cheaply: untagged IPv4 with a 20-byte header, neither TCP
    // nor UDP or with a field that is not the pseudo sum.
    let Some(h) = frame.get(12..36).and_then(|b| b.first_chunk::<24>()) else { return false };
    if h[..3] == [0x08, 0x00, 0x45] {
        let proto = h[11];
        if proto != PROTO_TCP && proto != PROTO_UDP {
            return false;
        }
        let total = usize::from(u16::from_be_bytes([h[4], h[5]]));
        let len = total.wrapping_sub(20);
        let addrs = u64::from_be_bytes([h[14], h[15], h[16], h[17], h[18], h[19], h[20], h[21]]);
        let pseudo = fold16((addrs >> 32) + (addrs & 0xffff_ffff) + u64::from(proto) + len as u64);
        let field = 34 + if proto == PROTO_TCP { 16 } else { 6 };
        let Some(&[hi, lo]) = frame.get(field..field + 2).and_then(|b| b.first_chunk()) else {
            return false;
        };
        if u16::from_be_bytes([hi, lo]) != pseudo {
            return false;
        }
    }
    complete_checked(frame)
}

/// Folds a sum below 2^34 to 16 bits (three end-around carries; `fold` takes four, for any
/// 64-bit sum).
#[inline(always)]
fn fold16(acc: u64) -> u16 {
    let s = (acc & 0xffff) + (acc >> 16);
    let s = (s & 0xffff) + (s >> 16);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// [`complete_if_partial`] in full: any IPv4 header length, IPv6, VLAN tags, every check.
#[cold]
fn complete_checked(frame: &mut [u8]) -> bool {
    let Some((l3, et)) = l3_start(frame) else { return false };
    let Some((l4, len, proto, pseudo)) = (match et {
        ETH_IPV4 => v4_l4(frame, l3),
        ETH_IPV6 => v6_l4(frame, l3),
        _ => None,
    }) else {
        return false;
    };
    let field = l4 + if proto == PROTO_TCP { 16 } else { 6 };
    let min = if proto == PROTO_TCP { 20 } else { 8 };
    let Some(&[hi, lo]) = frame.get(field..field + 2).and_then(|b| b.first_chunk()) else {
        return false;
    };
    if len < min || u16::from_be_bytes([hi, lo]) != fold(u64::from(pseudo)) {
        return false;
    }
    complete_at(&mut frame[..l4 + len], l4, field - l4).is_ok()
}

/// (L4 offset, L4 length, protocol, pseudo-header sum) of an unfragmented IPv4 TCP/UDP packet.
#[inline]
fn v4_l4(frame: &[u8], l3: usize) -> Option<(usize, usize, u8, u32)> {
    let h: &[u8; 20] = frame.get(l3..)?.first_chunk()?;
    let proto = h[9];
    let ihl = usize::from(h[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
    if h[0] >> 4 != 4
        || (proto != PROTO_TCP && proto != PROTO_UDP)
        || fragment
        || ihl < 20
        || total < ihl
        || l3 + total > frame.len()
    {
        return None;
    }
    let (src, dst) =
        (Ipv4Addr::new(h[12], h[13], h[14], h[15]), Ipv4Addr::new(h[16], h[17], h[18], h[19]));
    let len = total - ihl;
    Some((l3 + ihl, len, proto, pseudo_header_v4(&src, &dst, proto, len as u32)))
}

/// The same for an IPv6 packet whose next header is TCP or UDP.
#[inline]
fn v6_l4(frame: &[u8], l3: usize) -> Option<(usize, usize, u8, u32)> {
    let h: &[u8; 40] = frame.get(l3..)?.first_chunk()?;
    let proto = h[6];
    let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
    if h[0] >> 4 != 6 || (proto != PROTO_TCP && proto != PROTO_UDP) || l3 + 40 + len > frame.len() {
        return None;
    }
    let src = Ipv6Addr::from(*h[8..24].first_chunk::<16>()?);
    let dst = Ipv6Addr::from(*h[24..40].first_chunk::<16>()?);
    Some((l3 + 40, len, proto, pseudo_header_v6(&src, &dst, proto, len as u32)))
}
