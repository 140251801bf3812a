//! pf's semantics on real frames through a worker: the out rules of the output interface
//! apply to flows whose in pass created a state, `set state-policy if-bound`, ICMP query
//! states keyed by identifier, IP options blocked unless `allow-opts`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use dataplane::counters::{Counts, DropReason};
use dataplane::fib::{Fib, FibControl};
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::ports::PortInfo;
use dataplane::worker::Worker;
use io::TxPort;
use io::mem::{CountingTx, ReplayRx};
use io::pool::FramePool;
use wire::build::{icmpv4_echo_frame, udp_frame};
use wire::{Ipv4Packet, MacAddr};

mod frames;
use frames::{RX_MAC, TX_MAC, flow, udp};

const A_HOST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const A_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa2]);
/// A second host behind port a.
const A_HOST2: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
const A_MAC2: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa3]);
const B_GW: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
const B_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb2]);
const FAR: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 1);
const BAD: Ipv4Addr = Ipv4Addr::new(10, 6, 6, 6);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xa, 0, 0, 0, 0, 2);
const FAR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xf, 0, 0, 0, 0, 1);
const B_GW6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 2);

/// Port 0 ("a") faces host A (198.18.0.2, 2001:db8:a::2); port 1 ("b") leads to 10/8 and
/// 2001:db8:f::/48.
fn fib() -> Arc<Fib> {
    static FIB: OnceLock<Arc<Fib>> = OnceLock::new();
    FIB.get_or_init(|| {
        let mut ctl = FibControl::new(64);
        ctl.set_neighbour(IpAddr::V4(A_HOST), 0, A_MAC).unwrap();
        ctl.set_neighbour(IpAddr::V4(A_HOST2), 0, A_MAC2).unwrap();
        ctl.set_neighbour(IpAddr::V4(B_GW), 1, B_MAC).unwrap();
        ctl.set_neighbour(IpAddr::V6(A6), 0, A_MAC).unwrap();
        ctl.set_neighbour(IpAddr::V6(B_GW6), 1, B_MAC).unwrap();
        ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, IpAddr::V4(B_GW), 1).unwrap();
        ctl.add_route(IpAddr::V6(FAR6), 48, IpAddr::V6(B_GW6), 1).unwrap();
        ctl.fib()
    })
    .clone()
}

fn ifaces(name: &str) -> Option<u16> {
    ["a", "b"].iter().position(|n| *n == name).map(|i| i as u16)
}

/// A TCP segment with `flags` received on `port`.
fn tcp(port: u16, src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, flags: u8) -> Vec<u8> {
    frames::tcp(port, src, sport, dst, dport, flags, 1000, if flags & 0x10 != 0 { 5001 } else { 0 })
}

/// An ICMP echo request (`reply`: echo reply) with identifier `id`, received on `port`.
fn ping(port: u16, src: Ipv4Addr, dst: Ipv4Addr, id: u16, reply: bool) -> Vec<u8> {
    let mut buf = vec![0u8; 128];
    let n =
        icmpv4_echo_frame(&flow(port, src.into(), 0, dst.into(), 0), id, 1, b"linerate", &mut buf)
            .unwrap();
    buf.truncate(n);
    if reply {
        let mut icmp = wire::Icmpv4Packet::new_unchecked(&mut buf[34..]);
        icmp.set_msg_type(wire::Icmpv4Type::EchoReply);
        icmp.fill_checksum();
    }
    buf
}

/// `frame` (an IPv4 frame) with `opts` inserted after the IP header's first 20 bytes.
fn with_ipv4_options(mut frame: Vec<u8>, opts: &[u8]) -> Vec<u8> {
    assert_eq!(opts.len() % 4, 0);
    frame.splice(34..34, opts.iter().copied());
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
    ip.set_header_len(20 + opts.len());
    ip.set_total_len(ip.total_len() + opts.len() as u16);
    ip.fill_checksum();
    frame
}

