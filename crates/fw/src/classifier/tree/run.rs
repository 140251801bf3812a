//! The trees' run-time form: per address family, the nodes of all its trees in one array and
//! their leaves in another, values narrowed to `u32` for IPv4 (every dimension fits) and
//! kept as `u128` for IPv6.
//!
//! A leaf is a run of items `(a, b)` in [`Forest::items`]: per rule, in priority order (see
//! [`super::priority`]), a header `(priority, n)` followed by its `n` items: per dimension
//! it checks, `(dimension, count)` and `count` inclusive ranges (sorted, disjoint), or a
//! reference to a larger set (see [`SHARED`]). The leaf
//! ends with `(NONE, 0)`, which no priority beats, so that one comparison both ends the leaf
//! and skips what cannot beat a rule already found in another tree. A leaf whose pointer
//! has [`FILTERED`] is preceded by its filters (`filter.rs`): which of its rules a packet
//! may match, by one or two dimensions, so that the scan checks only those.
//!
//! A packet walks its family's trees in lockstep, one level of each per step: the walks are
//! independent, so their memory reads overlap instead of queueing one behind another.

use super::filter::{self, BUCKETS};
use super::{FILTERED, GROUPS, LEAF, Out};

/// No rule: the priority that ends a leaf and that [`Forest::classify`] returns when no rule
/// matches.
pub(super) const NONE: u32 = u32::MAX;

/// The root of a group without rules: a leaf at item 0, which every forest starts with the
/// end of a leaf.
pub(super) const EMPTY: u32 = LEAF;

/// Leaves copy a rule's ranges up to this many (searched one by one); a larger set is
/// searched by halves where it is, in [`Forest::shared`].
pub(super) const LINEAR_RANGES: usize = 8;

/// Added to a dimension in a leaf: `(dimension + SHARED, count)` is followed by one item,
/// `(start, 0)`, the set's place in [`Forest::shared`]. Dimensions are below it, so that
/// `& 7` gives the dimension either way.
pub(super) const SHARED: usize = 8;

/// A packet's dimensions, and one more (unused) so that a dimension read from the
/// structure can be masked into range instead of checked.
pub(super) type Key<V> = [V; 8];

/// The type of a dimension's values.
pub(super) trait Word: Copy + Ord + Send + Sync + 'static {
    /// `v`, which fits (values above the family's [`super::dim_max`] never occur).
    fn narrow(v: u128) -> Self;
    /// The low 32 bits (headers: priorities, dimensions, counts).
    fn low(self) -> u32;
    /// `(self - low) >> shift`, low 32 bits.
    fn bucket(self, low: Self, shift: u32) -> u32;
}

impl Word for u32 {
    #[inline(always)]
    fn narrow(v: u128) -> u32 {
        v as u32
    }
    #[inline(always)]
    fn low(self) -> u32 {
        self
    }
    #[inline(always)]
    fn bucket(self, low: u32, shift: u32) -> u32 {
        self.wrapping_sub(low).checked_shr(shift).unwrap_or(0)
    }
}

impl Word for u128 {
    #[inline(always)]
    fn narrow(v: u128) -> u128 {
        v
    }
    #[inline(always)]
    fn low(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn bucket(self, low: u128, shift: u32) -> u32 {
        self.wrapping_sub(low).checked_shr(shift).unwrap_or(0) as u32
    }
}

/// `child[0]` for values <= `value` in dimension `dim`, `child[1]` above; a child with
/// [`LEAF`] set is the start of a leaf's items.
#[derive(Clone, Copy)]
struct Node<V> {
    value: V,
    dim: u32,
    child: [u32; 2],
}

/// The trees of one family.
pub(super) struct Forest<V> {
    nodes: Vec<Node<V>>,
    items: Vec<(V, V)>,
    shared: Vec<(V, V)>,
    roots: [u32; GROUPS],
}

impl<V: Word> Forest<V> {
    pub(super) fn new(roots: [u32; GROUPS], out: &Out) -> Forest<V> {
        let nodes = out
            .nodes
            .iter()
            .map(|n| Node { value: V::narrow(n.value), dim: n.dim, child: n.child })
            .collect();
        let items = out.items.iter().map(|&(a, b)| (V::narrow(a), V::narrow(b))).collect();
        let shared = out.shared.iter().map(|&(a, b)| (V::narrow(a), V::narrow(b))).collect();
        Forest { nodes, items, shared, roots }
    }

    /// The best priority of a rule matching `k`, [`NONE`] if none does.
    #[inline(always)]
    pub(super) fn classify(&self, k: &Key<V>) -> u32 {
        let mut at = self.roots;
        loop {
            let mut inner = false;
            for c in at.iter_mut() {
                if *c & LEAF == 0 {
                    let n = &self.nodes[*c as usize];
                    *c = n.child[usize::from(k[n.dim as usize & 7] > n.value)];
                    inner = true;
                }
            }
            if !inner {
                break;
            }
        }
        // The leaves' first items, read together so that their cache misses overlap.
        let starts = at.map(|c| (c & !(LEAF | FILTERED)) as usize);
        let heads = starts.map(|p| self.items[p].0.low());
        // The filters too, before any scan: their reads overlap the heads'.
        let mut candidates = [u64::MAX; GROUPS];
        for ((m, &p), c) in candidates.iter_mut().zip(&starts).zip(at) {
            if c & FILTERED != 0 {
                *m = self.candidates(p, k);
            }
        }
        let mut best = NONE;
        for ((p, head), m) in starts.into_iter().zip(heads).zip(candidates) {
            if head < best {
                best = if m == u64::MAX {
                    self.scan_leaf(p, k, best)
                } else {
                    self.scan_candidates(p, k, best, m)
                };
            }
        }
        best
    }

