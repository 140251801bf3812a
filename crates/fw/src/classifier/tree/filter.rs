//! A leaf's filters: for one dimension, or two, which of the leaf's rules can match a value
//! there, so that the scan checks only those (Lakshman and Stiliadis's bit vectors, on one
//! or two dimensions and within one leaf, each looked up in one step). Packets that match
//! none of a leaf's rules, what a rule set blocks by its default, otherwise check every rule
//! of every leaf they reach.
//!
//! The value picks one of [`BUCKETS`] masks: by its low bits (ports: `22`, `80` and `443`
//! fall apart), or by its place in the box (addresses: a prefix covers neighbouring
//! buckets). Bit `j` of a mask is set when rule `j` of the leaf (in priority order) may
//! match some value of the bucket in that dimension; a rule that does not check the
//! dimension has its bit set everywhere. That is why one filter can leave many rules: a
//! leaf of rules on destination ports and rules on source ports keeps all the latter in
//! every destination port bucket. A second filter, on another dimension, is ANDed.
//!
//! Layout in [`super::Out::items`], just before the leaf's first rule: a filter's
//! [`BUCKETS`] masks two to an item (`(mask 2i, mask 2i + 1)`, [`MASK_ITEMS`]) and its
//! header ([`HEADER_ITEMS`]): `(low, 0)` with `low` the box's lower bound, then
//! `(dimension + LOW if by low bits, shift)`. One filter: its masks, then its header. Two:
//! the second's masks, the first's, the second's header, then the first's with [`SECOND`]
//! added to its dimension; the headers sit by the leaf's first rule, in the line the scan
//! reads anyway, so that the two masks' reads do not wait for each other. The leaf's pointer
//! has [`super::FILTERED`] set.

use super::{DIMS, Range};

/// Leaves with fewer rules are scanned without a filter.
pub(super) const MIN_RULES: usize = 4;
/// A mask is a `u32` (IPv4 values are).
pub(super) const MAX_RULES: usize = 32;
/// Masks per filter.
pub(super) const BUCKETS: usize = 64;
/// A filter is kept only if it leaves, on average over its buckets, at most one rule in
/// this many to check: one that would leave more costs more in memory than it saves
/// (docs/performance.md, "Leaf filters").
const SHARE: usize = 4;
/// Added to the dimension of a filter that buckets by the value's low bits.
pub(super) const LOW: u128 = 8;
/// Added to the dimension of a leaf's filter when a second filter precedes it.
pub(super) const SECOND: u128 = 16;

/// A leaf's filter, as [`choose`] makes it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Filter {
    /// The dimension, plus [`LOW`] when bucketed by low bits.
    pub(super) dim: u128,
    pub(super) low: u128,
    pub(super) shift: u32,
    pub(super) masks: Vec<u32>,
}

/// The filters of a leaf whose rules check `rules` (per rule: its dimensions and range sets,
/// clipped to the box `bx`): the dimension and bucketing that leave, on average over the
/// buckets, the fewest rules to check, and (with `pairs`) a second one on another dimension
/// whose masks, ANDed with the first's, cut that by a quarter or more ([`PAIR_GAIN`]); kept
/// if what they leave is at most a [`SHARE`]th of the rules. `None`: the leaf is scanned
/// whole.
pub(super) fn choose(
    rules: &[&[(usize, Vec<Range>)]],
    bx: &[Range; DIMS],
    pairs: bool,
) -> Option<Filters> {
    if rules.len() < MIN_RULES || rules.len() > MAX_RULES {
        return None;
    }
    let mut all = every_filter(rules, bx);
    let n = rules.len();
    let flat: Vec<Vec<f64>> = all.iter().map(|f| chances(f, n, false)).collect();
    let weighted: Vec<Vec<f64>> = all.iter().map(|f| chances(f, n, true)).collect();
    // What a filter, or two, leave to check: the sum over rules of the chances (products of
    // chances for two: their dimensions differ, so the chances are taken as independent).
    let left = |c: &[Vec<f64>], a: usize, b: Option<usize>| -> f64 {
        (0..n).map(|j| c[a][j] * b.map_or(1.0, |b| c[b][j])).sum()
    };
    let first =
        (0..all.len()).min_by(|&a, &b| left(&flat, a, None).total_cmp(&left(&flat, b, None)))?;
    // The second is chosen by both views: evenly spread traffic, and traffic where the
    // rules point (`chances`); either alone picks badly for the other's traffic.
    let both = |b: Option<usize>| left(&flat, first, b) + left(&weighted, first, b);
    let dim = |i: usize| all[i].dim % LOW;
    let second = (0..all.len())
        .filter(|&b| pairs && dim(b) != dim(first))
        .min_by(|&a, &b| both(Some(a)).total_cmp(&both(Some(b))))
        .filter(|&b| both(Some(b)) <= PAIR_GAIN * both(None));
    if left(&flat, first, second) * SHARE as f64 > n as f64 {
        return None;
    }
    let second = second.map(|i| std::mem::take(&mut all[i]));
    Some(Filters { first: std::mem::take(&mut all[first]), second })
}

