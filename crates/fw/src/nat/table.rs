//! One worker's translations: each holds the two keys pf's state holds for a translated flow
//! (pf's `PF_SK_WIRE` and `PF_SK_STACK`), seen from this router's edges:
//!
//! * the **out** key: the flow's packets as they are about to leave by the translating
//!   interface, inside form; their source is rewritten to [`Session::out_to`];
//! * the **in** key: packets as they arrive on that interface, wire form; their destination is
//!   rewritten to [`Session::in_to`].
//!
//! For `nat` the out key is the inside host's packet (`lan:p -> remote:q`, source becomes
//! `ext:P`) and the in key its reply (`remote:q -> ext:P`, destination becomes `lan:p`). For
//! `rdr` the in key is the client's packet (`client -> ext:80`, destination becomes
//! `srv:8080`) and the out key the server's reply. Both keys index one [`Session`], so the
//! two directions expire together. No lock: only the owning worker touches its table.
//!
//! Layout: sessions in 64-byte slots (one cache line, free slots chained through them), one
//! open-addressing index of `u64` words over both keys ([`super::index`]), at most half
//! full: 64 bytes of slot and 32 to 64 of index per session (97.6 at 1M, 97 at 2000), grown
//! by doubling. A lookup reads one index line and one slot line; the dataplane prefetches
//! both a batch ahead once the table outgrows the caches ([`NatTable::prefetch_index`],
//! [`NatTable::probe`]).

use std::hash::Hasher;

use mem::hugemem::advise_huge;
use mem::prefetch::prefetch_read_once;

use super::NatKind;
use super::index::{MAX_SLOTS, MIN_WORDS, NatIndex, Side};
use crate::state::Timeouts;

/// An IPv4 flow as the table keys it. ICMP queries carry their identifier in both ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NatKey {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl std::hash::Hash for NatKey {
    /// Two words: two rounds of the table's hasher instead of five.
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.src) << 32 | u64::from(self.dst));
        state.write_u64(
            u64::from(self.sport) << 32 | u64::from(self.dport) << 8 | u64::from(self.proto),
        );
    }
}

impl NatKey {
    /// The same flow seen from the other end.
    pub fn reversed(&self) -> NatKey {
        NatKey {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
        }
    }
}

/// How far a translated TCP flow got, for its timeout (pf's `tcp.*` timeouts), in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub enum Phase {
    /// Only the first direction seen.
    #[default]
    First,
    /// Both directions seen.
    Established,
    /// A FIN seen (kept for pf's `tcp.closed`, or `tcp.finwait` if longer).
    Closing,
    /// A RST seen.
    Closed,
}

/// One translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The translating interface (port index): the keys only apply there.
    pub iface: u16,
    pub kind: NatKind,
    /// Made by a translation rule with `pass` (`rdr pass`, `nat pass`): fixed when made, so
    /// that a reload, which may move or change rules, does not change it (pf's state keeps
    /// the rule that made it).
    pub pass: bool,
    pub out_key: NatKey,
    /// New (source address, source port) of packets matching `out_key`.
    pub out_to: (u32, u16),
    pub in_key: NatKey,
    /// New (destination address, destination port) of packets matching `in_key`.
    pub in_to: (u32, u16),
    /// Coarse clock (seconds) of the last packet.
    pub last: u32,
    pub phase: Phase,
}

impl Session {
    /// Seconds of idleness after which the session is gone.
    #[inline]
    pub fn timeout(&self, t: &Timeouts) -> u32 {
        phase_timeout(self.out_key.proto, self.phase, t)
    }

    /// Its out key or its in key.
    #[inline(always)]
    fn key(&self, side: Side) -> &NatKey {
        match side {
            Side::Out => &self.out_key,
            Side::In => &self.in_key,
        }
    }

    #[inline(always)]
    fn expired(&self, now: u32, t: &Timeouts) -> bool {
        now.wrapping_sub(self.last) > self.timeout(t)
    }

