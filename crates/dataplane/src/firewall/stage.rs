//! The filter pass over a batch: state lookups, else the `in` rules, for every packet the
//! classify pass found routable, in order.
//!
//! While the state table is empty (a rule set without `keep state`), every packet gets its
//! full [`PacketKey`] and goes through the rules. Otherwise the lookups run in two loops:
//! the quick loop ([`fw::state::QuickHits`]) takes the packets of established UDP flows
//! whose state they would not change, reading their flow straight from the header
//! ([`keys::udp_flow_v4`]); then the general lookup runs, in order, on the packets it left
//! (their flow from the header too if IPv4 TCP or UDP, [`keys::header_flow_v4`], else the full
//! key). How the quick loop finds the flows depends on the table's working set (the index
//! lines its states occupy and its slots, `fw::state::StateTable::working_set_bytes`: a table
//! sized for 1M states that holds 2000 counts as small):
//!
//! * small enough to stay cached ([`CACHED_TABLE_BYTES`]): each packet looked up as soon as
//!   its flow is read. When no IPv6 packet is to route, the loop walks the classify pass's
//!   list of IPv4 headers ([`RoutedV4`]) rather than the batch;
//! * larger: VPP's and DPDK's batched lookup. Read and hash every packet's flow and prefetch
//!   its index line; then probe every index line and prefetch the state it names; then the
//!   two loops, the quick one starting from the probes' results. The cache misses of a batch
//!   overlap instead of adding up. The general loop checks the probe's result before using
//!   it, so the outcome is the same as the small table's.

use fw::packet::{PacketKey, proto};
use fw::passes::{Hit, Ticket};
use fw::state::{Flow, FlowV4, StateId, TcpSegment, is_icmp_error};
use io::batch::MAX_BATCH;
use io::{FrameDesc, FramePool};

use super::{Firewall, keys};
use crate::counters::DropReason;
use crate::next::{Next, RoutedPacket};

/// Bytes of state table (the index, and the slots up to their high-water mark) up to which
/// each flow is looked up as soon as it is read: a mid-size L2 cache. The batched lookup's
/// extra loops cost instructions that only pay off when lookups miss the cache
/// (docs/performance.md, "Measurements behind the code").
const CACHED_TABLE_BYTES: usize = 1 << 20;

/// Where an IPv4 packet to route is. The classify pass lists them for the quick loop, which
/// then reads neither the batch's descriptors nor its decisions; and, when the quick loop
/// will run ([`FirewallStage::reads_udp_flows`]), the packet's UDP flow, read while the
/// header is in the cache (the quick loop reading the header again missed the L1 cache:
/// docs/performance.md, "The quick loop's flows read by the classify pass").
#[derive(Clone, Copy, Default)]
pub(crate) struct RoutedV4 {
    /// The pool address of its IP header.
    pub header_addr: u32,
    /// Its index in the batch.
    pub index: u16,
    /// Its IP length if `flow` is its flow ([`keys::udp_flow_v4`] accepted it), else 0.
    pub udp_len: u16,
    /// It is UDP, whether or not `flow` was read ([`keys::is_udp_v4`]).
    pub udp: bool,
    pub flow: FlowV4,
}

impl RoutedV4 {
    /// The entry of the IPv4 packet `ip` (from its header to the end of the frame, validated
    /// by the classify pass) at pool address `header_addr`, packet `index`: with its UDP flow
    /// if `FLOW`.
    #[inline(always)]
    pub fn new<const FLOW: bool>(header_addr: u32, index: u16, ip: &[u8]) -> RoutedV4 {
        let mut r = RoutedV4 { header_addr, index, ..RoutedV4::default() };
        if FLOW {
            match ip.first_chunk().and_then(keys::udp_flow_v4) {
                Some((flow, len)) => (r.flow, r.udp_len, r.udp) = (flow, len, true),
                None => r.udp = keys::is_udp_v4(ip, 0),
            }
        }
        r
    }
}