    /// The rules of the filtered leaf at `p` that may match `k` (bit `j`: its rule `j`), by
    /// the leaf's filters (`filter.rs`), which end just before `p`.
    #[inline(always)]
    fn candidates(&self, p: usize, k: &Key<V>) -> u64 {
        let first = p.wrapping_sub(filter::HEADER_ITEMS);
        let Some(&[low, (dim, shift)]) = self.items.get(first..p) else { return u64::MAX };
        if u128::from(dim.low()) & filter::SECOND != 0 {
            return self.both_candidates(first, low.0, dim, shift, k);
        }
        self.mask(first, low.0, dim, shift, k)
    }

    /// [`candidates`](Self::candidates) of a leaf with two filters, the first's header
    /// starting at item `first`. Out of line: only large rule sets have them, and inlined
    /// into the walk it slowed the verdict cache's hits (code placement, docs/performance.md).
    #[inline(never)]
    fn both_candidates(&self, first: usize, low: V, dim: V, shift: V, k: &Key<V>) -> u64 {
        let second = first.wrapping_sub(filter::HEADER_ITEMS);
        let Some(&[low2, (dim2, shift2)]) = self.items.get(second..first) else { return u64::MAX };
        let m = self.mask(second, low, dim, shift, k);
        m & self.mask(second.wrapping_sub(filter::MASK_ITEMS), low2.0, dim2, shift2, k)
    }

    /// The mask for `k` of the filter whose masks end just before item `end` and whose
    /// header is `(low, _), (dim, shift)`.
    #[inline(always)]
    fn mask(&self, end: usize, low: V, dim: V, shift: V, k: &Key<V>) -> u64 {
        let Some(masks) = self.items.get(end.wrapping_sub(filter::MASK_ITEMS)..end) else {
            return u64::MAX;
        };
        let dim = u128::from(dim.low());
        let v = k[dim as usize & 7];
        let b = if dim & filter::LOW != 0 { v.low() } else { v.bucket(low, shift.low()) } as usize;
        let (even, odd) = masks[b / 2 % (BUCKETS / 2)];
        u64::from(if b.is_multiple_of(2) { even } else { odd }.low())
    }

    /// The priority of the first rule of the leaf at `p` that matches `k` and beats `best`,
    /// else `best`.
    #[inline(always)]
    fn scan_leaf(&self, p: usize, k: &Key<V>, best: u32) -> u32 {
        let mut rest = &self.items[p..];
        // The leaf's end, `(NONE, 0)`, beats no `best`, so that the scan ends there.
        while let Some((&(prio, n), tail)) = rest.split_first() {
            let prio = prio.low();
            if prio >= best {
                break;
            }
            let (checks, tail) = tail.split_at(n.low() as usize);
            if self.matches(checks, k) {
                return prio;
            }
            rest = tail;
        }
        best
    }

    /// [`scan_leaf`](Self::scan_leaf) checking only the rules whose bit in `candidates` is
    /// set (bit `j` for rule `j`, as the leaf's filter gives them).
    #[inline(always)]
    fn scan_candidates(&self, p: usize, k: &Key<V>, best: u32, mut candidates: u64) -> u32 {
        let mut rest = &self.items[p..];
        while candidates != 0 {
            let Some((&(prio, n), tail)) = rest.split_first() else { break };
            let prio = prio.low();
            if prio >= best {
                break;
            }
            let (checks, tail) = tail.split_at(n.low() as usize);
            if candidates & 1 != 0 && self.matches(checks, k) {
                return prio;
            }
            candidates >>= 1;
            rest = tail;
        }
        best
    }

    /// Whether `k` is in every range set of a rule's `checks`.
    #[inline(always)]
    fn matches(&self, mut checks: &[(V, V)], k: &Key<V>) -> bool {
        while let Some((&(d, n), tail)) = checks.split_first() {
            let (d, n) = (d.low() as usize, n.low() as usize);
            let v = k[d & 7];
            if d >= SHARED {
                let Some((&(at, _), tail)) = tail.split_first() else { return false };
                let at = at.low() as usize;
                let set = &self.shared[at..at + n];
                let j = set.partition_point(|x| x.1 < v);
                if j == n || set[j].0 > v {
                    return false;
                }
                checks = tail;
                continue;
            }
            let (set, tail) = tail.split_at(n);
            // All the ranges compared, without a branch per range (an early exit here is
            // a mispredicted branch per rule checked).
            if !set.iter().fold(false, |hit, &(a, b)| hit | ((a <= v) & (v <= b))) {
                return false;
            }
            checks = tail;
        }
        true
    }

    pub(super) fn bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node<V>>()
            + (self.items.len() + self.shared.len()) * std::mem::size_of::<(V, V)>()
    }
}
