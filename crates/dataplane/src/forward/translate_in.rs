//! Stage 2, translate in (with a firewall): pf normalizes a packet before anything else
//! looks at it (inbound `scrub`), then, on the interfaces that translation rules name,
//! replies to `nat`-ed flows get their inside destination back and `rdr` / `binat`
//! redirect, before the in rules and the route lookup see them.

use io::batch::MAX_BATCH;
use io::{FrameDesc, FramePool};

use super::{Forwarder, Found};
use crate::counters::DropReason;
use crate::firewall::FirewallStage;
use crate::next::Next;

impl Forwarder {
    /// Stage 2: the batch's start for the firewall (a reloaded rule set adopted), inbound
    /// scrub, then inbound translation: on the interfaces that translation rules name,
    /// replies to `nat`-ed flows get their inside destination back and `rdr` / `binat`
    /// redirect, before the in rules and the route lookup see them.
    #[inline(never)]
    pub(super) fn translate_in(
        &mut self,
        pool: &mut FramePool,
        descs: &mut [FrameDesc],
        found: &mut Found,
    ) {
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
            f.nat.prefetch(self.next.iter().zip(descs.iter()).enumerate().filter_map(
                |(i, (next, &desc))| match *next {
                    Next::V4 { l3, in_port, .. } => {
                        Some((i, pool.frame(desc).get(usize::from(l3)..)?, in_port))
                    }
                    _ => None,
                },
            ));
        }
        if f.nat6_on {
            return self.translate_in_mixed(pool, descs, found, now);
        }
        // Read once: a translation made below is on a port already in it.
        let mask = f.nat.port_mask();
        for (i, next) in self.next[..descs.len().min(MAX_BATCH)].iter_mut().enumerate() {
            let Next::V4 { l3, slot, in_port } = *next else {
                continue;
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

    /// [`translate_in`](Self::translate_in) with NAT66 or `af-to` at work: IPv6 packets
    /// translated too, and `af-to`'s IPv4 replies rebuilt as IPv6. Its own function, so that
    /// IPv4's loop stays as it was without them.
    #[inline(never)]
    fn translate_in_mixed(
        &mut self,
        pool: &mut FramePool,
        descs: &mut [FrameDesc],
        found: &mut Found,
        now: u32,
    ) {
        let Some(f) = &mut self.firewall else { return };
        // Read once: a translation made below is on a port already in it.
        let mask = f.nat.port_mask();
        let replies_af = f.afto.has_translations();
        let replies_46 = f.afto46.has_translations();
        for i in 0..descs.len().min(MAX_BATCH) {
            let (l3, slot, in_port) = match self.next[i] {
                Next::V4 { l3, slot, in_port } => (l3, slot, in_port),
                Next::V6 { l3, slot, in_port } => {
                    // A reply of a NAT46 flow becomes IPv4, routed by the IPv4 table.
                    if replies_46 {
                        match af46_in_v6(f, pool, &mut descs[i], l3, now) {
                            Ok(Some(dst)) => {
                                let s = found.n4 % MAX_BATCH;
                                found.n4 += 1;
                                self.v4_dst[s] = dst;
                                self.next[i] = Next::V4 { l3, slot: s as u16, in_port };
                                continue;
                            }
                            Ok(None) => {}
                            Err(reason) => {
                                self.next[i] = Next::Drop(reason);
                                continue;
                            }
                        }
                    }
                    let frame = pool.frame_mut(descs[i]);
                    let r = translate_in6(f, frame, l3, in_port, now, i);
                    match r {
                        Ok(Some(dst)) => self.v6_dst[usize::from(slot) % MAX_BATCH] = dst,
                        Ok(None) => {}
                        Err(reason) => self.next[i] = Next::Drop(reason),
                    }
                    if r.is_ok()
                        && f.afto.on_port(in_port)
                        && let Err(reason) = af_in_v6(f, pool.frame(descs[i]), l3, in_port, now, i)
                    {
                        self.next[i] = Next::Drop(reason);
                    }
                    continue;
                }
                _ => continue,
            };
            // A NAT46 flow's packet: rebuilt as IPv6 after the in pass (`translate_af`).
            if f.afto46.on_port(in_port) {
                match af46_in_v4(f, pool.frame(descs[i]), l3, in_port, now, i) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(reason) => {
                        self.next[i] = Next::Drop(reason);
                        continue;
                    }
                }
            }
            // A reply of an `af-to` flow becomes IPv6, routed by the IPv6 table.
            if replies_af {
                match af_in_v4(f, pool, &mut descs[i], l3, now) {
                    Ok(Some(dst)) => {
                        let s = found.n6 % MAX_BATCH;
                        found.n6 += 1;
                        self.v6_dst[s] = dst;
                        self.next[i] = Next::V6 { l3, slot: s as u16, in_port };
                        continue;
                    }
                    Ok(None) => {}
                    Err(reason) => {
                        self.next[i] = Next::Drop(reason);
                        continue;
                    }
                }
            }
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
                Err(reason) => self.next[i] = Next::Drop(reason),
            }
        }
    }

