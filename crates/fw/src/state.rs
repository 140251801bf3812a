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
//!   timeout kind and the UDP/other pseudo-states (12 B), 12 B of padding. Everything a lookup
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
//!   register (the quick loop spilled less).
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

mod flow;
mod inspect;
mod memory;
mod quick;
mod sub;
mod tcp;
mod timeouts;

use mem::prefetch::prefetch_read;
use mem::hugemem::HugeArray;

use crate::packet::{Af, PacketKey, proto};
use flow::{FlowHasher, FlowKey};
pub use flow::{Flow, FlowV4, flow_ports, is_icmp_error};
pub use inspect::{Endpoint, StateEnds, state_name};
pub use sub::{Pass, SubState};
pub use quick::QuickHits;
use quick::mark_steady;
use tcp::Peer;
pub use memory::{StateAllocError, StateMemory};
pub use timeouts::{Timeouts, Tmo};

/// TCP flag bits (as in [`PacketKey::tcp_flags`]).
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// TCP peer states as pf uses the BSD `TCPS_*` values.
pub mod tcp_state {
    pub const CLOSED: u8 = 0;
    pub const LISTEN: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECEIVED: u8 = 3;
    pub const ESTABLISHED: u8 = 4;
    pub const CLOSE_WAIT: u8 = 5;
    pub const FIN_WAIT_1: u8 = 6;
    pub const CLOSING: u8 = 7;
    pub const LAST_ACK: u8 = 8;
    pub const FIN_WAIT_2: u8 = 9;
    pub const TIME_WAIT: u8 = 10;
}

/// UDP / other-protocol pseudo-states (pf's `PFUDPS_*` / `PFOTHERS_*`).
pub mod pseudo_state {
    pub const NO_TRAFFIC: u8 = 0;
    pub const SINGLE: u8 = 1;
    pub const MULTIPLE: u8 = 2;
}

/// The TCP header fields tracking needs, extracted by the dataplane for each TCP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpSegment {
    /// Sequence number (host order).
    pub seq: u32,
    /// Acknowledgement number (host order; ignored without ACK).
    pub ack: u32,
    /// Window field as on the wire (unscaled).
    pub win: u16,
    /// Flags byte (see [`tcp_flags`]).
    pub flags: u8,
    /// TCP payload bytes (IP total length - IP header - TCP header).
    pub payload_len: u16,
    /// Window-scale option shift, if a SYN carries the option (ignored on non-SYN).
    pub wscale: Option<u8>,
}

/// Index of a state in its table's slot array. Reused after the state is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(pub u32);

/// Why a packet that matched a state is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateDropReason {
    /// TCP sequence/ack outside the tracked windows (pf's PFRES_BADSTATE).
    OutOfWindow,
}

/// What to do with a packet that matched a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateVerdict {
    Pass,
    Drop(StateDropReason),
}

/// Result of [`StateTable::lookup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateLookup {
    /// The packet belongs to a tracked flow: the rules are skipped.
    Hit {
        id: StateId,
        /// True when the packet goes the same way as the flow's first packet.
        dir_from_initiator: bool,
        verdict: StateVerdict,
    },
    /// No (live) state: evaluate the rules.
    Miss,
}

/// Result of [`StateTable::match_icmp_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpErrorMatch {
    /// The error belongs to this tracked flow: it passes under the state.
    Pass(StateId),
    /// It quotes a TCP sequence number outside the flow's window: pf drops it (BADSTATE).
    BadSeq(StateId),
    /// No (live) state: the rules decide.
    Miss,
}

/// Why [`StateTable::insert`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// `len() >= limit()`: the caller drops the packet and counts it.
    #[error("state table full")]
    Full,
    /// A live state for this flow already exists.
    #[error("state exists")]
    Exists(StateId),
}

/// Per-state options from the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateOptions {
    /// pf's `sloppy`: no TCP window checks (for asymmetric routing).
    pub sloppy: bool,
    /// pf's `allow-opts`: packets with IP options may pass under the state.
    pub allow_opts: bool,
    /// `if-bound`: the interface the state is bound to; `None` floats.
    pub bound: Option<u16>,
}