/// A packet's flow as the batched lookup reads it straight from the header, hashed and
/// probed: an IPv4 TCP or UDP packet whose flow [`keys::header_flow_v4`] read (`valid`), or an IPv6
/// UDP one [`keys::udp_flow_v6`] read (`v6`, its flow in `FirewallStage::header_flows6`, for the
/// quick loop only: kept apart so that IPv4's entries stay small).
#[derive(Clone, Copy, Default)]
struct HeaderFlow {
    flow: FlowV4,
    hash: u64,
    /// Batched lookup only: where the index probe stopped ([`fw::state::StateTable::probe`]).
    probe: u32,
    /// IP length, for the rule counters.
    len: u16,
    valid: bool,
    v6: bool,
    /// Neither, but maybe UDP (see [`keys::is_udp_v4`], [`keys::may_be_udp_v6`]).
    odd_udp: bool,
}

/// The firewall of one worker and its per-batch scratch.
pub(crate) struct FirewallStage {
    pub fw: Firewall,
    /// The keys the classifier sees, built only for packets that go through the rules.
    pub keys: Box<[PacketKey; MAX_BATCH]>,
    pub tcp: Box<[Option<TcpSegment>; MAX_BATCH]>,
    /// The out pass is decided (a state out_decided the packet, or the out pass cannot change
    /// anything): the send pass skips it. Otherwise it runs with `out_tickets[i]`.
    pub out_decided: Box<[bool; MAX_BATCH]>,
    /// What the in pass of each packet not `out_decided` left to its out pass.
    pub out_tickets: Box<[Ticket; MAX_BATCH]>,
    /// Some packet of the batch needs the out pass. Otherwise the send pass runs as without
    /// a firewall.
    pub out_pass: bool,
    header_flows: Box<[HeaderFlow; MAX_BATCH]>,
    header_flows6: Box<[Flow; MAX_BATCH]>,
    /// The packets the quick loop left to the general path, by index in the batch.
    left: Box<[u16; MAX_BATCH]>,
    /// IPv4 datagrams in fragments: later fragments take their first's ports.
    pub frags: super::frags::FragTable,
    /// Later fragments waiting for their first.
    pub held: super::frag_hold::HeldFragments,
    /// IPv6 datagrams in fragments: their first fragments' protocols and ports.
    pub frags6: super::frags6::FragTable6,
    /// Translations (`nat`, `rdr`, `binat`).
    pub nat: super::nat::NatStage,
    /// IPv6 translations (pf's NAT66).
    pub nat6: super::nat6::Nat6Stage,
    /// IPv6 to IPv4 translations (OpenBSD's `af-to`, NAT64), and the buffer its frames are
    /// rebuilt in.
    pub afto: super::afto::AfToStage,
    /// NAT46 (`af-to inet6`), the other way.
    pub afto46: super::afto46::Af46Stage,
    pub af_buf: Box<[u8; super::afto::MAX_FRAME]>,
    /// Normalization (`scrub`).
    pub scrub: super::scrub::ScrubStage,
    /// The batch's rule set translates (or translations remain): the NAT passes run.
    pub nat_on: bool,
    /// The batch's NAT66 or `af-to` has anything to do: the inbound pass looks at IPv6
    /// packets, and at IPv4 ones for `af-to`'s replies.
    pub nat6_on: bool,
    /// Packets a translation rule with `pass` redirected (`rdr pass`, `binat pass`): their
    /// inbound pass skips the rules. Valid where `nat_passed` says some were marked.
    nat_pass: Box<[bool; MAX_BATCH]>,
    nat_passed: bool,
    /// For a packet the in pass blocked (`filter_blocked`): its input port and the answer
    /// of its `block return` rule, if it has one (taken by the send pass).
    pub refusals: Box<[Option<(u16, super::Refusal)>; MAX_BATCH]>,
    /// `synproxy state`'s ACKs to servers built during the batch, sent after it.
    pub proxy_out: Vec<FrameDesc>,
}

/// What is known of a packet's state before its key is built.
#[derive(Clone, Copy)]
enum KnownState {
    /// Nothing: look it up by key.
    Unknown,
    /// Its flow has no state.
    Miss,
    /// Its flow's state, which does not settle it.
    Hit(StateId),
}

