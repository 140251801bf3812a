//! Stages 6a and 6b, filter out and translate out (with a firewall), run per packet by the
//! send pass once the output port is known: pf's out rules on the output interface, and
//! outbound translation (pf translates first, then judges the packet as it will leave);
//! `modulate state`'s rewrites, outbound `scrub`, what a blocked packet gets back (`block
//! return`), and `synproxy state`'s ACKs to servers after the batch. Out of line, so that
//! the send pass without a firewall compiles as if they did not exist.

use io::batch::MAX_BATCH;
use io::{Batch, FrameDesc, FramePool};
use wire::EtherType;

use super::send::decrement_ttl;
use super::{Forwarder, mode};
use crate::counters::DropReason;
use crate::firewall::modulate;
use crate::firewall::{FirewallStage, Refusal};
use crate::punt::PuntBatch;
use fw::state::Modulation;

impl Forwarder {
    /// Stage 6 with a firewall: the send pass with the `out` rules; or, when no packet of the
    /// batch needs them (every one matched a state, the common case, or there are none), as
    /// without a firewall, with only outbound translation added if anything is to translate.
    /// Then `synproxy state`'s ACKs to servers, after the batch's frames.
    #[inline(never)]
    pub(super) fn send_filtered(
        &mut self,
        pool: &mut FramePool,
        input: &mut Batch,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
    ) {
        let Some(f) = &self.firewall else { return };
        // `modulate`: read after the in pass, which may have created the first modulating
        // state.
        let (out_pass, translates, scrub, modulate) =
            (f.out_pass, f.nat_on, f.scrub.on_out, f.fw.modulating());
        if scrub || modulate {
            self.send_rewriting(pool, input, outputs, punts, scrub, modulate);
        } else if out_pass {
            self.send::<{ mode::FILTER_OUT }>(pool, input, outputs, punts);
        } else if translates {
            self.send::<{ mode::TRANSLATE_OUT }>(pool, input, outputs, punts);
        } else {
            self.send::<{ mode::PLAIN }>(pool, input, outputs, punts);
        }
        let Some(f) = &mut self.firewall else { return };
        f.fw.end_batch();
        if f.nat_on {
            let more = f.nat6.len() + f.afto.len();
            f.fw.publish_nat_sessions(f.nat.table_len() + more as u64);
        }
        if !f.proxy_out.is_empty() {
            self.proxy_out(pool, outputs);
        }
    }

    /// The send pass with the `out` rules, and the outbound scrub rules (`scrub`) or `modulate
    /// state`'s rewrite of the TCP packets of states that modulate (`modulate`), or both: its
    /// own function, so that rule sets with neither pay nothing per packet.
    #[inline(never)]
    fn send_rewriting(
        &mut self,
        pool: &mut FramePool,
        input: &mut Batch,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
        scrub: bool,
        modulate: bool,
    ) {
        match (scrub, modulate) {
            (true, false) => {
                self.send::<{ mode::FILTER_OUT | mode::SCRUB_OUT }>(pool, input, outputs, punts)
            }
            (false, _) => {
                self.send::<{ mode::FILTER_OUT | mode::MODULATE }>(pool, input, outputs, punts)
            }
            (true, true) => self.send::<{ mode::FILTER_OUT | mode::SCRUB_OUT | mode::MODULATE }>(
                pool, input, outputs, punts,
            ),
        }
    }

    /// The firewall's out pass of packet `i` on output port `port` (skipped when a state
    /// out_decided it) and NAT's outbound pass. When both run, NAT chooses the translation first
    /// and the rules judge the packet as it will leave (pf translates before it filters).
    /// `SCRUB`: normalized first, as pf does before its state lookup.
    #[inline(always)]
    pub(super) fn filter_out<const MODE: u8>(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        i: usize,
        l3: usize,
        port: u16,
        v4: bool,
    ) -> Result<(), OutStop> {
        let Some(f) = &mut self.firewall else {
            return Ok(());
        };
        let i = i % MAX_BATCH;
        if mode::has(MODE, mode::SCRUB_OUT) {
            f.scrub(pool.frame_mut(desc), l3, v4, port, fw::packet::Dir::Out)
                .map_err(OutStop::Drop)?;
        }
        let nat = v4 && f.nat_on && f.nat.on_port(port);
        let nat6 = !v4 && f.nat_on && f.nat6.on_port(port);
        if !f.out_decided[i] {
            let r = if nat {
                filter_out_translating(f, pool.frame_mut(desc), l3, port, i)
            } else if nat6 {
                filter_out_translating6(f, pool.frame_mut(desc), l3, port, i)
            } else {
                f.fw.filter_out(&f.keys[i], port, f.tcp[i].as_ref(), f.out_tickets[i])
            };
            if f.fw.has_log_hit() {
                f.fw.emit_log(pool.frame(desc), l3, port);
            }
            if let Err(reason) = r {
                if reason == DropReason::FilterBlocked
                    && let Some(refusal) = f.fw.take_refusal(&f.keys[i])
                {
                    return Err(OutStop::Refuse(refusal));
                }
                return Err(OutStop::Drop(reason));
            }
            // Translated already, if the packet was to be.
            return Ok(());
        }
        if nat {
            translate_out(f, pool.frame_mut(desc), l3, port).map_err(OutStop::Drop)?;
        } else if nat6 {
            nat6_out(f, pool.frame_mut(desc), l3, port).map_err(OutStop::Drop)?;
        }
        Ok(())
    }

