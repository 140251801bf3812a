//! Which ARP and NDP messages may change the neighbour cache and the FIB (RFC 4861 7.1,
//! 7.2.3, 7.2.5; RFC 826's merge rule; on-link only), on crafted frames: each rejected one
//! leaves routes and neighbours as they were and is counted under its reason.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use dataplane::adjacency::Adjacency;
use dataplane::fib::{FibControl, RouteKind};
use dataplane::neighbour::State;
use dataplane::ports::PortInfo;
use dataplane::punt::{Punt, PuntedFrame};
use dataplane::slowpath::{Reject, SlowPath};

mod common;

use common::Recorder;
use wire::build::arp_frame;
use wire::ndisc::{NdError, na_flags, neighbor_solicit, unsolicited_advert};
use wire::{ArpOperation, Icmpv6Packet, Icmpv6Type, Ipv6Packet, MacAddr};

const R_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const HOST: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa1]);

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// One port, a: 198.18.0.1/24 and 2001:db8:a::1/64.
fn setup() -> SlowPath {
    let mut a = PortInfo::new("a", R_A, 0);
    a.addresses = vec![(IpAddr::V4(v4("198.18.0.1")), 24), (IpAddr::V6(v6("2001:db8:a::1")), 64)];
    let mut ctl = FibControl::new(64);
    ctl.add_connected(IpAddr::V4(v4("198.18.0.0")), 24, 0).unwrap();
    ctl.add_connected(IpAddr::V6(v6("2001:db8:a::")), 64, 0).unwrap();
    ctl.add_local(IpAddr::V4(v4("198.18.0.1"))).unwrap();
    ctl.add_local(IpAddr::V6(v6("2001:db8:a::1"))).unwrap();
    SlowPath::new(ctl, vec![a], true, 1000)
}

type Snapshot = (Vec<(IpAddr, u8, RouteKind)>, Vec<(IpAddr, State, Option<MacAddr>, Option<u16>)>);

fn snapshot(sp: &SlowPath) -> Snapshot {
    (sp.fib().routes().collect(), sp.neighbours())
}

fn local(sp: &mut SlowPath, io: &mut Recorder, frame: Vec<u8>) {
    sp.handle(io, PuntedFrame { punt: Punt::Local, phys: 0, in_port: 0, frame }, 0);
}

/// Delivers `frame`, then checks that it changed neither routes nor neighbours and that it
/// is counted under `reason`, alone.
fn rejected(sp: &mut SlowPath, frame: Vec<u8>, reason: Reject) -> Recorder {
    let before = snapshot(sp);
    let (total, mine) = (sp.stats.rejects.total(), sp.stats.rejects.get(reason));
    let mut io = Recorder::default();
    local(sp, &mut io, frame);
    assert_eq!(snapshot(sp), before, "{reason:?}: routes or neighbours changed");
    assert_eq!(sp.stats.rejects.get(reason), mine + 1, "{reason:?}: {:?}", sp.stats.rejects);
    assert_eq!(sp.stats.rejects.total(), total + 1);
    io
}

/// A Neighbor Solicitation for `target` from `src` (with a source link-layer address option
/// of HOST), to the target's solicited-node group, as Linux sends it.
fn ns(src: &str, target: &str) -> Vec<u8> {
    let mut buf = [0u8; 128];
    let n = neighbor_solicit(HOST, v6(src), v6(target), None, &mut buf).unwrap();
    buf[..n].to_vec()
}

/// A Neighbor Advertisement of `target` at HOST with `flags`, to `dst`.
fn na(target: &str, dst: &str, flags: u32) -> Vec<u8> {
    let mut buf = [0u8; 128];
    let n = unsolicited_advert(HOST, v6(target), &mut buf).unwrap();
    let mut f = buf[..n].to_vec();
    f[38..54].copy_from_slice(&v6(dst).octets());
    f[58..62].copy_from_slice(&flags.to_be_bytes());
    fix_checksum(&mut f);
    f
}

