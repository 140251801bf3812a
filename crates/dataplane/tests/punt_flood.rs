//! A flood towards unresolved addresses, in memory, through a real worker, its punt stage
//! and the slow path: 1M frames at 1 Mpps (a synthetic clock) to 100k addresses of a connected
//! /12 where nobody answers. Meanwhile a host keeps asking the router's address with ARP and
//! NDP and pinging it, and a real neighbour that announces itself during the flood gets its
//! traffic forwarded by the fast path. Every flood frame ends up counted: dropped by the punt
//! stage under its class and reason, or by the slow path's neighbour cache.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dataplane::Worker;
use dataplane::fib::FibControl;
use dataplane::ports::PortInfo;
use dataplane::punt::{
    PuntClass, PuntClock, PuntDrop, PuntPolicy, PuntReceiver, PuntSender, punt_channel,
};
use dataplane::slowpath::{SlowIo, SlowPath};
use io::{Batch, FramePool, PortStats, RxPort, TxPort};
use wire::build::{UdpFlow, arp_frame, icmpv4_echo_frame, udp_frame};
use wire::{
    ArpOperation, ArpPacket, EtherType, Icmpv6Packet, Icmpv6Type, Ipv6Packet, MacAddr, parse_l2,
};

const R_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const R_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
const HOST_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa1]);
const REAL: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb1]);
const FLOOD: u64 = 1_000_000;
const ADDRESSES: u32 = 100_000;
/// One frame per microsecond: 1 Mpps.
const GAP_NS: u64 = 1_000;
/// Punted frames the slow path takes per worker batch (64 frames, 64 us): it keeps up with
/// what the policers let through, not with the flood.
const SLOW_BUDGET: usize = 32;

/// Frames the test hands to the worker, as a NIC queue would.
#[derive(Default)]
struct QueueRx {
    frames: VecDeque<Vec<u8>>,
    port: u16,
    stats: PortStats,
}

impl RxPort for QueueRx {
    fn rx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        let mut n = 0;
        while n < max.min(batch.room()) {
            let Some(f) = self.frames.pop_front() else { break };
            let Some(mut d) = pool.alloc() else { break };
            pool.write(&mut d, &f);
            d.port = self.port;
            batch.push(d);
            n += 1;
        }
        self.stats.rx_packets += n as u64;
        n
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Counts forwarded frames by destination MAC.
#[derive(Default)]
struct MacTx {
    to_real: u64,
    other: u64,
}

impl TxPort for MacTx {
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        for d in batch.drain() {
            if pool.frame(d)[0..6] == REAL.0 {
                self.to_real += 1;
            } else {
                self.other += 1;
            }
            pool.free(d);
        }
    }
    fn stats(&self) -> PortStats {
        PortStats { tx_packets: self.to_real + self.other, ..PortStats::default() }
    }
}

/// What the slow path sent: answers to the host on port a, requests on port b.
#[derive(Default)]
struct Wire {
    arp_replies: u64,
    nd_adverts: u64,
    echo_replies: u64,
    arp_requests: u64,
}

impl SlowIo for Wire {
    fn send_wire(&mut self, _phys: u16, f: &[u8]) {
        let Ok(l2) = parse_l2(f) else { return };
        let l3 = &f[l2.l3_offset..];
        match l2.ethertype {
            EtherType::Arp => match ArpPacket::new_checked(l3).map(|a| a.operation()) {
                Ok(ArpOperation::Reply) => self.arp_replies += 1,
                Ok(ArpOperation::Request) => self.arp_requests += 1,
                _ => {}
            },
            EtherType::Ipv6 => {
                if let Ok(ip) = Ipv6Packet::new_checked(l3)
                    && let Ok(icmp) = Icmpv6Packet::new_checked(ip.payload())
                    && icmp.msg_type() == Icmpv6Type::NeighborAdvert
                {
                    self.nd_adverts += 1;
                }
            }
            EtherType::Ipv4 if l3.get(9) == Some(&1) && l3.get(20) == Some(&0) => {
                self.echo_replies += 1
            }
            _ => {}
        }
    }
    fn send_host(&mut self, _port: u16, _f: &[u8]) {}
}

type FloodWorker = Worker<QueueRx, MacTx, PuntSender>;

