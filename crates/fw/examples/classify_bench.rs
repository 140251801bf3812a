//! ns/packet of `Classifier::classify` for 1, 1k and 100k non-matching rules + `pass all`,
//! for a rule on a 1M-entry table vs a 10-entry table, and for realistic generated rule
//! sets ([`fw::testgen`]) of 10 to 10,000 rules, on traffic aimed at their addresses; then
//! the same realistic sets through a [`VerdictCache`] (as a worker classifies), on 2,000
//! flows repeated (the cache hits) and on 1M distinct packets (it misses).
//!
//! `cargo run --release -p linerate-fw --example classify_bench` (single thread; run it once on a
//! quiet machine).

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Instant;

use fw::classifier::{Classifier, VerdictCache};
use fw::packet::{Af, Dir, PacketKey};
use fw::rules::{AddrMatch, AddrTarget, Prefix, RuleSet, Table, TableEntry, parse};

fn lcg(x: &mut u64) -> u32 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (*x >> 32) as u32
}

/// Traffic: random TCP SYNs, 64k distinct flows, addresses outside the rules' ranges.
fn traffic(n: usize, seed: u64) -> Vec<PacketKey> {
    let mut x = seed;
    (0..n)
        .map(|_| PacketKey {
            af: Af::Inet,
            dir: Dir::In,
            iface: 0,
            proto: 6,
            src: (0xac10_0000 | (lcg(&mut x) & 0xfffff)) as u128,
            dst: (0xcb00_7100 | (lcg(&mut x) & 0xff)) as u128,
            src_port: 1024 + (lcg(&mut x) % 60000) as u16,
            dst_port: [22u16, 80, 443, 8080][(lcg(&mut x) % 4) as usize],
            tcp_flags: 0x02,
            len: 60,
            icmp_id: 0,
            ip_opts: false,
            route: 0,
            tag: 0,
        })
        .collect()
}

