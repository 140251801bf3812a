//! Stateful connection tracking (pf's `keep state`), one table per worker.
//!
//! # Model
//!
//! An entry is created for the first packet of a flow that matched a `keep state` rule
//! ([`StateTable::keep`], or [`StateTable::insert`] for one holding both of pf's states).
//! Its key is canonical (the two endpoints `(addr, port)` are ordered so that A <= B, plus
//! address family and protocol), so one lookup finds it for packets in both directions; the
//! entry records which side initiated and which of pf's per-pass states it holds, each
//! floating or bound to an interface (`sub.rs`, and [`crate::passes`] for how the passes
//! use them). Later packets of the flow call [`StateTable::lookup`]; a hit whose entry
//! settles the packet ([`FlowHit::settled`]) skips the rules.
//!
//! * TCP: pf's window tracking ([`pf_tcp_track_full`]): per-direction `seqlo`/`seqhi`/`max_win`/
//!   `wscale`, the four window checks, the TCP state machine (SYN_SENT .. ESTABLISHED ..
//!   CLOSING .. FIN_WAIT_2 .. TIME_WAIT), exact RST sequence checks, the loose clause for
//!   shotgunned SYNs / picked-up connections. Out-of-window packets get
//!   `Drop(StateDropReason::OutOfWindow)`. A state created with [`StateOptions::sloppy`] (or
//!   looked up / created without a [`TcpSegment`]) uses pf's `pf_tcp_track_sloppy` (flags only).
//!   A bare SYN on a state whose both ends are >= FIN_WAIT_2 removes the old state and returns
//!   `Miss`, so the caller re-evaluates the rules and creates a fresh state (pf does the same).
//! * UDP and other protocols: pf's pseudo-states NO_TRAFFIC / SINGLE / MULTIPLE with the
//!   `udp.*` / `other.*` timeouts, transitions exactly as pf_test_state: the sender becomes
//!   SINGLE, a receiver that was SINGLE becomes MULTIPLE, `*.multiple` applies once both ends are
//!   MULTIPLE (i.e. after initiator -> responder -> initiator), `*.single` otherwise.
//! * ICMP / ICMPv6 queries: keyed as pf keys them, a query as sent from its identifier to
//!   its type, the reply back (echo reply is mapped to echo request, etc.): only the replies
//!   with the query's identifier match, not a query the other way; `icmp.first` after
//!   creation, `icmp.error` after any later packet (as pf).
//! * `modulate state` ([`StateOptions::modulate`]): a TCP state created by a bare SYN keeps a
//!   random offset for the initiator's sequence numbers (the entry's `seqdiff`) and derives
//!   the responder's from it under a secret; each end's acknowledgements are shifted back
//!   before tracking, so both ends are tracked in their own sequence spaces, and
//!   [`StateTable::modulation`] tells the data plane how to rewrite each packet
//!   ([`Modulation`]).
//! * ICMP errors (unreachable, time exceeded, packet too big, ...):
//!   [`StateTable::lookup_icmp_error`] with the quoted inner header finds the flow's state; for
//!   TCP the quoted sequence number is checked against the sender's window as pf does.
//!
//! [`pf_tcp_track_full`]: https://github.com/openbsd/src/blob/master/sys/net/pf.c
//!
//! # Expiry without timers
//!
//! Each entry stores its absolute deadline (`u32` seconds of the coarse clock the caller passes
//! as `now`). An entry with `deadline <= now` is dead: lookups treat it as absent and reclaim it
//! on the spot; [`StateTable::expire`] is an incremental sweep over a bounded number of slots per
//! call (round-robin cursor), meant to be called once per batch. No timer wheel, no heap, no
//! per-entry timer. `len()` counts entries not yet reclaimed (live or dead); when
//! `len() >= limit()` new flows are refused ([`InsertError::Full`]) until lookups or the sweep
//! reclaim dead ones; existing flows keep working.
//!
//! # Layout and memory
//!
//! Everything is allocated once in [`StateTable::try_new`] for `limit` states, and again only
//! as a [`StateMemory`] that the caller allocates off the fast path for a higher limit
//! ([`StateTable::grow_into`]); an insert never allocates.
//!
//! * `slots`: a flat `Vec<Entry>` of capacity `limit` (ids are slot indices). An `Entry` is
//!   **64 bytes, one cache line** (64-byte aligned): the canonical key (40 B, see [`Flow`]:
//!   IPv4 packs each endpoint into one word, IPv6 uses all five), deadline, rule index, flags,
//!   timeout kind and the UDP/other pseudo-states (12 B), interface bindings, `allow-opts` and
//!   tags (7 B), `modulate state`'s offset (4 B), 1 B of padding. Everything a lookup
//!   of a UDP state reads is in that line. Free slots are chained through the entry itself (no
//!   side free list). Pages of the slot array are committed by the OS as the high-water mark
//!   grows, as 2 MiB pages where the kernel can (`MADV_HUGEPAGE`, as for the index).
//! * `tcp`: per slot, the two 12-byte TCP peers (sequence windows, scale, TCP state), 24 B,
//!   read only for TCP states: the hot/cold split keeps them out of the UDP hit's line.
//! * `index`: open addressing with linear probing and backward-shift deletion (no tombstones)
//!   over `2 * limit` `u64` words (load factor <= 0.5 even when full, so a hit costs ~1.5 probes
//!   and a miss ~2.5, nearly always in one cache line), in 2 MiB pages. A word holds `id + 1`
//!   in its low 32 bits (0 is an empty word) and the hash's top 32 bits above; the home bucket
//!   is derived from those 32 bits by multiply-shift range reduction, so deletion can move
//!   words without touching the slots. A key comparison against the slot happens only when
//!   all 32 match; the words probed from one home share its leading bits, so at 10M states
//!   (20M words) some 8 bits still tell them apart and a miss almost never touches the slot
//!   array. A fixed split rather than a mask sized to the table: a probe needs no mask in a
//!   register, which leaves one more to the quick loop that inlines it.
//!
//! Per state: 64 B (slot) + 24 B (TCP peers) + 2 x 8 B (index) = **104 bytes**, 10M states =
//! 1040 MB ([`StateTable::memory_bytes`]).
//!
//! # Hash and the batched fast path
//!
//! A keyed folded-multiply hash (as in wyhash/foldhash, in `flow.rs`): the key words are xored
//! with secret words expanded (splitmix64) from the per-table `seed` and combined by
//! 64x64->128-bit multiplications folded to 64 bits; an IPv4 key takes one multiplication. It
//! is not a PRF like SipHash, but without the secret an attacker cannot aim flows at one bucket
//! chain; seed each worker's table from a random source at start-up.
//!
//! The data plane builds each IPv4 packet's [`FlowV4`] straight from the frame, hashes a whole
//! batch and prefetches each index line ([`StateTable::prefetch_index`]), then probes each
//! packet's index line and prefetches its slot ([`StateTable::probe`]), then looks each packet
//! up ([`StateTable::lookup_v4`]), so that the cache misses of a batch overlap (VPP's and
//! DPDK's batched lookup). Only the last step changes the table; it takes the probe's result
//! as a hint and checks it, so the outcome is that of plain lookups one after the other.
//! Before that last step, [`StateTable::quick`] takes the packets of established UDP flows
//! with nothing but a probe and a deadline refresh (`quick.rs`: two *steady* bits in each
//! entry's flags say which side's packets would change nothing else).
//!
//! # Concurrency
//!
//! A table belongs to one worker (`&mut self`, no locks, no atomics). [`StateTable::counters`]
//! returns plain `u64` counters the worker can publish.
//!
//! # Files
//!
//! This file: the entry, the table and its upkeep (limits, expiry, removal). `types.rs`: what
//! callers pass and get back; `index.rs`: the index's probes and deletion; `lookup.rs`:
//! lookups and ICMP errors; `insert.rs`: new states; `tcp.rs`: window tracking; `flow.rs`:
//! keys and hash; `quick.rs`: the quick loop; `sub.rs`: pf's two states per entry;
//! `inspect.rs`: operators' reads; `memory.rs`: allocation; `timeouts.rs`: pf's timeouts.

