//! The decision-tree engine: what compiles any rule set in bounded time and memory when RFC's
//! cross products would not fit (HyperSplit: Y. Qi et al., "Packet Classification
//! Algorithms: From Theory to Practice", INFOCOM 2009).
//!
//! One binary tree per address family. A packet is seven numbers (dimensions): interface and
//! direction, protocol, TCP flags (a value of its own for other protocols), source port
//! (ICMP type), destination port (ICMP code), source and destination address. Each rule is,
//! per dimension, a union of ranges (a list, a negation or a table is several ranges; a table's ranges are its members, most specific entry
//! deciding). An inner node splits one dimension at one value; a rule goes to each side its
//! ranges reach. The split chosen is the one that minimises the larger side (then the sum,
//! i.e. the rules copied to both sides). A node becomes a leaf when it holds at most
//! [`LEAF_RULES`] rules, when no split separates its rules, or when the rules stored so far
//! reach [`STORED_PER_RULE`] times the rule count (bounded memory: leaves then stay larger).
//!
//! pf's semantics prune as the tree is built: in a node's box, rules after a `quick` rule
//! that covers the whole box can never decide, nor can non-`quick` rules before a
//! non-`quick` rule that covers it. pf's order is one number per rule ([`priority`]: the
//! first matching `quick` rule decides, else the last matching rule), and a leaf holds its
//! rules sorted by it, each with only the dimensions the leaf's box does not settle: the
//! first matching rule of a leaf is the leaf's answer, and the packet's is the best of its
//! family's trees ([`run`] has the run-time layout). A leaf of a few tens of rules may
//! have filters that tell, by one dimension or two, which of them a packet may match
//! (`filter.rs`).

mod filter;
mod run;

use run::Word;

use crate::rules::dims::{DIMS, NOT_TCP, dim_max, rule_dim, table_ranges};
pub(super) use crate::rules::dims::{DPORT, Range, SPORT, SRC};
pub use filter::PAIRS_FROM;

use crate::packet::{Af, Dir, PacketKey, proto};
use crate::rules::RuleSet;
use crate::verdict::Verdict;

/// The dimensions a rule checks in a leaf's box, each with its ranges clipped to the box.
type Checks = Vec<(usize, Vec<Range>)>;

/// Rules go to separate trees by whether their source and destination addresses are
/// narrow (at most 1/16 of the family's space) or wide: wide rules would otherwise be copied
/// into most leaves of the narrow rules' splits (EffiCuts' separable trees).
const GROUPS: usize = 4;

fn group(af: Af, sets: &RuleSets) -> usize {
    let max = dim_max(af, SRC);
    let narrow = |d: usize| {
        sets[d].as_ref().is_some_and(|s| {
            let size =
                s.iter().fold(0u128, |acc, &(a, b)| acc.saturating_add(b - a).saturating_add(1));
            size <= (max >> 4) + 1
        })
    };
    usize::from(narrow(SRC)) + 2 * usize::from(narrow(SRC + 1))
}

/// A node with at most this many rules is a leaf. Leaves are cheap to scan (in priority
/// order, ranges inline, the scan ending at the first match), levels are not (a dependent
/// read each): larger leaves make shallower trees (`docs/performance.md`).
pub(crate) const LEAF_RULES: usize = 24;
/// Rules stored in leaves, over all leaves, at most this many times the rule count (plus
/// [`STORED_SLACK`]); past it the remaining nodes become leaves as they are.
pub(crate) const STORED_PER_RULE: usize = 128;
const STORED_SLACK: usize = 1 << 16;
const MAX_DEPTH: usize = 64;
const LEAF: u32 = 1 << 31;
/// Set with [`LEAF`] on a leaf that has a filter ([`filter`]). Item indices stay below it
/// (2^30 items are 8 GiB even narrowed to IPv4's: memory runs out first).
const FILTERED: u32 = 1 << 30;