    /// Notes a packet: `reply` (it matched the key of the other direction than the first
    /// packet's), and its TCP flags.
    pub fn touch(&mut self, now: u32, reply: bool, tcp_flags: u8) {
        self.last = now;
        self.phase = next_phase(self.out_key.proto, self.phase, reply, tcp_flags);
    }
}

/// Seconds of idleness after which a translation of protocol `proto` in `phase` is gone
/// (pf's timeouts of the state it belongs to).
#[inline]
pub fn phase_timeout(proto: u8, phase: Phase, t: &Timeouts) -> u32 {
    match proto {
        6 => match phase {
            Phase::First => t.tcp_first,
            Phase::Established => t.tcp_established,
            // pf keeps a closed connection's state (and so its translation) for
            // `tcp.closed` once both ends sent FIN: a port given to another flow sooner
            // meets the far end's TIME_WAIT (60 s on Linux), whose answer to the new SYN
            // no state passes, and the connection never opens.
            Phase::Closing => t.tcp_finwait.max(t.tcp_closed),
            Phase::Closed => t.tcp_closed,
        },
        17 => match phase {
            Phase::First => t.udp_single,
            _ => t.udp_multiple,
        },
        1 | 58 => t.icmp_first,
        _ => match phase {
            Phase::First => t.other_single,
            _ => t.other_multiple,
        },
    }
}

/// The phase after a packet of protocol `proto`: `reply` (of the other direction than the
/// first packet's), with its TCP flags.
#[inline]
pub fn next_phase(proto: u8, phase: Phase, reply: bool, tcp_flags: u8) -> Phase {
    if proto == 6 {
        if tcp_flags & 0x04 != 0 {
            return Phase::Closed;
        } else if tcp_flags & 0x01 != 0 && phase != Phase::Closed {
            return Phase::Closing;
        }
    }
    if reply && phase == Phase::First { Phase::Established } else { phase }
}

/// [`NatTable::probe`]'s answer when it names no slot.
pub const NO_HINT: u32 = u32::MAX;

/// Why a translation could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// Every port of the range is in use towards that destination (or steers elsewhere).
    PortsExhausted,
    /// The table holds its limit of sessions (or could not get the memory for more).
    TableFull,
}

/// A session's slot: one cache line, what a hit reads. `link` chains the free slots.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Slot {
    session: Session,
    /// In use: [`IN_USE`] with bit `1 << side` set while the index names this slot for its
    /// key of that side ([`INDEXED`]: a key a later session took over is not); else the next
    /// free slot ([`NONE`] ends the list).
    link: u32,
}

/// A slot in use, its low two bits clear: `link & !3 == IN_USE`.
const IN_USE: u32 = u32::MAX - 15;
/// The bits of [`IN_USE`] that say which keys the index names the slot for.
const INDEXED: u32 = 3;
const NONE: u32 = u32::MAX;

impl Slot {
    #[inline(always)]
    fn in_use(&self) -> bool {
        self.link & !INDEXED == IN_USE
    }

    /// In use and named by the index for its key of `side`: then a packet whose key equals
    /// that key is this session's, without a probe.
    #[inline(always)]
    fn indexed(&self, side: Side) -> bool {
        self.link & !INDEXED == IN_USE && self.link & (1 << side as u32) != 0
    }
}

/// A keyed folded-multiply hash of a key's two words (as the state table's, `crate::state`,
/// "Hash"), with secrets of its own for each side: an outsider who does not know them cannot
/// aim flows at one run of the index.
#[derive(Clone, Copy)]
struct KeyHasher {
    secret: [u64; 4],
}

#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

