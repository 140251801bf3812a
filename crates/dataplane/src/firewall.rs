//! The filter stage of the forwarding node: pf-like rules (crate `fw`) and per-worker
//! connection tracking.
//!
//! * [`CompiledRules`] (`compiled.rs`): a parsed [`RuleSet`] and its compiled classifier,
//!   immutable, shared by every worker through an `Arc`.
//! * [`RulesSlot`] (`slot.rs`): how the control side hands a new rule set to the workers. It
//!   publishes the new `Arc` under a mutex and bumps an atomic generation; a worker reads the
//!   generation once per batch (one relaxed-cost load) and takes the mutex only when it
//!   changed, i.e. once per reload. A worker therefore uses one rule set for a whole batch, never a mix. A set
//!   whose `set limit states` is above what a worker's state table holds comes with memory
//!   the publisher reserved for that worker: workers never allocate a table themselves.
//! * [`Firewall`]: what one worker owns: the current rules, its own [`StateTable`] (no lock:
//!   only this worker touches it) and its counters. The state table survives reloads, so
//!   established flows keep passing; a state's rule index may then name a rule of the old set,
//!   which only matters for counters (bounds-checked when counted).
//! * [`FirewallStats`] (`counters.rs`): the counters other threads read while the worker runs.
//!
//! Evaluation per routed packet (pf's, see [`fw::passes`]): one state lookup; a state that
//! holds both of pf's states of the flow (its `in` and `out` states, `fw::state`'s `sub.rs`)
//! passes the packet at once. Otherwise the inbound pass on the receiving interface (its pf
//! state, else the `in` rules) and, after the route lookup, the outbound pass on the output
//! interface (its pf state, else the `out` rules; skipped when no rule can act on outbound
//! packets).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fw::classifier::VerdictCache;
use fw::packet::{Dir, PacketKey};
use fw::passes::{Count, Drop, Hit, Passes, Ticket};
use fw::rules::RuleSet;
use fw::state::{
    Flow, FlowV4, IcmpErrorMatch, InsertError, QuickHits, StateAllocError, StateDropReason,
    StateId, StateLookup, StateTable, StateVerdict, TcpSegment, Timeouts,
};

use crate::counters::DropReason;
use crate::fib::Fib;

/// State-table slots the paced expiry sweep examines per batch at most
/// ([`StateTable::expire_paced`]; all of them while the table is full).
const EXPIRE_BUDGET: usize = 16;

pub(crate) mod afto;
pub(crate) mod afto46;
mod afto_rewrite;
mod compiled;
mod counters;
mod datagrams;
pub mod frag_hold;
pub mod frags;
pub mod frags6;
pub(crate) mod keys;
mod local;
pub mod nat;
pub(crate) mod nat6;
mod nat6_rewrite;
mod nat_rewrite;
pub mod offloaded;
mod overload;
pub mod requests;
mod routes;
pub mod tables;
pub use overload::FLUSH_SLOTS_PER_BATCH;
use overload::FlushJob;
pub mod log;
pub(crate) mod modulate;
mod refuse;
mod route_hosts;
pub mod scrub;
mod slot;
mod stage;
pub mod sync;
mod sync_nat;
pub(crate) mod synproxy;

pub use crate::seed::random_seed;
pub use compiled::CompiledRules;
pub use counters::{FirewallStats, RuleCounters, RuleStat, STATE_COUNTER_NAMES};
use counters::{NO_PENDING, Pending, bump, state_fields};
use log::{LogHit, LogSink};
pub use refuse::Refusal;
pub use slot::RulesSlot;

pub(crate) use stage::{FirewallStage, RoutedV4};

// A batch's quick loop may see no more packets than the state table allows for.
const _: () = assert!(io::batch::MAX_BATCH <= fw::state::QUICK_BATCH_MAX);