struct Lab {
    worker: FloodWorker,
    sp: SlowPath,
    rx: PuntReceiver,
    wire: Wire,
    clock: Arc<AtomicU64>,
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Port a (phys 0): 198.18.0.1/24, 2001:db8:a::1/64, the host and the flood source; port b
/// (phys 1): 10.16.0.1/12, connected, where only REAL (10.16.0.2) lives.
fn lab() -> Lab {
    let mut a = PortInfo::new("a", R_A, 0);
    a.addresses = vec![(ip("198.18.0.1"), 24), (ip("2001:db8:a::1"), 64)];
    let mut b = PortInfo::new("b", R_B, 1);
    b.addresses = vec![(ip("10.16.0.1"), 12)];
    let mut ctl = FibControl::new(1 << 16);
    for (net, len, port) in [("198.18.0.0", 24, 0), ("2001:db8:a::", 64, 0), ("10.16.0.0", 12, 1)] {
        ctl.add_connected(ip(net), len, port).unwrap();
    }
    for me in ["198.18.0.1", "2001:db8:a::1", "10.16.0.1"] {
        ctl.add_local(ip(me)).unwrap();
    }
    let ports = vec![a, b];
    let fib = ctl.fib();
    let (mut tx, rx) = punt_channel(&PuntPolicy::default(), 1, Arc::clone(&fib));
    let clock = Arc::new(AtomicU64::new(0));
    tx.set_clock(PuntClock::Manual(Arc::clone(&clock)));
    let rxs =
        vec![QueueRx { port: 0, ..QueueRx::default() }, QueueRx { port: 1, ..QueueRx::default() }];
    let worker = Worker::new(
        fib,
        &ports,
        rxs,
        vec![MacTx::default(), MacTx::default()],
        tx,
        FramePool::new(512),
        64,
    );
    let sp = SlowPath::with_max_neighbours(ctl, ports, false, 100, 16_384);
    Lab { worker, sp, rx, wire: Wire::default(), clock }
}

fn udp_to(dst: Ipv4Addr) -> Vec<u8> {
    let flow = UdpFlow {
        src_mac: HOST_A,
        dst_mac: R_A,
        src: ip("198.18.0.2"),
        dst: IpAddr::V4(dst),
        src_port: 1000,
        dst_port: 53,
        ttl: 64,
    };
    let mut buf = [0u8; 128];
    let n = udp_frame(&flow, 60, &mut buf).unwrap();
    buf[..n].to_vec()
}

fn arp_request(mac: MacAddr, from: &str, to: &str) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let n = arp_frame(
        ArpOperation::Request,
        mac,
        from.parse().unwrap(),
        MacAddr::ZERO,
        to.parse().unwrap(),
        &mut buf,
    )
    .unwrap();
    buf[..n].to_vec()
}

/// The host's solicitation for the router's IPv6 address, and its ping of the router.
fn host_asks() -> [Vec<u8>; 3] {
    let mut buf = [0u8; 128];
    let n = wire::ndisc::neighbor_solicit(
        HOST_A,
        "2001:db8:a::2".parse().unwrap(),
        "2001:db8:a::1".parse().unwrap(),
        None,
        &mut buf,
    )
    .unwrap();
    let ns = buf[..n].to_vec();
    let flow = UdpFlow {
        src_mac: HOST_A,
        dst_mac: R_A,
        src: ip("198.18.0.2"),
        dst: ip("198.18.0.1"),
        src_port: 0,
        dst_port: 0,
        ttl: 64,
    };
    let n = icmpv4_echo_frame(&flow, 7, 1, b"are you there", &mut buf).unwrap();
    [arp_request(HOST_A, "198.18.0.2", "198.18.0.1"), ns, buf[..n].to_vec()]
}

impl Lab {
    fn now(&self) -> u64 {
        self.clock.load(Ordering::Relaxed)
    }

    /// One worker poll, then the slow path's share of work and, every 100 ms, its timers.
    fn step(&mut self) {
        self.worker.poll();
        let (sp, wire, now) = (&mut self.sp, &mut self.wire, self.clock.load(Ordering::Relaxed));
        self.rx.serve(SLOW_BUDGET, |m| sp.handle(wire, m, now));
        if now % 100_000_000 < 64 * GAP_NS {
            self.sp.tick(&mut self.wire, now);
        }
    }

    fn queue(&mut self, phys: usize, frame: Vec<u8>) {
        self.worker.rx[phys].frames.push_back(frame);
    }
}

