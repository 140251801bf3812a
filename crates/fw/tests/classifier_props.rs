//! Classifier vs reference evaluator on random rule sets and boundary-biased random packets.
//!
//! Default: 200 rule sets x 10,000 packets = 2M packets. `FW_PROPTEST_PACKETS=N` sets the
//! total number of packets (e.g. 50000000), spread over more rule sets.

use fw::classifier::{BuildOptions, Classifier, Engine};
use fw::packet::{Af, Dir, PacketKey};
use fw::reference::evaluate;
use fw::rules::{
    Action, AddrItem, AddrMatch, AddrTarget, PortMatch, Prefix, Rule, RuleSet, StateMode, Table,
    TableEntry,
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

const PORTS: &[u16] = &[0, 1, 21, 22, 23, 53, 80, 443, 1000, 1023, 1024, 2000, 8080, 65534, 65535];
const PROTOS: &[u8] = &[6, 17, 1, 58, 47];

fn v4(a: [u8; 4], len: u8) -> Prefix {
    Prefix::new(Af::Inet, u32::from_be_bytes(a) as u128, len)
}

fn v6(s: &str, len: u8) -> Prefix {
    Prefix::new(Af::Inet6, u128::from(s.parse::<std::net::Ipv6Addr>().unwrap()), len)
}

fn universe() -> Vec<Prefix> {
    vec![
        v4([0, 0, 0, 0], 0),
        v4([0, 0, 0, 0], 1),
        v4([128, 0, 0, 0], 1),
        v4([10, 0, 0, 0], 8),
        v4([10, 1, 0, 0], 16),
        v4([10, 1, 2, 0], 24),
        v4([10, 1, 2, 128], 25),
        v4([10, 1, 2, 3], 32),
        v4([10, 1, 3, 0], 24),
        v4([192, 168, 0, 0], 16),
        v4([192, 168, 1, 0], 24),
        v4([192, 168, 1, 1], 32),
        v4([255, 255, 255, 255], 32),
        v4([0, 0, 0, 0], 32),
        v6("::", 0),
        v6("2001:db8::", 32),
        v6("2001:db8:1::", 48),
        v6("2001:db8:1::1", 128),
        v6("2001:db8:1:2::", 64),
        v6("fe80::", 10),
        v6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 128),
        v6("8000::", 1),
    ]
}

fn rand_prefix(rng: &mut Rng, uni: &[Prefix]) -> Prefix {
    let base = *rng.pick(uni);
    if rng.chance(60) {
        return base;
    }
    // A random sub- or super-prefix near a universe prefix.
    let bits = Prefix::bits(base.af);
    let len = (base.len as i32 + rng.below(17) as i32 - 8).clamp(0, bits as i32) as u8;
    let noise = if bits == 32 {
        rng.next() as u128 & 0xffff_ffff
    } else {
        (rng.next() as u128) << 64 | rng.next() as u128
    };
    let host = bits - base.len;
    let keep_mask = if host >= 128 { 0 } else { !((1u128 << host) - 1) };
    let addr = (base.addr & keep_mask) | (noise & !keep_mask);
    Prefix::new(base.af, addr, len)
}

fn rand_ports(rng: &mut Rng) -> PortMatch {
    let n = rng.below(3);
    let mut r = Vec::new();
    for _ in 0..n {
        let a = *rng.pick(PORTS);
        let b = if rng.chance(50) { a } else { *rng.pick(PORTS) };
        r.push((a.min(b), a.max(b)));
    }
    PortMatch::Ranges(r)
}

fn rand_addr(rng: &mut Rng, uni: &[Prefix], ntables: usize) -> AddrMatch {
    if rng.chance(35) {
        return AddrMatch::Any;
    }
    let n = 1 + rng.below(3) as usize;
    let items = (0..n)
        .map(|_| AddrItem {
            negated: rng.chance(25),
            target: if ntables > 0 && rng.chance(30) {
                AddrTarget::Table(rng.below(ntables as u64) as usize)
            } else {
                AddrTarget::Prefix(rand_prefix(rng, uni))
            },
        })
        .collect();
    AddrMatch::List(items)
}

fn rand_tables(rng: &mut Rng, uni: &[Prefix]) -> Vec<Table> {
    let mut tables = Vec::new();
    for t in 0..rng.below(4) {
        let n = 1 + rng.below(10);
        let entries = (0..n)
            .map(|_| TableEntry { negated: rng.chance(20), prefix: rand_prefix(rng, uni) })
            .collect();
        tables.push(Table { name: format!("t{t}"), entries, constant: false });
    }
    tables
}