    /// The TTL decrement and NAT's outbound pass of an IPv4 packet leaving by translating port
    /// `port` that a state out_decided: the common packet (plain TCP or UDP of a flow translated
    /// already) in line, both in one checksum update; any other out of line. `Ok(false)`: its
    /// TTL would reach zero, and it is left as it came.
    #[inline(always)]
    pub(super) fn translate_out_only(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        i: usize,
        l3: usize,
        port: u16,
    ) -> Result<bool, DropReason> {
        let Some(f) = &mut self.firewall else {
            return Ok(true);
        };
        let now = f.fw.now();
        let frame = pool.frame_mut(desc);
        // The classify pass checked that the header is there.
        let Some(ip) = frame.get_mut(l3..).filter(|ip| ip.len() >= 20) else {
            return Ok(true);
        };
        if ip[8] <= 1 {
            return Ok(false);
        }
        if f.nat.outbound_plain(
            &f.fw.rules().rules.timeouts,
            ip,
            port,
            now,
            true,
            f.nat.out_hash(i),
        ) {
            return Ok(true);
        }
        decrement_ttl(frame, l3, true);
        translate_out_other(f, frame, l3, port).map(|()| true)
    }

    /// NAT66's outbound pass of an IPv6 packet leaving by `port` in a batch whose packets
    /// states out_decided (the send pass without the out rules), if NAT66 applies there.
    #[inline(never)]
    pub(super) fn translate_out6(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        l3: usize,
        port: u16,
    ) -> Result<(), DropReason> {
        match self.firewall.as_mut().filter(|f| f.nat6.on_port(port)) {
            Some(f) => nat6_out(f, pool.frame_mut(desc), l3, port),
            None => Ok(()),
        }
    }

    /// A packet the in pass blocked: answered if its rule says so ([`Self::refuse`]).
    #[cold]
    #[inline(never)]
    pub(super) fn blocked(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        i: usize,
        punts: &mut PuntBatch,
    ) {
        match self.firewall.as_mut().and_then(|f| f.refusals[i % MAX_BATCH].take()) {
            Some((in_port, refusal)) => self.refuse(pool, desc, in_port, refusal, punts),
            None => self.drop(pool, desc, DropReason::FilterBlocked),
        }
    }

    /// A packet a `block return` rule blocked: counted as `filter_blocked`, and handed to the
    /// slow path for its answer (a reset or an ICMP unreachable) if this worker's ICMP rate
    /// limit allows one now (the same budget as the router's ICMP errors).
    #[cold]
    #[inline(never)]
    pub(super) fn refuse(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        in_port: u16,
        refusal: Refusal,
        punts: &mut PuntBatch,
    ) {
        self.counts.drop(DropReason::FilterBlocked);
        let now = *self.batch_now.get_or_insert_with(|| self.epoch.elapsed().as_nanos() as u64);
        if self.icmp_limit.as_mut().is_some_and(|limit| limit.allow(now)) {
            punts.push(desc, refusal.punt(), in_port);
        } else {
            pool.free(desc);
        }
    }

    /// `synproxy state`'s ACKs to servers, built during the batch: out of the ports their
    /// SYN-ACKs came in on.
    #[cold]
    #[inline(never)]
    pub(super) fn proxy_out(&mut self, pool: &mut FramePool, outputs: &mut [Batch]) {
        let Some(f) = &mut self.firewall else { return };
        for d in f.proxy_out.drain(..) {
            match outputs.get_mut(usize::from(d.port)) {
                Some(out) if !out.is_full() => out.push(d),
                _ => {
                    pool.free(d);
                    self.counts.drop(DropReason::TxError);
                }
            }
        }
    }

    /// A packet for the router: with `MOD`, rewritten first if its flow's state modulates
    /// (the router's end sees the shifted numbers, as any end behind linerate).
    #[inline(always)]
    pub(super) fn local_rewritten<const MODE: u8>(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        in_port: u16,
        punts: &mut PuntBatch,
    ) {
        if mode::has(MODE, mode::MODULATE) {
            self.modulate_frame(pool.frame_mut(desc));
        }
        self.local(desc, in_port, punts)
    }

