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
use fw::testgen::{Boundaries, Rng, boundaries};

fn key(rng: &mut Rng, b: &Boundaries) -> PacketKey {
    let af = if rng.index(4) == 0 { Af::Inet6 } else { Af::Inet };
    let pool = if af == Af::Inet { &b.v4 } else { &b.v6 };
    let addr = |rng: &mut Rng| -> u128 {
        let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let r = if af == Af::Inet { r & u128::from(u32::MAX) } else { r };
        if pool.is_empty() || rng.index(5) == 0 { r } else { pool[rng.index(pool.len())] }
    };
    let proto = [6u8, 6, 17, 17, 1, 58, 47][rng.index(7)];
    let port = |rng: &mut Rng| {
        if rng.index(4) == 0 { rng.next_u64() as u16 } else { b.ports[rng.index(b.ports.len())] }
    };
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
        route: 0,
        tag: 0,
    }
}

fn check(seed: u64, rules: usize, engine: Engine, packets: usize) -> &'static str {
    let text = fw::testgen::ruleset(seed, rules);
    let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index).unwrap();
    // Odd seeds: second leaf filters whatever the size (by default only from 2048 rules).
    let leaf_pairs_from = if seed % 2 == 1 { 0 } else { fw::classifier::DEFAULT_LEAF_PAIRS_FROM };
    let cl = Classifier::build_with(
        &rs,
        &BuildOptions { engine, leaf_pairs_from, ..BuildOptions::default() },
    )
    .unwrap_or_else(|e| panic!("seed {seed}, {rules} rules, {engine:?}: {e}"));
    let b = boundaries(&rs);
    let mut rng = Rng(seed);
    for _ in 0..packets {
        let k = key(&mut rng, &b);
        let (want, got) = (evaluate(&rs, &k), cl.classify(&k));
        assert_eq!(
            got,
            want,
            "seed {seed}, {rules} rules, engine {}: {k:?}\nrules:\n{text}",
            cl.stats().engine
        );
    }
    cl.stats().engine
}

/// [`check`] on [`fw::testgen::ruleset_tagged`], packets carrying tags `T0`..`T3` or none.
fn check_tagged(seed: u64, rules: usize, engine: Engine, packets: usize) {
    let text = fw::testgen::ruleset_tagged(seed, rules);
    let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let cl =
        Classifier::build_with(&rs, &BuildOptions { engine, ..BuildOptions::default() }).unwrap();
    let b = boundaries(&rs);
    let mut rng = Rng(seed);
    for _ in 0..packets {
        let mut k = key(&mut rng, &b);
        k.tag = rng.below(rs.tags.len() as u64 + 2) as u8;
        let (want, got) = (evaluate(&rs, &k), cl.classify(&k));
        assert_eq!(
            got,
            want,
            "seed {seed}, {rules} rules, engine {}: {k:?}\nrules:\n{text}",
            cl.stats().engine
        );
    }
}

