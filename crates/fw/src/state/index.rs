//! The table's index: open addressing with linear probing over `u64` words, each holding a
//! hash tag and a slot id (see the layout in the module documentation of `state.rs`), and
//! backward-shift deletion, so there are no tombstones.

use mem::prefetch::prefetch_read;

use super::flow::FlowKey;
use super::{Entry, F_USED, FlowV4, NONE, StateTable};

/// An empty index word. Words hold the hash's top 32 bits (the tag, which also places the
/// word: [`home_of`]) above `id + 1` (never 0, so the index can live in zero-filled huge
/// pages). A fixed split, so that a probe needs no mask in a register.
pub(super) const EMPTY: u64 = 0;
const ID_BITS: u32 = 32;
pub(super) const TAG_MASK: u64 = !0 << ID_BITS;

/// A key's place in the table: its word's position in the index and its slot.
#[derive(Clone, Copy)]
pub(super) struct Found {
    pub(super) pos: usize,
    pub(super) id: usize,
}

/// The home word of hash `h` in an index of `len` words: multiply-shift range reduction of
/// the hash's top 32 bits.
#[inline(always)]
pub(super) fn home_of(h: u64, len: usize) -> usize {
    (((h >> 32) * len as u64) >> 32) as usize
}

/// The slot of IPv4 flow `f` (hash `h`): probes `index` from word `i` until the flow's word,
/// or `None` at the first empty word. The probe of [`StateTable::lookup_v4`] and of the quick
/// lookups ([`QuickHits`]).
#[inline(always)]
pub(super) fn find_v4(
    index: &[u64],
    slots: &[Entry],
    f: &FlowV4,
    h: u64,
    i: usize,
) -> Option<usize> {
    find_by(index, slots, h, i, |e| e.key.is(f))
}

/// [`find_v4`] for any flow's key `k` (the quick lookups of IPv6 flows).
#[inline(always)]
pub(super) fn find_key(
    index: &[u64],
    slots: &[Entry],
    k: &FlowKey,
    h: u64,
    i: usize,
) -> Option<usize> {
    find_by(index, slots, h, i, |e| e.key == *k)
}

/// The probe behind both: the first slot from word `i` whose tag matches `h` and whose entry
/// `is` the flow's.
#[inline(always)]
fn find_by(
    index: &[u64],
    slots: &[Entry],
    h: u64,
    mut i: usize,
    is: impl Fn(&Entry) -> bool,
) -> Option<usize> {
    let n = index.len();
    loop {
        let w = *index.get(i)?;
        if w == EMPTY {
            return None;
        }
        if (w ^ h) & TAG_MASK == 0 {
            let id = (w as u32 as usize).wrapping_sub(1);
            if slots.get(id).is_some_and(&is) {
                return Some(id);
            }
        }
        i = next_word(i, n);
    }
}

/// The word after `i` in an index of `len` words (linear probing wraps around).
#[inline(always)]
pub(super) fn next_word(i: usize, len: usize) -> usize {
    if i + 1 == len { 0 } else { i + 1 }
}

impl StateTable {
    /// The hash of an IPv4 flow's key, for [`prefetch_index`](Self::prefetch_index),
    /// [`probe`](Self::probe) and [`lookup_v4`](Self::lookup_v4).
    #[inline(always)]
    pub fn hash_v4(&self, f: &FlowV4) -> u64 {
        self.hasher.hash_v4(f)
    }

    /// The hash of any flow's key ([`hash_v4`](Self::hash_v4) for IPv4's fast path).
    #[inline(always)]
    pub fn hash_flow(&self, f: &super::Flow) -> u64 {
        self.hasher.hash(&f.key)
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
    pub(super) fn hash(&self, k: &FlowKey) -> u64 {
        self.hasher.hash(k)
    }

    #[inline]
    pub(super) fn home(&self, h: u64) -> usize {
        home_of(h, self.index.len())
    }

    #[inline]
    pub(super) fn next(&self, i: usize) -> usize {
        next_word(i, self.index.len())
    }

    #[inline]
    pub(super) fn slot_of(&self, w: u64) -> usize {
        w as u32 as usize - 1
    }

    #[inline]
    pub(super) fn word(&self, h: u64, id: usize) -> u64 {
        (h & TAG_MASK) | (id as u64 + 1)
    }

    /// Probes for `k`: where its word is and the slot it names, or `Err(first empty position)`.
    #[inline]
    pub(super) fn find(&self, k: &FlowKey, h: u64) -> Result<Found, usize> {
        let mut i = self.home(h);
        loop {
            let w = self.index[i];
            if w == EMPTY {
                return Err(i);
            }
            if (w ^ h) & TAG_MASK == 0 {
                let id = self.slot_of(w);
                if self.slots[id].key == *k {
                    return Ok(Found { pos: i, id });
                }
            }
            i = self.next(i);
        }
    }

    /// Index position of slot `id` (which must be used).
    pub(super) fn position_of(&self, id: usize) -> usize {
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
    pub(super) fn remove_at(&mut self, pos: usize, id: usize) {
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
        self.release_limits(id);
        let e = &mut self.slots[id];
        e.flags = 0;
        e.rule = self.free_head;
        self.free_head = id as u32;
        self.len -= 1;
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