#[inline(always)]
fn key_dims<V: Word>(key: &PacketKey) -> run::Key<V> {
    let mask = if key.af == Af::Inet { u128::from(u32::MAX) } else { u128::MAX };
    [
        u128::from(key.dir == Dir::Out) << 16 | u128::from(key.iface),
        u128::from(key.proto),
        if key.proto == proto::TCP { u128::from(key.tcp_flags) } else { NOT_TCP },
        u128::from(key.src_port),
        u128::from(key.dst_port),
        key.src & mask,
        key.dst & mask,
        0,
    ]
    .map(V::narrow)
}

/// A rule's ranges per dimension (`None`: any value), as [`rule_dim`] gives them.
type RuleSets = [Option<Vec<Range>>; DIMS];

/// A rule as the tree of one family sees it.
struct TreeRule {
    rule: u32,
    quick: bool,
    /// Per dimension, the slice of `ranges` (start, length); length 0 = any value.
    dims: [(u32, u32); DIMS],
}

/// Per rule of family `af` (`None`: every rule) that constrains dimension `d`, its index and
/// ranges there; with the dimension's largest value. What [`super::classes`] partitions.
pub(super) fn dim_ranges(
    rs: &RuleSet,
    af: Option<Af>,
    d: usize,
) -> (Vec<(usize, Vec<Range>)>, u128) {
    let fam = af.unwrap_or(Af::Inet);
    let tables: Vec<Vec<Range>> = if d >= SRC {
        rs.tables.iter().map(|t| table_ranges(t, fam)).collect()
    } else {
        Vec::new()
    };
    let rules =
        rs.rules.iter().enumerate().filter(|(_, r)| af.is_none() || r.af.is_none() || r.af == af);
    (
        rules.filter_map(|(i, r)| rule_dim(r, fam, d, &tables).map(|s| (i, s))).collect(),
        dim_max(fam, d),
    )
}

/// A node as built, before [`run::Node`] narrows its value.
#[derive(Clone, Copy)]
struct BuildNode {
    value: u128,
    dim: u32,
    child: [u32; 2],
}

/// What the trees of one family are built into: nodes and leaf items shared by all groups
/// (see [`run`] for the layout of a leaf).
struct Out {
    nodes: Vec<BuildNode>,
    items: Vec<Range>,
    /// The range sets of all rules, which leaves refer to when a set is too large to copy.
    shared: Vec<Range>,
    stats: TreeStats,
    /// Leaves may get a second filter ([`filter::choose`]'s `pairs`).
    pairs: bool,
}

/// The tree of one group of one family, while it is built.
struct Builder {
    rules: Vec<TreeRule>,
    ranges: Vec<Range>,
    /// Where `ranges` start in [`Out::shared`].
    shared_at: usize,
}

/// Sizes of the trees (summed; depth the largest).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Trees built (per family, per non-empty group).
    pub trees: usize,
    pub nodes: usize,
    pub leaves: usize,
    /// Rules stored in leaves, over all leaves.
    pub stored: usize,
    pub largest_leaf: usize,
    pub depth: usize,
    /// Leaves with a filter (`filter.rs`).
    pub filtered: usize,
    /// Of those, leaves with a second filter.
    pub filtered_twice: usize,
}

/// A rule's place in pf's order as one number, lower deciding: `quick` rules first in
/// rule order, then the others last first (the last matching one decides). `rules` is the
/// rule count (below 2^31, so no priority reaches [`run::NONE`]).
fn priority(index: usize, quick: bool, rules: usize) -> u32 {
    if quick { index as u32 } else { (2 * rules - 1 - index) as u32 }
}

/// The rule of a priority (the inverse of [`priority`]).
fn rule_of(prio: u32, rules: usize) -> usize {
    let p = prio as usize;
    if p < rules { p } else { 2 * rules - 1 - p }
}