/// The firewall of one worker.
pub struct Firewall {
    /// `synproxy state`: for each packet a state or pass dropped as [`DropReason::Synproxy`]
    /// during the batch, in batch order, what to send for it (`None`: nothing). The
    /// forwarder's proxy pass takes them (`Forwarder::synproxy`); empty otherwise.
    pub(crate) proxy_queue: Vec<Option<fw::state::ProxyStep>>,
    slot: Arc<RulesSlot>,
    /// This firewall's registration in `slot`.
    id: usize,
    /// The generation each batch compares the slot's with: the adopted one, or `u64::MAX`
    /// while flushes are pending (so that the one check per batch brings the worker to them).
    seen: u64,
    /// The generation of the rules in use.
    adopted: u64,
    cur: Arc<RuleCounters>,
    states: StateTable,
    /// Verdicts of the rules by exact match, in front of an expensive classifier (see
    /// [`fw::classifier::cache`]); it starts over by itself when the classifier changes.
    cache: VerdictCache,
    clock: Instant,
    /// Coarse clock of the state table: whole seconds since the slot's epoch, per batch.
    now: u32,
    stats: Arc<FirewallStats>,
    /// Counts not yet added to the per-rule counters, see [`Pending::count`].
    pending: Pending,
    /// Whether the filter pass runs the quick loop (always, but for tests that compare it
    /// with every packet looked up in order).
    quick_loop: bool,
    /// Where records of logged packets go (`None`: nowhere, they are not made).
    log: Option<LogSink>,
    /// The packet being filtered is to be logged: what the filter stage copies with it.
    log_hit: Option<LogHit>,
    /// The rule of the last pass that a `block` rule decided (see [`Firewall::take_refusal`]).
    blocked_by: Option<usize>,
    /// The FIB that `no-route` and `urpf-failed` ask (the worker's; none in tests that filter
    /// without forwarding: every address is then routable and passes the check).
    fib: Option<Arc<Fib>>,
    /// The current rules' route bits ([`CompiledRules::route_bits`]), at hand per packet.
    route_bits: u8,
    /// `overload ... flush` walks still to do (`overload.rs`).
    flushes: Vec<FlushJob>,
    /// What normalization did (published after each batch).
    pub(crate) scrub_counts: scrub::ScrubCounts,
    /// The `route-to` / `reply-to` options of rules that reloads removed while states of
    /// theirs remained (`routes.rs`).
    orphan_routes: Vec<fw::rules::RouteOpt>,
    orphan_scan: routes::OrphanScan,
    /// The rule set adopted before this one, for the fast path's late counts.
    previous: Option<offloaded::PreviousRules>,
}

/// The first loop of a batch's filter pass: [`QuickHits`] and the per-rule counts of its hits.
pub(crate) struct QuickPass<'a> {
    hits: QuickHits<'a>,
    pending: &'a mut Pending,
    cur: &'a RuleCounters,
}

impl QuickPass<'_> {
    /// Whether the packet (`flow`, IP length `len`) passes as a quick hit, counted; `false`
    /// leaves it to the general path.
    #[inline(always)]
    pub(crate) fn udp_v4(&mut self, flow: &FlowV4, len: u16) -> bool {
        let hit = self.hits.udp_v4(flow);
        self.counted(hit, len)
    }

    /// [`udp_v4`](Self::udp_v4) with the flow's hash and where the batched lookup's probe
    /// stopped ([`fw::state::StateTable::probe`]).
    #[inline(always)]
    pub(crate) fn udp_v4_from(&mut self, flow: &FlowV4, hash: u64, probe: u32, len: u16) -> bool {
        let hit = self.hits.udp_v4_from(flow, hash, probe as usize);
        self.counted(hit, len)
    }

    /// [`udp_v4`](Self::udp_v4) for an IPv6 UDP flow ([`keys::udp_flow_v6`]).
    #[inline(always)]
    pub(crate) fn udp_v6(&mut self, flow: &Flow, len: u16) -> bool {
        let hit = self.hits.udp(flow);
        self.counted(hit, len)
    }

    /// [`udp_v6`](Self::udp_v6) with the flow's hash and where the batched lookup's probe
    /// stopped.
    #[inline(always)]
    pub(crate) fn udp_v6_from(&mut self, flow: &Flow, hash: u64, probe: u32, len: u16) -> bool {
        let hit = self.hits.udp_from(flow, hash, probe as usize);
        self.counted(hit, len)
    }

    /// Counts a quick hit (the rule of its state) of `len` bytes.
    #[inline(always)]
    fn counted(&mut self, hit: Option<u32>, len: u16) -> bool {
        let Some(rule) = hit else { return false };
        self.pending.count(self.cur, rule as usize, len);
        true
    }
}

fn state_timeouts(rs: &RuleSet) -> Timeouts {
    rs.timeouts
}