/// A UDP datagram over IPv6 from A to FAR (received on port a), with extension header
/// `ext` (next header value `kind`, its own next header set here to UDP) if given.
fn udp6(ext: Option<(u8, Vec<u8>)>) -> Vec<u8> {
    let mut buf = vec![0u8; 256];
    let n = udp_frame(&flow(0, A6.into(), 1000, FAR6.into(), 53), 90, &mut buf).unwrap();
    buf.truncate(n);
    if let Some((kind, mut hdr)) = ext {
        hdr[0] = 17;
        let len = hdr.len() as u16;
        buf.splice(54..54, hdr);
        buf[20] = kind;
        let plen = u16::from_be_bytes([buf[18], buf[19]]) + len;
        buf[18..20].copy_from_slice(&plen.to_be_bytes());
    }
    buf
}

/// Runs `per_port[p]` received on port p (port 0's frames first) through a worker with `rules`.
fn run(
    rules: &str,
    per_port: [Vec<Vec<u8>>; 2],
) -> (Counts, Worker<ReplayRx, CountingTx, CountingTx>) {
    let [a, b] = per_port;
    let rx = vec![ReplayRx::new(0, a).once(), ReplayRx::new(1, b).once()];
    let ports = [PortInfo::new("a", RX_MAC, 0), PortInfo::new("b", TX_MAC, 1)];
    let mut w = Worker::new(
        fib(),
        &ports,
        rx,
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    let rules = CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap();
    w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
    while !(w.rx[0].finished() && w.rx[1].finished()) {
        w.poll();
    }
    let c = w.counts();
    assert_eq!(c.rx, c.forwarded + c.local + c.dropped(), "{c:?}");
    (c, w)
}

/// Runs frames one batch at a time (each batch sees the states of the previous ones), all
/// received on the port each says.
fn run_batches(rules: &str, batches: Vec<(u16, Vec<u8>)>) -> Counts {
    let ports = [PortInfo::new("a", RX_MAC, 0), PortInfo::new("b", TX_MAC, 1)];
    let mut w = Worker::new(
        fib(),
        &ports,
        vec![ReplayRx::new(0, Vec::<Vec<u8>>::new()), ReplayRx::new(1, Vec::<Vec<u8>>::new())],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    let rules = CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap();
    w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
    for (port, frame) in batches {
        let p = usize::from(port);
        w.rx[p] = ReplayRx::new(port, vec![frame]).once();
        while !w.rx[p].finished() {
            w.poll();
        }
    }
    w.counts()
}

fn drops(c: &Counts, r: DropReason) -> u64 {
    c.drops[r as usize]
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

/// Issue 17's case: `pass in on a` creates the flow's state, yet `block out quick on b`
/// (a port, a table) must still stop it on the way out, in every packet of the flow; other
/// flows pass both ways.
#[test]
fn out_rules_stop_flows_an_in_rule_passed() {
    let rules = "table <blocklist> { 10.6.0.0/16 }\nblock all\npass in on a\npass out on b\n\
                 block out quick on b proto tcp to port 8099\nblock out quick on b to <blocklist>\n";
    let out = vec![
        tcp(0, A_HOST, 40000, FAR, 8099, SYN),
        tcp(0, A_HOST, 40000, FAR, 8099, SYN),
        tcp(0, A_HOST, 40001, BAD, 80, SYN),
        udp(0, A_HOST, 1000, BAD, 53),
        tcp(0, A_HOST, 40002, FAR, 80, SYN),
        udp(0, A_HOST, 1000, FAR, 53),
    ];
    let back = vec![tcp(1, FAR, 80, A_HOST, 40002, SYN | ACK), udp(1, FAR, 53, A_HOST, 1000)];
    let (c, w) = run(rules, [out, back]);
    assert_eq!(
        drops(&c, DropReason::FilterBlocked),
        4,
        "port 8099 twice, the blocklist twice: {c:?}"
    );
    assert_eq!(c.forwarded, 4, "{c:?}");
    assert_eq!(w.tx[0].stats().tx_packets, 2, "both replies reached A");
    let stats = w.firewall_stats().unwrap().rules().snapshot();
    assert_eq!(
        (stats[3].packets, stats[4].packets),
        (2, 2),
        "the out rules counted what they blocked"
    );
}

/// `set state-policy if-bound`: a state matches only on the interface it was created on. A
/// packet of the flow's reply direction arriving on the wrong interface (a), which the
/// rules of a do not pass, is blocked; floating states let it through.
#[test]
fn if_bound_states_match_on_their_interface_only() {
    let rules = |policy: &str| {
        format!(
            "set state-policy {policy}\nblock all\npass in on a proto udp from 198.18.0.0/24\npass out on b proto udp\n"
        )
    };
    let frames = || {
        vec![
            (0, udp(0, A_HOST, 1000, FAR, 53)),
            (1, udp(1, FAR, 53, A_HOST, 1000)),
            // The reply direction, but received on a: spoofed, or a routing change.
            (0, udp(0, FAR, 53, A_HOST, 1000)),
        ]
    };
    let c = run_batches(&rules("if-bound"), frames());
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (2, 1), "{c:?}");
    let c = run_batches(&rules("floating"), frames());
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (3, 0), "{c:?}");
}

/// pf keys ICMP query states by identifier: after A pings FAR, FAR's replies with A's
/// identifier pass; a reply with another identifier, and echo requests from FAR to A (with
/// A's identifier or another), are blocked.
#[test]
fn icmp_query_states_pass_only_their_replies() {
    let rules = "block all\npass in on a proto icmp\npass out on b proto icmp\n";
    let out = vec![ping(0, A_HOST, FAR, 7, false)];
    let back = vec![
        ping(1, FAR, A_HOST, 7, true),
        ping(1, FAR, A_HOST, 8, true),
        ping(1, FAR, A_HOST, 7, false),
        ping(1, FAR, A_HOST, 99, false),
    ];
    let (c, w) = run(rules, [out, back]);
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (2, 3), "{c:?}");
    assert_eq!(w.tx[0].stats().tx_packets, 1, "the reply reached A");
}