mod flow;
mod index;
mod insert;
mod inspect;
mod journal;
mod limits;
mod lookup;
mod memory;
mod proxy;
mod quick;
mod snapshot;
mod sources;
mod sub;
mod tcp;
mod types;

use mem::hugemem::HugeArray;

use crate::packet::{PacketKey, proto};
pub use crate::rules::{Timeouts, Tmo};
pub use flow::{Flow, FlowV4, flow_ports, is_icmp_error};
use flow::{FlowHasher, FlowKey};
use index::EMPTY;
pub use inspect::{Endpoint, StateEnds, state_name};
pub use journal::StateChange;
pub use limits::{Held, LimitRefusal, OverloadEvent, RuleLimits};
pub use memory::{StateAllocError, StateMemory};
pub use proxy::{ProxyPhase, ProxyReply, ProxyStep};
pub use quick::{QUICK_BATCH_MAX, QuickHits};
pub use snapshot::{ImportError, Imported, PeerSnapshot, StateSnapshot};
pub use sources::{ConnRefusal, SourceKey, Sources, SrcRefusal};
use std::collections::HashMap;
pub use sub::{Pass, SubState};
use tcp::Peer;
pub use types::{
    FlowHit, IcmpErrorMatch, InsertError, Modulation, StateCounters, StateDropReason, StateId,
    StateInfo, StateLookup, StateOptions, StateVerdict, TcpSegment, pseudo_state, tcp_flags,
    tcp_state,
};

