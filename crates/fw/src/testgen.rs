//! Realistic random rule sets in pf syntax, for tests and benches: `ruleset(seed, n)` is the
//! text of a rule file with `n` rules, the same for the same seed.
//!
//! The mix is that of hand-written firewalls grown large: rules on a few interfaces, in and
//! out, mostly IPv4 with some IPv6, TCP and UDP to a few well-known ports, ICMP types,
//! addresses drawn from a pool of sites and subnets (so prefixes nest: /8, /16, /24 and hosts
//! of the same networks), negations (`! 10.0.0.0/8`), lists (`{ a, b, !c }`), tables
//! (`<t0>`, `! <t1>`, some with negated entries), port ranges (`a:b`, `><`, `<>`), `!=`, `<`,
//! `>`, `quick` and non-`quick`, `pass` and `block`, stateful and stateless.
//!
//! Interface names are [`IFACES`]; parse with [`iface_index`] as the resolver.

pub mod adversarial;

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::packet::Af;
use crate::rules::{AddrMatch, AddrTarget, PortMatch, Prefix, RuleSet};

/// The interfaces rules name (`on lr-g0` ...), in port-index order.
pub const IFACES: [&str; 4] = ["lr-g0", "lr-g1", "lr-g2", "lr-g3"];

/// The port index of a generated interface name.
pub fn iface_index(name: &str) -> Option<u16> {
    IFACES.iter().position(|i| *i == name).map(|i| i as u16)
}

/// Well-known ports rules pick from (most rules name one of these).
const PORTS: [u16; 16] =
    [22, 25, 53, 80, 110, 123, 143, 443, 465, 587, 993, 1194, 3306, 5432, 8080, 8443];