/// IPv4 options other than padding are dropped as `ip_options` unless the rule that passes
/// the packet (each pass's rule, or the state that passes it) has `allow-opts`; pf's
/// default pass has none. Padding alone (NOP, EOL) is no option.
#[test]
fn ip_options_need_allow_opts_in_both_passes() {
    const RECORD_ROUTE: [u8; 8] = [7, 7, 4, 0, 0, 0, 0, 1];
    let opts = || with_ipv4_options(udp(0, A_HOST, 1000, FAR, 53), &RECORD_ROUTE);
    let padding = || with_ipv4_options(udp(0, A_HOST, 1001, FAR, 53), &[1, 1, 1, 0]);
    // Stateless: the in rule passes without allow-opts; the out pass is pf's default.
    let (c, _) = run("pass in proto udp no state\n", [vec![opts(), padding()], vec![]]);
    assert_eq!((c.forwarded, drops(&c, DropReason::IpOptions)), (1, 1), "{c:?}");
    let (c, _) = run("pass in proto udp allow-opts no state\n", [vec![opts()], vec![]]);
    assert_eq!(
        drops(&c, DropReason::IpOptions),
        1,
        "the out pass's default lacks allow-opts: {c:?}"
    );
    let (c, _) = run("pass proto udp allow-opts no state\n", [vec![opts()], vec![]]);
    assert_eq!(c.forwarded, 1, "{c:?}");
    // Stateful: the states keep their rule's allow-opts, both ways.
    let reply = || with_ipv4_options(udp(1, FAR, 53, A_HOST, 1000), &RECORD_ROUTE);
    let rules =
        "block all\npass in on a proto udp allow-opts\npass out on b proto udp allow-opts\n";
    let c = run_batches(rules, vec![(0, opts()), (0, opts()), (1, reply())]);
    assert_eq!(c.forwarded, 3, "{c:?}");
    let rules = "block all\npass in on a proto udp allow-opts\npass out on b proto udp\n";
    let c = run_batches(rules, vec![(0, udp(0, A_HOST, 1000, FAR, 53)), (0, opts()), (1, reply())]);
    assert_eq!(
        (c.forwarded, drops(&c, DropReason::IpOptions)),
        (1, 2),
        "the out state lacks allow-opts: {c:?}"
    );
}