const F_USED: u8 = 1;
/// The initiator is endpoint B of the canonical key.
const F_INIT_B: u8 = 2;
const F_SLOPPY: u8 = 4;
/// A TCP state from the peer box (state sync) that this box has not tracked a packet of yet:
/// its windows are as old as the peer's last update, up to a second, during which the
/// connection went on. Its first packet that the window refuses picks the connection up
/// instead (`tcp::pick_up`), as pf picks up one established before it.
const PICK_UP: u8 = 0xa5;
/// In [`Entry::allow`] (bit 2, beside `sub`'s two allow-opts bits): the entry holds a state
/// of a rule with adaptive timeouts of its own, whose count its life follows.
const RULE_ADAPTIVE: u8 = 4;
// 8 and 16: `quick::F_STEADY_A` and `F_STEADY_B`; 32, 64, 128: `sub::F_PF_A`, `F_PF_B`,
// `F_FLOATING`.

/// What every lookup reads of a state: one cache line (64 bytes, aligned), so that a UDP hit
/// touches one line of the slot array. A TCP state's window tracking lives in
/// [`StateTable::tcp`], a second line read only for TCP.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Entry {
    key: FlowKey,
    /// Absolute deadline (dead when `<= now`).
    expire: u32,
    /// Rule index; next free slot when the slot is free.
    rule: u32,
    flags: u8,
    tmo: u8,
    /// UDP and other protocols: the pseudo-states of [initiator, responder] (TCP keeps its
    /// states in its [`Peer`]s). TCP: `synproxy state`'s MSS during its handshake, else
    /// [`PICK_UP`] in the second byte while the state is as the peer box last synced it.
    pseudo: [u8; 2],
    /// The interface each of pf's two states is bound to (`if-bound`), by endpoint A, B.
    kif: [u16; 2],
    /// `allow-opts` of pf's two states (`sub::ALLOW_A`, `ALLOW_B`: bits 0 and 1), and in
    /// bits 4 to 7 `synproxy state`'s phase ([`Entry::proxy`]): no byte of the line is left.
    allow: u8,
    /// The tag of pf's two states (pf's `tag`: what the packets each passes are tagged
    /// with; 0: none), by endpoint A, B.
    tags: [u8; 2],
    /// The timeouts the state is under: 0, the table's (`set timeout`); else those of
    /// [`StateTable::profiles`]`[profile - 1]`, its rule's `keep state (tcp.established N)`.
    /// In the byte before `seqdiff` that alignment left spare: a state stays 104 bytes.
    profile: u8,
    /// `modulate state`: the offset added to the initiator's TCP sequence numbers (pf's
    /// `src.seqdiff`; the responder's is derived from it, `lookup.rs`); 0 when the state
    /// does not modulate. In the entry's spare bytes, so that a state stays 104 bytes.
    seqdiff: u32,
}

impl Entry {
    /// `synproxy state`'s phase (`proxy::PROXY_SRC`, `PROXY_DST`, `PROXIED`; 0: not
    /// proxied). While the router completes the handshake, `seqdiff` holds its own initial
    /// sequence number and `pseudo` the client's MSS; once `PROXIED`, `seqdiff` is the
    /// responder's offset (the initiator's is 0).
    #[inline(always)]
    fn proxy(&self) -> u8 {
        self.allow >> 4
    }

    fn set_proxy(&mut self, phase: u8) {
        self.allow = (self.allow & 0x0f) | (phase << 4);
    }
}

const NONE: u32 = u32::MAX;
/// Largest `set limit states`: 100M states, 10.4 GB per worker (ids would allow 2^32).
pub const MAX_LIMIT: usize = crate::rules::MAX_LIMIT_STATES as usize;

