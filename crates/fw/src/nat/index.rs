//! The translation table's index: one open-addressing array holding both keys of every
//! session (the out key and the in key), with linear probing and backward-shift deletion
//! (no tombstones), in 2 MiB pages, as the state table's index (`crate::state`, "Layout").
//!
//! A word holds the key's hash's top 32 bits (the tag, which also places the word:
//! [`home_of`]) above `2 * slot + side + 1` (never 0, so that the array can live in
//! zero-filled pages). The side bit tells an out key's word from an in key's, so that a probe
//! compares a packet's tuple only with the key of the side it looks up. The two sides hash
//! with different secrets: the same tuple as an out key and as an in key lands in different
//! places. The array is a power of two of words, at most half full.

use mem::hugemem::HugeArray;
use mem::prefetch::prefetch_read_once;

/// An empty word.
const EMPTY: u64 = 0;
const TAG_MASK: u64 = !0 << 32;
/// The fewest words an index has.
pub(super) const MIN_WORDS: usize = 64;
/// The most slots a word can name (31 bits of slot, one of side).
pub(super) const MAX_SLOTS: usize = (1 << 31) - 1;

/// Which of a session's keys a word indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    /// The out key (packets leaving by the translating interface).
    Out = 0,
    /// The in key (packets arriving on it).
    In = 1,
}

/// The home word of hash `h` in an index of `len` words: multiply-shift range reduction of
/// the hash's top 32 bits.
#[inline(always)]
fn home_of(h: u64, len: usize) -> usize {
    (((h >> 32) * len as u64) >> 32) as usize
}

/// The word for key `side` of slot `slot`, whose hash is `h`.
#[inline(always)]
fn word(h: u64, slot: usize, side: Side) -> u64 {
    (h & TAG_MASK) | (2 * slot as u64 + side as u64 + 1)
}

/// The slot and side a non-empty word names.
#[inline(always)]
fn named(w: u64) -> (usize, u32) {
    let r = (w as u32).wrapping_sub(1);
    ((r >> 1) as usize, r & 1)
}

/// The index of one table.
pub(super) struct NatIndex {
    words: HugeArray<u64>,
    /// Keys indexed.
    keys: usize,
}

impl NatIndex {
    /// An empty index of `words` words (a power of two, at least [`MIN_WORDS`]).
    pub(super) fn with_words(words: usize) -> std::io::Result<NatIndex> {
        debug_assert!(words.is_power_of_two() && words >= MIN_WORDS);
        Ok(NatIndex { words: HugeArray::zeroed(words)?, keys: 0 })
    }

    /// Words an index needs for `sessions` sessions (two keys each) at most half full.
    pub(super) fn words_for(sessions: usize) -> usize {
        sessions.saturating_mul(4).max(MIN_WORDS).next_power_of_two()
    }

    /// Its size in words.
    pub(super) fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether `n` more keys fit without passing half full.
    #[inline]
    pub(super) fn has_room(&self, n: usize) -> bool {
        (self.keys + n) * 2 <= self.words.len()
    }

    #[inline(always)]
    fn home(&self, h: u64) -> usize {
        home_of(h, self.words.len())
    }

    #[inline(always)]
    fn next(&self, i: usize) -> usize {
        (i + 1) & (self.words.len() - 1)
    }

    /// Starts loading the line where the probe for hash `h` begins.
    #[inline(always)]
    pub(super) fn prefetch(&self, h: u64) {
        if let Some(w) = self.words.get(self.home(h)) {
            prefetch_read_once(w);
        }
    }

    /// The slot of the first word of `side` whose tag is `h`'s: nearly always the key's
    /// session, to prefetch.
    #[inline(always)]
    pub(super) fn probe(&self, h: u64, side: Side) -> Option<usize> {
        self.find(h, side, |_| true).map(|(_, slot)| slot)
    }

    /// The position and slot of the word of `side` with hash `h` whose slot `is` the key's.
    #[inline(always)]
    pub(super) fn find(
        &self,
        h: u64,
        side: Side,
        is: impl Fn(usize) -> bool,
    ) -> Option<(usize, usize)> {
        let mut i = self.home(h);
        loop {
            let w = *self.words.get(i)?;
            if w == EMPTY {
                return None;
            }
            let (slot, s) = named(w);
            if (w ^ h) & TAG_MASK == 0 && s == side as u32 && is(slot) {
                return Some((i, slot));
            }
            i = self.next(i);
        }
    }

