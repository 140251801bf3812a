//! Scale: fill a table to its limit (1M by default, 10M with `FW_STATE_10M=1`), check the
//! memory per state (<= 128 B including the index) and lookups of existing and missing keys.

use std::time::Instant;

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{InsertError, StateLookup, StateTable, StateVerdict, Timeouts};

/// Flow `i`: 90% IPv4 UDP, 10% IPv6 UDP; distinct for distinct `i`.
fn flow(i: u64) -> PacketKey {
    let v6 = i % 10 == 9;
    let (src, dst) = if v6 {
        (0x2001_0db8u128 << 96 | (i >> 16) as u128, 0x2001_0db8u128 << 96 | 0xffff_0000_0001)
    } else {
        (0x0a00_0000 | (i >> 16) as u128, 0xc0a8_0001)
    };
    PacketKey {
        af: if v6 { Af::Inet6 } else { Af::Inet },
        dir: Dir::In,
        iface: 0,
        proto: proto::UDP,
        src,
        dst,
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

fn rev(k: &PacketKey) -> PacketKey {
    PacketKey { src: k.dst, dst: k.src, src_port: k.dst_port, dst_port: k.src_port, ..*k }
}

#[test]
fn fill_to_limit() {
    let n: usize =
        if std::env::var("FW_STATE_10M").is_ok_and(|v| v == "1") { 10_000_000 } else { 1_000_000 };
    let t0 = Instant::now();
    // Full to its limit: pf's adaptive scaling, on by default, would shorten the timeouts
    // to a third; this test is about the table's structure.
    let to = Timeouts { adaptive_start: 0, adaptive_end: 0, ..Timeouts::default() };
    let mut t = StateTable::new(n, to, 0x1234_5678);
    let mem = t.memory_bytes();
    let per_state = mem as f64 / n as f64;
    eprintln!(
        "{n} states: memory {mem} B = {per_state:.1} B/state (entry {} B)",
        StateTable::ENTRY_BYTES
    );
    assert!(per_state <= 128.0, "{per_state} B/state");

    for i in 0..n as u64 {
        t.insert(&flow(i), 0, 0, None).unwrap();
    }
    let t_fill = t0.elapsed();
    assert_eq!(t.len(), n);
    assert_eq!(t.memory_bytes(), mem, "no growth");
    assert_eq!(t.insert(&flow(n as u64), 0, 0, None), Err(InsertError::Full));

    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let probes = 1_000_000;
    let t1 = Instant::now();
    for _ in 0..probes {
        let i = rnd() % n as u64;
        let k = if i & 1 == 0 { flow(i) } else { rev(&flow(i)) };
        match t.lookup(&k, None, 1) {
            StateLookup::Hit { verdict: StateVerdict::Pass, dir_from_initiator, .. } => {
                assert_eq!(dir_from_initiator, i & 1 == 0)
            }
            other => panic!("flow {i}: {other:?}"),
        }
    }
    let t_hit = t1.elapsed();
    let t2 = Instant::now();
    for _ in 0..probes {
        let i = n as u64 + rnd() % (4 * n as u64);
        assert_eq!(t.lookup(&flow(i), None, 1), StateLookup::Miss);
    }
    let t_miss = t2.elapsed();
    let t3 = Instant::now();
    let max_probe = t.debug_check();
    let t_check = t3.elapsed();
    eprintln!(
        "fill {:.2?} ({:.0} ns/insert), hit {:.0} ns, miss {:.0} ns (random keys, test profile), \
         longest probe {max_probe}, check {t_check:.2?}",
        t_fill,
        t_fill.as_nanos() as f64 / n as f64,
        t_hit.as_nanos() as f64 / probes as f64,
        t_miss.as_nanos() as f64 / probes as f64,
    );
    // Everything expires: a full sweep empties the table.
    let t4 = Instant::now();
    assert_eq!(t.expire(60, n), n);
    eprintln!("sweep of {n}: {:.2?}", t4.elapsed());
    assert!(t.is_empty());
}