    /// After the in pass: each packet an `af-to` translation took and the pass let through,
    /// rebuilt in the other family and routed by its table; the out rules do not judge it
    /// again (its state decided it).
    #[inline(never)]
    pub(super) fn translate_af(
        &mut self,
        pool: &mut FramePool,
        descs: &mut [FrameDesc],
        found: &mut Found,
    ) {
        let Some(f) = &self.firewall else { return };
        let (af64, af46) = (!f.afto.pending.is_empty(), !f.afto46.pending.is_empty());
        if af64 {
            self.translate_af64(pool, descs, found);
        }
        if af46 {
            self.translate_af46(pool, descs, found);
        }
    }

    /// NAT64: IPv6 packets rebuilt as IPv4 ([`crate::firewall::afto`]).
    fn translate_af64(&mut self, pool: &mut FramePool, descs: &mut [FrameDesc], found: &mut Found) {
        let Some(f) = self.firewall.as_mut() else { return };
        let pending = std::mem::take(&mut f.afto.pending);
        for &(i, q) in &pending {
            // The in pass may have dropped it.
            let (Next::V6 { l3, slot, in_port }, Some(desc)) =
                (self.next[i % MAX_BATCH], descs.get_mut(i))
            else {
                continue;
            };
            let frame = pool.frame(*desc);
            // Its hop limit runs out here: answered in its own family, as the kernel would,
            // by routing it back towards its source (the send pass's hop limit check answers
            // "time exceeded" before anything is sent).
            if let Some(ip) = frame.get(usize::from(l3)..usize::from(l3) + 24)
                && ip[7] <= 1
            {
                let src = u128::from_be_bytes(ip[8..24].try_into().unwrap_or_default());
                self.v6_dst[usize::from(slot) % MAX_BATCH] = src;
                continue;
            }
            match f.afto.build_v4(frame, usize::from(l3), q, &mut f.af_buf[..]) {
                Some(n) => {
                    pool.write(desc, &f.af_buf[..n]);
                    let s = found.n4 % MAX_BATCH;
                    found.n4 += 1;
                    self.v4_dst[s] = q.2;
                    self.next[i] = Next::V4 { l3, slot: s as u16, in_port };
                    f.out_decided[i % MAX_BATCH] = true;
                }
                None => self.next[i] = Next::Drop(DropReason::NatUntranslatable),
            }
        }
        f.afto.pending = pending;
    }