/// The trees of family `af`, one per [`group`] of its rules, into `out`; their roots.
fn build_family(rs: &RuleSet, af: Af, out: &mut Out) -> [u32; GROUPS] {
    let tables: Vec<Vec<Range>> = rs.tables.iter().map(|t| table_ranges(t, af)).collect();
    let mut all: Vec<(usize, RuleSets)> = Vec::new();
    for (i, r) in rs.rules.iter().enumerate() {
        if r.af.is_some_and(|a| a != af) {
            continue;
        }
        let sets: RuleSets = std::array::from_fn(|d| rule_dim(r, af, d, &tables));
        if sets.iter().any(|s| s.as_ref().is_some_and(|s| s.is_empty())) {
            continue;
        }
        all.push((i, sets));
    }
    // The pruning of the root box, before the rules are split into groups (which would
    // each miss the covering rules of the others): after a `quick` rule that matches
    // every packet of the family, nothing decides; before a non-`quick` one, no
    // non-`quick` rule does (typically a final `pass all` or a first `block all`).
    let everything = |sets: &RuleSets| sets.iter().all(Option::is_none);
    if let Some(q) = all.iter().position(|(i, sets)| rs.rules[*i].quick && everything(sets)) {
        all.truncate(q + 1);
    }
    if let Some(c) = all.iter().rposition(|(i, sets)| !rs.rules[*i].quick && everything(sets)) {
        let mut k = 0;
        all.retain(|(i, _)| {
            k += 1;
            k > c || rs.rules[*i].quick
        });
    }
    let mut groups: Vec<Vec<(usize, RuleSets)>> = vec![Vec::new(); GROUPS];
    for (i, sets) in all {
        groups[group(af, &sets)].push((i, sets));
    }
    let mut roots = [run::EMPTY; GROUPS];
    for (root, g) in roots.iter_mut().zip(groups) {
        if !g.is_empty() {
            let b = Builder::new(rs, g, out);
            *root = b.build(af, rs.rules.len(), out);
            out.stats.trees += 1;
        }
    }
    roots
}

impl Builder {
    fn new(rs: &RuleSet, members: Vec<(usize, RuleSets)>, out: &mut Out) -> Builder {
        let mut rules = Vec::with_capacity(members.len());
        let mut ranges: Vec<Range> = Vec::new();
        for (i, sets) in members {
            let mut dims = [(0u32, 0u32); DIMS];
            for (slot, set) in dims.iter_mut().zip(sets) {
                if let Some(set) = set {
                    *slot = (ranges.len() as u32, set.len() as u32);
                    ranges.extend(set);
                }
            }
            rules.push(TreeRule { rule: i as u32, quick: rs.rules[i].quick, dims });
        }
        let shared_at = out.shared.len();
        out.shared.extend_from_slice(&ranges);
        Builder { rules, ranges, shared_at }
    }

    /// Grows the tree into `out`; its root.
    fn build(&self, af: Af, rule_count: usize, out: &mut Out) -> u32 {
        let budget = STORED_PER_RULE * self.rules.len() + STORED_SLACK;
        let bx: [Range; DIMS] = std::array::from_fn(|d| (0, dim_max(af, d)));
        let ids: Vec<u32> = (0..self.rules.len() as u32).collect();
        self.grow(ids, bx, 0, budget, rule_count, out)
    }

    fn set(&self, r: &TreeRule, d: usize) -> &[Range] {
        let (s, l) = r.dims[d];
        &self.ranges[s as usize..(s + l) as usize]
    }

    /// The smallest and largest values of rule `r` in `[lo, hi]` of dimension `d`.
    fn clip(&self, r: &TreeRule, d: usize, (lo, hi): Range) -> Option<Range> {
        if r.dims[d].1 == 0 {
            return Some((lo, hi));
        }
        let set = self.set(r, d);
        let i = set.partition_point(|x| x.1 < lo);
        if i == set.len() || set[i].0 > hi {
            return None;
        }
        let j = set.partition_point(|x| x.0 <= hi) - 1;
        Some((set[i].0.max(lo), set[j].1.min(hi)))
    }

    /// Whether `r` matches every packet in the box.
    fn covers(&self, r: &TreeRule, bx: &[Range; DIMS]) -> bool {
        (0..DIMS).all(|d| self.covers_dim(r, d, bx[d]))
    }