/// IPv6: a routing header, or hop-by-hop options other than padding, count as options; a
/// hop-by-hop header holding only PadN does not.
#[test]
fn ipv6_routing_and_hop_by_hop_headers_need_allow_opts() {
    // Routing header type 4 (segment routing), no segments left: 8 bytes.
    let routing = (43, vec![0, 0, 4, 0, 0, 0, 0, 0]);
    // Hop-by-hop with a router alert (5, length 2, value 0) and a PadN of 2.
    let alert = (0, vec![0, 0, 5, 2, 0, 0, 1, 0]);
    let pad_only = (0, vec![0, 0, 1, 4, 0, 0, 0, 0]);
    let rules = "pass proto udp no state\n";
    let (c, _) = run(
        rules,
        [
            vec![
                udp6(None),
                udp6(Some(routing.clone())),
                udp6(Some(alert.clone())),
                udp6(Some(pad_only)),
            ],
            vec![],
        ],
    );
    assert_eq!((c.forwarded, drops(&c, DropReason::IpOptions)), (2, 2), "{c:?}");
    let (c, _) = run(
        "pass proto udp allow-opts no state\n",
        [vec![udp6(Some(routing)), udp6(Some(alert))], vec![]],
    );
    assert_eq!(c.forwarded, 2, "{c:?}");
}

/// Without a firewall, options are forwarded as before (pf is not in the path).
#[test]
fn without_a_firewall_options_pass() {
    let ports = [PortInfo::new("a", RX_MAC, 0), PortInfo::new("b", TX_MAC, 1)];
    let frames = vec![with_ipv4_options(udp(0, A_HOST, 1000, FAR, 53), &[7, 7, 4, 0, 0, 0, 0, 1])];
    let mut w = Worker::new(
        fib(),
        &ports,
        vec![ReplayRx::new(0, frames).once()],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    while !w.rx[0].finished() {
        w.poll();
    }
    assert_eq!(w.counts().forwarded, 1, "{:?}", w.counts());
}

/// pf's `urpf-failed`: a source whose route does not leave by the receiving interface (a
/// spoofed 10/8 source on port a, where 10/8 is routed via b), or has no route at all, is
/// blocked; A's own and FAR's genuine packets pass.
#[test]
fn urpf_failed_blocks_sources_routed_elsewhere() {
    let stranger = Ipv4Addr::new(203, 0, 113, 9);
    let rules = "block in quick from urpf-failed\npass all no state\n";
    let out = vec![
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, FAR, 1000, BAD, 53),
        udp(0, stranger, 1000, FAR, 53),
    ];
    let (c, _) = run(rules, [out, vec![udp(1, FAR, 53, A_HOST, 1000)]]);
    assert_eq!(drops(&c, DropReason::FilterBlocked), 2, "{c:?}");
    assert_eq!(c.forwarded, 2, "{c:?}");
    // Without a direction, as pf: on the way out of b, A's source is routed via a.
    let (c, _) = run(
        "block quick from urpf-failed\npass all no state\n",
        [vec![udp(0, A_HOST, 1000, FAR, 53)], vec![]],
    );
    assert_eq!((drops(&c, DropReason::FilterBlocked), c.forwarded), (1, 0), "{c:?}");
}