    /// `modulate state`'s rewrite of a frame to or from the router itself, its passes done,
    /// if its flow's state modulates (`docs/firewall.md`, "The router's own packets").
    #[cold]
    #[inline(never)]
    pub fn modulate_frame(&self, frame: &mut [u8]) {
        let Some(f) = self.firewall.as_ref().filter(|f| f.fw.modulating()) else {
            return;
        };
        let Ok(l2) = wire::parse_l2(frame) else {
            return;
        };
        let v4 = match l2.ethertype {
            EtherType::Ipv4 => true,
            EtherType::Ipv6 => false,
            _ => return,
        };
        let Some(ip) = frame.get_mut(l2.l3_offset..) else {
            return;
        };
        let Some(target) = modulate::target(ip, v4) else {
            return;
        };
        if let Some(m) = f.fw.modulation(target.flow()) {
            modulate::apply(ip, target, m);
        }
    }

    /// The `modulate state` rewrite of `target`, if its flow's state modulates.
    #[inline(never)]
    pub(super) fn modulation(
        &self,
        target: Option<modulate::Target>,
    ) -> Option<(Modulation, modulate::Target)> {
        let target = target?;
        Some((self.firewall.as_ref()?.fw.modulation(target.flow())?, target))
    }
}

/// Why the out pass stopped a packet.
pub(super) enum OutStop {
    Drop(DropReason),
    /// A `block return` rule blocked it: answer as it says.
    Refuse(Refusal),
}

/// [`crate::firewall::nat::NatStage::outbound`] for the packet at `l3` of `frame`, out of line.
#[inline(never)]
fn translate_out(
    f: &mut FirewallStage,
    frame: &mut [u8],
    l3: usize,
    port: u16,
) -> Result<(), DropReason> {
    let now = f.fw.now();
    let Some(ip) = frame.get_mut(l3..) else {
        return Ok(());
    };
    if f.nat.outbound_plain(&f.fw.rules().rules.timeouts, ip, port, now, false, None) {
        return Ok(());
    }
    f.nat.outbound_other(&f.fw.rules().rules, ip, port, now)
}

/// [`nat_out`] for a packet `outbound_plain` left.
#[cold]
#[inline(never)]
fn translate_out_other(
    f: &mut FirewallStage,
    frame: &mut [u8],
    l3: usize,
    port: u16,
) -> Result<(), DropReason> {
    let now = f.fw.now();
    match frame.get_mut(l3..) {
        Some(ip) => f.nat.outbound_other(&f.fw.rules().rules, ip, port, now),
        None => Ok(()),
    }
}

/// The out pass of packet `i` (at `l3` of `frame`) leaving by translating port `port`, no
/// state having out_decided it: NAT chooses the translation, the out rules judge the packet with
/// its new source, and only then is the translation made and applied; a packet they block
/// leaves no translation behind and stays as it came (a `block return` answers its sender).
#[inline(never)]
fn filter_out_translating(
    f: &mut FirewallStage,
    frame: &mut [u8],
    l3: usize,
    port: u16,
    i: usize,
) -> Result<(), DropReason> {
    let i = i % MAX_BATCH;
    let (key, tcp, ticket) = (f.keys[i], f.tcp[i], f.out_tickets[i]);
    let Some(ip) = frame.get_mut(l3..) else {
        return f.fw.filter_out(&key, port, tcp.as_ref(), ticket);
    };
    let now = f.fw.now();
    let plan = f.nat.plan_outbound(&f.fw.rules().rules, ip, port, now)?;
    f.fw.filter_out_translated(&key, &plan.seen(&key), port, tcp.as_ref(), ticket, plan.pass)?;
    f.nat.commit_outbound(&f.fw.rules().rules, ip, port, now, plan)
}

/// [`filter_out_translating`] for an IPv6 packet (NAT66).
#[inline(never)]
fn filter_out_translating6(
    f: &mut FirewallStage,
    frame: &mut [u8],
    l3: usize,
    port: u16,
    i: usize,
) -> Result<(), DropReason> {
    let i = i % MAX_BATCH;
    let (key, tcp, ticket) = (f.keys[i], f.tcp[i], f.out_tickets[i]);
    let Some(ip) = frame.get_mut(l3..) else {
        return f.fw.filter_out(&key, port, tcp.as_ref(), ticket);
    };
    let now = f.fw.now();
    let plan = f.nat6.plan_outbound(&f.fw.rules().rules, ip, port, now)?;
    f.fw.filter_out_translated(&key, &plan.seen(&key), port, tcp.as_ref(), ticket, plan.pass)?;
    f.nat6.commit_outbound(&f.fw.rules().rules, ip, port, now, plan)
}

/// NAT66's outbound pass of the IPv6 packet at `l3` of `frame` leaving by `port`, out of
/// line.
#[inline(never)]
fn nat6_out(
    f: &mut FirewallStage,
    frame: &mut [u8],
    l3: usize,
    port: u16,
) -> Result<(), DropReason> {
    let now = f.fw.now();
    match frame.get_mut(l3..) {
        Some(ip) => f.nat6.outbound(&f.fw.rules().rules, ip, port, now),
        None => Ok(()),
    }
}
