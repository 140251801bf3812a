//! pf's `route-to` and `reply-to` through a worker on real frames, in a multi-WAN router's
//! shape: a LAN (port 0), WAN1 with the default route (port 1), WAN2 (port 2). A LAN rule
//! with `route-to` sends its flows out of WAN2 to its gateway, both for the packet that
//! makes the state and for later ones (the quick loop's too); a WAN2 rule with `reply-to`
//! sends the replies of the connections that came in by WAN2 back by WAN2, not by the
//! default route. An unresolved gateway is resolved itself (not the packet's destination),
//! and a gateway the routing table reaches through another interface than the rule names
//! drops the packet under `route_to`. `route-to` on `pass out` rules, for forwarded flows
//! and the router's own packets. On the same router, IPv6 fragments judged by their
//! datagram's ports.

mod common;
#[path = "frames/mod.rs"]
mod frames;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use common::{PuntLog, Recorder};
use dataplane::counters::{Counts, DropReason};
use dataplane::fib::FibControl;
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::ports::PortInfo;
use dataplane::punt::Punt;
use dataplane::slowpath::SlowPath;
use dataplane::worker::Worker;
use frames::Capture;
use io::mem::ReplayRx;
use io::pool::FramePool;
use wire::build::{UdpFlow, udp_frame};
use wire::{ArpPacket, EtherType, MacAddr, parse_l2};

const MACS: [MacAddr; 3] = [
    MacAddr([2, 0, 0, 0, 0, 0x10]),
    MacAddr([2, 0, 0, 0, 0, 0x11]),
    MacAddr([2, 0, 0, 0, 0, 0x12]),
];
const HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
const HOST_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa0]);
const GW1: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);
const GW1_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb1]);
const GW2: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 254);
const GW2_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb2]);
const FAR: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
const HOST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 10);
const GW1_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 0xfe);
const GW2_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x19, 0, 0, 0, 0, 0xfe);
const FAR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 5);

fn ifaces(name: &str) -> Option<u16> {
    ["lan", "wan1", "wan2"].iter().position(|n| *n == name).map(|i| i as u16)
}

fn ports() -> Vec<PortInfo> {
    let nets: [(IpAddr, IpAddr); 3] = [
        (Ipv4Addr::new(192, 168, 1, 1).into(), Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1).into()),
        (
            Ipv4Addr::new(198, 18, 0, 1).into(),
            Ipv6Addr::new(0x2001, 0xdb8, 0x18, 0, 0, 0, 0, 1).into(),
        ),
        (
            Ipv4Addr::new(198, 19, 0, 1).into(),
            Ipv6Addr::new(0x2001, 0xdb8, 0x19, 0, 0, 0, 0, 1).into(),
        ),
    ];
    (0..3)
        .map(|i| {
            let mut p = PortInfo::new(["lan", "wan1", "wan2"][i], MACS[i], i as u16);
            p.addresses = vec![(nets[i].0, 24), (nets[i].1, 64)];
            p
        })
        .collect()
}

/// The routing table: the three connected networks, the default routes by WAN1; WAN2's
/// gateway known or not (`gw2_known`).
fn fib_control(gw2_known: bool) -> FibControl {
    let mut ctl = FibControl::new(64);
    for (i, p) in ports().iter().enumerate() {
        for &(addr, len) in &p.addresses {
            let net = match addr {
                IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) & !0xff)),
                IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & !0xffff_ffff_ffff_ffff)),
            };
            ctl.add_connected(net, len, i as u16).unwrap();
        }
    }
    ctl.set_neighbour(HOST.into(), 0, HOST_MAC).unwrap();
    ctl.set_neighbour(HOST6.into(), 0, HOST_MAC).unwrap();
    ctl.set_neighbour(GW1.into(), 1, GW1_MAC).unwrap();
    ctl.set_neighbour(GW1_6.into(), 1, GW1_MAC).unwrap();
    if gw2_known {
        ctl.set_neighbour(GW2.into(), 2, GW2_MAC).unwrap();
        ctl.set_neighbour(GW2_6.into(), 2, GW2_MAC).unwrap();
    }
    ctl.add_route(Ipv4Addr::UNSPECIFIED.into(), 0, GW1.into(), 1).unwrap();
    ctl.add_route(Ipv6Addr::UNSPECIFIED.into(), 0, GW1_6.into(), 1).unwrap();
    ctl
}

struct Router {
    w: Worker<ReplayRx, Capture, PuntLog>,
    slot: Arc<RulesSlot>,
}