/// The per-worker state table.
pub struct StateTable {
    slots: Vec<Entry>,
    /// TCP states' [initiator, responder] tracking, by slot (same length as `slots`).
    tcp: Vec<[Peer; 2]>,
    /// 2 MiB pages: at millions of states a probe would otherwise miss the TLB as well as the
    /// cache (10M states: 160 MB of index, 40k pages of 4 KiB, 80 huge pages).
    index: HugeArray<u64>,
    free_head: u32,
    len: usize,
    limit: usize,
    /// The largest limit the table was sized for (index, slot ids, reserved slots): a lower
    /// limit (a reload's) leaves it.
    capacity: usize,
    hasher: FlowHasher,
    timeouts: Timeouts,
    /// Above this many entries pf's adaptive scaling shortens every timeout
    /// ([`Timeouts::adaptive`]; `usize::MAX`: off).
    adaptive_from: usize,
    /// `timeouts` by kind, read per packet.
    secs: [u32; Tmo::ALL.len()],
    /// Per-rule timeouts (pf's `keep state (udp.first 30, ...)`), each set once, by value,
    /// kept across reloads so that a state's `profile` stays valid: a kind's override, or
    /// `None` for the table's. At most 255.
    profiles: Vec<[Option<u32>; Tmo::ALL.len()]>,
    /// The profile of each rule of the current set (0: none); empty when no rule has its
    /// own timeouts, so that inserts of other rule sets only test the length.
    rule_profile: Vec<u8>,
    /// The quick lookups' deadlines by kind (see [`QuickHits`]), computed per batch.
    deadlines: [u32; 16],
    /// The flags a state needs for a packet from endpoint B (index 0) or A (1) to be settled
    /// ([`FlowHit::settled`], `sub.rs`).
    want: [u8; 2],
    sweep_cursor: usize,
    /// [`expire_paced`](Self::expire_paced): the clock (seconds) up to which it was credited,
    /// and the slots it may still examine.
    purge_clock: u32,
    purge_owed: usize,
    counters: StateCounters,
    /// The entries holding states of rules with `max` or source tracking, and the counts
    /// they hold (an entry holds at most two pf states). Empty, and never looked at, without
    /// such rules.
    limited: HashMap<u32, [Option<Held>; 2]>,
    /// The latest `now` the table was given by a sweep or a new state: when counts given
    /// back on a removal are dated (source nodes kept for `src.track`).
    clock: u32,
    /// The generator of `modulate state`'s offsets (see `insert.rs`).
    iss: u64,
    /// The secret the responder's offset is derived under (see `lookup.rs`).
    mod_key: u64,
    /// Some state was created with an offset (`modulate state`): from then on the data plane
    /// looks each TCP packet's rewrite up ([`StateTable::modulation`]), also after a reload
    /// without `modulate state` rules.
    modulated: bool,
    /// What the data plane is to send for the packet the table handled last, when that was
    /// a `synproxy state` handshake step (taken with [`StateTable::take_proxy`]).
    proxy_step: Option<ProxyStep>,
    /// What changed since the sync layer last asked (`journal.rs`); `None`: not recorded.
    journal: Option<Box<journal::Journal>>,
}

/// pf_test_state's pseudo-states of UDP and other protocols, for a packet of the initiator
/// (`from_init`) or of the responder: the sender becomes SINGLE, a receiver that was SINGLE
/// becomes MULTIPLE. Returns whether both ends are now MULTIPLE (`*.multiple` applies).
#[inline(always)]
fn pseudo_states(states: &mut [u8; 2], from_init: bool) -> bool {
    let (si, di) = if from_init { (0, 1) } else { (1, 0) };
    let src = states[si].max(pseudo_state::SINGLE);
    let mut dst = states[di];
    if dst == pseudo_state::SINGLE {
        dst = pseudo_state::MULTIPLE;
    }
    states[si] = src;
    states[di] = dst;
    src == pseudo_state::MULTIPLE && dst == pseudo_state::MULTIPLE
}

/// `now` plus the seconds of kind `t` under timeout `profile` (0: `secs`, the table's).
#[inline(always)]
fn deadline(
    secs: &[u32; Tmo::ALL.len()],
    profiles: &[[Option<u32>; Tmo::ALL.len()]],
    now: u32,
    t: Tmo,
    profile: u8,
) -> u32 {
    if profile == 0 {
        return now.saturating_add(secs[t as usize]);
    }
    profile_deadline(secs, profiles, now, t, profile)
}

#[cold]
fn profile_deadline(
    secs: &[u32; Tmo::ALL.len()],
    profiles: &[[Option<u32>; Tmo::ALL.len()]],
    now: u32,
    t: Tmo,
    profile: u8,
) -> u32 {
    let own = profiles.get(usize::from(profile) - 1).and_then(|p| p[t as usize]);
    now.saturating_add(own.unwrap_or(secs[t as usize]))
}

/// The seconds of kind `t` under timeout `profile` (0: the table's).
#[inline]
fn timeout_of(
    secs: &[u32; Tmo::ALL.len()],
    profiles: &[[Option<u32>; Tmo::ALL.len()]],
    t: Tmo,
    profile: u8,
) -> u32 {
    deadline(secs, profiles, 0, t, profile)
}

/// How many seconds pf's adaptive scaling takes off a timeout of `secs` with `states`
/// states (scaling on from `start` to `end`, see [`Timeouts::adaptive`]): pf_state_expires
/// keeps `secs * (end - states) / (end - start)`, and nothing from `end` on.
#[inline]
fn adaptive_cut(secs: u32, states: usize, (start, end): (u32, u32)) -> u32 {
    let (start, end, n) = (u64::from(start), u64::from(end), states as u64);
    if end == 0 || n <= start || start >= end {
        return 0;
    }
    let kept = if n >= end { 0 } else { u64::from(secs) * (end - n) / (end - start) };
    secs - kept as u32
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Tcp,
    Udp,
    Icmp,
    Other,
}

#[inline]
fn class(p: u8) -> Class {
    match p {
        proto::TCP => Class::Tcp,
        proto::UDP => Class::Udp,
        proto::ICMP | proto::ICMPV6 => Class::Icmp,
        _ => Class::Other,
    }
}