#[test]
fn arp_nd_and_pings_survive_a_flood_to_unresolved_addresses() {
    let mut lab = lab();
    let base = u32::from(Ipv4Addr::new(10, 16, 1, 0));
    let (mut asked, mut to_real) = (0u64, 0u64);
    for i in 0..FLOOD {
        lab.clock.store(i * GAP_NS, Ordering::Relaxed);
        lab.queue(0, udp_to(Ipv4Addr::from(base + (i as u32 % ADDRESSES))));
        if i % 10_000 == 5_000 {
            for f in host_asks() {
                lab.queue(0, f);
            }
            asked += 1;
        }
        // REAL announces itself a third of the way in (it asks for the router's address),
        // then traffic to it starts.
        if i == FLOOD / 3 {
            lab.queue(1, arp_request(REAL, "10.16.0.2", "10.16.0.1"));
        }
        if i > FLOOD / 3 && i % 1_000 == 0 {
            lab.queue(0, udp_to(Ipv4Addr::new(10, 16, 0, 2)));
            to_real += 1;
        }
        if lab.worker.rx[0].frames.len() >= 64 {
            lab.step();
        }
    }
    // Drain, then let every resolution that nobody answers fail (3 tries, 1 s apart).
    let end = lab.now() + 5_000_000_000;
    while lab.now() < end {
        lab.clock.fetch_add(64 * GAP_NS, Ordering::Relaxed);
        lab.step();
    }

    let w = &lab.wire;
    assert_eq!(
        (w.arp_replies, w.nd_adverts, w.echo_replies),
        (asked + 1, asked, asked),
        "every question to the router answered"
    );
    assert_eq!(lab.worker.tx[1].to_real, to_real, "REAL's traffic forwarded by the fast path");
    let c = lab.worker.counts();
    assert_eq!(c.rx, c.forwarded + c.local + c.slow_path + c.dropped());
    assert_eq!(
        (c.forwarded, c.local, c.slow_path, c.dropped()),
        (to_real, 3 * asked + 1, FLOOD, 0)
    );

    // Every flood frame: dropped by the punt stage (by reason), or reached the slow path and
    // was dropped there when its neighbour failed, was evicted, or overflowed its queue.
    let d = lab.rx.stats().drops();
    let s = lab.sp.stats;
    let punt_dropped = d.class_total(PuntClass::Resolve);
    assert_eq!(punt_dropped + s.neighbour_drops, FLOOD, "{d:?} {s:?}");
    assert_eq!(s.sent_after_resolution, 0, "nobody answered the flood: {s:?}");
    for other in [PuntClass::ArpNd, PuntClass::Local, PuntClass::Fragment, PuntClass::IcmpError] {
        assert_eq!(d.class_total(other), 0, "{other:?} untouched: {d:?}");
    }
    // What reached the slow path is what the resolve class's bucket allows over the second
    // of flood: 5,000/s plus a burst of 500.
    let reached = FLOOD - punt_dropped;
    assert!(reached <= 5_000 + 500 + 5, "{reached} resolve punts reached the slow path");
    assert!(reached >= 5_000, "{reached}: the class is policed, not shut");
    assert!(d.get(PuntClass::Resolve, PuntDrop::Policed) > FLOOD * 9 / 10, "{d:?}");
    eprintln!("punt drops {d:?}\nslow path {s:?}\nARP requests sent {}", w.arp_requests);
}

#[test]
fn one_flow_to_a_silent_host_is_throttled_per_next_hop() {
    let mut lab = lab();
    // 10,000 packets at 1 Mpps then 2 s of quiet, to one address nobody answers.
    for i in 0..10_000u64 {
        lab.clock.store(i * GAP_NS, Ordering::Relaxed);
        lab.queue(0, udp_to(Ipv4Addr::new(10, 16, 9, 9)));
        if lab.worker.rx[0].frames.len() >= 64 {
            lab.step();
        }
    }
    lab.step();
    let d = lab.rx.stats().drops();
    // The default share: 8 at once (what the slow path queues), 4 per second after; 10 ms
    // of flow gets 8.
    assert_eq!(d.get(PuntClass::Resolve, PuntDrop::NextHopLimit), 10_000 - 8, "{d:?}");
    assert_eq!(
        d.get(PuntClass::Resolve, PuntDrop::Policed),
        0,
        "the class's bucket untouched: {d:?}"
    );
    assert_eq!(lab.wire.arp_requests, 1);
}
