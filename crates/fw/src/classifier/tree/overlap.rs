//! Whether two rules can match a common packet, judged on what the tree splits on
//! (interfaces and direction, family, protocols, TCP flags, ports, addresses and tables):
//! the parser's exactness checks for rules it rewrites (`rules/translate_rule.rs`). Other
//! conditions (tags, route bits) are taken as matching, so the answer errs towards "yes".

use super::{DIMS, Range, rule_dim, table_ranges};
use crate::packet::Af;
use crate::rules::{Rule, Table};

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