fn fix_checksum(f: &mut [u8]) {
    let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
    let (s, d, len) = (ip.src_addr(), ip.dst_addr(), usize::from(ip.payload_len()));
    let mut icmp = Icmpv6Packet::new_unchecked(&mut f[54..54 + len]);
    icmp.set_checksum(0);
    icmp.fill_checksum(&s, &d);
}

fn arp(op: ArpOperation, sender: &str, target: &str) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let n = arp_frame(op, HOST, v4(sender), MacAddr::ZERO, v4(target), &mut buf).unwrap();
    buf[..n].to_vec()
}

fn is_na(f: &[u8]) -> bool {
    f.len() > 54
        && Icmpv6Packet::new_checked(&f[54..])
            .is_ok_and(|i| i.msg_type() == Icmpv6Type::NeighborAdvert)
}

#[test]
fn ns_with_hop_limit_64_or_a_bad_checksum_is_dropped() {
    let mut sp = setup();
    let mut f = ns("2001:db8:a::9", "2001:db8:a::1");
    f[21] = 64;
    fix_checksum(&mut f);
    let io = rejected(&mut sp, f, Reject::Nd(NdError::HopLimit));
    assert!(io.wire.is_empty() && io.host.is_empty(), "neither answered nor passed up");
    let mut f = ns("2001:db8:a::9", "2001:db8:a::1");
    f[57] ^= 0x55;
    let io = rejected(&mut sp, f, Reject::Nd(NdError::Checksum));
    assert!(io.wire.is_empty() && io.host.is_empty());
    // The same solicitation intact is answered and teaches the solicitor.
    let mut io = Recorder::default();
    local(&mut sp, &mut io, ns("2001:db8:a::9", "2001:db8:a::1"));
    assert!(is_na(&io.wire[0].1));
    let n = sp.neighbours();
    assert_eq!(n, vec![(IpAddr::V6(v6("2001:db8:a::9")), State::Stale, Some(HOST), Some(0))]);
    let id = sp.fib().fib().v6.lookup(u128::from(v6("2001:db8:a::9"))).unwrap();
    assert_eq!(sp.fib().fib().adj.get(id), Adjacency::Forward { port: 0, mac: HOST });
}

#[test]
fn ns_from_an_off_link_or_link_local_source_is_answered_but_not_learnt() {
    let mut sp = setup();
    let io = rejected(&mut sp, ns("2001:db8:ffff::7", "2001:db8:a::1"), Reject::OffLink);
    assert!(is_na(&io.wire[0].1), "answered all the same");
    assert_eq!(io.host.len(), 1, "the kernel sees it too");
    rejected(&mut sp, ns("fe80::7", "2001:db8:a::1"), Reject::LinkLocal);
    // A solicitation for someone else teaches nothing either.
    let io = rejected(&mut sp, ns("2001:db8:a::9", "2001:db8:a::77"), Reject::NotForUs);
    assert!(io.wire.is_empty());
}

#[test]
fn unsolicited_na_never_creates_an_entry() {
    let mut sp = setup();
    // Override flag, on-link target, to all nodes: RFC 4861 7.2.5 discards it.
    rejected(&mut sp, na("2001:db8:a::5", "ff02::1", na_flags::OVERRIDE), Reject::NoEntry);
    // Solicited + override, unicast to the router, but nothing was asked: the same.
    let f = na("2001:db8:a::6", "2001:db8:a::1", na_flags::SOLICITED | na_flags::OVERRIDE);
    rejected(&mut sp, f, Reject::NoEntry);
    assert!(sp.neighbours().is_empty());
}

#[test]
fn na_for_an_off_link_target_or_own_address_changes_nothing() {
    let mut sp = setup();
    let f = na("2001:db8:ffff::5", "2001:db8:a::1", na_flags::SOLICITED | na_flags::OVERRIDE);
    rejected(&mut sp, f, Reject::OffLink);
    rejected(&mut sp, na("2001:db8:a::1", "ff02::1", na_flags::OVERRIDE), Reject::OwnAddress);
    let mut f = na("2001:db8:a::5", "ff02::1", na_flags::SOLICITED | na_flags::OVERRIDE);
    let io = rejected(&mut sp, f.clone(), Reject::Nd(NdError::MulticastSolicited));
    assert!(io.host.is_empty());
    f[62] = 0xff; // target ff.. : multicast
    fix_checksum(&mut f);
    rejected(&mut sp, f, Reject::Nd(NdError::TargetMulticast));
}

