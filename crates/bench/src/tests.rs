use fw::packet::PacketKey;

use crate::*;

#[test]
fn median_odd_even() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
}

#[test]
fn small_bench_forwards_every_flow() {
    let cfg = BenchConfig {
        routes: RouteSource::Synthetic(5000),
        flows: 100,
        runs: 2,
        seconds: 0.05,
        ..Default::default()
    };
    let res = run(&cfg, |_, _, _| {}).unwrap();
    assert_eq!(res.runs_mpps.len(), 2);
    assert!(res.mpps > 0.0);
    assert!(res.counts.rx > 0);
    assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
}

#[test]
fn small_bench_ipv6_forwards_every_flow() {
    let cfg = BenchConfig {
        routes: RouteSource::Synthetic(5000),
        flows: 100,
        runs: 1,
        seconds: 0.05,
        ipv6: true,
        frame_size: 62,
        ..Default::default()
    };
    let res = run(&cfg, |_, _, _| {}).unwrap();
    assert!(res.counts.rx > 0);
    assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
}

#[test]
fn nat_bench_translates_every_flow() {
    let fw = BenchFirewall { states: Some(0), nat: Some(500), ..Default::default() };
    let cfg = BenchConfig {
        routes: RouteSource::Synthetic(5000),
        flows: 100,
        runs: 1,
        seconds: 0.05,
        firewall: Some(fw),
        ..Default::default()
    };
    let res = run(&cfg, |_, _, _| {}).unwrap();
    assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
    let f = res.firewall.unwrap();
    assert_eq!((f.nat_prefilled, f.nat_sessions), (500, 600), "prefilled plus one per flow");
    assert!(f.nat_table_bytes > 600 * 64);
}

#[test]
fn firewall_bench_passes_every_flow_and_counts() {
    let fw = BenchFirewall {
        rules: 50,
        table_size: Some(100),
        states: Some(300),
        realistic: false,
        nat: None,
        log: None,
    };
    let cfg = BenchConfig {
        routes: RouteSource::Synthetic(5000),
        flows: 100,
        runs: 1,
        seconds: 0.05,
        firewall: Some(fw),
        ..Default::default()
    };
    let res = run(&cfg, |_, _, _| {}).unwrap();
    assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
    let f = res.firewall.unwrap();
    assert_eq!((f.rules, f.prefilled_states), (52, 300));
    let states: std::collections::HashMap<_, _> = f.state_counters.into_iter().collect();
    assert_eq!(states["inserts"], 400, "prefilled plus one per flow");
    assert_eq!(states["in_use"], 400);
    // Only the final `pass all keep state` (index 51) matched; it created every state:
    // two of pf's per forwarded flow (its in and out states), prefilled ones included.
    assert_eq!(f.matched.len(), 1, "{:?}", f.matched);
    assert_eq!((f.matched[0].rule, f.matched[0].states), (Some(51), 800));
    assert!(f.matched[0].packets >= res.counts.rx, "warm-up included: {:?}", f.matched[0]);
    assert_eq!(f.matched[0].bytes, 46 * f.matched[0].packets);
}

#[test]
fn bench_rules_text() {
    let t = bench_rules(
        &BenchFirewall {
            rules: 2,
            table_size: Some(2),
            states: None,
            realistic: false,
            nat: None,
            log: None,
        },
        &[PacketKey::ZERO; 10],
    );
    assert_eq!(
        t,
        "table <t> const { 11.0.0.0/28 11.0.0.16/28 }\nblock in quick from <t>\n\
         block in quick proto tcp from 10.0.0.0 to 10.200.0.1 port 22\n\
         block in quick proto tcp from 10.0.0.1 to 10.200.0.1 port 22\npass all no state\n"
    );
}

