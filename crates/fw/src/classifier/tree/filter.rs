//! A leaf's filter: for one dimension, which of the leaf's rules can match a value there, so
//! that the scan checks only those (Lakshman and Stiliadis's bit vectors, on one dimension
//! and within one leaf, looked up in one step). Packets that match none of a leaf's rules,
//! what a rule set blocks by its default, otherwise check every rule of every leaf they
//! reach.
//!
//! The value picks one of [`BUCKETS`] masks: by its low bits (ports: `22`, `80` and `443`
//! fall apart), or by its place in the box (addresses: a prefix covers neighbouring
//! buckets). Bit `j` of a mask is set when rule `j` of the leaf (in priority order) may
//! match some value of the bucket in that dimension; a rule that does not check the
//! dimension has its bit set everywhere.
//!
//! Layout in [`super::Out::items`], just before the leaf's first rule: the [`BUCKETS`] masks
//! two to an item (`(mask 2i, mask 2i + 1)`), then `(low, 0)` with `low` the box's lower
//! bound, then `(dimension + LOW if by low bits, shift)`; the leaf's pointer has
//! [`super::FILTERED`] set.

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

/// A leaf's filter, as [`choose`] makes it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Filter {
    /// The dimension, plus [`LOW`] when bucketed by low bits.
    pub(super) dim: u128,
    pub(super) low: u128,
    pub(super) shift: u32,
    pub(super) masks: Vec<u32>,
}

/// The filter of a leaf whose rules check `rules` (per rule: its dimensions and range sets,
/// clipped to the box `bx`): the dimension and bucketing that leave, on average over the
/// buckets, the fewest rules to check, if that is at most a [`SHARE`]th of them. `None`:
/// the leaf is scanned whole.
pub(super) fn choose(rules: &[&[(usize, Vec<Range>)]], bx: &[Range; DIMS]) -> Option<Filter> {
    if rules.len() < MIN_RULES || rules.len() > MAX_RULES {
        return None;
    }
    let mut best: Option<(u32, Filter)> = None;
    for (d, &(lo, hi)) in bx.iter().enumerate() {
        if !rules.iter().any(|c| c.iter().any(|c| c.0 == d)) {
            continue;
        }
        let shift = 128 - ((hi - lo) >> BUCKETS.trailing_zeros()).leading_zeros();
        let place = Filter {
            dim: d as u128,
            low: lo,
            shift,
            masks: masks(rules, d, |a, z| (((a - lo) >> shift) as usize..=(((z - lo) >> shift) as usize).min(BUCKETS - 1)).collect()),
        };
        let by_low = |a: u128, z: u128| -> Vec<usize> {
            if z - a >= BUCKETS as u128 - 1 { (0..BUCKETS).collect() } else { (a..=z).map(|v| (v % BUCKETS as u128) as usize).collect() }
        };
        let low = Filter { dim: d as u128 + LOW, low: 0, shift: 0, masks: masks(rules, d, by_low) };
        for f in [place, low] {
            let score = f.masks.iter().map(|m| m.count_ones()).sum();
            if best.as_ref().is_none_or(|b| score < b.0) {
                best = Some((score, f));
            }
        }
    }
    let (score, f) = best?;
    (score as usize * SHARE <= rules.len() * BUCKETS).then_some(f)
}

/// Writes `f` where a leaf's items are about to start (the layout above).
pub(super) fn write(f: &Filter, items: &mut Vec<Range>) {
    items.extend(f.masks.chunks(2).map(|m| (u128::from(m[0]), m.get(1).map_or(0, |&m| u128::from(m)))));
    items.push((f.low, 0));
    items.push((f.dim, u128::from(f.shift)));
}

/// Per bucket, the rules that may match a value of it in dimension `d`: those that do not
/// check `d`, and those with a range `(a, z)` whose `buckets(a, z)` holds it.
fn masks(rules: &[&[(usize, Vec<Range>)]], d: usize, buckets: impl Fn(u128, u128) -> Vec<usize>) -> Vec<u32> {
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
        let f = choose(&slices(&rules), &boxed()).unwrap();
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
        let rules = vec![src(10 << 24, 8), src(192 << 24, 8), src(172 << 24, 12), src(100 << 24, 8)];
        let f = choose(&slices(&rules), &boxed()).unwrap();
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
        assert_eq!(choose(&slices(&any), &boxed()), None, "no rule checks anything");
        let wide = vec![vec![(DPORT, vec![(0, 40000)])]; 6];
        assert_eq!(choose(&slices(&wide), &boxed()), None, "every rule matches most ports");
        let port = |p: u128| vec![(DPORT, vec![(p, p)])];
        assert_eq!(choose(&slices(&[port(1), port(2), port(3)]), &boxed()), None, "too few rules");
        assert!(choose(&slices(&[port(1), port(2), port(3), port(4)]), &boxed()).is_some());
    }
}
