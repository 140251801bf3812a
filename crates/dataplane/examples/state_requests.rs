//! How long a worker's poll spends serving an operator's request on its state table
//! (`linerate show states`, `kill states`, `flush states`: `dataplane::firewall::requests`),
//! per poll and in all, for a table filled with K UDP states: list every state (1000 kept),
//! list with a filter nothing matches, remove every state.
//!
//! `cargo run --release -p linerate-dataplane --example state_requests [K]` (default 1,000,000)

use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::Instant;

use dataplane::firewall::requests::{StateFilter, StateOp, StateRequest, StateRequests};
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use fw::packet::{PacketKey, proto};

fn main() {
    let n: usize =
        std::env::args().nth(1).map_or(1_000_000, |a| a.parse().expect("K: a number of states"));
    let rules = CompiledRules::parse(
        &format!("set limit states {n}\npass all\n"),
        std::path::Path::new("bench.conf"),
        &|_| None,
    )
    .unwrap();
    let mut fw = Firewall::new(RulesSlot::new(Arc::new(rules)), 9);
    for p in 0..n {
        let src = u128::from(0x0a00_0000u32 + (p / 60_000) as u32);
        let k = PacketKey {
            proto: proto::UDP,
            src,
            dst: 0x0a01_0102,
            src_port: (p % 60_000) as u16,
            dst_port: 53,
            len: 60,
            ..PacketKey::ZERO
        };
        fw.insert_state(&k, 0).unwrap();
    }
    let miss = StateFilter { port: Some(9), ..StateFilter::default() };
    for (name, op, filter) in [
        ("list", StateOp::List { limit: 1000 }, StateFilter::default()),
        ("list, no match", StateOp::List { limit: 1000 }, miss),
        ("remove all", StateOp::Kill, StateFilter::default()),
    ] {
        let (reply, replies) = channel();
        let (requests, requests_end) = channel();
        let mut state_requests = StateRequests::new(0, requests_end);
        requests.send(StateRequest { op, filter, reply }).unwrap();
        let mut us = Vec::new();
        loop {
            let t = Instant::now();
            let busy = state_requests.serve(Some(&mut fw));
            us.push(t.elapsed().as_secs_f64() * 1e6);
            if !busy {
                break;
            }
        }
        let r = replies.try_recv().unwrap();
        let total: f64 = us.iter().sum();
        us.sort_by(f64::total_cmp);
        println!(
            "{name:<15} {n} states: {} polls, {:.1} ms in all, per poll median {:.0} us, p99 {:.0} us, max {:.0} us (matched {}, removed {})",
            us.len(),
            total / 1000.0,
            us[us.len() / 2],
            us[us.len() * 99 / 100],
            us[us.len() - 1],
            r.matched,
            r.removed
        );
    }
}