/// The batched lookup's reading of a packet [`keys::header_flow_v4`] did not take: for an IPv6 one,
/// its UDP flow (into `flow6`) hashed and probed; else whether it may be UDP all the same.
/// Out of line: IPv4's loop stays as it was.
#[inline(never)]
fn header_flow_other(
    table: &fw::state::StateTable,
    frame: &[u8],
    routed: Option<RoutedPacket>,
    flow6: &mut Flow,
) -> HeaderFlow {
    let Some(RoutedPacket { l3, v4, .. }) = routed else {
        return HeaderFlow::default();
    };
    if v4 {
        return HeaderFlow { odd_udp: keys::is_udp_v4(frame, l3), ..HeaderFlow::default() };
    }
    match frame.get(l3..).and_then(|b| b.first_chunk()).and_then(keys::udp_flow_v6) {
        Some((flow, len)) => {
            // Probed at once (IPv4's probes wait for their index lines in a loop of their
            // own): the probe still starts loading the state's slot.
            let hash = table.hash_flow(&flow);
            *flow6 = flow;
            HeaderFlow { hash, probe: table.probe(hash), len, v6: true, ..HeaderFlow::default() }
        }
        None => HeaderFlow { odd_udp: keys::may_be_udp_v6(frame, l3), ..HeaderFlow::default() },
    }
}

/// The flow of an IPv4 TCP/UDP packet (see [`keys::header_flow_v4`]).
#[inline(always)]
fn tcp_udp_flow_v4(
    frame: &[u8],
    l3: usize,
    v4: bool,
    tcp: &mut Option<TcpSegment>,
) -> Option<(FlowV4, u16)> {
    if !v4 {
        return None;
    }
    keys::header_flow_v4(frame.get(l3..)?, tcp)
}

/// The segment to track for a packet of `flow` (UDP has none; `tcp` is stale then).
#[inline(always)]
fn segment<'a>(flow: &FlowV4, tcp: &'a Option<TcpSegment>) -> Option<&'a TcpSegment> {
    if flow.proto() == proto::TCP { tcp.as_ref() } else { None }
}

impl FirewallStage {
    pub fn new(
        fw: Firewall,
        nat: super::nat::NatStage,
        nat6: super::nat6::Nat6Stage,
        afto: super::afto::AfToStage,
    ) -> FirewallStage {
        FirewallStage {
            fw,
            keys: Box::new([PacketKey::ZERO; MAX_BATCH]),
            tcp: Box::new([None; MAX_BATCH]),
            out_decided: Box::new([false; MAX_BATCH]),
            out_tickets: Box::new([Ticket::default(); MAX_BATCH]),
            out_pass: false,
            header_flows: Box::new([HeaderFlow::default(); MAX_BATCH]),
            header_flows6: Box::new([Flow::default(); MAX_BATCH]),
            left: Box::new([0; MAX_BATCH]),
            frags: super::frags::FragTable::new(super::random_seed()),
            held: Default::default(),
            frags6: super::frags6::FragTable6::new(super::random_seed()),
            nat,
            nat6,
            afto,
            afto46: super::afto46::Af46Stage::new(super::random_seed()),
            af_buf: Box::new([0; super::afto::MAX_FRAME]),
            scrub: super::scrub::ScrubStage::new(super::random_seed()),
            nat_on: false,
            nat6_on: false,
            nat_pass: Box::new([false; MAX_BATCH]),
            nat_passed: false,
            refusals: Box::new([None; MAX_BATCH]),
            proxy_out: Vec::with_capacity(MAX_BATCH),
        }
    }