/// The entry count above which `t`'s adaptive scaling applies (`usize::MAX`: off).
fn adaptive_from(t: &Timeouts) -> usize {
    t.adaptive().map_or(usize::MAX, |(start, _)| start as usize)
}

impl StateTable {
    /// A table for at most `limit` states, all memory allocated here; panics if it cannot be
    /// (tests, benchmarks: a router uses [`try_new`](Self::try_new)). `seed` keys the hash: use
    /// a random value per table.
    pub fn new(limit: usize, timeouts: Timeouts, seed: u64) -> StateTable {
        StateTable::try_new(limit, timeouts, seed).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A table for at most `limit` states (`limit <= MAX_LIMIT`), all memory allocated here.
    pub fn try_new(
        limit: usize,
        timeouts: Timeouts,
        seed: u64,
    ) -> Result<StateTable, StateAllocError> {
        let mem = StateMemory::try_new(limit)?;
        Ok(StateTable {
            slots: mem.slots,
            tcp: mem.tcp,
            index: mem.index,
            free_head: NONE,
            len: 0,
            limit,
            capacity: limit,
            hasher: FlowHasher::new(seed),
            secs: timeouts.by_kind(),
            adaptive_from: adaptive_from(&timeouts),
            timeouts,
            profiles: Vec::new(),
            rule_profile: Vec::new(),
            deadlines: [0; 16],
            want: sub::want(true, true),
            sweep_cursor: 0,
            purge_clock: 0,
            purge_owed: 0,
            counters: StateCounters::default(),
            limited: HashMap::new(),
            clock: 0,
            iss: seed ^ 0x6d6f_6475_6c61_7465,
            mod_key: {
                let mut x = seed ^ 0x7365_7276_6572_2121;
                flow::splitmix64(&mut x)
            },
            modulated: false,
            proxy_step: None,
            journal: None,
        })
    }

    /// The most states the table's memory holds: the ceiling of [`set_limit`](Self::set_limit).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Moves the table into `mem`, if it is larger: a new index, rebuilt from the old one's
    /// words alone (they keep the hash bits that place them), and the slots copied. No
    /// allocation (`mem` was allocated off the fast path); costs time in proportion to the
    /// table, once, when a worker adopts a rule set with a higher limit. The old memory is
    /// freed here.
    pub fn grow_into(&mut self, mut mem: StateMemory) {
        if mem.capacity <= self.capacity {
            return;
        }
        let old = std::mem::replace(&mut self.index, mem.index);
        for &w in old.iter().filter(|&&w| w != EMPTY) {
            let mut i = self.home(w);
            while self.index[i] != EMPTY {
                i = self.next(i);
            }
            self.index[i] = w;
        }
        // Within the reserved capacity: `append` copies, it does not allocate.
        mem.slots.append(&mut self.slots);
        mem.tcp.append(&mut self.tcp);
        self.slots = mem.slots;
        self.tcp = mem.tcp;
        self.capacity = mem.capacity;
    }

    /// Changes the limit (a reloaded rule set's `set limit states`), up to the table's
    /// [`capacity`](Self::capacity) (a higher limit is cut to it: grow the table first with
    /// [`grow_into`](Self::grow_into)). Lowering it removes no state: new flows are refused
    /// until `len() < limit()`. Never allocates.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.min(self.capacity);
    }

    /// Whether pf's adaptive scaling may shorten the timeouts within a batch: the table
    /// holds `adaptive.start` states, less a batch.
    #[inline]
    pub fn timeouts_may_scale(&self) -> bool {
        self.len + QUICK_BATCH_MAX > self.adaptive_from
    }

    /// Entries held (live, plus dead ones not reclaimed yet).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// New timeouts apply to states from their next refresh on.
    pub fn set_timeouts(&mut self, t: Timeouts) {
        self.timeouts = t;
        self.secs = t.by_kind();
        self.adaptive_from = adaptive_from(&t);
    }

    /// Whether entry `e` is dead at `now`: past its deadline, or past the deadline pf's
    /// adaptive scaling gives it with the entries held now (the deadline kept is that of
    /// the full timeout, so the scaling follows the count as pf's does).
    #[inline(always)]
    fn dead(&self, id: usize, now: u32) -> bool {
        let e = &self.slots[id];
        e.expire <= now
            || ((self.len > self.adaptive_from || e.allow & RULE_ADAPTIVE != 0)
                && self.dead_scaled(id, now))
    }

    #[cold]
    fn dead_scaled(&self, id: usize, now: u32) -> bool {
        self.slots[id].expire <= now.saturating_add(self.scaled_cut(id))
    }

