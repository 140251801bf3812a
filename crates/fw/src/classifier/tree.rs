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
//! non-`quick` rule that covers it. A leaf checks its rules in order against the packet
//! (every dimension): the first matching `quick` rule decides, else the last
//! matching rule.

use crate::packet::{Af, Dir, PacketKey, proto};
use crate::verdict::Verdict;
use crate::rules::{AddrMatch, AddrTarget, PortMatch, Rule, RuleSet, Table};

/// Inclusive range of a dimension.
type Range = (u128, u128);

const DIMS: usize = 7;
const IFDIR: usize = 0;
const PROTO: usize = 1;
/// TCP flags, or [`NOT_TCP`] for other protocols (which `flags` rules match).
const FLAGS: usize = 2;
const SPORT: usize = 3;
const DPORT: usize = 4;
const SRC: usize = 5;
// Destination address: dimension 6.
const NOT_TCP: u128 = 256;

/// Rules go to separate trees by whether their source and destination addresses are
/// narrow (at most 1/16 of the family's space) or wide: wide rules would otherwise be copied
/// into most leaves of the narrow rules' splits (EffiCuts' separable trees).
const GROUPS: usize = 4;

fn group(af: Af, sets: &RuleSets) -> usize {
    let max = dim_max(af, SRC);
    let narrow = |d: usize| {
        sets[d].as_ref().is_some_and(|s| {
            let size = s.iter().fold(0u128, |acc, &(a, b)| acc.saturating_add(b - a).saturating_add(1));
            size <= (max >> 4) + 1
        })
    };
    usize::from(narrow(SRC)) + 2 * usize::from(narrow(SRC + 1))
}

/// A node with at most this many rules is a leaf.
pub(crate) const LEAF_RULES: usize = 6;
/// Rules stored in leaves, over all leaves, at most this many times the rule count (plus
/// [`STORED_SLACK`]); past it the remaining nodes become leaves as they are.
pub(crate) const STORED_PER_RULE: usize = 128;
const STORED_SLACK: usize = 1 << 16;
const MAX_DEPTH: usize = 64;
const LEAF: u32 = 1 << 31;

/// The largest value of dimension `d` for family `af`.
fn dim_max(af: Af, d: usize) -> u128 {
    match d {
        IFDIR => 2 * 65536 - 1,
        PROTO => 255,
        FLAGS => NOT_TCP,
        SPORT | DPORT => 65535,
        _ if af == Af::Inet => u128::from(u32::MAX),
        _ => u128::MAX,
    }
}

#[inline(always)]
fn key_dims(key: &PacketKey) -> [u128; DIMS] {
    let mask = if key.af == Af::Inet { u128::from(u32::MAX) } else { u128::MAX };
    [
        u128::from(key.dir == Dir::Out) << 16 | u128::from(key.iface),
        u128::from(key.proto),
        if key.proto == proto::TCP { u128::from(key.tcp_flags) } else { NOT_TCP },
        u128::from(key.src_port),
        u128::from(key.dst_port),
        key.src & mask,
        key.dst & mask,
    ]
}