impl KeyHasher {
    fn new(seed: u64) -> KeyHasher {
        let mut s = seed;
        let mut next = || {
            // splitmix64; odd secrets, so that the multiplication loses no bits.
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) | 1
        };
        KeyHasher { secret: [next(), next(), next(), next()] }
    }

    #[inline(always)]
    fn hash(&self, k: &NatKey, side: Side) -> u64 {
        let a = u64::from(k.src) << 32 | u64::from(k.dst);
        let b = u64::from(k.sport) << 32 | u64::from(k.dport) << 8 | u64::from(k.proto);
        let s = 2 * side as usize;
        fold_mul(a ^ self.secret[s], b ^ self.secret[s + 1])
    }
}

/// The table of one worker: sessions in 64-byte slots (their array grown as needed, in 2 MiB
/// pages where the kernel can), and one index over both keys of each ([`super::index`]).
/// Memory grows on demand, by doubling (the index is rebuilt then); a failed allocation
/// refuses the translation ([`AllocError::TableFull`]) instead of aborting the worker.
pub struct NatTable {
    slots: Vec<Slot>,
    /// The first free slot ([`NONE`]: none, grow `slots`).
    free_head: u32,
    index: NatIndex,
    hasher: KeyHasher,
    len: usize,
    limit: usize,
    sweep_at: usize,
    /// The clock (seconds) up to which [`sweep_paced`](Self::sweep_paced) was credited.
    sweep_clock: u32,
    /// Slots the paced sweep may still examine.
    sweep_owed: usize,
    pub created: u64,
    pub expired: u64,
}

impl NatTable {
    /// An empty table of at most `limit` sessions; `seed` keys its hash.
    pub fn new(limit: usize, seed: u64) -> NatTable {
        NatTable {
            slots: Vec::new(),
            free_head: NONE,
            // Half a page of address space, committed as it is written.
            index: NatIndex::with_words(MIN_WORDS).expect("mapping a 512-byte NAT index"),
            hasher: KeyHasher::new(seed),
            len: 0,
            limit,
            sweep_at: 0,
            sweep_clock: 0,
            sweep_owed: 0,
            created: 0,
            expired: 0,
        }
    }

    /// Sets the most sessions the table holds (a lower limit removes none: new translations
    /// are refused until under it).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reserves room for `n` more sessions (the bench's large tables). Panics if the memory
    /// cannot be had, as `Vec::reserve` does.
    pub fn reserve(&mut self, n: usize) {
        self.try_reserve(n).expect("memory for the NAT table");
    }

    /// [`reserve`](Self::reserve), failing instead of panicking.
    pub fn try_reserve(&mut self, n: usize) -> Result<(), AllocError> {
        let want = self.len.saturating_add(n);
        if want > MAX_SLOTS {
            return Err(AllocError::TableFull);
        }
        let more = want.saturating_sub(self.slots.len());
        self.slots.try_reserve(more).map_err(|_| AllocError::TableFull)?;
        advise_huge(self.slots.spare_capacity_mut());
        if !self.index.has_room(2 * n) {
            self.rebuild(NatIndex::words_for(want))?;
        }
        Ok(())
    }

