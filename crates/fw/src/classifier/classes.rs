//! The classes of a packet's addresses and ports, by which the
//! [`VerdictCache`](super::VerdictCache) looks up a key that has no entry of its own (RFC's
//! phase 0: P. Gupta, N. McKeown, "Packet Classification on Multiple Fields", SIGCOMM 1999).
//!
//! Two values of a field are equivalent when exactly the same rules accept them, and a
//! verdict depends only on which rules match: so two packets whose addresses and ports are
//! in the same classes, and whose other keyed fields are equal, get the same verdict. By
//! classes, the cache answers a new flow from an entry another flow made. 100,000 bench
//! flows against 10,000 realistic rules, both passes, make 1,110 distinct class keys
//! (`docs/performance.md`, "New flows answered by field classes").
//!
//! Classes come from a sweep over each field's rule ranges: every rule has a 128-bit word
//! (splitmix64), and the XOR of the words of the rules that accept an interval names that
//! interval's rule set. Equal names get one class id, and adjacent intervals of one class
//! merge. Two different sets get one name with probability 2^-128 per pair of intervals.
//!
//! Lookups: a port is one read of a 65,536-entry table of ids. An address, per family, is
//! one read of a table indexed by its top 16 bits; its entry is the class (the whole /16 is
//! in one), a node of 256 entries on the next 8 bits (where [`NODE_FROM`] or more intervals
//! meet, at most [`NODE_BUDGET`] nodes), or a run of fewer intervals, whose starts the
//! address is compared with all at once (no branch on the data: a search by halves
//! mispredicted about three times per address). Past the node budget, longer runs are
//! searched by halves.

use std::collections::{HashMap, HashSet};

use super::tree::{self, DPORT, Range, SPORT, SRC};
use crate::packet::{Af, PacketKey};
use crate::rules::RuleSet;

/// An address entry that is a class id.
const DIRECT: u32 = 1 << 31;
/// An address entry that is a node's index.
const NODE: u32 = 1 << 30;
/// An address entry that is an index into [`AddrClasses::spans`] (a run searched by halves);
/// without any of these three bits, it is the first interval of a run of at most
/// [`NODE_FROM`] - 1.
const LONG: u32 = 1 << 29;
/// An entry spanning this many intervals or more gets a node (else a short run).
const NODE_FROM: usize = 8;
/// Nodes per address table at most (1 KiB each): past it, entries are searched by halves.
pub(super) const NODE_BUDGET: usize = 1 << 14;

/// The class ids of a rule set's ports and addresses. See the module documentation.
pub(crate) struct KeyClasses {
    sport: Box<[u16]>,
    dport: Box<[u16]>,
    src4: AddrClasses<u32>,
    dst4: AddrClasses<u32>,
    src6: AddrClasses<u128>,
    dst6: AddrClasses<u128>,
}

impl KeyClasses {
    /// The classes of `rs`, each address table with at most `nodes` nodes.
    pub(crate) fn build(rs: &RuleSet, nodes: usize) -> KeyClasses {
        let addr4 = |d| AddrClasses::build_with(&intervals(rs, Some(Af::Inet), d), nodes);
        let addr6 = |d| AddrClasses::build_with(&intervals(rs, Some(Af::Inet6), d), nodes);
        KeyClasses {
            sport: port_table(&intervals(rs, None, SPORT)),
            dport: port_table(&intervals(rs, None, DPORT)),
            src4: addr4(SRC),
            dst4: addr4(SRC + 1),
            src6: addr6(SRC),
            dst6: addr6(SRC + 1),
        }
    }

    /// The classes of `key`'s source and destination addresses and ports.
    #[inline(always)]
    pub(crate) fn of(&self, key: &PacketKey) -> (u32, u32, u16, u16) {
        let (s, d) = if key.af == Af::Inet {
            (self.src4.class(key.src as u32), self.dst4.class(key.dst as u32))
        } else {
            (self.src6.class(key.src), self.dst6.class(key.dst))
        };
        (s, d, self.sport[usize::from(key.src_port)], self.dport[usize::from(key.dst_port)])
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        2 * 2 * 65536
            + self.src4.bytes()
            + self.dst4.bytes()
            + self.src6.bytes()
            + self.dst6.bytes()
    }
}