    /// The in pass over a batch (`nexts[i]`: the classify pass's decision for `descs[i]`;
    /// `v4`: where the IPv4 packets to route are, in order, with their UDP flows if `flows`;
    /// `only_v4`: no other packet is to route).
    #[inline(always)]
    pub fn filter_in(
        &mut self,
        pool: &FramePool,
        descs: &[FrameDesc],
        nexts: &mut [Next],
        v4: &[RoutedV4],
        only_v4: bool,
        flows: bool,
    ) {
        self.out_pass = false;
        let n = descs.len().min(nexts.len()).min(MAX_BATCH);
        let (descs, nexts) = (&descs[..n], &mut nexts[..n]);
        if self.fw.state_table().is_empty() {
            self.rules_only(pool, descs, nexts);
        } else if self.fw.state_table().working_set_bytes() <= CACHED_TABLE_BYTES {
            self.cached(pool, descs, nexts, v4, only_v4, flows);
        } else {
            self.batched(pool, descs, nexts);
        }
    }

    /// Whether the classify pass should read the IPv4 UDP flows into its list of IPv4
    /// packets ([`RoutedV4`]): the quick loop over a cached table will look them up, and no
    /// inbound NAT or scrub pass will rewrite the packets in between. Asked before
    /// [`begin_batch`](Self::begin_batch) (so by the last batch's NAT and scrub), the in pass
    /// checks again that it may use them.
    #[inline(always)]
    pub fn reads_udp_flows(&self) -> bool {
        let table = self.fw.state_table();
        !table.is_empty()
            && table.working_set_bytes() <= CACHED_TABLE_BYTES
            && self.fw.quick_loop()
            && !self.nat_on
            && !self.scrub.on_in
    }

    /// Once per batch, before the NAT and filter passes: the firewall adopts a reloaded rule
    /// set, and NAT its plan for it.
    #[inline(always)]
    pub fn begin_batch(&mut self) {
        self.fw.begin_batch();
        let (rules, now) = (self.fw.rules(), self.fw.now);
        // Both run: each plans for a reloaded set and sweeps its table.
        let v4 = self.nat.begin_batch(rules, now);
        let af = self.afto.begin_batch(rules, now) | self.afto46.begin_batch(rules, now);
        self.nat6_on = self.nat6.begin_batch(rules, now) | af;
        self.nat_on = self.nat6_on | v4;
        (self.scrub.on_in, self.scrub.on_out) =
            (self.fw.rules().scrub_in, self.fw.rules().scrub_out);
        if self.nat_passed {
            self.nat_passed = false;
            self.nat_pass.fill(false);
        }
    }

    /// Normalizes the packet at `l3` of `frame` in pass `dir` on `port` ([`super::scrub`]).
    #[inline(always)]
    pub fn scrub(
        &mut self,
        frame: &mut [u8],
        l3: usize,
        v4: bool,
        port: u16,
        dir: fw::packet::Dir,
    ) -> Result<(), DropReason> {
        let (rules, counts) = self.fw.scrub_parts();
        self.scrub.apply(rules, counts, frame, l3, v4, port, dir)
    }

    /// Packet `i` of the batch was redirected by a translation rule with `pass`.
    #[cold]
    pub fn mark_nat_pass(&mut self, i: usize) {
        self.nat_pass[i % MAX_BATCH] = true;
        self.nat_passed = true;
    }

    /// No state can match: every packet through the rules.
    #[inline(always)]
    fn rules_only(&mut self, pool: &FramePool, descs: &[FrameDesc], nexts: &mut [Next]) {
        for (i, (next, &desc)) in nexts.iter_mut().zip(descs).enumerate() {
            if let Some(RoutedPacket { l3, v4, in_port }) = next.routed() {
                let r = self.by_key(pool.frame(desc), l3, v4, in_port, i, KnownState::Unknown);
                self.record(i, next, r);
            }
        }
    }