/// pf's `no-route`: `from no-route` blocks sources no route covers; `to no-route` stops a
/// packet to an unrouted destination in the filter, before the router's own no-route drop
/// (and its ICMP error).
#[test]
fn no_route_hosts_follow_the_fib() {
    let stranger = Ipv4Addr::new(203, 0, 113, 9);
    let out = vec![
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, FAR, 1000, BAD, 53),
        udp(0, stranger, 1000, FAR, 53),
    ];
    let (c, _) = run("block in quick from no-route\npass all no state\n", [out, vec![]]);
    assert_eq!((drops(&c, DropReason::FilterBlocked), c.forwarded), (1, 2), "{c:?}");
    let out = vec![udp(0, A_HOST, 1000, stranger, 53), udp(0, A_HOST, 1000, FAR, 53)];
    let (c, _) = run("pass all no state\n", [out.clone(), vec![]]);
    assert_eq!(
        (drops(&c, DropReason::NoRoute), drops(&c, DropReason::FilterBlocked), c.forwarded),
        (1, 0, 1),
        "{c:?}"
    );
    let (c, _) = run("block in quick to no-route\npass all no state\n", [out, vec![]]);
    assert_eq!(
        (drops(&c, DropReason::NoRoute), drops(&c, DropReason::FilterBlocked), c.forwarded),
        (0, 1, 1),
        "{c:?}"
    );
    // `! no-route`: only routed destinations pass.
    let out = vec![udp(0, A_HOST, 1000, stranger, 53), udp(0, A_HOST, 1000, FAR, 53)];
    let (c, _) =
        run("block all\npass in to ! no-route no state\npass out no state\n", [out, vec![]]);
    assert_eq!((drops(&c, DropReason::FilterBlocked), c.forwarded), (1, 1), "{c:?}");
}

/// `keep state (max 2)` on real frames: the third flow is dropped under its own reason,
/// packets of the first two keep flowing.
#[test]
fn max_states_of_a_rule_drop_the_next_flow() {
    let rules = "block all\npass in on a proto udp keep state (max 2)\npass out on b proto udp keep state\n";
    let out = vec![
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, A_HOST, 1001, FAR, 53),
        udp(0, A_HOST, 1002, FAR, 53),
        udp(0, A_HOST, 1000, FAR, 53),
    ];
    let (c, w) = run(rules, [out, vec![udp(1, FAR, 53, A_HOST, 1001)]]);
    assert_eq!((c.forwarded, drops(&c, DropReason::RuleStateMax)), (4, 1), "{c:?}");
    assert_eq!(w.firewall().unwrap().state_table().limited_entries(), 2);
}

/// The three segments of a TCP handshake from `src:sport` (behind port a) to FAR:22, then
/// one segment of data from the client.
fn handshake(src: Ipv4Addr, sport: u16) -> Vec<(u16, Vec<u8>)> {
    vec![
        (0, frames::tcp(0, src, sport, FAR, 22, SYN, 1000, 0)),
        (1, frames::tcp(1, FAR, 22, src, sport, SYN | ACK, 5000, 1001)),
        (0, frames::tcp(0, src, sport, FAR, 22, ACK, 1001, 5001)),
    ]
}

/// A segment of data from the client of `handshake(src, sport)`.
fn data(src: Ipv4Addr, sport: u16) -> (u16, Vec<u8>) {
    (0, frames::tcp(0, src, sport, FAR, 22, ACK | 0x08, 1001, 5001))
}

