//! The quick loop ([`StateTable::quick`]) then the general lookup on the packets it left, in
//! order, against every packet looked up in order with the general lookup: the same outcome
//! for every packet, the same states after every batch (pseudo-states, timeout kinds,
//! deadlines) and the same counters. Random batches over UDP flows in both directions
//! (repeated within a batch, so that states turn from SINGLE to MULTIPLE mid-batch), TCP and
//! other-protocol flows, a clock that lets states expire, a table small enough to fill up.
//! Seed override: `FW_STATE_SEED=<u64>`.

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{FlowV4, InsertError, StateId, StateTable, Timeouts};

mod common;
use common::Rng;

/// A flow's initiator-side tuple: protocol, source, source port, destination, port.
type Tuple = (u8, u32, u16, u32, u16);

/// A packet of flow `t`, from the initiator (`reply` false) or the responder.
fn packet(t: Tuple, reply: bool) -> (FlowV4, PacketKey) {
    let (p, mut s, mut sp, mut d, mut dp) = t;
    if reply {
        (s, sp, d, dp) = (d, dp, s, sp);
    }
    let key = PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface: 0,
        proto: p,
        src: s.into(),
        dst: d.into(),
        src_port: sp,
        dst_port: dp,
        tcp_flags: 0x02,
        len: 60,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    };
    (FlowV4::new(p, s, sp, d, dp), key)
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Hit(u32),
    Inserted(StateId),
    Full,
    Exists,
}

/// The general path for one packet: the lookup, and on a miss the insert.
fn general(t: &mut StateTable, f: &FlowV4, key: &PacketKey, rule: u32, now: u32) -> Outcome {
    if let Some(hit) = t.lookup_v4(f, t.hash_v4(f), None, None, now) {
        assert_eq!(hit.verdict, fw::state::StateVerdict::Pass, "no TCP segment: sloppy tracking");
        return Outcome::Hit(hit.rule);
    }
    match t.insert(key, rule, now, None) {
        Ok(id) => Outcome::Inserted(id),
        Err(InsertError::Full) => Outcome::Full,
        Err(InsertError::Exists(_)) => Outcome::Exists,
    }
}

fn run(seed: u64, batches: usize, limit: usize, timeouts: Timeouts) -> u64 {
    let mut rng = Rng(seed | 1);
    let flows: Vec<Tuple> = (0..limit as u32 * 2)
        .map(|i| {
            let p = match rng.below(8) {
                0 => proto::TCP,
                1 => 47,
                _ => proto::UDP,
            };
            (p, 0x0a00_0000 | i, 1024 + rng.below(4) as u16, 0xc612_0000 | rng.below(64) as u32, 53)
        })
        .collect();
    let (mut ordered, mut quick) =
        (StateTable::new(limit, timeouts, seed), StateTable::new(limit, timeouts, seed));
    let mut now = 1u32;
    let mut quick_hits = 0;
    for b in 0..batches {
        now += [0, 0, 0, 1, 5, 29, 31, 61][rng.below(8) as usize];
        ordered.expire(now, 16);
        quick.expire(now, 16);
        // A batch: a few hot flows, each several times, in both directions.
        let hot: Vec<usize> =
            (0..1 + rng.below(12)).map(|_| rng.below(flows.len() as u64) as usize).collect();
        let batch: Vec<(usize, bool)> = (0..1 + rng.below(64))
            .map(|_| (hot[rng.below(hot.len() as u64) as usize], rng.below(3) == 0))
            .collect();
        let rule = b as u32;
        let expect: Vec<Outcome> = batch
            .iter()
            .map(|&(i, reply)| {
                let (f, key) = packet(flows[i], reply);
                general(&mut ordered, &f, &key, rule, now)
            })
            .collect();
        let mut got: Vec<Option<Outcome>> = Vec::new();
        let mut q = quick.quick(now);
        for &(i, reply) in &batch {
            let (f, _) = packet(flows[i], reply);
            got.push(q.udp_v4(&f).map(Outcome::Hit));
        }
        drop(q);
        quick_hits += got.iter().flatten().count() as u64;
        for (k, &(i, reply)) in batch.iter().enumerate() {
            if got[k].is_none() {
                let (f, key) = packet(flows[i], reply);
                got[k] = Some(general(&mut quick, &f, &key, rule, now));
            }
        }
        let got: Vec<Outcome> = got.into_iter().map(Option::unwrap).collect();
        assert_eq!(got, expect, "seed {seed}, batch {b}: {batch:?}");
        for id in 0..limit as u32 {
            assert_eq!(
                quick.info(StateId(id)),
                ordered.info(StateId(id)),
                "seed {seed}, batch {b}, state {id}"
            );
        }
        assert_eq!(quick.counters(), ordered.counters(), "seed {seed}, batch {b}");
    }
    quick.debug_check();
    quick_hits
}

#[test]
fn quick_loop_then_the_rest_in_order_equals_every_packet_in_order() {
    let mut quick_hits = 0;
    for k in 0..20 {
        quick_hits += run(
            common::seed(0x9e37_79b9_7f4a_7c15).wrapping_add(k),
            2_000,
            64,
            Timeouts::default(),
        );
    }
    // The property is only worth something if the quick loop takes a good share of packets.
    assert!(quick_hits > 50_000, "quick hits: {quick_hits}");
}

/// The same under pf's adaptive scaling, on from 16 entries: a state's life then depends on
/// the count, which the in-order lookups of a batch raise as they insert. The quick loop
/// must take no packet the lookups in order would find dead.
#[test]
fn quick_loop_agrees_under_adaptive_scaling() {
    let timeouts = Timeouts { adaptive_start: 16, adaptive_end: 1000, ..Timeouts::default() };
    let mut quick_hits = 0;
    for k in 0..20 {
        quick_hits += run(common::seed(0xada9_7f4a_7c15).wrapping_add(k), 2_000, 64, timeouts);
    }
    assert!(quick_hits > 20_000, "quick hits: {quick_hits}");
}
