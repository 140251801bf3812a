//! The filter stage through a whole worker over in-memory ports: in rules, out rules, states
//! matching replies on the other interface, TCP window checks, per-rule counters, and the
//! atomic reload race (a worker forwarding while another thread swaps rule sets).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::{Counts, DropReason, PortInfo, Worker};
use io::mem::{CountingTx, ReplayRx};
use io::{Batch, FramePool, PortStats, TxPort};
use wire::build::{UdpFlow, udp_frame};
use wire::{Ipv4Packet, MacAddr};

mod frames;
use frames::world::{A_HOST, A6, B_GW, B_MAC, FAR, FAR6, fib};
use frames::{RX_MAC, TX_MAC, tcp, udp};

/// Port 0 ("a", MAC RX_MAC) faces host A (198.18.0.2); port 1 ("b", TX_MAC) leads to 10/8
/// (`frames::world`).
fn ports() -> [PortInfo; 2] {
    [PortInfo::new("a", RX_MAC, 0), PortInfo::new("b", TX_MAC, 1)]
}

fn ifaces(name: &str) -> Option<u16> {
    ["a", "b"].iter().position(|n| *n == name).map(|i| i as u16)
}

fn compile(text: &str) -> Arc<CompiledRules> {
    Arc::new(CompiledRules::parse(text, Path::new("test.conf"), &ifaces).unwrap())
}

/// Runs `per_port[p]` received on port p (port 0's frames first) through a worker with `rules`.
fn run(
    rules: &str,
    per_port: [Vec<Vec<u8>>; 2],
) -> (Counts, Worker<ReplayRx, CountingTx, CountingTx>) {
    run_prefilled(rules, per_port, 0)
}

/// States of other flows a table needs to outgrow the filter stage's cache threshold (1 MiB
/// of index lines in use and slots: 152 bytes a state), so that its lookups are batched.
const BATCHED_PREFILL: usize = 8000;

/// [`run`] with `prefill` states of other flows (UDP 172.16.0.0/12 -> 203.0.113.1:9, under
/// rule 0) in the table first: each adds one to `in_use` and `inserts`, and two states to
/// rule 0's count.
fn run_prefilled(
    rules: &str,
    per_port: [Vec<Vec<u8>>; 2],
    prefill: usize,
) -> (Counts, Worker<ReplayRx, CountingTx, CountingTx>) {
    let [a, b] = per_port;
    let rx = vec![ReplayRx::new(0, a).once(), ReplayRx::new(1, b).once()];
    let mut w = Worker::new(
        fib(),
        &ports(),
        rx,
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    w.set_firewall(Firewall::new(RulesSlot::new(compile(rules)), 7));
    prefill_states(&mut w, prefill);
    while !(w.rx[0].finished() && w.rx[1].finished()) {
        w.poll();
    }
    let c = w.counts();
    let held = w.fragments_held() as u64;
    assert_eq!(c.rx, c.forwarded + c.local + c.dropped() + held, "{c:?}");
    (c, w)
}

/// Puts `n` states of flows no test sends (UDP 172.16.0.0/12 -> 203.0.113.1:9) in the
/// worker's table, under rule 0.
fn prefill_states(w: &mut Worker<ReplayRx, CountingTx, CountingTx>, n: usize) {
    use fw::packet::{Af, Dir, PacketKey, proto};
    let fw = w.firewall_mut().unwrap();
    for i in 0..n {
        let key = PacketKey {
            af: Af::Inet,
            dir: Dir::In,
            iface: 0,
            proto: proto::UDP,
            src: u128::from(0xac10_0000u32 + (i >> 16) as u32),
            dst: u128::from(u32::from(Ipv4Addr::new(203, 0, 113, 1))),
            src_port: i as u16,
            dst_port: 9,
            len: 46,
            ..PacketKey::ZERO
        };
        fw.insert_state(&key, 0).unwrap();
    }
}

fn drops(c: &Counts, r: DropReason) -> u64 {
    c.drops[r as usize]
}

#[test]
fn in_rules_block_and_count_per_rule() {
    let rules =
        "block in quick proto udp to port 9999 label \"nine\"\npass in proto udp no state\n";
    let frames = vec![
        udp(0, A_HOST, 1000, FAR, 9999),
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, A_HOST, 1001, FAR, 53),
    ];
    let (c, w) = run(rules, [frames, vec![]]);
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (2, 1), "{c:?}");
    assert_eq!(w.tx[1].stats().tx_packets, 2);
    let stats = w.firewall_stats().unwrap().rules().snapshot();
    assert_eq!(stats.len(), 3, "two rules and the default");
    assert_eq!(
        (stats[0].line, stats[0].label.as_deref(), stats[0].packets, stats[0].bytes),
        (1, Some("nine"), 1, 46)
    );
    assert_eq!((stats[1].packets, stats[1].bytes, stats[1].states), (2, 92, 0));
    // Both rules are `in` only: the out pass is skipped, the default counts nothing.
    assert_eq!(stats[2].packets, 0);
}

#[test]
fn without_out_rules_the_out_pass_is_skipped() {
    let rules = "block in quick proto udp to port 9999\n";
    let (c, w) = run(rules, [vec![udp(0, A_HOST, 1000, FAR, 53)], vec![]]);
    assert_eq!(c.forwarded, 1);
    let stats = w.firewall_stats().unwrap().rules().snapshot();
    assert_eq!(stats[1].packets, 1, "only the in pass counted (default)");
}

#[test]
fn stateless_pass_rules_skip_the_out_pass() {
    // `pass all no state` matches outbound packets too, but cannot change their fate.
    let (c, w) = run(
        "block in quick proto udp to port 9\npass all no state\n",
        [vec![udp(0, A_HOST, 1000, FAR, 53)], vec![]],
    );
    assert_eq!(c.forwarded, 1);
    assert_eq!(
        w.firewall_stats().unwrap().rules().snapshot()[1].packets,
        1,
        "counted by the in pass only"
    );
    // A block that can match outbound packets brings the out pass back.
    let (c, w) = run(
        "block out proto udp to port 9\npass all no state\n",
        [vec![udp(0, A_HOST, 1000, FAR, 53)], vec![]],
    );
    assert_eq!(c.forwarded, 1);
    assert_eq!(w.firewall_stats().unwrap().rules().snapshot()[1].packets, 2, "in and out passes");
}

#[test]
fn out_rules_apply_on_the_output_port() {
    let rules = "block out on b proto udp to port 7\nblock out on a proto udp to port 8\n";
    let frames = vec![udp(0, A_HOST, 1000, FAR, 7), udp(0, A_HOST, 1000, FAR, 8)];
    let (c, _) = run(rules, [frames, vec![]]);
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (1, 1), "{c:?}");
}

