//! ns per state lookup (hit): 2000 active flows looked up round-robin in a table filled with K
//! states (K = 1, 100k, 1M, 10M; the table's limit is K, i.e. full, load factor 0.5 in the
//! index). Variants: UDP (pseudo-state update) and TCP (full window tracking, data one way /
//! ACK the other). Also 2000 missing keys round-robin.
//!
//! `cargo run --release -p linerate-fw --example state_bench [K...]`

use std::hint::black_box;
use std::time::Instant;

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{StateLookup, StateTable, StateVerdict, TcpSegment, Timeouts, tcp_flags::*};

fn filler(i: u64) -> PacketKey {
    PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface: 0,
        proto: proto::UDP,
        src: 0x0a00_0000 | (i >> 16) as u128,
        dst: 0xc0a8_0001,
        src_port: (i & 0xffff) as u16,
        dst_port: 53,
        tcp_flags: 0,
        len: 80,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

fn active(i: u64, p: u8) -> PacketKey {
    PacketKey {
        proto: p,
        src: 0xac10_0000 | i as u128,
        dst: 0x0808_0808,
        src_port: 40000,
        dst_port: 443,
        ..filler(0)
    }
}

fn rev(k: &PacketKey) -> PacketKey {
    PacketKey { src: k.dst, dst: k.src, src_port: k.dst_port, dst_port: k.src_port, ..*k }
}

fn seg(seq: u32, ack: u32, flags: u8, len: u16) -> TcpSegment {
    TcpSegment { seq, ack, win: 65535, flags, payload_len: len, wscale: None }
}

fn table(k: usize, a: usize) -> (StateTable, f64) {
    let t0 = Instant::now();
    let mut t = StateTable::new(k, Timeouts::default(), 0xfeed_beef);
    for i in 0..(k - a) as u64 {
        t.insert(&filler(i), 0, 0, None).unwrap();
    }
    (t, t0.elapsed().as_secs_f64())
}

const ACTIVE: usize = 2000;
const LOOKUPS: usize = 20_000_000;

/// The table sizes K from the command line, or the default set.
fn state_counts() -> Vec<usize> {
    let a: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    if a.is_empty() { vec![1, 100_000, 1_000_000, 10_000_000] } else { a }
}

/// The UDP figures for one table size.
struct UdpRow {
    hit_ns: f64,
    miss_ns: f64,
    fill_s: f64,
    mb: f64,
}

/// UDP hits on `a` active flows, alternating directions each round, then misses, in a table
/// of `k` states.
fn bench_udp(k: usize, a: usize, rounds: usize) -> UdpRow {
    let (mut t, fill_s) = table(k, a);
    let keys: Vec<_> = (0..a as u64).map(|i| active(i, proto::UDP)).collect();
    for key in &keys {
        t.insert(key, 1, 0, None).unwrap();
    }
    let rkeys: Vec<_> = keys.iter().map(rev).collect();
    let t0 = Instant::now();
    let mut hits = 0usize;
    for r in 0..rounds {
        let ks = if r & 1 == 0 { &keys } else { &rkeys };
        for key in ks {
            if let StateLookup::Hit { verdict: StateVerdict::Pass, .. } =
                t.lookup(black_box(key), None, 1)
            {
                hits += 1;
            }
        }
    }
    let hit_ns = t0.elapsed().as_nanos() as f64 / (rounds * a) as f64;
    assert_eq!(hits, rounds * a);
    let miss_ns = bench_misses(&mut t);
    let mb = t.memory_bytes() as f64 / 1e6;
    UdpRow { hit_ns, miss_ns, fill_s, mb }
}

/// ns per lookup of `ACTIVE` keys that are not in `t`.
fn bench_misses(t: &mut StateTable) -> f64 {
    let missing: Vec<_> = (0..ACTIVE as u64).map(|i| active(i + 1_000_000, proto::UDP)).collect();
    let t0 = Instant::now();
    let mut misses = 0usize;
    let mrounds = LOOKUPS / ACTIVE;
    for _ in 0..mrounds {
        for key in &missing {
            if t.lookup(black_box(key), None, 1) == StateLookup::Miss {
                misses += 1;
            }
        }
    }
    let miss_ns = t0.elapsed().as_nanos() as f64 / (mrounds * ACTIVE) as f64;
    assert_eq!(misses, mrounds * ACTIVE);
    miss_ns
}

/// TCP, established, full tracking: data A->B, ACK B->A. Returns ns per hit.
fn bench_tcp(k: usize, a: usize, rounds: usize) -> f64 {
    let (mut t, _) = table(k, a);
    let keys: Vec<_> = (0..a as u64).map(|i| active(i, proto::TCP)).collect();
    let rkeys: Vec<_> = keys.iter().map(rev).collect();
    let (isa, isb) = (1000u32, 900_000u32);
    for (key, rk) in keys.iter().zip(&rkeys) {
        t.insert(key, 1, 0, Some(&seg(isa, 0, SYN, 0))).unwrap();
        t.lookup(rk, Some(&seg(isb, isa + 1, SYN | ACK, 0)), 0);
        t.lookup(key, Some(&seg(isa + 1, isb + 1, ACK, 0)), 0);
    }
    let mut sa = vec![isa + 1; a];
    let t0 = Instant::now();
    let mut pass = 0usize;
    for r in 0..rounds {
        if r & 1 == 0 {
            for (i, key) in keys.iter().enumerate() {
                let s = seg(sa[i], isb + 1, ACK, 100);
                sa[i] = sa[i].wrapping_add(100);
                if let StateLookup::Hit { verdict: StateVerdict::Pass, .. } =
                    t.lookup(black_box(key), Some(&s), 1)
                {
                    pass += 1;
                }
            }
        } else {
            for (i, key) in rkeys.iter().enumerate() {
                let s = seg(isb + 1, sa[i], ACK, 0);
                if let StateLookup::Hit { verdict: StateVerdict::Pass, .. } =
                    t.lookup(black_box(key), Some(&s), 1)
                {
                    pass += 1;
                }
            }
        }
    }
    let tcp_ns = t0.elapsed().as_nanos() as f64 / (rounds * a) as f64;
    assert_eq!(pass, rounds * a, "TCP drops: {:?}", t.counters());
    tcp_ns
}

fn main() {
    println!("K states | active | UDP hit ns | TCP hit ns | miss ns | fill s | MB");
    for k in state_counts() {
        let a = ACTIVE.min(k);
        let rounds = LOOKUPS / a;
        let UdpRow { hit_ns: udp_ns, miss_ns, fill_s: fill, mb } = bench_udp(k, a, rounds);
        let tcp_ns = bench_tcp(k, a, rounds);
        println!(
            "{k:>8} | {a:>6} | {udp_ns:>10.1} | {tcp_ns:>10.1} | {miss_ns:>7.1} | {fill:>6.2} | {mb:.0}"
        );
    }
}
