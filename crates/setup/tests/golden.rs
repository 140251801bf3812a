//! Golden test: a capture of hand-picked frames goes through the pipeline configured by
//! `golden/router.toml`; what comes out on port lr-b must equal `golden/expected.pcap` byte for
//! byte, and every frame that does not come out must be counted under the expected reason.
//!
//! To regenerate both captures after an intended change: `LINERATE_BLESS=1 cargo test -p
//! linerate-setup --test golden`, then review them (`tcpdump -nr ... -vv`) before committing.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use dataplane::Worker;
use dataplane::counters::DropReason;
use io::mem::{CountingTx, PcapTx, ReplayRx};
use io::{FramePool, TxPort};
use wire::build::{UdpFlow, udp_frame};
use wire::{Ipv4Packet, MacAddr};

const ROUTER_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const HOST_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa1]);

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

fn udp(src: IpAddr, dst: IpAddr, ttl: u8) -> Vec<u8> {
    let flow =
        UdpFlow { src_mac: HOST_A, dst_mac: ROUTER_A, src, dst, src_port: 4000, dst_port: 53, ttl };
    let mut buf = vec![0u8; 256];
    let len = udp_frame(&flow, 60, &mut buf).unwrap();
    buf.truncate(len);
    buf
}

fn with_ipv4<F: FnOnce(&mut Ipv4Packet<&mut [u8]>)>(mut frame: Vec<u8>, f: F) -> Vec<u8> {
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
    f(&mut ip);
    frame
}

/// What the pipeline must do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Forward,
    Local,
    /// Handed to the slow path to wait for its neighbour's address.
    SlowPath,
    Drop(DropReason),
}
use Fate::{Forward, Local, SlowPath};

/// `frame` with an 802.1Q tag of VLAN `vid` after the MACs.
fn tagged(mut frame: Vec<u8>, vid: u16) -> Vec<u8> {
    let [hi, lo] = vid.to_be_bytes();
    frame.splice(12..12, [0x81, 0x00, hi, lo]);
    frame
}

fn dropped(reason: DropReason) -> Fate {
    Fate::Drop(reason)
}

/// The input frames, each with the fate the pipeline must give it.
fn input() -> Vec<(Vec<u8>, Fate)> {
    let a2 = v4([198, 18, 0, 2]);
    let v6 = |s: &str| IpAddr::V6(s.parse::<Ipv6Addr>().unwrap());
    let fwd = Forward;
    let mut out = vec![
        (udp(a2, v4([10, 1, 2, 3]), 64), fwd),
        (udp(a2, v4([198, 19, 0, 2]), 64), fwd),
        (udp(a2, v4([10, 9, 9, 9]), 1), dropped(DropReason::TtlExpired)),
        (
            with_ipv4(udp(a2, v4([10, 1, 2, 3]), 64), |ip| ip.set_checksum(0x1234)),
            dropped(DropReason::BadChecksum),
        ),
        (udp(a2, v4([192, 0, 2, 1]), 64), dropped(DropReason::NoRoute)),
        (udp(a2, v4([203, 0, 113, 5]), 64), SlowPath),
        (udp(v4([127, 0, 0, 1]), v4([10, 1, 2, 3]), 64), dropped(DropReason::MartianSource)),
        (udp(v6("2001:db8:a::2"), v6("2001:db8:100::5"), 64), fwd),
        (udp(v6("2001:db8:a::2"), v6("2001:db8:100::5"), 1), dropped(DropReason::TtlExpired)),
        (udp(v6("2001:db8:a::2"), v6("2001:db8:ffff::1"), 64), dropped(DropReason::NoRoute)),
    ];
    // Local exit: to the router's own address, and an ARP request for it.
    out.push((udp(a2, v4([198, 18, 0, 1]), 64), Local)); // the router's own address
    let arp: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 0xa1, 0x08, 0x06, // Ethernet
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 0xa1, 198, 18, 0, 2, // ARP: who has
        0, 0, 0, 0, 0, 0, 198, 18, 0, 1, // 198.18.0.1
    ];
    out.push((arp.to_vec(), Local));
    // IPv4 with a 4-byte option (Router Alert, RFC 2113): forwarded, options kept.
    let mut opt = udp(a2, v4([10, 7, 7, 7]), 64);
    opt.splice(34..34, [0x94, 0x04, 0, 0]);
    opt.truncate(64);
    let mut ip = Ipv4Packet::new_unchecked(&mut opt[14..]);
    ip.set_header_len(24);
    ip.set_total_len(50);
    ip.fill_checksum();
    out.push((opt, fwd));
    // Malformed frames.
    out.push((udp(a2, v4([10, 1, 2, 3]), 64)[..30].to_vec(), dropped(DropReason::Truncated)));
    out.push((
        with_ipv4(udp(a2, v4([10, 1, 2, 3]), 64), |ip| {
            ip.set_version(5);
            ip.fill_checksum();
        }),
        dropped(DropReason::BadVersion),
    ));
    // Total length beyond the frame: the frame lost bytes on the way.
    out.push((
        with_ipv4(udp(a2, v4([10, 1, 2, 3]), 64), |ip| {
            ip.set_total_len(200);
            ip.fill_checksum();
        }),
        dropped(DropReason::Truncated),
    ));
    // Total length shorter than the header itself (RFC 1812 5.2.2).
    out.push((
        with_ipv4(udp(a2, v4([10, 1, 2, 3]), 64), |ip| {
            ip.set_total_len(10);
            ip.fill_checksum();
        }),
        dropped(DropReason::BadLength),
    ));
    let mut lldp = udp(a2, v4([10, 1, 2, 3]), 64);
    lldp[12..14].copy_from_slice(&[0x88, 0xcc]);
    out.push((lldp, dropped(DropReason::UnknownEthertype)));
    out.push((tagged(udp(a2, v4([10, 1, 2, 3]), 64), 100), dropped(DropReason::UnknownVlan)));
    // 802.1Q: untagged in, tagged out (lr-b.7); tagged in (lr-a.5), untagged out; tagged in,
    // tagged out; two stacked tags are not a configured sub-interface.
    out.push((udp(a2, v4([10, 77, 1, 1]), 64), fwd));
    out.push((tagged(udp(v4([198, 21, 0, 2]), v4([10, 1, 2, 3]), 64), 5), fwd));
    out.push((tagged(udp(v4([198, 21, 0, 2]), v4([10, 77, 1, 1]), 64), 5), fwd));
    out.push((
        tagged(tagged(udp(a2, v4([10, 1, 2, 3]), 64), 5), 5),
        dropped(DropReason::UnknownVlan),
    ));
    let mut elsewhere = udp(a2, v4([10, 1, 2, 3]), 64);
    elsewhere[5] = 0x99;
    out.push((elsewhere, dropped(DropReason::NotForUs)));
    out
}