/// `max-src-conn 2`: a source's third connection is refused when it becomes established
/// (its state removed: its next segment meets the rules, which want a SYN), while its first
/// two keep working and another source opens its own.
#[test]
fn max_src_conn_refuses_a_sources_third_connection() {
    let rules = "block all\npass in on a proto tcp to port 22 keep state (max-src-conn 2)\npass out on b proto tcp keep state\n";
    let mut frames = Vec::new();
    for sport in [4001, 4002, 4003] {
        frames.extend(handshake(A_HOST, sport));
    }
    frames.push(data(A_HOST, 4003));
    frames.extend(handshake(A_HOST2, 4001));
    frames.push(data(A_HOST, 4001));
    frames.push(data(A_HOST2, 4001));
    let c = run_batches(rules, frames);
    // 3 + 3 + 2 (the third's SYN and SYN-ACK) + 3 (the other source) + 2 (data).
    assert_eq!(
        (c.forwarded, drops(&c, DropReason::SrcConnLimit), drops(&c, DropReason::FilterBlocked)),
        (13, 1, 1),
        "{c:?}"
    );
}

/// `max-src-conn-rate 2/10`: connections that became established count for ten seconds
/// even once closed; the third within them is refused under its own reason.
#[test]
fn max_src_conn_rate_counts_closed_connections_too() {
    let rules = "block all\npass in on a proto tcp to port 22 keep state (max-src-conn-rate 2/10)\npass out on b proto tcp keep state\n";
    let mut frames = Vec::new();
    for sport in [4001, 4002] {
        frames.extend(handshake(A_HOST, sport));
        // Closed at once: a reset right after the ACK (and its bytes of payload).
        let payload = (frames.last().unwrap().1.len() - 54) as u32;
        frames.push((0, frames::tcp(0, A_HOST, sport, FAR, 22, 0x04 | ACK, 1001 + payload, 5001)));
    }
    frames.extend(handshake(A_HOST, 4003));
    frames.extend(handshake(A_HOST2, 4003));
    let c = run_batches(rules, frames);
    assert_eq!((c.forwarded, drops(&c, DropReason::SrcConnRateLimit)), (8 + 2 + 3, 1), "{c:?}");
}

/// `max-src-states 2` and `max-src-nodes 1` refuse new states, each under its reason.
#[test]
fn max_src_states_and_nodes_refuse_new_states() {
    let rules = "block all\npass in on a proto udp keep state (max-src-states 2)\npass in on a proto tcp keep state (max-src-nodes 1)\npass out on b keep state\n";
    let out = vec![
        udp(0, A_HOST, 1000, FAR, 53),
        udp(0, A_HOST, 1001, FAR, 53),
        udp(0, A_HOST, 1002, FAR, 53),
        udp(0, A_HOST2, 1002, FAR, 53),
        udp(0, A_HOST, 1000, FAR, 53),
        frames::tcp(0, A_HOST, 4000, FAR, 22, SYN, 1000, 0),
        frames::tcp(0, A_HOST, 4001, FAR, 22, SYN, 1000, 0),
        frames::tcp(0, A_HOST2, 4000, FAR, 22, SYN, 1000, 0),
    ];
    let (c, w) = run(rules, [out, vec![]]);
    assert_eq!(
        (c.forwarded, drops(&c, DropReason::SrcStateLimit), drops(&c, DropReason::SrcNodeLimit)),
        (6, 1, 1),
        "{c:?}"
    );
    let states: std::collections::HashMap<_, _> =
        w.firewall().unwrap().stats().states().into_iter().collect();
    assert_eq!((states["src_limit_states"], states["src_limit_nodes"]), (1, 1));
}