/// Rule `rule`'s word (splitmix64 of its index, twice).
fn word(rule: usize) -> u128 {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let i = 2 * rule as u64;
    u128::from(mix(i)) << 64 | u128::from(mix(i + 1))
}

/// The intervals of dimension `d` over the rules of family `af` (`None`: all): (start,
/// class), starts increasing from 0, neighbours of different classes. Class 0 is the set of
/// no rule.
fn intervals(rs: &RuleSet, af: Option<Af>, d: usize) -> Vec<(u128, u32)> {
    let mut ids: HashMap<u128, u32, FastHash> = HashMap::default();
    ids.insert(0, 0);
    let mut out: Vec<(u128, u32)> = vec![(0, 0)];
    for (at, name, _) in sweep(rs, af, d) {
        let next = ids.len() as u32;
        let class = *ids.entry(name).or_insert(next);
        match out.last_mut() {
            Some(last) if last.0 == at => last.1 = class,
            _ => out.push((at, class)),
        }
    }
    out.dedup_by(|next, prev| next.1 == prev.1);
    out
}

/// The sizes of the distinct rule sets among the intervals of address field `d` (`SRC` or
/// `SRC + 1`) of family `af` (how many of the family's rules that constrain the field
/// accept each), and the number of values where the set changes. Tells ahead a rule set
/// RFC could not hold (`rfc::surely_over_budget`).
pub(super) fn set_sizes_and_changes(rs: &RuleSet, af: Af, d: usize) -> (Vec<usize>, usize) {
    let changes = sweep(rs, Some(af), d);
    // The values below the first change are in no rule's ranges: the empty set, if any.
    let below = changes.first().is_none_or(|c| c.0 > 0).then_some((0, 0, 0));
    let mut seen: HashSet<u128, FastHash> = HashSet::default();
    let (mut sizes, mut boundaries, mut last) = (Vec::new(), 0, None);
    for (_, name, size) in below.into_iter().chain(changes) {
        if seen.insert(name) {
            sizes.push(size);
        }
        boundaries += usize::from(last.is_some_and(|l| l != name));
        last = Some(name);
    }
    (sizes, boundaries)
}

/// Where the rule set changes along dimension `d`: (value, the name of the set of rules
/// accepting it and the values up to the next change, their number), values increasing.
/// Rules with the same ranges (a table, a network many rules name) are swept as one, their
/// words XORed: the names are the same, and a table named by 1,000 rules costs its entries once.
fn sweep(rs: &RuleSet, af: Option<Af>, d: usize) -> Vec<(u128, u128, usize)> {
    let (rules, max) = tree::dim_ranges(rs, af, d);
    let mut groups: HashMap<&[Range], (u128, usize), FastHash> =
        HashMap::with_capacity_and_hasher(rules.len(), FastHash::default());
    for (i, ranges) in &rules {
        let g = groups.entry(ranges.as_slice()).or_insert((0, 0));
        *g = (g.0 ^ word(*i), g.1 + 1);
    }
    let mut events: Vec<(u128, u128, isize)> = Vec::new();
    for (ranges, (w, n)) in groups {
        for &(a, b) in ranges {
            events.push((a, w, n as isize));
            if b < max {
                events.push((b + 1, w, -(n as isize)));
            }
        }
    }
    events.sort_unstable_by_key(|e| e.0);
    let mut out = Vec::new();
    let (mut name, mut size, mut k) = (0u128, 0isize, 0);
    while k < events.len() {
        let at = events[k].0;
        while let Some(&(_, w, n)) = events.get(k).filter(|e| e.0 == at) {
            name ^= w;
            size += n;
            k += 1;
        }
        out.push((at, name, size as usize));
    }
    out
}

/// The build-time maps hash range lists and set names of the operator's own rules, where
/// SipHash was a tenth of the sweep.
type FastHash = lpm::IntBuild;

