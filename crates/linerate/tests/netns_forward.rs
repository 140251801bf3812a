//! End to end through real interfaces: host A -> linerate (in namespace D, between two veths)
//! -> host B, once per backend. Traffic comes from real kernel sockets (UDP datagrams from
//! bash's /dev/udp, and ping), a capture taken in B checks TTL and checksums, and linerate's
//! final counters must show the packets without a route dropped as `no_route`.
//!
//! Needs root (CI has it); without root each test says "skipped" and passes. Namespaces are
//! named `lr<pid><backend><host>` and removed on drop, also when a test fails.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{D1_MAC, build, start_until, write_config};

fn forward_through(backend: &str, tag: &str) {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build(tag);
    let cfg = write_config(&lab, backend, "");
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");

    let pcap = lab.dir.join("b.pcap");
    let mut tcpdump = lab.b.command("tcpdump");
    tcpdump
        .args(["-i", "lrb0", "-n", "-U", "--immediate-mode", "-w"])
        .arg(&pcap)
        .arg("udp or icmp");
    let mut capture = start_until(tcpdump, "listening on");

    // Five UDP datagrams from a kernel socket, five to a destination linerate has no route to.
    let udp = "for i in 1 2 3 4 5; do echo linerate-$i > /dev/udp/198.19.0.2/9999; echo x > /dev/udp/203.0.113.9/9; done";
    lab.a.exec("bash", &["-c", udp]).unwrap();
    // Ping crosses linerate both ways (B's replies come back through it).
    let ping = lab.a.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]);
    assert!(ping.is_ok(), "ping through linerate ({backend}) failed: {ping:?}");
    std::thread::sleep(Duration::from_millis(300));

    let mut tcpdump = capture.terminate().unwrap();
    tcpdump.wait().unwrap();
    let mut out = String::new();
    let mut linerate = dut.terminate().unwrap();
    linerate.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let status = linerate.wait().unwrap();
    assert!(status.success(), "linerate exited with {status}: {out}");

    check_capture(&pcap, backend, &out);
    let no_route = out
        .lines()
        .find_map(|l| {
            l.trim().strip_prefix("drop no_route").map(|n| n.trim().parse::<u64>().unwrap())
        })
        .unwrap_or(0);
    assert_eq!(no_route, 5, "linerate's counters:\n{out}");
    assert!(out.contains("lrd0") && out.contains("lrd1"), "{out}");
}

/// Every UDP datagram and echo request seen in B crossed one router: TTL 63, valid IPv4 and
/// UDP checksums, and the frames come from linerate's MAC.
fn check_capture(pcap: &Path, backend: &str, linerate_out: &str) {
    let recs = io::pcap::read_file(pcap).unwrap();
    let (mut udp, mut echo) = (0, 0);
    for rec in &recs {
        let eth = wire::EthernetFrame::new_checked(&rec.data[..]).unwrap();
        if eth.ethertype() != wire::EtherType::Ipv4 {
            continue;
        }
        let ip = wire::Ipv4Packet::new_checked(eth.payload()).unwrap();
        if ip.src_addr() != std::net::Ipv4Addr::new(198, 18, 0, 2) {
            continue; // B's own replies
        }
        assert_eq!(eth.src_addr().to_string(), D1_MAC, "{backend}");
        assert_eq!(ip.ttl(), 63, "{backend}: TTL not decremented once");
        assert!(ip.verify_checksum(), "{backend}: bad IPv4 checksum");
        match ip.protocol() {
            wire::IpProtocol::Udp => {
                let u = wire::UdpPacket::new_checked(ip.payload()).unwrap();
                assert!(
                    u.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()),
                    "{backend}: bad UDP checksum"
                );
                assert!(u.payload().starts_with(b"linerate-"));
                udp += 1;
            }
            wire::IpProtocol::Icmp => echo += 1,
            _ => {}
        }
    }
    assert_eq!(
        udp,
        5,
        "{backend}: UDP datagrams seen in B ({} frames captured); linerate said:\n{linerate_out}",
        recs.len()
    );
    assert!(echo >= 3, "{backend}: echo requests seen in B: {echo}");
}

#[test]
fn forwards_with_af_packet() {
    forward_through("af_packet", "p");
}

#[test]
fn forwards_with_af_xdp() {
    forward_through("af_xdp", "x");
}