    /// Indexes key `side` of `slot` (hash `h`); the caller checked [`has_room`](Self::has_room)
    /// and that the key is not indexed (else see [`repoint`](Self::repoint)).
    pub(super) fn insert(&mut self, h: u64, slot: usize, side: Side) {
        debug_assert!(self.has_room(1) && slot <= MAX_SLOTS);
        let mut i = self.home(h);
        while self.words[i] != EMPTY {
            i = self.next(i);
        }
        self.words[i] = word(h, slot, side);
        self.keys += 1;
    }

    /// Makes the word at `pos` name `slot` instead (a key taken over by a new session).
    pub(super) fn repoint(&mut self, pos: usize, slot: usize) {
        let w = self.words[pos];
        let (_, side) = named(w);
        self.words[pos] = (w & TAG_MASK) | (2 * slot as u64 + u64::from(side) + 1);
    }

    /// Removes key `side` of `slot` (hash `h`), if this slot's word is there: a key taken
    /// over by a later session ([`repoint`](Self::repoint)) is not.
    pub(super) fn remove(&mut self, h: u64, slot: usize, side: Side) {
        let want = word(h, slot, side);
        let mut i = self.home(h);
        loop {
            let w = self.words[i];
            if w == EMPTY {
                return;
            }
            if w == want {
                return self.remove_at(i);
            }
            i = self.next(i);
        }
    }

    /// Backward-shift deletion of the word at `pos`: later words of its run move back into
    /// the hole unless their home lies cyclically in (hole, their position].
    fn remove_at(&mut self, pos: usize) {
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = self.next(j);
            let w = self.words[j];
            if w == EMPTY {
                break;
            }
            let k = self.home(w);
            let stays = if hole <= j { hole < k && k <= j } else { hole < k || k <= j };
            if !stays {
                self.words[hole] = w;
                hole = j;
            }
        }
        self.words[hole] = EMPTY;
        self.keys -= 1;
    }

    /// Checks the linear-probing invariant and that every word names a slot `valid` says is
    /// indexed, with `hash` of that slot's key. For tests: O(size). Returns the keys seen and
    /// the sum of their distances from their home words.
    pub(super) fn check(&self, valid: impl Fn(usize, u32) -> Option<u64>) -> (usize, usize) {
        let n = self.words.len();
        let (mut keys, mut distance) = (0, 0);
        for (i, &w) in self.words.iter().enumerate() {
            if w == EMPTY {
                continue;
            }
            let (slot, side) = named(w);
            let h = valid(slot, side)
                .unwrap_or_else(|| panic!("word {i} names slot {slot} side {side}, not in use"));
            assert_eq!(w & TAG_MASK, h & TAG_MASK, "tag of word {i}");
            let mut j = self.home(h);
            while j != i {
                assert!(self.words[j] != EMPTY, "hole between the home of word {i} and it");
                j = (j + 1) % n;
                distance += 1;
            }
            keys += 1;
        }
        assert_eq!(keys, self.keys, "keys counted");
        (keys, distance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_name_slot_and_side() {
        let w = word(0xdead_beef_0000_0000, 12345, Side::In);
        assert_eq!(named(w), (12345, 1));
        assert_eq!(named(word(7 << 32, MAX_SLOTS, Side::Out)), (MAX_SLOTS, 0));
    }

    #[test]
    fn deletion_closes_runs_that_wrap() {
        let mut ix = NatIndex::with_words(MIN_WORDS).unwrap();
        // Every hash homes at the last word: the run wraps around to the start.
        let h = |k: u64| (u64::from(u32::MAX) << 32) | k;
        for slot in 0..5 {
            ix.insert(h(slot as u64), slot, Side::Out);
        }
        ix.remove(h(1), 1, Side::Out);
        for slot in [0, 2, 3, 4] {
            assert!(ix.find(h(slot as u64), Side::Out, |s| s == slot).is_some(), "slot {slot}");
        }
        assert!(ix.find(h(1), Side::Out, |s| s == 1).is_none());
        assert!(ix.find(h(2), Side::In, |s| s == 2).is_none(), "the side is part of the key");
        ix.check(|s, _| (s != 1 && s < 5).then(|| h(s as u64)));
    }
}
