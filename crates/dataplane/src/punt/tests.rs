use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use io::FramePool;
use wire::build::{UdpFlow, arp_frame, icmpv6_echo_frame, udp_frame};
use wire::icmp_reply::IcmpError;
use wire::{ArpOperation, MacAddr};

use super::*;
use crate::fib::{Fib, FibControl};

const HOST: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa1]);
const ROUTER: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn arp() -> Vec<u8> {
    let mut buf = [0u8; 64];
    let n = arp_frame(
        ArpOperation::Request,
        HOST,
        v4("198.18.0.2"),
        MacAddr::ZERO,
        v4("198.18.0.1"),
        &mut buf,
    )
    .unwrap();
    buf[..n].to_vec()
}

fn ns() -> Vec<u8> {
    let mut buf = [0u8; 128];
    let (me, router) = ("2001:db8:a::2".parse().unwrap(), "2001:db8:a::1".parse().unwrap());
    let n = wire::ndisc::neighbor_solicit(HOST, me, router, None, &mut buf).unwrap();
    buf[..n].to_vec()
}

fn udp_to(dst: IpAddr) -> Vec<u8> {
    let src =
        if dst.is_ipv4() { IpAddr::V4(v4("198.18.0.2")) } else { "2001:db8:a::2".parse().unwrap() };
    let flow =
        UdpFlow { src_mac: HOST, dst_mac: ROUTER, src, dst, src_port: 1, dst_port: 2, ttl: 64 };
    let mut buf = [0u8; 128];
    let n = udp_frame(&flow, 60, &mut buf).unwrap();
    buf[..n].to_vec()
}

#[test]
fn classes_of_real_frames() {
    assert_eq!(PuntClass::of(Punt::Local, &arp()), PuntClass::ArpNd);
    assert_eq!(PuntClass::of(Punt::Local, &ns()), PuntClass::ArpNd);
    // The same ARP request behind an 802.1Q tag.
    let mut tagged = arp();
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
    assert_eq!(PuntClass::of(Punt::Local, &tagged), PuntClass::ArpNd);
    let flow = UdpFlow {
        src_mac: HOST,
        dst_mac: ROUTER,
        src: "2001:db8:a::2".parse().unwrap(),
        dst: "2001:db8:a::1".parse().unwrap(),
        src_port: 0,
        dst_port: 0,
        ttl: 64,
    };
    let mut buf = [0u8; 128];
    let n = icmpv6_echo_frame(&flow, 1, 1, b"ping", &mut buf).unwrap();
    assert_eq!(
        PuntClass::of(Punt::Local, &buf[..n]),
        PuntClass::Local,
        "an echo request is not ND"
    );
    let udp = udp_to(IpAddr::V4(v4("198.18.0.1")));
    assert_eq!(PuntClass::of(Punt::Local, &udp), PuntClass::Local);
    assert_eq!(PuntClass::of(Punt::Local, &udp[..20]), PuntClass::Local, "truncated: not ND");
    assert_eq!(
        PuntClass::of(Punt::Unresolved { next_hop: 3, port: 1 }, &arp()),
        PuntClass::Resolve
    );
    assert_eq!(PuntClass::of(Punt::Fragment { port: 1, mac: HOST }, &udp), PuntClass::Fragment);
    assert_eq!(PuntClass::of(Punt::Error(IcmpError::TimeExceeded), &udp), PuntClass::IcmpError);
}

/// A FIB with a connected /24 on port 1 and 10/8 via 198.19.0.2: (fib, connected id, gateway id).
fn fib() -> (Arc<Fib>, u32, u32) {
    let mut ctl = FibControl::new(16);
    ctl.add_connected(IpAddr::V4(v4("198.19.0.0")), 24, 1).unwrap();
    let gw = ctl.add_route(IpAddr::V4(v4("10.0.0.0")), 8, IpAddr::V4(v4("198.19.0.2")), 1).unwrap();
    let fib = ctl.fib();
    let connected = fib.v4.lookup(u32::from(v4("198.19.0.9"))).unwrap();
    (fib, connected, gw)
}

struct Stage {
    tx: PuntSender,
    rx: PuntReceiver,
    pool: FramePool,
    clock: Arc<AtomicU64>,
}

fn stage(policy: PuntPolicy) -> Stage {
    let (tx, rx) = punt_channel(&policy, 1, fib().0);
    let mut tx = tx;
    let clock = Arc::new(AtomicU64::new(0));
    tx.set_clock(PuntClock::Manual(Arc::clone(&clock)));
    Stage { tx, rx, pool: FramePool::new(64), clock }
}

impl Stage {
    fn punt(&mut self, frames: &[(Vec<u8>, Punt)]) {
        let mut punts = PuntBatch::default();
        for (f, p) in frames {
            let mut d = self.pool.alloc().unwrap();
            self.pool.write(&mut d, f);
            d.port = 3;
            punts.push(d, *p, 5);
        }
        self.tx.punt_burst(&mut self.pool, &mut punts);
        assert!(punts.is_empty());
        assert_eq!(self.pool.available(), 64, "every frame back in the pool");
    }

