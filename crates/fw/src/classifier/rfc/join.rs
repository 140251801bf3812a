//! The RFC combination tables: (left class, right class) -> class, dense over the few
//! distinct (X, Y) pairs plus hashed exceptions (see the module documentation of `rfc`).

use std::collections::HashMap;

use super::sets::{Budget, RSet, Space, intersect, union};
use crate::classifier::BuildError;

pub(crate) const EMPTY: u64 = u64::MAX;

#[inline]
pub(crate) fn mix(k: u64) -> u64 {
    k.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[inline]
pub(crate) fn filter_bit(r: u32) -> u64 {
    1u64 << (mix(u64::from(r)) >> 58)
}

/// Open-addressing map (l, r) -> class.
pub(crate) struct ExcMap {
    pub(crate) keys: Vec<u64>,
    pub(crate) vals: Vec<u32>,
    pub(crate) shift: u32,
}

impl ExcMap {
    pub(crate) fn new(items: &[(u32, u32, u32)]) -> ExcMap {
        let cap = (items.len() * 2).next_power_of_two().max(2);
        let mut m =
            ExcMap { keys: vec![EMPTY; cap], vals: vec![0; cap], shift: 64 - cap.trailing_zeros() };
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
    pub(crate) fn get(&self, l: u32, r: u32) -> Option<u32> {
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

    pub(crate) fn bytes(&self) -> usize {
        self.keys.len() * 12
    }
}

/// One RFC combination: (l, r) -> class.
pub(crate) struct Join {
    /// Per left class: X id and exception filter (0 = no exception in this row).
    pub(crate) rows: Vec<(u32, u64)>,
    /// Per right class: Y id.
    pub(crate) cols: Vec<u32>,
    pub(crate) ny: usize,
    pub(crate) dense: Vec<u32>,
    pub(crate) exc: ExcMap,
    pub(crate) n_exc: usize,
    /// Number of right classes (for `full`).
    pub(crate) nr: usize,
    /// The whole cross product, when exceptions would cover most of it or it is small
    /// (else empty).
    pub(crate) full: Vec<u32>,
    /// `full` only materialises a small cross product (the sparse form is the reference).
    pub(crate) small_full: bool,
}

/// Cross products up to this many cells are materialised whole (16 KiB).
pub(crate) const SMALL_FULL_CELLS: usize = 4096;

impl Join {
    #[inline(always)]
    pub(crate) fn get(&self, l: u32, r: u32) -> u32 {
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

    pub(crate) fn bytes(&self) -> usize {
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
    pub(crate) fn build(
        l: Space,
        r: Space,
        n_rules: usize,
        budget: &mut Budget,
        what: &str,
        final_quick: Option<&[bool]>,
    ) -> Result<(Join, Space), BuildError> {
        let mut out = Space::new(intersect(&l.common, &r.common));
        budget.charge(out.bytes, what)?;
        // X and Y: each side's sets without the rules the other side leaves unconstrained.
        let (xs, xper) = intern_sets(&l.sets, &r.common);
        let (ys, cols) = intern_sets(&r.sets, &l.common);
        let mut rows: Vec<(u32, u64)> = xper.into_iter().map(|x| (x, 0)).collect();
        let (nl, nr) = (l.len(), r.len());
        let mut outputs = Outputs::new(final_quick, &out.common, &xs, &ys);
        let dense = outputs.dense(&mut out, budget, what)?;
        let inv = shared_rules(&l, &r, n_rules);
        let pair_work: usize = l.sets.iter().flatten().map(|&x| inv[x as usize].len()).sum();
        if pair_work > budget.max_pairs {
            return Err(BuildError {
                message: format!(
                    "{what}: {pair_work} class pairs share a rule (at most {})",
                    budget.max_pairs
                ),
            });
        }
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
            let table = Table {
                rows: &mut rows,
                cols: &cols,
                nr,
                full: use_full.then_some(&mut full),
                exc: &mut exc,
            };
            outputs.exceptions(&l.sets, &inv, table, &mut out, budget, what)?;
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

/// Each set intersected with `other_common`, interned: the distinct results, and for each
/// set the id of its result.
fn intern_sets(sets: &[RSet], other_common: &[u32]) -> (Vec<RSet>, Vec<u32>) {
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
}

/// Rules specific to both sides: for each such rule, the right classes that hold it.
fn shared_rules(l: &Space, r: &Space, n_rules: usize) -> Vec<Vec<u32>> {
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
    inv
}

/// No rule (in a decision summary).
const NONE: u32 = u32::MAX;

/// Decision summary of a sorted set: (first quick, last).
type Summary = (u32, u32);

fn summary(s: &[u32], q: &[bool]) -> Summary {
    (s.iter().copied().find(|&i| q[i as usize]).unwrap_or(NONE), s.last().copied().unwrap_or(NONE))
}

/// pf's deciding rule of the union of summarised sets: the first `quick` one, else the last.
fn combine(parts: &[Summary]) -> Option<u32> {
    let q = parts.iter().map(|p| p.0).min().unwrap_or(NONE);
    if q != NONE {
        return Some(q);
    }
    parts.iter().map(|p| p.1).filter(|&x| x != NONE).max()
}

/// Where the exceptions of a combination go: the full table when it is used, else the
/// exception list and the rows' filter bits.
struct Table<'a> {
    rows: &'a mut [(u32, u64)],
    cols: &'a [u32],
    nr: usize,
    full: Option<&'a mut Vec<u32>>,
    exc: &'a mut Vec<(u32, u32, u32)>,
}

/// How a combination's output classes are made: full rule sets, or, in the final
/// combination (`quick` given), decisions.
struct Outputs<'q> {
    quick: Option<&'q [bool]>,
    /// The X and Y sets.
    xs: &'q [RSet],
    ys: &'q [RSet],
    /// Summaries of the common set and of each X and Y set (final combination only).
    common: Summary,
    xsum: Vec<Summary>,
    ysum: Vec<Summary>,
    /// The class of each decision made so far.
    decision_ids: HashMap<Option<u32>, u32>,
}

impl<'q> Outputs<'q> {
    fn new(quick: Option<&'q [bool]>, common: &[u32], xs: &'q [RSet], ys: &'q [RSet]) -> Self {
        let (common, xsum, ysum) = match quick {
            Some(q) => (
                summary(common, q),
                xs.iter().map(|s| summary(s, q)).collect(),
                ys.iter().map(|s| summary(s, q)).collect(),
            ),
            None => ((NONE, NONE), Vec::new(), Vec::new()),
        };
        Outputs { quick, xs, ys, common, xsum, ysum, decision_ids: HashMap::new() }
    }

    /// The output class of a decision.
    fn decision_class(
        &mut self,
        d: Option<u32>,
        out: &mut Space,
        budget: &mut Budget,
        what: &str,
    ) -> Result<u32, BuildError> {
        if let Some(&c) = self.decision_ids.get(&d) {
            return Ok(c);
        }
        let c = out.id(d.into_iter().collect(), budget, what)?;
        self.decision_ids.insert(d, c);
        Ok(c)
    }

    /// The dense table over (X, Y): the class of `common ∪ x ∪ y`.
    fn dense(
        &mut self,
        out: &mut Space,
        budget: &mut Budget,
        what: &str,
    ) -> Result<Vec<u32>, BuildError> {
        let (xs, ys) = (self.xs, self.ys);
        let n_dense = xs.len().saturating_mul(ys.len());
        budget.charge(n_dense.saturating_mul(4), what)?;
        let mut dense = Vec::with_capacity(n_dense);
        for (xi, x) in xs.iter().enumerate() {
            for (yi, y) in ys.iter().enumerate() {
                let c = match self.quick {
                    Some(_) => {
                        let d = combine(&[self.common, self.xsum[xi], self.ysum[yi]]);
                        self.decision_class(d, out, budget, what)?
                    }
                    None => out.id(union(x, y), budget, what)?,
                };
                dense.push(c);
            }
        }
        Ok(dense)
    }

    /// The class pairs that share a rule specific to both sides, whose class is not the
    /// dense table's: per left class, accumulate Z(l, r), the shared rules, for the right
    /// classes it touches.
    fn exceptions(
        &mut self,
        left_sets: &[RSet],
        inv: &[Vec<u32>],
        mut table: Table,
        out: &mut Space,
        budget: &mut Budget,
        what: &str,
    ) -> Result<(), BuildError> {
        let nr = table.nr;
        let mut touched: Vec<u32> = Vec::new();
        let mut zq = vec![NONE; nr];
        let mut zmax = vec![NONE; nr];
        let mut zsets: Vec<RSet> =
            if self.quick.is_some() { Vec::new() } else { vec![Vec::new(); nr] };
        for (li, a) in left_sets.iter().enumerate() {
            for &x in a {
                for &ri in &inv[x as usize] {
                    let ri = ri as usize;
                    if zmax[ri] == NONE {
                        touched.push(ri as u32);
                    }
                    zmax[ri] = x; // ascending x: the last one is the max
                    match self.quick {
                        Some(q) => {
                            if q[x as usize] && zq[ri] == NONE {
                                zq[ri] = x;
                            }
                        }
                        None => zsets[ri].push(x),
                    }
                }
            }
            let xi = table.rows[li].0 as usize;
            for &ri in &touched {
                let ri = ri as usize;
                let yi = table.cols[ri] as usize;
                let c = match self.quick {
                    Some(_) => {
                        let d = combine(&[
                            self.common,
                            self.xsum[xi],
                            self.ysum[yi],
                            (zq[ri], zmax[ri]),
                        ]);
                        self.decision_class(d, out, budget, what)?
                    }
                    None => {
                        let s = union(&union(&self.xs[xi], &self.ys[yi]), &zsets[ri]);
                        zsets[ri].clear();
                        out.id(s, budget, what)?
                    }
                };
                zq[ri] = NONE;
                zmax[ri] = NONE;
                if let Some(full) = table.full.as_deref_mut() {
                    full[li * nr + ri] = c;
                } else {
                    budget.charge(24, what)?;
                    table.exc.push((li as u32, ri as u32, c));
                    table.rows[li].1 |= filter_bit(ri as u32);
                }
            }
            touched.clear();
        }
        Ok(())
    }
}
