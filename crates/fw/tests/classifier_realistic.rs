//! The classifier against the reference evaluator on realistic generated rule sets
//! ([`fw::testgen`]: prefixes, negations, lists, tables, port ranges and operators, in and
//! out, IPv4 and IPv6, `quick` and not) of up to 1,000 rules, with whichever engine `Auto`
//! picks and with each engine forced, on random packets and on packets at the rules'
//! boundaries (first and last address of every prefix and table entry and their
//! neighbours, range ends of ports and their neighbours).
//!
//! `FW_REALISTIC_SETS=N` compares N rule sets per size instead of the default.

use std::path::Path;

use fw::classifier::{BuildOptions, Classifier, Engine};
use fw::packet::{Af, Dir, PacketKey};
use fw::reference::evaluate;
use fw::rules::{AddrMatch, AddrTarget, PortMatch, Prefix, RuleSet};
use fw::testgen::Rng;

/// Addresses and ports where rules start or stop matching.
struct Boundaries {
    v4: Vec<u128>,
    v6: Vec<u128>,
    ports: Vec<u16>,
}

fn boundaries(rs: &RuleSet) -> Boundaries {
    let mut prefixes: Vec<Prefix> = rs.tables.iter().flat_map(|t| t.entries.iter().map(|e| e.prefix)).collect();
    let mut ports = vec![0u16, 65535];
    for r in &rs.rules {
        for m in [&r.src, &r.dst] {
            if let AddrMatch::List(items) = m {
                prefixes.extend(items.iter().filter_map(|i| match i.target {
                    AddrTarget::Prefix(p) => Some(p),
                    AddrTarget::Table(_) => None,
                }));
            }
        }
        for pm in [&r.src_ports, &r.dst_ports] {
            if let PortMatch::Ranges(rs) = pm {
                for &(a, b) in rs {
                    ports.extend([a, a.wrapping_sub(1), b, b.wrapping_add(1)]);
                }
            }
        }
        ports.extend(r.icmp_types.iter().map(|&t| u16::from(t)));
    }
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    for p in prefixes {
        let max = if p.af == Af::Inet { u128::from(u32::MAX) } else { u128::MAX };
        let v = if p.af == Af::Inet { &mut v4 } else { &mut v6 };
        v.extend([p.first(), p.last(), p.first().wrapping_sub(1) & max, p.last().wrapping_add(1) & max]);
    }
    Boundaries { v4, v6, ports }
}

fn key(rng: &mut Rng, b: &Boundaries) -> PacketKey {
    let af = if rng.index(4) == 0 { Af::Inet6 } else { Af::Inet };
    let pool = if af == Af::Inet { &b.v4 } else { &b.v6 };
    let addr = |rng: &mut Rng| -> u128 {
        let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let r = if af == Af::Inet { r & u128::from(u32::MAX) } else { r };
        if pool.is_empty() || rng.index(5) == 0 { r } else { pool[rng.index(pool.len())] }
    };
    let proto = [6u8, 6, 17, 17, 1, 58, 47][rng.index(7)];
    let port = |rng: &mut Rng| if rng.index(4) == 0 { rng.next_u64() as u16 } else { b.ports[rng.index(b.ports.len())] };
    PacketKey {
        af,
        dir: if rng.index(2) == 0 { Dir::In } else { Dir::Out },
        iface: rng.index(6) as u16,
        proto,
        src: addr(rng),
        dst: addr(rng),
        src_port: port(rng),
        dst_port: port(rng),
        tcp_flags: [0x02, 0x12, 0x10, 0x11, 0x04, rng.next_u64() as u8][rng.index(6)],
        len: 100,
        icmp_id: 0,
        ip_opts: false,
    }
}

fn check(seed: u64, rules: usize, engine: Engine, packets: usize) -> &'static str {
    let text = fw::testgen::ruleset(seed, rules);
    let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index).unwrap();
    let cl = Classifier::build_with(&rs, &BuildOptions { engine, ..BuildOptions::default() })
        .unwrap_or_else(|e| panic!("seed {seed}, {rules} rules, {engine:?}: {e}"));
    let b = boundaries(&rs);
    let mut rng = Rng(seed);
    for _ in 0..packets {
        let k = key(&mut rng, &b);
        let (want, got) = (evaluate(&rs, &k), cl.classify(&k));
        assert_eq!(got, want, "seed {seed}, {rules} rules, engine {}: {k:?}\nrules:\n{text}", cl.stats().engine);
    }
    cl.stats().engine
}

fn sets(default: u64) -> u64 {
    std::env::var("FW_REALISTIC_SETS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

#[test]
fn small_realistic_sets_match_the_reference_with_each_engine() {
    for seed in 0..sets(60) {
        let rules = 1 + (seed as usize * 7) % 60;
        for engine in [Engine::Auto, Engine::Tree] {
            check(seed, rules, engine, 3000);
        }
        // RFC alone, where it fits its default budgets.
        let text = fw::testgen::ruleset(seed, rules);
        let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index).unwrap();
        if Classifier::build_with(&rs, &BuildOptions { engine: Engine::Rfc, ..BuildOptions::default() }).is_ok() {
            check(seed, rules, Engine::Rfc, 3000);
        }
    }
}

#[test]
fn large_realistic_sets_match_the_reference() {
    let mut engines = Vec::new();
    for seed in 0..sets(4) {
        for rules in [200, 1000] {
            engines.push(check(1000 + seed, rules, Engine::Auto, 20_000));
        }
    }
    eprintln!("engines used: {engines:?}");
}

/// RFC's worst case (every rule constrains every field, overlapping values) is never
/// refused: a tiny RFC budget falls back to the tree, which agrees with the reference.
#[test]
fn over_the_rfc_budgets_the_tree_takes_over() {
    let text = fw::testgen::ruleset(77, 300);
    let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index).unwrap();
    let opts = BuildOptions { memory_budget: 1 << 16, ..BuildOptions::default() };
    let cl = Classifier::build_with(&rs, &opts).unwrap();
    assert_eq!(cl.stats().engine, "tree");
    let why = cl.stats().rfc_gave_up.clone().unwrap();
    assert!(why.contains("memory budget") || why.contains("class pairs"), "{why}");
    let e = Classifier::build_with(&rs, &BuildOptions { engine: Engine::Rfc, ..opts }).unwrap_err();
    assert!(e.to_string().contains("memory budget of 0 MiB"), "{e}");
    let b = boundaries(&rs);
    let mut rng = Rng(5);
    for _ in 0..20_000 {
        let k = key(&mut rng, &b);
        assert_eq!(cl.classify(&k), evaluate(&rs, &k), "{k:?}");
    }
}
