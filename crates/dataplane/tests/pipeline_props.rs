//! Property tests of the whole forwarding node: arbitrary frames never panic it, and every
//! received packet is accounted for exactly once (forwarded, local, slow path, or one drop
//! reason), also with 802.1Q sub-interfaces, a small MTU and ICMP errors on, and through a
//! firewall whose rules use every part of it (frames with valid IP headers and random
//! contents, so that they get past the checks the firewall sits behind).

use dataplane::{Fib, FibControl, PortInfo, Worker};
use io::mem::{CountingTx, ReplayRx};
use io::{FramePool, TxPort};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, OnceLock};

/// The MACs of ports 0 and 1.
const RX_MAC: wire::MacAddr = wire::MacAddr([0x02, 0, 0, 0, 0, 0x01]);
const TX_MAC: wire::MacAddr = wire::MacAddr([0x02, 0, 0, 0, 0, 0x02]);

/// One FIB for every case: a default route per family installs 2^24 tbl24 entries, too slow
/// to repeat per case. Workers only read it.
fn fib() -> Arc<Fib> {
    static FIB: OnceLock<Arc<Fib>> = OnceLock::new();
    FIB.get_or_init(|| {
        let mut ctl = FibControl::new(64);
        let gw = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 2));
        ctl.set_neighbour(gw, 1, wire::MacAddr([2, 0, 0, 0, 0, 0xb2])).unwrap();
        ctl.add_route(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0, gw, 1).unwrap();
        ctl.add_route(
            IpAddr::V6("::".parse().unwrap()),
            0,
            IpAddr::V6("2001:db8::2".parse().unwrap()),
            1,
        )
        .unwrap();
        ctl.fib()
    })
    .clone()
}

fn worker(frames: Vec<Vec<u8>>) -> Worker<ReplayRx, CountingTx, CountingTx> {
    let ports = [PortInfo::new("a", RX_MAC, 0), PortInfo::new("b", TX_MAC, 1)];
    let rx = ReplayRx::new(0, frames).once();
    Worker::new(
        fib(),
        &ports,
        vec![rx],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(300),
        256,
    )
}

/// A worker with sub-interfaces (VLAN 5 on port a, 7 on port b), a 576-byte MTU on b (so
/// larger packets take the too-big path) and ICMP errors on.
fn worker_vlan(frames: Vec<Vec<u8>>) -> Worker<ReplayRx, CountingTx, CountingTx> {
    let mut b = PortInfo::new("b", TX_MAC, 1);
    b.mtu = 576;
    let ports = [
        PortInfo::new("a", RX_MAC, 0),
        b,
        PortInfo { vlan: Some(5), ..PortInfo::new("a.5", RX_MAC, 0) },
        PortInfo { vlan: Some(7), ..PortInfo::new("b.7", TX_MAC, 1) },
    ];
    let rx = ReplayRx::new(0, frames).once();
    let mut w = Worker::new(
        fib(),
        &ports,
        vec![rx],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(300),
        256,
    );
    w.set_icmp_rate(1_000_000);
    w
}

/// A frame addressed to the router with a plausible L2/L3 start and random rest.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let ethertype = prop_oneof![
        Just([0x08, 0x00]),
        Just([0x86, 0xdd]),
        Just([0x08, 0x06]),
        Just([0x81, 0x00]),
        any::<[u8; 2]>()
    ];
    (ethertype, proptest::collection::vec(any::<u8>(), 0..700), any::<bool>()).prop_map(
        |(et, rest, v)| {
            let mut f = RX_MAC.0.to_vec();
            f.extend_from_slice(&[2, 0, 0, 0, 0, 0xa1]);
            f.extend_from_slice(&et);
            let mut rest = rest;
            if v && et == [0x81, 0x00] && rest.len() >= 5 {
                // A tag for VLAN 5, then IPv4.
                rest[..5].copy_from_slice(&[0, 5, 0x08, 0x00, 0x45]);
            } else if v && !rest.is_empty() {
                rest[0] = if et == [0x86, 0xdd] { 0x60 } else { 0x45 };
            }
            f.extend_from_slice(&rest);
            f
        },
    )
}