/// splitmix64: a seeded generator the generated sets and the tests that probe them share.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index below `n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// Picks from `(weight, value)` pairs.
    fn weighted<T: Copy>(&mut self, items: &[(u64, T)]) -> T {
        let total: u64 = items.iter().map(|i| i.0).sum();
        let mut x = self.below(total);
        for &(w, v) in items {
            if x < w {
                return v;
            }
            x -= w;
        }
        items[items.len() - 1].1
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fam {
    V4,
    V6,
}

/// The networks addresses are drawn from: per family, sites (/16, /48) holding subnets (/24,
/// /64), so that prefixes of different lengths nest as in real rule sets.
struct Pool {
    v4: Vec<u32>,
    v6: Vec<u128>,
}

impl Pool {
    fn new(rng: &mut Rng, rules: usize) -> Pool {
        let sites = 4 + rules / 200;
        let subnets = 16 + rules / 8;
        let v4_sites: Vec<u32> = (0..sites)
            .map(|i| match i % 4 {
                0 => 0x0a00_0000 | ((rng.below(256) as u32) << 16),
                1 => 0xc0a8_0000,
                2 => 0xac10_0000 | ((rng.below(16) as u32) << 16),
                _ => ((1 + rng.below(223) as u32) << 24) | ((rng.below(256) as u32) << 16),
            })
            .collect();
        let v6_sites: Vec<u128> = (0..sites)
            .map(|_| (0x2001_0db8u128 << 96) | (u128::from(rng.below(1 << 16) as u16) << 80))
            .collect();
        let v4 = (0..subnets)
            .map(|_| v4_sites[rng.below(sites as u64) as usize] | ((rng.below(256) as u32) << 8))
            .collect();
        let v6 = (0..subnets)
            .map(|_| {
                v6_sites[rng.below(sites as u64) as usize]
                    | (u128::from(rng.below(1 << 32) as u32) << 64)
            })
            .collect();
        Pool { v4, v6 }
    }

    /// A prefix near a random subnet, of a realistic length.
    fn prefix(&self, rng: &mut Rng, fam: Fam) -> String {
        match fam {
            Fam::V4 => {
                let base =
                    self.v4[rng.below(self.v4.len() as u64) as usize] | rng.below(256) as u32;
                let len = rng.weighted(&[
                    (3, 8u32),
                    (2, 12),
                    (10, 16),
                    (5, 20),
                    (35, 24),
                    (10, 28),
                    (35, 32),
                ]);
                let addr = if len == 0 { 0 } else { base & (u32::MAX << (32 - len)) };
                if len == 32 && rng.chance(50) {
                    Ipv4Addr::from(addr).to_string()
                } else {
                    format!("{}/{len}", Ipv4Addr::from(addr))
                }
            }
            Fam::V6 => {
                let base = self.v6[rng.below(self.v6.len() as u64) as usize]
                    | u128::from(rng.below(1 << 16));
                let len = rng.weighted(&[(5, 32u32), (20, 48), (10, 56), (40, 64), (25, 128)]);
                let addr = base & (u128::MAX << (128 - len));
                format!("{}/{len}", Ipv6Addr::from(addr))
            }
        }
    }
}

fn port(rng: &mut Rng) -> u16 {
    if rng.chance(80) {
        PORTS[rng.below(PORTS.len() as u64) as usize]
    } else {
        1 + rng.below(65534) as u16
    }
}

/// A `port ...` clause for the destination (`src`: for the source, mostly absent).
fn ports(rng: &mut Rng, src: bool) -> Option<String> {
    let absent = if src { 85 } else { 25 };
    if rng.chance(absent) {
        return None;
    }
    let (a, b) = (port(rng), port(rng));
    let (lo, hi) = (a.min(b), a.max(b).max(a.min(b) + 2));
    Some(match rng.weighted(&[(45, 0), (14, 1), (10, 2), (5, 3), (8, 4), (4, 5), (4, 6), (2, 7)]) {
        0 => format!("port {a}"),
        1 => {
            let n = 2 + rng.below(4);
            let items: Vec<String> = (0..n).map(|_| port(rng).to_string()).collect();
            format!("port {{ {} }}", items.join(", "))
        }
        2 => format!("port {lo}:{hi}"),
        3 => format!("port != {a}"),
        4 => format!(
            "port {} {}",
            ["<", "<=", ">", ">="][rng.below(4) as usize],
            if rng.chance(50) { 1024 } else { a }
        ),
        5 => format!("port {lo} >< {hi}"),
        6 => format!("port {lo} <> {hi}"),
        _ => format!("port {{ {lo}:{hi}, {a} }}"),
    })
}

/// The `from`/`to` address: `any`, a prefix, a negation, a list or a table.
fn address(rng: &mut Rng, pool: &Pool, fam: Option<Fam>, tables: usize, src: bool) -> String {
    let any = if src { 45 } else { 25 };
    let Some(fam) = fam else {
        // No family: only `any` and tables keep the rule meaningful for both.
        return if tables > 0 && rng.chance(40) {
            format!("<t{}>", rng.below(tables as u64))
        } else {
            "any".into()
        };
    };
    match rng.weighted(&[(any, 0), (40, 1), (6, 2), (10, 3), (7, 4), (2, 5)]) {
        0 => "any".into(),
        1 => pool.prefix(rng, fam),
        2 => format!("! {}", pool.prefix(rng, fam)),
        3 => {
            let n = 2 + rng.below(4);
            let items: Vec<String> = (0..n)
                .map(|i| {
                    let neg = i > 0 && rng.chance(15);
                    format!("{}{}", if neg { "!" } else { "" }, pool.prefix(rng, fam))
                })
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        4 if tables > 0 => format!("<t{}>", rng.below(tables as u64)),
        5 if tables > 0 => format!("! <t{}>", rng.below(tables as u64)),
        _ => pool.prefix(rng, fam),
    }
}

fn table(rng: &mut Rng, pool: &Pool, i: usize, rules: usize, out: &mut String) {
    let n = 4 + rng.below(8 + (rules / 20).min(400) as u64);
    let _ = write!(out, "table <t{i}> {{");
    for _ in 0..n {
        let fam = if rng.chance(80) { Fam::V4 } else { Fam::V6 };
        let neg = rng.chance(8);
        let _ = write!(out, " {}{}", if neg { "!" } else { "" }, pool.prefix(rng, fam));
    }
    out.push_str(" }\n");
}

fn rule(rng: &mut Rng, pool: &Pool, tables: usize, out: &mut String) {
    let pass = rng.chance(55);
    out.push_str(if pass { "pass" } else { "block" });
    match rng.weighted(&[(45, 0), (30, 1), (25, 2)]) {
        0 => out.push_str(" in"),
        1 => out.push_str(" out"),
        _ => {}
    }
    if rng.chance(35) {
        out.push_str(" quick");
    }
    on_clause(rng, out);
    let fam = rng.weighted(&[(65, Some(Fam::V4)), (30, Some(Fam::V6)), (5, None)]);
    match fam {
        Some(Fam::V4) if rng.chance(60) => out.push_str(" inet"),
        Some(Fam::V6) if rng.chance(60) => out.push_str(" inet6"),
        _ => {}
    }
    // 0 tcp, 1 udp, 2 tcp+udp, 3 icmp of the family, 4 any protocol.
    let proto = rng.weighted(&[(45, 0), (25, 1), (8, 2), (13, 3), (9, 4)]);
    let proto = if proto == 3 && fam.is_none() { 4 } else { proto };
    match proto {
        0 => out.push_str(" proto tcp"),
        1 => out.push_str(" proto udp"),
        2 => out.push_str(" proto { tcp, udp }"),
        3 => out.push_str(if fam == Some(Fam::V6) { " proto icmp6" } else { " proto icmp" }),
        _ => {}
    }
    let (src, dst) =
        (address(rng, pool, fam, tables, true), address(rng, pool, fam, tables, false));
    let with_ports = proto <= 2;
    let (sp, dp) = if with_ports { (ports(rng, true), ports(rng, false)) } else { (None, None) };
    if src == "any" && dst == "any" && sp.is_none() && dp.is_none() && rng.chance(50) {
        out.push_str(" all");
    } else {
        let _ = write!(out, " from {src}");
        if let Some(p) = sp {
            let _ = write!(out, " {p}");
        }
        let _ = write!(out, " to {dst}");
        if let Some(p) = dp {
            let _ = write!(out, " {p}");
        }
    }
    if proto == 3 && rng.chance(60) {
        icmp_type_clause(rng, fam, out);
    }
    if pass {
        match rng.weighted(&[(45, 0), (35, 1), (5, 2), (10, 3), (5, 4)]) {
            1 => out.push_str(" no state"),
            2 => out.push_str(" keep state (sloppy)"),
            3 => out.push_str(" flags any keep state"),
            4 => out.push_str(" flags S/SAFR keep state"),
            _ => {}
        }
    }
    out.push('\n');
}

/// `on IFACE`, `on { a, b }`, `on ! IFACE`, or none.
fn on_clause(rng: &mut Rng, out: &mut String) {
    let ifc = |rng: &mut Rng| IFACES[rng.below(IFACES.len() as u64) as usize];
    match rng.weighted(&[(55, 0), (8, 1), (5, 2), (32, 3)]) {
        0 => {
            let _ = write!(out, " on {}", ifc(rng));
        }
        1 => {
            let _ = write!(out, " on {{ {}, {} }}", ifc(rng), ifc(rng));
        }
        2 => {
            let _ = write!(out, " on ! {}", ifc(rng));
        }
        _ => {}
    }
}

/// `icmp-type` / `icmp6-type` (by the rule's family): one type, a list of two, or
/// `unreach` with a code.
fn icmp_type_clause(rng: &mut Rng, fam: Option<Fam>, out: &mut String) {
    let (kw, names): (&str, &[&str]) = if fam == Some(Fam::V6) {
        ("icmp6-type", &["echoreq", "echorep", "unreach", "toobig", "neighbrsol", "neighbradv"])
    } else {
        ("icmp-type", &["echoreq", "echorep", "unreach", "timex"])
    };
    let t = names[rng.below(names.len() as u64) as usize];
    if rng.chance(20) {
        let _ = write!(out, " {kw} {{ {t}, {} }}", names[rng.below(names.len() as u64) as usize]);
    } else if t == "unreach" && rng.chance(30) {
        let _ = write!(out, " {kw} {t} code {}", rng.below(4));
    } else {
        let _ = write!(out, " {kw} {t}");
    }
}

/// The text of a rule file with `rules` rules (and a few tables), deterministic in `seed`.
pub fn ruleset(seed: u64, rules: usize) -> String {
    let mut rng = Rng(seed ^ 0x005E_ED0F_F1A7);
    let pool = Pool::new(&mut rng, rules);
    let tables = (1 + rules / 800).min(6);
    let mut out = String::with_capacity(rules * 80 + tables * 400);
    let _ = writeln!(out, "# {rules} generated rules (fw::testgen, seed {seed})");
    for i in 0..tables {
        table(&mut rng, &pool, i, rules, &mut out);
    }
    for _ in 0..rules {
        rule(&mut rng, &pool, tables, &mut out);
    }
    out
}

/// [`ruleset`] with pf's tags (`T0`..`T3`) on some rules, drawn apart so that the rules are
/// otherwise the same: `tag` on inbound rules, `tagged` / `! tagged` on outbound ones (a tag
/// set and tested in one pass is refused by the parser).
pub fn ruleset_tagged(seed: u64, rules: usize) -> String {
    let mut rng = Rng(seed ^ 0x7A66_ED00);
    let mut out = String::new();
    for line in ruleset(seed, rules).lines() {
        out.push_str(line);
        let dir = line.split_whitespace().nth(1);
        if !line.starts_with('#') && !line.starts_with("table") && rng.chance(30) {
            let t = rng.below(4);
            match dir {
                Some("in") => {
                    let _ = write!(out, " tag T{t}");
                }
                Some("out") => {
                    let _ = write!(out, " {}tagged T{t}", if rng.chance(25) { "! " } else { "" });
                }
                _ => {}
            }
        }
        out.push('\n');
    }
    out
}

/// The uniform rules of `linerate bench --rules N`: `rules` distinct `block in quick proto
/// tcp from HOST to HOST port 22`, then `pass all no state`.
pub fn uniform(rules: usize) -> String {
    let mut t = String::with_capacity(rules * 70 + 20);
    for i in 0..rules {
        let _ = writeln!(
            t,
            "block in quick proto tcp from 10.{}.{}.{} to 10.200.0.1 port 22",
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255
        );
    }
    t.push_str("pass all no state\n");
    t
}

/// Addresses and ports where rules start or stop matching.
pub struct Boundaries {
    pub v4: Vec<u128>,
    pub v6: Vec<u128>,
    pub ports: Vec<u16>,
}

/// The first and last address of every prefix and table entry and their neighbours, the
/// ends of every port range and their neighbours, ICMP types: where packets of `rs` get
/// different verdicts (for property tests against the reference).
pub fn boundaries(rs: &RuleSet) -> Boundaries {
    let mut prefixes: Vec<Prefix> =
        rs.tables.iter().flat_map(|t| t.entries.iter().map(|e| e.prefix)).collect();
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
        v.extend([
            p.first(),
            p.last(),
            p.first().wrapping_sub(1) & max,
            p.last().wrapping_add(1) & max,
        ]);
    }
    Boundaries { v4, v6, ports }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_sets_parse_with_the_requested_rule_count() {
        for seed in 0..40 {
            for n in [1, 10, 100, 1000] {
                let text = ruleset(seed, n);
                let rs = crate::rules::parse(&text, std::path::Path::new("gen.conf"), &iface_index)
                    .unwrap_or_else(|e| panic!("seed {seed}, {n} rules: {e}\n{text}"));
                assert_eq!(rs.rules.len(), n);
            }
        }
        assert_eq!(ruleset(7, 50), ruleset(7, 50));
    }
}