/// `overload <bad> flush global`: the source refused by `max-src-conn` goes into <bad>
/// (which `block quick from <bad>` then stops), and every state it opened is killed, of
/// this rule and of others; another source still connects.
#[test]
fn overload_adds_the_source_to_its_table_and_flushes_its_states() {
    let rules = "table <bad> persist\nblock all\nblock quick from <bad>\n\
                 pass in on a proto tcp to port 22 keep state (max-src-conn 1, overload <bad> flush global)\n\
                 pass in on a proto udp keep state\npass out on b keep state\n";
    let ports = [PortInfo::new("a", RX_MAC, 0), PortInfo::new("b", TX_MAC, 1)];
    let mut w = Worker::new(
        fib(),
        &ports,
        vec![ReplayRx::new(0, Vec::<Vec<u8>>::new()), ReplayRx::new(1, Vec::<Vec<u8>>::new())],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    let slot = RulesSlot::new(Arc::new(
        CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap(),
    ));
    w.set_firewall(Firewall::new(Arc::clone(&slot), 7));
    let send = |w: &mut Worker<ReplayRx, CountingTx, CountingTx>, frames: Vec<(u16, Vec<u8>)>| {
        for (port, frame) in frames {
            let p = usize::from(port);
            w.rx[p] = ReplayRx::new(port, vec![frame]).once();
            while !w.rx[p].finished() {
                w.poll();
            }
        }
    };
    let mut before = handshake(A_HOST, 4001);
    before.push((0, udp(0, A_HOST, 1000, FAR, 53)));
    before.extend(handshake(A_HOST, 4002));
    send(&mut w, before);
    let c = w.counts();
    assert_eq!((c.forwarded, drops(&c, DropReason::SrcConnLimit)), (6, 1), "{c:?}");
    // The slot's thread may have applied it already: then there is nothing left to take.
    assert!(slot.apply_overloads() <= 1);
    let mut after = vec![
        data(A_HOST, 4001),
        (0, udp(0, A_HOST, 1000, FAR, 53)),
        (0, frames::tcp(0, A_HOST, 4003, FAR, 22, SYN, 1000, 0)),
    ];
    after.extend(handshake(A_HOST2, 4001));
    send(&mut w, after);
    let c = w.counts();
    assert_eq!((c.forwarded, drops(&c, DropReason::FilterBlocked)), (9, 3), "{c:?}");
    let fw = w.firewall().unwrap();
    let bad = &fw.rules().rules.tables[0];
    assert!(
        bad.contains(fw::packet::Af::Inet, u128::from(A_HOST.to_bits()))
            && !bad.contains(fw::packet::Af::Inet, u128::from(A_HOST2.to_bits()))
    );
    let states: std::collections::HashMap<_, _> = fw.stats().states().into_iter().collect();
    assert_eq!((states["src_overload"], states["src_flushed"]), (1, 2), "{states:?}");
    // The rules' counts went on through the table update: the tcp rule has its packets of
    // both sources' handshakes (3 + 3 + 3).
    let stats = fw.stats().rules().snapshot();
    assert_eq!(stats[2].packets, 9, "{stats:?}");
}

/// pf's `tag` / `tagged`: the in pass on a tags A's traffic LAN (its state remembers the
/// tag), the out pass on b lets only LAN out. A second host behind a, which no tagging rule
/// matches, is blocked on the way out; replies come back. With `no state` on the out rule
/// every packet of A's flow is judged on b by the tag its in state gives it; with `no
/// state` on the in rule, by the tag the in rules give each packet.
#[test]
fn tagged_out_rules_pass_what_the_in_pass_tagged() {
    for (in_state, out_state) in
        [("keep state", "keep state"), ("keep state", "no state"), ("no state", "keep state")]
    {
        let rules = format!(
            "pass in on a from 198.18.0.2 tag LAN {in_state}\nblock out on b\npass out on b tagged LAN {out_state}\n"
        );
        let frames = vec![
            (0, udp(0, A_HOST, 1000, FAR, 53)),
            (0, udp(0, A_HOST2, 1000, FAR, 53)),
            (0, udp(0, A_HOST, 1000, FAR, 53)),
            (1, udp(1, FAR, 53, A_HOST, 1000)),
            (0, udp(0, A_HOST2, 1000, FAR, 53)),
            (0, udp(0, A_HOST, 1000, FAR, 53)),
        ];
        let c = run_batches(&rules, frames);
        assert_eq!(
            (c.forwarded, drops(&c, DropReason::FilterBlocked)),
            (4, 2),
            "{in_state}, {out_state}: {c:?}"
        );
    }
}