    /// A cached table: the quick loop over the batch ([`fw::state::QuickHits`]: hits of steady
    /// UDP states), then lookups one after the other for the packets it left, in order.
    /// `flows`: `v4` holds the IPv4 packets' UDP flows as the classify pass read them.
    #[inline(always)]
    fn cached(
        &mut self,
        pool: &FramePool,
        descs: &[FrameDesc],
        nexts: &mut [Next],
        v4: &[RoutedV4],
        only_v4: bool,
        flows: bool,
    ) {
        if !self.fw.quick_loop() {
            let left = leave_the_rest(&mut self.left, 0, 0, descs.len());
            return self.in_order::<false>(pool, descs, nexts, left);
        }
        if only_v4 {
            // NAT's and scrub's inbound passes rewrite packets after the classify pass read them.
            return if flows && !self.nat_on && !self.scrub.on_in {
                self.cached_v4::<true>(pool, descs, nexts, v4)
            } else {
                self.cached_v4::<false>(pool, descs, nexts, v4)
            };
        }
        let mut left = 0;
        let mut quick = self.fw.quick();
        let n = descs.len();
        for (i, (next, desc)) in nexts.iter().zip(descs).enumerate() {
            let Some(RoutedPacket { l3, v4, .. }) = next.routed() else {
                continue;
            };
            let frame = pool.frame(*desc);
            let q = if v4 {
                let header_flow =
                    frame.get(l3..).and_then(|b| b.first_chunk()).and_then(keys::udp_flow_v4);
                Quick::of(
                    header_flow.is_some_and(|(flow, len)| quick.udp_v4(&flow, len)),
                    header_flow.is_none() && keys::is_udp_v4(frame, l3),
                )
            } else {
                let header_flow =
                    frame.get(l3..).and_then(|b| b.first_chunk()).and_then(keys::udp_flow_v6);
                Quick::of(
                    header_flow.is_some_and(|(flow, len)| quick.udp_v6(&flow, len)),
                    header_flow.is_none() && keys::may_be_udp_v6(frame, l3),
                )
            };
            if !record_quick(q, i, n, &mut self.out_decided, &mut self.left, &mut left) {
                break;
            }
        }
        drop(quick);
        self.in_order::<false>(pool, descs, nexts, left);
    }

    /// [`cached`](Self::cached) for a batch whose packets to route are the IPv4 ones of `v4`:
    /// with the flows the classify pass read (`FLOWS`), or read here from their headers. Out
    /// of line: its two instances inlined into the in pass made the quick loop longer
    /// (docs/performance.md, "The quick loop's flows read by the classify pass").
    #[inline(never)]
    fn cached_v4<const FLOWS: bool>(
        &mut self,
        pool: &FramePool,
        descs: &[FrameDesc],
        nexts: &mut [Next],
        v4: &[RoutedV4],
    ) {
        let (mut left, n) = (0, descs.len());
        let mut quick = self.fw.quick();
        for p in v4 {
            let at = p.header_addr as usize;
            // The flow and length if the quick loop can read them, and whether it is UDP.
            let (header_flow, udp) = if FLOWS {
                ((p.udp_len != 0).then_some((p.flow, p.udp_len)), p.udp)
            } else {
                let header_flow = pool.peek(at).and_then(keys::udp_flow_v4);
                (
                    header_flow,
                    header_flow.is_some()
                        || pool.peek::<20>(at).is_some_and(|h| keys::is_udp_v4(h, 0)),
                )
            };
            let q = Quick::of(
                header_flow.is_some_and(|(flow, len)| quick.udp_v4(&flow, len)),
                header_flow.is_none() && udp,
            );
            if !record_quick(
                q,
                usize::from(p.index),
                n,
                &mut self.out_decided,
                &mut self.left,
                &mut left,
            ) {
                break;
            }
        }
        drop(quick);
        self.in_order::<false>(pool, descs, nexts, left)
    }