/// Runs `w` over its `n` frames, then checks that each packet was counted exactly once and
/// that every frame went back to the pool.
fn all_accounted_for(
    mut w: Worker<ReplayRx, CountingTx, CountingTx>,
    n: u64,
) -> Result<(), TestCaseError> {
    while !w.rx[0].finished() {
        w.poll();
    }
    let c = w.counts();
    prop_assert_eq!(c.rx, n);
    prop_assert_eq!(c.forwarded + c.local + c.slow_path + c.dropped(), n);
    let sent: u64 = w.tx.iter().map(|t| t.stats().tx_packets).sum();
    prop_assert_eq!(sent, c.forwarded);
    // Punted: local, slow path, and the dropped packets an ICMP error is sent about (none
    // when the worker sends no errors).
    let (errors, _) = w.icmp_counts();
    prop_assert_eq!(w.local.stats().tx_packets, c.local + c.slow_path + errors);
    prop_assert_eq!(w.pool.available(), 300);
    Ok(())
}

/// Every part of the firewall at once: scrub, NAT (nat, rdr), `block return`, tags, keep
/// and modulate state with source tracking and overload, an ICMP type list, adaptive
/// timeouts low enough that states die by the count (the rule set's and a rule's own), a
/// fragment table of one set.
const KITCHEN_SINK: &str = "table <abusers> persist
set timeout { adaptive.start 2, adaptive.end 5 }
set limit frags 4
scrub in on a all max-mss 1000 random-id no-df min-ttl 30 set-tos 0x08
nat on b from 198.18.0.0/16 to any -> 198.19.0.1
rdr on b proto tcp from any to 198.19.0.1 port 8080 -> 198.18.0.9 port 80
block return all
block in quick from <abusers>
pass in on a proto tcp from any to any flags S/SA modulate state (max-src-conn 50, max-src-conn-rate 20/5, overload <abusers> flush) tag IN
pass in on a proto udp all keep state (max 100, adaptive.start 1, adaptive.end 3)
pass in on a inet proto icmp icmp-type { echoreq, unreach } keep state
pass in on a inet6 proto icmp6 all keep state allow-opts
pass in on b proto tcp to 198.18.0.9 port 80 keep state
pass out on b tagged IN keep state
pass out on b proto { udp, icmp, icmp6 } all keep state
";

fn worker_firewall(frames: Vec<Vec<u8>>) -> Worker<ReplayRx, CountingTx, CountingTx> {
    let ifaces = |name: &str| ["a", "b"].iter().position(|n| *n == name).map(|i| i as u16);
    let rules = dataplane::firewall::CompiledRules::parse(
        KITCHEN_SINK,
        std::path::Path::new("sink.conf"),
        &ifaces,
    )
    .unwrap();
    let mut w = worker(frames);
    w.set_firewall(dataplane::firewall::Firewall::new(
        dataplane::firewall::RulesSlot::new(Arc::new(rules)),
        3,
    ));
    w.set_icmp_rate(1_000_000);
    w
}