#[test]
fn states_let_replies_in_on_the_other_port() {
    // pf filters the flow in on a and out on b: both passes need a rule (`block all`).
    let rules =
        "block all\npass in on a proto udp keep state\npass out on b proto udp keep state\n";
    let out = vec![udp(0, A_HOST, 1000, FAR, 53)];
    // The reply matches the state; a packet of another flow from the same host is blocked.
    let back = vec![udp(1, FAR, 53, A_HOST, 1000), udp(1, FAR, 53, A_HOST, 1001)];
    let (c, w) = run(rules, [out, back]);
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (2, 1), "{c:?}");
    assert_eq!(w.tx[0].stats().tx_packets, 1, "the reply went out on port a");
    let fw = w.firewall_stats().unwrap();
    let stats = fw.rules().snapshot();
    assert_eq!(
        (stats[1].packets, stats[1].states),
        (2, 1),
        "the state's packets count under its rule"
    );
    assert_eq!(stats[0].packets, 1, "block all");
    let states: std::collections::HashMap<_, _> = fw.states().into_iter().collect();
    assert_eq!((states["inserts"], states["hits"], states["in_use"]), (1, 1, 1));
}

/// A worker over ports a and b with `rules`, its ports replaying `per_port` once.
fn worker(
    rules: &str,
    per_port: [Vec<Vec<u8>>; 2],
    seed: u64,
) -> Worker<ReplayRx, CountingTx, CountingTx> {
    let [a, b] = per_port;
    let rx = vec![ReplayRx::new(0, a).once(), ReplayRx::new(1, b).once()];
    let tx = vec![CountingTx::new(), CountingTx::new()];
    let mut w = Worker::new(fib(), &ports(), rx, tx, CountingTx::new(), FramePool::new(600), 256);
    w.set_firewall(Firewall::new(RulesSlot::new(compile(rules)), seed));
    w
}

/// A worker's states, sent through its sync port and taken in by another worker's (state
/// sync between two boxes, without the wire), pass the replies there as they would have
/// passed on the first: the second box takes over with no commit step. A removal follows,
/// and a bulk update brings states made before sync started.
#[test]
fn states_synced_to_another_worker_pass_its_replies() {
    use dataplane::firewall::sync::{OUT_BATCHES, SyncItem, SyncPort};
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc::{channel, sync_channel};
    let rules =
        "block all\npass in on a proto udp keep state\npass out on b proto udp keep state\n";
    let back = || vec![udp(1, FAR, 53, A_HOST, 1000), udp(1, FAR, 53, A_HOST, 1001)];
    let (c, _) = run(rules, [vec![], back()]);
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (0, 2), "without the states");

    // The first box: sync on, then a flow (and one made before sync, for the bulk update).
    let out = vec![udp(0, A_HOST, 1000, FAR, 53)];
    let mut first = worker(rules, [out, vec![]], 7);
    prefill_states(&mut first, 1);
    let (to_thread, from_first) = sync_channel(OUT_BATCHES);
    let (_to_first, first_inbox) = channel();
    let first_bulk = Arc::new(AtomicBool::new(false));
    first.set_sync(SyncPort::new(to_thread, first_inbox, Arc::clone(&first_bulk)), 64);
    while !(first.rx[0].finished() && first.rx[1].finished()) {
        first.poll();
    }
    first.poll(); // changes go out at the start of the next round
    let items: Vec<SyncItem> = from_first.try_iter().flatten().collect();
    assert_eq!(items.len(), 1, "the new flow's state: {items:?}");

    // The second box: the same rules, the first's items, then the replies.
    let mut second = worker(rules, [vec![], back()], 8);
    let (to_second_thread, _) = sync_channel(OUT_BATCHES);
    let (to_second, second_inbox) = channel();
    second.set_sync(
        SyncPort::new(to_second_thread, second_inbox, Arc::new(AtomicBool::new(false))),
        64,
    );
    to_second.send(items.clone()).unwrap();
    while !(second.rx[0].finished() && second.rx[1].finished()) {
        second.poll();
    }
    let c = second.counts();
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (1, 1), "{c:?}");
    assert_eq!(second.tx[0].stats().tx_packets, 1, "the reply went out on port a");

    // A bulk update asked of the first: both of its states, then the end.
    first_bulk.store(true, Ordering::Relaxed);
    first.poll();
    let bulk: Vec<SyncItem> = from_first.try_iter().flatten().collect();
    assert_eq!(bulk.len(), 3, "{bulk:?}");
    assert_eq!(bulk.last(), Some(&SyncItem::BulkEnd));

    // A removal reaches the second box.
    let SyncItem::State(s, _) = items[0] else { panic!() };
    to_second.send(vec![SyncItem::Removed { proto: s.proto, ends: s.ends }]).unwrap();
    second.poll();
    assert_eq!(second.firewall_mut().unwrap().state_table().len(), 0);
}

#[test]
fn tcp_state_checks_windows() {
    let rules =
        "block all\npass in on a proto tcp keep state\npass out on b proto tcp keep state\n";
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    let out = vec![tcp(0, A_HOST, 40000, FAR, 80, SYN, 1000, 0)];
    let back = vec![
        tcp(1, FAR, 80, A_HOST, 40000, SYN | ACK, 5000, 1001),
        // An ACK far outside the window A advertised: pf drops it (BADSTATE).
        tcp(1, FAR, 80, A_HOST, 40000, ACK, 5001 + 1_000_000_000, 1001),
        // A non-SYN packet of an unknown connection: no state, the rules block it.
        tcp(1, FAR, 81, A_HOST, 40000, ACK, 1, 1),
    ];
    let (c, _) = run(rules, [out, back]);
    assert_eq!(c.forwarded, 2, "{c:?}");
    assert_eq!(drops(&c, DropReason::StateOutOfWindow), 1, "{c:?}");
    assert_eq!(drops(&c, DropReason::FilterBlocked), 1, "{c:?}");
}

#[test]
fn full_state_table_drops_new_flows() {
    let rules = "set limit states 2\npass in proto udp keep state\n";
    let frames = (0..4).map(|i| udp(0, A_HOST, 1000 + i, FAR, 53)).collect();
    let (c, _) = run(rules, [frames, vec![]]);
    assert_eq!((c.forwarded, drops(&c, DropReason::StateLimit)), (2, 2), "{c:?}");
}