    /// NAT46: IPv4 packets rebuilt as IPv6 ([`crate::firewall::afto46`]).
    fn translate_af46(&mut self, pool: &mut FramePool, descs: &mut [FrameDesc], found: &mut Found) {
        let Some(f) = self.firewall.as_mut() else { return };
        let pending = std::mem::take(&mut f.afto46.pending);
        for &(i, q) in &pending {
            let (Next::V4 { l3, slot, in_port }, Some(desc)) =
                (self.next[i % MAX_BATCH], descs.get_mut(i))
            else {
                continue;
            };
            let frame = pool.frame(*desc);
            // Its TTL runs out here: "time exceeded" in IPv4, routed back to its source.
            if let Some(ip) = frame.get(usize::from(l3)..usize::from(l3) + 20)
                && ip[8] <= 1
            {
                let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
                self.v4_dst[usize::from(slot) % MAX_BATCH] = src;
                continue;
            }
            match f.afto46.build_v6(frame, usize::from(l3), q, &mut f.af_buf[..]) {
                Some(n) => {
                    pool.write(desc, &f.af_buf[..n]);
                    let s = found.n6 % MAX_BATCH;
                    found.n6 += 1;
                    self.v6_dst[s] = q.2;
                    self.next[i] = Next::V6 { l3, slot: s as u16, in_port };
                    f.out_decided[i % MAX_BATCH] = true;
                }
                None => self.next[i] = Next::Drop(DropReason::NatUntranslatable),
            }
        }
        f.afto46.pending = pending;
    }
}

/// NAT46's look at an IPv4 packet `i` arriving on `in_port`: queued for translation if its
/// flow is translated or a rule matches it (then it passes the in rules by that rule).
#[inline(never)]
fn af46_in_v4(
    f: &mut FirewallStage,
    frame: &[u8],
    l3: u16,
    in_port: u16,
    now: u32,
    i: usize,
) -> Result<bool, DropReason> {
    let Some(ip) = frame.get(usize::from(l3)..) else { return Ok(false) };
    let queued = f.afto46.inbound_v4(&f.fw.rules().rules, ip, in_port, now, i)?;
    if queued {
        f.mark_nat_pass(i);
    }
    Ok(queued)
}

/// An IPv6 packet that may be the reply of a NAT46 flow: rebuilt as IPv4 in its buffer if it
/// is; its IPv4 destination.
#[inline(never)]
fn af46_in_v6(
    f: &mut FirewallStage,
    pool: &mut FramePool,
    desc: &mut FrameDesc,
    l3: u16,
    now: u32,
) -> Result<Option<u32>, DropReason> {
    let frame = pool.frame(*desc);
    let built =
        f.afto46.inbound_v6(&f.fw.rules().rules, frame, usize::from(l3), now, &mut f.af_buf[..])?;
    let Some((n, dst)) = built else { return Ok(None) };
    pool.write(desc, &f.af_buf[..n]);
    Ok(Some(dst))
}

/// `af-to`'s look at an IPv6 packet `i` arriving on `in_port`: queued for translation if
/// its flow is translated or a rule matches it (then it passes the in rules by that rule).
#[inline(never)]
fn af_in_v6(
    f: &mut FirewallStage,
    frame: &[u8],
    l3: u16,
    in_port: u16,
    now: u32,
    i: usize,
) -> Result<(), DropReason> {
    let Some(ip) = frame.get(usize::from(l3)..) else { return Ok(()) };
    if f.afto.inbound_v6(&f.fw.rules().rules, ip, in_port, now, i)? {
        f.mark_nat_pass(i);
    }
    Ok(())
}

/// An IPv4 packet that may be the reply of an `af-to` flow: rebuilt as IPv6 in its buffer if
/// it is; its IPv6 destination.
#[inline(never)]
fn af_in_v4(
    f: &mut FirewallStage,
    pool: &mut FramePool,
    desc: &mut FrameDesc,
    l3: u16,
    now: u32,
) -> Result<Option<u128>, DropReason> {
    let frame = pool.frame(*desc);
    let built =
        f.afto.inbound_v4(&f.fw.rules().rules, frame, usize::from(l3), now, &mut f.af_buf[..])?;
    let Some((n, dst)) = built else { return Ok(None) };
    pool.write(desc, &f.af_buf[..n]);
    Ok(Some(dst))
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