fn rand_protos(rng: &mut Rng) -> Vec<u8> {
    match rng.below(10) {
        0..=3 => vec![],
        4..=6 => vec![*rng.pick(PROTOS)],
        7 => vec![6, 17],
        _ => {
            let mut v = vec![*rng.pick(PROTOS), *rng.pick(PROTOS)];
            v.sort();
            v.dedup();
            v
        }
    }
}

/// Source and destination ports: only for rules on TCP or UDP alone.
fn rand_port_matches(rng: &mut Rng, tcpudp: bool) -> (PortMatch, PortMatch) {
    if tcpudp {
        (
            if rng.chance(30) { rand_ports(rng) } else { PortMatch::Any },
            if rng.chance(50) { rand_ports(rng) } else { PortMatch::Any },
        )
    } else {
        (PortMatch::Any, PortMatch::Any)
    }
}

/// ICMP types and code: only for rules on ICMP or ICMPv6 alone.
fn rand_icmp(rng: &mut Rng, icmp: bool) -> (Vec<u8>, Option<u8>) {
    if icmp && rng.chance(40) {
        (
            (0..1 + rng.below(2)).map(|_| *rng.pick(&[0u8, 3, 8, 128, 129])).collect(),
            if rng.chance(40) { Some(*rng.pick(&[0u8, 1, 3])) } else { None },
        )
    } else {
        (Vec::new(), None)
    }
}

fn rand_keep_state(rng: &mut Rng, action: Action) -> StateMode {
    if action == Action::Pass {
        *rng.pick(&[StateMode::Keep, StateMode::Keep, StateMode::None, StateMode::KeepSloppy])
    } else {
        StateMode::None
    }
}

fn rand_flags(rng: &mut Rng) -> Option<(u8, u8)> {
    match rng.below(10) {
        0..=3 => None,
        4..=7 => Some((0x02, 0x12)),
        _ => {
            let mask = (rng.next() as u8) | 1;
            Some((rng.next() as u8 & mask, mask))
        }
    }
}

/// A random rule on line `line`, referring to tables below `ntables`.
fn rand_rule(rng: &mut Rng, uni: &[Prefix], ntables: usize, line: usize) -> Rule {
    let action = if rng.chance(50) { Action::Pass } else { Action::Block };
    let protos = rand_protos(rng);
    let tcpudp = !protos.is_empty() && protos.iter().all(|p| *p == 6 || *p == 17);
    let icmp = protos == [1] || protos == [58];
    let (src_ports, dst_ports) = rand_port_matches(rng, tcpudp);
    let (icmp_types, icmp_code) = rand_icmp(rng, icmp);
    let keep_state = rand_keep_state(rng, action);
    let flags = rand_flags(rng);
    // The fields draw in the order they are written.
    Rule {
        action,
        block_return: None,
        dir: *rng.pick(&[None, None, Some(Dir::In), Some(Dir::Out)]),
        quick: rng.chance(25),
        ifaces: match rng.below(10) {
            0..=1 => vec![rng.below(4) as u16],
            2 => vec![rng.below(4) as u16, rng.below(4) as u16],
            _ => Vec::new(),
        },
        iface_neg: rng.chance(20),
        af: *rng.pick(&[None, None, None, Some(Af::Inet), Some(Af::Inet6)]),
        protos,
        src: rand_addr(rng, uni, ntables),
        src_ports,
        dst: rand_addr(rng, uni, ntables),
        dst_ports,
        icmp_types,
        icmp_code,
        flags,
        route_need: 0,
        route_refuse: 0,
        keep_state,
        max_states: None,
        src_track: None,
        state_policy: None,
        allow_opts: rng.chance(20),
        label: None,
        ridentifier: None,
        state_timeouts: Vec::new(),
        state_adaptive: None,
        tag: None,
        tagged: None,
        log: Default::default(),
        route: None,
        line,
    }
}

fn rand_ruleset(rng: &mut Rng, uni: &[Prefix]) -> RuleSet {
    let mut rs = RuleSet { tables: rand_tables(rng, uni), ..RuleSet::default() };
    let cap = if rng.chance(20) { 120 } else { 30 };
    let nrules = 1 + rng.below(cap) as usize;
    for i in 0..nrules {
        let rule = rand_rule(rng, uni, rs.tables.len(), i + 1);
        rs.rules.push(rule);
    }
    rs
}

/// Prefixes used anywhere in the rule set (for boundary-biased addresses).
fn used_prefixes(rs: &RuleSet) -> Vec<Prefix> {
    let mut v = Vec::new();
    for t in &rs.tables {
        v.extend(t.entries.iter().map(|e| e.prefix));
    }
    for r in &rs.rules {
        for m in [&r.src, &r.dst] {
            if let AddrMatch::List(items) = m {
                for it in items {
                    if let AddrTarget::Prefix(p) = it.target {
                        v.push(p);
                    }
                }
            }
        }
    }
    v
}