/// pf's adaptive timeouts reach the worker's table from the rule file. Four flows out
/// through a and their replies, no time passing: with `adaptive.end` at the four states the
/// flows hold, every state is dead as soon as the last one is made, so replies meet
/// `block all`; with the end above the count, or the scaling off, every reply passes.
/// (Scaling below the end shortens lives, which takes a clock: `fw`'s state tests.)
#[test]
fn adaptive_timeouts_reach_the_state_table() {
    let out: Vec<_> = (0..4).map(|i| udp(0, A_HOST, 1000 + i, FAR, 53)).collect();
    let back: Vec<_> = (0..4).map(|i| udp(1, FAR, 53, A_HOST, 1000 + i)).collect();
    let rules = |adaptive: &str| {
        format!(
            "set timeout {{ {adaptive} }}\nblock all\npass in on a proto udp keep state\npass out on b proto udp keep state\n"
        )
    };
    let expired = |w: &Worker<ReplayRx, CountingTx, CountingTx>| {
        let states: std::collections::HashMap<_, _> =
            w.firewall_stats().unwrap().states().into_iter().collect();
        states["expired_sweep"] + states["expired_lookup"]
    };
    let (c, w) = run(&rules("adaptive.start 2, adaptive.end 4"), [out.clone(), back.clone()]);
    assert!(drops(&c, DropReason::FilterBlocked) > 0 && expired(&w) > 0, "{c:?}");
    for adaptive in ["adaptive.start 2, adaptive.end 5", "adaptive.start 0, adaptive.end 0"] {
        let (c, w) = run(&rules(adaptive), [out.clone(), back.clone()]);
        assert_eq!(
            (c.forwarded, drops(&c, DropReason::FilterBlocked), expired(&w)),
            (8, 0, 0),
            "{adaptive}: {c:?}"
        );
    }
}

/// Fragment `first` (true: offset 0, more to come; false: the last, at offset 8) of the
/// UDP datagram `id` from A port `sport` to FAR port 53.
fn udp_fragment(id: u16, sport: u16, first: bool) -> Vec<u8> {
    let mut f = udp(0, A_HOST, sport, FAR, 53);
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.set_ident(id);
    ip.set_more_frags(first);
    ip.set_frag_offset(if first { 0 } else { 8 });
    ip.fill_checksum();
    f
}

/// A later fragment that comes ahead of its first waits for it, then goes through the rules
/// with its datagram's ports: its first in the same batch or in a later one. A datagram
/// the rules block takes its waiting fragment with it.
#[test]
fn a_fragment_ahead_of_its_first_waits_for_it() {
    let rules = "block all\npass in on a proto udp to port 53 no state\npass out on b proto udp to port 53 no state\n";
    let (c, w) =
        run(rules, [vec![udp_fragment(7, 1000, false), udp_fragment(7, 1000, true)], vec![]]);
    assert_eq!((c.forwarded, c.dropped(), w.fragments_held()), (2, 0, 0), "one batch: {c:?}");
    let (c, mut w) = run(rules, [vec![udp_fragment(8, 1000, false)], vec![]]);
    assert_eq!((c.forwarded, c.dropped(), w.fragments_held()), (0, 0, 1), "{c:?}");
    let mut to_54 = udp_fragment(9, 1000, true);
    to_54[36..38].copy_from_slice(&54u16.to_be_bytes());
    to_54[40..42].fill(0);
    for frame in [udp_fragment(9, 1000, false), to_54, udp_fragment(8, 1000, true)] {
        w.rx[0] = ReplayRx::new(0, vec![frame]).once();
        while !w.rx[0].finished() {
            w.poll();
        }
    }
    let c = w.counts();
    assert_eq!(
        (c.rx, c.forwarded, drops(&c, DropReason::FilterBlocked), w.fragments_held()),
        (4, 2, 2, 0),
        "datagram 8 passed in order, first then the one that waited; 9 blocked, both: {c:?}"
    );
}

/// A flood of later fragments whose first never comes: a bounded number wait (256 per
/// worker), the rest are dropped as `fragment_no_first`, and the frame pool keeps room for
/// the traffic that follows.
#[test]
fn orphan_fragments_cannot_take_the_pool() {
    let rules = "block all\npass in on a proto udp to port 53 no state\npass out on b proto udp to port 53 no state\n";
    let orphans: Vec<_> = (0..400).map(|i| udp_fragment(1000 + i, 2000, false)).collect();
    let (c, mut w) = run(rules, [orphans, vec![]]);
    let held = w.fragments_held();
    assert_eq!(held, dataplane::firewall::frag_hold::MAX_HELD);
    assert_eq!(drops(&c, DropReason::FragmentNoFirst), 400 - held as u64, "{c:?}");
    // Whole datagrams still go through.
    let whole: Vec<_> = (0..50)
        .flat_map(|i| [udp_fragment(5000 + i, 3000, true), udp_fragment(5000 + i, 3000, false)])
        .collect();
    w.rx[0] = ReplayRx::new(0, whole).once();
    while !w.rx[0].finished() {
        w.poll();
    }
    assert_eq!(w.counts().forwarded, 100);
}

/// `set limit frags` and `set timeout frag` reach the worker's fragment table: with room
/// for 4 datagrams (one set), the first of 5 is evicted and its last fragment, whose ports
/// only the first fragment carried, waits for a first fragment that will not come again
/// (until `set timeout frag`); pf's default room keeps all five.
#[test]
fn the_fragment_table_follows_the_rules() {
    let firsts = (0..5).map(|i| udp_fragment(100 + i, 1000 + i, true));
    let lasts = (0..5).map(|i| udp_fragment(100 + i, 1000 + i, false));
    let frames: Vec<_> = firsts.chain(lasts).collect();
    let rules = |set: &str| {
        format!(
            "{set}\nblock all\npass in on a proto udp to port 53 no state\npass out on b proto udp to port 53 no state\n"
        )
    };
    let (c, w) = run(&rules("set limit frags 4"), [frames.clone(), vec![]]);
    assert_eq!(
        (c.forwarded, drops(&c, DropReason::FragmentNoFirst), w.fragments_held()),
        (9, 0, 1),
        "{c:?}"
    );
    let (c, _) = run(&rules("set timeout frag 30"), [frames, vec![]]);
    assert_eq!((c.forwarded, drops(&c, DropReason::FragmentNoFirst)), (10, 0), "{c:?}");
}

/// An ICMP error (received on port b, `from` its sender) reporting on `orig`, a frame that
/// host A sent through port a: addressed to A, quoting the start of `orig`'s IP packet.
fn icmp_error_about(orig: &[u8], from: Ipv4Addr) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let n = wire::icmp_reply::icmp_error(
        orig,
        wire::icmp_reply::IcmpError::NoRoute,
        IpAddr::V4(from),
        B_MAC,
        &mut buf,
    )
    .unwrap();
    buf.truncate(n);
    wire::EthernetFrame::new_unchecked(&mut buf[..]).set_dst_addr(TX_MAC);
    buf
}

