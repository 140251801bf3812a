//! The compiled classifier: what the fast path asks for a verdict. Built off the fast path
//! from a [`RuleSet`]; immutable, `Send + Sync`, its per-packet cost does not grow with the
//! number of rules.
//!
//! # Method: Recursive Flow Classification with sparse cross-products
//!
//! The structure is **RFC** (P. Gupta, N. McKeown, "Packet Classification on Multiple
//! Fields", SIGCOMM 1999). Every rule is a conjunction of one constraint per *field*, and
//! two values of a field are *equivalent* when exactly the same rules accept them. Phase 0
//! maps each of the six fields of a [`PacketKey`] to its equivalence-class id:
//!
//! | field | key | lookup |
//! |---|---|---|
//! | interface × direction | `iface`, `dir` | two small arrays |
//! | family × protocol × TCP flags | `af`, `proto`, `tcp_flags` if TCP | one 1024-entry array |
//! | source port / ICMP type | `src_port` | one 65536-entry array |
//! | destination port / ICMP code | `dst_port` | one 65536-entry array |
//! | source address | `af`, `src` | sorted elementary intervals (binary search) when the field has few prefixes, else an [`lpm`] DIR-24-8 table (1-2 reads for IPv4) |
//! | destination address | `af`, `dst` | same |
//!
//! Later phases combine two class ids into the class id of the pair, through precomputed
//! tables, down to one final class whose verdict is precomputed: ((iface·proto)·(sport·dport))
//! · (src·dst). Per packet: 6 field lookups, 5 combinations, 1 verdict read, whatever the
//! number of rules.
//!
//! **Why RFC** rather than the alternatives the issue lists. Lakshman-Stiliadis bit vectors
//! AND bitmaps as long as the rule set (linear, with a small constant); aggregated bit
//! vectors (Baboescu-Varghese) fix the common case but degrade when many rules share a
//! field value. Tuple-space search costs one hash probe per distinct prefix-length tuple and
//! handles port ranges and negation badly. RFC's lookup is a constant number of reads, and
//! its known weakness, the size of cross-product tables (|classes A| × |classes B| entries:
//! 10^10 for 100k rules each with its own source and destination /32), is dealt with here by
//! making the combination tables **sparse**:
//!
//! Each class space keeps a *common* rule set W (rules accepting every class: the rules that
//! do not constrain the fields combined so far) and per class its *specific* set A (the
//! other accepting rules), so class `l` accepts `W_L ∪ A_l`. For two spaces L and R,
//!
//! ```text
//! (W_L ∪ A_l) ∩ (W_R ∪ A_r) = (W_L ∩ W_R) ∪ (A_l ∩ W_R) ∪ (A_r ∩ W_L) ∪ (A_l ∩ A_r)
//!                              common        X(l)          Y(r)          Z(l, r)
//! ```
//!
//! X depends on `l` only, Y on `r` only: the distinct X sets and Y sets are few (rules that
//! constrain one field and not the other), so a dense table indexed by (X id, Y id) is small.
//! Z is non-empty only for pairs of classes both constrained by the same rule; those pairs
//! are enumerated from the rules (rule -> classes that hold it), and stored as *exceptions*
//! in an open-addressing hash table keyed by (l, r), guarded by a 64-bit per-row filter so
//! that traffic of rows without exceptions never probes it. A combination is therefore
//! `rows[l]`, `cols[r]`, (rarely) one hash probe, one dense read: constant.
//!
//! For 100k rules `block in quick proto tcp from X_i/32 to Y_i/32 port P_i` + `pass all`,
//! src×dst has 1 × 1 dense entries and 100k exceptions (one per rule), instead of 10^10.
//!
//! The deciding rule of a final class is computed from its rule set with pf's semantics:
//! the lowest-numbered `quick` rule if any, else the highest-numbered rule.
//!
//! # Addresses
//!
//! Per family, the class of an address is fixed by the set of rule prefixes and table
//! entries containing it; prefixes nest, so that set is fixed by the *most specific* one, and
//! each distinct prefix gets the class of "its" set, computed by walking the prefixes in
//! (address, length) order with a stack of enclosing prefixes. Prefixes whose class equals
//! their parent's are dropped. A table of 1M entries used by a rule gives 2 classes (in, not
//! in), whatever its size; its entries are inserted into an [`lpm::Ipv4Lpm`] /
//! [`lpm::Ipv6Lpm`] whose next hop is the class id, so the lookup is one or two reads.
//!
//! # Limits
//!
//! Build memory (interned rule sets, tables, LPM arrays) is accounted against
//! [`BuildOptions::memory_budget`] (default [`DEFAULT_MEMORY_BUDGET`] = 1 GiB); a
//! pathological rule set (e.g. many rules each negating its own address) fails with
//! [`BuildError`] naming the budget and the phase, instead of exhausting the machine.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::packet::{Af, Dir, PacketKey, proto};
use crate::reference::Verdict;
use crate::rules::{AddrMatch, AddrTarget, PortMatch, Prefix, Rule, RuleSet};

/// Default memory budget of a build: 1 GiB.
pub const DEFAULT_MEMORY_BUDGET: usize = 1 << 30;

/// Default number of (class-changing) prefixes of one family in one address field above
/// which an LPM table replaces the sorted-interval binary search.
pub const DEFAULT_LPM_THRESHOLD: usize = 256;

/// Build parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOptions {
    /// Bytes the build may use (accounted: rule sets, tables, LPM arrays).
    pub memory_budget: usize,
    /// See [`DEFAULT_LPM_THRESHOLD`]. 0 = always LPM.
    pub lpm_threshold: usize,
    /// With an LPM table, host routes (/32, /128) go to an exact-match hash map in front of it
    /// when there are at least this many (default [`DEFAULT_HOST_MAP_THRESHOLD`]): each host
    /// in its own /24 would otherwise cost a 1 KiB tbl8 group (1M random hosts: 1.2 GiB).
    pub host_map_threshold: usize,
}

/// Default of [`BuildOptions::host_map_threshold`].
pub const DEFAULT_HOST_MAP_THRESHOLD: usize = 64;

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            memory_budget: DEFAULT_MEMORY_BUDGET,
            lpm_threshold: DEFAULT_LPM_THRESHOLD,
            host_map_threshold: DEFAULT_HOST_MAP_THRESHOLD,
        }
    }
}

