//! pf's `modulate state` in the data plane: the TCP header of a packet whose state modulates
//! is rewritten as it leaves (sequence number, acknowledgement number, SACK blocks), with
//! incremental checksum updates (RFC 1624), and so is the quoted sequence number of an ICMP
//! error about one of its packets. The state says how ([`Modulation`]); the state
//! table tracks both ends in their own sequence spaces, so the rewrite is the last thing
//! done to the packet, after its out pass (and NAT's address rewrite, which it commutes
//! with: the two touch different fields, and each updates the checksum for its own).

use fw::packet::proto;
use fw::state::{Flow, Modulation};
use wire::checksum::update32;
use wire::{Ipv4Packet, Ipv6Packet};

/// TCP option kinds (RFC 9293 3.2, RFC 2018).
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_SACK: u8 = 5;

/// What of a packet `modulate state` may rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A TCP segment whose header starts at `off` (from the IP header).
    Segment { flow: Flow, off: usize },
    /// An ICMP error quoting a TCP segment: the quoted sequence number at `seq_at`, the
    /// ICMP checksum at `sum_at`; `flow` is the quoted packet's.
    Quoted { flow: Flow, seq_at: usize, sum_at: usize },
}

impl Target {
    pub(crate) fn flow(&self) -> &Flow {
        match self {
            Target::Segment { flow, .. } | Target::Quoted { flow, .. } => flow,
        }
    }
}

/// The TCP segment, or the ICMP error quoting one, in the IP packet `ip` (the frame from its
/// IP header): `None` for anything else, a later fragment, or a header cut short.
pub(crate) fn target(ip: &[u8], v4: bool) -> Option<Target> {
    let (flow, proto_, off) = if v4 { l4_v4(ip)? } else { l4_v6(ip)? };
    match proto_ {
        // The rewrite needs the fixed header: sequence, acknowledgement and checksum.
        proto::TCP => (ip.len() >= off + 20).then_some(Target::Segment { flow: flow?, off }),
        proto::ICMP if matches!(*ip.get(off)?, 3 | 4 | 11 | 12) => quoted(ip, off, true),
        proto::ICMPV6 if (1..=4).contains(ip.get(off)?) => quoted(ip, off, false),
        _ => None,
    }
}

/// An ICMP error at `off` of `ip` (of family `v4`) quoting (at least the first 8 bytes of) a
/// TCP segment.
fn quoted(ip: &[u8], off: usize, v4: bool) -> Option<Target> {
    let inner = ip.get(off + 8..)?;
    let (flow, proto_, l4) = if v4 { l4_v4(inner)? } else { l4_v6(inner)? };
    (proto_ == proto::TCP && inner.len() >= l4 + 8).then_some(Target::Quoted {
        flow: flow?,
        seq_at: off + 8 + l4 + 4,
        sum_at: off + 2,
    })
}

/// An IPv4 packet's protocol, where its payload starts, and the flow of a TCP segment (not
/// a later fragment) with its ports there.
fn l4_v4(ip: &[u8]) -> Option<(Option<Flow>, u8, usize)> {
    let p = Ipv4Packet::new_unchecked(ip.get(..20)?);
    if p.frag_offset() != 0 {
        return None;
    }
    let (proto_, off) = (u8::from(p.protocol()), p.header_len());
    let flow =
        ports(ip, off).map(|(s, d)| Flow::v4(proto::TCP, p.src_addr_u32(), s, p.dst_addr_u32(), d));
    Some((flow.filter(|_| proto_ == proto::TCP), proto_, off))
}

/// [`l4_v4`] for IPv6, behind its extension headers.
fn l4_v6(ip: &[u8]) -> Option<(Option<Flow>, u8, usize)> {
    if ip.len() < 40 {
        return None;
    }
    let p = Ipv6Packet::new_unchecked(ip);
    let (next, off) = p.upper_layer().ok()?;
    let proto_ = u8::from(next);
    let flow = ports(ip, off)
        .map(|(s, d)| Flow::v6(proto::TCP, u128::from(p.src_addr()), s, p.dst_addr_u128(), d));
    Some((flow.filter(|_| proto_ == proto::TCP), proto_, off))
}