/// pf passes an ICMP error that quotes a packet of a tracked flow under that flow's state,
/// whatever the rules say (here `block all`), and drops one that quotes a TCP sequence number
/// outside the flow's window; an error that matches no state goes through the rules.
#[test]
fn icmp_errors_pass_under_the_state_of_the_flow_they_quote() {
    const SYN: u8 = 0x02;
    let rules = "block all\npass in on a proto { udp tcp } keep state\npass out on b proto { udp tcp } keep state\n";
    let out_udp = udp(0, A_HOST, 1000, FAR, 53);
    let out_tcp = tcp(0, A_HOST, 40000, FAR, 80, SYN, 1000, 0);
    let mut not_to_sender = icmp_error_about(&out_udp, FAR);
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut not_to_sender[14..]);
        ip.set_dst_addr(Ipv4Addr::new(198, 18, 0, 3));
        ip.fill_checksum();
    }
    let back = vec![
        // Passes: the UDP flow's state, from the far host and from a router on the way.
        icmp_error_about(&out_udp, FAR),
        icmp_error_about(&out_udp, B_GW),
        // Blocked: no state for that flow.
        icmp_error_about(&udp(0, A_HOST, 1001, FAR, 53), FAR),
        // Blocked: not addressed to the quoted packet's source.
        not_to_sender,
        // Passes: the TCP flow's state, quoted sequence number in the window.
        icmp_error_about(&out_tcp, FAR),
        // Dropped: sequence number far outside the window.
        icmp_error_about(&tcp(0, A_HOST, 40000, FAR, 80, SYN, 1000 + 1_000_000, 0), FAR),
    ];
    let (c, w) = run(rules, [vec![out_udp.clone(), out_tcp.clone()], back]);
    assert_eq!(c.forwarded, 2 + 3, "{c:?}");
    assert_eq!(w.tx[0].stats().tx_packets, 3, "the three errors went back to host A on port a");
    assert_eq!(drops(&c, DropReason::FilterBlocked), 2, "{c:?}");
    assert_eq!(drops(&c, DropReason::StateOutOfWindow), 1, "{c:?}");
    let fw = w.firewall_stats().unwrap();
    let states: std::collections::HashMap<_, _> = fw.states().into_iter().collect();
    assert_eq!((states["icmp_error_hits"], states["icmp_error_bad_seq"]), (3, 1));
    let stats = fw.rules().snapshot();
    assert_eq!(
        (stats[1].packets, stats[1].states),
        (2 + 4, 2),
        "the errors count under the flows' rule"
    );
    assert_eq!(stats[0].packets, 2, "block all");
}

/// The state lookups run in one loop for a small table and batched (prefetch, then probe,
/// then look up) for a large one: both must give every packet the same outcome, with the same
/// counters. Mixed traffic: UDP flows and their replies, repeated within a batch, a TCP
/// handshake with an out-of-window segment, pings, packets the rules block.
#[test]
fn batched_and_one_by_one_state_lookups_agree() {
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    let mut out = Vec::new();
    let mut back = Vec::new();
    for round in 0..3u16 {
        for i in 0..40u16 {
            out.push(udp(0, A_HOST, 1000 + i, FAR, 53));
            if i % 3 == 0 {
                back.push(udp(1, FAR, 53, A_HOST, 1000 + i));
            }
            // Replies to flows that have no state (blocked), and a port the rules block.
            back.push(udp(1, FAR, 54, A_HOST, 2000 + i + round));
        }
        out.push(tcp(
            0,
            A_HOST,
            40000,
            FAR,
            80,
            if round == 0 { SYN } else { ACK },
            1000 + u32::from(round),
            5001,
        ));
        back.push(tcp(1, FAR, 80, A_HOST, 40000, SYN | ACK, 5000, 1001));
        back.push(tcp(1, FAR, 80, A_HOST, 40000, ACK, 5001 + 1_000_000_000, 1001));
    }
    // The batched lookup needs a table whose states in use outgrow the cache threshold: the
    // large one holds states of other flows first, and the small one a few (a table that is
    // empty at the first packet leaves that packet to the rules without a lookup: one miss
    // fewer), whose counts are taken off after.
    let outcome = |limit: u32, prefill: usize| {
        let rules = format!(
            "set limit states {limit}\nblock all\npass in on a keep state\npass out on b keep state\n"
        );
        let (c, w) = run_prefilled(&rules, [out.clone(), back.clone()], prefill);
        let fw = w.firewall_stats().unwrap();
        let table = w.firewall().unwrap().state_table().working_set_bytes();
        let mut rules = fw.rules().snapshot();
        rules[0].states -= 2 * prefill as u64;
        let mut states = fw.states().to_vec();
        for (name, v) in &mut states {
            if ["in_use", "inserts"].contains(name) {
                *v -= prefill as u64;
            }
        }
        (c, rules, states, table)
    };
    let (small, big) = (outcome(256, 100), outcome(200_000, BATCHED_PREFILL));
    assert!(small.3 < 1 << 20 && big.3 > 1 << 20, "one table under the cache threshold, one over");
    assert_eq!(small.0, big.0);
    assert_eq!(small.1, big.1);
    assert_eq!(small.2, big.2);
    assert!(
        small.0.forwarded > 100 && drops(&small.0, DropReason::FilterBlocked) > 100,
        "{:?}",
        small.0
    );
    assert_eq!(drops(&small.0, DropReason::StateOutOfWindow), 3, "{:?}", small.0);
}

/// The quick loop takes packets of established UDP flows ahead of the rest of their batch.
/// A UDP packet it cannot read (IP options here) must not let a later packet of the same
/// flow jump ahead of it: the reply with options makes the initiator MULTIPLE, so the
/// initiator's next packet, in the same batch, must make both sides MULTIPLE, as in order.
#[test]
fn a_udp_packet_with_ip_options_keeps_its_place_in_the_batch() {
    use fw::state::{StateId, Tmo, pseudo_state::MULTIPLE};
    let out = || udp(0, A_HOST, 1000, FAR, 53);
    let mut reply = udp(0, FAR, 53, A_HOST, 1000);
    reply.splice(34..34, [1, 1, 1, 0]); // NOP NOP NOP EOL
    let mut ip = Ipv4Packet::new_unchecked(&mut reply[14..]);
    ip.set_header_len(24);
    ip.set_total_len(ip.total_len() + 4);
    ip.fill_checksum();
    // A table under the cache threshold and one over it (the batched lookup).
    for (limit, prefill) in [(64, 0), (200_000, BATCHED_PREFILL)] {
        let mut w = Worker::new(
            fib(),
            &ports(),
            vec![ReplayRx::new(0, Vec::<Vec<u8>>::new())],
            vec![CountingTx::new(), CountingTx::new()],
            CountingTx::new(),
            FramePool::new(600),
            256,
        );
        w.set_firewall(Firewall::new(
            RulesSlot::new(compile(&format!(
                "set limit states {limit}\nblock all\npass all keep state\n"
            ))),
            3,
        ));
        prefill_states(&mut w, prefill);
        assert_eq!(
            w.firewall().unwrap().state_table().working_set_bytes() > 1 << 20,
            prefill > 0,
            "the batched lookup with the prefilled table"
        );
        // Batch 1 creates the state, batch 2 makes the initiator's packets quick hits, batch
        // 3 has the reply with options, then the initiator again.
        for batch in [vec![out()], vec![out()], vec![reply.clone(), out()]] {
            w.rx[0] = ReplayRx::new(0, batch).once();
            while !w.rx[0].finished() {
                w.poll();
            }
        }
        assert_eq!(w.counts().forwarded, 4, "{:?}", w.counts());
        let info = w.firewall().unwrap().state_table().info(StateId(prefill as u32)).unwrap();
        assert_eq!(
            (info.initiator_state, info.responder_state, info.timeout),
            (MULTIPLE, MULTIPLE, Tmo::UdpMultiple),
            "limit {limit}: {info:?}"
        );
    }
}

