//! The forwarder's firewall passes, out of line so that the path without a firewall compiles
//! as if they did not exist: inbound scrub, NAT and filter passes, `synproxy state`'s answers,
//! the apply pass with the `out` rules, outbound NAT and rewrites (`modulate state`), and
//! what a blocked packet gets back (`block return`).

use io::batch::MAX_BATCH;
use io::{Batch, FrameDesc, FramePool};
use wire::EtherType;

use super::classify::classify_frame;
use super::{Forwarder, Lookups, OutStop, Step, decrement_ttl, to_router};
use crate::counters::DropReason;
use crate::filter::modulate;
use crate::filter::{FilterStage, Refusal, Routed, RoutedV4};
use crate::punt::PuntBatch;
use fw::state::Modulation;

impl Forwarder {
    /// The filter pass, right after classify: state lookups, else the `in` rules (see
    /// [`crate::filter::FilterStage`]). `flows`: the classify pass read the IPv4 UDP flows.
    #[inline(never)]
    pub(super) fn filter_in(&mut self, pool: &FramePool, descs: &[FrameDesc], n4: usize, n6: usize, flows: bool) {
        if let Some(f) = &mut self.filter {
            f.filter_in(
                pool,
                descs,
                &mut self.steps[..],
                &self.v4_at[..n4.min(MAX_BATCH)],
                n6 == 0,
                flows,
            );
        }
    }

    /// `synproxy state`'s packets for the handshake packets the in pass dropped as
    /// `synproxy` (the firewall queued what to send for each, in batch order), each built
    /// in the buffer of the packet that called for it ([`crate::filter::synproxy`]): the
    /// client's SYN becomes the router's SYN-ACK (sent back), the client's ACK the router's
    /// SYN to the server and the server's SYN-ACK the ACK to the client (both forwarded as
    /// the packets were to be, past the out pass, as pf's generated packets), and the
    /// server's ACK is built in a new buffer, sent after the batch. The in pass left these
    /// packets as drops, so that its loops stay as without `synproxy state`; their classify
    /// decisions (route lookup slots included) are made again here, in the same order.
    /// Only for a batch with such a packet.
    #[cold]
    #[inline(never)]
    pub(super) fn synproxy(&mut self, pool: &mut FramePool, input: &mut Batch) {
        use crate::filter::synproxy::{self, DEFAULT_MSS, Segment};
        use fw::state::{
            ProxyStep,
            tcp_flags::{ACK, SYN},
        };
        let Some(f) = &mut self.filter else { return };
        let mut queue = std::mem::take(&mut f.fw.proxy_queue);
        let mut steps = queue.drain(..);
        let (mut v4, mut v6, mut at) = (
            [0u32; MAX_BATCH],
            [0u128; MAX_BATCH],
            [RoutedV4::default(); MAX_BATCH],
        );
        let mut lookups = Lookups {
            v4: &mut v4,
            n4: 0,
            v6: &mut v6,
            n6: 0,
            v4_at: &mut at,
        };
        let mut buf = [0u8; synproxy::MAX_FRAME];
        for (i, desc) in input.as_mut_slice().iter_mut().enumerate().take(MAX_BATCH) {
            let classified = classify_frame::<false>(
                pool.frame(*desc),
                desc.port,
                &self.ports,
                &mut lookups,
                Some((desc.addr, i as u16)),
            );
            if self.steps[i] != Step::Drop(DropReason::Synproxy) {
                continue;
            }
            let Some(step) = steps.next() else { break };
            let (Some(step), Some(r)) = (step, classified.routed()) else {
                continue;
            };
            let (l3, v4) = (r.l3, r.v4);
            let built = match step {
                // A SYN to the router's own address: not proxied (the host's answer never
                // reaches the forwarder's proxy); its state becomes a plain one.
                ProxyStep::SynAck { id, .. } if to_router(&self.fib, classified, &lookups) => {
                    f.fw.unproxy(id);
                    self.steps[i] = classified;
                    f.settled[i % MAX_BATCH] = true;
                    continue;
                }
                ProxyStep::SynAck { id, seq, ack } => {
                    let mss = synproxy::mss_of(pool.frame(*desc), l3, v4).unwrap_or(DEFAULT_MSS);
                    f.fw.set_proxy_mss(id, mss);
                    // Window 0, as pf: the client sends nothing before the server's window.
                    let s = Segment {
                        seq,
                        ack,
                        flags: SYN | ACK,
                        win: 0,
                        mss: Some(mss),
                    };
                    synproxy::build(pool.frame(*desc), l3, v4, true, s, &mut buf)
                        .map(|n| (n, Step::Reflect))
                }
                ProxyStep::SynToServer { seq, win, mss } => {
                    let s = Segment {
                        seq,
                        ack: 0,
                        flags: SYN,
                        win,
                        mss: Some(mss),
                    };
                    synproxy::build(pool.frame(*desc), l3, v4, false, s, &mut buf)
                        .map(|n| (n, classified))
                }
                ProxyStep::Established {
                    to_server,
                    to_client,
                } => {
                    let back = Segment {
                        seq: to_server.seq,
                        ack: to_server.ack,
                        flags: ACK,
                        win: to_server.win,
                        mss: None,
                    };
                    if let Some(n) =
                        synproxy::build(pool.frame(*desc), l3, v4, true, back, &mut buf)
                        && let Some(mut copy) = pool.alloc()
                    {
                        pool.write(&mut copy, &buf[..n]);
                        copy.port = desc.port;
                        f.proxy_out.push(copy);
                    }
                    let on = Segment {
                        seq: to_client.seq,
                        ack: to_client.ack,
                        flags: ACK,
                        win: to_client.win,
                        mss: None,
                    };
                    synproxy::build(pool.frame(*desc), l3, v4, false, on, &mut buf)
                        .map(|n| (n, classified))
                }
            };
            if let Some((n, step)) = built {
                pool.write(desc, &buf[..n]);
                self.steps[i] = step;
                // The out pass is skipped for the router's own handshake packets.
                f.settled[i % MAX_BATCH] = true;
            }
        }
        drop(steps);
        // The queue's buffer is kept for the next batch.
        f.fw.proxy_queue = queue;
    }

