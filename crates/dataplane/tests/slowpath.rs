//! The slow path with in-memory I/O: ARP and NDP answers and resolution (with queued packets
//! released in order and the FIB updated), echo replies, ICMP errors, resolution failure,
//! fragmentation, the host-stack TAP in both directions, 802.1Q sub-interfaces.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use dataplane::adjacency::Adjacency;
use dataplane::fib::FibControl;
use dataplane::ports::PortInfo;
use dataplane::punt::{Punt, PuntedFrame};
use dataplane::slowpath::SlowPath;

mod common;

use common::Recorder;
use dataplane::neighbour::State;
use wire::build::{
    UdpFlow, arp_frame, icmpv4_echo_frame, icmpv6_echo_frame, udp_frame, udp_frame_ip_len,
};
use wire::icmp_reply::IcmpError;
use wire::{
    ArpOperation, ArpPacket, EtherType, Icmpv4Packet, Icmpv4Type, Icmpv6Packet, Icmpv6Type,
    Ipv4Packet, Ipv6Packet, MacAddr, parse_l2,
};

const R_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const R_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
const HOST_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa1]);
const HOST_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb1]);
const S: u64 = 1_000_000_000;

fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse().unwrap())
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse().unwrap())
}

/// Ports: 0 = a (198.18.0.1/24, 2001:db8:a::1/64), 1 = b (198.19.0.1/24, 2001:db8:b::1/64),
/// 2 = b.7 (VLAN 7 on b, 198.20.0.1/24). Routes: connected, 10/8 via 198.19.0.2.
fn setup() -> (SlowPath, std::sync::Arc<dataplane::Fib>) {
    let mut a = PortInfo::new("a", R_A, 0);
    a.addresses = vec![(v4("198.18.0.1"), 24), (v6("2001:db8:a::1"), 64)];
    let mut b = PortInfo::new("b", R_B, 1);
    b.addresses = vec![(v4("198.19.0.1"), 24), (v6("2001:db8:b::1"), 64)];
    b.mtu = 576;
    let mut b7 = PortInfo::new("b.7", R_B, 1);
    b7.vlan = Some(7);
    b7.addresses = vec![(v4("198.20.0.1"), 24)];
    let ports = vec![a, b, b7];
    let mut ctl = FibControl::new(64);
    for (i, p) in ports.iter().enumerate() {
        for &(addr, len) in &p.addresses {
            let net = match addr {
                IpAddr::V4(x) => IpAddr::V4(Ipv4Addr::from(u32::from(x) & (!0u32 << (32 - len)))),
                IpAddr::V6(x) => {
                    IpAddr::V6(Ipv6Addr::from(u128::from(x) & (!0u128 << (128 - len))))
                }
            };
            ctl.add_connected(net, len, i as u16).unwrap();
            ctl.add_local(addr).unwrap();
        }
    }
    ctl.add_route(v4("10.0.0.0"), 8, v4("198.19.0.2"), 1).unwrap();
    let fib = ctl.fib();
    (SlowPath::new(ctl, ports, true, 1000), fib)
}