    /// The fast path's state lookup of packet `i`, and what follows from it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn lookup(
        &mut self,
        i: usize,
        next: &mut Next,
        flow: &FlowV4,
        h: u64,
        probe: Option<u32>,
        len: u16,
        pool: &FramePool,
        desc: FrameDesc,
        l3: usize,
    ) {
        let hit = self.fw.state_hit(flow, h, probe, segment(flow, &self.tcp[i]), len);
        let port = next.routed().map_or(desc.port, |r| r.in_port);
        // A packet the state decides is logged here (`log (all)`); one that goes on to the
        // rules is logged once, after them (`by_key`).
        if matches!(hit, Some(Ok(None) | Err(_))) && self.fw.has_log_hit() {
            self.fw.emit_log(pool.frame(desc), l3, port);
        }
        let known = match hit {
            Some(Ok(None)) => return self.out_decided[i % MAX_BATCH] = true,
            Some(Ok(Some(id))) => KnownState::Hit(id),
            Some(Err(reason)) => return *next = Next::Drop(reason),
            None => KnownState::Miss,
        };
        let r = self.by_key_cold(pool.frame(desc), l3, true, port, i, known);
        self.record(i, next, r);
    }

    /// The batched lookup (see the module documentation), its last step split as in
    /// [`cached`](Self::cached): the quick lookups from the probes' hints, then the
    /// general lookup for the packets they left, in order.
    #[inline(always)]
    fn batched(&mut self, pool: &FramePool, descs: &[FrameDesc], nexts: &mut [Next]) {
        let table = self.fw.state_table();
        for (i, (next, &desc)) in nexts.iter().zip(descs).enumerate() {
            let frame = pool.frame(desc);
            let routed = next.routed();
            let l = routed
                .and_then(|r| tcp_udp_flow_v4(frame, r.l3, r.v4, &mut self.tcp[i % MAX_BATCH]));
            self.header_flows[i % MAX_BATCH] = match l {
                Some((flow, len)) => {
                    let hash = table.hash_v4(&flow);
                    table.prefetch_index(hash);
                    HeaderFlow { flow, hash, probe: 0, len, valid: true, v6: false, odd_udp: false }
                }
                None => {
                    header_flow_other(table, frame, routed, &mut self.header_flows6[i % MAX_BATCH])
                }
            };
        }
        for l in self.header_flows[..descs.len()].iter_mut().filter(|l| l.valid) {
            l.probe = table.probe(l.hash);
        }
        if !self.fw.quick_loop() {
            let left = leave_the_rest(&mut self.left, 0, 0, descs.len());
            return self.in_order::<true>(pool, descs, nexts, left);
        }
        let mut left = 0;
        let mut quick = self.fw.quick();
        for (i, l) in self.header_flows[..descs.len()].iter().enumerate() {
            let hit = l.valid
                && l.flow.proto() == proto::UDP
                && quick.udp_v4_from(&l.flow, l.hash, l.probe, l.len);
            let hit = hit
                || (l.v6
                    && quick.udp_v6_from(
                        &self.header_flows6[i % MAX_BATCH],
                        l.hash,
                        l.probe,
                        l.len,
                    ));
            if !record_quick(
                Quick::of(hit, l.odd_udp),
                i,
                descs.len(),
                &mut self.out_decided,
                &mut self.left,
                &mut left,
            ) {
                break;
            }
        }
        drop(quick);
        self.in_order::<true>(pool, descs, nexts, left);
    }

    /// The general lookup, in order, of the `left` packets the quick loop left (listed in
    /// `self.left`); `BATCHED`: their flows were read, hashed and probed into `self.header_flows`.
    #[inline(always)]
    fn in_order<const BATCHED: bool>(
        &mut self,
        pool: &FramePool,
        descs: &[FrameDesc],
        nexts: &mut [Next],
        left: usize,
    ) {
        for k in 0..left.min(MAX_BATCH) {
            let i = usize::from(self.left[k]);
            let (Some(next), Some(&desc)) = (nexts.get_mut(i), descs.get(i)) else {
                continue;
            };
            let Some(RoutedPacket { l3, v4, in_port }) = next.routed() else {
                continue;
            };
            let i = i % MAX_BATCH;
            let flow = if BATCHED {
                let l = &self.header_flows[i];
                l.valid.then_some((l.flow, l.hash, Some(l.probe), l.len))
            } else {
                tcp_udp_flow_v4(pool.frame(desc), l3, v4, &mut self.tcp[i])
                    .map(|(flow, len)| (flow, self.fw.state_table().hash_v4(&flow), None, len))
            };
            match flow {
                Some((flow, hash, probe, len)) => {
                    self.lookup(i, next, &flow, hash, probe, len, pool, desc, l3)
                }
                None => {
                    let r =
                        self.by_key_cold(pool.frame(desc), l3, v4, in_port, i, KnownState::Unknown);
                    self.record(i, next, r);
                }
            }
        }
    }

    #[inline(always)]
    fn record(&mut self, i: usize, next: &mut Next, r: Result<Option<Ticket>, DropReason>) {
        let i = i % MAX_BATCH;
        match r {
            Ok(None) => self.out_decided[i] = true,
            Ok(Some(ticket)) => {
                self.out_decided[i] = false;
                self.out_tickets[i] = ticket;
                self.out_pass = true;
            }
            Err(DropReason::FilterBlocked) => {
                // Where the send pass finds the answer of a `block return` rule, if any.
                self.refusals[i] = next
                    .routed()
                    .zip(self.fw.take_refusal(&self.keys[i]))
                    .map(|(p, r)| (p.in_port, r));
                *next = Next::Drop(DropReason::FilterBlocked);
            }
            Err(reason) => *next = Next::Drop(reason),
        }
    }

    /// A packet off the fast path: its full key, then (unless the fast path looked its flow
    /// up already, `known`) the state lookup by key, or for an ICMP error the state of the
    /// flow it quotes, then the in pass; then, if its rule logs it, its log record.
    #[inline(always)]
    fn by_key(
        &mut self,
        frame: &[u8],
        l3: usize,
        v4: bool,
        port: u16,
        i: usize,
        known: KnownState,
    ) -> Result<Option<Ticket>, DropReason> {
        let r = self.judge(frame, l3, v4, port, i, known);
        if self.fw.has_log_hit() {
            self.fw.emit_log(frame, l3, port);
        }
        r
    }

    /// [`by_key`](Self::by_key) but for the log.
    #[inline(always)]
    fn judge(
        &mut self,
        frame: &[u8],
        l3: usize,
        v4: bool,
        port: u16,
        i: usize,
        known: KnownState,
    ) -> Result<Option<Ticket>, DropReason> {
        let i = i % MAX_BATCH;
        let (key, tcp) = (&mut self.keys[i], &mut self.tcp[i]);
        keys::extract(frame, l3, v4, port, key, tcp);
        self.fw.fill_route_bits(key);
        // Fragments are never on the fast path (keys::header_flow_v4 refuses them).
        if let Some(ip) = frame.get(l3..).filter(|ip| {
            if v4 { super::frags::is_fragment_v4(ip) } else { super::frags6::may_be_fragment(ip) }
        }) {
            let tables = (&mut self.frags, &mut self.held, &mut self.frags6);
            judge_fragment(tables, &self.fw, ip, v4, key)?;
        }
        let (key, tcp) = (&*key, tcp.as_ref());
        if self.nat_passed && self.nat_pass[i] {
            let known = match known {
                KnownState::Miss => Some(None),
                KnownState::Hit(id) => Some(Some(id)),
                KnownState::Unknown => None,
            };
            return self.fw.filter_in_translated(key, tcp, known);
        }
        match known {
            KnownState::Miss => return self.fw.inbound(key, tcp, None),
            KnownState::Hit(id) => return self.fw.inbound(key, tcp, Some(Hit::of(id, key))),
            // Without states nothing can match (the pass for rule sets without `keep state`).
            KnownState::Unknown if self.fw.state_table().is_empty() => {
                return self.fw.inbound(key, tcp, None);
            }
            KnownState::Unknown => {}
        }
        if is_icmp_error(key.proto, key.src_port)
            && let Some(r) = icmp_error(&mut self.fw, frame, l3, key)
        {
            return r;
        }
        self.fw.filter_in(key, tcp)
    }

    /// [`by_key`](Self::by_key) out of line, so that the fast path's loop stays small.
    #[inline(never)]
    fn by_key_cold(
        &mut self,
        frame: &[u8],
        l3: usize,
        v4: bool,
        port: u16,
        i: usize,
        known: KnownState,
    ) -> Result<Option<Ticket>, DropReason> {
        self.by_key(frame, l3, v4, port, i, known)
    }
}