/// A port's class by its value. Ids fit: at most one class per value.
fn port_table(iv: &[(u128, u32)]) -> Box<[u16]> {
    let mut t = vec![0u16; 65536];
    for (k, &(start, class)) in iv.iter().enumerate() {
        let end = iv.get(k + 1).map_or(65536, |n| n.0 as usize);
        t[start as usize..end].fill(class as u16);
    }
    t.into_boxed_slice()
}

/// An address family's values: IPv4 addresses narrowed to `u32`.
trait AddrWord: Copy + Ord {
    const BITS: u32;
    fn of(v: u128) -> Self;
    /// The bits from `shift` up, masked by `mask`, as an index.
    fn chunk(self, shift: u32, mask: u32) -> usize;
}

impl AddrWord for u32 {
    const BITS: u32 = 32;
    fn of(v: u128) -> u32 {
        v as u32
    }
    #[inline(always)]
    fn chunk(self, shift: u32, mask: u32) -> usize {
        (self >> shift & mask) as usize
    }
}

impl AddrWord for u128 {
    const BITS: u32 = 128;
    fn of(v: u128) -> u128 {
        v
    }
    #[inline(always)]
    fn chunk(self, shift: u32, mask: u32) -> usize {
        (self >> shift) as u32 as usize & mask as usize
    }
}

/// An address field's classes in one family. See the module documentation.
struct AddrClasses<W> {
    /// By the top 16 bits: `DIRECT | class`, `NODE | node`, `LONG | span`, or a short run's
    /// first interval.
    root: Box<[u32]>,
    /// 256 entries per node, by the next 8 bits, as `root`'s.
    nodes: Vec<u32>,
    /// Long runs of intervals (first, last), searched by halves.
    spans: Vec<(u32, u32)>,
    /// Where the intervals start, then `NODE_FROM - 1` copies of the largest value (so that
    /// a short run's comparisons never read past the end).
    starts: Box<[W]>,
    classes: Box<[u32]>,
}

impl<W: AddrWord> AddrClasses<W> {
    /// The classes of intervals `iv`, with at most `budget` nodes.
    fn build_with(iv: &[(u128, u32)], budget: usize) -> AddrClasses<W> {
        let mut b = AddrBuilder {
            starts: iv.iter().map(|e| e.0).collect(),
            classes: iv.iter().map(|e| e.1).collect(),
            nodes: Vec::new(),
            spans: Vec::new(),
            budget,
        };
        let bits = W::BITS - 16;
        let root = b.entries(0, bits, 1 << 16, 0).into_boxed_slice();
        AddrClasses {
            root,
            nodes: b.nodes,
            spans: b.spans,
            starts: b
                .starts
                .iter()
                .map(|&s| W::of(s))
                .chain([W::of(u128::MAX); NODE_FROM - 1])
                .collect(),
            classes: b.classes.into_boxed_slice(),
        }
    }

    #[inline(always)]
    fn class(&self, v: W) -> u32 {
        let mut shift = W::BITS - 16;
        let mut e = self.root[v.chunk(shift, 0xffff)];
        while e & (DIRECT | NODE) == NODE {
            shift -= 8;
            e = self.nodes[(e & !NODE) as usize * 256 + v.chunk(shift, 0xff)];
        }
        if e & DIRECT != 0 {
            return e & !DIRECT;
        }
        if e & LONG != 0 {
            let (a, b) = self.spans[(e & !LONG) as usize];
            return self.classes[a as usize
                + self.starts[a as usize + 1..=b as usize].partition_point(|&s| s <= v)];
        }
        // The run's later starts, and those after it (all above the entry's values), or the
        // padding: the largest address counts the padding too, and is in the last interval.
        let a = e as usize;
        let after: &[W; NODE_FROM - 1] =
            self.starts[a + 1..a + NODE_FROM].try_into().expect("padded");
        let i = a + after.iter().map(|&s| usize::from(s <= v)).sum::<usize>();
        self.classes[i.min(self.classes.len() - 1)]
    }

    fn bytes(&self) -> usize {
        4 * (self.root.len() + self.nodes.len() + self.classes.len() + 2 * self.spans.len())
            + std::mem::size_of::<W>() * self.starts.len()
    }
}