    /// Whether `r` matches every value of `[lo, hi]` in dimension `d`.
    fn covers_dim(&self, r: &TreeRule, d: usize, (lo, hi): Range) -> bool {
        if r.dims[d].1 == 0 {
            return true;
        }
        let set = self.set(r, d);
        let i = set.partition_point(|x| x.1 < lo);
        i < set.len() && set[i].0 <= lo && set[i].1 >= hi
    }

    /// Drops the rules of a box that can never decide there (see the module documentation).
    fn prune(&self, ids: &mut Vec<u32>, bx: &[Range; DIMS]) {
        if let Some(q) = ids.iter().position(|&i| {
            let r = &self.rules[i as usize];
            r.quick && self.covers(r, bx)
        }) {
            ids.truncate(q + 1);
        }
        if let Some(c) = ids.iter().rposition(|&i| {
            let r = &self.rules[i as usize];
            !r.quick && self.covers(r, bx)
        }) {
            let mut k = 0;
            ids.retain(|&i| {
                k += 1;
                k > c || self.rules[i as usize].quick
            });
        }
    }

    /// The best split of the box: (dimension, value, larger side, sum of sides).
    fn best_split(&self, ids: &[u32], bx: &[Range; DIMS]) -> Option<(usize, u128, usize, usize)> {
        let mut best: Option<(usize, u128, usize, usize)> = None;
        let (mut starts, mut ends, mut cands) = (
            Vec::with_capacity(ids.len()),
            Vec::with_capacity(ids.len()),
            Vec::with_capacity(2 * ids.len()),
        );
        for (d, &(lo, hi)) in bx.iter().enumerate() {
            if lo == hi {
                continue;
            }
            starts.clear();
            ends.clear();
            for &i in ids {
                if let Some((s, e)) = self.clip(&self.rules[i as usize], d, (lo, hi)) {
                    starts.push(s);
                    ends.push(e);
                }
            }
            starts.sort_unstable();
            ends.sort_unstable();
            cands.clear();
            cands.extend(ends.iter().copied().filter(|&e| e < hi));
            cands.extend(starts.iter().filter(|&&s| s > lo).map(|&s| s - 1));
            cands.sort_unstable();
            cands.dedup();
            // Candidates increase: the rules starting at or below one, and those ending
            // above it, are counted by two cursors.
            let (mut l, mut ended) = (0, 0);
            for &v in &cands {
                while l < starts.len() && starts[l] <= v {
                    l += 1;
                }
                while ended < ends.len() && ends[ended] <= v {
                    ended += 1;
                }
                let r = ends.len() - ended;
                let score = (l.max(r), l + r);
                if best.is_none_or(|b| score < (b.2, b.3)) {
                    best = Some((d, v, score.0, score.1));
                }
            }
        }
        best
    }

    /// The leaf of the box, written to `out.items` in [`run`]'s layout: its rules in
    /// priority order, each with only the dimensions it does not cover there (most rules
    /// then check one or two), its ranges clipped to the box, fewest ranges first; a set
    /// with more than [`run::LINEAR_RANGES`] ranges left in the box is not copied but
    /// referred to in [`Out::shared`] (a table's or a negation's, once per rule).
    fn leaf(&self, ids: &[u32], bx: &[Range; DIMS], rule_count: usize, out: &mut Out) -> u32 {
        let mut order: Vec<(u32, &TreeRule)> = ids
            .iter()
            .map(|&i| {
                let r = &self.rules[i as usize];
                (priority(r.rule as usize, r.quick, rule_count), r)
            })
            .collect();
        order.sort_unstable_by_key(|o| o.0);
        let mut stored: Vec<(u32, &TreeRule, Checks)> = Vec::new();
        for (prio, r) in order {
            let Some(checks) = self.checks(r, bx) else { continue };
            let whole = checks.is_empty();
            stored.push((prio, r, checks));
            // Every packet of the box matches it: nothing after it can decide here.
            if whole {
                break;
            }
        }
        let checks: Vec<&[(usize, Vec<Range>)]> = stored.iter().map(|s| s.2.as_slice()).collect();
        let flag = match filter::choose(&checks, bx, out.pairs) {
            Some(f) => {
                filter::write(&f, &mut out.items);
                out.stats.filtered += 1;
                out.stats.filtered_twice += usize::from(f.second.is_some());
                FILTERED
            }
            None => 0,
        };
        let start = out.items.len();
        for (prio, r, checks) in &stored {
            self.write_rule(*prio, r, checks, &mut out.items);
        }
        out.items.push((u128::from(run::NONE), 0));
        out.stats.leaves += 1;
        out.stats.stored += stored.len();
        out.stats.largest_leaf = out.stats.largest_leaf.max(stored.len());
        start as u32 | LEAF | flag
    }

