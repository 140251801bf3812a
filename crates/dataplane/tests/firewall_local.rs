//! The router's own packets through the firewall (`docs/firewall.md`, "The router's own
//! packets"): what the host stack sends takes pf's outbound pass on its interface, through
//! the worker of its flow (`dataplane::host_out`), and what it keeps or matches decides what
//! comes back.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use dataplane::counters::{Counts, DropReason};
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::host_out::host_out_channels;
use dataplane::ports::PortInfo;
use dataplane::worker::Worker;
use io::TxPort;
use io::mem::{CountingTx, ReplayRx};
use io::pool::FramePool;
use wire::icmp_reply::{IcmpError, icmp_error};

mod frames;
use frames::world::{A_HOST, FAR, fib, ifaces};
use frames::{RX_MAC, TX_MAC, tcp, udp};

const ROUTER_B: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

type TestWorker = Worker<ReplayRx, CountingTx, CountingTx>;

/// A worker with `rules` on ports if0 (0, A) and if1 (1, 10/8 behind it).
fn worker(rules: &str) -> TestWorker {
    let ports = [PortInfo::new("if0", RX_MAC, 0), PortInfo::new("if1", TX_MAC, 1)];
    let rx = vec![ReplayRx::new(0, Vec::<Vec<u8>>::new()), ReplayRx::new(1, Vec::<Vec<u8>>::new())];
    let mut w = Worker::new(
        fib(),
        &ports,
        rx,
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        64,
    );
    let rules = CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap();
    w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
    w
}

/// Receives `frame` on `port`.
fn receive(w: &mut TestWorker, port: u16, frame: Vec<u8>) -> Counts {
    let p = usize::from(port);
    w.rx[p] = ReplayRx::new(port, vec![frame]).once();
    while !w.rx[p].finished() {
        w.poll();
    }
    w.counts()
}

fn blocked(c: &Counts) -> u64 {
    c.drops[DropReason::FilterBlocked as usize]
}

/// `block all` + `pass out on if1 keep state`: the router's SYN leaves (the worker sends it
/// on if1) and keeps a state, so the SYN-ACK that comes back passes the in rules it would
/// otherwise fail; a SYN-ACK of a connection the router never opened is blocked.
#[test]
fn the_routers_own_connection_keeps_state_for_its_replies() {
    let mut w = worker("block all\npass out on if1 keep state\n");
    let (mut to_workers, mut queues) = host_out_channels(1, vec![false, false]).unwrap();
    w.set_host_out(queues.remove(0));
    let syn = tcp(1, ROUTER_B, 40000, FAR, 179, SYN, 1000, 0);
    assert!(to_workers.send(1, 1, &syn, &syn));
    w.poll();
    assert_eq!(w.tx[1].stats().tx_packets, 1, "the router's SYN left by if1");
    let before = blocked(&w.counts());
    // Replies to the router: passed by the state, then not routed here (no local address in
    // this FIB), so counted as no_route rather than filter_blocked.
    let c = receive(&mut w, 1, tcp(1, FAR, 179, ROUTER_B, 40000, SYN | ACK, 7000, 1001));
    assert_eq!(blocked(&c), before, "the SYN-ACK passed by the state: {c:?}");
    let c = receive(&mut w, 1, tcp(1, FAR, 179, ROUTER_B, 40001, SYN | ACK, 7000, 1001));
    assert_eq!(blocked(&c), before + 1, "no state for port 40001: {c:?}");
}

/// A state made by a connection to the router tracks the router's replies: out-rules that
/// would block them do not apply (the state decides), and its TCP window moves with them.
#[test]
fn a_connection_to_the_router_passes_its_replies_by_state() {
    let mut w = worker(
        "block all\npass in on if0 proto tcp to port 22 keep state\nblock out quick on if0 proto tcp\n",
    );
    let c = receive(&mut w, 0, tcp(0, A_HOST, 50000, ROUTER_B, 22, SYN, 1000, 0));
    assert_eq!(blocked(&c), 0, "{c:?}");
    let fw = w.firewall_mut().unwrap();
    let syn_ack = tcp(0, ROUTER_B, 22, A_HOST, 50000, SYN | ACK, 9000, 1001);
    assert_eq!(
        fw.local_out(&syn_ack, 14, true, 0),
        Ok(()),
        "the state passes the reply, before the out rules"
    );
    let other = tcp(0, ROUTER_B, 23, A_HOST, 50000, SYN | ACK, 9000, 1001);
    assert_eq!(
        fw.local_out(&other, 14, true, 0),
        Err(DropReason::FilterBlocked),
        "no state: `block out quick` decides"
    );
}

/// An ICMP error the router sends about a tracked flow passes by that flow's state, with no
/// `pass out` rule; one about a flow without a state is blocked.
#[test]
fn the_routers_icmp_errors_pass_by_the_quoted_flows_state() {
    let mut w =
        worker("block all\npass in on if0 proto udp keep state\npass out on if1 proto udp\n");
    let datagram = udp(0, A_HOST, 1000, FAR, 53);
    let c = receive(&mut w, 0, datagram.clone());
    assert_eq!((c.forwarded, blocked(&c)), (1, 0), "{c:?}");
    let mut buf = [0u8; 1400];
    let n =
        icmp_error(&datagram, IcmpError::TimeExceeded, ROUTER_B.into(), RX_MAC, &mut buf).unwrap();
    let fw = w.firewall_mut().unwrap();
    assert_eq!(fw.local_out(&buf[..n], 14, true, 0), Ok(()));
    let untracked = udp(0, A_HOST, 1001, FAR, 53);
    let n =
        icmp_error(&untracked, IcmpError::TimeExceeded, ROUTER_B.into(), RX_MAC, &mut buf).unwrap();
    assert_eq!(fw.local_out(&buf[..n], 14, true, 0), Err(DropReason::FilterBlocked));
}