struct AddrBuilder {
    starts: Vec<u128>,
    classes: Vec<u32>,
    nodes: Vec<u32>,
    spans: Vec<(u32, u32)>,
    /// Nodes at most.
    budget: usize,
}

impl AddrBuilder {
    /// The entries of `count` consecutive blocks of `2^bits` values from `lo`, the first
    /// starting in interval `first`: one sweep over the blocks and their intervals (a
    /// search by halves per block made the 65,536 root entries most of the build's time).
    fn entries(&mut self, lo: u128, bits: u32, count: u128, first: usize) -> Vec<u32> {
        let last = self.starts.len() - 1;
        let mut out = Vec::with_capacity(count as usize);
        let mut a = first;
        for k in 0..count {
            let start = lo + (k << bits);
            let end = start + ((1u128 << bits) - 1);
            while a < last && self.starts[a + 1] <= start {
                a += 1;
            }
            if a == last {
                // The remaining blocks all lie in the last interval.
                out.resize(count as usize, DIRECT | self.classes[last]);
                break;
            }
            let mut b = a;
            while b < last && self.starts[b + 1] <= end {
                b += 1;
            }
            out.push(self.entry(start, bits, a, b));
        }
        out
    }

    /// The entry for the values `lo..lo + 2^bits`, which lie in intervals `a..=b`.
    fn entry(&mut self, lo: u128, bits: u32, a: usize, b: usize) -> u32 {
        if a == b {
            return DIRECT | self.classes[a];
        }
        if b - a + 1 >= NODE_FROM && bits >= 8 && self.nodes.len() < self.budget * 256 {
            let at = self.nodes.len();
            self.nodes.resize(at + 256, 0);
            let node = self.entries(lo, bits - 8, 256, a);
            self.nodes[at..at + 256].copy_from_slice(&node);
            return NODE | (at / 256) as u32;
        }
        if b - a + 1 < NODE_FROM {
            return a as u32;
        }
        self.spans.push((a as u32, b as u32));
        LONG | (self.spans.len() - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Dir, proto};
    use std::path::Path;

    fn rules(text: &str) -> RuleSet {
        crate::rules::parse(text, Path::new("t.conf"), &|n| {
            n.strip_prefix("em").and_then(|i| i.parse().ok())
        })
        .unwrap()
    }

    /// Keys with classes of their addresses and ports in common, and their other fields
    /// equal, are accepted by the same rules.
    fn check_same_rules(rs: &RuleSet, keys: &[PacketKey]) {
        let kc = KeyClasses::build(rs, NODE_BUDGET);
        let mut seen: HashMap<_, Vec<bool>> = HashMap::new();
        for k in keys {
            let matched: Vec<bool> =
                rs.rules.iter().map(|r| crate::reference::rule_matches(rs, r, k)).collect();
            let rest = (k.af == Af::Inet6, k.dir == Dir::Out, k.iface, k.proto, k.tcp_flags);
            let first = seen.entry((rest, kc.of(k))).or_insert_with(|| matched.clone());
            assert_eq!(*first, matched, "{k:?} in classes {:?}", kc.of(k));
        }
    }

    fn key(af: Af, src: u128, dst: u128, sport: u16, dport: u16) -> PacketKey {
        PacketKey {
            af,
            dir: Dir::In,
            proto: proto::UDP,
            src,
            dst,
            src_port: sport,
            dst_port: dport,
            ..PacketKey::ZERO
        }
    }

    #[test]
    fn ports_split_where_rules_begin_and_end() {
        let rs = rules(
            "pass proto udp to port 1000:2000\nblock proto udp from port > 1500\npass proto udp to port { 53, 1999 }\n",
        );
        let kc = KeyClasses::build(&rs, NODE_BUDGET);
        let d = |p| kc.dport[p as usize];
        assert_eq!(d(0), 0);
        assert_eq!(d(999), 0);
        assert_eq!(d(65535), 0);
        assert_ne!(d(53), 0);
        assert_eq!(d(1000), d(1998));
        assert_ne!(d(1999), d(1998));
        assert_eq!(d(2000), d(1998));
        assert_ne!(d(2001), d(2000));
        assert_eq!(d(2001), 0, "the set of no rule");
        let s = |p| kc.sport[p as usize];
        assert_eq!(s(1500), s(0));
        assert_eq!(s(1501), s(65535));
        assert_ne!(s(1501), s(1500));
    }

    #[test]
    fn addresses_of_one_class_match_the_same_rules() {
        let mut text = String::from("table <t> { 10.1.0.0/16, !10.1.2.0/24, 2001:db8:5::/48 }\n");
        for i in 0..40u32 {
            text +=
                &format!("pass from 10.{}.{}.0/{} to 192.0.2.{}\n", i % 4, i * 5, 20 + i % 12, i);
            text +=
                &format!("block inet6 from 2001:db8:{:x}::/{} to ! 2001:db8::{:x}\n", i, 40 + i, i);
        }
        text += "block from <t> to ! <t>\n";
        let rs = rules(&text);
        let mut keys = Vec::new();
        let mut x = 7u64;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let near = |base: u128, bits: u32| base + (u128::from(x >> 7) & ((1 << bits) - 1));
            keys.push(key(
                Af::Inet,
                near(0x0a00_0000, 20 + (i % 3) as u32),
                near(0xc000_0200, 8),
                1,
                2,
            ));
            keys.push(key(
                Af::Inet6,
                near(0x2001_0db8 << 96, 100 + (i % 3) as u32 * 8),
                near(0x2001_0db8 << 96, 10),
                1,
                2,
            ));
        }
        check_same_rules(&rs, &keys);
        // A host rule makes a class of one address (a node below its /16).
        let kc = KeyClasses::build(&rs, NODE_BUDGET);
        let c = |a: u32| kc.dst4.class(a);
        assert_ne!(c(0xc000_0205), c(0xc000_0204));
        assert_eq!(c(0xc000_0280), c(0x0808_0808));
    }