fn udp(src: IpAddr, dst: IpAddr, ttl: u8, dst_mac: MacAddr) -> Vec<u8> {
    let flow = UdpFlow { src_mac: HOST_A, dst_mac, src, dst, src_port: 4000, dst_port: 53, ttl };
    let mut buf = vec![0; 2048];
    let n = udp_frame(&flow, 60, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn punt(frame: Vec<u8>, punt: Punt, phys: u16, in_port: u16) -> PuntedFrame {
    PuntedFrame { punt, phys, in_port, frame }
}

fn arp_of(frame: &[u8]) -> ArpPacket<&[u8]> {
    let l2 = parse_l2(frame).unwrap();
    assert_eq!(l2.ethertype, EtherType::Arp);
    ArpPacket::new_checked(&frame[l2.l3_offset..]).unwrap()
}

#[test]
fn answers_arp_for_own_address_and_copies_to_host() {
    let (mut sp, fib) = setup();
    let mut io = Recorder::default();
    let mut buf = [0u8; 64];
    let n = arp_frame(
        ArpOperation::Request,
        HOST_A,
        "198.18.0.2".parse().unwrap(),
        MacAddr::ZERO,
        "198.18.0.1".parse().unwrap(),
        &mut buf,
    )
    .unwrap();
    sp.handle(&mut io, punt(buf[..n].to_vec(), Punt::Local, 0, 0), 0);
    assert_eq!(io.wire.len(), 1);
    let (phys, reply) = &io.wire[0];
    assert_eq!(*phys, 0);
    let arp = arp_of(reply);
    assert_eq!(arp.operation(), ArpOperation::Reply);
    assert_eq!(
        (arp.sender_hw_addr(), arp.sender_proto_addr()),
        (R_A, "198.18.0.1".parse::<Ipv4Addr>().unwrap())
    );
    assert_eq!(io.host.len(), 1, "the kernel sees a copy");
    // The requester was learnt and installed: its host route forwards directly.
    let id = fib.v4.lookup(u32::from(Ipv4Addr::new(198, 18, 0, 2))).unwrap();
    assert_eq!(fib.adj.get(id), Adjacency::Forward { port: 0, mac: HOST_A });
    // The host's own ARP reply for the router's address is suppressed (answered once).
    let n = arp_frame(
        ArpOperation::Reply,
        R_A,
        "198.18.0.1".parse().unwrap(),
        HOST_A,
        "198.18.0.2".parse().unwrap(),
        &mut buf,
    )
    .unwrap();
    sp.from_host(&mut io, 0, &buf[..n]);
    assert_eq!(io.wire.len(), 1);
    // A request for another address on the link is not answered (and not learnt from).
    let n = arp_frame(
        ArpOperation::Request,
        HOST_A,
        "198.18.0.3".parse().unwrap(),
        MacAddr::ZERO,
        "198.18.0.9".parse().unwrap(),
        &mut buf,
    )
    .unwrap();
    sp.handle(&mut io, punt(buf[..n].to_vec(), Punt::Local, 0, 0), 0);
    assert_eq!(io.wire.len(), 1);
    assert!(sp.neighbours().iter().all(|n| n.0 != v4("198.18.0.3")));
}

#[test]
fn resolves_gateway_releasing_queued_packets_in_order() {
    let (mut sp, fib) = setup();
    let mut io = Recorder::default();
    let id = fib.v4.lookup(u32::from(Ipv4Addr::new(10, 1, 2, 3))).unwrap();
    assert_eq!(fib.adj.get(id), Adjacency::Unresolved { port: 1 });
    for ttl in [10, 11, 12] {
        let f = udp(v4("198.18.0.2"), v4("10.1.2.3"), ttl, R_A);
        sp.handle(&mut io, punt(f, Punt::Unresolved { next_hop: id, port: 1 }, 0, 0), 0);
    }
    // One ARP request for the gateway, broadcast on b, from b's address.
    assert_eq!(io.wire.len(), 1);
    let (phys, req) = io.wire.pop().unwrap();
    assert_eq!(phys, 1);
    let arp = arp_of(&req);
    assert_eq!(arp.operation(), ArpOperation::Request);
    assert_eq!(arp.target_proto_addr(), "198.19.0.2".parse::<Ipv4Addr>().unwrap());
    assert_eq!(arp.sender_proto_addr(), "198.19.0.1".parse::<Ipv4Addr>().unwrap());
    let mut buf = [0u8; 64];
    let n = arp_frame(
        ArpOperation::Reply,
        HOST_B,
        "198.19.0.2".parse().unwrap(),
        R_B,
        "198.19.0.1".parse().unwrap(),
        &mut buf,
    )
    .unwrap();
    sp.handle(&mut io, punt(buf[..n].to_vec(), Punt::Local, 1, 1), S / 2);
    assert_eq!(fib.adj.get(id), Adjacency::Forward { port: 1, mac: HOST_B });
    let ttls: Vec<u8> = io
        .wire
        .iter()
        .map(|(p, f)| {
            assert_eq!(*p, 1);
            assert_eq!(&f[0..12], &[HOST_B.0, R_B.0].concat()[..]);
            Ipv4Packet::new_checked(&f[14..]).unwrap().ttl()
        })
        .collect();
    assert_eq!(ttls, [10, 11, 12]);
    assert_eq!(sp.stats.sent_after_resolution, 3);
    let entry = sp.neighbours().into_iter().find(|n| n.0 == v4("198.19.0.2")).unwrap();
    assert_eq!((entry.1, entry.2, entry.3), (State::Reachable, Some(HOST_B), Some(1)));
}

#[test]
fn failed_resolution_sends_host_unreachable_and_withdraws() {
    let (mut sp, fib) = setup();
    let mut io = Recorder::default();
    // A host on b's connected prefix: resolved by the packet's own destination.
    let id = fib.v4.lookup(u32::from(Ipv4Addr::new(198, 19, 0, 77))).unwrap();
    let f = udp(v4("198.18.0.2"), v4("198.19.0.77"), 63, R_A);
    sp.handle(&mut io, punt(f, Punt::Unresolved { next_hop: id, port: 1 }, 0, 0), 0);
    for t in 1..=4 {
        sp.tick(&mut io, t * S + 1);
    }
    let requests =
        io.wire.iter().filter(|(_, f)| parse_l2(f).unwrap().ethertype == EtherType::Arp).count();
    assert_eq!(requests, 3, "RFC 4861 MAX_MULTICAST_SOLICIT requests, then failure");
    let (phys, err) = io.wire.last().unwrap();
    assert_eq!(*phys, 0, "the error goes back where the packet came from");
    let ip = Ipv4Packet::new_checked(&err[14..]).unwrap();
    assert_eq!(ip.src_addr(), "198.18.0.1".parse::<Ipv4Addr>().unwrap());
    let icmp = Icmpv4Packet::new_checked(&err[14 + 20..]).unwrap();
    assert_eq!((icmp.msg_type(), icmp.code()), (Icmpv4Type::DestUnreachable, 1));
    assert_eq!(sp.stats.resolve_failed, 1);
}

#[test]
fn echo_replies_and_icmp_errors() {
    let (mut sp, _) = setup();
    let mut io = Recorder::default();
    let flow = UdpFlow {
        src_mac: HOST_A,
        dst_mac: R_A,
        src: v4("198.18.0.2"),
        dst: v4("198.18.0.1"),
        src_port: 0,
        dst_port: 0,
        ttl: 64,
    };
    let mut buf = vec![0; 256];
    let n = icmpv4_echo_frame(&flow, 7, 1, b"ping", &mut buf).unwrap();
    sp.handle(&mut io, punt(buf[..n].to_vec(), Punt::Local, 0, 0), 0);
    let (_, reply) = io.wire.pop().unwrap();
    let icmp = Icmpv4Packet::new_checked(&reply[34..]).unwrap();
    assert_eq!((icmp.msg_type(), icmp.echo_ident()), (Icmpv4Type::EchoReply, 7));
    assert!(io.host.is_empty(), "pings are answered here, not by the kernel too");
    // IPv6 echo to the router's global address.
    let flow6 = UdpFlow { src: v6("2001:db8:a::2"), dst: v6("2001:db8:a::1"), ..flow };
    let n = icmpv6_echo_frame(&flow6, 8, 1, b"ping", &mut buf).unwrap();
    sp.handle(&mut io, punt(buf[..n].to_vec(), Punt::Local, 0, 0), 0);
    let (_, reply) = io.wire.pop().unwrap();
    assert_eq!(Icmpv6Packet::new_checked(&reply[54..]).unwrap().msg_type(), Icmpv6Type::EchoReply);
    // Time exceeded from the receiving port's address (what traceroute shows).
    let f = udp(v4("198.18.0.2"), v4("10.9.9.9"), 1, R_A);
    sp.handle(&mut io, punt(f, Punt::Error(IcmpError::TimeExceeded), 0, 0), 0);
    let (phys, err) = io.wire.pop().unwrap();
    assert_eq!(phys, 0);
    assert_eq!(&err[0..6], &HOST_A.0);
    let ip = Ipv4Packet::new_checked(&err[14..]).unwrap();
    assert_eq!(
        (ip.src_addr(), ip.dst_addr()),
        ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
    );
    assert_eq!(Icmpv4Packet::new_checked(&err[34..]).unwrap().msg_type(), Icmpv4Type::TimeExceeded);
    // No error about an ICMP error.
    let mut quoted = err.clone();
    quoted[0..6].copy_from_slice(&R_A.0);
    sp.handle(&mut io, punt(quoted, Punt::Error(IcmpError::TimeExceeded), 0, 0), 0);
    assert!(io.wire.is_empty());
    assert_eq!(sp.stats.icmp_suppressed, 1);
}

/// ICMP and ICMPv6 redirects to the router, and other routers' Router Advertisements, never
/// reach its host stack (RFC 1812 4.3.3.2, RFC 4861 8: a router takes no routes from
/// redirects). Before, a neighbour on the link could redirect the router's own traffic, or
/// give it a default route: Linux's host stack, forwarding off, took both from the TAP.
/// Other ICMP for the router (a port unreachable) still goes up.
#[test]
fn redirects_are_kept_from_the_host_stack() {
    let (mut sp, _) = setup();
    let mut io = Recorder::default();
    let flow = UdpFlow {
        src_mac: HOST_A,
        dst_mac: R_A,
        src: v4("198.18.0.2"),
        dst: v4("198.18.0.1"),
        src_port: 0,
        dst_port: 0,
        ttl: 64,
    };
    let mut buf = vec![0; 256];
    let n = icmpv4_echo_frame(&flow, 7, 1, b"redirect", &mut buf).unwrap();
    let mut v4_frame = buf[..n].to_vec();
    v4_frame[34..36].copy_from_slice(&[5, 1]); // redirect for host
    sp.handle(&mut io, punt(v4_frame.clone(), Punt::Local, 0, 0), 0);
    v4_frame[34..36].copy_from_slice(&[3, 3]); // port unreachable
    sp.handle(&mut io, punt(v4_frame, Punt::Local, 0, 0), 0);
    let flow6 = UdpFlow { src: v6("fe80::2"), dst: v6("2001:db8:a::1"), ttl: 255, ..flow };
    let n = icmpv6_echo_frame(&flow6, 8, 1, b"redirect", &mut buf).unwrap();
    let mut v6_frame = buf[..n].to_vec();
    v6_frame[54] = 137;
    sp.handle(&mut io, punt(v6_frame.clone(), Punt::Local, 0, 0), 0);
    // The same behind a destination options header (PadN): the kernel walks the chain too.
    let payload = u16::from_be_bytes([v6_frame[18], v6_frame[19]]) + 8;
    v6_frame[18..20].copy_from_slice(&payload.to_be_bytes());
    v6_frame[20] = 60;
    v6_frame.splice(54..54, [58, 0, 1, 4, 0, 0, 0, 0]);
    sp.handle(&mut io, punt(v6_frame.clone(), Punt::Local, 0, 0), 0);
    v6_frame[62] = 134; // a Router Advertisement from another router
    sp.handle(&mut io, punt(v6_frame.clone(), Punt::Local, 0, 0), 0);
    v6_frame[62] = 1; // destination unreachable
    sp.handle(&mut io, punt(v6_frame, Punt::Local, 0, 0), 0);
    assert_eq!((sp.stats.redirects_ignored, sp.stats.router_adverts_ignored), (3, 1));
    let up: Vec<u8> =
        io.host.iter().map(|(_, f)| if f[12] == 0x08 { f[34] } else { f[62] }).collect();
    assert_eq!(up, [3, 1], "only the unreachables reach the host stack");
    assert!(io.wire.is_empty());
}

#[test]
fn ndp_answers_and_resolves() {
    let (mut sp, fib) = setup();
    let mut io = Recorder::default();
    // Resolve 2001:db8:b::9 (connected on b): a solicitation to its solicited-node group.
    let id = fib.v6.lookup(u128::from("2001:db8:b::9".parse::<Ipv6Addr>().unwrap())).unwrap();
    let flow = UdpFlow {
        src_mac: HOST_A,
        dst_mac: R_A,
        src: v6("2001:db8:a::2"),
        dst: v6("2001:db8:b::9"),
        src_port: 1,
        dst_port: 2,
        ttl: 9,
    };
    let mut buf = vec![0; 256];
    let n = udp_frame(&flow, 80, &mut buf).unwrap();
    sp.handle(
        &mut io,
        punt(buf[..n].to_vec(), Punt::Unresolved { next_hop: id, port: 1 }, 0, 0),
        0,
    );
    let (phys, ns) = io.wire.pop().unwrap();
    assert_eq!(phys, 1);
    let ip = Ipv6Packet::new_checked(&ns[14..]).unwrap();
    assert_eq!(ip.dst_addr(), "ff02::1:ff00:9".parse::<Ipv6Addr>().unwrap());
    let icmp = Icmpv6Packet::new_checked(&ns[54..]).unwrap();
    assert_eq!(icmp.msg_type(), Icmpv6Type::NeighborSolicit);
    // The host answers its own solicitation by soliciting the router in turn (as Linux
    // does) and the router advertises itself: then the host's advertisement resolves it.
    let target: Ipv6Addr = "2001:db8:b::1".parse().unwrap();
    let n = wire::ndisc::neighbor_solicit(
        HOST_B,
        "2001:db8:b::9".parse().unwrap(),
        target,
        None,
        &mut buf,
    )
    .unwrap();
    sp.handle(&mut io, punt(buf[..n].to_vec(), Punt::Local, 1, 1), 1);
    let (_, na) = io.wire.remove(0);
    let icmp = Icmpv6Packet::new_checked(&na[54..]).unwrap();
    assert_eq!(
        (icmp.msg_type(), icmp.ndp_target_addr()),
        (Icmpv6Type::NeighborAdvert, Some(target))
    );
    // The solicitation carried the host's link-layer address: the queued packet went out.
    assert_eq!(io.wire.len(), 1);
    assert_eq!(&io.wire[0].1[0..6], &HOST_B.0);
    let id = fib.v6.lookup(u128::from("2001:db8:b::9".parse::<Ipv6Addr>().unwrap())).unwrap();
    assert_eq!(fib.adj.get(id), Adjacency::Forward { port: 1, mac: HOST_B });
}

#[test]
fn fragments_when_larger_than_mtu_without_df() {
    let (mut sp, _) = setup();
    let mut io = Recorder::default();
    let flow = UdpFlow {
        src_mac: HOST_A,
        dst_mac: R_A,
        src: v4("198.18.0.2"),
        dst: v4("10.1.1.1"),
        src_port: 1,
        dst_port: 2,
        ttl: 9,
    };
    let mut buf = vec![0; 2048];
    let n = udp_frame_ip_len(&flow, 1400, &mut buf).unwrap();
    sp.handle(&mut io, punt(buf[..n].to_vec(), Punt::Fragment { port: 1, mac: HOST_B }, 0, 0), 0);
    assert_eq!(io.wire.len(), 3, "1400 bytes over an MTU of 576");
    let mut data = 0;
    for (phys, f) in &io.wire {
        assert_eq!(*phys, 1);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.total_len() <= 576 && ip.verify_checksum());
        data += usize::from(ip.total_len()) - 20;
    }
    assert_eq!(data, 1380);
}

#[test]
fn host_frames_go_out_tagged_on_sub_interfaces() {
    let (mut sp, _) = setup();
    let mut io = Recorder::default();
    let f = udp(v4("198.20.0.1"), v4("198.20.0.5"), 64, HOST_B);
    sp.from_host(&mut io, 2, &f);
    let (phys, out) = io.wire.pop().unwrap();
    assert_eq!(phys, 1);
    assert_eq!(parse_l2(&out).unwrap().vlans, [Some(7), None]);
    assert_eq!(&out[18..], &f[14..]);
    // And frames for the router on the sub-interface reach its TAP untagged.
    let mut tagged = udp(v4("198.20.0.5"), v4("198.20.0.1"), 64, R_B);
    tagged.splice(12..12, [0x81, 0, 0, 7]);
    sp.handle(&mut io, punt(tagged, Punt::Local, 1, 2), 0);
    let (port, up) = io.host.pop().unwrap();
    assert_eq!(port, 2);
    assert_eq!(parse_l2(&up).unwrap().vlans, [None, None]);
    // Gratuitous ARP for every IPv4 address (tagged on the sub-interface), unsolicited
    // advertisements for the IPv6 ones.
    sp.start(&mut io);
    let arp: Vec<_> =
        io.wire.iter().filter(|(_, f)| parse_l2(f).unwrap().ethertype == EtherType::Arp).collect();
    let garps: Vec<_> = arp
        .iter()
        .map(|(_, f)| (parse_l2(f).unwrap().vlans[0], arp_of(f).sender_proto_addr()))
        .collect();
    assert_eq!(garps.len(), 3);
    assert!(garps.contains(&(Some(7), "198.20.0.1".parse().unwrap())));
    assert_eq!(io.wire.len() - arp.len(), 2, "one advertisement per IPv6 address");
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    /// Frames to the router with a plausible start (Ethernet to R_A, a chosen EtherType, an
    /// IP version nibble) and random rest.
    fn frame() -> impl Strategy<Value = Vec<u8>> {
        let et = prop_oneof![
            Just([0x08, 0x00]),
            Just([0x86, 0xdd]),
            Just([0x08, 0x06]),
            Just([0x81, 0x00]),
            any::<[u8; 2]>()
        ];
        (et, proptest::collection::vec(any::<u8>(), 0..1600)).prop_map(|(et, rest)| {
            let mut f = R_A.0.to_vec();
            f.extend_from_slice(&HOST_A.0);
            f.extend_from_slice(&et);
            f.extend_from_slice(&rest);
            f
        })
    }

    fn punt_kind() -> impl Strategy<Value = Punt> {
        prop_oneof![
            Just(Punt::Local),
            Just(Punt::Error(IcmpError::TimeExceeded)),
            Just(Punt::Error(IcmpError::PacketTooBig { mtu: 576 })),
            (0u32..8, 0u16..4).prop_map(|(next_hop, port)| Punt::Unresolved { next_hop, port }),
            (0u16..4).prop_map(|port| Punt::Fragment { port, mac: HOST_B }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn any_punted_or_host_frame(f in frame(), kind in punt_kind(), in_port in 0u16..4, host in any::<bool>()) {
            let (mut sp, _) = setup();
            let mut io = Recorder::default();
            if host {
                sp.from_host(&mut io, in_port, &f);
            } else {
                sp.handle(&mut io, punt(f, kind, in_port.min(1), in_port), 0);
            }
            sp.tick(&mut io, 5 * S);
            for (_, out) in &io.wire {
                prop_assert!(out.len() >= 14);
            }
        }
    }
}