fn ports(ip: &[u8], off: usize) -> Option<(u16, u16)> {
    let b = ip.get(off..off + 4)?;
    Some((u16::from_be_bytes([b[0], b[1]]), u16::from_be_bytes([b[2], b[3]])))
}

/// Rewrites `target` of the IP packet `ip` as `m` says (for an ICMP error, `m` is the
/// rewrite of the quoted packet's sender). The quoted segment left the firewall shifted; the
/// error goes back to its sender, which gets its own number again (pf_test_state_icmp), the
/// ICMP checksum updated (the quoted segment's own checksum covers bytes the error does not
/// carry: pf leaves it too).
pub(crate) fn apply(ip: &mut [u8], target: Target, m: Modulation) {
    match target {
        Target::Segment { off, .. } => rewrite(ip.get_mut(off..).unwrap_or(&mut []), m),
        Target::Quoted { seq_at, sum_at, .. } => {
            if m.seq_add == 0 || ip.len() < seq_at + 4 || ip.len() < sum_at + 2 {
                return;
            }
            let mut sum = u16::from_be_bytes([ip[sum_at], ip[sum_at + 1]]);
            shift(ip, seq_at, m.seq_add.wrapping_neg(), &mut sum);
            ip[sum_at..sum_at + 2].copy_from_slice(&sum.to_be_bytes());
        }
    }
}

/// Rewrites the TCP header `tcp` (from its first byte to the end of the packet) as `m` says,
/// its checksum updated for each field changed.
fn rewrite(tcp: &mut [u8], m: Modulation) {
    if tcp.len() < 20 {
        return;
    }
    let mut sum = u16::from_be_bytes([tcp[16], tcp[17]]);
    if m.seq_add != 0 {
        shift(tcp, 4, m.seq_add, &mut sum);
    }
    if m.ack_sub != 0 {
        // pf shifts the field whatever the flags (pf_tcp_track_full).
        shift(tcp, 8, m.ack_sub.wrapping_neg(), &mut sum);
        let hlen = usize::from(tcp[12] >> 4) * 4;
        if hlen > 20 && hlen <= tcp.len() {
            sack_blocks(tcp, hlen, m.ack_sub.wrapping_neg(), &mut sum);
        }
    }
    tcp[16..18].copy_from_slice(&sum.to_be_bytes());
}

/// Adds `delta` to the 32-bit field at `at`, updating `sum` (a checksum over 16-bit words
/// from byte 0 of `tcp`).
fn shift(tcp: &mut [u8], at: usize, delta: u32, sum: &mut u16) {
    let Some(b) = tcp.get_mut(at..at + 4) else { return };
    let old = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let new = old.wrapping_add(delta);
    b.copy_from_slice(&new.to_be_bytes());
    // A field at an odd offset (a SACK edge behind unpadded options) straddles three words:
    // its bytes count with their places in each half swapped.
    let (old, new) =
        if at.is_multiple_of(2) { (old, new) } else { (swap_halves(old), swap_halves(new)) };
    *sum = update32(*sum, old, new);
}

/// `v` with the two bytes of each 16-bit half swapped.
fn swap_halves(v: u32) -> u32 {
    ((v & 0x00ff_00ff) << 8) | ((v >> 8) & 0x00ff_00ff)
}

/// pf_modulate_sack: the edges of the SACK blocks in the options (bytes 20..`hlen`) shifted
/// by `delta`. A malformed option list ends the walk, leaving the rest as it is.
fn sack_blocks(tcp: &mut [u8], hlen: usize, delta: u32, sum: &mut u16) {
    let mut i = 20;
    while i < hlen {
        match tcp[i] {
            OPT_END => return,
            OPT_NOP => i += 1,
            kind => {
                let Some(&len) = tcp.get(i + 1) else { return };
                let len = usize::from(len);
                if len < 2 || i + len > hlen {
                    return;
                }
                if kind == OPT_SACK && len >= 10 && (len - 2) % 8 == 0 {
                    // Each block: left edge, right edge, 4-byte aligned only by chance (the
                    // fields are unaligned in general: read bytewise).
                    let mut at = i + 2;
                    while at + 8 <= i + len {
                        shift(tcp, at, delta, sum);
                        shift(tcp, at + 4, delta, sum);
                        at += 8;
                    }
                }
                i += len;
            }
        }
    }
}

#[cfg(test)]
#[path = "modulate_tests.rs"]
mod tests;