#[test]
fn solicited_na_resolves_and_a_non_overriding_one_does_not_move_it() {
    let mut sp = setup();
    let mut io = Recorder::default();
    let fib = sp.fib().fib();
    let id = fib.v6.lookup(u128::from(v6("2001:db8:a::5"))).unwrap();
    let flow = wire::build::UdpFlow {
        src_mac: HOST,
        dst_mac: R_A,
        src: IpAddr::V6(v6("2001:db8:a::2")),
        dst: IpAddr::V6(v6("2001:db8:a::5")),
        src_port: 1,
        dst_port: 2,
        ttl: 9,
    };
    let mut buf = [0u8; 256];
    let n = wire::build::udp_frame(&flow, 80, &mut buf).unwrap();
    sp.handle(
        &mut io,
        PuntedFrame {
            punt: Punt::Unresolved { next_hop: id, port: 0 },
            phys: 0,
            in_port: 0,
            frame: buf[..n].to_vec(),
        },
        0,
    );
    local(&mut sp, &mut io, na("2001:db8:a::5", "2001:db8:a::1", na_flags::SOLICITED));
    let host_id = fib.v6.lookup(u128::from(v6("2001:db8:a::5"))).unwrap();
    assert_eq!(fib.adj.get(host_id), Adjacency::Forward { port: 0, mac: HOST });
    assert_eq!(sp.stats.sent_after_resolution, 1);
    // A different address without Override: the address is kept (the entry only turns
    // STALE, to be probed, RFC 4861 7.2.5), counted; the route stays.
    let mut f = na("2001:db8:a::5", "2001:db8:a::1", 0);
    f[80..86].copy_from_slice(&[2, 0, 0, 0, 0, 0xee]);
    fix_checksum(&mut f);
    local(&mut sp, &mut io, f);
    assert_eq!(sp.stats.rejects.get(Reject::NotOverriding), 1);
    assert_eq!(
        sp.neighbours(),
        vec![(IpAddr::V6(v6("2001:db8:a::5")), State::Stale, Some(HOST), Some(0))]
    );
    assert_eq!(fib.adj.get(host_id), Adjacency::Forward { port: 0, mac: HOST });
}

#[test]
fn arp_from_an_off_link_sender_is_answered_but_not_learnt() {
    let mut sp = setup();
    let io =
        rejected(&mut sp, arp(ArpOperation::Request, "203.0.113.5", "198.18.0.1"), Reject::OffLink);
    assert_eq!(io.wire.len(), 1, "the request is answered");
    // A reply nobody asked for, a request for another host from an unknown sender, a
    // claim of the router's own address, a probe from 0.0.0.0.
    rejected(&mut sp, arp(ArpOperation::Reply, "198.18.0.5", "198.18.0.1"), Reject::NoEntry);
    rejected(&mut sp, arp(ArpOperation::Request, "198.18.0.5", "198.18.0.6"), Reject::NotForUs);
    rejected(&mut sp, arp(ArpOperation::Request, "198.18.0.1", "198.18.0.1"), Reject::OwnAddress);
    rejected(&mut sp, arp(ArpOperation::Request, "0.0.0.0", "198.18.0.9"), Reject::BadSender);
    let mut f = arp(ArpOperation::Request, "198.18.0.5", "198.18.0.1");
    f[14] = 9; // hardware type
    rejected(&mut sp, f, Reject::ArpMalformed);
    // An on-link request for the router is learnt (RFC 826 merge), and then the same
    // sender's gratuitous ARP updates its entry.
    let mut io = Recorder::default();
    local(&mut sp, &mut io, arp(ArpOperation::Request, "198.18.0.5", "198.18.0.1"));
    assert_eq!(sp.neighbours().len(), 1);
    let before = sp.stats.rejects.total();
    local(&mut sp, &mut io, arp(ArpOperation::Request, "198.18.0.5", "198.18.0.5"));
    assert_eq!(sp.stats.rejects.total(), before);
}