/// A second filter is added only if it leaves at most this share of what the first alone
/// leaves.
const PAIR_GAIN: f64 = 0.75;

/// Second filters only in rule sets of at least this many rules (the default of
/// [`crate::classifier::BuildOptions::leaf_pairs_from`]). Their leaves no longer stay
/// in the caches, and a second filter saves reads of rules that miss; in smaller sets the
/// rules' reads hit and the second mask costs more than it saves (docs/performance.md,
/// "Second leaf filters").
pub const PAIRS_FROM: usize = 2048;

/// Every filter a leaf could have: per dimension some rule checks, bucketed by the value's
/// place in the box and by its low bits.
fn every_filter(rules: &[&[(usize, Vec<Range>)]], bx: &[Range; DIMS]) -> Vec<Filter> {
    let mut all = Vec::new();
    for (d, &(lo, hi)) in bx.iter().enumerate() {
        if !rules.iter().any(|c| c.iter().any(|c| c.0 == d)) {
            continue;
        }
        let shift = 128 - ((hi - lo) >> BUCKETS.trailing_zeros()).leading_zeros();
        let place = |a: u128, z: u128| -> Vec<usize> {
            (((a - lo) >> shift) as usize..=(((z - lo) >> shift) as usize).min(BUCKETS - 1))
                .collect()
        };
        all.push(Filter { dim: d as u128, low: lo, shift, masks: masks(rules, d, place) });
        let by_low = |a: u128, z: u128| -> Vec<usize> {
            if z - a >= BUCKETS as u128 - 1 {
                (0..BUCKETS).collect()
            } else {
                (a..=z).map(|v| (v % BUCKETS as u128) as usize).collect()
            }
        };
        all.push(Filter { dim: d as u128 + LOW, low: 0, shift: 0, masks: masks(rules, d, by_low) });
    }
    all
}

/// Per rule `j` of a leaf of `n` rules, the chance that filter `f` names it for a packet:
/// the share of the buckets that name it, or (`weighted`) of the buckets weighted by one
/// plus the rules that name them (traffic goes where rules point: of the protocol
/// dimension's buckets, most are empty and few packets fall there).
fn chances(f: &Filter, n: usize, weighted: bool) -> Vec<f64> {
    let weight = |m: u32| if weighted { 1.0 + f64::from(m.count_ones()) } else { 1.0 };
    let mut chance = vec![0.0; n];
    for &m in &f.masks {
        let mut bits = m;
        while bits != 0 {
            chance[bits.trailing_zeros() as usize] += weight(m);
            bits &= bits - 1;
        }
    }
    let total: f64 = f.masks.iter().map(|&m| weight(m)).sum();
    chance.iter_mut().for_each(|c| *c /= total);
    chance
}

/// A leaf's filters: the packet's candidates are the rules both name.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Filters {
    pub(super) first: Filter,
    pub(super) second: Option<Filter>,
}

/// Writes `f` where a leaf's items are about to start (the layout above).
pub(super) fn write(f: &Filters, items: &mut Vec<Range>) {
    let masks = |g: &Filter, items: &mut Vec<Range>| {
        items.extend(
            g.masks.chunks(2).map(|m| (u128::from(m[0]), m.get(1).map_or(0, |&m| u128::from(m)))),
        );
    };
    let header = |g: &Filter, flag: u128, items: &mut Vec<Range>| {
        items.push((g.low, 0));
        items.push((g.dim | flag, u128::from(g.shift)));
    };
    if let Some(second) = &f.second {
        masks(second, items);
        masks(&f.first, items);
        header(second, 0, items);
        header(&f.first, SECOND, items);
    } else {
        masks(&f.first, items);
        header(&f.first, 0, items);
    }
}

/// Items of a filter's masks, and of its header.
pub(super) const MASK_ITEMS: usize = BUCKETS / 2;
pub(super) const HEADER_ITEMS: usize = 2;

/// Per bucket, the rules that may match a value of it in dimension `d`: those that do not
/// check `d`, and those with a range `(a, z)` whose `buckets(a, z)` holds it.
fn masks(
    rules: &[&[(usize, Vec<Range>)]],
    d: usize,
    buckets: impl Fn(u128, u128) -> Vec<usize>,
) -> Vec<u32> {
    let mut masks = vec![0u32; BUCKETS];
    for (j, checks) in rules.iter().enumerate() {
        let bit = 1u32 << j;
        let Some((_, set)) = checks.iter().find(|c| c.0 == d) else {
            masks.iter_mut().for_each(|m| *m |= bit);
            continue;
        };
        for &(a, z) in set {
            for b in buckets(a, z) {
                masks[b] |= bit;
            }
        }
    }
    masks
}

#[cfg(test)]
mod tests {
    use super::*;

    const DPORT: usize = 4;

    fn slices(rules: &[Vec<(usize, Vec<Range>)>]) -> Vec<&[(usize, Vec<Range>)]> {
        rules.iter().map(Vec::as_slice).collect()
    }

    fn boxed() -> [Range; DIMS] {
        let mut bx = [(0, u128::from(u32::MAX)); DIMS];
        bx[DPORT] = (0, 65535);
        bx
    }