/// What the quick loop does with a packet.
enum Quick {
    /// A quick hit: it passes, stateful.
    Hit,
    /// Left to the general lookup.
    Leave,
    /// Left, with every later packet of the batch (see [`leave_the_rest`]).
    LeaveTheRest,
}

impl Quick {
    /// A hit, else for a UDP packet the quick loop could not read (`odd_udp`) the rest of the
    /// batch, else this packet alone.
    #[inline(always)]
    fn of(hit: bool, odd_udp: bool) -> Quick {
        match (hit, odd_udp) {
            (true, _) => Quick::Hit,
            (false, true) => Quick::LeaveTheRest,
            (false, false) => Quick::Leave,
        }
    }
}

/// Notes the quick loop's outcome `q` for packet `i` of `n`: marks a hit stateful, or lists
/// what it leaves in `list` (`left` of them so far). `false`: the loop stops there.
#[inline(always)]
fn record_quick(
    q: Quick,
    i: usize,
    n: usize,
    out_decided: &mut [bool; MAX_BATCH],
    list: &mut [u16; MAX_BATCH],
    left: &mut usize,
) -> bool {
    match q {
        Quick::Hit => out_decided[i % MAX_BATCH] = true,
        Quick::Leave => {
            list[*left % MAX_BATCH] = i as u16;
            *left += 1;
        }
        Quick::LeaveTheRest => {
            *left = leave_the_rest(list, *left, i, n);
            return false;
        }
    }
    true
}