    /// Rule `r` of priority `prio` in a leaf: its header, then its `checks`.
    fn write_rule(
        &self,
        prio: u32,
        r: &TreeRule,
        checks: &[(usize, Vec<Range>)],
        items: &mut Vec<Range>,
    ) {
        let header = items.len();
        items.push((u128::from(prio), 0));
        for (d, set) in checks {
            if set.len() > run::LINEAR_RANGES {
                let (s, l) = r.dims[*d];
                items.push(((d + run::SHARED) as u128, u128::from(l)));
                items.push(((self.shared_at + s as usize) as u128, 0));
            } else {
                items.push((*d as u128, set.len() as u128));
                items.extend(set);
            }
        }
        items[header].1 = (items.len() - header - 1) as u128;
    }

    /// The dimensions rule `r` checks in the box `bx` (those it does not cover there), with
    /// its ranges clipped to the box, fewest ranges first; `None` if it matches nothing there.
    fn checks(&self, r: &TreeRule, bx: &[Range; DIMS]) -> Option<Checks> {
        let mut checks: Vec<(usize, Vec<Range>)> = Vec::new();
        for (d, &(lo, hi)) in bx.iter().enumerate() {
            if self.covers_dim(r, d, (lo, hi)) {
                continue;
            }
            let clipped: Vec<Range> = self
                .set(r, d)
                .iter()
                .filter(|x| x.1 >= lo && x.0 <= hi)
                .map(|x| (x.0.max(lo), x.1.min(hi)))
                .collect();
            if clipped.is_empty() {
                return None;
            }
            checks.push((d, clipped));
        }
        checks.sort_by_key(|c| c.1.len());
        Some(checks)
    }

    /// The subtree of the box holding `ids`, storing at most `budget` rules in its leaves.
    fn grow(
        &self,
        mut ids: Vec<u32>,
        bx: [Range; DIMS],
        depth: usize,
        budget: usize,
        rule_count: usize,
        out: &mut Out,
    ) -> u32 {
        out.stats.depth = out.stats.depth.max(depth);
        self.prune(&mut ids, &bx);
        if ids.len() <= LEAF_RULES || depth >= MAX_DEPTH || budget < 2 * ids.len() {
            return self.leaf(&ids, &bx, rule_count, out);
        }
        let Some((d, v, _, sum)) = self.best_split(&ids, &bx) else {
            return self.leaf(&ids, &bx, rule_count, out);
        };
        // Progress: some rule goes to one side only (a rule with a hole in the box, e.g.
        // `port != 80`, needs two splits to leave the hole, the first of which keeps every
        // rule on both sides... and makes no progress by this measure: see `best_split`).
        if sum >= 2 * ids.len() {
            return self.leaf(&ids, &bx, rule_count, out);
        }
        let (mut left, mut right) = (Vec::with_capacity(ids.len()), Vec::with_capacity(ids.len()));
        for &i in &ids {
            if let Some((s, e)) = self.clip(&self.rules[i as usize], d, bx[d]) {
                if s <= v {
                    left.push(i);
                }
                if e > v {
                    right.push(i);
                }
            }
        }
        drop(ids);
        let at = out.nodes.len();
        out.nodes.push(BuildNode { value: v, dim: d as u32, child: [0, 0] });
        let (mut lb, mut rb) = (bx, bx);
        lb[d].1 = v;
        rb[d].0 = v + 1;
        // The budget is shared in proportion to the sides, so that no part of the space is
        // left with the remains.
        let left_budget = budget * left.len() / (left.len() + right.len());
        let right_budget = budget - left_budget;
        let l = self.grow(left, lb, depth + 1, left_budget, rule_count, out);
        let r = self.grow(right, rb, depth + 1, right_budget, rule_count, out);
        out.nodes[at].child = [l, r];
        at as u32
    }
}

