//! Bounded neighbour state under a scan: 1M addresses of a connected /12 (and 256k of a
//! connected IPv6 /64) driven through the slow path in memory, as a worm or a port scanner
//! behind the router would. The neighbour cache, the next-hop ids in use and the FIB's host
//! routes stay within `max_neighbours` throughout, and a real neighbour, resolved before the
//! scan and answering its reachability probes during it, keeps its route: the fast path
//! (a real `Forwarder`) keeps forwarding to it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use dataplane::fib::{FibControl, RouteKind};
use dataplane::forward::Forwarder;
use dataplane::neighbour::State;
use dataplane::ports::PortInfo;
use dataplane::punt::{Punt, PuntBatch, PuntedFrame};
use dataplane::slowpath::{SlowIo, SlowPath};
use io::{Batch, FramePool};
use wire::build::{UdpFlow, arp_frame, udp_frame};
use wire::ndisc::{na_flags, unsolicited_advert};
use wire::{
    ArpOperation, ArpPacket, EtherType, Icmpv6Packet, Icmpv6Type, Ipv6Packet, MacAddr, parse_l2,
};

const R_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const R_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
const HOST_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa1]);
const REAL: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb1]);
const SCANNED: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xcc]);
const LIMIT: usize = 16_384;
/// Ids that exist whatever the neighbours: local, blackhole, one connected id per port.
const FIXED_IDS: usize = 4;

/// Counts what the slow path sends and lists the addresses it asks for.
#[derive(Default)]
struct ScanIo {
    sent: u64,
    /// (target, unicast) of every ARP request / Neighbor Solicitation since the last drain.
    asked: Vec<(IpAddr, bool)>,
}

impl SlowIo for ScanIo {
    fn send_wire(&mut self, _phys: u16, f: &[u8]) {
        self.sent += 1;
        let Ok(l2) = parse_l2(f) else { return };
        let unicast = f[0] & 1 == 0;
        let l3 = &f[l2.l3_offset..];
        if l2.ethertype == EtherType::Arp
            && let Ok(a) = ArpPacket::new_checked(l3)
            && a.operation() == ArpOperation::Request
        {
            self.asked.push((IpAddr::V4(a.target_proto_addr()), unicast));
        } else if let Ok(ip) = Ipv6Packet::new_checked(l3)
            && let Ok(icmp) = Icmpv6Packet::new_checked(ip.payload())
            && icmp.msg_type() == Icmpv6Type::NeighborSolicit
            && let Some(t) = icmp.ndp_target_addr()
        {
            self.asked.push((IpAddr::V6(t), unicast));
        }
    }
    fn send_host(&mut self, _port: u16, _f: &[u8]) {}
}

struct Lab {
    sp: SlowPath,
    io: ScanIo,
    fwd: Forwarder,
    pool: FramePool,
    me_b: IpAddr,
    real: IpAddr,
    probes_answered: u64,
}