/// Why a rule set could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    pub message: String,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

/// Sizes of the compiled structure (for reports and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassifierStats {
    /// Classes of the fields: iface×dir, af×proto×flags, sport, dport, src, dst.
    pub field_classes: [usize; 6],
    /// Classes after each combination: ab, ef, abef, cd, final.
    pub join_classes: [usize; 5],
    /// Dense entries of each combination.
    pub join_dense: [usize; 5],
    /// Exceptions of each combination.
    pub join_exceptions: [usize; 5],
    /// Whether the source / destination fields use an LPM table (src v4, src v6, dst v4, dst v6).
    pub lpm: [bool; 4],
    /// Host routes in exact-match maps (src v4, src v6, dst v4, dst v6).
    pub host_maps: [usize; 4],
}

// ---------------------------------------------------------------------------------------------
// Build-time helpers: sorted rule sets, interning, budget.

type RSet = Vec<u32>;

fn intersect(a: &[u32], b: &[u32]) -> RSet {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if small.is_empty() {
        return Vec::new();
    }
    if small.len() * 16 < large.len() {
        return small
            .iter()
            .copied()
            .filter(|x| large.binary_search(x).is_ok())
            .collect();
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

fn union(a: &[u32], b: &[u32]) -> RSet {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len() + b.len()));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

struct Budget {
    limit: usize,
    used: usize,
}

impl Budget {
    fn charge(&mut self, bytes: usize, what: &str) -> Result<(), BuildError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limit {
            return Err(BuildError {
                message: format!(
                    "rule set too complex: compiling it would exceed the classifier memory budget of {} MiB ({} bytes) while building {what}",
                    self.limit >> 20,
                    self.limit
                ),
            });
        }
        Ok(())
    }

    fn release(&mut self, bytes: usize) {
        self.used = self.used.saturating_sub(bytes);
    }
}

fn set_bytes(s: &RSet) -> usize {
    // The set is held twice (map key + vector) plus bookkeeping.
    2 * 4 * s.len() + 64
}

/// A class space under construction: class `i` accepts `common ∪ sets[i]`.
struct Space {
    common: RSet,
    sets: Vec<RSet>,
    map: HashMap<RSet, u32>,
    bytes: usize,
}

impl Space {
    fn new(common: RSet) -> Space {
        let bytes = 4 * common.len();
        Space {
            common,
            sets: Vec::new(),
            map: HashMap::new(),
            bytes,
        }
    }

    fn id(&mut self, s: RSet, budget: &mut Budget, what: &str) -> Result<u32, BuildError> {
        if let Some(&i) = self.map.get(&s) {
            return Ok(i);
        }
        let b = set_bytes(&s);
        budget.charge(b, what)?;
        self.bytes += b;
        let i = self.sets.len() as u32;
        self.map.insert(s.clone(), i);
        self.sets.push(s);
        Ok(i)
    }

    fn len(&self) -> usize {
        self.sets.len()
    }
}

// ---------------------------------------------------------------------------------------------
// Combination tables.

const EMPTY: u64 = u64::MAX;