    /// The seconds adaptive scaling takes off entry `id`'s deadline now: its rule's own
    /// scaling by the rule's count if it has one, else the table's by its entries.
    fn scaled_cut(&self, id: usize) -> u32 {
        let e = &self.slots[id];
        let secs = timeout_of(&self.secs, &self.profiles, Tmo::from_u8(e.tmo), e.profile);
        if e.allow & RULE_ADAPTIVE != 0
            && let Some((range, states)) = self
                .limited
                .get(&(id as u32))
                .into_iter()
                .flatten()
                .flatten()
                .find_map(Held::adaptive)
        {
            return adaptive_cut(secs, states as usize, range);
        }
        self.timeouts.adaptive().map_or(0, |range| adaptive_cut(secs, self.len, range))
    }

    /// Bytes reserved by the table (slot array at full capacity, index, header).
    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Entry>()
            + self.tcp.capacity() * size_of::<[Peer; 2]>()
            + self.index.len() * size_of::<u64>()
            + size_of::<Self>()
    }

    /// Bytes the lookups of established flows touch: the index lines that hold a state's
    /// word (at most one line per state, and no more than the whole index), and the slots
    /// (and TCP peers) up to the high-water mark. A table sized for many more states than it
    /// holds (`set limit states 1000000` with 2000 flows) spreads its words over a large
    /// index, but its hits still read only a few hundred KiB: the data plane looks such a
    /// table up as a cached one, without the batched lookup's prefetching loops.
    pub fn working_set_bytes(&self) -> usize {
        let index_bytes = self.index.len() * size_of::<u64>();
        index_bytes.min(self.len * 64)
            + self.slots.len() * (size_of::<Entry>() + size_of::<[Peer; 2]>())
    }

    /// Bytes of one state's slot (64) and TCP tracking (24), for documentation and tests.
    pub const ENTRY_BYTES: usize = size_of::<Entry>() + size_of::<[Peer; 2]>();

    /// Whether some state of the table was created by `modulate state` with an offset (it may
    /// be gone since): the data plane then rewrites the packets of such states.
    pub fn modulates(&self) -> bool {
        self.modulated
    }

    pub fn counters(&self) -> StateCounters {
        StateCounters { in_use: self.len as u64, ..self.counters }
    }

    /// The deadline of a state of timeout `profile` refreshed at `now` under kind `t`.
    #[inline(always)]
    fn deadline(&self, now: u32, t: Tmo, profile: u8) -> u32 {
        deadline(&self.secs, &self.profiles, now, t, profile)
    }

    /// Sets the timeouts of each rule's states (`per_rule[i]`: rule `i`'s overrides, as
    /// [`Rule::state_timeouts`](crate::rules::Rule::state_timeouts)); the states already
    /// made keep theirs. A set of overrides beyond the 255 the table keeps over its life
    /// falls back to the table's timeouts.
    pub fn set_rule_timeouts<'a>(&mut self, per_rule: impl IntoIterator<Item = &'a [(Tmo, u32)]>) {
        self.rule_profile.clear();
        for (i, o) in per_rule.into_iter().enumerate() {
            if o.is_empty() {
                continue;
            }
            let mut p = [None; Tmo::ALL.len()];
            for &(t, s) in o {
                p[t as usize] = Some(s);
            }
            let id = match self.profiles.iter().position(|q| *q == p) {
                Some(k) => k + 1,
                None if self.profiles.len() < usize::from(u8::MAX) => {
                    self.profiles.push(p);
                    self.profiles.len()
                }
                None => 0,
            };
            if self.rule_profile.len() <= i {
                self.rule_profile.resize(i + 1, 0);
            }
            self.rule_profile[i] = id as u8;
        }
    }

    /// The timeout profile of a state rule `rule` creates.
    #[inline]
    fn profile_of(&self, rule: u32) -> u8 {
        if self.rule_profile.is_empty() {
            0
        } else {
            self.rule_profile.get(rule as usize).copied().unwrap_or(0)
        }
    }

    /// [`expire`](Self::expire) at pf's pace, as the NAT table's sweep
    /// (`nat::NatTable::sweep_paced`): every slot examined once per `set timeout interval`
    /// (pf's purge thread takes `states / interval` states a second; 10 s by default), at
    /// most `budget` slots per call, and all of `budget` while the table is full (new states
    /// wait for room). Dead states are absent to lookups anyway: only the reuse of their
    /// slots waits for it. Returns the number removed.
    #[inline]
    pub fn expire_paced(&mut self, now: u32, budget: usize) -> usize {
        if now != self.purge_clock {
            self.credit_purge(now);
        }
        let budget = if self.len >= self.limit { budget } else { budget.min(self.purge_owed) };
        if budget == 0 {
            self.clock = self.clock.max(now);
            return 0;
        }
        self.purge_owed = self.purge_owed.saturating_sub(budget);
        self.expire(now, budget)
    }

    /// A new second of the clock: the slots the paced sweep may examine for it.
    #[cold]
    fn credit_purge(&mut self, now: u32) {
        let (n, seconds) = (self.slots.len(), now.wrapping_sub(self.purge_clock) as usize);
        self.purge_clock = now;
        let per_second = n.div_ceil(self.timeouts.interval.max(1) as usize);
        self.purge_owed = self.purge_owed.saturating_add(per_second.saturating_mul(seconds)).min(n);
    }

    /// Incremental sweep: examines at most `budget` slots (round-robin) and removes the dead
    /// ones. Returns the number removed.
    pub fn expire(&mut self, now: u32, budget: usize) -> usize {
        self.clock = self.clock.max(now);
        let n = self.slots.len();
        if n == 0 {
            return 0;
        }
        // From the cursor to the end of the array, then from its start: two plain ranges
        // rather than a wrapping cursor per slot (this runs every batch).
        let budget = budget.min(n);
        let start = if self.sweep_cursor < n { self.sweep_cursor } else { 0 };
        let first = budget.min(n - start);
        let mut removed = self.sweep(start..start + first, now);
        removed += self.sweep(0..budget - first, now);
        self.sweep_cursor = if budget - first > 0 { budget - first } else { start + first };
        self.counters.expired_sweep += removed as u64;
        removed
    }

    /// Removes the dead states among slots `ids`; returns how many.
    #[inline]
    fn sweep(&mut self, ids: std::ops::Range<usize>, now: u32) -> usize {
        let mut removed = 0;
        // Removals only lower the count: a sweep that starts unscaled stays so.
        let scaled = self.len > self.adaptive_from;
        for id in ids {
            let e = &self.slots[id];
            if e.flags & F_USED != 0
                && (e.expire <= now
                    || ((scaled || e.allow & RULE_ADAPTIVE != 0) && self.dead_scaled(id, now)))
            {
                let pos = self.position_of(id);
                self.remove_at(pos, id);
                removed += 1;
            }
        }
        removed
    }

    /// Removes a state (rule flush, `pfctl -k`). False if `id` is not in use.
    pub fn remove(&mut self, id: StateId) -> bool {
        let id = id.0 as usize;
        if id >= self.slots.len() || self.slots[id].flags & F_USED == 0 {
            return false;
        }
        self.journal_removed(id);
        let pos = self.position_of(id);
        self.remove_at(pos, id);
        self.counters.removed += 1;
        true
    }

    /// Entry `id` holds a state of a rule with `max` or source tracking: its counts are
    /// given back when the entry goes.
    pub fn hold_limit(&mut self, id: StateId, held: Held) {
        if held.adaptive().is_some()
            && let Some(e) = self.slots.get_mut(id.0 as usize)
        {
            // Its life follows its rule's count: judged on the general path only.
            e.allow |= RULE_ADAPTIVE;
            quick::clear_steady(std::slice::from_mut(e));
        }
        let slots = self.limited.entry(id.0).or_default();
        match slots.iter_mut().find(|h| h.is_none()) {
            Some(free) => *free = Some(held),
            // Never: an entry holds two pf states. Give the counts back rather than leak them.
            None => held.release(self.clock),
        }
    }

    /// Entries holding counts of rules with `max` or source tracking (for tests).
    pub fn limited_entries(&self) -> usize {
        self.limited.len()
    }

    /// Gives back the counts entry `id` held (it is being removed or reused).
    #[inline]
    fn release_limits(&mut self, id: usize) {
        if !self.limited.is_empty() {
            self.release_limits_of(id);
        }
    }

    #[cold]
    fn release_limits_of(&mut self, id: usize) {
        for held in self.limited.remove(&(id as u32)).into_iter().flatten().flatten() {
            held.release(self.clock);
        }
    }

    /// Entry `id`'s TCP connection has just become established (both ends): its states of
    /// source-tracking rules count it in their source nodes (pf's `pf_src_connlimit`).
    /// `Some` if that breaks a `max-src-conn` or `max-src-conn-rate`: the caller drops the
    /// packet and removes the entry.
    #[cold]
    #[inline(never)]
    fn established(&mut self, id: usize, now: u32) -> Option<StateDropReason> {
        self.tick(now);
        let held = self.limited.get_mut(&(id as u32))?;
        let mut refused = None;
        for h in held.iter_mut().flatten() {
            if let Err(e) = h.establish(now) {
                refused = refused.or(Some(e));
                self.counters.src_overload += u64::from(h.overloads());
            }
        }
        let reason = match refused? {
            ConnRefusal::Conn => {
                self.counters.src_limit_conn += 1;
                StateDropReason::SrcConn
            }
            ConnRefusal::Rate => {
                self.counters.src_limit_conn_rate += 1;
                StateDropReason::SrcConnRate
            }
        };
        Some(reason)
    }

    /// Counts a state a limited rule refused (the caller drops the packet).
    pub fn count_refusal(&mut self, r: LimitRefusal) {
        match r {
            LimitRefusal::Max => self.counters.rule_max += 1,
            LimitRefusal::Source(SrcRefusal::States) => self.counters.src_limit_states += 1,
            LimitRefusal::Source(SrcRefusal::Nodes) => self.counters.src_limit_nodes += 1,
        }
    }

    /// Dates the counts given back from now on (see `clock`).
    #[inline]
    pub(crate) fn tick(&mut self, now: u32) {
        self.clock = self.clock.max(now);
    }

    /// The index of the rule that created state `id` (what per-rule counters need on a hit,
    /// without building a whole [`StateInfo`]).
    #[inline]
    /// The live state of flow `f` at `now`, and whether `f`'s sender is its initiator:
    /// what `route-to` and `reply-to` ask of a packet the in pass passed.
    pub fn initiator_side(&self, f: &Flow, now: u32) -> Option<(StateId, bool)> {
        let id = self.find(&f.key, self.hash(&f.key)).ok()?.id;
        let from_initiator = f.from_a ^ (self.slots[id].flags & F_INIT_B != 0);
        (!self.dead(id, now)).then_some((StateId(id as u32), from_initiator))
    }

    /// Gives every state the rule index `f` maps its own to (a reload that moves rules, see
    /// the data plane's `filter/routes.rs`).
    pub fn map_rules(&mut self, f: impl Fn(u32) -> u32) {
        for e in self.slots.iter_mut().filter(|e| e.flags & F_USED != 0) {
            e.rule = f(e.rule);
        }
    }

    /// The rule indices of the states in slots `ids` (clipped to [`slot_count`](Self::slot_count)).
    pub fn rules_of_slots(&self, ids: std::ops::Range<usize>) -> impl Iterator<Item = u32> + '_ {
        let ids = ids.start.min(self.slots.len())..ids.end.min(self.slots.len());
        self.slots[ids].iter().filter(|e| e.flags & F_USED != 0).map(|e| e.rule)
    }

    /// Gives state `id` rule index `rule` (a `route-to` on an `out` rule, see `passes.rs`).
    pub fn set_rule(&mut self, id: StateId, rule: u32) {
        if let Some(e) = self.slots.get_mut(id.0 as usize).filter(|e| e.flags & F_USED != 0) {
            e.rule = rule;
        }
    }

    pub fn rule_of(&self, id: StateId) -> Option<u32> {
        self.slots.get(id.0 as usize).filter(|e| e.flags & F_USED != 0).map(|e| e.rule)
    }

    /// Inspects a state (live or dead-not-reclaimed).
    pub fn info(&self, id: StateId) -> Option<StateInfo> {
        let e = self.slots.get(id.0 as usize)?;
        if e.flags & F_USED == 0 {
            return None;
        }
        let mut states = match class(e.key.proto()) {
            Class::Tcp => self.tcp[id.0 as usize].map(|p| p.state),
            _ => e.pseudo,
        };
        // A proxied handshake names its phase, as pfctl shows it.
        match e.proxy() {
            proxy::PROXY_SRC => states[0] = tcp_state::PROXY_SRC,
            proxy::PROXY_DST => states[0] = tcp_state::PROXY_DST,
            _ => {}
        }
        Some(StateInfo {
            rule: e.rule,
            af: e.key.af(),
            proto: e.key.proto(),
            initiator_state: states[0],
            responder_state: states[1],
            expire: e.expire.saturating_sub(self.scaled_cut(id.0 as usize)),
            timeout: Tmo::from_u8(e.tmo),
            timeout_secs: deadline(&self.secs, &self.profiles, 0, Tmo::from_u8(e.tmo), e.profile),
            sloppy: e.flags & F_SLOPPY != 0,
        })
    }

    /// The entry held for the flow of `key` and whether `key`'s sender is its endpoint A,
    /// read without the effects of a packet's lookup (no counters, timers or tracking): what
    /// the kernel fast path asks of a flow it takes over.
    pub fn peek(&self, key: &PacketKey) -> Option<(StateId, bool)> {
        let flow = Flow::of(key);
        let found = self.find(&flow.key, self.hash(&flow.key)).ok()?;
        let id = StateId(found.id as u32);
        self.rule_of(id).map(|_| (id, flow.from_a()))
    }

    /// The entry (live or dead) held for this flow, without looking it up. For tests.
    #[doc(hidden)]
    pub fn debug_id(&self, key: &PacketKey) -> Option<StateId> {
        let fk = Flow::of(key).key;
        self.find(&fk, self.hash(&fk)).ok().map(|f| StateId(f.id as u32))
    }

    /// Whether an entry (live or dead) for this flow is held. For tests.
    #[doc(hidden)]
    pub fn debug_contains(&self, key: &PacketKey) -> bool {
        let fk = Flow::of(key).key;
        self.find(&fk, self.hash(&fk)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size_of::<FlowKey>(), 40);
        assert_eq!(size_of::<Peer>(), 12);
        assert_eq!(size_of::<Entry>(), 64);
        assert_eq!(StateTable::ENTRY_BYTES, 88);
        let t = StateTable::new(1000, Timeouts::default(), 1);
        assert!(t.memory_bytes() <= 1000 * 104 + 1024);
    }
}