/// A reload applies its `set limit states` to the kept state table: lower, no state is
/// removed and new flows are refused until under the limit; higher than the table was sized
/// for, the table grows and takes them.
#[test]
fn reload_applies_the_state_limit() {
    let rules = |limit: u32| {
        compile(&format!(
            "set limit states {limit}\nblock all\npass in on a proto udp keep state\npass out on b proto udp keep state\n"
        ))
    };
    let flows =
        |ports: std::ops::Range<u16>| ports.map(|p| udp(0, A_HOST, p, FAR, 53)).collect::<Vec<_>>();
    let slot = RulesSlot::new(rules(4));
    let mut w = Worker::new(
        fib(),
        &ports(),
        vec![ReplayRx::new(0, Vec::<Vec<u8>>::new())],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    w.set_firewall(Firewall::new(Arc::clone(&slot), 3));
    let send = |w: &mut Worker<ReplayRx, CountingTx, CountingTx>, frames: Vec<Vec<u8>>| {
        let before = w.counts();
        w.rx[0] = ReplayRx::new(0, frames).once();
        while !w.rx[0].finished() {
            w.poll();
        }
        let c = w.counts();
        (
            c.forwarded - before.forwarded,
            drops(&c, DropReason::StateLimit) - drops(&before, DropReason::StateLimit),
        )
    };
    let in_use =
        |w: &Worker<ReplayRx, CountingTx, CountingTx>| w.firewall().unwrap().state_table().len();
    assert_eq!(send(&mut w, flows(1000..1006)), (4, 2), "limit 4");
    // Lower: the four states stay and pass; new flows are refused.
    slot.publish(rules(2)).unwrap();
    assert_eq!(send(&mut w, flows(1000..1006)), (4, 2), "limit 2");
    assert_eq!((in_use(&w), w.firewall().unwrap().state_table().limit()), (4, 2));
    // Higher than ever: the table grows, the old states are still found.
    slot.publish(rules(100_000)).unwrap();
    assert_eq!(send(&mut w, flows(1000..1020)), (20, 0), "limit 100000");
    assert_eq!((in_use(&w), w.firewall().unwrap().state_table().limit()), (20, 100_000));
    let states: std::collections::HashMap<_, _> =
        w.firewall_stats().unwrap().states().into_iter().collect();
    assert_eq!((states["inserts"], states["hits"], states["insert_full"]), (20, 4 + 4, 2 + 2));
}

/// `linerate table` (pfctl -t -T): an address added to a running table is blocked from the
/// next batch on, deleted it passes again; the rules' counters go on across the changes; a
/// `const` table, an unknown one and a change past `set limit table-entries` are refused.
#[test]
fn tables_change_while_the_rules_run() {
    use dataplane::firewall::tables::{TableChange, TableError, TableOp};
    let entry = |s: &str| fw::rules::TableEntry {
        negated: false,
        prefix: fw::rules::parse_prefix(s).unwrap(),
    };
    let slot = RulesSlot::new(compile(
        "set limit table-entries 3\ntable <bad> persist\ntable <fixed> const { 192.0.2.1 }\nblock in quick from <bad>\nblock in quick from <fixed>\npass all no state\n",
    ));
    let mut w = Worker::new(
        fib(),
        &ports(),
        vec![ReplayRx::new(0, Vec::<Vec<u8>>::new())],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    w.set_firewall(Firewall::new(Arc::clone(&slot), 3));
    let send = |w: &mut Worker<ReplayRx, CountingTx, CountingTx>| {
        let before = w.counts();
        w.rx[0] = ReplayRx::new(0, vec![udp(0, A_HOST, 1000, FAR, 53)]).once();
        while !w.rx[0].finished() {
            w.poll();
        }
        let c = w.counts();
        (
            c.forwarded - before.forwarded,
            drops(&c, DropReason::FilterBlocked) - drops(&before, DropReason::FilterBlocked),
        )
    };
    assert_eq!(send(&mut w), (1, 0));
    let host = A_HOST.to_string();
    assert_eq!(
        slot.change_table("bad", TableOp::Add(vec![entry(&host), entry("198.51.100.0/24")])),
        Ok(TableChange { added: 2, deleted: 0, entries: 2 })
    );
    assert_eq!(send(&mut w), (0, 1), "blocked by the new entry");
    assert_eq!(
        slot.change_table("bad", TableOp::Delete(vec![entry(&host)])),
        Ok(TableChange { added: 0, deleted: 1, entries: 1 })
    );
    assert_eq!(send(&mut w), (1, 0));
    let stats = w.firewall_stats().unwrap().rules().snapshot();
    assert_eq!(
        (stats[0].packets, stats[2].packets),
        (1, 2),
        "the counts of every batch, across the changes"
    );
    assert_eq!(
        slot.change_table("fixed", TableOp::Flush),
        Err(TableError::Constant("fixed".into()))
    );
    assert_eq!(slot.change_table("nope", TableOp::Flush), Err(TableError::Unknown("nope".into())));
    assert_eq!(
        slot.change_table("bad", TableOp::Add(vec![entry("10.0.0.1"), entry("10.0.0.2")])),
        Err(TableError::TooMany { total: 4, limit: 3 })
    );
    assert_eq!(slot.table("bad").unwrap().entries, [entry("198.51.100.0/24")]);
}

/// `set keepcounters`: a reload carries each rule's counters to the same rule of the new set
/// (wherever it now stands); without it, the new set counts from zero.
#[test]
fn keepcounters_carries_the_counts_of_the_same_rules() {
    let old = "block in quick proto udp to port 9\npass all no state\n";
    let slot = RulesSlot::new(compile(old));
    let mut w = Worker::new(
        fib(),
        &ports(),
        vec![ReplayRx::new(0, Vec::<Vec<u8>>::new())],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    w.set_firewall(Firewall::new(Arc::clone(&slot), 3));
    let send = |w: &mut Worker<ReplayRx, CountingTx, CountingTx>| {
        w.rx[0] =
            ReplayRx::new(0, vec![udp(0, A_HOST, 1000, FAR, 9), udp(0, A_HOST, 1000, FAR, 53)])
                .once();
        while !w.rx[0].finished() {
            w.poll();
        }
    };
    let packets = |w: &Worker<ReplayRx, CountingTx, CountingTx>| {
        w.firewall_stats().unwrap().rules().snapshot().iter().map(|r| r.packets).collect::<Vec<_>>()
    };
    send(&mut w);
    assert_eq!(
        packets(&w),
        [1, 1, 0],
        "the block, then `pass all` (a stateless pass skips the out pass)"
    );
    // A new rule first: the two old ones keep their counts, the new one starts at zero.
    slot.publish(compile(&format!("set keepcounters\npass in proto tcp no state\n{old}"))).unwrap();
    send(&mut w);
    assert_eq!(packets(&w), [0, 2, 2, 0]);
    // Without keepcounters a reload counts from zero.
    slot.publish(compile(old)).unwrap();
    send(&mut w);
    assert_eq!(packets(&w), [1, 1, 0]);
}

/// A reload whose state table cannot be had is refused by `publish`: nothing is published, the
/// worker keeps the old rules and its table, and a later reload works.
#[test]
fn reload_that_cannot_allocate_keeps_the_old_rules() {
    let slot = RulesSlot::new(compile(
        "set limit states 4\nblock all\npass in on a proto udp keep state\n",
    ));
    let mut w = Worker::new(
        fib(),
        &ports(),
        vec![ReplayRx::new(0, Vec::<Vec<u8>>::new())],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    w.set_firewall(Firewall::new(Arc::clone(&slot), 3));
    // The parser refuses more than MAX_LIMIT_STATES; a set built by hand gets this far.
    let mut huge = fw::rules::parse("pass all no state\n", Path::new("r.conf"), &|_| None).unwrap();
    huge.limit_states = fw::state::MAX_LIMIT as u64 + 1;
    let err = slot.publish(Arc::new(CompiledRules::new(huge).unwrap())).unwrap_err();
    assert!(matches!(err, fw::state::StateAllocError::TooLarge(_)), "{err}");
    assert_eq!(slot.generation(), 0);
    let send = |w: &mut Worker<ReplayRx, CountingTx, CountingTx>, port: u16| {
        w.rx[0] = ReplayRx::new(0, vec![udp(0, A_HOST, port, FAR, 53)]).once();
        while !w.rx[0].finished() {
            w.poll();
        }
    };
    send(&mut w, 1000);
    let fw = w.firewall().unwrap();
    assert_eq!(
        (fw.rules().rule_count(), fw.state_table().limit(), fw.state_table().len()),
        (2, 4, 1)
    );
    slot.publish(compile("set limit states 8\npass all no state\n")).unwrap();
    send(&mut w, 1001);
    assert_eq!(
        (w.firewall().unwrap().rules().rule_count(), w.firewall().unwrap().state_table().limit()),
        (1, 8)
    );
}

/// Counts forwarded frames by UDP destination port (frames are IPv4 without options).
#[derive(Default)]
struct ByPortTx {
    by_dport: [u64; 8],
    stats: PortStats,
}

impl TxPort for ByPortTx {
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        for d in batch.drain() {
            let f = pool.frame(d);
            let dport = u16::from_be_bytes([f[36], f[37]]) as usize;
            self.by_dport[dport.min(7)] += 1;
            self.stats.tx_packets += 1;
            pool.free(d);
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// A worker forwards four flows while another thread swaps between two rule sets thousands
/// of times, waiting each time until the worker has adopted the new set. Flow 1 passes in
/// both sets, flow 4 is blocked by both, flows 2 and 3 are blocked by one set each: each
/// packet must get the outcome of one of the two sets (so flows 1 and 4 never vary, flows 2
/// and 3 see both outcomes), and every packet is accounted for.
#[test]
fn reload_race_every_packet_gets_old_or_new_verdict() {
    let set_a = compile("block in quick proto udp to port { 2 4 }\npass in proto udp no state\n");
    let set_b = compile("block in quick proto udp to port { 3 4 }\npass in proto udp no state\n");
    let frames: Vec<_> = (1..=4).map(|p| udp(0, A_HOST, 1000, FAR, p)).collect();
    let rx = vec![ReplayRx::new(0, frames)];
    let tx = vec![ByPortTx::default(), ByPortTx::default()];
    // Batch 64 of a 4-frame loop: every batch holds 16 packets of each flow.
    let mut w = Worker::new(fib(), &ports(), rx, tx, CountingTx::new(), FramePool::new(600), 64);
    let slot = RulesSlot::new(Arc::clone(&set_a));
    w.set_firewall(Firewall::new(Arc::clone(&slot), 1));
    let stats = w.firewall_stats().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let worker_stop = Arc::clone(&stop);
    let handle = std::thread::spawn(move || {
        w.run(&worker_stop);
        w
    });
    const SWAPS: u64 = 3000;
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in 1..=SWAPS {
        slot.publish(Arc::clone(if i % 2 == 1 { &set_b } else { &set_a })).unwrap();
        while stats.generation() < i {
            assert!(Instant::now() < deadline, "worker stopped adopting rule sets at swap {i}");
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let w = handle.join().unwrap();
    let c = w.counts();
    assert_eq!(c.rx, c.forwarded + c.local + c.dropped(), "{c:?}");
    assert_eq!(c.dropped(), drops(&c, DropReason::FilterBlocked), "{c:?}");
    // The replay port delivers the four flows in turn: flow k got this many packets.
    let received = |k: u64| c.rx / 4 + u64::from((k - 1) < c.rx % 4);
    let fwd = &w.tx[1].by_dport;
    assert_eq!(fwd[1], received(1), "flow 1 passes in both sets");
    assert_eq!(fwd[4], 0, "flow 4 is blocked in both sets");
    for k in [2, 3] {
        assert!(
            fwd[k] > 0 && fwd[k] < received(k as u64),
            "flow {k}: {} of {} forwarded",
            fwd[k],
            received(k as u64)
        );
    }
    let blocked: u64 = (1..=4).map(|k| received(k) - fwd[k as usize]).sum();
    assert_eq!(blocked, drops(&c, DropReason::FilterBlocked));
    assert_eq!(stats.generation(), SWAPS);
}

/// How a test packet of [`quick_loop_agrees_with_lookups_in_order`] is shaped.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Plain,
    IpOptions,
    /// A first fragment (MF set): the fast path reads it.
    FirstFragment,
    /// A later fragment: no ports, so the flow of ports 0.
    LaterFragment,
    /// A UDP length longer than the datagram: no ports either.
    BadUdpLength,
    /// A TCP ACK with the UDP flow's addresses and ports.
    Tcp,
    /// The same ports over IPv6: a batch with one takes the quick loop's general form (it
    /// reads every packet's decision), a batch of IPv4 alone its list of IPv4 headers.
    Ipv6,
    /// IPv6 with the UDP header behind a destination options header (padding only): the
    /// quick loop cannot read it.
    Ipv6DestOpts,
    /// IPv6 with a UDP length longer than the datagram.
    Ipv6BadUdpLength,
}

/// A packet of flow `flow` (source port; 0 is the flow of ports 0), from A's side or the
/// far side (`back`), all received on port 0 so that both directions share batches.
fn shaped(flow: u16, back: bool, shape: Shape) -> Vec<u8> {
    let (sport, dport) = if flow == 0 { (0, 0) } else { (flow, 53) };
    let mut f =
        if back { udp(0, FAR, dport, A_HOST, sport) } else { udp(0, A_HOST, sport, FAR, dport) };
    if let Shape::Ipv6 | Shape::Ipv6DestOpts | Shape::Ipv6BadUdpLength = shape {
        // Routed both ways in `frames::world`.
        let (a, b): (IpAddr, IpAddr) = (A6.into(), FAR6.into());
        let (src, dst, src_port, dst_port) =
            if back { (b, a, dport, sport) } else { (a, b, sport, dport) };
        let flow = UdpFlow {
            src_mac: MacAddr([2, 0, 0, 0, 0, 0x99]),
            dst_mac: RX_MAC,
            src,
            dst,
            src_port,
            dst_port,
            ttl: 64,
        };
        let mut buf = vec![0u8; 128];
        let n = udp_frame(&flow, 80, &mut buf).unwrap();
        buf.truncate(n);
        match shape {
            Shape::Ipv6DestOpts => {
                // Next header UDP, length 0 (8 bytes), PadN of 4.
                buf.splice(54..54, [17, 0, 1, 4, 0, 0, 0, 0]);
                buf[20] = 60;
                let payload = u16::from_be_bytes([buf[18], buf[19]]) + 8;
                buf[18..20].copy_from_slice(&payload.to_be_bytes());
            }
            Shape::Ipv6BadUdpLength => buf[58..60].copy_from_slice(&200u16.to_be_bytes()),
            _ => {}
        }
        return buf;
    }
    if let Shape::Tcp = shape {
        return if back {
            tcp(0, FAR, dport, A_HOST, sport, 0x10, 7, 8)
        } else {
            tcp(0, A_HOST, sport, FAR, dport, 0x10, 7, 8)
        };
    }
    if let Shape::IpOptions = shape {
        f.splice(34..34, [1, 1, 1, 0]);
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
        ip.set_header_len(24);
        ip.set_total_len(ip.total_len() + 4);
    }
    if let Shape::BadUdpLength = shape {
        f[38..40].copy_from_slice(&200u16.to_be_bytes());
    }
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    match shape {
        Shape::FirstFragment => ip.set_more_frags(true),
        Shape::LaterFragment => ip.set_frag_offset(8),
        _ => {}
    }
    ip.fill_checksum();
    f
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
    /// The quick loop (established UDP flows first, the rest of the batch in order after)
    /// against every packet looked up in order: the same forwarding and drop counts, per-rule
    /// counters, state counters and states (pseudo-states, timeout kinds), for tables under
    /// the cache threshold (where the classify pass reads the flows of IPv4-only batches) and
    /// one over it. Random batches of two UDP flows and the flow of
    /// ports 0, in both directions, in every shape (more than half are not plain, so that a
    /// packet the quick loop cannot read often falls between packets it takes): IP options,
    /// fragments and odd UDP lengths (these two fall on the flow of ports 0), TCP packets on
    /// the same addresses and ports, IPv6 packets of the same ports, plain, behind a
    /// destination options header or with an odd UDP length. (It fails within a few hundred cases if the quick loop
    /// lets a packet jump ahead of an IP-options one of its flow.)
    #[test]
    fn quick_loop_agrees_with_lookups_in_order(
        packets in proptest::collection::vec((0u16..3, proptest::bool::ANY, 0u8..13), 1..120),
        cuts in proptest::collection::vec(1usize..24, 1..40),
    ) {
        use fw::state::StateId;
        let shape = |s: u8| match s {
            0 => Shape::IpOptions,
            1 => Shape::FirstFragment,
            2 => Shape::LaterFragment,
            3 => Shape::BadUdpLength,
            4 => Shape::Tcp,
            9 => Shape::Ipv6,
            10 => Shape::Ipv6DestOpts,
            11 => Shape::Ipv6BadUdpLength,
            _ => Shape::Plain,
        };
        let frames: Vec<Vec<u8>> = packets.iter().map(|&(f, back, s)| shaped(if f == 0 { 0 } else { 1000 + f }, back, shape(s))).collect();
        let mut batches = Vec::new();
        let (mut rest, mut c) = (&frames[..], cuts.iter().cycle());
        while !rest.is_empty() {
            let n = (*c.next().unwrap()).min(rest.len());
            let mut batch = rest[..n].to_vec();
            // Every third batch starts with an IPv6 packet: both forms of the quick loop.
            if batches.len() % 3 == 2 {
                batch.insert(0, shaped(1, false, Shape::Ipv6));
            }
            batches.push(batch);
            rest = &rest[n..];
        }
        // Tables under the cache threshold, one small enough for pf's adaptive timeouts to
        // keep the quick loop off (the quick loop takes only states that the batch's
        // inserts cannot make expire) and one not, and one over the threshold (the batched
        // lookup).
        for (limit, prefill) in [(64, 0), (10_000, 0), (200_000, BATCHED_PREFILL)] {
            let outcome = |quick: bool| {
                let mut w = Worker::new(fib(), &ports(), vec![ReplayRx::new(0, Vec::<Vec<u8>>::new())], vec![CountingTx::new(), CountingTx::new()], CountingTx::new(), FramePool::new(600), 256);
                let rules = format!("set limit states {limit}\nblock all\npass all keep state\n");
                let mut fw = Firewall::new(RulesSlot::new(compile(&rules)), 5);
                fw.set_quick_loop(quick);
                w.set_firewall(fw);
                prefill_states(&mut w, prefill);
                for b in &batches {
                    w.rx[0] = ReplayRx::new(0, b.clone()).once();
                    while !w.rx[0].finished() {
                        w.poll();
                    }
                }
                let stats = w.firewall_stats().unwrap();
                let table = w.firewall().unwrap().state_table();
                let infos: Vec<_> = (prefill..prefill + 64).map(|id| table.info(StateId(id as u32))).collect();
                (w.counts(), stats.rules().snapshot(), stats.states().to_vec(), infos)
            };
            let (quick, ordered) = (outcome(true), outcome(false));
            proptest::prop_assert_eq!(&quick.0, &ordered.0, "limit {}", limit);
            proptest::prop_assert_eq!(&quick.1, &ordered.1, "limit {}", limit);
            proptest::prop_assert_eq!(&quick.2, &ordered.2, "limit {}", limit);
            proptest::prop_assert_eq!(&quick.3, &ordered.3, "limit {}", limit);
        }
    }
}

/// Runs frames received on port 0 then port 1 through a worker with `rules` and a log ring;
/// returns the records (rule, id, action, dir, interface, IP bytes).
fn logged(
    rules: &str,
    per_port: [Vec<Vec<u8>>; 2],
) -> Vec<(u32, String, fw::rules::Action, fw::packet::Dir, u16, Vec<u8>)> {
    use dataplane::firewall::log::log_ring;
    let [a, b] = per_port;
    let rx = vec![ReplayRx::new(0, a).once(), ReplayRx::new(1, b).once()];
    let mut w = Worker::new(
        fib(),
        &ports(),
        rx,
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    let mut fw = Firewall::new(RulesSlot::new(compile(rules)), 7);
    let (sink, mut ring) = log_ring(64, 128, 1_000_000);
    fw.set_log(sink);
    w.set_firewall(fw);
    while !(w.rx[0].finished() && w.rx[1].finished()) {
        w.poll();
    }
    let mut out = Vec::new();
    while ring.consumer.pop_with(|r| {
        out.push((r.rule, r.id().to_owned(), r.action, r.dir, r.iface, r.packet().to_vec()))
    }) {}
    out
}

#[test]
fn log_records_the_packets_its_rules_decide() {
    use fw::packet::Dir::In;
    use fw::rules::Action::{Block, Pass};
    let rules = "block in log quick proto udp to port 9999\npass in log proto udp to port 53 label \"dns\"\npass in proto udp to port 54\n";
    let frames = vec![
        udp(0, A_HOST, 1000, FAR, 9999),
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, A_HOST, 1000, FAR, 53), // the state's: not logged
        udp(0, A_HOST, 1001, FAR, 53),
        udp(0, A_HOST, 1001, FAR, 54), // a rule without log
    ];
    let recs = logged(rules, [frames.clone(), vec![]]);
    let summary: Vec<_> = recs.iter().map(|r| (r.0, r.2, r.3, r.4)).collect();
    assert_eq!(summary, [(0, Block, In, 0), (1, Pass, In, 0), (1, Pass, In, 0)]);
    assert_eq!(recs[1].1, "dns");
    assert_eq!(recs[0].1.len(), 8, "no label: a hash, {:?}", recs[0].1);
    assert_eq!(recs[0].5, frames[0][14..], "the IP packet, whole (46 bytes < snap length)");
}

#[test]
fn log_all_logs_every_packet_of_its_states_and_out_rules_log_out() {
    use fw::packet::Dir::{In, Out};
    use fw::rules::Action::{Block, Pass};
    let rules = "pass in log (all) proto udp to port 53\nblock out log on b proto udp to port 7\npass in proto udp to port 7 no state\n";
    let a = vec![
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, A_HOST, 1000, FAR, 7),
    ];
    let reply = vec![udp(1, FAR, 53, A_HOST, 1000)];
    let recs = logged(rules, [a, reply]);
    let summary: Vec<_> = recs.iter().map(|r| (r.0, r.2, r.3, r.4)).collect();
    assert_eq!(summary, [(0, Pass, In, 0), (0, Pass, In, 0), (1, Block, Out, 1), (0, Pass, In, 1)]);
    // The out pass sees the packet after routing: TTL decremented.
    assert_eq!(recs[2].5[8], 63);
}

/// A capture armed in a worker copies the frames at its point: as received, as sent (L2
/// rewritten, TTL decremented), or dropped with the reason.
#[test]
fn capture_at_rx_tx_and_drop() {
    use dataplane::tap::{CaptureSpec, Point, arm_all};
    let frames = vec![udp(0, A_HOST, 1000, FAR, 9999), udp(0, A_HOST, 1000, FAR, 53)];
    for point in [Point::Rx, Point::Tx, Point::Drop] {
        let rx = vec![ReplayRx::new(0, frames.clone()).once()];
        let mut w = Worker::new(
            fib(),
            &ports(),
            rx,
            vec![CountingTx::new(), CountingTx::new()],
            CountingTx::new(),
            FramePool::new(600),
            256,
        );
        w.set_firewall(Firewall::new(
            RulesSlot::new(compile("block in quick proto udp to port 9999\n")),
            7,
        ));
        let mut cap =
            arm_all(&[w.capture_slot()], CaptureSpec { point, port: None, snap: 1500 }, 16);
        while !w.rx[0].finished() {
            w.poll();
        }
        let mut got = Vec::new();
        while cap.rings[0].pop_with(|r| got.push((r.port, r.reason, r.frame().to_vec()))) {}
        match point {
            Point::Rx => {
                assert_eq!(got, [(0, None, frames[0].clone()), (0, None, frames[1].clone())])
            }
            Point::Drop => {
                assert_eq!(got, [(0, Some(DropReason::FilterBlocked), frames[0].clone())])
            }
            Point::Tx => {
                assert_eq!(got.len(), 1);
                let (port, reason, f) = &got[0];
                assert_eq!((*port, *reason, &f[0..6], f[14 + 8]), (1, None, &B_MAC.0[..], 63));
            }
        }
        drop(cap);
        w.poll();
    }
}

/// A rule's own state timeouts (`keep state (udp.multiple 9)`) reach the worker's table: its
/// states are refreshed by them, on the quick loop's batches too, while another rule's
/// states keep the rule set's.
#[test]
fn a_rules_own_timeouts_refresh_its_states_in_the_worker() {
    use fw::state::{StateId, Tmo};
    let rules = "pass in on a proto udp to port 53 keep state (udp.multiple 9)\npass in on a proto udp to port 54 keep state\n";
    let mut w = Worker::new(
        fib(),
        &ports(),
        vec![ReplayRx::new(0, Vec::<Vec<u8>>::new())],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    w.set_firewall(Firewall::new(RulesSlot::new(compile(rules)), 3));
    let out = |port| udp(0, A_HOST, 1000, FAR, port);
    let back = |port| udp(0, FAR, port, A_HOST, 1000);
    let batches = [
        vec![out(53), out(54)],
        vec![out(53), out(54)],
        vec![back(53), back(54), out(53), out(54)],
        vec![out(53), out(54)],
        vec![out(53), out(54)],
    ];
    for batch in batches {
        w.rx[0] = ReplayRx::new(0, batch).once();
        while !w.rx[0].finished() {
            w.poll();
        }
    }
    assert_eq!(w.counts().forwarded, 12, "{:?}", w.counts());
    let t = w.firewall().unwrap().state_table();
    let (own, plain) = (t.info(StateId(0)).unwrap(), t.info(StateId(1)).unwrap());
    assert_eq!((own.rule, own.timeout, own.timeout_secs), (0, Tmo::UdpMultiple, 9));
    assert_eq!((plain.rule, plain.timeout, plain.timeout_secs), (1, Tmo::UdpMultiple, 60));
    // Both refreshed by the last batch: 9 s against the rule set's 60.
    assert_eq!(plain.expire - own.expire, 60 - 9);
}