/// The rule set's `set limit states` (at least 1). Not cut to the table's maximum: a set
/// built by hand above it fails to allocate, with that error.
fn state_limit(rs: &RuleSet) -> usize {
    usize::try_from(rs.limit_states).unwrap_or(usize::MAX).max(1)
}

impl Firewall {
    /// A worker's firewall on the slot's current rules; panics if the state table cannot be
    /// allocated (tests, benchmarks: a router uses [`try_new`](Self::try_new)).
    pub fn new(slot: Arc<RulesSlot>, seed: u64) -> Firewall {
        Firewall::try_new(slot, seed).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A worker's firewall on the slot's current rules. The state table holds
    /// `set limit states` of that set, allocated here; reloads keep the table and apply their
    /// limit (growing it into memory the publisher reserved, see [`RulesSlot::publish`]).
    pub fn try_new(slot: Arc<RulesSlot>, seed: u64) -> Result<Firewall, StateAllocError> {
        loop {
            let capacity = state_limit(&slot.current().rules);
            let mut states = StateTable::try_new(capacity, Timeouts::default(), seed)?;
            // Allocated unlocked; a reload raising the limit meanwhile means another try.
            let Some((id, seen, rules)) = slot.register(capacity) else {
                continue;
            };
            states.set_timeouts(state_timeouts(&rules.rules));
            states.set_rule_timeouts(rules.rules.rules.iter().map(|r| r.state_timeouts.as_slice()));
            states.set_limit(state_limit(&rules.rules));
            states.set_passes(rules.has_in, rules.has_out);
            let cache = VerdictCache::new(
                fw::classifier::cache::DEFAULT_CACHE_ENTRIES,
                seed ^ 0x5bd1_e995_2f3c_a7e1,
            );
            return Ok(Firewall::with_table(slot, id, seen, rules, states, cache));
        }
    }

    fn with_table(
        slot: Arc<RulesSlot>,
        id: usize,
        seen: u64,
        rules: Arc<CompiledRules>,
        states: StateTable,
        cache: VerdictCache,
    ) -> Firewall {
        let rules_overload = rules.overloads();
        let route_bits = rules.route_bits;
        let cur = Arc::new(RuleCounters::new(rules));
        let stats = Arc::new(FirewallStats {
            rules: Mutex::new(Arc::clone(&cur)),
            states: std::array::from_fn(|_| AtomicU64::new(0)),
            generation: AtomicU64::new(seen),
            cache: std::array::from_fn(|_| AtomicU64::new(0)),
            scrub: std::array::from_fn(|_| AtomicU64::new(0)),
            nat_sessions: AtomicU64::new(0),
        });
        let clock = slot.epoch;
        // With `overload` rules, the first batch goes by `adopt_or_flush` (see there).
        let (adopted, seen) = (seen, if rules_overload { u64::MAX } else { seen });
        Firewall {
            proxy_queue: Vec::with_capacity(io::batch::MAX_BATCH),
            slot,
            id,
            seen,
            adopted,
            cur,
            states,
            cache,
            clock,
            now: clock.elapsed().as_secs() as u32,
            stats,
            pending: NO_PENDING,
            quick_loop: true,
            log: None,
            log_hit: None,
            blocked_by: None,
            fib: None,
            route_bits,
            flushes: Vec::new(),
            scrub_counts: scrub::ScrubCounts::default(),
            orphan_routes: Vec::new(),
            orphan_scan: routes::OrphanScan::default(),
            previous: None,
        }
    }

    /// The current rules' `set timeout frag` and `set limit frags`: how long and how many
    /// fragmented datagrams the filter stage's fragment table keeps.
    pub(crate) fn frag_settings(&self) -> (u32, usize) {
        let rs = &self.cur.rules.rules;
        (rs.timeouts.frag, usize::try_from(rs.limit_frags).unwrap_or(usize::MAX))
    }

    pub fn stats(&self) -> Arc<FirewallStats> {
        Arc::clone(&self.stats)
    }

    pub fn rules(&self) -> &Arc<CompiledRules> {
        &self.cur.rules
    }

    /// Which flows this firewall passes may go to the kernel's fast path now
    /// ([`crate::offload`]): its rules' policy, with no UDP state offloaded once pf's
    /// adaptive scaling may shorten the timeouts (the table is near `adaptive.start`).
    #[inline]
    pub fn offload_policy(&self) -> crate::offload::OffloadPolicy {
        let mut p = self.cur.rules.offload;
        if p.refresh_ns != 0 && self.states.timeouts_may_scale() {
            p.udp = false;
        }
        p
    }

    /// The rules and the normalization counters, for the scrub pass.
    #[inline(always)]
    pub(crate) fn scrub_parts(&mut self) -> (&CompiledRules, &mut scrub::ScrubCounts) {
        (&self.cur.rules, &mut self.scrub_counts)
    }

    pub fn state_table(&self) -> &StateTable {
        &self.states
    }

    /// The coarse clock of this batch (seconds since the slot's epoch).
    #[inline(always)]
    pub(crate) fn now(&self) -> u32 {
        self.now
    }

    /// Whether the send pass looks up each TCP packet's `modulate state` rewrite: the rule
    /// set has such rules, or the table holds (or held) states of them.
    pub(crate) fn modulating(&self) -> bool {
        self.cur.rules.modulate || self.states.modulates()
    }

    /// Makes proxied state `id`, awaiting the client's ACK, a plain state.
    #[cold]
    pub(crate) fn unproxy(&mut self, id: StateId) {
        self.states.unproxy(id);
    }

    /// Records the MSS of the client's SYN that opened proxied state `id`.
    #[cold]
    pub(crate) fn set_proxy_mss(&mut self, id: StateId, mss: u16) {
        self.states.set_proxy_mss(id, mss);
    }

    /// The `modulate state` rewrite of a packet of `flow` as it leaves (after its passes).
    pub(crate) fn modulation(&self, flow: &Flow) -> Option<fw::state::Modulation> {
        self.states.modulation(flow, self.now)
    }

    /// Turns the quick loop off: the general lookup then takes every packet, in order. For
    /// tests only, which check that both ways give the same outcome.
    #[doc(hidden)]
    pub fn set_quick_loop(&mut self, on: bool) {
        self.quick_loop = on;
    }

    /// The quick loop does not log, nor record refreshed states for state sync: off while a
    /// rule logs every packet of its states, and while sync is on.
    #[inline(always)]
    pub(crate) fn quick_loop(&self) -> bool {
        self.quick_loop && !self.cur.rules.log.all && !self.states.journaling()
    }

    /// Creates a state directly, as if `key` had passed rule `rule` in and out (bench
    /// warm-up, tests): an entry holding both of pf's states, counted as two.
    pub fn insert_state(&mut self, key: &PacketKey, rule: usize) -> Result<(), InsertError> {
        self.states.insert(key, rule as u32, self.now, None)?;
        self.count_state(rule);
        self.count_state(rule);
        Ok(())
    }

    /// Once per batch, before any packet: adopt a new rule set if one was published, advance
    /// the clock, sweep a few state slots.
    #[inline]
    pub(crate) fn begin_batch(&mut self) {
        let g = self.slot.generation();
        if g != self.seen {
            self.adopt_or_flush(g);
        }
        self.now = self.clock.elapsed().as_secs() as u32;
        self.states.expire_paced(self.now, EXPIRE_BUDGET);
        if let Some(log) = &mut self.log {
            log.new_batch();
        }
    }

    /// A new generation to adopt, or a stretch of the pending flushes to walk.
    #[cold]
    #[inline(never)]
    fn adopt_or_flush(&mut self, g: u64) {
        if g != self.adopted {
            self.adopt();
        }
        // A worker working with `overload` rules: the slot's overload thread must run (started
        // here, from a worker, not where the slot is made: `linerate run` starts no thread
        // before it drops its privileges).
        if self.cur.rules.overloads() {
            self.slot.start_overloader();
        }
        if !self.flushes.is_empty() {
            self.flush_step();
        }
        self.seen = if self.flushes.is_empty() { self.adopted } else { u64::MAX };
    }

    /// Takes the published rule set: its timeouts and its state limit apply to the kept
    /// states (a lower limit removes none: new flows are refused until under it; a higher one
    /// moves the table, once, here, into the memory the publisher reserved), its counters
    /// start from zero.
    #[cold]
    fn adopt(&mut self) {
        // Counts of the old set go to the old set's counters.
        self.flush_counts();
        let (rules, g, mem) = self.slot.adopt(self.id, &mut self.flushes);
        if let Some(mem) = mem {
            self.states.grow_into(mem);
        }
        self.states.set_timeouts(state_timeouts(&rules.rules));
        self.states
            .set_rule_timeouts(rules.rules.rules.iter().map(|r| r.state_timeouts.as_slice()));
        self.states.set_limit(state_limit(&rules.rules));
        self.states.set_passes(rules.has_in, rules.has_out);
        self.route_bits = rules.route_bits;
        // An overload changed a table, not the rules: their counts go on.
        let carried = self.cur.rules.same_rules(&rules);
        if !carried && (self.cur.rules.route_opts || rules.route_opts) {
            self.carry_routes(&rules);
        }
        let counters = RuleCounters::new(rules);
        self.previous = None;
        if carried {
            counters.add(&self.cur);
            self.previous = Some(offloaded::PreviousRules::same(self.adopted));
        } else if let Some(k) = counters.rules.keep.get()
            && Arc::ptr_eq(&k.from, &self.cur.rules.lineage)
        {
            counters.add_mapped(&self.cur, &k.map);
            let old_len = self.cur.rules.rule_count() + 1;
            self.previous = Some(offloaded::PreviousRules::mapped(self.adopted, &k.map, old_len));
        }
        self.cur = Arc::new(counters);
        *self.stats.rules.lock().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&self.cur);
        self.seen = g;
        self.adopted = g;
        self.stats.generation.store(g, Ordering::Release);
    }

