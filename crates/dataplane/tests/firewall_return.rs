//! `block return`, `return-rst`, `return-icmp` through a worker and the slow path on real
//! frames: which blocked packets are answered, how (a reset from the blocked destination, or
//! a destination unreachable from the router's address on the input interface), out of the
//! interface they came in by, within the worker's ICMP rate limit; no answer to a reset, an
//! ICMP error, or without a `return`.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use common::{PuntLog, Recorder};
use dataplane::counters::{Counts, DropReason};
use dataplane::fib::FibControl;
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::ports::PortInfo;
use dataplane::punt::{Punt, PuntedFrame};
use dataplane::slowpath::SlowPath;
use dataplane::worker::Worker;
use io::mem::{CountingTx, ReplayRx};
use io::pool::FramePool;
use wire::build::{UdpFlow, icmpv4_echo_frame, udp_frame};
use wire::icmp_reply::IcmpError;
use wire::{
    EtherType, Icmpv4Packet, Icmpv4Type, Icmpv6Packet, Icmpv6Type, IpProtocol, Ipv4Packet,
    Ipv6Packet, MacAddr, TcpFlags, TcpPacket, parse_l2,
};

const R_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const R_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
const HOST_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x99]);
const A_HOST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const ROUTER_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const FAR: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 1);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xa, 0, 0, 0, 0, 2);
const ROUTER_A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xa, 0, 0, 0, 0, 1);
const FAR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xf, 0, 0, 0, 0, 1);

fn ifaces(name: &str) -> Option<u16> {
    ["a", "b"].iter().position(|n| *n == name).map(|i| i as u16)
}

fn ports() -> Vec<PortInfo> {
    let mut a = PortInfo::new("a", R_A, 0);
    a.addresses = vec![(IpAddr::V4(ROUTER_A), 24), (IpAddr::V6(ROUTER_A6), 64)];
    let mut b = PortInfo::new("b", R_B, 1);
    b.addresses = vec![(IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)), 24)];
    vec![a, b]
}

/// Runs `frames` (received on port a, towards b) through a worker with `rules` and an ICMP
/// budget of `icmp_rate` per second, then its punts through the slow path: the worker's
/// counts, its punts and what the slow path sent.
fn run(
    rules: &str,
    frames: Vec<Vec<u8>>,
    icmp_rate: u64,
) -> (Counts, Vec<PuntedFrame>, Recorder, SlowPath) {
    let mut ctl = FibControl::new(64);
    ctl.set_neighbour(IpAddr::V4(A_HOST), 0, HOST_MAC).unwrap();
    ctl.set_neighbour(IpAddr::V6(A6), 0, HOST_MAC).unwrap();
    let gw = Ipv4Addr::new(198, 19, 0, 2);
    ctl.set_neighbour(IpAddr::V4(gw), 1, MacAddr([2, 0, 0, 0, 0, 0xb2])).unwrap();
    ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, IpAddr::V4(gw), 1).unwrap();
    let gw6 = Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 2);
    ctl.set_neighbour(IpAddr::V6(gw6), 1, MacAddr([2, 0, 0, 0, 0, 0xb2])).unwrap();
    ctl.add_route(IpAddr::V6(FAR6), 48, IpAddr::V6(gw6), 1).unwrap();
    let fib = ctl.fib();
    let rx = vec![ReplayRx::new(0, frames).once(), ReplayRx::new(1, Vec::<Vec<u8>>::new()).once()];
    let mut w = Worker::new(
        fib,
        &ports(),
        rx,
        vec![CountingTx::new(), CountingTx::new()],
        PuntLog::default(),
        FramePool::new(600),
        256,
    );
    w.set_icmp_rate(icmp_rate);
    let rules = CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap();
    w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
    while !w.rx[0].finished() {
        w.poll();
    }
    let c = w.counts();
    let punts = std::mem::take(&mut w.local.0);
    let mut sp = SlowPath::new(ctl, ports(), false, 1000);
    let mut io = Recorder::default();
    for p in &punts {
        sp.handle(&mut io, p.clone(), 0);
    }
    (c, punts, io, sp)
}