    /// Bytes the table holds: the slots up to their high-water mark (the rest of the
    /// array's capacity is address space only, never written) and the whole index.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * size_of::<Slot>() + self.index.len() * size_of::<u64>()
    }

    /// Bytes a batch's lookups may touch: the index and the slots in use. The dataplane
    /// prefetches ([`prefetch_index`](Self::prefetch_index)) when they exceed its caches.
    pub fn working_set_bytes(&self) -> usize {
        self.memory_bytes()
    }

    /// The hash of an out key, for [`prefetch_index`](Self::prefetch_index) and
    /// [`probe`](Self::probe).
    #[inline(always)]
    pub fn hash_out(&self, key: &NatKey) -> u64 {
        self.hasher.hash(key, Side::Out)
    }

    /// The hash of an in key.
    #[inline(always)]
    pub fn hash_in(&self, key: &NatKey) -> u64 {
        self.hasher.hash(key, Side::In)
    }

    /// Starts loading the index line where the probe for hash `h` begins: the first step
    /// of a batched lookup (VPP's and DPDK's, as the state table's).
    #[inline(always)]
    pub fn prefetch_index(&self, h: u64) {
        self.index.prefetch(h);
    }

    /// Probes the index for hash `h` of an out key (`out`) or an in key (whose line should
    /// be cached by now) and starts loading the slot its first matching tag names, nearly
    /// always the session the lookup will find: the second step. Returns that slot, a hint
    /// for [`lookup_out_hinted`](Self::lookup_out_hinted) ([`NO_HINT`]: none).
    #[inline(always)]
    pub fn probe(&self, h: u64, out: bool) -> u32 {
        let Some((i, s)) = self
            .index
            .probe(h, if out { Side::Out } else { Side::In })
            .and_then(|i| Some((i, self.slots.get(i)?)))
        else {
            return NO_HINT;
        };
        prefetch_read_once(s);
        i as u32
    }

    /// The slot of `key` as key `side`, by hash `h`: its index position and slot.
    #[inline(always)]
    fn find(&self, key: &NatKey, h: u64, side: Side) -> Option<(usize, usize)> {
        let slots = &self.slots;
        self.index.find(h, side, |i| slots.get(i).is_some_and(|s| s.session.key(side) == key))
    }

    #[inline(always)]
    fn lookup(&mut self, key: &NatKey, side: Side, now: u32, t: &Timeouts) -> Option<&mut Session> {
        self.lookup_by(key, self.hasher.hash(key, side), side, now, t)
    }

    /// [`lookup`](Self::lookup) with the key's hash `h` known.
    #[inline(always)]
    fn lookup_by(
        &mut self,
        key: &NatKey,
        h: u64,
        side: Side,
        now: u32,
        t: &Timeouts,
    ) -> Option<&mut Session> {
        let (_, i) = self.find(key, h, side)?;
        if self.slots[i].session.expired(now, t) {
            return self.expire(i);
        }
        self.slots.get_mut(i).map(|s| &mut s.session)
    }

    /// A dead session a lookup found: removed, and the lookup misses.
    #[cold]
    fn expire(&mut self, i: usize) -> Option<&mut Session> {
        self.remove(i);
        self.expired += 1;
        None
    }

    /// The session whose out key is `key`, if it has not expired.
    #[inline]
    pub fn lookup_out(&mut self, key: &NatKey, now: u32, t: &Timeouts) -> Option<&mut Session> {
        self.lookup(key, Side::Out, now, t)
    }

    /// [`lookup_out`](Self::lookup_out) for a key whose hash ([`hash_out`](Self::hash_out))
    /// the caller has (the prefetching pass's, not computed twice), with the slot that pass's
    /// [`probe`](Self::probe) named: if that slot holds a session the index names for this
    /// out key, it is the one, and the index is not read again (its line, loaded a batch
    /// earlier, may have left the nearest cache since); else the index is probed. The table
    /// may have changed since the probe (sessions removed, keys taken over): the check holds
    /// whatever happened.
    #[inline(always)]
    pub fn lookup_out_hinted(
        &mut self,
        key: &NatKey,
        h: u64,
        hint: u32,
        now: u32,
        t: &Timeouts,
    ) -> Option<&mut Session> {
        let i = hint as usize;
        match self.slots.get(i) {
            Some(s) if s.indexed(Side::Out) && s.session.out_key == *key => {
                if s.session.expired(now, t) {
                    return self.expire(i);
                }
                self.slots.get_mut(i).map(|s| &mut s.session)
            }
            _ => self.lookup_by(key, h, Side::Out, now, t),
        }
    }

    /// The session whose in key is `key`, if it has not expired.
    #[inline]
    pub fn lookup_in(&mut self, key: &NatKey, now: u32, t: &Timeouts) -> Option<&mut Session> {
        self.lookup(key, Side::In, now, t)
    }

    /// Whether an in key is taken (expired sessions count until swept or looked up).
    pub fn in_key_used(&self, key: &NatKey) -> bool {
        self.find(key, self.hasher.hash(key, Side::In), Side::In).is_some()
    }

    /// The session whose out key is `key`, expired or not, read without touching it (what
    /// state sync sends of a translated flow).
    pub fn peek_out(&self, key: &NatKey) -> Option<&Session> {
        let (_, i) = self.find(key, self.hasher.hash(key, Side::Out), Side::Out)?;
        self.slots.get(i).map(|s| &s.session)
    }

    /// Adds a peer's session (state sync), or, if this table has one of the same keys,
    /// refreshes it: its last packet moves on to `s.last`, its phase never back. Returns
    /// whether it was added.
    pub fn import(&mut self, s: Session) -> Result<bool, AllocError> {
        let found = self.find(&s.out_key, self.hasher.hash(&s.out_key, Side::Out), Side::Out);
        if let Some((_, i)) = found
            && let Some(ours) = self.slots.get_mut(i).map(|slot| &mut slot.session)
            && ours.in_key == s.in_key
        {
            ours.last = ours.last.max(s.last);
            ours.phase = ours.phase.max(s.phase);
            return Ok(false);
        }
        self.insert(s).map(|()| true)
    }

    /// Adds a session; its keys should be free (the caller checked with the lookups). A
    /// key still indexed for another session is taken over by this one, whose packets it
    /// then finds; the other session keeps its other key until it expires.
    pub fn insert(&mut self, s: Session) -> Result<(), AllocError> {
        if self.len >= self.limit {
            return Err(AllocError::TableFull);
        }
        if !self.index.has_room(2) {
            self.rebuild(2 * self.index.len())?;
        }
        let i = match self.free_head {
            NONE => {
                if self.slots.len() >= MAX_SLOTS {
                    return Err(AllocError::TableFull);
                }
                if self.slots.len() == self.slots.capacity() {
                    self.slots
                        .try_reserve(self.slots.len().max(64))
                        .map_err(|_| AllocError::TableFull)?;
                    advise_huge(self.slots.spare_capacity_mut());
                }
                self.slots.push(Slot { session: s, link: IN_USE });
                self.slots.len() - 1
            }
            head => {
                let i = head as usize;
                self.free_head = self.slots[i].link;
                self.slots[i] = Slot { session: s, link: IN_USE };
                i
            }
        };
        for side in [Side::Out, Side::In] {
            let key = *s.key(side);
            let h = self.hasher.hash(&key, side);
            match self.find(&key, h, side) {
                Some((pos, j)) => {
                    self.index.repoint(pos, i);
                    self.slots[j].link &= !(1 << side as u32);
                }
                None => self.index.insert(h, i, side),
            }
            self.slots[i].link |= 1 << side as u32;
        }
        self.len += 1;
        self.created += 1;
        Ok(())
    }

    /// Removes the session in slot `i` (in use) and frees the slot.
    fn remove(&mut self, i: usize) {
        let s = self.slots[i].session;
        for side in [Side::Out, Side::In] {
            self.index.remove(self.hasher.hash(s.key(side), side), i, side);
        }
        self.slots[i].link = self.free_head;
        self.free_head = i as u32;
        self.len -= 1;
    }

    /// A new index of `words` words holding the keys of every session: for growth, off the
    /// common path (an insert into a half-full index, or a reserve).
    #[cold]
    fn rebuild(&mut self, words: usize) -> Result<(), AllocError> {
        let mut index = NatIndex::with_words(words).map_err(|_| AllocError::TableFull)?;
        for (i, slot) in self.slots.iter().enumerate().filter(|(_, s)| s.in_use()) {
            for side in [Side::Out, Side::In] {
                let key = slot.session.key(side);
                let h = self.hasher.hash(key, side);
                // Only the session a key finds: one whose key a later session took over
                // keeps it unindexed.
                if self.find(key, h, side).is_some_and(|(_, j)| j == i) {
                    index.insert(h, i, side);
                }
            }
        }
        self.index = index;
        Ok(())
    }

    /// Examines up to `budget` slots from where the last sweep stopped and removes the
    /// expired sessions (a little per batch, as the state table does).
    pub fn sweep(&mut self, now: u32, t: &Timeouts, budget: usize) {
        let n = self.slots.len();
        if n == 0 {
            return;
        }
        let mut i = self.sweep_at;
        for _ in 0..budget.min(n) {
            if i >= n {
                i = 0;
            }
            if self.slots[i].in_use() && self.slots[i].session.expired(now, t) {
                self.remove(i);
                self.expired += 1;
            }
            i += 1;
        }
        self.sweep_at = i;
    }

    /// [`sweep`](Self::sweep) at pf's pace: every slot examined once per `interval` (pf's
    /// purge thread takes `states / interval` states a second; 10 s by default), at most
    /// `budget` slots per call, and all of `budget` while the table is full (new translations
    /// wait for room). What a batch pays: an unpaced sweep of a large table reads `budget`
    /// cold slots every batch (at 1M translations, 100 times more than the pace needs); an
    /// expired session is already treated as absent by the lookups, so only the reuse of its
    /// slot and ports waits for the sweep (or a lookup of its key).
    #[inline]
    pub fn sweep_paced(&mut self, now: u32, t: &Timeouts, budget: usize) {
        let n = self.slots.len();
        if now != self.sweep_clock {
            let seconds = now.wrapping_sub(self.sweep_clock) as usize;
            self.sweep_clock = now;
            let per_second = n.div_ceil(t.interval.max(1) as usize);
            self.sweep_owed =
                self.sweep_owed.saturating_add(per_second.saturating_mul(seconds)).min(n);
        }
        let budget = if self.len >= self.limit { budget } else { budget.min(self.sweep_owed) };
        if budget > 0 {
            self.sweep_owed = self.sweep_owed.saturating_sub(budget);
            self.sweep(now, t, budget);
        }
    }

    /// A free port in `lo..=hi` searched from `start`: one that `accept` takes (the worker's
    /// steering) and whose in key (`key_for(port)`) is not in use. Every port of the range is
    /// tried before giving up, as pf does, so a tuple in use is never handed out and a free
    /// one is always found.
    pub fn free_port(
        &self,
        (lo, hi): (u16, u16),
        start: u32,
        accept: impl Fn(u16) -> bool,
        key_for: impl Fn(u16) -> NatKey,
    ) -> Result<u16, AllocError> {
        let n = u32::from(hi - lo) + 1;
        for k in 0..n {
            let port = lo + ((start.wrapping_add(k)) % n) as u16;
            if accept(port) && !self.in_key_used(&key_for(port)) {
                return Ok(port);
            }
        }
        Err(AllocError::PortsExhausted)
    }

    /// Checks the index against the slots (O(size)). For tests: panics on an inconsistency.
    /// Returns the mean distance of a key's word from its home word.
    #[doc(hidden)]
    pub fn debug_check(&self) -> f64 {
        let (keys, distance) = self.index.check(|i, side| {
            let s = self.slots.get(i).filter(|s| s.in_use())?;
            let side = if side == 0 { Side::Out } else { Side::In };
            assert!(s.indexed(side), "slot {i} named for side {side:?}, not marked indexed");
            Some(self.hasher.hash(s.session.key(side), side))
        });
        let used = self.slots.iter().filter(|s| s.in_use()).count();
        assert_eq!(used, self.len, "sessions counted");
        assert!(keys <= 2 * used, "more keys than sessions have");
        let marked: usize = self
            .slots
            .iter()
            .filter(|s| s.in_use())
            .map(|s| (s.link & INDEXED).count_ones() as usize)
            .sum();
        assert_eq!(marked, keys, "keys marked indexed in their slots");
        let mut free = 0;
        let mut f = self.free_head;
        while f != NONE {
            assert!(!self.slots[f as usize].in_use(), "free list names a slot in use");
            free += 1;
            assert!(free <= self.slots.len(), "free list cycle");
            f = self.slots[f as usize].link;
        }
        assert_eq!(free + used, self.slots.len(), "free list");
        distance as f64 / keys.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A translation whose connection closed outlives the far end's TIME_WAIT (60 s on
    /// Linux): pf's `tcp.closed` (90 s), not `tcp.finwait` (45 s).
    #[test]
    fn a_closed_connections_translation_lives_as_pfs_closed_state() {
        let t = Timeouts::default();
        let s = Session {
            iface: 0,
            kind: NatKind::Nat,
            pass: false,
            out_key: NatKey { proto: 6, ..NatKey::default() },
            out_to: (0, 0),
            in_key: NatKey::default(),
            in_to: (0, 0),
            last: 0,
            phase: Phase::Closing,
        };
        assert_eq!(s.timeout(&t), t.tcp_closed.max(t.tcp_finwait));
        assert!(s.timeout(&t) >= 90);
    }

    fn session(sport: u16, nat_port: u16) -> Session {
        let out_key = NatKey { src: 0x0a00_0002, dst: 0x0808_0808, sport, dport: 53, proto: 17 };
        Session {
            iface: 1,
            kind: NatKind::Nat,
            pass: false,
            out_key,
            out_to: (0xc000_0201, nat_port),
            in_key: NatKey {
                src: 0x0808_0808,
                dst: 0xc000_0201,
                sport: 53,
                dport: nat_port,
                proto: 17,
            },
            in_to: (0x0a00_0002, sport),
            last: 0,
            phase: Phase::First,
        }
    }

    #[test]
    fn both_keys_find_the_session_until_it_expires() {
        let t = Timeouts::default();
        let mut nt = NatTable::new(10, 7);
        let s = session(1000, 50001);
        nt.insert(s).unwrap();
        assert_eq!(nt.lookup_out(&s.out_key, 5, &t).map(|s| s.out_to), Some((0xc000_0201, 50001)));
        assert_eq!(nt.lookup_in(&s.in_key, 5, &t).map(|s| s.in_to), Some((0x0a00_0002, 1000)));
        // udp.single (30 s) after the first packet only.
        assert!(nt.lookup_in(&s.in_key, 40, &t).is_none());
        assert!(nt.is_empty());
        assert_eq!(nt.expired, 1);
    }

    #[test]
    fn free_port_skips_used_and_gives_up_when_full() {
        let mut nt = NatTable::new(100, 7);
        let range = (50001, 50004);
        for (i, p) in (50001..=50004).enumerate() {
            let port = nt
                .free_port(range, 0, |_| true, |p| NatKey { dport: p, ..session(0, 0).in_key })
                .unwrap();
            assert_eq!(port, p);
            nt.insert(session(1000 + i as u16, port)).unwrap();
        }
        assert_eq!(
            nt.free_port(range, 3, |_| true, |p| NatKey { dport: p, ..session(0, 0).in_key }),
            Err(AllocError::PortsExhausted)
        );
        // Another destination has its own ports (endpoint-dependent mapping).
        let other = NatKey { src: 0x0101_0101, ..session(0, 0).in_key };
        assert_eq!(nt.free_port(range, 0, |_| true, |p| NatKey { dport: p, ..other }), Ok(50001));
        // Steering: only even ports accepted.
        let nt = NatTable::new(100, 7);
        assert_eq!(
            nt.free_port(range, 0, |p| p % 2 == 0, |p| NatKey { dport: p, ..other }),
            Ok(50002)
        );
    }

    /// The paced sweep examines `len / interval` slots per second of the clock, all of its
    /// budget while the table is full.
    #[test]
    fn the_paced_sweep_takes_a_tenth_of_the_slots_a_second() {
        let t = Timeouts::default();
        let mut nt = NatTable::new(1000, 7);
        for i in 0..100 {
            nt.insert(session(i, 10000 + i)).unwrap();
        }
        // At second 0 nothing is owed; by second 31 (udp.single 30 s) all have expired.
        nt.sweep_paced(0, &t, 16);
        assert_eq!(nt.len(), 100);
        nt.sweep_paced(31, &t, 16);
        nt.sweep_paced(31, &t, 16);
        assert_eq!(nt.len(), 100 - 32, "31 s owe the whole table: 16 a call");
        nt.sweep_paced(31, &t, 16);
        nt.sweep_paced(31, &t, 16);
        nt.sweep_paced(31, &t, 16);
        nt.sweep_paced(31, &t, 16);
        nt.sweep_paced(31, &t, 16);
        assert_eq!(nt.len(), 0, "owed 100, swept");
        for i in 0..100 {
            nt.insert(session(i, 20000 + i)).unwrap();
        }
        nt.sweep_paced(32, &t, 16);
        nt.sweep_paced(32, &t, 16);
        assert_eq!(nt.len(), 90, "one second: a tenth (10 slots) of the table");
        // A full table sweeps at full budget.
        nt.set_limit(90);
        nt.sweep_paced(32, &t, 16);
        assert_eq!(nt.len(), 74);
    }

    /// A probe's hint taken before the table changed: a key taken over by a later session,
    /// a slot freed and reused by another session. The hinted lookup finds what the plain one
    /// finds.
    #[test]
    fn a_stale_hint_finds_what_the_index_finds() {
        let t = Timeouts::default();
        let mut nt = NatTable::new(10, 7);
        let first = session(1000, 50001);
        nt.insert(first).unwrap();
        let key = first.out_key;
        let h = nt.hash_out(&key);
        let hint = nt.probe(h, true);
        assert_ne!(hint, NO_HINT);
        assert_eq!(nt.lookup_out_hinted(&key, h, hint, 1, &t).map(|s| s.out_to.1), Some(50001));
        // A later session takes the out key over; the hint still names the first's slot.
        nt.insert(Session { iface: 2, ..session(1000, 50002) }).unwrap();
        assert_eq!(nt.lookup_out_hinted(&key, h, hint, 1, &t).map(|s| s.out_to.1), Some(50002));
        assert_eq!(nt.lookup_out(&key, 1, &t).map(|s| s.out_to.1), Some(50002));
        nt.debug_check();
        // The first expires and its slot goes to another flow's session: the hint names it.
        let taker = nt.probe(h, true);
        nt.lookup_in(&first.in_key, 40, &t);
        let other = session(2000, 50003);
        nt.insert(other).unwrap();
        assert_eq!(nt.lookup_out_hinted(&key, h, hint, 1, &t).map(|s| s.out_to.1), Some(50002));
        // Past the taker's timeout: gone, whichever slot the hint names.
        assert!(nt.lookup_out_hinted(&key, h, taker, 40, &t).is_none());
        assert!(nt.lookup_out_hinted(&key, h, NO_HINT, 40, &t).is_none());
        assert!(
            nt.lookup_out_hinted(&other.out_key, nt.hash_out(&other.out_key), hint, 1, &t)
                .is_some()
        );
        nt.debug_check();
    }

    #[test]
    fn sweep_removes_expired_and_reuses_slots() {
        let t = Timeouts::default();
        let mut nt = NatTable::new(2, 7);
        nt.insert(session(1, 50001)).unwrap();
        nt.insert(session(2, 50002)).unwrap();
        assert_eq!(nt.insert(session(3, 50003)), Err(AllocError::TableFull));
        nt.sweep(1000, &t, 16);
        assert!(nt.is_empty());
        nt.insert(session(3, 50003)).unwrap();
        assert_eq!(nt.len(), 1);
    }
}