#[test]
fn golden_pcap_in_pcap_out() {
    let cfg = config::Config::load(&dir().join("router.toml")).unwrap();
    let (ctl, ports) = setup::fib(&cfg).unwrap();
    let frames = input();
    let mut input_pcap = io::pcap::PcapWriter::new(Vec::new()).unwrap();
    for (i, (f, _)) in frames.iter().enumerate() {
        input_pcap.write(0, i as u32 + 1, f).unwrap();
    }
    let input_bytes = input_pcap.into_inner();
    let bless = std::env::var_os("LINERATE_BLESS").is_some();
    let input_path = dir().join("input.pcap");
    if bless {
        std::fs::write(&input_path, &input_bytes).unwrap();
    }
    assert_eq!(std::fs::read(&input_path).unwrap(), input_bytes, "input.pcap is stale: bless it");

    // Replay the checked-in capture, as `linerate bench --pcap` would.
    let recs = io::pcap::read_file(&input_path).unwrap();
    let rx = ReplayRx::new(0, recs.iter().map(|r| r.data.clone())).once();
    let tx = vec![PcapTx::new(Vec::new()).unwrap(), PcapTx::new(Vec::new()).unwrap()];
    let mut w =
        Worker::new(ctl.fib(), &ports, vec![rx], tx, CountingTx::new(), FramePool::new(64), 4);
    while !w.rx[0].finished() {
        w.poll();
    }
    let counts = w.counts();
    let mut tx = std::mem::take(&mut w.tx);
    let out_b = tx.pop().unwrap().finish().unwrap();
    let out_a = tx.pop().unwrap().finish().unwrap();
    assert_eq!(out_a.len(), 24, "nothing may leave on lr-a");

    let expected_path = dir().join("expected.pcap");
    if bless {
        std::fs::write(&expected_path, &out_b).unwrap();
    }
    assert_eq!(std::fs::read(&expected_path).unwrap(), out_b, "output differs from expected.pcap");

    let forwarded = frames.iter().filter(|(_, fate)| *fate == Forward).count() as u64;
    let local = frames.iter().filter(|(_, fate)| *fate == Local).count() as u64;
    let slow = frames.iter().filter(|(_, fate)| *fate == SlowPath).count() as u64;
    assert_eq!(counts.rx, frames.len() as u64);
    assert_eq!(counts.forwarded, forwarded);
    assert_eq!(counts.local, local);
    assert_eq!(counts.slow_path, slow);
    assert_eq!(w.local.stats().tx_packets, local + slow);
    for &reason in DropReason::ALL {
        let want = frames.iter().filter(|(_, fate)| *fate == dropped(reason)).count() as u64;
        assert_eq!(counts.drops[reason as usize], want, "drop reason {}", reason.name());
    }
    assert_eq!(w.pool.available(), 64, "every frame returned to the pool");

    // The forwarded frames: TTL decremented with a valid checksum, MACs rewritten.
    let out = io::pcap::parse(&out_b, Path::new("out")).unwrap();
    assert_eq!(out.len() as u64, forwarded);
    let mut tags = 0;
    for rec in &out {
        let eth = wire::EthernetFrame::new_checked(&rec.data[..]).unwrap();
        assert_eq!(eth.dst_addr(), MacAddr([2, 0, 0, 0, 0, 0xb2]));
        assert_eq!(eth.src_addr(), MacAddr([2, 0, 0, 0, 0, 2]));
        let l2 = wire::parse_l2(&rec.data).unwrap();
        let l3 = &rec.data[l2.l3_offset..];
        // Only lr-b.7's route (10.77/16) goes out tagged.
        let to_vlan7 = l2.ethertype == wire::EtherType::Ipv4
            && Ipv4Packet::new_checked(l3).unwrap().dst_addr().octets()[1] == 77;
        assert_eq!(l2.vlans, [to_vlan7.then_some(7), None]);
        tags += usize::from(to_vlan7);
        if l2.ethertype == wire::EtherType::Ipv4 {
            let ip = Ipv4Packet::new_checked(l3).unwrap();
            assert_eq!(ip.ttl(), 63);
            assert!(ip.verify_checksum());
        } else {
            assert_eq!(wire::Ipv6Packet::new_checked(l3).unwrap().hop_limit(), 63);
        }
    }
    assert_eq!(tags, 2);
}
