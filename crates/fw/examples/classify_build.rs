//! Compile time and size of the classifier on generated realistic rule sets
//! ([`fw::testgen`]): `cargo run --release -p fw --example classify_build -- N [SEED]`
//! (`uN`: N uniform rules instead, as `linerate bench --rules N` has).
//! Peak memory: run it under `/usr/bin/time -v`. `FW_ENGINE=rfc|tree` forces an engine.

use std::path::Path;
use std::time::Instant;

use fw::classifier::{BuildOptions, Classifier, Engine};

fn main() {
    let mut args = std::env::args().skip(1);
    let arg = args.next().unwrap_or_else(|| "1000".into());
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    // `uN`: the bench's uniform rules (N host pairs, then `pass all`).
    let (n, text) = match arg.strip_prefix('u') {
        Some(n) => {
            let n: usize = n.parse().expect("a rule count");
            (n, fw::testgen::uniform(n))
        }
        None => {
            let n: usize = arg.parse().expect("a rule count");
            (n, fw::testgen::ruleset(seed, n))
        }
    };
    let t = Instant::now();
    let rs = fw::rules::parse(&text, Path::new("gen.conf"), &fw::testgen::iface_index).expect("generated rules parse");
    let parsed = t.elapsed();
    let t = Instant::now();
    let engine = match std::env::var("FW_ENGINE").as_deref() {
        Ok("rfc") => Engine::Rfc,
        Ok("tree") => Engine::Tree,
        _ => Engine::Auto,
    };
    match Classifier::build_with(&rs, &BuildOptions { engine, ..BuildOptions::default() }) {
        Ok(cl) => {
            // Bench-like packets: UDP from 198.18.10.0/24 to anywhere, port 2000, in on port 0.
            let mut x = 1u64;
            let keys: Vec<fw::packet::PacketKey> = (0..100_000u32)
                .map(|i| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    fw::packet::PacketKey { proto: 17, src: u128::from(0xc612_0a00 | (i & 255)), dst: u128::from((x >> 32) as u32), src_port: 1024 + (i % 1000) as u16, dst_port: 2000, ..fw::packet::PacketKey::ZERO }
                })
                .collect();
            let t = Instant::now();
            let mut acc = 0;
            for k in &keys {
                acc += std::hint::black_box(cl.classify(k)).rule.unwrap_or(0);
            }
            std::hint::black_box(acc);
            println!("bench-like packets: {:.1} ns/packet", t.elapsed().as_nanos() as f64 / keys.len() as f64);
            println!(
            "{n} rules (seed {seed}): parsed in {:.1} ms, compiled in {:.1} ms, {:.1} MiB; {:?}",
            parsed.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3,
            cl.memory_bytes() as f64 / (1 << 20) as f64,
            cl.stats()
        );
        }
        Err(e) => println!("{n} rules (seed {seed}): failed after {:.1} ms: {e}", t.elapsed().as_secs_f64() * 1e3),
    }
}