    /// After the batch: publish the per-rule counts and the state table's counters (plain
    /// stores, single writer).
    #[inline]
    pub(crate) fn end_batch(&mut self) {
        self.flush_counts();
        for (a, v) in self.stats.states.iter().zip(state_fields(&self.states.counters())) {
            a.store(v, Ordering::Relaxed);
        }
        let c = self.cache.counters();
        for (a, v) in self.stats.cache.iter().zip([c.hits, c.misses, c.invalidations, c.class_hits])
        {
            a.store(v, Ordering::Relaxed);
        }
        for (a, v) in self.stats.scrub.iter().zip(self.scrub_counts.fields()) {
            a.store(v, Ordering::Relaxed);
        }
    }

    /// Publishes the size of the worker's NAT table (after a batch that translated).
    #[inline]
    pub(crate) fn publish_nat_sessions(&self, n: u64) {
        self.stats.nat_sessions.store(n, Ordering::Relaxed);
    }

    /// Counts a packet under rule `i` (see [`Pending::count`]).
    #[inline(always)]
    fn count(&mut self, i: usize, len: u16) {
        self.pending.count(&self.cur, i, len);
    }

    /// Adds the pending counts to the shared counters.
    #[inline]
    fn flush_counts(&mut self) {
        self.pending.flush(&self.cur);
    }

