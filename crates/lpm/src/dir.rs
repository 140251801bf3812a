//! The DIR-24-8 engine shared by IPv4 and IPv6: entry format, rule table and the writer's
//! in-place update algorithms. Lookups live in `ipv4.rs` / `ipv6.rs`.
//!
//! Levels: tbl24 covers address bits `[0, 24)` (from the most significant bit); a group at
//! level `lo` (24, 32, ...) covers bits `[lo, lo + 8)`. A prefix of length `len` is stored in
//! the level whose bit range contains its last bit, expanded over `2^(level end - len)`
//! consecutive entries (controlled prefix expansion, as in rte_lpm's `add_depth_small` /
//! `add_depth_big`).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Relaxed, Release};

use crate::reclaim::{GroupPool, Registry};
use crate::{LpmError, MAX_NEXT_HOP, NextHop};
use mem::hugemem::{HugeArray, Zeroable};

/// Entry holds a route (low 30 bits = next hop).
pub(crate) const VALID: u32 = 1 << 31;
/// Entry points to a tbl8 group (low 30 bits = group index).
pub(crate) const EXT: u32 = 1 << 30;
pub(crate) const PAYLOAD: u32 = EXT - 1;
pub(crate) const GROUP: usize = 256;

/// Next hop of a non-extended entry.
#[inline(always)]
pub(crate) fn decode(e: u32) -> Option<NextHop> {
    if e & VALID != 0 { Some(e & PAYLOAD) } else { None }
}

/// Index into the tbl8 pool of the entry selected by `byte` in the group `e` points to.
#[inline(always)]
pub(crate) fn tbl8_index(e: u32, byte: usize) -> usize {
    ((e & PAYLOAD) as usize) * GROUP + (byte & 0xff)
}

/// Address types.
pub(crate) trait Key: Copy + Eq + Hash {
    const BITS: u8;
    /// The prefix with the bits beyond `len` cleared.
    fn masked(self, len: u8) -> Self;
    /// Top 24 bits.
    fn top24(self) -> usize;
    /// The 8 bits starting `lo` bits from the most significant one.
    fn byte(self, lo: u8) -> usize;
}

impl Key for u32 {
    const BITS: u8 = 32;
    fn masked(self, len: u8) -> u32 {
        if len == 0 { 0 } else { self & (!0u32 << (32 - len)) }
    }
    fn top24(self) -> usize {
        (self >> 8) as usize
    }
    fn byte(self, lo: u8) -> usize {
        ((self >> (24 - lo as u32)) & 0xff) as usize
    }
}

impl Key for u128 {
    const BITS: u8 = 128;
    fn masked(self, len: u8) -> u128 {
        if len == 0 { 0 } else { self & (!0u128 << (128 - len)) }
    }
    fn top24(self) -> usize {
        (self >> 104) as usize
    }
    fn byte(self, lo: u8) -> usize {
        ((self >> (120 - lo as u32)) & 0xff) as usize
    }
}

/// Usage of the tbl8 group pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupStats {
    /// Groups in the pool (fixed at construction).
    pub capacity: u32,
    /// Groups currently linked into the table.
    pub in_use: u32,
    /// Groups ever touched (committed memory).
    pub high_water: u32,
    /// Retired groups not yet past their grace period.
    pub awaiting_grace_period: u32,
    /// Allocations that reused a retired group.
    pub reused: u64,
}

/// The arrays lookups read.
pub(crate) struct Tables {
    pub(crate) tbl24: HugeArray<AtomicU32>,
    pub(crate) tbl8: HugeArray<AtomicU32>,
}

/// A zeroed array of `n` entries, or the error naming its size.
fn map<T: Zeroable>(n: usize) -> Result<HugeArray<T>, LpmError> {
    HugeArray::zeroed(n).map_err(|_| LpmError::OutOfMemory { bytes: n * size_of::<T>() })
}

impl Tables {
    pub(crate) fn try_new(groups: u32) -> Result<Tables, LpmError> {
        if groups > PAYLOAD {
            return Err(LpmError::TooManyGroups(groups));
        }
        Ok(Tables { tbl24: map(1 << 24)?, tbl8: map(groups as usize * GROUP)? })
    }
}

#[derive(Clone, Copy)]
enum Loc {
    T24(usize),
    T8(usize),
}