/// A frame to the router from behind port a with a valid IPv4 or IPv6 header (options or
/// extension headers, fragments, any protocol, few addresses so that flows repeat) and
/// random contents behind it.
fn frame_with_valid_ip() -> impl Strategy<Value = Vec<u8>> {
    let proto = prop_oneof![
        Just(6u8),
        Just(17),
        Just(1),
        Just(58),
        Just(0),
        Just(44),
        Just(60),
        any::<u8>()
    ];
    let frag = prop_oneof![4 => Just(0u16), 1 => Just(0x2000), 1 => any::<u16>()];
    (
        any::<bool>(),
        proto,
        frag,
        0usize..3,
        0u8..4,
        0u8..4,
        proptest::collection::vec(any::<u8>(), 0..120),
    )
        .prop_map(|(v6, proto, frag, opt_words, src, dst, rest)| {
            let mut f = RX_MAC.0.to_vec();
            f.extend_from_slice(&[2, 0, 0, 0, 0, 0xa1]);
            if v6 {
                f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
                f.extend_from_slice(&(rest.len() as u16).to_be_bytes());
                f.extend_from_slice(&[proto, 64]);
                f.extend_from_slice(&[
                    0x20,
                    0x01,
                    0x0d,
                    0xb8,
                    0,
                    0xa,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    2 + src,
                ]);
                f.extend_from_slice(&[
                    0x20,
                    0x01,
                    0x0d,
                    0xb8,
                    0,
                    0xf,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    1 + dst,
                ]);
            } else {
                let hlen = 20 + 4 * opt_words;
                f.extend_from_slice(&[0x08, 0x00, 0x40 | (hlen / 4) as u8, 0]);
                f.extend_from_slice(&((hlen + rest.len()) as u16).to_be_bytes());
                f.extend_from_slice(&[0x12, 0x34]);
                f.extend_from_slice(&frag.to_be_bytes());
                f.extend_from_slice(&[64, proto, 0, 0, 198, 18, 0, 2 + src, 198, 19, 0, 1 + dst]);
                f.extend(std::iter::repeat_n(1, 4 * opt_words));
                let c = wire::checksum::checksum(&f[14..14 + hlen]);
                f[24..26].copy_from_slice(&c.to_be_bytes());
            }
            f.extend_from_slice(&rest);
            f
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn every_packet_is_accounted_for_through_the_firewall(frames in proptest::collection::vec(prop_oneof![3 => frame_with_valid_ip(), 1 => frame()], 1..300)) {
        let n = frames.len() as u64;
        let mut w = worker_firewall(frames);
        while !w.rx[0].finished() {
            w.poll();
        }
        let c = w.counts();
        // Later fragments ahead of their first wait for it, in their frames.
        let held = w.fragments_held();
        prop_assert_eq!(c.rx, n);
        prop_assert_eq!(c.forwarded + c.local + c.slow_path + c.dropped() + held as u64, n);
        prop_assert_eq!(w.pool.available() + held, 300, "every other frame back in the pool");
    }

    #[test]
    fn every_packet_is_accounted_for(frames in proptest::collection::vec(frame(), 1..300)) {
        let n = frames.len() as u64;
        all_accounted_for(worker(frames), n)?;
    }

    #[test]
    fn every_packet_is_accounted_for_with_vlans_and_errors(frames in proptest::collection::vec(frame(), 1..300)) {
        let n = frames.len() as u64;
        all_accounted_for(worker_vlan(frames), n)?;
    }
}

/// A host without an address yet (source 0.0.0.0) reaches the router's host stack with a
/// DHCP DISCOVER to 255.255.255.255 or a report to a multicast group; every other packet
/// from 0.0.0.0, or from 127/8, is a martian. Before, the DISCOVER was a martian too: a DHCP
/// server on the router never heard a client.
#[test]
fn unaddressed_hosts_reach_the_host_stack_only() {
    let frame = |src: [u8; 4], dst: [u8; 4]| {
        let flow = wire::build::UdpFlow {
            src_mac: wire::MacAddr([2, 0, 0, 0, 0, 0xa1]),
            dst_mac: if dst[0] >= 224 { wire::MacAddr([0xff; 6]) } else { RX_MAC },
            src: IpAddr::V4(src.into()),
            dst: IpAddr::V4(dst.into()),
            src_port: 68,
            dst_port: 67,
            ttl: 64,
        };
        let mut buf = vec![0; 400];
        let n = wire::build::udp_frame(&flow, 300, &mut buf).unwrap();
        buf.truncate(n);
        buf
    };
    let frames = vec![
        frame([0, 0, 0, 0], [255, 255, 255, 255]),
        frame([0, 0, 0, 0], [224, 0, 0, 22]),
        frame([0, 0, 0, 0], [10, 1, 2, 3]),
        frame([127, 0, 0, 1], [255, 255, 255, 255]),
        frame([0, 1, 2, 3], [255, 255, 255, 255]),
    ];
    let mut w = worker(frames);
    while !w.rx[0].finished() {
        w.poll();
    }
    let c = w.counts();
    assert_eq!(
        (c.local, c.drops[dataplane::DropReason::MartianSource as usize], c.forwarded),
        (2, 3, 0)
    );
}

/// TTL-expired packets are all dropped and counted, but only as many ICMP errors as the rate
/// limit allows reach the slow path (errppslimit).
#[test]
fn icmp_errors_are_rate_limited() {
    let flow = wire::build::UdpFlow {
        src_mac: wire::MacAddr([2, 0, 0, 0, 0, 0xa1]),
        dst_mac: RX_MAC,
        src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)),
        src_port: 1,
        dst_port: 2,
        ttl: 1,
    };
    let mut buf = [0u8; 64];
    let n = wire::build::udp_frame(&flow, 60, &mut buf).unwrap();
    let frames = vec![buf[..n].to_vec(); 1000];
    let started = std::time::Instant::now();
    let mut w = worker(frames);
    w.set_icmp_rate(100);
    while !w.rx[0].finished() {
        w.poll();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let c = w.counts();
    assert_eq!(c.drops[dataplane::DropReason::TtlExpired as usize], 1000);
    let (sent, suppressed) = w.icmp_counts();
    // A burst of 10 (a tenth of a second's worth), then 100 per second.
    let most = 10 + (100.0 * elapsed).ceil() as u64;
    assert!(sent >= 1 && sent <= most, "{sent} errors in {elapsed:.3} s");
    assert_eq!(sent + suppressed, 1000);
    assert_eq!(w.local.stats().tx_packets, sent);
}

/// RFC 3927 2.7 and RFC 4291 2.5.6: a link-local source or destination (169.254/16,
/// fe80::/10) is never forwarded, unless the packet is for one of the router's addresses; a
/// packet from outside with one of the router's own addresses as its source is a martian
/// (as Linux drops it).
#[test]
fn link_local_and_the_routers_own_sources_are_never_forwarded() {
    let frame = |src: &str, dst: &str| {
        let flow = wire::build::UdpFlow {
            src_mac: wire::MacAddr([2, 0, 0, 0, 0, 0xa1]),
            dst_mac: RX_MAC,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            src_port: 1234,
            dst_port: 9,
            ttl: 64,
        };
        let mut buf = vec![0; 400];
        let n = wire::build::udp_frame(&flow, 64, &mut buf).unwrap();
        buf.truncate(n);
        buf
    };
    let frames = vec![
        frame("198.18.0.2", "169.254.1.1"),
        frame("169.254.1.1", "198.19.0.2"),
        frame("fe80::1", "2001:db8:b::2"),
        frame("198.19.0.1", "198.19.0.2"),
        frame("2001:db8:a::1", "2001:db8:b::2"),
        frame("198.18.0.2", "198.19.0.2"),
    ];
    let mut a = PortInfo::new("a", RX_MAC, 0);
    a.addresses = vec![("198.18.0.1".parse().unwrap(), 24), ("2001:db8:a::1".parse().unwrap(), 64)];
    let mut b = PortInfo::new("b", TX_MAC, 1);
    b.addresses = vec![("198.19.0.1".parse().unwrap(), 24)];
    let mut w = Worker::new(
        fib(),
        &[a, b],
        vec![ReplayRx::new(0, frames).once()],
        vec![CountingTx::new(), CountingTx::new()],
        CountingTx::new(),
        FramePool::new(300),
        256,
    );
    while !w.rx[0].finished() {
        w.poll();
    }
    let c = w.counts();
    let drops = |r: dataplane::DropReason| c.drops[r as usize];
    assert_eq!(drops(dataplane::DropReason::LinkLocal), 3, "{c:?}");
    assert_eq!(drops(dataplane::DropReason::MartianSource), 2, "{c:?}");
    assert_eq!(c.forwarded, 1, "the ordinary datagram");
}