    #[test]
    fn realistic_sets_keep_their_verdicts_by_class() {
        for seed in 1..=3 {
            let rs = crate::rules::parse(
                &crate::testgen::ruleset(seed, 300),
                Path::new("g.conf"),
                &crate::testgen::iface_index,
            )
            .unwrap();
            let b = crate::testgen::boundaries(&rs);
            let mut rng = crate::testgen::Rng(seed);
            let mut keys = Vec::new();
            for _ in 0..20_000 {
                let af = if rng.index(4) == 0 { Af::Inet6 } else { Af::Inet };
                let pool = if af == Af::Inet { &b.v4 } else { &b.v6 };
                let mut addr = || {
                    pool[rng.index(pool.len())].wrapping_add(u128::from(rng.next_u64() % 3))
                        & if af == Af::Inet { u128::from(u32::MAX) } else { u128::MAX }
                };
                let (src, dst) = (addr(), addr());
                let mut port =
                    || b.ports[rng.index(b.ports.len())].wrapping_add(rng.next_u64() as u16 % 3);
                let (src_port, dst_port) = (port(), port());
                // Few values of the other fields, so that keys share them.
                let proto = [proto::TCP, proto::UDP][rng.index(2)];
                let dir = if rng.index(2) == 0 { Dir::In } else { Dir::Out };
                keys.push(PacketKey {
                    af,
                    dir,
                    iface: rng.index(2) as u16,
                    proto,
                    src,
                    dst,
                    src_port,
                    dst_port,
                    tcp_flags: 0x02,
                    ..PacketKey::ZERO
                });
            }
            check_same_rules(&rs, &keys);
        }
    }