/// Lists packets `from..n` of the batch after the `left` already listed; returns the new
/// count. The quick loop's way out (or the whole batch, with the quick loop off). For an
/// IPv4 UDP packet the quick loop cannot read (IP options, a fragment, an odd
/// UDP length): its full key may name a UDP state the quick loop takes packets for, and the
/// general lookup of it may change that state (its pseudo-states), which would change
/// whether later packets of the flow are quick hits. So it and every later packet of the
/// batch go to the general lookup, in order (rare: the fast path assumes plain headers).
#[cold]
fn leave_the_rest(list: &mut [u16; MAX_BATCH], left: usize, from: usize, n: usize) -> usize {
    let mut left = left;
    for i in from..n.min(MAX_BATCH) {
        list[left % MAX_BATCH] = i as u16;
        left += 1;
    }
    left
}

/// [`Firewall::icmp_error`] for an ICMP error (its `key`), out of line (rare).
#[inline(never)]
fn icmp_error(
    fw: &mut Firewall,
    frame: &[u8],
    l3: usize,
    key: &PacketKey,
) -> Option<Result<Option<Ticket>, DropReason>> {
    let (quoted, seq) = keys::quoted(frame, l3, key)?;
    fw.icmp_error(key, &quoted, seq)
}

/// Fragment `ip` (its `key`) through the fragment tables, which give a later fragment its
/// datagram's protocol and ports; a first fragment releases the fragments that waited for
/// it. Out of line: fragments are rare.
#[cold]
#[inline(never)]
fn judge_fragment(
    (frags, held, frags6): (
        &mut super::frags::FragTable,
        &mut super::frag_hold::HeldFragments,
        &mut super::frags6::FragTable6,
    ),
    fw: &Firewall,
    ip: &[u8],
    v4: bool,
    key: &mut PacketKey,
) -> Result<(), DropReason> {
    let (timeout, datagrams) = fw.frag_settings();
    let first = if v4 {
        frags.resize(datagrams);
        frags.judge(ip, key, fw.now, timeout)?;
        held.is_holding().then(|| super::frags::ident(ip)).flatten()
    } else {
        if !super::frags6::is_fragment_v6(ip) {
            return Ok(());
        }
        frags6.judge(ip, key, fw.now, timeout)?;
        held.is_holding().then(|| super::frags6::ident(ip)).flatten()
    };
    if let Some((ident, true)) = first {
        held.first_passed(ident);
    }
    Ok(())
}