fn compile(rules: &str) -> Arc<CompiledRules> {
    Arc::new(CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap())
}

impl Router {
    fn new(rules: &str, fib: &FibControl) -> Router {
        let rx = (0..3).map(|p| ReplayRx::new(p, Vec::<Vec<u8>>::new())).collect();
        let tx = (0..3).map(|_| Capture::default()).collect();
        let mut w =
            Worker::new(fib.fib(), &ports(), rx, tx, PuntLog::default(), FramePool::new(600), 256);
        let slot = RulesSlot::new(compile(rules));
        w.set_firewall(Firewall::new(Arc::clone(&slot), 7));
        Router { w, slot }
    }

    /// A reload: the worker adopts `rules` at its next batch.
    fn reload(&self, rules: &str) {
        self.slot.publish(compile(rules)).unwrap();
    }

    /// Receives `frame` on `port` (one batch): the port it left by and the destination MAC
    /// it left with, or `None`.
    fn send(&mut self, port: usize, frame: Vec<u8>) -> Option<(usize, MacAddr)> {
        self.w.rx[port] = ReplayRx::new(port as u16, vec![frame]).once();
        while !self.w.rx[port].finished() {
            self.w.poll();
        }
        (0..3).find_map(|p| {
            self.w.tx[p].frames.pop().map(|f| (p, MacAddr([f[0], f[1], f[2], f[3], f[4], f[5]])))
        })
    }

    fn counts(&self) -> Counts {
        self.w.counts()
    }
}