#[test]
fn two_workers_share_the_flows_and_forward_everything() {
    let cfg = BenchConfig {
        routes: RouteSource::Synthetic(5000),
        flows: 400,
        runs: 2,
        seconds: 0.05,
        workers: 2,
        ..Default::default()
    };
    let res = run(&cfg, |_, _, _| {}).unwrap();
    assert_eq!(res.flows_per_worker.len(), 2);
    assert!(res.flows_per_worker.iter().all(|&f| f > 50), "{:?}", res.flows_per_worker);
    assert_eq!(res.flows_per_worker.iter().sum::<usize>(), 400);
    assert!(res.counts.rx > 0);
    assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
}

#[test]
fn bad_frame_size_is_rejected() {
    let cfg =
        BenchConfig { routes: RouteSource::Synthetic(10), frame_size: 59, ..Default::default() };
    let err = run(&cfg, |_, _, _| {}).unwrap_err().to_string();
    assert!(err.contains("frame size 59"), "{err}");
}

/// The realistic rules kept for the bench match none of its packets (either pass), checked
/// with the reference evaluator, and the tree's verdict cache counts the bench's lookups:
/// the first of each of its 200 keys (100 flows, two passes) has no entry of its own, and
/// most of those are answered by an entry of their classes that another key made.
#[test]
fn realistic_bench_rules_match_no_packet_and_go_through_the_cache() {
    use fw::packet::{Af, Dir};
    let keys: Vec<PacketKey> = (0..300u32)
        .map(|i| PacketKey {
            af: Af::Inet,
            proto: 17,
            src: u128::from(0xc612_0a01 + i % 20),
            dst: u128::from(0x0a00_0000 + i * 7919),
            src_port: 2000 + i as u16,
            dst_port: 9,
            ..PacketKey::ZERO
        })
        .collect();
    let text =
        bench_rules(&BenchFirewall { rules: 300, realistic: true, ..Default::default() }, &keys);
    let rs =
        fw::rules::parse(&text, std::path::Path::new("b.conf"), &fw::testgen::iface_index).unwrap();
    assert_eq!(rs.rules.len(), 301, "300 rules and the final pass");
    let last = rs.rules.len() - 1;
    for k in &keys {
        for (dir, iface) in [(Dir::In, 0), (Dir::Out, 1)] {
            let k = PacketKey { dir, iface, ..*k };
            assert!(
                rs.rules[..last].iter().all(|r| !fw::reference::rule_matches(&rs, r, &k)),
                "{k:?}"
            );
        }
    }
    let fw = BenchFirewall { rules: 1000, realistic: true, ..Default::default() };
    let cfg = BenchConfig {
        routes: RouteSource::Synthetic(5000),
        flows: 100,
        runs: 1,
        seconds: 0.05,
        firewall: Some(fw),
        ..Default::default()
    };
    let res = run(&cfg, |_, _, _| {}).unwrap();
    assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
    let c = res.firewall.unwrap().verdict_cache;
    assert!(
        c.hits > 10 * c.misses && c.misses + c.class_hits >= 200 && c.class_hits > c.misses,
        "{c:?}"
    );
}

/// A thread spinning on the worker's CPU (a second bench pinned there, say) shows in the
/// run's interference: the worker waited for it about half the time.
#[test]
fn a_competitor_on_the_workers_cpu_is_reported() {
    let cpu = io::affinity::available_cpus().saturating_sub(1);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinner = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            io::affinity::pin_current_thread(cpu).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let cfg = BenchConfig {
        routes: RouteSource::Synthetic(5000),
        flows: 100,
        runs: 2,
        seconds: 0.5,
        cpu: Some(cpu),
        ..Default::default()
    };
    let res = run(&cfg, |_, _, _| {}).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner.join().unwrap();
    assert_eq!(res.runs_interference.len(), 2);
    for i in &res.runs_interference {
        let waited = i.waited.expect("/proc/thread-self/schedstat is readable on Linux");
        assert!(waited > 0.2, "a thread sharing the CPU went unnoticed: {i:?}");
    }
}