#[inline]
fn mix(k: u64) -> u64 {
    k.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[inline]
fn filter_bit(r: u32) -> u64 {
    1u64 << (mix(u64::from(r)) >> 58)
}

/// Open-addressing map (l, r) -> class.
struct ExcMap {
    keys: Vec<u64>,
    vals: Vec<u32>,
    shift: u32,
}

impl ExcMap {
    fn new(items: &[(u32, u32, u32)]) -> ExcMap {
        let cap = (items.len() * 2).next_power_of_two().max(2);
        let mut m = ExcMap {
            keys: vec![EMPTY; cap],
            vals: vec![0; cap],
            shift: 64 - cap.trailing_zeros(),
        };
        let mask = cap - 1;
        for &(l, r, c) in items {
            let k = (u64::from(l) << 32) | u64::from(r);
            let mut i = (mix(k) >> m.shift) as usize;
            while m.keys[i] != EMPTY {
                i = (i + 1) & mask;
            }
            m.keys[i] = k;
            m.vals[i] = c;
        }
        m
    }

    #[inline]
    fn get(&self, l: u32, r: u32) -> Option<u32> {
        let k = (u64::from(l) << 32) | u64::from(r);
        let mask = self.keys.len() - 1;
        let mut i = (mix(k) >> self.shift) as usize;
        loop {
            let x = self.keys[i];
            if x == k {
                return Some(self.vals[i]);
            }
            if x == EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    fn bytes(&self) -> usize {
        self.keys.len() * 12
    }
}

/// One RFC combination: (l, r) -> class.
struct Join {
    /// Per left class: X id and exception filter (0 = no exception in this row).
    rows: Vec<(u32, u64)>,
    /// Per right class: Y id.
    cols: Vec<u32>,
    ny: usize,
    dense: Vec<u32>,
    exc: ExcMap,
    n_exc: usize,
    /// Number of right classes (for `full`).
    nr: usize,
    /// The whole cross product, when exceptions would cover most of it or it is small
    /// (else empty).
    full: Vec<u32>,
    /// `full` only materialises a small cross product (the sparse form is the reference).
    small_full: bool,
}

/// Cross products up to this many cells are materialised whole (16 KiB).
const SMALL_FULL_CELLS: usize = 4096;

impl Join {
    #[inline(always)]
    fn get(&self, l: u32, r: u32) -> u32 {
        if !self.full.is_empty() {
            return self.full[l as usize * self.nr + r as usize];
        }
        let (x, filter) = self.rows[l as usize];
        if filter & filter_bit(r) != 0
            && let Some(c) = self.exc.get(l, r)
        {
            return c;
        }
        self.dense[x as usize * self.ny + self.cols[r as usize] as usize]
    }

    fn bytes(&self) -> usize {
        self.rows.len() * 16
            + self.cols.len() * 4
            + self.dense.len() * 4
            + self.exc.bytes()
            + self.full.len() * 4
    }

    /// Combines two spaces (consumed) into the space of their pairs. With `final_quick`
    /// (the rules' `quick` flags), the output classes are *decisions* (a set holding at most
    /// the deciding rule of `common ∪ set`, pf's way) instead of full rule sets: used for
    /// the last combination, where nothing else is needed.
    fn build(
        l: Space,
        r: Space,
        n_rules: usize,
        budget: &mut Budget,
        what: &str,
        final_quick: Option<&[bool]>,
    ) -> Result<(Join, Space), BuildError> {
        let mut out = Space::new(intersect(&l.common, &r.common));
        budget.charge(out.bytes, what)?;
        let intern_sets = |sets: &[RSet], other_common: &[u32]| {
            let mut ids: Vec<RSet> = Vec::new();
            let mut map: HashMap<RSet, u32> = HashMap::new();
            let per: Vec<u32> = sets
                .iter()
                .map(|a| {
                    let x = intersect(a, other_common);
                    let next = ids.len() as u32;
                    *map.entry(x.clone()).or_insert_with(|| {
                        ids.push(x);
                        next
                    })
                })
                .collect();
            (ids, per)
        };
        let (xs, xper) = intern_sets(&l.sets, &r.common);
        let (ys, cols) = intern_sets(&r.sets, &l.common);
        let mut rows: Vec<(u32, u64)> = xper.into_iter().map(|x| (x, 0)).collect();
        let (nl, nr) = (l.len(), r.len());

        // Decision summary of a sorted set: (first quick, last).
        const NONE: u32 = u32::MAX;
        let summary = |s: &[u32], q: &[bool]| -> (u32, u32) {
            (
                s.iter().copied().find(|&i| q[i as usize]).unwrap_or(NONE),
                s.last().copied().unwrap_or(NONE),
            )
        };
        let combine = |parts: &[(u32, u32)]| -> Option<u32> {
            let q = parts.iter().map(|p| p.0).min().unwrap_or(NONE);
            if q != NONE {
                return Some(q);
            }
            parts.iter().map(|p| p.1).filter(|&x| x != NONE).max()
        };
        let mut decision_ids: HashMap<Option<u32>, u32> = HashMap::new();
        let mut decision_class =
            |d: Option<u32>, out: &mut Space, budget: &mut Budget| -> Result<u32, BuildError> {
                if let Some(&c) = decision_ids.get(&d) {
                    return Ok(c);
                }
                let c = out.id(d.into_iter().collect(), budget, what)?;
                decision_ids.insert(d, c);
                Ok(c)
            };
        type Summaries = ((u32, u32), Vec<(u32, u32)>, Vec<(u32, u32)>);
        let (csum, xsum, ysum): Summaries = match final_quick {
            Some(q) => (
                summary(&out.common, q),
                xs.iter().map(|s| summary(s, q)).collect(),
                ys.iter().map(|s| summary(s, q)).collect(),
            ),
            None => ((NONE, NONE), Vec::new(), Vec::new()),
        };

        let n_dense = xs.len().saturating_mul(ys.len());
        budget.charge(n_dense.saturating_mul(4), what)?;
        let mut dense = Vec::with_capacity(n_dense);
        for (xi, x) in xs.iter().enumerate() {
            for (yi, y) in ys.iter().enumerate() {
                let c = match final_quick {
                    Some(_) => {
                        decision_class(combine(&[csum, xsum[xi], ysum[yi]]), &mut out, budget)?
                    }
                    None => out.id(union(x, y), budget, what)?,
                };
                dense.push(c);
            }
        }

        // Rules specific to both sides, and which right classes hold them.
        let mut in_left = vec![false; n_rules];
        for &x in l.sets.iter().flatten() {
            in_left[x as usize] = true;
        }
        let mut inv: Vec<Vec<u32>> = vec![Vec::new(); n_rules];
        for (ri, b) in r.sets.iter().enumerate() {
            for &x in b {
                if in_left[x as usize] {
                    inv[x as usize].push(ri as u32);
                }
            }
        }
        drop(in_left);
        let pair_work: usize = l
            .sets
            .iter()
            .flatten()
            .map(|&x| inv[x as usize].len())
            .sum();
        // Exceptions covering a good part of the cross product: a full table is smaller.
        let cells = nl.saturating_mul(nr);
        let use_full = pair_work > 0 && pair_work.saturating_mul(2) >= cells && cells <= (1 << 28);
        let mut full: Vec<u32> = Vec::new();
        if use_full {
            budget.charge(cells * 4, what)?;
            full = Vec::with_capacity(cells);
            for row in &rows {
                for &y in &cols {
                    full.push(dense[row.0 as usize * ys.len() + y as usize]);
                }
            }
        }
        let mut exc: Vec<(u32, u32, u32)> = Vec::new();
        if pair_work > 0 {
            // Per left class: accumulate Z(l, r) for the touched right classes.
            let mut touched: Vec<u32> = Vec::new();
            let mut zq = vec![NONE; nr];
            let mut zmax = vec![NONE; nr];
            let mut zsets: Vec<RSet> = if final_quick.is_some() {
                Vec::new()
            } else {
                vec![Vec::new(); nr]
            };
            for (li, a) in l.sets.iter().enumerate() {
                for &x in a {
                    for &ri in &inv[x as usize] {
                        let ri = ri as usize;
                        if zmax[ri] == NONE {
                            touched.push(ri as u32);
                        }
                        zmax[ri] = x; // ascending x: the last one is the max
                        match final_quick {
                            Some(q) => {
                                if q[x as usize] && zq[ri] == NONE {
                                    zq[ri] = x;
                                }
                            }
                            None => zsets[ri].push(x),
                        }
                    }
                }
                let xi = rows[li].0 as usize;
                for &ri in &touched {
                    let ri = ri as usize;
                    let c = match final_quick {
                        Some(_) => decision_class(
                            combine(&[csum, xsum[xi], ysum[cols[ri] as usize], (zq[ri], zmax[ri])]),
                            &mut out,
                            budget,
                        )?,
                        None => {
                            let s = union(&union(&xs[xi], &ys[cols[ri] as usize]), &zsets[ri]);
                            zsets[ri].clear();
                            out.id(s, budget, what)?
                        }
                    };
                    zq[ri] = NONE;
                    zmax[ri] = NONE;
                    if use_full {
                        full[li * nr + ri] = c;
                    } else {
                        budget.charge(24, what)?;
                        exc.push((li as u32, ri as u32, c));
                        rows[li].1 |= filter_bit(ri as u32);
                    }
                }
                touched.clear();
            }
        }
        budget.release(l.bytes + r.bytes);
        let n_exc = if use_full { pair_work } else { exc.len() };
        let mut j = Join {
            rows,
            cols,
            ny: ys.len(),
            nr,
            dense,
            exc: ExcMap::new(&exc),
            n_exc,
            full,
            small_full: false,
        };
        // A small cross product is materialised whole: one read per packet instead of the
        // row, column, filter and dense reads (the sparse parts stay for the statistics).
        if j.full.is_empty() && cells > 0 && cells <= SMALL_FULL_CELLS {
            budget.charge(cells * 4, what)?;
            let full: Vec<u32> = (0..nl as u32)
                .flat_map(|li| (0..nr as u32).map(move |ri| (li, ri)))
                .map(|(li, ri)| j.get(li, ri))
                .collect();
            j.full = full;
            j.small_full = true;
        }
        Ok((j, out))
    }
}

// ---------------------------------------------------------------------------------------------
// Phase 0: fields.

/// Union of the rule lists of the given signatures (disjoint lists).
fn rules_of(sigs: &[u32], sig_rules: &[RSet]) -> RSet {
    let mut v: RSet = sigs
        .iter()
        .flat_map(|&s| sig_rules[s as usize].iter().copied())
        .collect();
    v.sort_unstable();
    v
}

fn common_rules(rs: &RuleSet, wild: impl Fn(&Rule) -> bool) -> RSet {
    rs.rules
        .iter()
        .enumerate()
        .filter(|(_, r)| wild(r))
        .map(|(i, _)| i as u32)
        .collect()
}

struct IfaceField {
    slot: Vec<u16>,
    cls: Vec<u32>,
}

impl IfaceField {
    #[inline]
    fn lookup(&self, iface: u16, dir: Dir) -> u32 {
        let s = self.slot.get(iface as usize).copied().unwrap_or(0) as usize;
        self.cls[s * 2 + (dir == Dir::Out) as usize]
    }

    fn build(rs: &RuleSet, budget: &mut Budget) -> Result<(IfaceField, Space), BuildError> {
        let wild = |r: &Rule| r.dir.is_none() && r.ifaces.is_empty();
        let mut space = Space::new(common_rules(rs, wild));
        let mut ifs: Vec<u16> = rs.rules.iter().flat_map(|r| r.ifaces.iter().copied()).collect();
        ifs.sort_unstable();
        ifs.dedup();
        let mut slot = vec![0u16; ifs.last().map_or(0, |&m| m as usize + 1)];
        for (i, &f) in ifs.iter().enumerate() {
            slot[f as usize] = (i + 1) as u16;
        }
        let mut cls = Vec::new();
        for s in 0..=ifs.len() {
            let v = if s == 0 { None } else { Some(ifs[s - 1]) };
            for dir in [Dir::In, Dir::Out] {
                let set: RSet = rs
                    .rules
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| {
                        !wild(r)
                            && r.dir.is_none_or(|d| d == dir)
                            && (r.ifaces.is_empty() || v.is_some_and(|v| r.ifaces.contains(&v)) != r.iface_neg)
                    })
                    .map(|(i, _)| i as u32)
                    .collect();
                cls.push(space.id(set, budget, "the interface field")?);
            }
        }
        Ok((IfaceField { slot, cls }, space))
    }
}

#[inline]
fn proto_index(af: Af, proto: u8, flags: u8) -> usize {
    (af == Af::Inet6) as usize * 512
        + if proto == proto::TCP {
            256 + flags as usize
        } else {
            proto as usize
        }
}

fn build_proto(rs: &RuleSet, budget: &mut Budget) -> Result<(Vec<u32>, Space), BuildError> {
    let wild = |r: &Rule| r.af.is_none() && r.protos.is_empty() && r.flags.is_none();
    let mut space = Space::new(common_rules(rs, wild));
    type Sig = (Option<Af>, Vec<u8>, Option<(u8, u8)>);
    let mut sig_ids: HashMap<Sig, u32> = HashMap::new();
    let mut sigs: Vec<Sig> = Vec::new();
    let mut sig_rules: Vec<RSet> = Vec::new();
    for (i, r) in rs.rules.iter().enumerate() {
        if wild(r) {
            continue;
        }
        let sig = (r.af, r.protos.clone(), r.flags);
        let id = *sig_ids.entry(sig.clone()).or_insert_with(|| {
            sigs.push(sig);
            sig_rules.push(Vec::new());
            (sigs.len() - 1) as u32
        });
        sig_rules[id as usize].push(i as u32);
    }
    let mut memo: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut table = vec![0u32; 1024];
    for af in [Af::Inet, Af::Inet6] {
        for idx in 0..512usize {
            let (p, flags) = if idx >= 256 {
                (proto::TCP, (idx - 256) as u8)
            } else {
                (idx as u8, 0)
            };
            let matched: Vec<u32> = sigs
                .iter()
                .enumerate()
                .filter(|(_, (saf, protos, fl))| {
                    saf.is_none_or(|a| a == af)
                        && (protos.is_empty() || protos.contains(&p))
                        && fl.is_none_or(|(set, mask)| p != proto::TCP || flags & mask == set)
                })
                .map(|(i, _)| i as u32)
                .collect();
            let c = match memo.get(&matched) {
                Some(&c) => c,
                None => {
                    let c =
                        space.id(rules_of(&matched, &sig_rules), budget, "the protocol field")?;
                    memo.insert(matched, c);
                    c
                }
            };
            table[proto_index(af, p, flags)] = c;
        }
    }
    Ok((table, space))
}

fn port_constraint(pm: &PortMatch, icmp: &[u8]) -> Option<Vec<(u16, u16)>> {
    match (pm, icmp) {
        (_, [_, ..]) => {
            let mut r: Vec<(u16, u16)> = icmp.iter().map(|&t| (t.into(), t.into())).collect();
            r.sort_unstable();
            Some(r)
        }
        (PortMatch::Any, []) => None,
        (PortMatch::Ranges(r), []) => {
            let mut r = r.clone();
            r.sort_unstable();
            Some(r)
        }
    }
}

fn build_ports(
    rs: &RuleSet,
    get: impl Fn(&Rule) -> Option<Vec<(u16, u16)>>,
    budget: &mut Budget,
    what: &str,
) -> Result<(Vec<u16>, Space), BuildError> {
    let mut space = Space::new(common_rules(rs, |r| get(r).is_none()));
    let mut sig_ids: HashMap<Vec<(u16, u16)>, u32> = HashMap::new();
    let mut sig_rules: Vec<RSet> = Vec::new();
    // events[pos] = (sig, +1/-1) changes at pos.
    let mut events: BTreeMap<u32, Vec<(u32, i32)>> = BTreeMap::new();
    events.entry(0).or_default();
    for (i, r) in rs.rules.iter().enumerate() {
        let Some(c) = get(r) else { continue };
        let next = sig_rules.len() as u32;
        let id = *sig_ids.entry(c.clone()).or_insert_with(|| {
            sig_rules.push(Vec::new());
            for &(lo, hi) in &c {
                events.entry(lo as u32).or_default().push((next, 1));
                events.entry(hi as u32 + 1).or_default().push((next, -1));
            }
            next
        });
        sig_rules[id as usize].push(i as u32);
    }
    let mut count: HashMap<u32, i32> = HashMap::new();
    let mut memo: HashMap<Vec<u32>, u16> = HashMap::new();
    let mut table = vec![0u16; 65536];
    let points: Vec<(u32, Vec<(u32, i32)>)> = events.into_iter().collect();
    for (k, (pos, evs)) in points.iter().enumerate() {
        for &(s, d) in evs {
            let e = count.entry(s).or_insert(0);
            *e += d;
            if *e == 0 {
                count.remove(&s);
            }
        }
        if *pos > 65535 {
            break;
        }
        let mut active: Vec<u32> = count.keys().copied().collect();
        active.sort_unstable();
        let c = match memo.get(&active) {
            Some(&c) => c,
            None => {
                let c = space.id(rules_of(&active, &sig_rules), budget, what)?;
                let c = u16::try_from(c).expect("at most 65536 port classes");
                memo.insert(active, c);
                c
            }
        };
        let end = points.get(k + 1).map_or(65536, |p| p.0.min(65536));
        table[*pos as usize..end as usize].fill(c);
    }
    Ok((table, space))
}

/// Exact-match map for host routes (/32, /128): open addressing, u128 keys.
struct HostMap {
    keys: Vec<u128>,
    vals: Vec<u32>,
    /// Value of the key equal to the EMPTY sentinel (the all-ones v6 address).
    max_val: Option<u32>,
    shift: u32,
    len: usize,
    /// One bit per IPv4 /24 (per hashed IPv6 /64): whether a host may be in it. Traffic
    /// outside the hosts' /24s then costs a read in this 2 MiB bitmap (cache-friendly for
    /// clustered traffic) instead of a random probe in the map.
    filter: Vec<u64>,
    v6: bool,
}

impl HostMap {
    const EMPTY: u128 = u128::MAX;

    #[inline]
    fn filter_index(v6: bool, k: u128) -> usize {
        if v6 {
            (mix((k >> 64) as u64) >> 40) as usize
        } else {
            ((k >> 8) & 0xff_ffff) as usize
        }
    }

    fn new(items: &[(u128, u32)], v6: bool) -> HostMap {
        let cap = (items.len() * 2).next_power_of_two().max(2);
        let mut m = HostMap {
            keys: vec![Self::EMPTY; cap],
            vals: vec![0; cap],
            max_val: None,
            shift: 64 - cap.trailing_zeros(),
            len: items.len(),
            filter: vec![0u64; (1 << 24) / 64],
            v6,
        };
        for &(k, v) in items {
            let f = Self::filter_index(v6, k);
            m.filter[f / 64] |= 1 << (f % 64);
            if k == Self::EMPTY {
                m.max_val = Some(v);
                continue;
            }
            let mut i = m.slot(k);
            while m.keys[i] != Self::EMPTY {
                i = (i + 1) & (cap - 1);
            }
            m.keys[i] = k;
            m.vals[i] = v;
        }
        m
    }

    #[inline]
    fn slot(&self, k: u128) -> usize {
        (mix((k as u64) ^ ((k >> 64) as u64).rotate_left(17)) >> self.shift) as usize
    }

    /// Inlined up to the filter test, which is all that traffic away from the hosts costs;
    /// the probe is a call.
    #[inline(always)]
    fn get(&self, k: u128) -> Option<u32> {
        let f = Self::filter_index(self.v6, k);
        if self.filter[f / 64] & (1 << (f % 64)) == 0 {
            return None;
        }
        self.probe(k)
    }

    #[inline(never)]
    fn probe(&self, k: u128) -> Option<u32> {
        if k == Self::EMPTY {
            return self.max_val;
        }
        let mask = self.keys.len() - 1;
        let mut i = self.slot(k);
        loop {
            let x = self.keys[i];
            if x == k {
                return Some(self.vals[i]);
            }
            if x == Self::EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }
}

enum Rest {
    Const(u32),
    Intervals {
        starts: Vec<u128>,
        classes: Vec<u32>,
    },
    /// At most 4 IPv4 intervals, padded with copies of the last one (start and class): the
    /// interval is found by counting the starts <= the address, without branches.
    Small4 {
        starts: [u32; 4],
        classes: [u32; 4],
    },
    /// IPv4 intervals: 32-bit starts (cheaper compares, 4x denser than u128).
    Intervals4 {
        starts: Vec<u32>,
        classes: Vec<u32>,
    },
    V4 {
        lpm: lpm::Ipv4Lpm,
        root: u32,
    },
    V6 {
        lpm: lpm::Ipv6Lpm,
        root: u32,
    },
}

/// Address -> class for one family: host routes in an exact-match map (when numerous),
/// the other prefixes in intervals or an LPM table.
struct AddrLookup {
    hosts: Option<HostMap>,
    rest: Rest,
}

impl AddrLookup {
    #[inline(always)]
    fn lookup(&self, addr: u128) -> u32 {
        if let Some(h) = &self.hosts
            && let Some(c) = h.get(addr)
        {
            return c;
        }
        match &self.rest {
            Rest::Const(c) => *c,
            Rest::Intervals { starts, classes } => {
                let i = starts.partition_point(|&s| s <= addr);
                classes[i - 1]
            }
            Rest::Small4 { starts, classes } => {
                let a = addr as u32;
                let n: usize = starts.iter().map(|&s| usize::from(s <= a)).sum();
                // starts[0] == 0, so n >= 1; the padding repeats the last interval.
                classes[n.wrapping_sub(1) & 3]
            }
            Rest::Intervals4 { starts, classes } => {
                let a = addr as u32;
                let i = starts.partition_point(|&s| s <= a);
                classes[i - 1]
            }
            Rest::V4 { lpm, root } => lpm.lookup(addr as u32).unwrap_or(*root),
            Rest::V6 { lpm, root } => lpm.lookup(addr).unwrap_or(*root),
        }
    }

    fn bytes(&self) -> usize {
        self.hosts
            .as_ref()
            .map_or(0, |h| h.keys.len() * 20 + h.filter.len() * 8)
            + match &self.rest {
                Rest::Const(_) => 0,
                Rest::Intervals { starts, .. } => starts.len() * 20,
                Rest::Intervals4 { starts, .. } => starts.len() * 8,
                Rest::Small4 { .. } => 32,
                Rest::V4 { lpm, .. } => lpm.memory_bytes(),
                Rest::V6 { lpm, .. } => lpm.memory_bytes(),
            }
    }

    fn uses_lpm(&self) -> bool {
        matches!(self.rest, Rest::V4 { .. } | Rest::V6 { .. })
    }
}

struct AddrField {
    v4: AddrLookup,
    v6: AddrLookup,
}

impl AddrField {
    #[inline(always)]
    fn lookup(&self, af: Af, addr: u128) -> u32 {
        match af {
            Af::Inet => self.v4.lookup(addr & 0xffff_ffff),
            Af::Inet6 => self.v6.lookup(addr),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Pred {
    Prefix(Prefix),
    Table(usize),
}

#[derive(Clone, Copy)]
enum Effect {
    Direct(u32),
    Table(u32, bool),
}

fn build_addr(
    rs: &RuleSet,
    get: impl Fn(&Rule) -> &AddrMatch,
    opts: &BuildOptions,
    budget: &mut Budget,
    what: &str,
) -> Result<(AddrField, Space), BuildError> {
    let mut space = Space::new(common_rules(rs, |r| matches!(get(r), AddrMatch::Any)));
    let mut pred_ids: HashMap<Pred, u32> = HashMap::new();
    let mut preds: Vec<Pred> = Vec::new();
    type Sig = Vec<(bool, u32)>;
    let mut sig_ids: HashMap<Sig, u32> = HashMap::new();
    let mut sigs: Vec<Sig> = Vec::new();
    let mut sig_rules: Vec<RSet> = Vec::new();
    for (i, r) in rs.rules.iter().enumerate() {
        let AddrMatch::List(items) = get(r) else {
            continue;
        };
        let mut sig: Sig = items
            .iter()
            .map(|it| {
                let p = match it.target {
                    AddrTarget::Prefix(p) => Pred::Prefix(p),
                    AddrTarget::Table(t) => Pred::Table(t),
                };
                let next = preds.len() as u32;
                let id = *pred_ids.entry(p).or_insert_with(|| {
                    preds.push(p);
                    next
                });
                (it.negated, id)
            })
            .collect();
        sig.sort_unstable();
        sig.dedup();
        let next = sigs.len() as u32;
        let id = *sig_ids.entry(sig.clone()).or_insert_with(|| {
            sigs.push(sig);
            sig_rules.push(Vec::new());
            next
        });
        sig_rules[id as usize].push(i as u32);
    }
    let mut pos_index: Vec<Vec<u32>> = vec![Vec::new(); preds.len()];
    let mut neg_sigs: Vec<u32> = Vec::new();
    for (s, sig) in sigs.iter().enumerate() {
        for &(neg, p) in sig {
            if !neg {
                pos_index[p as usize].push(s as u32);
            }
        }
        if sig.iter().any(|x| x.0) {
            neg_sigs.push(s as u32);
        }
    }
    let mut sigset_memo: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut lookups = Vec::new();
    for fam in [Af::Inet, Af::Inet6] {
        let compatible = |p: u32| match preds[p as usize] {
            Pred::Table(_) => true,
            Pred::Prefix(x) => x.af == fam,
        };
        // The class of a predicate vector (sorted true predicates).
        let mut vec_memo: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut class_of =
            |v: &Vec<u32>, space: &mut Space, budget: &mut Budget| -> Result<u32, BuildError> {
                if let Some(&c) = vec_memo.get(v) {
                    return Ok(c);
                }
                let mut matched: Vec<u32> = v
                    .iter()
                    .flat_map(|&p| pos_index[p as usize].iter().copied())
                    .collect();
                for &s in &neg_sigs {
                    if sigs[s as usize]
                        .iter()
                        .any(|&(neg, p)| neg && compatible(p) && v.binary_search(&p).is_err())
                    {
                        matched.push(s);
                    }
                }
                matched.sort_unstable();
                matched.dedup();
                let c = match sigset_memo.get(&matched) {
                    Some(&c) => c,
                    None => {
                        let c = space.id(rules_of(&matched, &sig_rules), budget, what)?;
                        sigset_memo.insert(matched, c);
                        c
                    }
                };
                vec_memo.insert(v.clone(), c);
                Ok(c)
            };
        let mut nodes: Vec<(u128, u8, Effect)> = Vec::new();
        for (pid, p) in preds.iter().enumerate() {
            match *p {
                Pred::Prefix(x) if x.af == fam => {
                    nodes.push((x.addr, x.len, Effect::Direct(pid as u32)))
                }
                Pred::Prefix(_) => {}
                Pred::Table(t) => {
                    for e in &rs.tables[t].entries {
                        if e.prefix.af == fam {
                            nodes.push((
                                e.prefix.addr,
                                e.prefix.len,
                                Effect::Table(pid as u32, !e.negated),
                            ));
                        }
                    }
                }
            }
        }
        budget.charge(nodes.len() * 48, what)?;
        nodes.sort_by_key(|n| (n.0, n.1));
        let root = class_of(&Vec::new(), &mut space, budget)?;
        // Walk prefixes in (addr, len) order; stack of enclosing prefixes.
        let mut stack: Vec<(u128, Vec<u32>, u32)> = Vec::new(); // (last addr, vector, class)
        let mut inserted: Vec<(Prefix, u32)> = Vec::new();
        let mut k = 0;
        while k < nodes.len() {
            let (addr, len) = (nodes[k].0, nodes[k].1);
            let p = Prefix { af: fam, addr, len };
            while stack.last().is_some_and(|t| addr > t.0) {
                stack.pop();
            }
            let (mut v, parent) = match stack.last() {
                Some(t) => (t.1.clone(), t.2),
                None => (Vec::new(), root),
            };
            while k < nodes.len() && nodes[k].0 == addr && nodes[k].1 == len {
                match nodes[k].2 {
                    Effect::Direct(pid) | Effect::Table(pid, true) => {
                        if let Err(i) = v.binary_search(&pid) {
                            v.insert(i, pid);
                        }
                    }
                    Effect::Table(pid, false) => {
                        if let Ok(i) = v.binary_search(&pid) {
                            v.remove(i);
                        }
                    }
                }
                k += 1;
            }
            let c = class_of(&v, &mut space, budget)?;
            if c != parent {
                inserted.push((p, c));
            }
            stack.push((p.last(), v, c));
        }
        drop(nodes);
        lookups.push(addr_lookup(fam, root, &inserted, opts, budget, what)?);
    }
    let v6 = lookups.pop().expect("v6");
    let v4 = lookups.pop().expect("v4");
    Ok((AddrField { v4, v6 }, space))
}

fn addr_lookup(
    fam: Af,
    root: u32,
    inserted: &[(Prefix, u32)],
    opts: &BuildOptions,
    budget: &mut Budget,
    what: &str,
) -> Result<AddrLookup, BuildError> {
    let bits = Prefix::bits(fam);
    let n_hosts = inserted.iter().filter(|(p, _)| p.len == bits).count();
    let (hosts, rest): (Option<HostMap>, Vec<(Prefix, u32)>) =
        if inserted.len() > opts.lpm_threshold && n_hosts >= opts.host_map_threshold.max(1) {
            budget.charge(n_hosts * 2 * 20 + (1 << 21), what)?;
            let h: Vec<(u128, u32)> = inserted
                .iter()
                .filter(|(p, _)| p.len == bits)
                .map(|(p, c)| (p.addr, *c))
                .collect();
            (
                Some(HostMap::new(&h, fam == Af::Inet6)),
                inserted
                    .iter()
                    .filter(|(p, _)| p.len != bits)
                    .copied()
                    .collect(),
            )
        } else {
            (None, inserted.to_vec())
        };
    Ok(AddrLookup {
        hosts,
        rest: rest_lookup(fam, root, &rest, opts, budget, what)?,
    })
}

fn rest_lookup(
    fam: Af,
    root: u32,
    inserted: &[(Prefix, u32)],
    opts: &BuildOptions,
    budget: &mut Budget,
    what: &str,
) -> Result<Rest, BuildError> {
    if inserted.is_empty() {
        return Ok(Rest::Const(root));
    }
    if inserted.len() > opts.lpm_threshold {
        // tbl8 groups needed: one per distinct 24+8(d-1)-bit prefix of the prefixes longer
        // than that, at each depth d.
        let bits = Prefix::bits(fam) as u32;
        let mut groups: usize = 0;
        let mut level = 24u32;
        while level < bits {
            let set: HashSet<u128> = inserted
                .iter()
                .filter(|(p, _)| u32::from(p.len) > level)
                .map(|(p, _)| p.addr >> (bits - level))
                .collect();
            groups += set.len();
            level += 8;
        }
        let groups = groups + groups / 8 + 16;
        budget.charge((1usize << 24) * 5 + groups * 256 * 5, what)?;
        let groups = u32::try_from(groups).map_err(|_| BuildError {
            message: format!("{what}: too many LPM groups"),
        })?;
        let fail = |e: lpm::LpmError| BuildError {
            message: format!("{what}: LPM insert failed: {e}"),
        };
        return Ok(match fam {
            Af::Inet => {
                let lpm = lpm::Ipv4Lpm::with_tbl8_groups(groups);
                for (p, c) in inserted {
                    lpm.insert(p.addr as u32, p.len, *c).map_err(fail)?;
                }
                Rest::V4 { lpm, root }
            }
            Af::Inet6 => {
                let lpm = lpm::Ipv6Lpm::with_tbl8_groups(groups);
                for (p, c) in inserted {
                    lpm.insert(p.addr, p.len, *c).map_err(fail)?;
                }
                Rest::V6 { lpm, root }
            }
        });
    }
    // Elementary intervals: (start, class), from the nested prefixes.
    let mut out: Vec<(u128, u32)> = vec![(0, root)];
    let mut st: Vec<(u128, u32)> = Vec::new();
    for &(p, c) in inserted {
        while let Some(&(last, _)) = st.last() {
            if p.first() <= last {
                break;
            }
            st.pop();
            out.push((last + 1, st.last().map_or(root, |x| x.1)));
        }
        out.push((p.first(), c));
        st.push((p.last(), c));
    }
    while let Some((last, _)) = st.pop() {
        if last != u128::MAX {
            out.push((last + 1, st.last().map_or(root, |x| x.1)));
        }
    }
    let mut starts: Vec<u128> = Vec::new();
    let mut classes: Vec<u32> = Vec::new();
    for (s, c) in out {
        if starts.last() == Some(&s) {
            *classes.last_mut().expect("same length") = c;
            // Merge with the previous interval if now equal.
            let n = classes.len();
            if n >= 2 && classes[n - 2] == c {
                starts.pop();
                classes.pop();
            }
        } else if classes.last() != Some(&c) {
            starts.push(s);
            classes.push(c);
        }
    }
    if fam == Af::Inet {
        // IPv4 addresses are held in the low 32 bits: a start at 2^32 (after a prefix
        // ending at 255.255.255.255) is never reached and is dropped with its class.
        let n = starts.partition_point(|&s| s <= u128::from(u32::MAX));
        let starts: Vec<u32> = starts[..n].iter().map(|&s| s as u32).collect();
        let classes = classes[..n].to_vec();
        if (1..=4).contains(&n) && starts[0] == 0 {
            let pad = |v: &[u32]| -> [u32; 4] { std::array::from_fn(|i| v[i.min(n - 1)]) };
            return Ok(Rest::Small4 { starts: pad(&starts), classes: pad(&classes) });
        }
        return Ok(Rest::Intervals4 { starts, classes });
    }
    Ok(Rest::Intervals { starts, classes })
}

// ---------------------------------------------------------------------------------------------
// The classifier.

/// The compiled rule set. See the module documentation.
pub struct Classifier {
    iface: IfaceField,
    proto: Vec<u32>,
    sport: Vec<u16>,
    dport: Vec<u16>,
    src: AddrField,
    dst: AddrField,
    ab: Join,
    ef: Join,
    abef: Join,
    cd: Join,
    fin: Join,
    verdicts: Vec<Verdict>,
    rules: usize,
    stats: ClassifierStats,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("rules", &self.rules)
            .field("memory_bytes", &self.memory_bytes())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Classifier {
    /// Compiles `rs` with the default [`BuildOptions`].
    pub fn build(rs: &RuleSet) -> Result<Classifier, BuildError> {
        Self::build_with(rs, &BuildOptions::default())
    }

    /// Compiles `rs`.
    pub fn build_with(rs: &RuleSet, opts: &BuildOptions) -> Result<Classifier, BuildError> {
        if rs.rules.len() >= u32::MAX as usize {
            return Err(BuildError {
                message: "too many rules".into(),
            });
        }
        let mut budget = Budget {
            limit: opts.memory_budget,
            used: 0,
        };
        let b = &mut budget;
        b.charge(2 * 65536 * 2 + 1024 * 4, "the port and protocol tables")?;
        let (iface, s_if) = IfaceField::build(rs, b)?;
        let (proto, s_pr) = build_proto(rs, b)?;
        let (sport, s_sp) = build_ports(
            rs,
            |r| port_constraint(&r.src_ports, &r.icmp_types),
            b,
            "the source port field",
        )?;
        let (dport, s_dp) = build_ports(
            rs,
            |r| port_constraint(&r.dst_ports, r.icmp_code.as_slice()),
            b,
            "the destination port field",
        )?;
        let (src, s_src) = build_addr(rs, |r| &r.src, opts, b, "the source address field")?;
        let (dst, s_dst) = build_addr(rs, |r| &r.dst, opts, b, "the destination address field")?;
        let lpm = [
            src.v4.uses_lpm(),
            src.v6.uses_lpm(),
            dst.v4.uses_lpm(),
            dst.v6.uses_lpm(),
        ];
        let field_classes = [
            s_if.len(),
            s_pr.len(),
            s_sp.len(),
            s_dp.len(),
            s_src.len(),
            s_dst.len(),
        ];
        let n = rs.rules.len();
        let (ab, s_ab) = Join::build(s_if, s_pr, n, b, "interface x protocol", None)?;
        let (ef, s_ef) = Join::build(s_sp, s_dp, n, b, "source port x destination port", None)?;
        let n_ab = s_ab.len();
        let n_ef = s_ef.len();
        let (abef, s_abef) =
            Join::build(s_ab, s_ef, n, b, "(interface, protocol) x (ports)", None)?;
        let n_abef = s_abef.len();
        let (cd, s_cd) = Join::build(
            s_src,
            s_dst,
            n,
            b,
            "source address x destination address",
            None,
        )?;
        let n_cd = s_cd.len();
        let quick: Vec<bool> = rs.rules.iter().map(|r| r.quick).collect();
        let (fin, s_fin) = Join::build(s_abef, s_cd, n, b, "the final combination", Some(&quick))?;
        let verdicts: Vec<Verdict> = s_fin
            .sets
            .iter()
            .map(|s| {
                s.first()
                    .map_or(Verdict::DEFAULT, |&i| Verdict::of_rule(rs, i as usize))
            })
            .collect();
        let joins = [&ab, &ef, &abef, &cd, &fin];
        let stats = ClassifierStats {
            field_classes,
            join_classes: [n_ab, n_ef, n_abef, n_cd, s_fin.len()],
            join_dense: joins.map(|j| j.dense.len().max(if j.small_full { 0 } else { j.full.len() })),
            join_exceptions: joins.map(|j| j.n_exc),
            lpm,
            host_maps: [&src.v4, &src.v6, &dst.v4, &dst.v6]
                .map(|a| a.hosts.as_ref().map_or(0, |h| h.len)),
        };
        Ok(Classifier {
            iface,
            proto,
            sport,
            dport,
            src,
            dst,
            ab,
            ef,
            abef,
            cd,
            fin,
            verdicts,
            rules: rs.rules.len(),
            stats,
        })
    }

    /// The verdict for one packet (same as [`reference::evaluate`](crate::reference::evaluate)).
    #[inline(always)]
    pub fn classify(&self, key: &PacketKey) -> Verdict {
        let a = self.iface.lookup(key.iface, key.dir);
        let b = self.proto[proto_index(key.af, key.proto, key.tcp_flags)];
        let e = u32::from(self.sport[key.src_port as usize]);
        let f = u32::from(self.dport[key.dst_port as usize]);
        let c = self.src.lookup(key.af, key.src);
        let d = self.dst.lookup(key.af, key.dst);
        let ab = self.ab.get(a, b);
        let ef = self.ef.get(e, f);
        let p = self.abef.get(ab, ef);
        let cd = self.cd.get(c, d);
        self.verdicts[self.fin.get(p, cd) as usize]
    }

    /// Classifies `keys[i]` into `out[i]` (`out` at least as long as `keys`).
    pub fn classify_batch(&self, keys: &[PacketKey], out: &mut [Verdict]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.classify(k);
        }
    }

    /// Bytes held by the compiled structure (LPM tables counted as their committed size).
    pub fn memory_bytes(&self) -> usize {
        self.iface.slot.len() * 2
            + self.iface.cls.len() * 4
            + self.proto.len() * 4
            + (self.sport.len() + self.dport.len()) * 2
            + self.src.v4.bytes()
            + self.src.v6.bytes()
            + self.dst.v4.bytes()
            + self.dst.v6.bytes()
            + [&self.ab, &self.ef, &self.abef, &self.cd, &self.fin]
                .iter()
                .map(|j| j.bytes())
                .sum::<usize>()
            + self.verdicts.len() * std::mem::size_of::<Verdict>()
    }

    /// Number of rules compiled.
    pub fn rule_count(&self) -> usize {
        self.rules
    }

    /// Sizes of the structure.
    pub fn stats(&self) -> &ClassifierStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::Classifier;

    #[test]
    fn classifier_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<Classifier>();
    }
}
