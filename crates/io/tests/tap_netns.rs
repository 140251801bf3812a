//! The TAP port against the real kernel (needs root; otherwise prints "skipped: needs root").
//!
//! In namespace `lrtap-<pid>` (deleted by a Drop guard), a thread that has entered it creates
//! TAP `lrtap0` with 10.77.0.1/24 and 2001:db8:77::1/64 on the kernel's side. Playing a host
//! on the TAP's wire, the test resolves the kernel's address with an ARP request built by
//! `wire::ndisc` and checks the kernel's ARP reply; then pings it (IPv4 and IPv6), answering
//! the kernel's own ARP/ND requests with `wire::ndisc` replies, and checks that the kernel's
//! echo replies carry exactly the ICMP message `wire::icmp_reply::echo_reply` builds.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::time::{Duration, Instant};

use io::tap::Tap;
use io::{Batch, FramePool, RxPort, TxPort};
use wire::build::{UdpFlow, icmpv4_echo_frame, icmpv6_echo_frame};
use wire::icmp_reply::echo_reply;
use wire::ndisc::{arp_reply, arp_request, neighbor_advert};
use wire::{
    ArpOperation, ArpPacket, EtherType, EthernetFrame, Icmpv6Packet, Icmpv6Type, IpProtocol,
    Ipv6Packet, MacAddr,
};

const KERNEL_MAC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x0a, 0x01]);
const HOST_MAC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x0b, 0x01]);
const KERNEL_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const HOST_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

fn kernel_v6() -> Ipv6Addr {
    "2001:db8:77::1".parse().unwrap()
}

fn host_v6() -> Ipv6Addr {
    "2001:db8:77::2".parse().unwrap()
}

mod common;

use common::{Netns, ip, is_root};

/// `ip -o link show DEV` in namespace `ns` (sysfs shows the test process's namespace, not the
/// thread's), or None if there is no such interface.
fn link(ns: &str, dev: &str) -> Option<String> {
    let out = Command::new("ip").args(["-n", ns, "-o", "link", "show", dev]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Sends one frame through the TAP's TxPort.
fn send(tap: &mut Tap, pool: &mut FramePool, frame: &[u8]) {
    let mut batch = Batch::new();
    let mut d = pool.alloc().unwrap();
    pool.write(&mut d, frame);
    batch.push(d);
    let before = TxPort::stats(tap).tx_packets;
    tap.tx_burst(pool, &mut batch);
    assert!(batch.is_empty());
    assert_eq!(TxPort::stats(tap).tx_packets, before + 1, "write to the TAP failed");
}

/// Reads frames through the TAP's RxPort for up to 5 s, answering the kernel's ARP requests
/// and Neighbor Solicitations for the host's addresses, until `want` returns something.
fn expect<T>(
    tap: &mut Tap,
    pool: &mut FramePool,
    what: &str,
    mut want: impl FnMut(&[u8]) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut batch = Batch::new();
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        tap.wait_readable(100).unwrap();
        tap.rx_burst(pool, &mut batch, 64);
        let frames: Vec<Vec<u8>> =
            batch.as_slice().iter().map(|d| pool.frame(*d).to_vec()).collect();
        for d in batch.drain() {
            assert_eq!(d.port, 7);
            pool.free(d);
        }
        for f in frames {
            let mut reply = [0u8; 128];
            if let Ok(n) = arp_reply(&f, HOST_MAC, HOST_V4, &mut reply) {
                send(tap, pool, &reply[..n]);
            } else if let Ok(n) = neighbor_advert(&f, HOST_MAC, host_v6(), &mut reply) {
                send(tap, pool, &reply[..n]);
            } else if let Some(v) = want(&f) {
                return v;
            }
            seen.push(f.len());
        }
    }
    panic!("no {what} from the kernel within 5 s (frames seen, lengths: {seen:?})");
}

/// The ICMP(v6) message of an echo reply frame (to the host, from the kernel), if it is one.
fn echo_reply_icmp(f: &[u8], v6: bool) -> Option<Vec<u8>> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.dst_addr() != HOST_MAC || eth.src_addr() != KERNEL_MAC {
        return None;
    }
    if v6 {
        let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
        let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
        (ip.next_header() == IpProtocol::Icmpv6 && icmp.msg_type() == Icmpv6Type::EchoReply)
            .then(|| ip.payload().to_vec())
    } else {
        let ip = wire::Ipv4Packet::new_checked(eth.payload()).ok()?;
        (ip.protocol() == IpProtocol::Icmp && ip.payload().first() == Some(&0))
            .then(|| ip.payload().to_vec())
    }
}