    /// Rules on destination ports 22, 80 and 443 (each also 1024 above, as a list), one on
    /// a source prefix and one on port 80 again: by their low bits each rule's ports fall
    /// into one bucket, which names the port's rules and the rule that checks no port.
    #[test]
    fn ports_are_bucketed_by_their_low_bits() {
        let port = |p: u128| vec![(DPORT, vec![(p, p), (p + 1024, p + 1024)])];
        let rules = vec![port(22), port(80), port(443), vec![(5, vec![(0, 9)])], port(80)];
        let f = choose(&slices(&rules), &boxed(), true).unwrap().first;
        assert_eq!(f.dim, DPORT as u128 + LOW);
        assert_eq!(f.masks[22], 0b01001);
        assert_eq!(f.masks[80 % 64], 0b11010);
        assert_eq!(f.masks[443 % 64], 0b01100);
        assert_eq!(f.masks[0], 0b01000, "no port rule here: only the rule without one");
    }

    /// Prefixes are bucketed by their place in the box: a /8 reaches the buckets its
    /// addresses fall in, and no other.
    #[test]
    fn prefixes_are_bucketed_by_their_place() {
        let src = |a: u128, len: u32| vec![(5, vec![(a, a + (1u128 << (32 - len)) - 1)])];
        let rules =
            vec![src(10 << 24, 8), src(192 << 24, 8), src(172 << 24, 12), src(100 << 24, 8)];
        let f = choose(&slices(&rules), &boxed(), true).unwrap().first;
        assert_eq!((f.dim, f.low, f.shift), (5, 0, 26));
        let bucket = |addr: u128| f.masks[(addr >> 26) as usize];
        assert_eq!(bucket(10 << 24 | 5), 0b0001);
        assert_eq!(bucket(192 << 24), 0b0010);
        assert_eq!(bucket(172 << 24 | 16 << 16), 0b0100);
        assert_eq!(bucket(1 << 24), 0);
        // Every address of a rule is in a bucket that names it.
        for (j, r) in rules.iter().enumerate() {
            let (a, z) = r[0].1[0];
            assert!([a, z, (a + z) / 2].iter().all(|&v| bucket(v) >> j & 1 == 1));
        }
    }

    /// No filter where it would not cut the rules to check to a quarter, nor on small leaves.
    #[test]
    fn no_filter_where_it_would_not_pay() {
        let any = vec![vec![]; 6];
        assert_eq!(choose(&slices(&any), &boxed(), true), None, "no rule checks anything");
        let wide = vec![vec![(DPORT, vec![(0, 40000)])]; 6];
        assert_eq!(choose(&slices(&wide), &boxed(), true), None, "every rule matches most ports");
        let port = |p: u128| vec![(DPORT, vec![(p, p)])];
        assert_eq!(
            choose(&slices(&[port(1), port(2), port(3)]), &boxed(), true),
            None,
            "too few rules"
        );
        assert!(choose(&slices(&[port(1), port(2), port(3), port(4)]), &boxed(), true).is_some());
    }

    /// A leaf of rules on destination ports and rules on source ports: either dimension
    /// alone leaves the other's rules in every bucket, the two together leave the rules
    /// that name both buckets, and the rule that checks neither.
    #[test]
    fn a_second_filter_takes_out_the_rules_of_the_other_dimension() {
        const SPORT: usize = 3;
        let mut bx = boxed();
        bx[SPORT] = (0, 65535);
        let port = |d: usize, p: u128| vec![(d, vec![(p, p)])];
        // Spread so that either bucketing, by place or by low bits, separates them.
        let mut rules: Vec<_> = (0..8)
            .map(|i| port(DPORT, 100 + 1000 * i))
            .chain((0..8).map(|i| port(SPORT, 200 + 1000 * i)))
            .collect();
        rules.push(vec![]);
        let f = choose(&slices(&rules), &bx, true).unwrap();
        let second = f.second.as_ref().expect("a second filter");
        let mut dims = [f.first.dim % LOW, second.dim % LOW];
        dims.sort();
        assert_eq!(dims, [SPORT as u128, DPORT as u128]);
        let both = |dport: u128, sport: u128| {
            let pick = |g: &Filter| {
                let v = if g.dim % LOW == DPORT as u128 { dport } else { sport };
                g.masks[if g.dim & LOW != 0 { v % 64 } else { (v - g.low) >> g.shift } as usize]
            };
            pick(&f.first) & pick(second)
        };
        assert_eq!(
            both(100, 200),
            1 << 0 | 1 << 8 | 1 << 16,
            "the two port rules and the rule on neither"
        );
        assert_eq!(both(65000, 65001) & 0xffff, 0, "no port rule for others");
        let mut items = Vec::new();
        write(&f, &mut items);
        assert_eq!(items.len(), 2 * (MASK_ITEMS + HEADER_ITEMS));
        let dims: Vec<u128> =
            items[2 * MASK_ITEMS..].iter().skip(1).step_by(2).map(|i| i.0).collect();
        assert_eq!(
            dims,
            [second.dim, f.first.dim | SECOND],
            "the headers last, the first's saying a second is there"
        );
    }
}