fn rand_addr_in(rng: &mut Rng, af: Af, used: &[Prefix]) -> u128 {
    let max = if af == Af::Inet { 0xffff_ffffu128 } else { u128::MAX };
    let cands: Vec<&Prefix> = used.iter().filter(|p| p.af == af).collect();
    if cands.is_empty() || rng.chance(20) {
        let r = (rng.next() as u128) << 64 | rng.next() as u128;
        return r & max;
    }
    let p = *rng.pick(&cands);
    match rng.below(5) {
        0 => p.first(),
        1 => p.last(),
        2 => p.first().wrapping_sub(1) & max,
        3 => p.last().wrapping_add(1) & max,
        _ => {
            let r = (rng.next() as u128) << 64 | rng.next() as u128;
            let span = p.last() - p.first();
            p.first() + if span == u128::MAX { r } else { r % (span + 1) }
        }
    }
}

fn rand_port(rng: &mut Rng) -> u16 {
    match rng.below(4) {
        0 => rng.next() as u16,
        1 => rng.pick(PORTS).wrapping_add(1),
        2 => rng.pick(PORTS).wrapping_sub(1),
        _ => *rng.pick(PORTS),
    }
}

fn rand_key(rng: &mut Rng, used: &[Prefix]) -> PacketKey {
    let af = if rng.chance(60) { Af::Inet } else { Af::Inet6 };
    let proto = if rng.chance(85) { *rng.pick(PROTOS) } else { rng.next() as u8 };
    let tcp_flags = match rng.below(5) {
        0 => 0x02,
        1 => 0x12,
        2 => 0x10,
        _ => rng.next() as u8,
    };
    PacketKey {
        af,
        dir: if rng.chance(50) { Dir::In } else { Dir::Out },
        iface: if rng.chance(90) { rng.below(5) as u16 } else { rng.next() as u16 },
        proto,
        src: rand_addr_in(rng, af, used),
        dst: rand_addr_in(rng, af, used),
        src_port: rand_port(rng),
        dst_port: rand_port(rng),
        tcp_flags,
        len: 100,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

/// pf's `no-route` / `urpf-failed` hosts on some rules (`from [!] no-route`, ...): each
/// rule gets, with `rng`, bits it needs or refuses.
fn add_route_hosts(rng: &mut Rng, rs: &mut RuleSet) {
    for r in &mut rs.rules {
        if rng.chance(20) {
            let bit = 1u8 << rng.below(3);
            if rng.chance(70) {
                r.route_need |= bit;
            } else {
                r.route_refuse |= bit;
            }
        }
    }
}

/// pf's `tag` and `tagged` on some rules (ids 1-3), as the parser accepts them: a rule that
/// tags is inbound, and a `tagged` rule after one is outbound (a tag set and tested in one
/// pass is refused).
fn add_tags(rng: &mut Rng, rs: &mut RuleSet) {
    rs.tags = vec!["A".into(), "B".into(), "C".into()];
    let mut tagging = false;
    for r in &mut rs.rules {
        if rng.chance(25) {
            r.tagged = Some((rng.chance(30), 1 + rng.below(3) as u8));
            if tagging {
                r.dir = Some(Dir::Out);
            }
        }
        if rng.chance(25) && r.dir != Some(Dir::Out) {
            r.tag = Some(1 + rng.below(3) as u8);
            r.dir = Some(Dir::In);
            tagging = true;
        }
    }
}

fn check(seed: u64, packets: usize, opts: &BuildOptions) {
    let mut rng = Rng(seed);
    let uni = universe();
    let mut rs = rand_ruleset(&mut rng, &uni);
    // A third of the sets test route hosts, with their own generator so that the other
    // draws stay as they were.
    let mut route_rng = (seed % 3 == 2).then_some(Rng(seed ^ 0x005E_ED0F_0A7E));
    if let Some(r) = &mut route_rng {
        add_route_hosts(r, &mut rs);
    }
    // Half the sets tag, likewise.
    let mut tag_rng = (seed % 2 == 1).then_some(Rng(seed ^ 0x7A6_7A6));
    if let Some(r) = &mut tag_rng {
        add_tags(r, &mut rs);
    }
    let cl = Classifier::build_with(&rs, opts)
        .unwrap_or_else(|e| panic!("seed {seed}: build failed: {e}"));
    let used = used_prefixes(&rs);
    for _ in 0..packets {
        let mut key = rand_key(&mut rng, &used);
        if let Some(r) = &mut route_rng {
            key.route = r.below(8) as u8;
        }
        if let Some(r) = &mut tag_rng {
            key.tag = r.below(5) as u8;
        }
        let want = evaluate(&rs, &key);
        let got = cl.classify(&key);
        if want != got {
            panic!(
                "seed {seed}: mismatch for {key:?}\nreference {want:?}\nclassifier {got:?}\nrules: {:#?}\ntables: {:#?}",
                rs.rules, rs.tables
            );
        }
    }
}

#[test]
fn classifier_matches_reference() {
    let total: usize =
        std::env::var("FW_PROPTEST_PACKETS").ok().and_then(|s| s.parse().ok()).unwrap_or(2_000_000);
    let per_set = 10_000;
    let sets = total.div_ceil(per_set).max(1);
    let t = std::time::Instant::now();
    for s in 0..sets as u64 {
        let opts = if s % 16 == 7 {
            // Exercise the LPM lookups (and host maps) on small sets too.
            BuildOptions {
                lpm_threshold: 0,
                host_map_threshold: (s as usize / 16) % 2,
                ..BuildOptions::default()
            }
        } else if s % 4 == 1 {
            // The decision tree on the same sets, every other one with second leaf filters
            // (by default only in sets of 2048 rules or more).
            let leaf_pairs_from =
                if s % 8 == 1 { 0 } else { fw::classifier::DEFAULT_LEAF_PAIRS_FROM };
            BuildOptions { engine: Engine::Tree, leaf_pairs_from, ..BuildOptions::default() }
        } else {
            BuildOptions::default()
        };
        check(0xF1_0000 + s, per_set, &opts);
    }
    eprintln!("{} rule sets x {per_set} packets compared in {:?}", sets, t.elapsed());
}

/// Hundreds of random rules from the same small universe: every field constrained at random,
/// dense nesting, close to RFC's worst case (large cross products).
#[test]
fn classifier_matches_reference_large_sets() {
    for s in 0..4u64 {
        let mut rng = Rng(0xBEEF + s);
        let uni = universe();
        let mut rs = rand_ruleset(&mut rng, &uni);
        let target: usize =
            std::env::var("FW_LARGE").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
        while rs.rules.len() < target {
            let more = rand_ruleset(&mut rng, &uni);
            let base = rs.rules.len();
            for mut r in more.rules {
                // Table references must stay valid: drop them.
                for m in [&mut r.src, &mut r.dst] {
                    if let AddrMatch::List(items) = m {
                        items.retain(|i| matches!(i.target, AddrTarget::Prefix(_)));
                        if items.is_empty() {
                            *m = AddrMatch::Any;
                        }
                    }
                }
                r.line = base + 1;
                rs.rules.push(r);
            }
        }
        let t = std::time::Instant::now();
        let engine = if s % 2 == 0 { Engine::Auto } else { Engine::Tree };
        let cl = Classifier::build_with(&rs, &BuildOptions { engine, ..BuildOptions::default() })
            .unwrap_or_else(|e| panic!("seed {s}: {e}"));
        eprintln!(
            "{} rules: built in {:?}, {} KiB, {:?}",
            rs.rules.len(),
            t.elapsed(),
            cl.memory_bytes() >> 10,
            cl.stats()
        );
        let used = used_prefixes(&rs);
        for _ in 0..20_000 {
            let key = rand_key(&mut rng, &used);
            assert_eq!(cl.classify(&key), evaluate(&rs, &key), "seed {s} key {key:?}");
        }
    }
}

/// Over the memory budget: with RFC alone a clear error naming the budget, not an abort;
/// by default the tree takes over.
#[test]
fn budget_exceeded_is_a_clear_error() {
    let mut rng = Rng(0xB0D6E7);
    let uni = universe();
    let mut rs = rand_ruleset(&mut rng, &uni);
    while rs.rules.len() < 100 {
        let more = rand_ruleset(&mut rng, &uni);
        rs.rules.extend(more.rules.into_iter().filter(|r| {
            [&r.src, &r.dst].iter().all(|m| match m {
                AddrMatch::Any => true,
                AddrMatch::List(l) => l.iter().all(|i| matches!(i.target, AddrTarget::Prefix(_))),
            })
        }));
    }
    let opts =
        BuildOptions { memory_budget: 256 << 10, engine: Engine::Rfc, ..BuildOptions::default() };
    let e = Classifier::build_with(&rs, &opts).unwrap_err().to_string();
    let auto = Classifier::build_with(&rs, &BuildOptions { engine: Engine::Auto, ..opts }).unwrap();
    assert_eq!(auto.stats().engine, "tree");
    assert!(e.contains("memory budget of 0 MiB (262144 bytes)"), "{e}");
    assert!(Classifier::build(&rs).is_ok());
}