/// Counters the worker publishes (plain integers, no atomics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateCounters {
    /// Entries held (live plus dead not yet reclaimed), = `len()`.
    pub in_use: u64,
    pub inserts: u64,
    /// Inserts refused because the table was full.
    pub insert_full: u64,
    /// Inserts refused because a live state existed.
    pub insert_exists: u64,
    /// Lookups that found a live state (whatever the verdict).
    pub hits: u64,
    pub misses: u64,
    /// Packets dropped by state tracking, by reason.
    pub drop_out_of_window: u64,
    /// Dead entries reclaimed by a lookup/insert finding them.
    pub expired_lookup: u64,
    /// Dead entries reclaimed by the sweep.
    pub expired_sweep: u64,
    /// States removed by a bare SYN on a closed TCP connection (port reuse).
    pub reused_closed: u64,
    /// States removed by [`StateTable::remove`].
    pub removed: u64,
    pub icmp_error_hits: u64,
    pub icmp_error_misses: u64,
    /// ICMP errors quoting a TCP sequence number outside the window.
    pub icmp_error_bad_seq: u64,
}

/// Inspection of one state (tests, `pfctl -ss`-like dumps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateInfo {
    pub rule: u32,
    pub af: Af,
    pub proto: u8,
    /// TCP state (or pseudo-state) of the initiator and the responder.
    pub initiator_state: u8,
    pub responder_state: u8,
    /// Absolute deadline on the caller's clock.
    pub expire: u32,
    pub timeout: Tmo,
    pub sloppy: bool,
}

/// What a hit of [`StateTable::lookup_v4`] tells the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHit {
    pub id: StateId,
    /// The rule that created the state (what per-rule counters need).
    pub rule: u32,
    pub verdict: StateVerdict,
    /// Both of pf's passes over the packet are decided by this state (see `sub.rs`): the
    /// packet passes without rules. Otherwise the caller runs the passes the state does not
    /// cover ([`StateTable::sub_states`]).
    pub settled: bool,
}

const F_USED: u8 = 1;
/// The initiator is endpoint B of the canonical key.
const F_INIT_B: u8 = 2;
const F_SLOPPY: u8 = 4;
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
    /// states in its [`Peer`]s).
    pseudo: [u8; 2],
    /// The interface each of pf's two states is bound to (`if-bound`), by endpoint A, B.
    kif: [u16; 2],
    /// `allow-opts` of pf's two states (`sub::ALLOW_A`, `ALLOW_B`).
    allow: u8,
}

/// An empty index word. Words hold the hash's top 32 bits (the tag, which also places the
/// word: [`home_of`]) above `id + 1` (never 0, so the index can live in zero-filled huge
/// pages). A fixed split, so that a probe needs no mask in a register.
const EMPTY: u64 = 0;
const ID_BITS: u32 = 32;
const TAG_MASK: u64 = !0 << ID_BITS;
const NONE: u32 = u32::MAX;
/// Largest `set limit states`: 100M states, 10.4 GB per worker (ids would allow 2^32).
pub const MAX_LIMIT: usize = 100_000_000;

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
    /// `timeouts` by kind, read per packet.
    secs: [u32; Tmo::ALL.len()],
    /// The quick lookups' deadlines by kind (see [`QuickHits`]), computed per batch.
    deadlines: [u32; 16],
    /// The flags a state needs for a packet from endpoint B (index 0) or A (1) to be settled
    /// ([`FlowHit::settled`], `sub.rs`).
    want: [u8; 2],
    sweep_cursor: usize,
    counters: StateCounters,
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

/// The home word of hash `h` in an index of `len` words: multiply-shift range reduction of
/// the hash's top 32 bits.
#[inline(always)]
fn home_of(h: u64, len: usize) -> usize {
    (((h >> 32) * len as u64) >> 32) as usize
}

/// The slot of IPv4 flow `f` (hash `h`): probes `index` from word `i` until the flow's word,
/// or `None` at the first empty word. The probe of [`StateTable::lookup_v4`] and of the quick
/// lookups ([`QuickHits`]).
#[inline(always)]
fn find_v4(index: &[u64], slots: &[Entry], f: &FlowV4, h: u64, mut i: usize) -> Option<usize> {
    let n = index.len();
    loop {
        let w = *index.get(i)?;
        if w == EMPTY {
            return None;
        }
        if (w ^ h) & TAG_MASK == 0 {
            let id = (w as u32 as usize).wrapping_sub(1);
            if slots.get(id).is_some_and(|e| e.key.is(f)) {
                return Some(id);
            }
        }
        i = next_word(i, n);
    }
}