    fn served(&self) -> Vec<PuntedFrame> {
        let mut got = Vec::new();
        self.rx.serve(usize::MAX, |m| got.push(m));
        got
    }
}

fn generous() -> PuntPolicy {
    PuntPolicy {
        police: [Some(RateLimit { per_second: 1_000_000, burst: 1_000_000 }); 5],
        queue: [2; 5],
        ..PuntPolicy::default()
    }
}

#[test]
fn copies_serves_arp_nd_first_and_counts_full_queues() {
    let mut s = stage(generous());
    let local = udp_to(IpAddr::V4(v4("198.18.0.1")));
    s.punt(&[
        (local.clone(), Punt::Local),
        (local.clone(), Punt::Local),
        (local, Punt::Local),
        (arp(), Punt::Local),
        (ns(), Punt::Local),
    ]);
    let got = s.served();
    let classes: Vec<PuntClass> = got.iter().map(|m| PuntClass::of(m.punt, &m.frame)).collect();
    assert_eq!(classes, [PuntClass::ArpNd, PuntClass::ArpNd, PuntClass::Local, PuntClass::Local]);
    assert_eq!(
        (got[2].phys, got[2].in_port, got[0].frame.clone(), got[1].frame.clone()),
        (3, 5, arp(), ns())
    );
    let drops = s.rx.stats().drops();
    assert_eq!(drops.get(PuntClass::Local, PuntDrop::QueueFull), 1);
    assert_eq!(drops.total(), 1);
    assert!(drops.named().any(|(n, c)| n == "punt_local_queue_full" && c == 1));
}

#[test]
fn each_class_has_its_own_bucket() {
    let mut p = generous();
    p.queue = [1000; 5];
    p.police[PuntClass::Local as usize] = Some(RateLimit { per_second: 10, burst: 2 });
    let mut s = stage(p);
    let local = udp_to(IpAddr::V4(v4("198.18.0.1")));
    let burst: Vec<_> =
        (0..5).map(|_| (local.clone(), Punt::Local)).chain([(arp(), Punt::Local)]).collect();
    s.punt(&burst);
    assert_eq!(s.served().len(), 3, "2 of the local class, and the ARP request");
    assert_eq!(s.rx.stats().drops().get(PuntClass::Local, PuntDrop::Policed), 3);
    // 10 per second: one more after 100 ms.
    s.clock.store(100_000_000, Ordering::Relaxed);
    s.punt(&burst[..2]);
    assert_eq!(s.served().len(), 1);
    assert_eq!(s.rx.stats().drops().get(PuntClass::Local, PuntDrop::Policed), 4);
}

#[test]
fn next_hops_are_throttled_gateways_as_one_connected_hosts_each() {
    let (_, connected, gw) = fib();
    let mut p = generous();
    p.queue = [1000; 5];
    (p.next_hop_burst, p.next_hop_rate) = (2, 1);
    let mut s = stage(p);
    // Through the gateway: one next hop whatever the destination.
    let via: Vec<_> = (0..5)
        .map(|i| {
            (
                udp_to(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i))),
                Punt::Unresolved { next_hop: gw, port: 1 },
            )
        })
        .collect();
    // On the connected prefix: each destination its own, two of them three times each.
    let on_link: Vec<_> = [7u8, 7, 7, 8, 8, 8]
        .iter()
        .map(|&h| {
            (
                udp_to(IpAddr::V4(Ipv4Addr::new(198, 19, 0, h))),
                Punt::Unresolved { next_hop: connected, port: 1 },
            )
        })
        .collect();
    s.punt(&via);
    s.punt(&on_link);
    assert_eq!(s.served().len(), 2 + 2 + 2);
    assert_eq!(s.rx.stats().drops().get(PuntClass::Resolve, PuntDrop::NextHopLimit), 3 + 1 + 1);
    // A second later, one more each.
    s.clock.store(1_000_000_000, Ordering::Relaxed);
    s.punt(&via);
    s.punt(&on_link);
    assert_eq!(s.served().len(), 3);
    // An IPv6 host of the same port's prefix has its own share too.
    let v6 = (
        udp_to(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 7))),
        Punt::Unresolved { next_hop: connected, port: 1 },
    );
    s.punt(&[v6.clone(), v6.clone(), v6]);
    assert_eq!(s.served().len(), 2);
    // `route-to`'s gateway: one share whatever the destinations, one per gateway.
    let gateway = |g: u8| Punt::Via { gateway: IpAddr::V4(Ipv4Addr::new(198, 19, 0, g)), port: 1 };
    let routed: Vec<_> =
        (0..5).map(|i| (udp_to(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i))), gateway(254))).collect();
    s.punt(&routed);
    s.punt(&[(udp_to(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9))), gateway(253))]);
    assert_eq!(s.served().len(), 2 + 1);
}

#[test]
fn a_burst_is_shared_among_workers() {
    let p = PuntPolicy::default().share(3);
    assert_eq!(
        p.police[PuntClass::ArpNd as usize],
        Some(RateLimit { per_second: 3_334, burst: 334 })
    );
    assert_eq!(p.police[PuntClass::IcmpError as usize], None);
    assert_eq!(p.queue, PuntPolicy::default().queue, "queues are shared, not split");
}