#[test]
fn kernel_answers_arp_and_ping_through_the_tap() {
    if !is_root() {
        io::netdev::skip_test("needs root");
        return;
    }
    // Deleting the namespace also removes the TAP if it is still open.
    let ns = Netns::create(format!("lrtap-{}", std::process::id()));
    let name = ns.name().to_owned();
    ns.run(move || {
        let mut tap = Tap::open("lrtap0", 7).unwrap();
        assert_eq!(tap.name(), "lrtap0");
        tap.set_mac(KERNEL_MAC.0).unwrap();
        ip(&["-n", &name, "addr", "add", "10.77.0.1/24", "dev", "lrtap0"]).unwrap();
        ip(&["-n", &name, "addr", "add", "2001:db8:77::1/64", "dev", "lrtap0", "nodad"]).unwrap();
        tap.set_up(true).unwrap();
        let shown = link(&name, "lrtap0").unwrap();
        assert!(shown.contains(",UP") && shown.contains("link/ether 02:00:00:00:0a:01"), "{shown}");
        let mut pool = FramePool::new(256);

        // ARP: who has 10.77.0.1? The kernel answers from the TAP's MAC.
        let mut frame = [0u8; 256];
        let n = arp_request(HOST_MAC, HOST_V4, KERNEL_V4, None, &mut frame).unwrap();
        send(&mut tap, &mut pool, &frame[..n]);
        expect(&mut tap, &mut pool, "ARP reply", |f| {
            let eth = EthernetFrame::new_checked(f).ok()?;
            let arp = ArpPacket::new_checked(eth.payload())
                .ok()
                .filter(|_| eth.ethertype() == EtherType::Arp)?;
            (arp.operation() == ArpOperation::Reply).then_some(())?;
            assert_eq!(eth.dst_addr(), HOST_MAC);
            assert_eq!((arp.sender_hw_addr(), arp.sender_proto_addr()), (KERNEL_MAC, KERNEL_V4));
            assert_eq!((arp.target_hw_addr(), arp.target_proto_addr()), (HOST_MAC, HOST_V4));
            Some(())
        });

        // Ping over IPv4 and IPv6: the kernel's ICMP message is the one echo_reply builds.
        let flow = |src: IpAddr, dst: IpAddr| UdpFlow {
            src_mac: HOST_MAC,
            dst_mac: KERNEL_MAC,
            src,
            dst,
            src_port: 0,
            dst_port: 0,
            ttl: 64,
        };
        let data: Vec<u8> = (0..56u8).collect();
        for v6 in [false, true] {
            let n = if v6 {
                icmpv6_echo_frame(
                    &flow(host_v6().into(), kernel_v6().into()),
                    0x4c52,
                    6,
                    &data,
                    &mut frame,
                )
                .unwrap()
            } else {
                icmpv4_echo_frame(
                    &flow(HOST_V4.into(), KERNEL_V4.into()),
                    0x4c52,
                    4,
                    &data,
                    &mut frame,
                )
                .unwrap()
            };
            send(&mut tap, &mut pool, &frame[..n]);
            let kernel = expect(&mut tap, &mut pool, "echo reply", |f| echo_reply_icmp(f, v6));
            let mut ours = [0u8; 256];
            let m = echo_reply(&frame[..n], KERNEL_MAC, &mut ours).unwrap();
            let ours = echo_reply_icmp(&ours[..m], v6).expect("our reply parses as one");
            assert_eq!(kernel, ours, "IPv{} echo reply", if v6 { 6 } else { 4 });
        }
        let (rx, tx) = (RxPort::stats(&tap), TxPort::stats(&tap));
        assert!(rx.rx_packets >= 3 && rx.rx_bytes > 0, "{rx:?}");
        assert!(tx.tx_packets >= 3 && tx.tx_dropped == 0, "{tx:?}");
        assert_eq!(pool.available(), 256, "every frame went back to the pool");

        // A second handle shares the device; closing both removes the interface.
        let clone = tap.try_clone().unwrap();
        assert_eq!(clone.name(), "lrtap0");
        drop(tap);
        assert!(link(&name, "lrtap0").is_some());
        drop(clone);
        assert!(link(&name, "lrtap0").is_none());
    });
}
