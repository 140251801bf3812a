//! Stage 2, translate in (with a firewall): pf normalizes a packet before anything else
//! looks at it (inbound `scrub`), then, on the interfaces that translation rules name,
//! replies to `nat`-ed flows get their inside destination back and `rdr` / `binat`
//! redirect, before the in rules and the route lookup see them.

use io::batch::MAX_BATCH;
use io::{FrameDesc, FramePool};

use super::Forwarder;
use crate::counters::DropReason;
use crate::firewall::FirewallStage;
use crate::next::Next;

impl Forwarder {
    /// Stage 2: the batch's start for the firewall (a reloaded rule set adopted), inbound
    /// scrub, then inbound translation: on the interfaces that translation rules name,
    /// replies to `nat`-ed flows get their inside destination back and `rdr` / `binat`
    /// redirect, before the in rules and the route lookup see them.
    #[inline(never)]
    pub(super) fn translate_in(&mut self, pool: &mut FramePool, descs: &[FrameDesc]) {
        let Some(f) = &mut self.firewall else { return };
        f.begin_batch();
        // pf normalizes a packet before anything else looks at it.
        if f.scrub.on_in {
            scrub_in(f, pool, descs, &mut self.next[..]);
        }
        if !f.nat_on {
            return;
        }
        let now = f.fw.now();
        if f.nat.prefetching() {
            let pool = &*pool;
            f.nat.prefetch(self.next.iter().zip(descs).enumerate().filter_map(
                |(i, (next, &desc))| match *next {
                    Next::V4 { l3, in_port, .. } => {
                        Some((i, pool.frame(desc).get(usize::from(l3)..)?, in_port))
                    }
                    _ => None,
                },
            ));
        }
        // Read once: a translation made below is on a port already in it.
        let mask = f.nat.port_mask();
        for (i, next) in self.next[..descs.len().min(MAX_BATCH)].iter_mut().enumerate() {
            let (l3, slot, in_port) = match *next {
                Next::V4 { l3, slot, in_port } => (l3, slot, in_port),
                Next::V6 { l3, slot, in_port } => {
                    match translate_in6(f, pool.frame_mut(descs[i]), l3, in_port, now, i) {
                        Ok(Some(dst)) => self.v6_dst[usize::from(slot) % MAX_BATCH] = dst,
                        Ok(None) => {}
                        Err(reason) => *next = Next::Drop(reason),
                    }
                    continue;
                }
                _ => continue,
            };
            if mask & crate::firewall::nat::port_bit(usize::from(in_port)) == 0
                || !f.nat.on_port(in_port)
            {
                continue;
            }
            let frame = pool.frame_mut(descs[i]);
            let Some(ip) = frame.get_mut(usize::from(l3)..) else {
                continue;
            };
            match f.nat.inbound(&f.fw.rules().rules, ip, in_port, now) {
                Ok(Some((dst, pass))) => {
                    self.v4_dst[usize::from(slot) % MAX_BATCH] = dst;
                    if pass {
                        f.mark_nat_pass(i);
                    }
                }
                Ok(None) => {}
                Err(reason) => *next = Next::Drop(reason),
            }
        }
    }
}

/// NAT66's inbound pass over the IPv6 packet at `l3` of `frame` (packet `i` of the batch)
/// arriving on `in_port`: its new destination if translated, or the packet's drop. Out of line: only rule
/// sets with NAT66 reach it with a packet to translate.
#[inline(never)]
fn translate_in6(
    f: &mut FirewallStage,
    frame: &mut [u8],
    l3: u16,
    in_port: u16,
    now: u32,
    i: usize,
) -> Result<Option<u128>, DropReason> {
    let Some(ip) = frame.get_mut(usize::from(l3)..) else { return Ok(None) };
    if !f.nat6.on_port(in_port) {
        return Ok(None);
    }
    let translated = f.nat6.inbound(&f.fw.rules().rules, ip, in_port, now)?;
    if translated.is_some_and(|(_, pass)| pass) {
        f.mark_nat_pass(i);
    }
    Ok(translated.map(|(dst, _)| dst))
}

/// The inbound scrub pass: every packet to route normalized by the first scrub rule that
/// matches it on its input port (out of line: only rule sets with `scrub` run it).
#[inline(never)]
fn scrub_in(f: &mut FirewallStage, pool: &mut FramePool, descs: &[FrameDesc], nexts: &mut [Next]) {
    for (next, &desc) in nexts.iter_mut().zip(descs) {
        let (l3, v4, in_port) = match *next {
            Next::V4 { l3, in_port, .. } => (l3, true, in_port),
            Next::V6 { l3, in_port, .. } => (l3, false, in_port),
            _ => continue,
        };
        if let Err(reason) =
            f.scrub(pool.frame_mut(desc), usize::from(l3), v4, in_port, fw::packet::Dir::In)
        {
            *next = Next::Drop(reason);
        }
    }
}