/// Port a (phys 0): 198.18.0.1/24, 2001:db8:a::1/64; port b (phys 1): 10.16.0.1/12,
/// 2001:db8:b::1/64.
fn lab(v6: bool) -> Lab {
    let mut a = PortInfo::new("a", R_A, 0);
    a.addresses = vec![(ip("198.18.0.1"), 24), (ip("2001:db8:a::1"), 64)];
    let mut b = PortInfo::new("b", R_B, 1);
    b.addresses = vec![(ip("10.16.0.1"), 12), (ip("2001:db8:b::1"), 64)];
    let mut ctl = FibControl::new(2 * LIMIT + 16);
    for (net, len, port) in [
        ("198.18.0.0", 24, 0),
        ("2001:db8:a::", 64, 0),
        ("10.16.0.0", 12, 1),
        ("2001:db8:b::", 64, 1),
    ] {
        ctl.add_connected(ip(net), len, port).unwrap();
    }
    for me in ["198.18.0.1", "2001:db8:a::1", "10.16.0.1", "2001:db8:b::1"] {
        ctl.add_local(ip(me)).unwrap();
    }
    let ports = vec![a, b];
    let fwd = Forwarder::new(ctl.fib(), &ports);
    let sp = SlowPath::with_max_neighbours(ctl, ports, false, 100, LIMIT);
    let (me_b, real) = if v6 {
        (ip("2001:db8:b::1"), ip("2001:db8:b::2"))
    } else {
        (ip("10.16.0.1"), ip("10.16.0.2"))
    };
    Lab { sp, io: ScanIo::default(), fwd, pool: FramePool::new(64), me_b, real, probes_answered: 0 }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A UDP packet from a host behind port a to `dst`, as the router received it.
fn packet_to(dst: IpAddr) -> Vec<u8> {
    let src = if dst.is_ipv4() { ip("198.18.0.2") } else { ip("2001:db8:a::2") };
    let flow =
        UdpFlow { src_mac: HOST_A, dst_mac: R_A, src, dst, src_port: 1000, dst_port: 53, ttl: 64 };
    let mut buf = [0u8; 256];
    let n = udp_frame(&flow, 60, &mut buf).unwrap();
    buf[..n].to_vec()
}

/// The answer of `who` at `mac` to the router's request: an ARP reply, or a solicited
/// Neighbor Advertisement with a target link-layer address option.
fn answer(who: IpAddr, me: IpAddr, mac: MacAddr) -> Vec<u8> {
    let mut buf = [0u8; 128];
    match (who, me) {
        (IpAddr::V4(w), IpAddr::V4(m)) => {
            let n = arp_frame(ArpOperation::Reply, mac, w, R_B, m, &mut buf).unwrap();
            buf[..n].to_vec()
        }
        (IpAddr::V6(w), IpAddr::V6(m)) => {
            let n = unsolicited_advert(mac, w, &mut buf).unwrap();
            let mut f = buf[..n].to_vec();
            f[0..6].copy_from_slice(&R_B.0);
            f[38..54].copy_from_slice(&m.octets());
            f[58..62].copy_from_slice(&(na_flags::SOLICITED | na_flags::OVERRIDE).to_be_bytes());
            let mut icmp = Icmpv6Packet::new_unchecked(&mut f[54..86]);
            icmp.set_checksum(0);
            icmp.fill_checksum(&w, &m);
            f
        }
        _ => unreachable!(),
    }
}

impl Lab {
    fn punt_unresolved(&mut self, dst: IpAddr, now: u64) {
        let id = match dst {
            IpAddr::V4(a) => self.sp.fib().fib().v4.lookup(u32::from(a)),
            IpAddr::V6(a) => self.sp.fib().fib().v6.lookup(u128::from(a)),
        };
        let frame = packet_to(dst);
        let punt = Punt::Unresolved { next_hop: id.unwrap(), port: 1 };
        self.sp.handle(&mut self.io, PuntedFrame { punt, phys: 0, in_port: 0, frame }, now);
    }

    /// Answers what the router asked: the real neighbour always, one scanned address in
    /// `every` (a populated prefix) to its first, broadcast request only.
    fn answer(&mut self, every: u128, now: u64) {
        for (who, unicast) in std::mem::take(&mut self.io.asked) {
            let mac = if who == self.real {
                self.probes_answered += u64::from(unicast);
                REAL
            } else if !unicast && bits(who).is_multiple_of(every) {
                SCANNED
            } else {
                continue;
            };
            let frame = answer(who, self.me_b, mac);
            self.sp.handle(
                &mut self.io,
                PuntedFrame { punt: Punt::Local, phys: 1, in_port: 1, frame },
                now,
            );
        }
    }

    /// Sends one packet to the real neighbour through the fast path: where it went.
    fn fast_path_to_real(&mut self) -> Option<(usize, MacAddr)> {
        let mut desc = self.pool.alloc().unwrap();
        self.pool.write(&mut desc, &packet_to(self.real));
        desc.port = 0;
        let mut input = Batch::new();
        input.push(desc);
        let mut outputs = [Batch::new(), Batch::new()];
        let mut punts = PuntBatch::default();
        self.fwd.process(&mut self.pool, &mut input, &mut outputs, &mut punts);
        self.fwd.quiescent();
        let mut got = None;
        for (phys, out) in outputs.iter_mut().enumerate() {
            for d in out.drain() {
                got = Some((phys, MacAddr(self.pool.frame(d)[0..6].try_into().unwrap())));
                self.pool.free(d);
            }
        }
        for (d, _, _) in punts.drain() {
            self.pool.free(d);
        }
        got
    }

    /// The bounds, and the invariant that ties host routes to neighbours.
    fn check_bounds(&self) {
        let neighbours = self.sp.neighbours();
        assert!(neighbours.len() <= LIMIT, "{} neighbours", neighbours.len());
        assert!(
            self.sp.fib().next_hops() <= LIMIT + FIXED_IDS,
            "{} next-hop ids",
            self.sp.fib().next_hops()
        );
        let host_routes: Vec<IpAddr> = self
            .sp
            .fib()
            .routes()
            .filter(|r| matches!(r.2, RouteKind::Neighbour { .. }))
            .map(|r| r.0)
            .collect();
        assert!(host_routes.len() <= LIMIT);
        assert_eq!(host_routes.len(), self.sp.fib().neighbour_count());
        for a in host_routes.iter().step_by(97) {
            let n =
                neighbours.iter().find(|n| n.0 == *a).expect("a host route without a neighbour");
            assert!(n.2.is_some() && !matches!(n.1, State::Incomplete | State::Failed), "{n:?}");
        }
    }
}

fn bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Scans `count` addresses from `first` at one per `gap_ns`, ticking every 100 ms.
fn scan(v6: bool, first: IpAddr, count: u64, gap_ns: u64) {
    let mut lab = lab(v6);
    // The real neighbour resolves before the scan.
    lab.punt_unresolved(lab.real, 0);
    lab.answer(u128::MAX, 0);
    assert_eq!(lab.fast_path_to_real(), Some((1, REAL)));
    let mut now = 0;
    for i in 0..count {
        let dst = match first {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) + i as u32)),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) + u128::from(i))),
        };
        now = (i + 1) * gap_ns;
        if dst != lab.real && dst != lab.me_b {
            lab.punt_unresolved(dst, now);
            lab.answer(64, now);
        }
        if i % 1000 == 0 {
            lab.sp.tick(&mut lab.io, now);
            lab.answer(64, now);
        }
        if i % 65_536 == 0 {
            lab.check_bounds();
            assert_eq!(lab.fast_path_to_real(), Some((1, REAL)), "after {i} addresses");
        }
    }
    lab.check_bounds();
    assert_eq!(lab.fast_path_to_real(), Some((1, REAL)));
    let real = lab
        .sp
        .neighbours()
        .into_iter()
        .find(|n| n.0 == lab.real)
        .expect("the real neighbour is still known");
    assert_eq!((real.2, real.3), (Some(REAL), Some(1)));
    let s = lab.sp.stats;
    assert!(
        now >= 60_000_000_000 && lab.probes_answered >= 2,
        "refreshed during the scan: {} probes",
        lab.probes_answered
    );
    assert!(s.neighbour_evictions > count / 2, "{s:?}");
    assert!(s.resolved > count / 128, "the answering hosts were resolved: {s:?}");
    assert_eq!(s.fib_full, 0, "{s:?}");
    eprintln!("{} addresses: {s:?}, {} wire frames", count, lab.io.sent);
}

#[test]
fn scan_of_a_connected_ipv4_slash12_stays_bounded() {
    scan(false, ip("10.16.0.0"), 1 << 20, 100_000);
}

#[test]
fn scan_of_a_connected_ipv6_prefix_stays_bounded() {
    scan(true, ip("2001:db8:b::"), 1 << 18, 400_000);
}