/// Sorts and merges overlapping or adjacent ranges.
fn normalize(mut v: Vec<Range>) -> Vec<Range> {
    v.sort_unstable();
    let mut out: Vec<Range> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if last.1 == u128::MAX || s <= last.1 + 1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// `[0, max]` minus the normalized `v`.
fn complement(v: &[Range], max: u128) -> Vec<Range> {
    let mut out = Vec::with_capacity(v.len() + 1);
    let mut next = Some(0u128);
    for &(s, e) in v {
        if let Some(n) = next
            && s > n
        {
            out.push((n, s - 1));
        }
        next = if e >= max { None } else { Some(e + 1) };
    }
    if let Some(n) = next {
        out.push((n, max));
    }
    out
}

/// The members of `t` in family `af`, as ranges: the most specific entry containing an
/// address decides (a later entry over an equal one), as [`Table::contains`] does.
fn table_ranges(t: &Table, af: Af) -> Vec<Range> {
    let mut es: Vec<(u128, u8, u128, bool)> = t
        .entries
        .iter()
        .filter(|e| e.prefix.af == af)
        .map(|e| (e.prefix.first(), e.prefix.len, e.prefix.last(), !e.negated))
        .collect();
    es.sort_by_key(|e| (e.0, e.1));
    // (start, member) change points; at equal starts the last pushed wins.
    let mut points: Vec<(u128, bool)> = vec![(0, false)];
    let push = |p: &mut Vec<(u128, bool)>, s: u128, m: bool| match p.last_mut() {
        Some(last) if last.0 == s => last.1 = m,
        _ => p.push((s, m)),
    };
    let mut stack: Vec<(u128, bool)> = Vec::new();
    for &(first, _, last, member) in &es {
        while let Some(&(end, _)) = stack.last() {
            if first <= end {
                break;
            }
            stack.pop();
            push(&mut points, end + 1, stack.last().is_some_and(|x| x.1));
        }
        push(&mut points, first, member);
        stack.push((last, member));
    }
    while let Some((end, _)) = stack.pop() {
        if end != u128::MAX {
            push(&mut points, end + 1, stack.last().is_some_and(|x| x.1));
        }
    }
    let max = dim_max(af, SRC);
    let mut out = Vec::new();
    for (i, &(s, m)) in points.iter().enumerate() {
        if m && s <= max {
            let e = points.get(i + 1).map_or(max, |n| n.0 - 1).min(max);
            out.push((s, e));
        }
    }
    normalize(out)
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

/// The ranges of one dimension of `r`, `None` for any value (empty: matches nothing).
fn rule_dim(r: &Rule, af: Af, d: usize, tables: &[Vec<Range>]) -> Option<Vec<Range>> {
    let points = |v: &mut dyn Iterator<Item = u128>| -> Vec<Range> { normalize(v.map(|x| (x, x)).collect()) };
    let ports = |pm: &PortMatch, icmp: &[u16]| -> Option<Vec<Range>> {
        let from_ports: Option<Vec<Range>> = match pm {
            PortMatch::Any => None,
            PortMatch::Ranges(r) => Some(normalize(r.iter().map(|&(a, b)| (u128::from(a), u128::from(b))).collect())),
        };
        if icmp.is_empty() {
            return from_ports;
        }
        Some(points(&mut icmp.iter().filter(|&&t| pm.matches(t)).map(|&t| u128::from(t))))
    };
    let max = dim_max(af, d);
    let set = match d {
        IFDIR => {
            let dirs: Vec<u128> = match r.dir {
                None => vec![0, 1],
                Some(Dir::In) => vec![0],
                Some(Dir::Out) => vec![1],
            };
            let mut v = Vec::new();
            for dir in dirs {
                let base = dir << 16;
                let ifs = points(&mut r.ifaces.iter().map(|&i| u128::from(i)));
                let ifs = if r.ifaces.is_empty() {
                    vec![(0, 65535)]
                } else if r.iface_neg {
                    complement(&ifs, 65535)
                } else {
                    ifs
                };
                v.extend(ifs.into_iter().map(|(s, e)| (base + s, base + e)));
            }
            Some(normalize(v))
        }
        FLAGS => r.flags.map(|(set, mask)| {
            normalize((0..=255u8).filter(|f| f & mask == set).map(|f| (u128::from(f), u128::from(f))).chain([(NOT_TCP, NOT_TCP)]).collect())
        }),
        PROTO if r.protos.is_empty() => None,
        PROTO => Some(points(&mut r.protos.iter().map(|&p| u128::from(p)))),
        SPORT => ports(&r.src_ports, &r.icmp_types.iter().map(|&t| u16::from(t)).collect::<Vec<_>>()),
        DPORT => ports(&r.dst_ports, &r.icmp_code.iter().map(|&t| u16::from(t)).collect::<Vec<_>>()),
        _ => {
            let m = if d == SRC { &r.src } else { &r.dst };
            match m {
                AddrMatch::Any => None,
                AddrMatch::List(items) => {
                    let mut v = Vec::new();
                    for it in items {
                        let pos: Vec<Range> = match it.target {
                            AddrTarget::Prefix(p) if p.af == af => vec![(p.first(), p.last())],
                            // An element of the other family matches no packet of this one,
                            // negated or not.
                            AddrTarget::Prefix(_) => continue,
                            AddrTarget::Table(t) => tables[t].clone(),
                        };
                        v.extend(if it.negated { complement(&pos, max) } else { pos });
                    }
                    Some(normalize(v))
                }
            }
        }
    };
    set.filter(|s| s.as_slice() != [(0, max)])
}

/// One node of a tree: `child[0]` for values <= `value` in dimension `dim`, `child[1]`
/// above; a child with [`LEAF`] set is a leaf index.
#[derive(Clone, Copy)]
struct Node {
    value: u128,
    dim: u32,
    child: [u32; 2],
}

/// The tree of one address family.
pub(crate) struct FamilyTree {
    nodes: Vec<Node>,
    /// Per leaf, its slice of `leaf_rules`.
    leaves: Vec<(u32, u32)>,
    /// Indices into `rules`, ascending (rule order) within a leaf, and the dimensions (bits)
    /// to check.
    leaf_rules: Vec<(u32, u8)>,
    rules: Vec<TreeRule>,
    ranges: Vec<Range>,
    root: u32,
    depth: usize,
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
}

impl FamilyTree {
    /// The trees of family `af`: one per [`group`] of its rules.
    fn build_all(rs: &RuleSet, af: Af) -> Vec<FamilyTree> {
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
        groups.into_iter().filter(|g| !g.is_empty()).map(|g| FamilyTree::build(rs, af, g)).collect()
    }

    fn build(rs: &RuleSet, af: Af, members: Vec<(usize, RuleSets)>) -> FamilyTree {
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
        let mut t = FamilyTree { nodes: Vec::new(), leaves: Vec::new(), leaf_rules: Vec::new(), rules, ranges, root: 0, depth: 0 };
        let budget = STORED_PER_RULE * t.rules.len() + STORED_SLACK;
        let bx: [Range; DIMS] = std::array::from_fn(|d| (0, dim_max(af, d)));
        let ids: Vec<u32> = (0..t.rules.len() as u32).collect();
        t.root = t.grow(ids, bx, 0, budget);
        t
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
        for (d, &(lo, hi)) in bx.iter().enumerate() {
            if lo == hi {
                continue;
            }
            let mut starts = Vec::with_capacity(ids.len());
            let mut ends = Vec::with_capacity(ids.len());
            for &i in ids {
                if let Some((s, e)) = self.clip(&self.rules[i as usize], d, (lo, hi)) {
                    starts.push(s);
                    ends.push(e);
                }
            }
            starts.sort_unstable();
            ends.sort_unstable();
            let mut cands: Vec<u128> = ends.iter().copied().filter(|&e| e < hi).collect();
            cands.extend(starts.iter().filter(|&&s| s > lo).map(|&s| s - 1));
            cands.sort_unstable();
            cands.dedup();
            for v in cands {
                let l = starts.partition_point(|&s| s <= v);
                let r = ends.len() - ends.partition_point(|&e| e <= v);
                let score = (l.max(r), l + r);
                if best.is_none_or(|b| score < (b.2, b.3)) {
                    best = Some((d, v, score.0, score.1));
                }
            }
        }
        best
    }

    /// A leaf of the box; each of its rules keeps only the dimensions it does not cover
    /// there (most rules then check one or two).
    fn leaf(&mut self, ids: &[u32], bx: &[Range; DIMS]) -> u32 {
        let i = self.leaves.len() as u32;
        self.leaves.push((self.leaf_rules.len() as u32, ids.len() as u32));
        for &id in ids {
            let r = &self.rules[id as usize];
            let check = (0..DIMS).filter(|&d| !self.covers_dim(r, d, bx[d])).fold(0u8, |m, d| m | 1 << d);
            self.leaf_rules.push((id, check));
        }
        i | LEAF
    }

    /// The subtree of the box holding `ids`, storing at most `budget` rules in its leaves.
    fn grow(&mut self, mut ids: Vec<u32>, bx: [Range; DIMS], depth: usize, budget: usize) -> u32 {
        self.depth = self.depth.max(depth);
        self.prune(&mut ids, &bx);
        if ids.len() <= LEAF_RULES || depth >= MAX_DEPTH || budget < 2 * ids.len() {
            return self.leaf(&ids, &bx);
        }
        let Some((d, v, _, sum)) = self.best_split(&ids, &bx) else {
            return self.leaf(&ids, &bx);
        };
        // Progress: some rule goes to one side only (a rule with a hole in the box, e.g.
        // `port != 80`, needs two splits to leave the hole, the first of which keeps every
        // rule on both sides... and makes no progress by this measure: see `best_split`).
        if sum >= 2 * ids.len() {
            return self.leaf(&ids, &bx);
        }
        let (mut left, mut right) = (Vec::new(), Vec::new());
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
        let at = self.nodes.len();
        self.nodes.push(Node { value: v, dim: d as u32, child: [0, 0] });
        let (mut lb, mut rb) = (bx, bx);
        lb[d].1 = v;
        rb[d].0 = v + 1;
        // The budget is shared in proportion to the sides, so that no part of the space is
        // left with the remains.
        let left_budget = budget * left.len() / (left.len() + right.len());
        let right_budget = budget - left_budget;
        let l = self.grow(left, lb, depth + 1, left_budget);
        let r = self.grow(right, rb, depth + 1, right_budget);
        self.nodes[at].child = [l, r];
        at as u32
    }

    #[inline(always)]
    fn matches(&self, r: &TreeRule, mut check: u8, k: &[u128; DIMS]) -> bool {
        while check != 0 {
            let d = check.trailing_zeros() as usize;
            check &= check - 1;
            let (s, l) = r.dims[d];
            let set = &self.ranges[s as usize..(s + l) as usize];
            let v = k[d];
            let hit = if set.len() <= 4 {
                set.iter().any(|&(a, b)| a <= v && v <= b)
            } else {
                let i = set.partition_point(|x| x.1 < v);
                i < set.len() && set[i].0 <= v
            };
            if !hit {
                return false;
            }
        }
        true
    }

    /// The deciding rule's index and whether it is `quick`, `None` if no rule matches.
    #[inline(always)]
    fn classify(&self, k: &[u128; DIMS]) -> Option<(u32, bool)> {
        let mut c = self.root;
        while c & LEAF == 0 {
            let n = &self.nodes[c as usize];
            c = n.child[usize::from(k[n.dim as usize] > n.value)];
        }
        let (s, l) = self.leaves[(c & !LEAF) as usize];
        let mut last = None;
        for &(i, check) in &self.leaf_rules[s as usize..(s + l) as usize] {
            let r = &self.rules[i as usize];
            if self.matches(r, check, k) {
                if r.quick {
                    return Some((r.rule, true));
                }
                last = Some((r.rule, false));
            }
        }
        last
    }

    fn bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>()
            + self.leaves.len() * 8
            + self.leaf_rules.len() * 8
            + self.rules.len() * std::mem::size_of::<TreeRule>()
            + self.ranges.len() * 32
    }
}

/// The two trees and the verdict of every rule.
pub(crate) struct Tree {
    v4: Vec<FamilyTree>,
    v6: Vec<FamilyTree>,
    verdicts: Vec<Verdict>,
}

impl Tree {
    /// Compiles `rs`; never fails (see the module documentation for the bounds).
    pub(crate) fn build(rs: &RuleSet) -> Tree {
        let v4 = FamilyTree::build_all(rs, Af::Inet);
        let v6 = FamilyTree::build_all(rs, Af::Inet6);
        let verdicts = (0..rs.rules.len()).map(|i| Verdict::of_rule(rs, i)).collect();
        Tree { v4, v6, verdicts }
    }

    #[inline(always)]
    pub(crate) fn classify(&self, key: &PacketKey) -> Verdict {
        let trees = if key.af == Af::Inet { &self.v4 } else { &self.v6 };
        let k = key_dims(key);
        // pf's semantics over the groups: the lowest quick rule, else the highest rule.
        let (mut quick, mut last) = (u32::MAX, None::<u32>);
        for t in trees {
            match t.classify(&k) {
                Some((r, true)) => quick = quick.min(r),
                Some((r, false)) => last = last.max(Some(r)),
                None => {}
            }
        }
        let decided = if quick != u32::MAX { Some(quick) } else { last };
        decided.map_or(Verdict::DEFAULT, |r| self.verdicts[r as usize])
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.v4.iter().chain(&self.v6).map(FamilyTree::bytes).sum::<usize>() + self.verdicts.len() * std::mem::size_of::<Verdict>()
    }

    pub(crate) fn stats(&self) -> TreeStats {
        let f = |t: &FamilyTree| TreeStats {
            trees: 1,
            nodes: t.nodes.len(),
            leaves: t.leaves.len(),
            stored: t.leaf_rules.len(),
            largest_leaf: t.leaves.iter().map(|l| l.1 as usize).max().unwrap_or(0),
            depth: t.depth,
        };
        self.v4.iter().chain(&self.v6).map(f).fold(TreeStats::default(), |a, b| TreeStats {
            trees: a.trees + 1,
            nodes: a.nodes + b.nodes,
            leaves: a.leaves + b.leaves,
            stored: a.stored + b.stored,
            largest_leaf: a.largest_leaf.max(b.largest_leaf),
            depth: a.depth.max(b.depth),
        })
    }
}
