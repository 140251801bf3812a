//! A rule as ranges, dimension by dimension: the seven numbers a packet is to the
//! classifier's tree (interface and direction, protocol, TCP flags, source port or ICMP
//! type, destination port or ICMP code, source and destination address), and a rule's set
//! of values in each. The tree splits on them (`crate::classifier::tree`); the parser asks
//! whether two rules may match a common packet with them ([`may_overlap`]), for the rules it
//! rewrites (`translate_rule.rs`). Part of the rule language: it reads nothing but rules.

use crate::packet::{Af, Dir};
use crate::rules::{AddrMatch, AddrTarget, PortMatch, Rule, Table};

/// Inclusive range of a dimension.
pub(crate) type Range = (u128, u128);

pub(crate) const DIMS: usize = 7;
pub(crate) const IFDIR: usize = 0;
pub(crate) const PROTO: usize = 1;
/// TCP flags, or [`NOT_TCP`] for other protocols (which `flags` rules match).
pub(crate) const FLAGS: usize = 2;
pub(crate) const SPORT: usize = 3;
pub(crate) const DPORT: usize = 4;
pub(crate) const SRC: usize = 5;
// Destination address: dimension 6.
pub(crate) const NOT_TCP: u128 = 256;

/// Sorts and merges overlapping or adjacent ranges.
pub(crate) fn normalize(mut v: Vec<Range>) -> Vec<Range> {
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
pub(crate) fn complement(v: &[Range], max: u128) -> Vec<Range> {
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
pub(crate) fn table_ranges(t: &Table, af: Af) -> Vec<Range> {
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

/// The ranges of one dimension of `r`, `None` for any value (empty: matches nothing).
pub(crate) fn rule_dim(r: &Rule, af: Af, d: usize, tables: &[Vec<Range>]) -> Option<Vec<Range>> {
    let points = |v: &mut dyn Iterator<Item = u128>| -> Vec<Range> {
        normalize(v.map(|x| (x, x)).collect())
    };
    let ports = |pm: &PortMatch, icmp: &[u16]| -> Option<Vec<Range>> {
        let from_ports: Option<Vec<Range>> = match pm {
            PortMatch::Any => None,
            PortMatch::Ranges(r) => {
                Some(normalize(r.iter().map(|&(a, b)| (u128::from(a), u128::from(b))).collect()))
            }
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
            normalize(
                (0..=255u8)
                    .filter(|f| f & mask == set)
                    .map(|f| (u128::from(f), u128::from(f)))
                    .chain([(NOT_TCP, NOT_TCP)])
                    .collect(),
            )
        }),
        PROTO if r.protos.is_empty() => None,
        PROTO => Some(points(&mut r.protos.iter().map(|&p| u128::from(p)))),
        SPORT => {
            ports(&r.src_ports, &r.icmp_types.iter().map(|&t| u16::from(t)).collect::<Vec<_>>())
        }
        DPORT => {
            ports(&r.dst_ports, &r.icmp_code.iter().map(|&t| u16::from(t)).collect::<Vec<_>>())
        }
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

/// The largest value of dimension `d` for family `af`.
pub(crate) fn dim_max(af: Af, d: usize) -> u128 {
    match d {
        IFDIR => 2 * 65536 - 1,
        PROTO => 255,
        FLAGS => NOT_TCP,
        SPORT | DPORT => 65535,
        _ if af == Af::Inet => u128::from(u32::MAX),
        _ => u128::MAX,
    }
}

// Whether two rules can match a common packet: Whether two rules can match a common packet, judged on what the tree splits on (interfaces and direction, family, protocols, TCP flags, ports, addresses and tables): the parser's exactness checks for rules it rewrites (`rules/translate_rule.rs`). Other conditions (tags, route bits) are taken as matching, so the answer errs towards "yes".

/// Whether some packet could match both `a` and `b` (see the module documentation).
pub(crate) fn may_overlap(a: &Rule, b: &Rule, tables: &[Table]) -> bool {
    [Af::Inet, Af::Inet6].into_iter().any(|af| {
        if a.af.is_some_and(|x| x != af) || b.af.is_some_and(|x| x != af) {
            return false;
        }
        let tables: Vec<Vec<Range>> = tables.iter().map(|t| table_ranges(t, af)).collect();
        (0..DIMS).all(|d| match (rule_dim(a, af, d, &tables), rule_dim(b, af, d, &tables)) {
            (None, None) => true,
            (None, Some(s)) | (Some(s), None) => !s.is_empty(),
            (Some(x), Some(y)) => intersect(&x, &y),
        })
    })
}

/// Whether two sorted lists of disjoint inclusive ranges share a value.
fn intersect(x: &[Range], y: &[Range]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        let ((a, b), (c, d)) = (x[i], y[j]);
        if a <= d && c <= b {
            return true;
        }
        if b < d {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn rules(text: &str) -> crate::rules::RuleSet {
        let ifaces = |n: &str| ["a", "b"].iter().position(|i| *i == n).map(|i| i as u16);
        crate::rules::parse(text, Path::new("t.conf"), &ifaces).unwrap()
    }

    #[test]
    fn overlap_by_every_dimension() {
        let pairs = [
            ("pass in on a proto tcp to port 80", "block in all", true),
            ("pass in on a proto tcp to port 80", "block out all", false),
            ("pass in on a proto tcp to port 80", "block in on b all", false),
            ("pass in on a proto tcp to port 80", "block in proto udp", false),
            ("pass in on a proto tcp to port 80", "block in proto tcp to port 81:90", false),
            ("pass in on a proto tcp to port 80", "block in proto tcp to port 1:80", true),
            ("pass in on a inet proto tcp to port 80", "block in inet6 all", false),
            ("pass in on a proto tcp from 10.0.0.0/8", "block in from 10.1.0.0/16", true),
            ("pass in on a proto tcp from 10.0.0.0/8", "block in from ! 10.0.0.0/8", false),
            (
                "table <t> { 192.0.2.0/24 }\npass in on a proto tcp from 10.0.0.0/8",
                "block in from <t>",
                false,
            ),
            (
                "table <t> { 10.9.0.0/16 }\npass in on a proto tcp from 10.0.0.0/8",
                "block in from <t>",
                true,
            ),
            // Dimension by dimension: both flags sets hold the value of packets other than
            // TCP, so this errs towards "yes".
            ("pass in on a proto tcp flags S/SA", "block in proto tcp flags A/A", true),
            ("pass in on a proto tcp flags S/SA", "block in on ! b proto tcp flags S/S", true),
        ];
        for (a, b, want) in pairs {
            let rs = rules(&format!("{a}\n{b}\n"));
            let n = rs.rules.len();
            assert_eq!(
                may_overlap(&rs.rules[n - 2], &rs.rules[n - 1], &rs.tables),
                want,
                "{a} / {b}"
            );
        }
    }

    /// Soundness against the reference: two rules of a generated set that one packet
    /// matches (packets at the set's boundaries, as the classifier's property tests send)
    /// are never said not to overlap; and the test is not "always yes".
    #[test]
    fn never_misses_a_packet_both_rules_match() {
        use crate::packet::{Dir, PacketKey};
        use crate::testgen::{IFACES, Rng, boundaries, iface_index, ruleset};
        let (mut checked, mut disjoint) = (0, 0);
        for seed in 1..=4 {
            let rs =
                crate::rules::parse(&ruleset(seed, 60), Path::new("g.conf"), &iface_index).unwrap();
            let b = boundaries(&rs);
            let mut both = std::collections::HashSet::new();
            let mut rng = Rng(seed);
            for _ in 0..20_000 {
                let af = if rng.index(3) == 0 { Af::Inet6 } else { Af::Inet };
                let pool = if af == Af::Inet { &b.v4 } else { &b.v6 };
                let (src, dst) = (pool[rng.index(pool.len())], pool[rng.index(pool.len())]);
                let port = |rng: &mut Rng| {
                    if rng.index(4) == 0 {
                        rng.next_u64() as u16
                    } else {
                        b.ports[rng.index(b.ports.len())]
                    }
                };
                let k = PacketKey {
                    af,
                    dir: if rng.index(2) == 0 { Dir::In } else { Dir::Out },
                    iface: rng.index(IFACES.len()) as u16,
                    proto: [6u8, 6, 17, 17, 1, 58, 47][rng.index(7)],
                    src,
                    dst,
                    src_port: port(&mut rng),
                    dst_port: port(&mut rng),
                    tcp_flags: [0x02, 0x12, 0x10, 0x11, 0x04][rng.index(5)],
                    ..PacketKey::ZERO
                };
                let hit: Vec<usize> = (0..rs.rules.len())
                    .filter(|&i| crate::reference::rule_matches(&rs, &rs.rules[i], &k))
                    .collect();
                for (x, &i) in hit.iter().enumerate() {
                    both.extend(hit[x + 1..].iter().map(|&j| (i, j)));
                }
            }
            for &(i, j) in &both {
                assert!(
                    may_overlap(&rs.rules[i], &rs.rules[j], &rs.tables),
                    "seed {seed}: rules {i} and {j} share a packet"
                );
            }
            let n = rs.rules.len();
            checked += both.len();
            disjoint += (0..n)
                .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                .filter(|&(i, j)| !may_overlap(&rs.rules[i], &rs.rules[j], &rs.tables))
                .count();
        }
        assert!(
            checked > 100 && disjoint > 100,
            "{checked} pairs sharing a packet, {disjoint} said disjoint"
        );
    }
}