fn flow(src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> UdpFlow {
    UdpFlow { src_mac: HOST_MAC, dst_mac: R_A, src, dst, src_port: sport, dst_port: dport, ttl: 64 }
}

fn udp(src: IpAddr, dst: IpAddr, dport: u16) -> Vec<u8> {
    let mut buf = vec![0u8; 128];
    let n = udp_frame(&flow(src, 1000, dst, dport), 90, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// A TCP segment A_HOST:40000 -> FAR:`dport`, seq 1000, ack 5001 if ACK is set.
fn tcp(dport: u16, flags: u8) -> Vec<u8> {
    let mut f = udp(A_HOST.into(), FAR.into(), dport);
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.set_protocol(IpProtocol::Tcp);
    ip.fill_checksum();
    let mut t = TcpPacket::new_unchecked(&mut f[34..]);
    t.set_src_port(40000);
    t.set_dst_port(dport);
    t.set_seq_number(1000);
    t.set_ack_number(if flags & 0x10 != 0 { 5001 } else { 0 });
    t.set_header_len(20);
    t.set_flags(TcpFlags(flags));
    t.fill_checksum_v4(&A_HOST, &FAR);
    f
}

fn blocked(c: &Counts) -> u64 {
    c.drops[DropReason::FilterBlocked as usize]
}

#[test]
fn tcp_gets_a_reset_from_the_blocked_destination() {
    let rules = "block return in on a proto tcp to port 8099\n";
    // A SYN (seq 1000, with 36 bytes of data), an ACK segment, a RST (no answer) and a SYN
    // to a port no rule blocks.
    let (c, punts, io, sp) =
        run(rules, vec![tcp(8099, 0x02), tcp(8099, 0x10), tcp(8099, 0x04), tcp(80, 0x02)], 1000);
    assert_eq!((blocked(&c), c.forwarded), (3, 1), "{c:?}");
    let kinds: Vec<Punt> = punts.iter().map(|p| p.punt).collect();
    assert_eq!(kinds, [Punt::Reset { ttl: 64 }, Punt::Reset { ttl: 64 }], "no reset for the reset");
    assert_eq!(sp.stats.filter_resets, 2);
    assert_eq!(io.wire.len(), 2);
    for ((phys, f), (seq, ack, flags)) in
        io.wire.iter().zip([(0, 1000 + 36 + 1, 0x14), (5001, 0, 0x04)])
    {
        assert_eq!(*phys, 0, "out of the interface it came in by");
        let l2 = parse_l2(f).unwrap();
        assert_eq!(&f[..12], [HOST_MAC.0, R_A.0].concat(), "to the sender's MAC from the port's");
        let ip = Ipv4Packet::new_checked(&f[l2.l3_offset..]).unwrap();
        assert_eq!(
            (ip.src_addr(), ip.dst_addr(), ip.protocol(), ip.ttl()),
            (FAR, A_HOST, IpProtocol::Tcp, 64)
        );
        assert!(ip.verify_checksum());
        let t = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(t.verify_checksum_v4(&FAR, &A_HOST));
        assert_eq!(
            (t.src_port(), t.dst_port(), t.seq_number(), t.ack_number(), t.flags().0),
            (8099, 40000, seq, ack, flags)
        );
    }
}

#[test]
fn udp_and_icmp_get_unreachables_from_the_router() {
    let rules = "block return in on a proto udp to port 53\n\
                 block return-icmp(host-prohib, admin-unr) in on a proto udp to port 54\n\
                 block return-rst in on a proto udp to port 55\n\
                 block return in on a proto icmp\n\
                 block return out on b inet6 proto udp to port 56\n";
    let mut ping = vec![0u8; 128];
    let n = icmpv4_echo_frame(&flow(A_HOST.into(), 0, FAR.into(), 0), 7, 1, b"linerate", &mut ping)
        .unwrap();
    ping.truncate(n);
    let mut unreach = ping.clone();
    let mut icmp = Icmpv4Packet::new_unchecked(&mut unreach[34..]);
    icmp.set_msg_type(Icmpv4Type::DestUnreachable);
    icmp.fill_checksum();
    let frames = vec![
        udp(A_HOST.into(), FAR.into(), 53),
        udp(A_HOST.into(), FAR.into(), 54),
        udp(A_HOST.into(), FAR.into(), 55),
        ping,
        unreach,
        udp(A6.into(), FAR6.into(), 53),
        udp(A6.into(), FAR6.into(), 54),
        udp(A6.into(), FAR6.into(), 56),
    ];
    let (c, punts, io, sp) = run(rules, frames, 1000);
    assert_eq!((blocked(&c), c.forwarded), (8, 0), "{c:?}");
    let kinds: Vec<Punt> = punts.iter().map(|p| p.punt).collect();
    let (port, prohib) =
        (IcmpError::Refused { code: 3, code6: 4 }, IcmpError::Refused { code: 10, code6: 1 });
    // return-rst does not answer UDP; the ICMP error is punted, the slow path holds it back.
    assert_eq!(
        kinds,
        [
            Punt::Error(port),
            Punt::Error(prohib),
            Punt::Error(port),
            Punt::Error(port),
            Punt::Error(port),
            Punt::Error(prohib),
            Punt::Error(port)
        ]
    );
    assert_eq!((sp.stats.filter_unreachables, sp.stats.icmp_suppressed), (6, 1), "{:?}", sp.stats);
    let mut got = Vec::new();
    for (phys, f) in &io.wire {
        assert_eq!(*phys, 0);
        let l2 = parse_l2(f).unwrap();
        let l3 = &f[l2.l3_offset..];
        if l2.ethertype == EtherType::Ipv4 {
            let ip = Ipv4Packet::new_checked(l3).unwrap();
            assert_eq!(
                (ip.src_addr(), ip.dst_addr()),
                (ROUTER_A, A_HOST),
                "from the router's address on a"
            );
            let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
            assert_eq!(icmp.msg_type(), Icmpv4Type::DestUnreachable);
            got.push((4, icmp.code()));
        } else {
            let ip = Ipv6Packet::new_checked(l3).unwrap();
            assert_eq!((ip.src_addr(), ip.dst_addr()), (ROUTER_A6, A6));
            let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
            assert!(icmp.verify_checksum(&ROUTER_A6, &A6));
            assert_eq!(icmp.msg_type(), Icmpv6Type::DestUnreachable);
            got.push((6, icmp.code()));
        }
    }
    // UDP 53 port-unr, 54 host-prohib, echo request port-unr; IPv6: 53 port-unr (4), 54
    // admin-unr (1), 56 (blocked by the out pass on b, answered on a) port-unr.
    assert_eq!(got, [(4, 3), (4, 10), (4, 3), (6, 4), (6, 1), (6, 4)]);
}

#[test]
fn answers_follow_the_block_policy_and_the_rate_limit() {
    let frames = || (0..20).map(|_| udp(A_HOST.into(), FAR.into(), 53)).collect::<Vec<_>>();
    // `set block-policy return` makes the plain `block` rules after it answer.
    let (c, punts, _, _) =
        run("set block-policy return\nblock in on a proto udp\n", frames(), 1000);
    assert_eq!((blocked(&c), punts.len()), (20, 20));
    let (_, punts, _, _) =
        run("block in on a proto udp\nset block-policy return\n", frames(), 1000);
    assert_eq!(punts.len(), 0, "the policy applies to the rules after it");
    let (_, punts, _, _) =
        run("set block-policy return\nblock drop in on a proto udp\n", frames(), 1000);
    assert_eq!(punts.len(), 0, "block drop stays silent");
    // A pass rule after the block: the last matching rule decides, and it passes.
    let (c, punts, _, _) =
        run("block return in on a proto udp\npass in on a proto udp to port 53\n", frames(), 1000);
    assert_eq!((c.forwarded, punts.len()), (20, 0));
    // The worker's ICMP budget: 10 per second allows a burst of 1.
    let (c, punts, _, _) = run("block return in on a proto udp\n", frames(), 10);
    assert_eq!((blocked(&c), punts.len()), (20, 1));
    let (_, punts, _, _) = run("block return in on a proto udp\n", frames(), 0);
    assert_eq!(punts.len(), 0, "icmp_errors_per_second = 0 sends none");
}