    /// The batch's start for the firewall, then NAT's inbound pass: on the interfaces that
    /// translation rules name, replies to `nat`-ed flows get their inside destination back
    /// and `rdr` / `binat` redirect, before the inbound filter and the route lookup see them.
    #[inline(never)]
    pub(super) fn nat_in(&mut self, pool: &mut FramePool, descs: &[FrameDesc]) {
        let Some(f) = &mut self.filter else { return };
        f.begin_batch();
        // pf normalizes a packet before anything else looks at it.
        if f.scrub.on_in {
            scrub_in(f, pool, descs, &mut self.steps[..]);
        }
        if !f.nat_on {
            return;
        }
        let now = f.fw.now();
        if f.nat.prefetching() {
            let pool = &*pool;
            f.nat
                .prefetch(self.steps.iter().zip(descs).enumerate().filter_map(
                    |(i, (step, &desc))| match *step {
                        Step::V4 { l3, in_port, .. } => {
                            Some((i, pool.frame(desc).get(usize::from(l3)..)?, in_port))
                        }
                        _ => None,
                    },
                ));
        }
        // Read once: a translation made below is on a port already in it.
        let mask = f.nat.port_mask();
        for (i, step) in self.steps[..descs.len().min(MAX_BATCH)]
            .iter_mut()
            .enumerate()
        {
            let Step::V4 { l3, slot, in_port } = *step else {
                continue;
            };
            if mask & crate::filter::nat::port_bit(usize::from(in_port)) == 0
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
                Err(reason) => *step = Step::Drop(reason),
            }
        }
    }

    /// The apply pass with the `out` rules; or, when no packet of the batch needs them (every
    /// one matched a state, the common case, or there are none), as without a firewall, with
    /// only NAT's outbound pass added if anything is to translate.
    #[inline(never)]
    pub(super) fn apply_filtered(
        &mut self,
        pool: &mut FramePool,
        input: &mut Batch,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
    ) {
        // `modulate`: read after the in pass, which may have created the first modulating
        // state.
        let (out_pass, nat, scrub, modulate) = self
            .filter
            .as_ref()
            .map_or((false, false, false, false), |f| {
                (f.out_pass, f.nat_on, f.scrub.on_out, f.fw.modulating())
            });
        if scrub || modulate {
            self.apply_rewriting(pool, input, outputs, punts, scrub, modulate);
        } else if out_pass {
            for (desc, i) in input.drain().zip(0..MAX_BATCH) {
                let step = self.steps[i % MAX_BATCH];
                self.apply::<true, false, false, false>(pool, desc, i, step, outputs, punts);
            }
        } else if nat {
            for (desc, i) in input.drain().zip(0..MAX_BATCH) {
                let step = self.steps[i % MAX_BATCH];
                self.apply::<false, true, false, false>(pool, desc, i, step, outputs, punts);
            }
        } else {
            for (desc, i) in input.drain().zip(0..MAX_BATCH) {
                let step = self.steps[i % MAX_BATCH];
                self.apply::<false, false, false, false>(pool, desc, i, step, outputs, punts);
            }
        }
        if let Some(f) = &mut self.filter {
            f.fw.end_batch();
        }
    }

    /// The apply pass with the `out` rules, and the outbound scrub rules (`scrub`) or `modulate
    /// state`'s rewrite of the TCP packets of states that modulate (`modulate`), or both: its
    /// own function, so that rule sets with neither pay nothing per packet.
    #[inline(never)]
    fn apply_rewriting(
        &mut self,
        pool: &mut FramePool,
        input: &mut Batch,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
        scrub: bool,
        modulate: bool,
    ) {
        for (desc, i) in input.drain().zip(0..MAX_BATCH) {
            let step = self.steps[i % MAX_BATCH];
            match (scrub, modulate) {
                (true, false) => {
                    self.apply::<true, false, true, false>(pool, desc, i, step, outputs, punts)
                }
                (false, _) => {
                    self.apply::<true, false, false, true>(pool, desc, i, step, outputs, punts)
                }
                (true, true) => {
                    self.apply::<true, false, true, true>(pool, desc, i, step, outputs, punts)
                }
            }
        }
    }

    /// The firewall's out pass of packet `i` on output port `port` (skipped when a state
    /// settled it) and NAT's outbound pass. When both run, NAT chooses the translation first
    /// and the rules judge the packet as it will leave (pf translates before it filters).
    /// `SCRUB`: normalized first, as pf does before its state lookup.
    #[inline(always)]
    pub(super) fn out_pass<const SCRUB: bool>(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        i: usize,
        l3: usize,
        port: u16,
        v4: bool,
    ) -> Result<(), OutStop> {
        let Some(f) = &mut self.filter else {
            return Ok(());
        };
        let i = i % MAX_BATCH;
        if SCRUB {
            f.scrub(pool.frame_mut(desc), l3, v4, port, fw::packet::Dir::Out)
                .map_err(OutStop::Drop)?;
        }
        // Translation is IPv4's.
        let nat = v4 && f.nat_on && f.nat.on_port(port);
        if !f.settled[i] {
            let r = if nat {
                filter_out_translating(f, pool.frame_mut(desc), l3, port, i)
            } else {
                f.fw.filter_out(&f.keys[i], port, f.tcp[i].as_ref(), f.tickets[i])
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
            nat_out(f, pool.frame_mut(desc), l3, port).map_err(OutStop::Drop)?;
        }
        Ok(())
    }

    /// The TTL decrement and NAT's outbound pass of an IPv4 packet leaving by translating port
    /// `port` that a state settled: the common packet (plain TCP or UDP of a flow translated
    /// already) in line, both in one checksum update; any other out of line. `Ok(false)`: its
    /// TTL would reach zero, and it is left as it came.
    #[inline(always)]
    pub(super) fn nat_only(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        i: usize,
        l3: usize,
        port: u16,
    ) -> Result<bool, DropReason> {
        let Some(f) = &mut self.filter else {
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
        nat_out_other(f, frame, l3, port).map(|()| true)
    }

    /// A packet the in pass blocked: answered if its rule says so ([`Self::refuse`]).
    #[cold]
    #[inline(never)]
    pub(super) fn blocked(&mut self, pool: &mut FramePool, desc: FrameDesc, i: usize, punts: &mut PuntBatch) {
        match self
            .filter
            .as_mut()
            .and_then(|f| f.refusals[i % MAX_BATCH].take())
        {
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
        let now = *self
            .batch_now
            .get_or_insert_with(|| self.epoch.elapsed().as_nanos() as u64);
        if self
            .icmp_limit
            .as_mut()
            .is_some_and(|limit| limit.allow(now))
        {
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
        let Some(f) = &mut self.filter else { return };
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
    pub(super) fn local_rewritten<const MOD: bool>(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        in_port: u16,
        punts: &mut PuntBatch,
    ) {
        if MOD {
            self.modulate_frame(pool.frame_mut(desc));
        }
        self.local(desc, in_port, punts)
    }

    /// `modulate state`'s rewrite of a frame to or from the router itself, its passes done,
    /// if its flow's state modulates (`docs/firewall.md`, "The router's own packets").
    #[cold]
    #[inline(never)]
    pub fn modulate_frame(&self, frame: &mut [u8]) {
        let Some(f) = self.filter.as_ref().filter(|f| f.fw.modulating()) else {
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
        Some((self.filter.as_ref()?.fw.modulation(target.flow())?, target))
    }
}

/// The inbound scrub pass: every packet to route normalized by the first scrub rule that
/// matches it on its input port (out of line: only rule sets with `scrub` run it).
#[inline(never)]
fn scrub_in(f: &mut FilterStage, pool: &mut FramePool, descs: &[FrameDesc], steps: &mut [Step]) {
    for (step, &desc) in steps.iter_mut().zip(descs) {
        let (l3, v4, in_port) = match *step {
            Step::V4 { l3, in_port, .. } => (l3, true, in_port),
            Step::V6 { l3, in_port, .. } => (l3, false, in_port),
            _ => continue,
        };
        if let Err(reason) = f.scrub(
            pool.frame_mut(desc),
            usize::from(l3),
            v4,
            in_port,
            fw::packet::Dir::In,
        ) {
            *step = Step::Drop(reason);
        }
    }
}

/// [`crate::filter::nat::NatStage::outbound`] for the packet at `l3` of `frame`, out of line.
#[inline(never)]
fn nat_out(f: &mut FilterStage, frame: &mut [u8], l3: usize, port: u16) -> Result<(), DropReason> {
    let now = f.fw.now();
    let Some(ip) = frame.get_mut(l3..) else {
        return Ok(());
    };
    if f.nat
        .outbound_plain(&f.fw.rules().rules.timeouts, ip, port, now, false, None)
    {
        return Ok(());
    }
    f.nat.outbound_other(&f.fw.rules().rules, ip, port, now)
}

/// [`nat_out`] for a packet `outbound_plain` left.
#[cold]
#[inline(never)]
fn nat_out_other(
    f: &mut FilterStage,
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
/// state having settled it: NAT chooses the translation, the out rules judge the packet with
/// its new source, and only then is the translation made and applied; a packet they block
/// leaves no translation behind and stays as it came (a `block return` answers its sender).
#[inline(never)]
fn filter_out_translating(
    f: &mut FilterStage,
    frame: &mut [u8],
    l3: usize,
    port: u16,
    i: usize,
) -> Result<(), DropReason> {
    let i = i % MAX_BATCH;
    let (key, tcp, ticket) = (f.keys[i], f.tcp[i], f.tickets[i]);
    let Some(ip) = frame.get_mut(l3..) else {
        return f.fw.filter_out(&key, port, tcp.as_ref(), ticket);
    };
    let now = f.fw.now();
    let plan = f.nat.plan_outbound(&f.fw.rules().rules, ip, port, now)?;
    f.fw.filter_out_translated(
        &key,
        &plan.seen(&key),
        port,
        tcp.as_ref(),
        ticket,
        plan.pass,
    )?;
    f.nat
        .commit_outbound(&f.fw.rules().rules, ip, port, now, plan)
}
