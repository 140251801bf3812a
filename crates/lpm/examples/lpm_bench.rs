//! Micro benchmark (no criterion): builds a 1M-prefix IPv4 table and a 200k-prefix IPv6 table
//! with a realistic length mix and reports ns per lookup, single and batched, for random
//! addresses (cache- and TLB-missing) and for a 2000-address working set (cache-resident).
//!
//! `cargo run --release --example lpm_bench`

#[path = "../tests/lpm/data.rs"]
mod data;

use std::hint::black_box;
use std::time::Instant;

use data::{Rng, near4, near6, realistic_v4, realistic_v6};
use lpm::{Ipv4Lpm, Ipv6Lpm, NextHop, Reader};

const BATCH: usize = 32; // the dataplane's burst size
const LOOKUPS: usize = 1 << 24;

fn report(what: &str, n: usize, t: Instant, sink: u64) {
    let ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
    println!("  {what:<44} {ns:6.2} ns/lookup  ({:5.1} Mlookup/s)  [{sink:x}]", 1e3 / ns);
}

fn bench<A: Copy>(
    name: &str,
    addrs: &[A],
    single: impl Fn(A) -> Option<NextHop>,
    batch: impl Fn(&[A], &mut [Option<NextHop>]),
    reader: &Reader,
) {
    let rounds = LOOKUPS.div_ceil(addrs.len());
    let n = rounds * addrs.len();
    let t = Instant::now();
    let mut sink = 0u64;
    for _ in 0..rounds {
        for &a in addrs {
            sink = sink.wrapping_add(single(black_box(a)).unwrap_or(7) as u64);
        }
    }
    report(&format!("{name}, single"), n, t, sink);
    let mut out = [None; BATCH];
    for quiesce in [false, true] {
        let t = Instant::now();
        let mut sink = 0u64;
        for _ in 0..rounds {
            for chunk in addrs.chunks(BATCH) {
                batch(black_box(chunk), &mut out);
                sink = sink.wrapping_add(out[0].unwrap_or(7) as u64);
                if quiesce {
                    reader.quiescent();
                }
            }
        }
        let label = if quiesce { "batched 32 + quiescent()" } else { "batched 32" };
        report(&format!("{name}, {label}"), n, t, sink);
    }
}

/// 1M IPv4 prefixes: random addresses, a working set and addresses under /25-/32 prefixes.
fn bench_v4(rng: &mut Rng) {
    let prefixes = realistic_v4(rng, 1_000_000);
    let t = Instant::now();
    let v4 = Ipv4Lpm::new();
    for &(p, len, nh) in &prefixes {
        v4.insert(p, len, nh).unwrap();
    }
    println!(
        "IPv4: {} prefixes inserted in {:.2?}; memory in use {:.1} MiB (reserved {:.0} MiB); {:?}",
        v4.len(),
        t.elapsed(),
        v4.memory_bytes() as f64 / (1 << 20) as f64,
        v4.reserved_bytes() as f64 / (1 << 20) as f64,
        v4.tbl8_stats()
    );
    let reader = v4.reader();
    let random: Vec<u32> = (0..1 << 22).map(|_| rng.u32()).collect();
    let ext = random.iter().filter(|&&a| v4.lookup(a).is_some()).count();
    println!("  random addresses: {:.1}% routed", ext as f64 * 100.0 / random.len() as f64);
    bench("random addresses", &random, |a| v4.lookup(a), |a, o| v4.lookup_batch(a, o), &reader);
    let ws: Vec<u32> = (0..2000)
        .map(|_| {
            let (p, len, _) = prefixes[rng.below(prefixes.len() as u64) as usize];
            near4(rng, p, len)
        })
        .collect();
    bench("2000-address working set", &ws, |a| v4.lookup(a), |a, o| v4.lookup_batch(a, o), &reader);
    let long: Vec<u32> =
        prefixes.iter().filter(|p| p.1 > 24).map(|&(p, len, _)| near4(rng, p, len)).collect();
    bench(
        "random /25-/32 (two loads)",
        &long,
        |a| v4.lookup(a),
        |a, o| v4.lookup_batch(a, o),
        &reader,
    );
    drop((reader, v4));
}

/// 200k IPv6 prefixes: routed random addresses and a working set.
fn bench_v6(rng: &mut Rng) {
    let prefixes = realistic_v6(rng, 200_000);
    let t = Instant::now();
    let v6 = Ipv6Lpm::new();
    for &(p, len, nh) in &prefixes {
        v6.insert(p, len, nh).unwrap();
    }
    println!(
        "IPv6: {} prefixes inserted in {:.2?}; memory in use {:.1} MiB (reserved {:.0} MiB); {:?}",
        v6.len(),
        t.elapsed(),
        v6.memory_bytes() as f64 / (1 << 20) as f64,
        v6.reserved_bytes() as f64 / (1 << 20) as f64,
        v6.tbl8_stats()
    );
    let reader = v6.reader();
    let random: Vec<u128> = (0..1 << 22)
        .map(|_| {
            let (p, len, _) = prefixes[rng.below(prefixes.len() as u64) as usize];
            near6(rng, p, len)
        })
        .collect();
    bench(
        "random routed addresses",
        &random,
        |a| v6.lookup(a),
        |a, o| v6.lookup_batch(a, o),
        &reader,
    );
    bench(
        "2000-address working set",
        &random[..2000],
        |a| v6.lookup(a),
        |a, o| v6.lookup_batch(a, o),
        &reader,
    );
}

fn main() {
    let mut rng = Rng(0xbe7c_0001);
    bench_v4(&mut rng);
    bench_v6(&mut rng);
}