/// The trees of both families and the verdict of every rule.
pub(crate) struct Tree {
    v4: run::Forest<u32>,
    v6: run::Forest<u128>,
    verdicts: Vec<Verdict>,
    stats: TreeStats,
}

impl Tree {
    /// Compiles `rs`; never fails (see the module documentation for the bounds). Leaves get
    /// second filters if `rs` has at least `pairs_from` rules.
    pub(crate) fn build(rs: &RuleSet, pairs_from: usize) -> Tree {
        let mut stats = TreeStats::default();
        let mut family = |af: Af| {
            let mut out = Out {
                nodes: Vec::new(),
                shared: Vec::new(),
                items: vec![(u128::from(run::NONE), 0)],
                stats: TreeStats::default(),
                pairs: rs.rules.len() >= pairs_from,
            };
            let roots = build_family(rs, af, &mut out);
            let s = &out.stats;
            stats = TreeStats {
                trees: stats.trees + s.trees,
                nodes: stats.nodes + out.nodes.len(),
                leaves: stats.leaves + s.leaves,
                stored: stats.stored + s.stored,
                largest_leaf: stats.largest_leaf.max(s.largest_leaf),
                depth: stats.depth.max(s.depth),
                filtered: stats.filtered + s.filtered,
                filtered_twice: stats.filtered_twice + s.filtered_twice,
            };
            (roots, out)
        };
        // Each family narrowed as soon as it is built: the wide build form is the peak.
        let (r4, o4) = family(Af::Inet);
        let v4 = run::Forest::new(r4, &o4);
        drop(o4);
        let (r6, o6) = family(Af::Inet6);
        let v6 = run::Forest::new(r6, &o6);
        drop(o6);
        let verdicts = (0..rs.rules.len()).map(|i| Verdict::of_rule(rs, i)).collect();
        Tree { v4, v6, verdicts, stats }
    }

    #[inline(always)]
    pub(crate) fn classify(&self, key: &PacketKey) -> Verdict {
        let prio = if key.af == Af::Inet {
            self.v4.classify(&key_dims(key))
        } else {
            self.v6.classify(&key_dims(key))
        };
        if prio == run::NONE {
            return Verdict::DEFAULT;
        }
        self.verdicts[rule_of(prio, self.verdicts.len())]
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.v4.bytes() + self.v6.bytes() + self.verdicts.len() * std::mem::size_of::<Verdict>()
    }

    pub(crate) fn stats(&self) -> TreeStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::{priority, rule_of};

    /// The lowest priority among any set of matching rules is pf's decision: the first
    /// matching `quick` rule, else the last matching rule; and [`rule_of`] inverts it.
    #[test]
    fn lowest_priority_is_pfs_decision() {
        let n = 10;
        for quick_bits in 0u32..1 << n {
            let quick = |i: usize| quick_bits >> i & 1 == 1;
            for matching in (0u32..1 << n).step_by(7) {
                let m: Vec<usize> = (0..n).filter(|&i| matching >> i & 1 == 1).collect();
                let want = m.iter().copied().find(|&i| quick(i)).or(m.last().copied());
                let got = m.iter().map(|&i| priority(i, quick(i), n)).min().map(|p| rule_of(p, n));
                assert_eq!(got, want, "quick {quick_bits:b}, matching {matching:b}");
            }
        }
        for i in 0..n {
            assert_eq!(rule_of(priority(i, true, n), n), i);
            assert_eq!(rule_of(priority(i, false, n), n), i);
        }
    }
}
