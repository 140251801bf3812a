//! 802.1Q sub-interfaces and several workers, end to end: host A -> linerate (namespace D)
//! -> host B. The kernel here has no 802.1Q module, so B cannot tag frames itself: B's side
//! of the tagged link is `linerate gen --vlan` (sending) and a capture (receiving), and B has
//! a static neighbour entry on the sub-interface.
//!
//! - untagged in on lrd0, tagged out on lrd1.7 (VLAN 7 of lrd1): the capture in B sees tag 7,
//!   TTL 63, linerate's MAC;
//! - tagged in on lrd1.7, untagged out on lrd0: A receives every datagram B's side sent;
//! - two workers (AF_PACKET fanout): 2000 flows are spread over both, nothing is lost.
//!
//! Needs root (skips without); namespaces `lr<pid><tag><host>` are removed on drop.

use std::io::Read;
use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{A_MAC, B_MAC, D0_MAC, D1_MAC, build, start_until, stats, write_config};

fn last_json(out: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(out);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

const SUB_INTERFACE: &str = r#"
[[interface]]
name = "lrd1.7"
parent = "lrd1"
vlan = 7
addresses = ["198.20.0.1/24"]

[[neighbour]]
address = "198.20.0.2"
mac = "02:00:00:00:0b:01"
"#;

#[test]
fn vlan_sub_interface_both_ways() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("v");
    let cfg = write_config(&lab, "af_packet", SUB_INTERFACE);
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = start_until(linerate, "forwarding with");

    // A -> 198.20.0.2: leaves linerate tagged 7 towards B.
    let pcap_b = lab.dir.join("b.pcap");
    let mut tcpdump = lab.b.command("tcpdump");
    tcpdump
        .args(["-i", "lrb0", "-n", "-U", "--immediate-mode", "-w"])
        .arg(&pcap_b)
        .arg("vlan 7 and udp");
    let mut capture = start_until(tcpdump, "listening on");
    lab.a
        .exec(
            "bash",
            &["-c", "for i in 1 2 3 4 5; do echo vlan-$i > /dev/udp/198.20.0.2/9999; done"],
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut t = capture.terminate().unwrap();
    t.wait().unwrap();
    let recs = io::pcap::read_file(&pcap_b).unwrap();
    assert_eq!(recs.len(), 5, "tagged datagrams seen in B");
    for r in &recs {
        let l2 = wire::parse_l2(&r.data).unwrap();
        assert_eq!(l2.vlans, [Some(7), None]);
        assert_eq!(
            wire::EthernetFrame::new_checked(&r.data[..]).unwrap().src_addr().to_string(),
            D1_MAC
        );
        let ip = wire::Ipv4Packet::new_checked(&r.data[l2.l3_offset..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }

    // B's side sends tagged 7 to A: arrives untagged.
    let pcap_a = lab.dir.join("a.pcap");
    let mut tcpdump = lab.a.command("tcpdump");
    tcpdump
        .args(["-i", "lra0", "-n", "-U", "--immediate-mode", "-w"])
        .arg(&pcap_a)
        .arg("udp and src 198.20.0.2");
    let mut capture = start_until(tcpdump, "listening on");
    let generator = lab
        .b
        .command(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "gen",
            "-i",
            "lrb0",
            "--vlan",
            "7",
            "-s",
            "198.20.0.2:3000-198.20.0.2:3009",
            "-d",
            "198.18.0.2:4000",
        ])
        .args(["-D", D1_MAC, "-S", B_MAC, "-n", "200", "-R", "2000", "--json"])
        .output()
        .unwrap();
    assert!(generator.status.success(), "{}", String::from_utf8_lossy(&generator.stderr));
    assert_eq!(last_json(&generator.stdout)["sent"], 200);
    std::thread::sleep(Duration::from_millis(500));
    let mut t = capture.terminate().unwrap();
    t.wait().unwrap();
    let recs = io::pcap::read_file(&pcap_a).unwrap();
    if recs.len() != 200 {
        // Say where the missing ones went: linerate's counters.
        let mut out = String::new();
        if let Some(mut child) = dut.terminate() {
            let _ = std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out);
        }
        panic!("{} of 200 untagged datagrams seen in A; linerate said:\n{out}", recs.len());
    }
    for r in &recs {
        let eth = wire::EthernetFrame::new_checked(&r.data[..]).unwrap();
        assert_eq!(eth.ethertype(), wire::EtherType::Ipv4);
        assert_eq!(
            (eth.src_addr().to_string(), eth.dst_addr().to_string()),
            (D0_MAC.to_owned(), A_MAC.to_owned())
        );
    }
    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    assert!(!out.contains("unknown_vlan"), "{out}");
}

#[test]
fn two_workers_share_the_flows() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("w");
    let cfg = write_config(&lab, "af_packet", "");
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--workers", "2"]);
    let mut dut = start_until(linerate, "forwarding with 2 worker(s)");
    // Resolve B first (the generator's frames would otherwise wait on ARP in bursts).
    lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).unwrap();
    let generator = lab
        .a
        .command(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "gen",
            "-i",
            "lra0",
            "-s",
            "198.18.0.2:1000-198.18.0.2:1019",
            "-d",
            "198.19.0.2:2000-198.19.0.2:2099",
        ])
        .args(["-D", D0_MAC, "-n", "20000", "-R", "20000", "--json"])
        .output()
        .unwrap();
    assert!(generator.status.success(), "{}", String::from_utf8_lossy(&generator.stderr));
    // Workers may be descheduled on a loaded machine: wait until the frames are through.
    let sock = lab.dir.join("control.sock");
    let mut s = stats(&sock);
    for _ in 0..50 {
        if s["totals"]["forwarded"].as_u64().unwrap() >= 20000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        s = stats(&sock);
    }
    let workers = s["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    let fwd: Vec<u64> = workers.iter().map(|w| w["forwarded"].as_u64().unwrap()).collect();
    let total: u64 = fwd.iter().sum();
    assert!(total >= 20000, "forwarded {fwd:?} of 20000: {s}");
    // The fanout program spreads flows by the Toeplitz hash exactly as a NIC's RSS with the
    // symmetric key and a round-robin table would: predict each worker's share of the 2000
    // flows (10 frames each) from the Rust implementation.
    let t = io::rss::Toeplitz::new(&io::rss::SYMMETRIC_KEY);
    let (src, dst) = ("198.18.0.2".parse().unwrap(), "198.19.0.2".parse().unwrap());
    let mut predicted = [0u64; 2];
    for sp in 1000..1020 {
        for dp in 2000..2100 {
            predicted[usize::from(io::rss::queue_for(t.ipv4_ports(src, dst, sp, dp), 2))] += 10;
        }
    }
    for w in 0..2 {
        // Besides the flows: the ping before them, and B's ICMP port unreachable replies
        // (rate-limited by B's kernel) on their way back.
        assert!(
            fwd[w] >= predicted[w] && fwd[w] <= predicted[w] + 30,
            "worker {w}: forwarded {fwd:?}, Toeplitz predicts {predicted:?}"
        );
    }
    let mut child = dut.terminate().unwrap();
    assert!(child.wait().unwrap().success());
}