#[test]
fn tagged_realistic_sets_match_the_reference() {
    for seed in 0..sets(30) {
        let rules = 1 + (seed as usize * 11) % 80;
        for engine in [Engine::Auto, Engine::Tree] {
            check_tagged(seed, rules, engine, 2000);
        }
    }
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
        if Classifier::build_with(
            &rs,
            &BuildOptions { engine: Engine::Rfc, ..BuildOptions::default() },
        )
        .is_ok()
        {
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

/// One pass rule of [`services`], as packets aimed at it are made.
struct Service {
    v6: bool,
    src: u128,
    dst: u128,
    ports: Vec<u16>,
    iface: u16,
    proto: u8,
}

/// A rule set shaped like a firewall's services: `block all`, then passes from networks to
/// networks on ports (one, a list spread over the port space, or a short range), IPv4 and
/// IPv6: the tree's leaves are full of rules that differ by port and prefix, the shape
/// that gets leaf filters (`classifier::tree::filter`).
fn services(seed: u64, n: usize) -> (String, Vec<Service>) {
    let mut rng = Rng(seed);
    let mut text = String::from("block all\n");
    let mut rules = Vec::new();
    for _ in 0..n {
        let v6 = rng.index(4) == 0;
        let net = |rng: &mut Rng| match v6 {
            true => 0x2001_0db8u128 << 96 | (rng.index(64) as u128) << 80,
            false => {
                u128::from(10u32 << 24 | (rng.index(8) as u32) << 16 | (rng.index(256) as u32) << 8)
            }
        };
        let (src, dst) = (net(&mut rng), net(&mut rng));
        let text_of = |a: u128| match v6 {
            true => format!("{}/48", std::net::Ipv6Addr::from(a)),
            false => format!("{}/24", std::net::Ipv4Addr::from(a as u32)),
        };
        let p = 1 + rng.index(60_000) as u16;
        let (ports, list) = match rng.index(3) {
            0 => (p.to_string(), vec![p]),
            1 => (format!("{{ {p} {} {} }}", p + 1024, p + 4096), vec![p, p + 1024, p + 4096]),
            _ => {
                let end = p + rng.index(40) as u16;
                (format!("{p}:{end}"), (p..=end).collect())
            }
        };
        let quick = if rng.index(3) == 0 { "quick " } else { "" };
        let proto = [6u8, 17][rng.index(2)];
        let iface = rng.index(4) as u16;
        let af = if v6 { "inet6" } else { "inet" };
        let name = if proto == 6 { "tcp" } else { "udp" };
        text += &format!(
            "pass in {quick}on lr-g{iface} {af} proto {name} from {} to {} port {ports}\n",
            text_of(src),
            text_of(dst)
        );
        rules.push(Service { v6, src, dst, ports: list, iface, proto });
    }
    (text, rules)
}

/// A packet aimed at a random rule of `rules`: inside its networks, on one of its ports or
/// next to one, its interface and protocol most of the time.
fn aimed(rng: &mut Rng, rules: &[Service]) -> PacketKey {
    let r = &rules[rng.index(rules.len())];
    let host = |rng: &mut Rng, net: u128| {
        net | if r.v6 { u128::from(rng.next_u64()) } else { rng.index(256) as u128 }
    };
    let port = r.ports[rng.index(r.ports.len())].wrapping_add([0, 0, 0, 1, u16::MAX][rng.index(5)]);
    PacketKey {
        af: if r.v6 { Af::Inet6 } else { Af::Inet },
        dir: Dir::In,
        iface: if rng.index(5) == 0 { rng.index(4) as u16 } else { r.iface },
        proto: if rng.index(5) == 0 { 6 + 17 - r.proto } else { r.proto },
        src: host(rng, r.src),
        dst: host(rng, r.dst),
        src_port: rng.next_u64() as u16,
        dst_port: port,
        tcp_flags: 0x02,
        ..PacketKey::ZERO
    }
}

/// The tree with its leaf filters against the reference on rule sets of the services shape:
/// packets aimed at the rules (most match one) and others (most match none). Odd seeds
/// with second filters (by default only in sets of 2048 rules or more).
#[test]
fn services_shaped_sets_match_the_reference() {
    for seed in 0..sets(6) {
        let (text, services) = services(seed, 300 + 200 * seed as usize % 900);
        let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index).unwrap();
        let leaf_pairs_from =
            if seed % 2 == 1 { 0 } else { fw::classifier::DEFAULT_LEAF_PAIRS_FROM };
        let cl = Classifier::build_with(
            &rs,
            &BuildOptions { engine: Engine::Tree, leaf_pairs_from, ..BuildOptions::default() },
        )
        .unwrap();
        let stats = cl.stats().tree.clone().unwrap_or_default();
        assert!(stats.filtered > 0, "seed {seed}: no leaf has a filter");
        assert_eq!(
            stats.filtered_twice > 0,
            seed % 2 == 1,
            "seed {seed}: second filters where asked for only"
        );
        let b = boundaries(&rs);
        let mut rng = Rng(seed);
        let mut passed = 0;
        for n in 0..40_000 {
            let k = if n % 4 == 0 { key(&mut rng, &b) } else { aimed(&mut rng, &services) };
            let (want, got) = (evaluate(&rs, &k), cl.classify(&k));
            assert_eq!(got, want, "seed {seed}: {k:?}\nrules:\n{text}");
            passed += usize::from(want.rule.is_some_and(|r| r > 0));
        }
        assert!(passed > 10_000, "seed {seed}: only {passed} packets matched a pass rule");
    }
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

/// The tree's answer is the best priority over its four groups (narrow or wide source and
/// destination) and over the rules of each leaf, a leaf's scan stopping at a rule that
/// cannot beat the best already found: rules of all four groups over a few nested networks,
/// `quick` or not, so that most packets match rules of several groups, some with tables
/// too large to be copied into leaves; tree forced, against the reference.
#[test]
fn tree_priorities_across_groups_match_the_reference() {
    for seed in 0..sets(12) {
        let mut rng = Rng(9000 + seed);
        let mut text = String::from("table <big> {");
        for i in 0..40 {
            text.push_str(&format!(" 10.{}.{}.0/24", i % 4, 16 * (i / 4)));
        }
        text.push_str(" }\n");
        let narrow = [
            "10.0.0.0/24",
            "10.1.16.0/20",
            "10.2.0.7",
            "! 10.0.0.0/16",
            "<big>",
            "{ 10.3.0.0/16, !10.3.3.0/24 }",
        ];
        let wide = ["any", "10.0.0.0/8", "! 10.2.0.0/16", "! <big>"];
        for _ in 0..(60 + rng.index(200)) {
            let addr = |rng: &mut Rng| {
                if rng.index(2) == 0 {
                    narrow[rng.index(narrow.len())]
                } else {
                    wide[rng.index(wide.len())]
                }
            };
            let (src, dst) = (addr(&mut rng), addr(&mut rng));
            let action = if rng.index(2) == 0 { "pass" } else { "block" };
            let quick = if rng.index(4) == 0 { " quick" } else { "" };
            let port = ["", " port 80", " port { 22, 443 }", " port 1000:2000", " port != 53"]
                [rng.index(5)];
            text.push_str(&format!(
                "{action} in{quick} inet proto tcp from {src} to {dst}{port} no state\n"
            ));
        }
        let rs =
            fw::rules::parse(&text, Path::new("groups.conf"), &fw::testgen::iface_index).unwrap();
        let cl = Classifier::build_with(
            &rs,
            &BuildOptions { engine: Engine::Tree, ..BuildOptions::default() },
        )
        .unwrap();
        let b = boundaries(&rs);
        for _ in 0..20_000 {
            let mut k = key(&mut rng, &b);
            if rng.index(2) == 0 {
                // Inside the networks the rules name, inbound TCP: the packets that match most.
                let a = |rng: &mut Rng| {
                    0x0a00_0000 | (rng.index(4) as u128) << 16 | rng.next_u64() as u128 & 0xffff
                };
                k = PacketKey {
                    af: Af::Inet,
                    dir: Dir::In,
                    proto: 6,
                    src: a(&mut rng),
                    dst: a(&mut rng),
                    ..k
                };
            }
            assert_eq!(cl.classify(&k), evaluate(&rs, &k), "seed {seed}: {k:?}\nrules:\n{text}");
        }
    }
}