/// Control-plane state, behind the table's writer mutex.
pub(crate) struct Writer<K> {
    /// Rule table: one map per prefix length, as rte_lpm's rule table.
    rules: Vec<HashMap<K, NextHop>>,
    /// Shadow depths, parallel to tbl24 / tbl8: `len + 1` of the prefix that wrote the entry,
    /// 0 for "no route". Meaningless for extended entries.
    d24: HugeArray<u8>,
    d8: HugeArray<u8>,
    pool: GroupPool,
    len: usize,
}

impl<K: Key> Writer<K> {
    pub(crate) fn try_new(groups: u32) -> Result<Self, LpmError> {
        Ok(Writer {
            rules: (0..=K::BITS).map(|_| HashMap::new()).collect(),
            d24: map(1 << 24)?,
            d8: map(groups as usize * GROUP)?,
            pool: GroupPool::new(groups),
            len: 0,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn stats(&self) -> GroupStats {
        self.pool.stats()
    }

    /// Bytes in use: tbl24 and its shadow, every group ever touched, the rule table.
    pub(crate) fn memory_bytes(&self) -> usize {
        let groups = self.pool.stats().high_water as usize * GROUP * (4 + 1);
        let rule = size_of::<K>() + size_of::<NextHop>() + 1;
        let rules: usize = self.rules.iter().map(|m| m.capacity() * rule).sum();
        (1 << 24) * (4 + 1) + groups + rules
    }

    fn get(&self, t: &Tables, loc: Loc) -> u32 {
        match loc {
            Loc::T24(i) => t.tbl24[i].load(Relaxed),
            Loc::T8(i) => t.tbl8[i].load(Relaxed),
        }
    }

    fn depth(&self, loc: Loc) -> u8 {
        match loc {
            Loc::T24(i) => self.d24[i],
            Loc::T8(i) => self.d8[i],
        }
    }

    /// One atomic store per entry: a racing reader sees the old or the new value.
    fn set(&mut self, t: &Tables, loc: Loc, e: u32, depth: u8) {
        match loc {
            Loc::T24(i) => {
                t.tbl24[i].store(e, Release);
                self.d24[i] = depth;
            }
            Loc::T8(i) => {
                t.tbl8[i].store(e, Release);
                self.d8[i] = depth;
            }
        }
    }

    /// Writes `(e, depth)` into `loc` if its current depth satisfies `pred`, descending into
    /// groups (a shorter prefix also applies below more specific groups).
    fn update(&mut self, t: &Tables, loc: Loc, pred: &impl Fn(u8) -> bool, e: u32, depth: u8) {
        let cur = self.get(t, loc);
        if cur & EXT != 0 {
            let base = tbl8_index(cur, 0);
            for i in base..base + GROUP {
                self.update(t, Loc::T8(i), pred, e, depth);
            }
        } else if pred(self.depth(loc)) {
            self.set(t, loc, e, depth);
        }
    }

    /// Applies `update` to the expansion range of `p/len` inside the group of `parent`'s
    /// level (or tbl24), creating missing groups on the way (they must be reserved).
    fn update_prefix(&mut self, t: &Tables, p: K, len: u8, pred: &impl Fn(u8) -> bool, e: u32) {
        let depth = len + 1;
        if len <= 24 {
            let start = p.top24();
            for i in start..start + (1 << (24 - len)) {
                self.update(t, Loc::T24(i), pred, e, depth);
            }
            return;
        }
        let mut parent = Loc::T24(p.top24());
        let mut lo = 24;
        loop {
            let base = tbl8_index(self.ensure_group(t, parent), 0);
            if len <= lo + 8 {
                let start = base + p.byte(lo);
                for i in start..start + (1 << (lo + 8 - len)) {
                    self.update(t, Loc::T8(i), pred, e, depth);
                }
                return;
            }
            parent = Loc::T8(base + p.byte(lo));
            lo += 8;
        }
    }

    /// The extended entry at `parent`, creating its group if it holds a plain entry.
    fn ensure_group(&mut self, t: &Tables, parent: Loc) -> u32 {
        let cur = self.get(t, parent);
        if cur & EXT != 0 {
            return cur;
        }
        let g = self.pool.alloc();
        let depth = self.depth(parent);
        let base = g as usize * GROUP;
        // Fill the whole group before it becomes reachable (rte_lpm add_depth_big): the
        // Release store publishing it orders these stores before it.
        for i in base..base + GROUP {
            t.tbl8[i].store(cur, Relaxed);
            self.d8[i] = depth;
        }
        let ext = EXT | g;
        self.set(t, parent, ext, depth);
        ext
    }

    /// Groups an insert of `p/len` must allocate.
    fn groups_needed(&self, t: &Tables, p: K, len: u8) -> usize {
        if len <= 24 {
            return 0;
        }
        let levels = (len as usize - 24).div_ceil(8);
        let mut loc = Loc::T24(p.top24());
        let mut lo = 24;
        for have in 0..levels {
            let cur = self.get(t, loc);
            if cur & EXT == 0 {
                return levels - have;
            }
            loc = Loc::T8(tbl8_index(cur, p.byte(lo)));
            lo += 8;
        }
        0
    }

    fn check(len: u8, nh: NextHop) -> Result<(), LpmError> {
        if len > K::BITS {
            Err(LpmError::InvalidPrefixLen(len))
        } else if nh > MAX_NEXT_HOP {
            Err(LpmError::NextHopTooLarge(nh))
        } else {
            Ok(())
        }
    }

    pub(crate) fn insert(
        &mut self,
        t: &Tables,
        reg: &Registry,
        prefix: K,
        len: u8,
        nh: NextHop,
    ) -> Result<Option<NextHop>, LpmError> {
        Self::check(len, nh)?;
        let p = prefix.masked(len);
        // Reserve first so that a full pool leaves the table untouched.
        self.pool.reserve(self.groups_needed(t, p, len))?;
        let old = self.rules[len as usize].insert(p, nh);
        if old.is_none() {
            self.len += 1;
        }
        let depth = len + 1;
        // Overwrite entries owned by this or a shorter (less specific) prefix.
        self.update_prefix(t, p, len, &|d| d <= depth, VALID | nh);
        self.pool.end_op(reg);
        Ok(old)
    }

    pub(crate) fn remove(
        &mut self,
        t: &Tables,
        reg: &Registry,
        prefix: K,
        len: u8,
    ) -> Result<Option<NextHop>, LpmError> {
        Self::check(len, 0)?;
        let p = prefix.masked(len);
        let Some(old) = self.rules[len as usize].remove(&p) else {
            return Ok(None);
        };
        self.len -= 1;
        // The covering (next less specific) rule replaces this one where it was the best
        // match (rte_lpm `find_previous_rule` + `delete_depth_small/big`).
        let (e, d) = (0..len)
            .rev()
            .filter(|&l| !self.rules[l as usize].is_empty())
            .find_map(|l| self.rules[l as usize].get(&p.masked(l)).map(|&nh| (VALID | nh, l + 1)))
            .unwrap_or((0, 0));
        let depth = len + 1;
        let pred = |cur: u8| cur == depth;
        if len <= 24 {
            let start = p.top24();
            for i in start..start + (1 << (24 - len)) {
                self.update(t, Loc::T24(i), &pred, e, d);
            }
        } else {
            // Walk the existing path (the groups exist: they hold this rule's entries).
            let mut path = Vec::new();
            let mut parent = Loc::T24(p.top24());
            let mut lo = 24;
            loop {
                let cur = self.get(t, parent);
                debug_assert!(cur & EXT != 0, "missing group for an existing rule");
                if cur & EXT == 0 {
                    break;
                }
                let base = tbl8_index(cur, 0);
                path.push((parent, cur, lo));
                if len <= lo + 8 {
                    let start = base + p.byte(lo);
                    for i in start..start + (1 << (lo + 8 - len)) {
                        self.update(t, Loc::T8(i), &pred, e, d);
                    }
                    break;
                }
                parent = Loc::T8(base + p.byte(lo));
                lo += 8;
            }
            // Collapse groups that became uniform, deepest first.
            for &(parent, ext, lo) in path.iter().rev() {
                if !self.try_collapse(t, parent, ext, lo) {
                    break;
                }
            }
        }
        self.pool.end_op(reg);
        Ok(Some(old))
    }

    /// If every entry of the group at level `lo` comes from a prefix of length <= `lo` (so
    /// all are equal), stores that entry into `parent` and retires the group (rte_lpm
    /// `tbl8_recycle_check`). The group is reused only after a grace period.
    fn try_collapse(&mut self, t: &Tables, parent: Loc, ext: u32, lo: u8) -> bool {
        let base = tbl8_index(ext, 0);
        let uniform = (base..base + GROUP)
            .all(|i| t.tbl8[i].load(Relaxed) & EXT == 0 && self.d8[i] <= lo + 1);
        if !uniform {
            return false;
        }
        let (e, d) = (t.tbl8[base].load(Relaxed), self.d8[base]);
        debug_assert!((base..base + GROUP).all(|i| t.tbl8[i].load(Relaxed) == e));
        self.set(t, parent, e, d);
        self.pool.retire(ext & PAYLOAD);
        true
    }
}