    /// Every kind of entry gives the class of the interval that holds the address: nodes,
    /// short runs, and (with no node allowed) long runs.
    #[test]
    fn address_lookups_find_the_interval_of_the_address() {
        let mut x = 5u64;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 16
        };
        // Clusters of edges in a few /16s, some dense (nodes or long runs), some not.
        let mut starts: Vec<u128> = (0..3000)
            .map(|i| {
                u128::from(
                    0x0a00_0000 + (i % 5) * 0x0001_0000 + (next() as u32 & (0xff << (i % 3 * 4))),
                )
            })
            .collect();
        starts.extend((0..50).map(|_| u128::from(next() as u32)));
        starts.push(0);
        starts.sort_unstable();
        starts.dedup();
        let iv: Vec<(u128, u32)> = starts.iter().enumerate().map(|(i, &s)| (s, i as u32)).collect();
        for budget in [0, 4, NODE_BUDGET] {
            let a = AddrClasses::<u32>::build_with(&iv, budget);
            assert!(budget != 0 || !a.spans.is_empty());
            for k in 0..200_000u32 {
                let v = if k % 2 == 0 {
                    starts[k as usize % starts.len()] as u32 + k % 3
                } else {
                    next() as u32
                };
                let want = starts.partition_point(|&s| s <= u128::from(v)) - 1;
                assert_eq!(a.class(v), want as u32, "{v:#x}, budget {budget}");
            }
        }
    }

    /// The first and last addresses of each family, in runs at the ends of the space (a
    /// broadcast 255.255.255.255 once read past the classes).
    #[test]
    fn the_ends_of_the_address_space_find_their_intervals() {
        let iv: Vec<(u128, u32)> =
            [(0, 0), (1, 1), (2, 2), (u128::MAX - 2, 3), (u128::MAX - 1, 4), (u128::MAX, 5)].into();
        let v6 = AddrClasses::<u128>::build_with(&iv, NODE_BUDGET);
        assert_eq!(
            [0, 1, 2, 77, u128::MAX - 2, u128::MAX - 1, u128::MAX].map(|v| v6.class(v)),
            [0, 1, 2, 2, 3, 4, 5]
        );
        let iv4: Vec<(u128, u32)> =
            [(0, 0), (1, 1), (0xffff_fff0, 2), (0xffff_fffe, 3), (0xffff_ffff, 4)].into();
        let v4 = AddrClasses::<u32>::build_with(&iv4, NODE_BUDGET);
        assert_eq!(
            [0, 1, 9, 0xffff_fff0, 0xffff_fffe, u32::MAX].map(|v| v4.class(v)),
            [0, 1, 1, 2, 3, 4]
        );
        let rs = rules(
            "pass to 255.255.255.254\npass to 255.255.255.255\npass inet6 to ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe\n",
        );
        let keys: Vec<PacketKey> = [u32::MAX, u32::MAX - 1, u32::MAX - 2]
            .iter()
            .map(|&a| key(Af::Inet, 1, u128::from(a), 1, 2))
            .chain([u128::MAX, u128::MAX - 1].map(|a| key(Af::Inet6, 1, a, 1, 2)))
            .collect();
        check_same_rules(&rs, &keys);
        let kc = KeyClasses::build(&rs, NODE_BUDGET);
        assert_ne!(kc.of(&keys[0]).1, kc.of(&keys[1]).1);
    }

    #[test]
    fn crowded_entries_get_nodes_or_spans_within_the_budget() {
        // 600 hosts in one /24 and 600 in one IPv6 /120: more intervals than a node's entry
        // holds directly, at every level.
        let mut text = String::new();
        for i in 0..600u32 {
            text += &format!(
                "pass to 10.9.{}.{}\npass inet6 to 2001:db8::{:x}\n",
                i / 256,
                i % 256,
                i * 3
            );
        }
        let rs = rules(&text);
        let kc = KeyClasses::build(&rs, NODE_BUDGET);
        assert!(!kc.dst4.nodes.is_empty() && !kc.dst6.nodes.is_empty());
        for i in 0..600u32 {
            let v4 = u128::from(0x0a09_0000 + i);
            assert_ne!(kc.dst4.class(v4 as u32), 0, "host {i}");
            assert_ne!(kc.dst6.class((0x2001_0db8u128 << 96) + u128::from(i * 3)), 0);
            assert_eq!(kc.dst6.class((0x2001_0db8u128 << 96) + u128::from(i * 3 + 1)), 0);
        }
    }
}