/// The word after `i` in an index of `len` words (linear probing wraps around).
#[inline(always)]
fn next_word(i: usize, len: usize) -> usize {
    if i + 1 == len { 0 } else { i + 1 }
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

impl StateTable {
    /// A table for at most `limit` states, all memory allocated here; panics if it cannot be
    /// (tests, benchmarks: a router uses [`try_new`](Self::try_new)). `seed` keys the hash: use
    /// a random value per table.
    pub fn new(limit: usize, timeouts: Timeouts, seed: u64) -> StateTable {
        StateTable::try_new(limit, timeouts, seed).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A table for at most `limit` states (`limit <= MAX_LIMIT`), all memory allocated here.
    pub fn try_new(limit: usize, timeouts: Timeouts, seed: u64) -> Result<StateTable, StateAllocError> {
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
            timeouts,
            deadlines: [0; 16],
            want: sub::want(true, true),
            sweep_cursor: 0,
            counters: StateCounters::default(),
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
    }

    /// Bytes reserved by the table (slot array at full capacity, index, header).
    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Entry>()
            + self.tcp.capacity() * size_of::<[Peer; 2]>()
            + self.index.len() * size_of::<u64>()
            + size_of::<Self>()
    }

    /// Bytes a lookup may touch: the whole index, and the slots (and TCP peers) up to the
    /// high-water mark.
    pub fn working_set_bytes(&self) -> usize {
        self.index.len() * size_of::<u64>() + self.slots.len() * (size_of::<Entry>() + size_of::<[Peer; 2]>())
    }

    /// Bytes of one state's slot (64) and TCP tracking (24), for documentation and tests.
    pub const ENTRY_BYTES: usize = size_of::<Entry>() + size_of::<[Peer; 2]>();

    pub fn counters(&self) -> StateCounters {
        StateCounters { in_use: self.len as u64, ..self.counters }
    }

    /// The hash of an IPv4 flow's key, for [`prefetch_index`](Self::prefetch_index),
    /// [`probe`](Self::probe) and [`lookup_v4`](Self::lookup_v4).
    #[inline(always)]
    pub fn hash_v4(&self, f: &FlowV4) -> u64 {
        self.hasher.hash_v4(f)
    }

    /// Starts loading the index line where the probe for hash `h` begins: the first step of
    /// the batched lookup (see the module documentation).
    #[inline(always)]
    pub fn prefetch_index(&self, h: u64) {
        prefetch_read(&self.index[self.home(h)]);
    }

    /// Probes the index for hash `h` (whose line should be cached by now) and starts loading
    /// the slot of the first word whose tag matches, nearly always the flow's state. Returns
    /// where the probe stopped, for [`lookup_v4`](Self::lookup_v4): a hint that saves it the
    /// probe, checked there, so the table may change in between.
    #[inline(always)]
    pub fn probe(&self, h: u64) -> u32 {
        let mut i = self.home(h);
        loop {
            let w = self.index[i];
            if w == EMPTY {
                break;
            }
            if (w ^ h) & TAG_MASK == 0 {
                if let Some(e) = self.slots.get(self.slot_of(w)) {
                    prefetch_read(e);
                }
                break;
            }
            i = self.next(i);
        }
        i as u32
    }

    #[inline]
    fn hash(&self, k: &FlowKey) -> u64 {
        self.hasher.hash(k)
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        home_of(h, self.index.len())
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        next_word(i, self.index.len())
    }

    #[inline]
    fn slot_of(&self, w: u64) -> usize {
        w as u32 as usize - 1
    }

    #[inline]
    fn word(&self, h: u64, id: usize) -> u64 {
        (h & TAG_MASK) | (id as u64 + 1)
    }

    /// Probes for `k`: `Ok((index position, slot id))` or `Err(first empty position)`.
    #[inline]
    fn find(&self, k: &FlowKey, h: u64) -> Result<(usize, usize), usize> {
        let mut i = self.home(h);
        loop {
            let w = self.index[i];
            if w == EMPTY {
                return Err(i);
            }
            if (w ^ h) & TAG_MASK == 0 {
                let id = self.slot_of(w);
                if self.slots[id].key == *k {
                    return Ok((i, id));
                }
            }
            i = self.next(i);
        }
    }

    /// Index position of slot `id` (which must be used).
    fn position_of(&self, id: usize) -> usize {
        let h = self.hash(&self.slots[id].key);
        let want = self.word(h, id);
        let mut i = self.home(h);
        loop {
            let w = self.index[i];
            assert!(w != EMPTY, "state index corrupt");
            if w == want {
                return i;
            }
            i = self.next(i);
        }
    }

    /// Removes index word at `pos` (backward-shift deletion) and frees slot `id`.
    fn remove_at(&mut self, pos: usize, id: usize) {
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = self.next(j);
            let w = self.index[j];
            if w == EMPTY {
                break;
            }
            let k = self.home(w);
            // The word at j may move to the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < k && k <= j } else { hole < k || k <= j };
            if !stays {
                self.index[hole] = w;
                hole = j;
            }
        }
        self.index[hole] = EMPTY;
        let e = &mut self.slots[id];
        e.flags = 0;
        e.rule = self.free_head;
        self.free_head = id as u32;
        self.len -= 1;
    }

    #[inline]
    fn deadline(&self, now: u32, t: Tmo) -> u32 {
        now.saturating_add(self.secs[t as usize])
    }

    /// Looks up the state of a packet and tracks it. `tcp` is the segment for TCP packets
    /// (`None`: flag-only sloppy tracking from `key.tcp_flags`). `now`: coarse clock, seconds.
    #[inline]
    pub fn lookup(&mut self, key: &PacketKey, tcp: Option<&TcpSegment>, now: u32) -> StateLookup {
        let f = Flow::of(key);
        let found = self.find(&f.key, self.hash(&f.key));
        match self.track(found, f.from_a, f.key.proto(), tcp, key.tcp_flags, now) {
            Some((id, from_init, verdict, _)) => {
                StateLookup::Hit { id: StateId(id as u32), dir_from_initiator: from_init, verdict }
            }
            None => StateLookup::Miss,
        }
    }

    /// [`lookup`](Self::lookup) for an IPv4 flow built straight from the frame: the data
    /// plane's fast path. `h` is its [`hash_v4`](Self::hash_v4), `probe` what
    /// [`probe`](Self::probe) returned for it, if it was called. `None` is a miss.
    ///
    /// Written as one straight path for a UDP hit, everything else out of line: the loop that
    /// inlines it kept spilling registers otherwise.
    #[inline(always)]
    pub fn lookup_v4(&mut self, f: &FlowV4, h: u64, probe: Option<u32>, tcp: Option<&TcpSegment>, now: u32) -> Option<FlowHit> {
        // From where the prefetch pass's probe stopped, else from the home bucket.
        let start = match probe {
            Some(p) => p as usize,
            None => self.home(h),
        };
        let Some(id) = find_v4(&self.index, &self.slots, f, h, start) else {
            if probe.is_none() {
                self.counters.misses += 1;
                return None;
            }
            // From the hint, the flow may still be between its home and the hint (moved there
            // by a deletion since the probe): the slow path probes from home.
            return self.lookup_v4_slow(f, h, tcp, now);
        };
        let e = self.slots.get_mut(id)?;
        if e.expire <= now || f.proto() != proto::UDP {
            return self.lookup_v4_slow(f, h, tcp, now);
        }
        let from_init = f.from_a() ^ (e.flags & F_INIT_B != 0);
        let t = if pseudo_states(&mut e.pseudo, from_init) { Tmo::UdpMultiple } else { Tmo::UdpSingle };
        e.tmo = t as u8;
        e.expire = now.saturating_add(self.secs[t as usize]);
        mark_steady(e, self.want);
        self.counters.hits += 1;
        let want = self.want[usize::from(f.from_a())];
        Some(FlowHit { id: StateId(id as u32), rule: e.rule, verdict: StateVerdict::Pass, settled: e.flags & want == want })
    }

    /// [`lookup_v4`](Self::lookup_v4) for everything but a UDP hit: the general lookup.
    #[inline(never)]
    fn lookup_v4_slow(&mut self, f: &FlowV4, h: u64, tcp: Option<&TcpSegment>, now: u32) -> Option<FlowHit> {
        let found = self.find(&f.flow().key, h);
        let flags = tcp.map_or(0, |s| s.flags);
        let (id, _, verdict, rule) = self.track(found, f.from_a(), f.proto(), tcp, flags, now)?;
        let want = self.want[usize::from(f.from_a())];
        Some(FlowHit { id: StateId(id as u32), rule, verdict, settled: self.slots[id].flags & want == want })
    }

    /// The lookup proper, given the outcome of `find`: `Some((slot, from initiator, verdict,
    /// rule))` on a hit.
    #[inline]
    fn track(
        &mut self,
        found: Result<(usize, usize), usize>,
        from_a: bool,
        proto_: u8,
        tcp: Option<&TcpSegment>,
        flags: u8,
        now: u32,
    ) -> Option<(usize, bool, StateVerdict, u32)> {
        let Ok((pos, id)) = found else {
            self.counters.misses += 1;
            return None;
        };
        let e = &self.slots[id];
        if e.expire <= now {
            return self.expired(pos, id);
        }
        let from_init = from_a ^ (e.flags & F_INIT_B != 0);
        let e = &mut self.slots[id];
        let mut verdict = StateVerdict::Pass;
        let refresh = match class(proto_) {
            Class::Udp | Class::Other => Some(match (proto_ == proto::UDP, pseudo_states(&mut e.pseudo, from_init)) {
                (true, true) => Tmo::UdpMultiple,
                (true, false) => Tmo::UdpSingle,
                (false, true) => Tmo::OtherMultiple,
                (false, false) => Tmo::OtherSingle,
            }),
            Class::Icmp => Some(Tmo::IcmpError),
            Class::Tcp => {
                let flags = tcp.map_or(flags, |s| s.flags);
                let [p0, p1] = &mut self.tcp[id];
                let (src, dst) = if from_init { (p0, p1) } else { (p1, p0) };
                if src.state >= tcp_state::FIN_WAIT_2
                    && dst.state >= tcp_state::FIN_WAIT_2
                    && flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN
                {
                    // New connection reusing the ports of a closed one: drop the old state,
                    // the rules decide about the new one.
                    self.remove_at(pos, id);
                    self.counters.reused_closed += 1;
                    self.counters.misses += 1;
                    return None;
                }
                match tcp {
                    Some(seg) if e.flags & F_SLOPPY == 0 => match tcp::track_full(src, dst, seg) {
                        tcp::Track::Pass(t) => Some(t),
                        tcp::Track::PassNoRefresh => None,
                        tcp::Track::Drop => {
                            verdict = StateVerdict::Drop(StateDropReason::OutOfWindow);
                            None
                        }
                    },
                    _ => Some(tcp::track_sloppy(src, dst, flags)),
                }
            }
        };
        if let Some(t) = refresh {
            e.tmo = t as u8;
            e.expire = now.saturating_add(self.secs[t as usize]);
        }
        if proto_ == proto::UDP {
            mark_steady(e, self.want);
        }
        let rule = e.rule;
        self.counters.hits += 1;
        if verdict != StateVerdict::Pass {
            self.counters.drop_out_of_window += 1;
        }
        Some((id, from_init, verdict, rule))
    }

    /// A dead entry found by a lookup: reclaimed, and the lookup misses.
    #[cold]
    fn expired(&mut self, pos: usize, id: usize) -> Option<(usize, bool, StateVerdict, u32)> {
        self.remove_at(pos, id);
        self.counters.expired_lookup += 1;
        self.counters.misses += 1;
        None
    }

    /// Creates the state for the first packet of a flow (default options).
    pub fn insert(
        &mut self,
        key: &PacketKey,
        rule: u32,
        now: u32,
        tcp: Option<&TcpSegment>,
    ) -> Result<StateId, InsertError> {
        self.insert_with(key, rule, now, tcp, StateOptions::default())
    }

    /// Creates the state for the first packet of a flow, holding both of pf's states (the
    /// packet's `in` and `out` states, see `sub.rs`): it settles every packet of the flow.
    /// The packet's source is the initiator. A dead entry for the same flow is replaced in
    /// place. Never allocates.
    pub fn insert_with(
        &mut self,
        key: &PacketKey,
        rule: u32,
        now: u32,
        tcp: Option<&TcpSegment>,
        opts: StateOptions,
    ) -> Result<StateId, InsertError> {
        let id = self.create(key, rule, now, tcp, opts)?;
        let e = &mut self.slots[id];
        sub::add(e, true, opts);
        sub::add(e, false, opts);
        if e.key.proto() == proto::UDP {
            mark_steady(e, self.want);
        }
        Ok(StateId(id as u32))
    }

    /// A new entry for `key`'s flow (no pf state in it yet), or `Exists`.
    fn create(&mut self, key: &PacketKey, rule: u32, now: u32, tcp: Option<&TcpSegment>, opts: StateOptions) -> Result<usize, InsertError> {
        let Flow { key: fk, from_a } = Flow::of(key);
        let h = self.hash(&fk);
        let id = match self.find(&fk, h) {
            Ok((_, id)) => {
                if self.slots[id].expire > now {
                    self.counters.insert_exists += 1;
                    return Err(InsertError::Exists(StateId(id as u32)));
                }
                self.counters.expired_lookup += 1;
                id
            }
            Err(pos) => {
                if self.len >= self.limit {
                    self.counters.insert_full += 1;
                    return Err(InsertError::Full);
                }
                let id = if self.free_head != NONE {
                    let id = self.free_head as usize;
                    self.free_head = self.slots[id].rule;
                    id
                } else {
                    self.slots.push(Entry::default());
                    self.tcp.push(Default::default());
                    self.slots.len() - 1
                };
                self.index[pos] = self.word(h, id);
                self.len += 1;
                id
            }
        };
        let mut e = Entry {
            key: fk,
            rule,
            flags: F_USED,
            ..Entry::default()
        };
        if !from_a {
            e.flags |= F_INIT_B;
        }
        let t = match class(fk.proto()) {
            Class::Tcp => {
                let peers = &mut self.tcp[id];
                *peers = Default::default();
                let [src, dst] = peers;
                match tcp {
                    Some(seg) => tcp::init(src, dst, seg),
                    None => {
                        src.state = tcp_state::SYN_SENT;
                        dst.state = tcp_state::CLOSED;
                    }
                }
                if opts.sloppy || tcp.is_none() {
                    e.flags |= F_SLOPPY;
                }
                Tmo::TcpFirst
            }
            Class::Udp => {
                e.pseudo[0] = pseudo_state::SINGLE;
                Tmo::UdpFirst
            }
            Class::Other => {
                e.pseudo[0] = pseudo_state::SINGLE;
                Tmo::OtherFirst
            }
            Class::Icmp => Tmo::IcmpFirst,
        };
        e.tmo = t as u8;
        e.expire = self.deadline(now, t);
        if fk.proto() == proto::UDP {
            mark_steady(&mut e, self.want);
        }
        self.slots[id] = e;
        self.counters.inserts += 1;
        Ok(id)
    }

    /// Finds the state of the flow an ICMP error quotes. `quoted` is the inner (quoted) header's
    /// 5-tuple as it appears in the error (its source is the host the error is sent back to;
    /// either orientation finds the state). `quoted_tcp_seq`: the quoted TCP sequence number,
    /// checked against the sender's window as pf does (skipped for sloppy states).
    /// The state's timeout is not refreshed. The caller should also check that the error is
    /// addressed to the quoted packet's source. `None` also for a quoted sequence number
    /// outside the window: see [`match_icmp_error`](Self::match_icmp_error) to tell the two
    /// apart.
    pub fn lookup_icmp_error(&mut self, quoted: &PacketKey, quoted_tcp_seq: Option<u32>, now: u32) -> Option<StateId> {
        match self.match_icmp_error(quoted, quoted_tcp_seq, now) {
            IcmpErrorMatch::Pass(id) => Some(id),
            IcmpErrorMatch::BadSeq(_) | IcmpErrorMatch::Miss => None,
        }
    }

    /// As [`lookup_icmp_error`](Self::lookup_icmp_error), telling a miss (the rules decide,
    /// as pf does) from a state whose window the quoted sequence number is outside (pf drops
    /// the error without evaluating the rules).
    pub fn match_icmp_error(&mut self, quoted: &PacketKey, quoted_tcp_seq: Option<u32>, now: u32) -> IcmpErrorMatch {
        let Flow { key: fk, from_a } = Flow::of(quoted);
        let h = self.hash(&fk);
        let (pos, id) = match self.find(&fk, h) {
            Ok(x) => x,
            Err(_) => {
                self.counters.icmp_error_misses += 1;
                return IcmpErrorMatch::Miss;
            }
        };
        let e = &self.slots[id];
        if e.expire <= now {
            self.remove_at(pos, id);
            self.counters.expired_lookup += 1;
            self.counters.icmp_error_misses += 1;
            return IcmpErrorMatch::Miss;
        }
        if let (Class::Tcp, Some(seq), false) = (class(fk.proto()), quoted_tcp_seq, e.flags & F_SLOPPY != 0) {
            let from_init = from_a ^ (e.flags & F_INIT_B != 0);
            let [p0, p1] = &self.tcp[id];
            let (src, dst) = if from_init { (p0, p1) } else { (p1, p0) };
            if !tcp::icmp_quoted_seq_ok(src, dst, seq) {
                self.counters.icmp_error_bad_seq += 1;
                return IcmpErrorMatch::BadSeq(StateId(id as u32));
            }
        }
        self.counters.icmp_error_hits += 1;
        IcmpErrorMatch::Pass(StateId(id as u32))
    }

    /// Incremental sweep: examines at most `budget` slots (round-robin) and removes the dead
    /// ones. Returns the number removed.
    pub fn expire(&mut self, now: u32, budget: usize) -> usize {
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
        for id in ids {
            let e = &self.slots[id];
            if e.flags & F_USED != 0 && e.expire <= now {
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
        let pos = self.position_of(id);
        self.remove_at(pos, id);
        self.counters.removed += 1;
        true
    }

    /// The index of the rule that created state `id` (what per-rule counters need on a hit,
    /// without building a whole [`StateInfo`]).
    #[inline]
    pub fn rule_of(&self, id: StateId) -> Option<u32> {
        self.slots.get(id.0 as usize).filter(|e| e.flags & F_USED != 0).map(|e| e.rule)
    }

    /// Inspects a state (live or dead-not-reclaimed).
    pub fn info(&self, id: StateId) -> Option<StateInfo> {
        let e = self.slots.get(id.0 as usize)?;
        if e.flags & F_USED == 0 {
            return None;
        }
        let states = match class(e.key.proto()) {
            Class::Tcp => self.tcp[id.0 as usize].map(|p| p.state),
            _ => e.pseudo,
        };
        Some(StateInfo {
            rule: e.rule,
            af: e.key.af(),
            proto: e.key.proto(),
            initiator_state: states[0],
            responder_state: states[1],
            expire: e.expire,
            timeout: Tmo::from_u8(e.tmo),
            sloppy: e.flags & F_SLOPPY != 0,
        })
    }

    /// Whether an entry (live or dead) for this flow is held. For tests.
    #[doc(hidden)]
    pub fn debug_contains(&self, key: &PacketKey) -> bool {
        let fk = Flow::of(key).key;
        self.find(&fk, self.hash(&fk)).is_ok()
    }

    /// Checks the index/slot invariants (O(capacity)). For tests. Returns the longest probe
    /// distance.
    #[doc(hidden)]
    pub fn debug_check(&self) -> usize {
        let cap = self.index.len();
        let mut seen = vec![false; self.slots.len()];
        let mut n = 0;
        let mut max_dist = 0;
        for (i, &w) in self.index.iter().enumerate() {
            if w == EMPTY {
                continue;
            }
            let id = self.slot_of(w);
            let e = &self.slots[id];
            assert!(e.flags & F_USED != 0, "index points to free slot {id}");
            assert!(!seen[id], "slot {id} indexed twice");
            seen[id] = true;
            let h = self.hash(&e.key);
            assert_eq!(w & TAG_MASK, h & TAG_MASK, "tag mismatch at {i}");
            // Every position from home to i must be occupied (linear probing invariant).
            let home = self.home(h);
            let mut j = home;
            let mut d = 0;
            while j != i {
                assert!(self.index[j] != EMPTY, "hole between home {home} and {i}");
                j = if j + 1 == cap { 0 } else { j + 1 };
                d += 1;
            }
            max_dist = max_dist.max(d);
            n += 1;
        }
        assert_eq!(n, self.len, "len");
        let used = self.slots.iter().filter(|e| e.flags & F_USED != 0).count();
        assert_eq!(used, self.len, "used slots");
        let mut free = 0;
        let mut f = self.free_head;
        while f != NONE {
            assert!(self.slots[f as usize].flags & F_USED == 0);
            free += 1;
            f = self.slots[f as usize].rule;
            assert!(free <= self.slots.len(), "free list cycle");
        }
        assert_eq!(free + self.len, self.slots.len(), "free list");
        max_dist
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
