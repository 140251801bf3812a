//! pf's `modulate state` in the data plane: the TCP header of a packet whose state modulates
//! is rewritten as it leaves (sequence number, acknowledgement number, SACK blocks), with
//! incremental checksum updates (RFC 1624). The state says how ([`Modulation`]); the state
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

/// The flow of the TCP segment in the IP packet `ip` (the frame from its IP header) and
/// where its TCP header starts: `None` for anything else, a later fragment, or a header cut
/// short.
pub(crate) fn tcp_flow(ip: &[u8], v4: bool) -> Option<(Flow, usize)> {
    let (flow, off) = if v4 {
        let h = ip.get(..20)?;
        let p = Ipv4Packet::new_unchecked(h);
        if u8::from(p.protocol()) != proto::TCP || p.frag_offset() != 0 {
            return None;
        }
        let off = p.header_len();
        let ports = ip.get(off..off + 4)?;
        let sport = u16::from_be_bytes([ports[0], ports[1]]);
        let dport = u16::from_be_bytes([ports[2], ports[3]]);
        (Flow::v4(proto::TCP, p.src_addr_u32(), sport, p.dst_addr_u32(), dport), off)
    } else {
        let p = Ipv6Packet::new_unchecked(ip);
        let (next, off) = p.upper_layer().ok()?;
        if u8::from(next) != proto::TCP {
            return None;
        }
        let ports = ip.get(off..off + 4)?;
        let sport = u16::from_be_bytes([ports[0], ports[1]]);
        let dport = u16::from_be_bytes([ports[2], ports[3]]);
        (Flow::v6(proto::TCP, u128::from(p.src_addr()), sport, p.dst_addr_u128(), dport), off)
    };
    // The rewrite needs the fixed header: sequence, acknowledgement and checksum.
    (ip.len() >= off + 20).then_some((flow, off))
}

/// Rewrites the TCP header `tcp` (from its first byte to the end of the packet) as `m` says,
/// its checksum updated for each field changed.
pub(crate) fn rewrite(tcp: &mut [u8], m: Modulation) {
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

/// Adds `delta` to the 32-bit field at `at`, updating `sum`.
fn shift(tcp: &mut [u8], at: usize, delta: u32, sum: &mut u16) {
    let Some(b) = tcp.get_mut(at..at + 4) else { return };
    let old = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let new = old.wrapping_add(delta);
    b.copy_from_slice(&new.to_be_bytes());
    *sum = update32(*sum, old, new);
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
