//! Compile time and size of the classifier on generated realistic rule sets
//! ([`fw::testgen`]): `cargo run --release -p linerate-fw --example classify_build -- N [SEED]`
//! (`uN`: N uniform rules instead, as `linerate bench --rules N` has; `SHAPE:N`: N rules
//! of an adversarial shape, [`fw::testgen::adversarial`]).
//! Peak memory: run it under `/usr/bin/time -v`. `FW_ENGINE=rfc|tree` forces an engine.

use std::path::Path;
use std::time::Instant;

use fw::classifier::{BuildOptions, Classifier, Engine};

/// Bench-like packets: UDP from 198.18.10.0/24 to anywhere, port 2000, in on port 0 and out
/// on port 1.
fn bench_keys() -> Vec<fw::packet::PacketKey> {
    let mut x = 1u64;
    (0..4000u32)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (dir, iface) =
                if i % 2 == 0 { (fw::packet::Dir::In, 0) } else { (fw::packet::Dir::Out, 1) };
            fw::packet::PacketKey {
                proto: 17,
                dir,
                iface,
                src: u128::from(0xc612_0a00 | (i & 255)),
                dst: u128::from((x >> 32) as u32),
                src_port: 1024 + (i % 1000) as u16,
                dst_port: 2000,
                ..fw::packet::PacketKey::ZERO
            }
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let arg = args.next().unwrap_or_else(|| "1000".into());
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    // `uN`: the bench's uniform rules (N host pairs, then `pass all`).
    let (n, text) = match (arg.strip_prefix('u'), arg.split_once(':')) {
        (Some(n), _) => {
            let n: usize = n.parse().expect("a rule count");
            (n, fw::testgen::uniform(n))
        }
        (None, Some((shape, n))) => {
            let n: usize = n.parse().expect("a rule count");
            let text = fw::testgen::adversarial::ruleset(shape, seed, n);
            (n, text.unwrap_or_else(|| panic!("shapes: {:?}", fw::testgen::adversarial::SHAPES)))
        }
        (None, None) => {
            let n: usize = arg.parse().expect("a rule count");
            (n, fw::testgen::ruleset(seed, n))
        }
    };
    // `FW_NOT_BENCH=1`: only rules that no bench-like packet matches (as `linerate bench
    // --rule-shape realistic` keeps).
    let text = if std::env::var("FW_NOT_BENCH").is_ok() {
        let big = fw::testgen::ruleset(seed, 2 * n + 16);
        let rs = fw::rules::parse(&big, Path::new("gen.conf"), &fw::testgen::iface_index).unwrap();
        let keys = bench_keys();
        let keep: std::collections::HashSet<usize> = rs
            .rules
            .iter()
            .filter(|r| !keys.iter().any(|k| fw::reference::rule_matches(&rs, r, k)))
            .map(|r| r.line)
            .take(n)
            .collect();
        let mut out: String = big
            .lines()
            .enumerate()
            .filter(|(i, l)| l.starts_with("table") || keep.contains(&(i + 1)))
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        out.push_str("pass all no state\n");
        out
    } else {
        text
    };
    let t = Instant::now();
    let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index)
        .expect("generated rules parse");
    let parsed = t.elapsed();
    let t = Instant::now();
    let engine = match std::env::var("FW_ENGINE").as_deref() {
        Ok("rfc") => Engine::Rfc,
        Ok("tree") => Engine::Tree,
        _ => Engine::Auto,
    };
    match Classifier::build_with(&rs, &BuildOptions { engine, ..BuildOptions::default() }) {
        Ok(cl) => {
            let keys = bench_keys();
            let built = t.elapsed();
            let t = Instant::now();
            let mut acc = 0;
            for k in &keys {
                acc += std::hint::black_box(cl.classify(k)).rule.unwrap_or(0);
            }
            std::hint::black_box(acc);
            let per_packet = t.elapsed().as_nanos() as f64 / keys.len() as f64;
            println!(
                "{n} rules (seed {seed}): parsed in {:.1} ms, compiled in {:.1} ms, {:.1} MiB, bench-like packets {per_packet:.1} ns; {:?}",
                parsed.as_secs_f64() * 1e3,
                built.as_secs_f64() * 1e3,
                cl.memory_bytes() as f64 / (1 << 20) as f64,
                cl.stats()
            );
        }
        Err(e) => println!(
            "{n} rules (seed {seed}): failed after {:.1} ms: {e}",
            t.elapsed().as_secs_f64() * 1e3
        ),
    }
}