/// A UDP frame received on `port` (addressed to its MAC).
fn udp(port: usize, src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> Vec<u8> {
    let flow = UdpFlow {
        src_mac: HOST_MAC,
        dst_mac: MACS[port],
        src,
        dst,
        src_port: sport,
        dst_port: dport,
        ttl: 64,
    };
    let mut buf = vec![0u8; 128];
    let n = udp_frame(&flow, 90, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

const LAN_ROUTE_TO: &str = "pass all\npass in quick on lan route-to (wan2 198.19.0.254) inet proto udp from 192.168.1.0/24 to any port 53 keep state\npass in quick on lan route-to (wan2 2001:db8:19::fe) inet6 proto udp to any port 53 keep state\n";

/// The flow HOST:5000 -> FAR:53 leaves by WAN2 to its gateway: three packets, each its own
/// batch (the first makes the state, the later ones are its state's, the quick loop's once
/// the reply made it steady), its reply back by the table, then `after` more packets; the
/// same host's port 80, which the rule does not match, by the default route.
fn leaves_by_wan2(r: &mut Router, after: usize) {
    let out = |r: &mut Router| r.send(0, udp(0, HOST.into(), 5000, FAR.into(), 53));
    for _ in 0..3 {
        assert_eq!(out(r), Some((2, GW2_MAC)));
    }
    let reply = r.send(2, udp(2, FAR.into(), 53, HOST.into(), 5000));
    assert_eq!(reply, Some((0, HOST_MAC)), "the reply: routed by the table");
    for _ in 0..after {
        assert_eq!(out(r), Some((2, GW2_MAC)));
    }
    let other = r.send(0, udp(0, HOST.into(), 5000, FAR.into(), 80));
    assert_eq!(other, Some((1, GW1_MAC)), "a flow the rule does not match: the default route");
}

#[test]
fn route_to_sends_the_flow_out_of_its_gateway_replies_come_back_by_the_table() {
    let mut r = Router::new(LAN_ROUTE_TO, &fib_control(true));
    leaves_by_wan2(&mut r, 3);
    // IPv6 the same way.
    assert_eq!(r.send(0, udp(0, HOST6.into(), 5000, FAR6.into(), 53)), Some((2, GW2_MAC)));
    assert_eq!(r.send(0, udp(0, HOST6.into(), 5000, FAR6.into(), 80)), Some((1, GW1_MAC)));
    assert_eq!(r.counts().forwarded, 10);
}

#[test]
fn reply_to_sends_the_replies_back_by_the_interface_the_connection_came_in_by() {
    let rules = "pass all\npass in quick on wan2 reply-to (wan2 198.19.0.254) inet proto udp to 192.168.1.10 port 5000 keep state\n";
    let mut r = Router::new(rules, &fib_control(true));
    assert_eq!(
        r.send(2, udp(2, FAR.into(), 53, HOST.into(), 5000)),
        Some((0, HOST_MAC)),
        "the request: routed by the table"
    );
    for _ in 0..3 {
        assert_eq!(
            r.send(0, udp(0, HOST.into(), 5000, FAR.into(), 53)),
            Some((2, GW2_MAC)),
            "replies: back by WAN2"
        );
    }
    // Without the rule's state (a connection from the LAN), the default route.
    assert_eq!(r.send(0, udp(0, HOST.into(), 5001, FAR.into(), 53)), Some((1, GW1_MAC)));
}

#[test]
fn an_unresolved_gateway_is_resolved_itself() {
    let ctl = fib_control(false);
    let mut r = Router::new(LAN_ROUTE_TO, &ctl);
    assert_eq!(r.send(0, udp(0, HOST.into(), 5000, FAR.into(), 53)), None);
    let punts = std::mem::take(&mut r.w.local.0);
    assert_eq!(punts.len(), 1);
    assert_eq!(punts[0].punt, Punt::Via { gateway: GW2.into(), port: 2 });
    // The slow path asks for the gateway's address on WAN2.
    let mut sp = SlowPath::new(ctl, ports(), false, 1000);
    let mut io = Recorder::default();
    sp.handle(&mut io, punts[0].clone(), 0);
    let asked: Vec<_> = io
        .wire
        .iter()
        .filter_map(|(phys, f)| {
            let l2 = parse_l2(f).ok().filter(|l2| l2.ethertype == EtherType::Arp)?;
            Some((*phys, ArpPacket::new_checked(&f[l2.l3_offset..]).ok()?.target_proto_addr()))
        })
        .collect();
    assert_eq!(asked, [(2, GW2)]);
}

#[test]
fn a_gateway_on_another_interface_drops_the_packet() {
    let rules = "pass all\npass in quick on lan route-to (wan1 198.19.0.254) inet proto udp to any port 53 keep state\n";
    let mut r = Router::new(rules, &fib_control(true));
    assert_eq!(r.send(0, udp(0, HOST.into(), 5000, FAR.into(), 53)), None);
    assert_eq!(r.counts().drops[DropReason::RouteTo as usize], 1);
    // The OpenBSD spelling names no interface: the table's way to the gateway is taken.
    let rules = "pass all\npass in quick on lan inet proto udp to any port 53 keep state route-to 198.19.0.254\n";
    let mut r = Router::new(rules, &fib_control(true));
    assert_eq!(r.send(0, udp(0, HOST.into(), 5000, FAR.into(), 53)), Some((2, GW2_MAC)));
}

/// A reload keeps each state's route, as pf's states keep their rule: a rule added above the
/// `route-to` rule (which moves its index) changes nothing for its flows, nor does the
/// rule's removal (pf keeps a removed rule for its states); new flows follow the new set.
#[test]
fn a_reload_keeps_each_states_route() {
    let mut r = Router::new(LAN_ROUTE_TO, &fib_control(true));
    let out = |r: &mut Router, sport: u16| r.send(0, udp(0, HOST.into(), sport, FAR.into(), 53));
    assert_eq!(out(&mut r, 5000), Some((2, GW2_MAC)));
    // A rule above it: the index of the route-to rule moves from 1 to 2, and the rule now at
    // 1 has no option.
    r.reload(&format!(
        "pass in quick on lan inet proto udp to any port 123 keep state\n{LAN_ROUTE_TO}"
    ));
    assert_eq!(out(&mut r, 5000), Some((2, GW2_MAC)), "the state's route");
    assert_eq!(out(&mut r, 5001), Some((2, GW2_MAC)), "a new flow, by the same rule");
    // The route-to rule gone: its states keep the route, new flows take the table's.
    r.reload("pass all\npass in quick on lan inet proto udp to any port 123 keep state\npass in quick on lan inet proto udp to any port 53 keep state\n");
    assert_eq!(out(&mut r, 5000), Some((2, GW2_MAC)), "an old state: its removed rule's route");
    assert_eq!(out(&mut r, 5001), Some((2, GW2_MAC)));
    assert_eq!(out(&mut r, 5002), Some((1, GW1_MAC)), "a new flow: the table's way");
    // A set that routes another way by the rule at the old index: old states keep theirs.
    r.reload("pass all\npass in quick on lan route-to (wan1 198.18.0.254) inet proto udp to any port 53 keep state\n");
    assert_eq!(out(&mut r, 5000), Some((2, GW2_MAC)));
    assert_eq!(out(&mut r, 5003), Some((1, GW1_MAC)));
}

/// A state whose rule index a reload without the options left past the set (its rule
/// gone) is not given the option of the rule a later set has at that index.
#[test]
fn a_stale_rule_index_takes_no_route() {
    let mut r = Router::new(
        "pass all\npass in quick on lan inet proto udp to any port 123 keep state\npass in quick on lan inet proto udp to any port 53 keep state\n",
        &fib_control(true),
    );
    let out = |r: &mut Router| r.send(0, udp(0, HOST.into(), 5000, FAR.into(), 53));
    assert_eq!(out(&mut r), Some((1, GW1_MAC)));
    r.reload("pass all\n");
    assert_eq!(out(&mut r), Some((1, GW1_MAC)), "its state, its rule gone");
    r.reload(&format!(
        "pass in quick on lan inet proto udp to any port 123 keep state\n{LAN_ROUTE_TO}"
    ));
    assert_eq!(out(&mut r), Some((1, GW1_MAC)), "index 2 routes in this set, not this state");
    assert_eq!(
        r.send(0, udp(0, HOST.into(), 5001, FAR.into(), 53)),
        Some((2, GW2_MAC)),
        "a new flow does"
    );
}

/// `frame`'s IPv4 datagram (untagged, no options) as two fragments, the first with 24 bytes
/// of its payload (the UDP header and 16 bytes), padded to the minimum frame.
fn fragments(frame: &[u8]) -> [Vec<u8>; 2] {
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let payload = &frame[34..14 + total];
    let make = |offset: usize, data: &[u8], more: bool| {
        let mut f = frame[..34].to_vec();
        f.extend_from_slice(data);
        f[16..18].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
        f[20..22]
            .copy_from_slice(&((offset / 8) as u16 | if more { 0x2000 } else { 0 }).to_be_bytes());
        f[24..26].fill(0);
        let c = wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f.resize(f.len().max(60), 0);
        f
    };
    [make(0, &payload[..24], true), make(24, &payload[24..], false)]
}

/// The later fragments of a routed datagram take its route too: they carry no ports, the
/// fragment table gives them their first fragment's.
#[test]
fn fragments_of_a_routed_datagram_follow_it() {
    let mut r = Router::new(LAN_ROUTE_TO, &fib_control(true));
    let [first, second] = fragments(&udp(0, HOST.into(), 5000, FAR.into(), 53));
    assert_eq!(r.send(0, first), Some((2, GW2_MAC)));
    assert_eq!(
        r.send(0, second),
        Some((2, GW2_MAC)),
        "the later fragment: by its datagram's route"
    );
    let [first, second] = fragments(&udp(0, HOST.into(), 5000, FAR.into(), 80));
    assert_eq!((r.send(0, first), r.send(0, second)), (Some((1, GW1_MAC)), Some((1, GW1_MAC))));
}

/// `route-to` on a `pass out` rule: the out pass on WAN1, where the table sent the flow,
/// makes the state, whose rule sends the packet by WAN2 to its gateway instead; the later
/// packets leave that way from the start, and the replies come back by the table.
#[test]
fn route_to_on_pass_out_sends_the_flow_by_its_gateway() {
    let rules = "pass all\npass out route-to (wan2 198.19.0.254) inet proto udp from 192.168.1.0/24 to any port 53 keep state\n";
    let mut r = Router::new(rules, &fib_control(true));
    leaves_by_wan2(&mut r, 1);
    assert_eq!(r.counts().forwarded, 6);
    // An unresolved gateway: the first packet goes to the slow path to resolve it.
    let mut r = Router::new(rules, &fib_control(false));
    assert_eq!(r.send(0, udp(0, HOST.into(), 5001, FAR.into(), 53)), None);
    let punts = std::mem::take(&mut r.w.local.0);
    assert_eq!(
        punts.iter().map(|p| p.punt).collect::<Vec<_>>(),
        [Punt::Via { gateway: GW2.into(), port: 2 }]
    );
}

/// The router's own packets (pfSense's "let out anything from firewall host itself" on a
/// second WAN): sent by the host stack on WAN1's TAP, where its table sent them, they leave
/// by WAN2 to its gateway, rewritten for it; unresolved, the slow path resolves the gateway.
#[test]
fn the_routers_own_packets_follow_route_to_on_pass_out() {
    let rules = "pass all\npass out route-to ( wan2 198.19.0.254 ) from 198.19.0.1 to !198.19.0.0/24 keep state allow-opts label \"let out anything from firewall host itself\"\n";
    for gw_known in [true, false] {
        let mut r = Router::new(rules, &fib_control(gw_known));
        let (mut to_workers, mut queues) =
            dataplane::host_out::host_out_channels(1, vec![false, false, false]).unwrap();
        r.w.set_host_out(queues.remove(0));
        // As the kernel sends it on WAN1's TAP: to WAN1's gateway, from WAN2's address.
        let mut own = udp(1, Ipv4Addr::new(198, 19, 0, 1).into(), 123, FAR.into(), 123);
        own[..6].copy_from_slice(&GW1_MAC.0);
        own[6..12].copy_from_slice(&MACS[1].0);
        let other = udp(1, Ipv4Addr::new(198, 18, 0, 1).into(), 123, FAR.into(), 123);
        for frame in [&own, &own, &other] {
            assert!(to_workers.send(1, 1, frame, frame));
        }
        r.w.poll();
        let macs = |p: usize| -> Vec<(MacAddr, MacAddr)> {
            r.w.tx[p]
                .frames
                .iter()
                .map(|f| {
                    (MacAddr(f[..6].try_into().unwrap()), MacAddr(f[6..12].try_into().unwrap()))
                })
                .collect()
        };
        assert_eq!(macs(1).len(), 1, "WAN1's own traffic stays on WAN1");
        if gw_known {
            assert_eq!(macs(2), [(GW2_MAC, MACS[2]); 2]);
        } else {
            assert!(macs(2).is_empty());
            let punts = std::mem::take(&mut r.w.local.0);
            assert_eq!(
                punts.iter().map(|p| p.punt).collect::<Vec<_>>(),
                [Punt::Via { gateway: GW2.into(), port: 2 }; 2]
            );
        }
    }
}

/// An IPv6 fragment from HOST6 to FAR6 received on the LAN: datagram `id`, its offset in
/// bytes, M, and its bytes after the fragment header (a first fragment: a UDP header to
/// port 53 first).
fn fragment6(id: u32, offset: u16, more: bool) -> Vec<u8> {
    let payload: Vec<u8> = if offset == 0 {
        let mut udp = vec![0x13, 0x88, 0x00, 0x35, 0x05, 0xc8, 0, 0];
        udp.resize(1232, 0xab);
        udp
    } else {
        vec![0xcd; 248]
    };
    let mut f = Vec::new();
    f.extend_from_slice(&MACS[0].0);
    f.extend_from_slice(&HOST_MAC.0);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[44, 64]);
    f.extend_from_slice(&HOST6.octets());
    f.extend_from_slice(&FAR6.octets());
    f.extend_from_slice(&[17, 0]);
    f.extend_from_slice(&(offset | u16::from(more)).to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&payload);
    f
}

/// IPv6 fragments through rules that pass one port: the later fragments take their first
/// fragment's protocol and ports, also when they come ahead of it (they wait for it).
#[test]
fn ipv6_fragments_are_judged_by_their_datagrams_ports() {
    let rules = "block all\npass inet6 proto udp to port 53 no state\n";
    let mut r = Router::new(rules, &fib_control(true));
    assert_eq!(r.send(0, fragment6(7, 0, true)), Some((1, GW1_MAC)));
    assert_eq!(
        r.send(0, fragment6(7, 1232, false)),
        Some((1, GW1_MAC)),
        "a later fragment, in order"
    );
    assert_eq!(r.send(0, fragment6(8, 1232, false)), None, "ahead of its first: it waits");
    assert_eq!(r.w.fragments_held(), 1);
    r.w.rx[0] = ReplayRx::new(0, vec![fragment6(8, 0, true)]).once();
    while !r.w.rx[0].finished() {
        r.w.poll();
    }
    assert_eq!(r.w.tx[1].frames.len(), 2, "the first, then the one that waited");
    assert_eq!((r.w.fragments_held(), r.counts().forwarded), (0, 4));
    r.w.tx[1].frames.clear();
    // A datagram to another port: its fragments are blocked, the first and the later one.
    let mut other = fragment6(9, 0, true);
    other[14 + 48 + 2..14 + 48 + 4].copy_from_slice(&54u16.to_be_bytes());
    assert_eq!(r.send(0, other), None);
    assert_eq!(r.send(0, fragment6(9, 1232, false)), None);
    assert_eq!(r.counts().drops[DropReason::FilterBlocked as usize], 2);
}