/// One timed pass over `keys`: ns/packet.
fn pass(cl: &Classifier, keys: &[PacketKey]) -> f64 {
    let t = Instant::now();
    let mut acc = 0usize;
    for k in keys {
        acc += black_box(cl.classify(black_box(k))).rule.unwrap_or(0);
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / keys.len() as f64
}

/// Best of 7 rounds, the configurations interleaved within each round so that load from
/// other processes on a shared machine hits them alike.
fn measure(set: &[(&Classifier, &[PacketKey])]) -> Vec<f64> {
    let mut best = vec![f64::MAX; set.len()];
    for _ in 0..7 {
        for (i, (cl, keys)) in set.iter().enumerate() {
            best[i] = best[i].min(pass(cl, keys));
        }
    }
    best
}

/// One timed pass over `keys` through `cache`: ns/packet.
fn cached_pass(cl: &Classifier, cache: &mut VerdictCache, keys: &[PacketKey]) -> f64 {
    let t = Instant::now();
    let mut acc = 0usize;
    for k in keys {
        acc += black_box(cache.classify(cl, black_box(k))).rule.unwrap_or(0);
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / keys.len() as f64
}

/// The realistic sets through a verdict cache: per set, ns/packet on `hot` (2,000 flows, a
/// warm cache) and on `cold` (1M distinct packets), best of 7 interleaved rounds, with the
/// cache's hit share on the cold traffic.
fn cached(built: &[(&Classifier, &str)], hot: &[Vec<PacketKey>], cold: &[Vec<PacketKey>]) {
    let mut caches: Vec<VerdictCache> = built.iter().map(|_| VerdictCache::default()).collect();
    let (mut h, mut c) = (vec![f64::MAX; built.len()], vec![f64::MAX; built.len()]);
    let mut cold_hits = vec![0.0; built.len()];
    for _ in 0..7 {
        for (i, (cl, _)) in built.iter().enumerate() {
            h[i] = h[i].min(cached_pass(cl, &mut caches[i], &hot[i]));
            let before = caches[i].counters();
            c[i] = c[i].min(cached_pass(cl, &mut caches[i], &cold[i]));
            let after = caches[i].counters();
            let n = (after.hits + after.misses - before.hits - before.misses).max(1);
            cold_hits[i] = (after.hits - before.hits) as f64 / n as f64;
        }
    }
    println!("\nthrough the verdict cache (as a worker classifies; RFC sets bypass it)");
    println!(
        "{:<30} {:>22} {:>30}",
        "rule set", "2000 flows (hits)", "1M distinct packets (misses)"
    );
    for (i, (cl, name)) in built.iter().enumerate() {
        println!(
            "{:<30} {:>7.2} ns ({:>5.2}x 10) {:>9.2} ns ({:>5.2}x 10, {:.1}% hits) {}",
            name,
            h[i],
            h[i] / h[0],
            c[i],
            c[i] / c[0],
            100.0 * cold_hits[i],
            cl.stats().engine
        );
    }
}

/// `n` packets drawn from the first `flows` of `keys`.
fn repeat(keys: &[PacketKey], flows: usize, n: usize) -> Vec<PacketKey> {
    let mut x = 3u64;
    (0..n).map(|_| keys[lcg(&mut x) as usize % flows]).collect()
}

fn rules(n: u32) -> RuleSet {
    let mut text = String::new();
    for i in 0..n {
        let s = Ipv4Addr::from(0x0a00_0000 + i * 7);
        let d = Ipv4Addr::from(0xc0a8_0000 + i * 13);
        text.push_str(&format!(
            "block in quick proto tcp from {s}/32 to {d}/32 port {}\n",
            1 + i % 60000
        ));
    }
    text.push_str("pass all\n");
    parse(&text, Path::new("bench.conf"), &|_| None).unwrap()
}

fn table_rules(entries: usize) -> RuleSet {
    let mut x = 99u64;
    let mut t = Table { name: "t".into(), entries: Vec::new(), constant: false };
    for i in 0..entries {
        let len = if i % 10 == 0 { 24 } else { 32 };
        t.entries.push(TableEntry {
            negated: false,
            prefix: Prefix::new(Af::Inet, lcg(&mut x) as u128, len),
        });
    }
    let mut rs = parse(
        "table <t> { 192.0.2.0/24 }\nblock in quick from <t>\npass all\n",
        Path::new("t.conf"),
        &|_| None,
    )
    .unwrap();
    rs.tables[0] = t;
    rs
}

fn realistic(n: usize) -> RuleSet {
    parse(&fw::testgen::ruleset(1, n), Path::new("gen.conf"), &fw::testgen::iface_index).unwrap()
}

/// Traffic for a realistic set: addresses inside the rules' prefixes (70%) or anywhere,
/// TCP/UDP/ICMP, both directions, the generator's interfaces.
fn realistic_traffic(rs: &RuleSet, n: usize, seed: u64) -> Vec<PacketKey> {
    let prefixes: Vec<Prefix> = rs
        .rules
        .iter()
        .flat_map(|r| [&r.src, &r.dst])
        .filter_map(|m| match m {
            AddrMatch::List(l) => Some(l.iter().filter_map(|i| match i.target {
                AddrTarget::Prefix(p) => Some(p),
                AddrTarget::Table(_) => None,
            })),
            AddrMatch::Any => None,
        })
        .flatten()
        .collect();
    let mut x = seed;
    let addr = |x: &mut u64, af: Af| -> u128 {
        let r = (u128::from(lcg(x)) << 96)
            | (u128::from(lcg(x)) << 64)
            | (u128::from(lcg(x)) << 32)
            | u128::from(lcg(x));
        let cands: Vec<&Prefix> = prefixes.iter().filter(|p| p.af == af).collect();
        if cands.is_empty() || lcg(x) % 10 < 3 {
            return if af == Af::Inet { r & 0xffff_ffff } else { r };
        }
        let p = cands[lcg(x) as usize % cands.len()];
        p.first() + (r & (p.last() - p.first()))
    };
    (0..n)
        .map(|_| {
            let af = if lcg(&mut x).is_multiple_of(5) { Af::Inet6 } else { Af::Inet };
            let proto = [6u8, 6, 6, 17, 17, 1][lcg(&mut x) as usize % 6];
            let proto = if proto == 1 && af == Af::Inet6 { 58 } else { proto };
            PacketKey {
                af,
                dir: if lcg(&mut x).is_multiple_of(2) { Dir::In } else { Dir::Out },
                iface: (lcg(&mut x) % 4) as u16,
                proto,
                src: addr(&mut x, af),
                dst: addr(&mut x, af),
                src_port: 1024 + (lcg(&mut x) % 60000) as u16,
                dst_port: [22u16, 53, 80, 443, 8080, 3306][(lcg(&mut x) % 6) as usize],
                tcp_flags: [0x02u8, 0x10, 0x12][(lcg(&mut x) % 3) as usize],
                len: 60,
                icmp_id: 0,
                ip_opts: false,
                route: 0,
                tag: 0,
            }
        })
        .collect()
}

fn main() {
    let keys = traffic(1 << 20, 1);
    // Random sources over the whole space: ~5% fall into the 1M table's /24s.
    let mut x = 5u64;
    let tkeys: Vec<PacketKey> =
        keys.iter().map(|k| PacketKey { src: lcg(&mut x) as u128, ..*k }).collect();
    let real: Vec<(&str, RuleSet, Vec<PacketKey>)> = [
        (10, "realistic 10"),
        (100, "realistic 100"),
        (1_000, "realistic 1k"),
        (10_000, "realistic 10k"),
    ]
    .into_iter()
    .map(|(n, name)| {
        let rs = realistic(n);
        let keys = realistic_traffic(&rs, 1 << 20, 7);
        (name, rs, keys)
    })
    .collect();
    let mut built = Vec::new();
    for (name, rs, k) in [
        ("0 non-matching + pass all", rules(0), &keys),
        ("1k non-matching + pass all", rules(1_000), &keys),
        ("100k non-matching + pass all", rules(100_000), &keys),
        ("block from <10-entry table>", table_rules(10), &tkeys),
        ("block from <1M-entry table>", table_rules(1_000_000), &tkeys),
    ] {
        let t = Instant::now();
        let cl = Classifier::build(&rs).unwrap();
        built.push((name, t.elapsed(), cl, k));
    }
    for (name, rs, k) in &real {
        let t = Instant::now();
        let cl = Classifier::build(rs).unwrap();
        built.push((name, t.elapsed(), cl, k));
    }
    let set: Vec<(&Classifier, &[PacketKey])> =
        built.iter().map(|b| (&b.2, b.3.as_slice())).collect();
    let ns = measure(&set);
    println!("{:<30} {:>10} {:>10} {:>10}", "rule set", "build", "memory", "ns/packet");
    for (i, (name, bt, cl, _)) in built.iter().enumerate() {
        let rel = if i < 3 {
            format!("  ({:.2}x the 1-rule rate)", ns[0] / ns[i])
        } else if i >= 5 {
            format!(
                "  ({:.2}x the time of 10 realistic rules, {})",
                ns[i] / ns[5],
                cl.stats().engine
            )
        } else {
            String::new()
        };
        println!(
            "{:<30} {:>8.1}ms {:>7.1}MiB {:>10.2}{rel}",
            name,
            bt.as_secs_f64() * 1e3,
            cl.memory_bytes() as f64 / (1 << 20) as f64,
            ns[i]
        );
    }
    let real_built: Vec<(&Classifier, &str)> = built[5..].iter().map(|b| (&b.2, b.0)).collect();
    let hot: Vec<Vec<PacketKey>> = real.iter().map(|(_, _, k)| repeat(k, 2000, 1 << 20)).collect();
    let cold: Vec<Vec<PacketKey>> = real.iter().map(|(_, _, k)| k.clone()).collect();
    cached(&real_built, &hot, &cold);
}