    /// The batch's quick state hits (the first loop of the filter pass, see
    /// [`fw::state::QuickHits`]), counted under their rules.
    #[inline(always)]
    pub(crate) fn quick(&mut self) -> QuickPass<'_> {
        QuickPass { hits: self.states.quick(self.now), pending: &mut self.pending, cur: &self.cur }
    }

    #[inline(always)]
    fn count_state(&self, i: usize) {
        let c = &self.cur;
        bump(&c.states[i.min(c.states.len() - 1)], 1);
    }

    /// The in pass of one routed packet, its state looked up by key: `Ok(None)` when a
    /// state settles it (the out pass is skipped), `Ok(Some(ticket))` for the out pass,
    /// `Err(reason)` to drop.
    #[inline(always)]
    pub(crate) fn filter_in(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
    ) -> Result<Option<Ticket>, DropReason> {
        self.lookup_then(key, tcp, None)
    }

    /// [`filter_in`](Self::filter_in); `v`: the verdict that replaces the rules' (a
    /// translation rule's `pass`).
    #[inline(always)]
    fn lookup_then(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        v: Option<fw::verdict::Verdict>,
    ) -> Result<Option<Ticket>, DropReason> {
        // A rule set without keep-state rules never fills the table: skip the hash and probe
        // (the state counters then count no misses).
        if self.states.is_empty() {
            return self.inbound_as(key, tcp, None, v);
        }
        let flow = Flow::of(key);
        match self.states.lookup_flow(&flow, tcp, key.tcp_flags, self.now) {
            StateLookup::Hit { id, verdict, .. } => {
                let rule = self.states.rule_of(id).map_or(usize::MAX, |r| r as usize);
                self.count(rule, key.len);
                self.log_state(rule, verdict);
                if let StateVerdict::Drop(d) = verdict {
                    return Err(self.state_dropped(d));
                }
                let hit = Hit { id, from_a: flow.from_a() };
                if self.states.settled(id, hit.from_a) && !key.ip_opts {
                    return Ok(None);
                }
                self.inbound_as(key, tcp, Some(hit), v)
            }
            StateLookup::Miss => self.inbound_as(key, tcp, None, v),
        }
    }

    /// [`inbound`](Self::inbound), or with `v` instead of the rules' verdict.
    #[inline(always)]
    fn inbound_as(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        hit: Option<Hit>,
        v: Option<fw::verdict::Verdict>,
    ) -> Result<Option<Ticket>, DropReason> {
        match v {
            None => self.inbound(key, tcp, hit),
            Some(_) => self.inbound_with(key, tcp, hit, v),
        }
    }

    /// The state lookup of a packet whose flow was read straight from its header
    /// ([`keys::header_flow_v4`]): `Some` on a hit: `Ok(None)` when the state settles the packet,
    /// `Ok(Some(id))` when its passes still need the rules (the caller builds the packet's
    /// key and runs [`inbound`](Self::inbound) with the hit), or a drop. `None` on a miss,
    /// after which the caller builds the key and runs [`inbound`](Self::inbound) without a
    /// hit. `h` and `probe` as for [`StateTable::lookup_v4`].
    #[inline(always)]
    pub(crate) fn state_hit(
        &mut self,
        flow: &FlowV4,
        h: u64,
        probe: Option<u32>,
        tcp: Option<&TcpSegment>,
        len: u16,
    ) -> Option<Result<Option<StateId>, DropReason>> {
        let hit = self.states.lookup_v4(flow, h, probe, tcp, self.now)?;
        self.count(hit.rule as usize, len);
        self.log_state(hit.rule as usize, hit.verdict);
        Some(match hit.verdict {
            StateVerdict::Pass if hit.settled => Ok(None),
            StateVerdict::Pass => Ok(Some(hit.id)),
            StateVerdict::Drop(d) => Err(self.state_dropped(d)),
        })
    }

    /// An ICMP error quoting a packet of a tracked flow (`quoted`, `seq`: from
    /// [`keys::quoted`]) passes under that flow's states, as in pf: it is taken as a packet of
    /// the flow sent by the quoted packet's destination, counted under the state's rule.
    /// One quoting a TCP sequence number outside the flow's window is dropped. `None` when
    /// no state matches: the rules decide.
    pub(crate) fn icmp_error(
        &mut self,
        key: &PacketKey,
        quoted: &PacketKey,
        seq: Option<u32>,
    ) -> Option<Result<Option<Ticket>, DropReason>> {
        let (id, bad) = match self.states.match_icmp_error(quoted, seq, self.now) {
            IcmpErrorMatch::Pass(id) => (id, false),
            IcmpErrorMatch::BadSeq(id) => (id, true),
            IcmpErrorMatch::Miss => return None,
        };
        let rule = self.states.rule_of(id).map_or(usize::MAX, |r| r as usize);
        self.count(rule, key.len);
        self.log_state(
            rule,
            if bad { StateVerdict::Drop(StateDropReason::OutOfWindow) } else { StateVerdict::Pass },
        );
        if bad {
            return Some(Err(DropReason::StateOutOfWindow));
        }
        let hit = Hit { id, from_a: !Flow::of(quoted).from_a() };
        if self.states.settled(id, hit.from_a) && !key.ip_opts {
            return Some(Ok(None));
        }
        Some(self.inbound(key, None, Some(hit)))
    }

    /// pf's inbound pass over a packet no state settles (`hit`: the flow's state, if the
    /// lookup found one): `Ok(Some(ticket))` when the out pass must run.
    #[inline(always)]
    pub(crate) fn inbound(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        hit: Option<Hit>,
    ) -> Result<Option<Ticket>, DropReason> {
        match hit {
            None => self.inbound_miss(key, tcp),
            Some(_) => self.inbound_with(key, tcp, hit, None),
        }
    }

    /// [`inbound`](Self::inbound) without a state: the rules' verdict, and for the common
    /// stateless one the outcome without the state table (`fw::passes::stateless`). Out of
    /// line, so that the loops calling it stay small.
    #[inline(never)]
    fn inbound_miss(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
    ) -> Result<Option<Ticket>, DropReason> {
        let rules = &self.cur.rules;
        let v = self.cache.classify(&rules.classifier, key);
        if let Some(r) = fw::passes::stateless(&rules.rules, &v, key) {
            let has_out = rules.has_out;
            self.count(v.rule.unwrap_or(usize::MAX), key.len);
            self.log_decided(Count { rule: v.rule, by_rules: true, created: false }, r, Dir::In);
            return match r {
                Ok(()) => Ok(has_out.then(|| Ticket { tag: v.tag, ..Ticket::default() })),
                Err(d) => Err(self.dropped(d, v.rule)),
            };
        }
        self.inbound_with(key, tcp, None, Some(v))
    }

    /// [`fw::passes::Passes::inbound_with`], counted.
    #[inline]
    fn inbound_with(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        hit: Option<Hit>,
        verdict: Option<fw::verdict::Verdict>,
    ) -> Result<Option<Ticket>, DropReason> {
        let rules = &self.cur.rules;
        let mut p = Passes {
            rules: &rules.rules,
            classifier: &rules.classifier,
            cache: Some(&mut self.cache),
            states: &mut self.states,
            now: self.now,
            limits: rules.limits.as_ref(),
        };
        let (r, count) = p.inbound_with(key, tcp, hit, verdict);
        let has_out = rules.has_out;
        self.counted(count, key.len);
        self.log_decided(count, r.map(|_| ()), Dir::In);
        let ticket = r.map_err(|d| self.dropped(d, count.rule))?;
        Ok((!ticket.out_settled && (has_out || key.ip_opts)).then_some(ticket))
    }

    /// The inbound pass of a packet that a translation rule with `pass` redirected (`rdr
    /// pass`, `binat pass`): the flow's state if one matches (`prior`: the fast path's lookup,
    /// `None` if it has not looked), else pf's default pass, keeping state, instead of the
    /// rules.
    #[cold]
    #[inline(never)]
    pub(crate) fn filter_in_translated(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        prior: Option<Option<StateId>>,
    ) -> Result<Option<Ticket>, DropReason> {
        let pass = Some(fw::verdict::Verdict::TRANSLATION_PASS);
        match prior {
            Some(id) => self.inbound_with(key, tcp, id.map(|id| Hit::of(id, key)), pass),
            None => self.lookup_then(key, tcp, pass),
        }
    }

    /// Where the rules' `no-route` and `urpf-failed` look routes up.
    pub(crate) fn set_fib(&mut self, fib: Arc<Fib>) {
        self.fib = Some(fib);
    }

    /// Fills `key.route` (for its `iface`) if the rules test route bits: nothing is looked
    /// up without `no-route` or `urpf-failed` hosts.
    #[inline(always)]
    pub(crate) fn fill_route_bits(&self, key: &mut PacketKey) {
        let used = self.route_bits;
        if used != 0 {
            self.route_bits_for(key, used);
        }
    }

    #[cold]
    #[inline(never)]
    fn route_bits_for(&self, key: &mut PacketKey, used: u8) {
        key.route = self.fib.as_ref().map_or(0, |fib| route_hosts::route_bits(fib, key, used));
    }

    /// `key` as the out pass on `port` sees it: its route bits again, for that interface (the
    /// reverse-path check depends on it), if the rules test any.
    #[inline(always)]
    fn out_key(&self, key: &PacketKey, port: u16) -> Option<PacketKey> {
        (self.route_bits != 0).then(|| {
            let mut k = PacketKey { iface: port, ..*key };
            self.route_bits_for(&mut k, self.route_bits);
            PacketKey { iface: key.iface, ..k }
        })
    }

    /// The outbound pass of a packet that leaves translated by `nat` or `binat`: the rules
    /// judge it as it leaves (`seen`), its state is kept under `key` (see
    /// [`Passes::outbound_translated`]); `pass`: a translation rule with `pass` decides.
    #[cold]
    #[inline(never)]
    pub(crate) fn filter_out_translated(
        &mut self,
        key: &PacketKey,
        seen: &PacketKey,
        port: u16,
        tcp: Option<&TcpSegment>,
        ticket: Ticket,
        pass: bool,
    ) -> Result<(), DropReason> {
        let routed = self.out_key(seen, port);
        let seen = routed.as_ref().unwrap_or(seen);
        let rules = &self.cur.rules;
        let mut p = Passes {
            rules: &rules.rules,
            classifier: &rules.classifier,
            cache: Some(&mut self.cache),
            states: &mut self.states,
            now: self.now,
            limits: rules.limits.as_ref(),
        };
        let (r, count) = p.outbound_translated(key, seen, port, tcp, ticket, pass);
        self.counted(count, key.len);
        self.log_decided(count, r, Dir::Out);
        r.map_err(|d| self.dropped(d, count.rule))
    }

    /// pf's outbound pass on the output port, for a packet its inbound pass left `ticket`.
    /// Out of line: the send pass's loop stays as it is without a firewall.
    #[inline(never)]
    pub(crate) fn filter_out(
        &mut self,
        key: &PacketKey,
        port: u16,
        tcp: Option<&TcpSegment>,
        ticket: Ticket,
    ) -> Result<(), DropReason> {
        let routed = self.out_key(key, port);
        let key = routed.as_ref().unwrap_or(key);
        let rules = &self.cur.rules;
        let mut p = Passes {
            rules: &rules.rules,
            classifier: &rules.classifier,
            cache: Some(&mut self.cache),
            states: &mut self.states,
            now: self.now,
            limits: rules.limits.as_ref(),
        };
        let (r, count) = p.outbound(key, port, tcp, ticket);
        self.counted(count, key.len);
        self.log_decided(count, r, Dir::Out);
        r.map_err(|d| self.dropped(d, count.rule))
    }

    /// The drop reason of a pass's verdict; notes the deciding rule of a block for
    /// [`take_refusal`](Self::take_refusal).
    #[cold]
    #[inline(never)]
    fn dropped(&mut self, d: Drop, rule: Option<usize>) -> DropReason {
        if d == Drop::Blocked {
            self.blocked_by = rule;
        }
        if d == Drop::Synproxy {
            self.queue_proxy();
        }
        drop_reason(d)
    }

    /// The drop reason of a packet its state drops; a `synproxy state` handshake packet's
    /// step queued for the proxy pass.
    #[cold]
    #[inline(never)]
    fn state_dropped(&mut self, d: StateDropReason) -> DropReason {
        if d == StateDropReason::Synproxy {
            self.queue_proxy();
        }
        state_drop_reason(d)
    }

    /// Queues what to send for the packet the state table just dropped as a `synproxy
    /// state` handshake packet (see [`Firewall::proxy_queue`]).
    #[cold]
    fn queue_proxy(&mut self) {
        let step = self.states.take_proxy();
        self.proxy_queue.push(step);
    }

    /// What to send back about the packet of `key` that the last pass dropped as
    /// [`DropReason::FilterBlocked`]: the answer of its `block` rule (`block return`,
    /// `return-rst`, `return-icmp`), if any, for this kind of packet. Call once per blocked
    /// packet, right after the pass.
    #[cold]
    pub(crate) fn take_refusal(&mut self, key: &PacketKey) -> Option<Refusal> {
        let rule = self.blocked_by.take()?;
        let answer = self.cur.rules.rules.rules.get(rule)?.block_return?;
        Refusal::of(&answer, key)
    }

    /// Counts what a pass says it counts.
    #[inline(always)]
    fn counted(&mut self, c: Count, len: u16) {
        if c.by_rules {
            let i = c.rule.unwrap_or(usize::MAX);
            self.count(i, len);
            if c.created {
                self.count_state(i);
            }
        }
    }
}

/// The drop reason of a pass's verdict.
fn drop_reason(d: Drop) -> DropReason {
    match d {
        Drop::Blocked => DropReason::FilterBlocked,
        Drop::IpOptions => DropReason::IpOptions,
        Drop::StateLimit => DropReason::StateLimit,
        Drop::RuleMax => DropReason::RuleStateMax,
        Drop::SrcStates => DropReason::SrcStateLimit,
        Drop::SrcNodes => DropReason::SrcNodeLimit,
        Drop::Synproxy => DropReason::Synproxy,
    }
}

/// The drop reason of a packet its state drops.
#[cold]
fn state_drop_reason(d: StateDropReason) -> DropReason {
    match d {
        StateDropReason::OutOfWindow => DropReason::StateOutOfWindow,
        StateDropReason::SrcConn => DropReason::SrcConnLimit,
        StateDropReason::SrcConnRate => DropReason::SrcConnRateLimit,
        StateDropReason::Synproxy => DropReason::Synproxy,
    }
}

impl std::ops::Drop for Firewall {
    /// Later reloads reserve no memory for a firewall that is gone.
    fn drop(&mut self) {
        self.slot.unregister(self.id);
    }
}
