//! `linerate gen` and `linerate rcv` counted against each other on a veth pair, for each
//! backend: every frame the generator reports sent is counted by the receiver. Needs root
//! (CI has it); says "skipped" otherwise.

mod common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use lab::topology::{End, Namespace, is_root, veth};
use wire::{EtherType, Ipv4Packet, UdpPacket, parse_l2};

/// The tests of this file one at a time: two generators at once on two CPUs would overrun
/// the receivers.
static SERIAL: Mutex<()> = Mutex::new(());

fn last_json(out: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(out);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn count_through(backend: &str, rcv_backend: &str, tag: &str) {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let pid = std::process::id();
    let a = Namespace::create(&format!("lr{pid}{tag}g")).unwrap();
    let b = Namespace::create(&format!("lr{pid}{tag}r")).unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap(); // no router solicitations
    }
    veth(
        End { ns: &a, name: "lrg0", mac: "02:00:00:00:0a:01" },
        End { ns: &b, name: "lrr0", mac: "02:00:00:00:0b:01" },
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_linerate");
    let rcv = b
        .command(bin)
        .args(["rcv", "-i", "lrr0", "-t", "3", "--json", "--backend", rcv_backend])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let generator = a
        .command(bin)
        .args([
            "gen",
            "-i",
            "lrg0",
            "-D",
            "02:00:00:00:0b:01",
            "-n",
            "50000",
            "-R",
            "50000",
            "--json",
            "--backend",
            backend,
        ])
        .output()
        .unwrap();
    assert!(generator.status.success(), "{}", String::from_utf8_lossy(&generator.stderr));
    let rcv = rcv.wait_with_output().unwrap();
    assert!(rcv.status.success(), "{}", String::from_utf8_lossy(&rcv.stderr));
    let (g, r) = (last_json(&generator.stdout), last_json(&rcv.stdout));
    let sent = g["sent"].as_u64().unwrap();
    assert_eq!(sent, 50_000, "{g}");
    // Every frame is accounted for: received, or dropped and reported by the receiver (a
    // receiver descheduled on a loaded machine can overrun its ring; it must say so).
    let (received, dropped) = (r["received"].as_u64().unwrap(), r["dropped"].as_u64().unwrap());
    assert_eq!(received + dropped, sent, "gen: {g}\nrcv: {r}");
    assert!(dropped * 20 < sent, "more than 5% dropped: gen: {g}\nrcv: {r}");
    assert!(
        g["per_second"].as_array().unwrap().iter().any(|v| v.as_f64().unwrap() > 40_000.0),
        "{g}"
    );
}

/// One test, the backends one after the other: two generator/receiver pairs at once on two
/// CPUs would measure the machine, not the tools. The last receiver counts in the kernel
/// (the lab's): it sees every frame, so nothing may be reported dropped.
#[test]
fn gen_and_rcv_agree() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    count_through("af-packet", "af-packet", "p");
    count_through("af-xdp", "af-xdp", "x");
    count_through("af-packet", "xdp-sink", "s");
}

/// A generator namespace and a receiver namespace joined by lrg0 -- lrr0.
fn pair(tag: &str) -> (Namespace, Namespace) {
    let pid = std::process::id();
    let a = Namespace::create(&format!("lr{pid}{tag}g")).unwrap();
    let b = Namespace::create(&format!("lr{pid}{tag}r")).unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap();
    }
    veth(
        End { ns: &a, name: "lrg0", mac: "02:00:00:00:0a:01" },
        End { ns: &b, name: "lrr0", mac: "02:00:00:00:0b:01" },
    )
    .unwrap();
    (a, b)
}

fn gen_live(ns: &Namespace, args: &[&str]) -> std::process::Output {
    let bin = env!("CARGO_BIN_EXE_linerate");
    ns.command(bin)
        .args(["gen", "-i", "lrg0", "-D", "02:00:00:00:0b:01", "--json", "--backend", "xdp-live"])
        .args(args)
        .output()
        .unwrap()
}

/// Sends `args`' frames with the in-kernel generator to an xdp-sink receiver; returns the
/// generator's summary after checking that the receiver counted every frame sent.
fn live_counted(g: &Namespace, r: &Namespace, args: &[&str], attempted: u64) -> serde_json::Value {
    let bin = env!("CARGO_BIN_EXE_linerate");
    let mut rcv = r.command(bin);
    rcv.args(["rcv", "-i", "lrr0", "-t", "4", "--json", "--backend", "xdp-sink"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut rcv = common::Guard(Some(rcv.spawn().unwrap()));
    std::thread::sleep(std::time::Duration::from_millis(700));
    let out = gen_live(g, args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rcv = rcv.0.take().expect("started").wait_with_output().unwrap();
    let (gen_json, rcv_json) = (last_json(&out.stdout), last_json(&rcv.stdout));
    let (sent, dropped) =
        (gen_json["sent"].as_u64().unwrap(), gen_json["dropped"].as_u64().unwrap());
    assert_eq!(sent + dropped, attempted, "every frame offered was sent or dropped: {gen_json}");
    assert!(sent > 0, "{gen_json}");
    assert_eq!(rcv_json["received"].as_u64().unwrap(), sent, "gen: {gen_json}\nrcv: {rcv_json}");
    gen_json
}

/// The distinct (source, source port, destination, destination port) of the UDP frames in a
/// capture, each checked to be a valid IPv4 UDP frame.
fn captured_flows(path: &std::path::Path) -> (usize, HashSet<(u32, u16, u32, u16)>) {
    let records = io::pcap::read_file(path).unwrap();
    let mut flows = HashSet::new();
    for r in &records {
        let l2 = parse_l2(&r.data).unwrap();
        assert_eq!(l2.ethertype, EtherType::Ipv4);
        let ip = Ipv4Packet::new_checked(&r.data[l2.l3_offset..]).unwrap();
        assert!(ip.verify_checksum());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.checksum() != 0 && udp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()));
        flows.insert((ip.src_addr_u32(), udp.src_port(), ip.dst_addr_u32(), udp.dst_port()));
    }
    (records.len(), flows)
}

/// The generator check for `linerate gen --backend xdp-live`: a peer without NAPI is an
/// error that says what to do; with it, the receiver counts exactly the frames the generator
/// reports sent (60-byte frames, then IMIX with a VLAN tag), and a capture holds thousands
/// of distinct, valid flows.
#[test]
fn live_generator_check() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (g, r) = pair("l");
    r.exec("ethtool", &["-K", "lrr0", "gro", "off"]).unwrap();
    let out = gen_live(&g, &["-n", "1000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("ethtool -K PEER gro on"), "{err}");

    r.exec("ethtool", &["-K", "lrr0", "gro", "on"]).unwrap();
    live_counted(&g, &r, &["-n", "200000"], 200_000);
    live_counted(&g, &r, &["-n", "48000", "--imix", "--vlan", "10"], 48_000);

    let pcap = std::env::temp_dir().join(format!("lr-live-{}.pcap", std::process::id()));
    let mut tcpdump = Command::new("ip");
    tcpdump
        .args([
            "netns",
            "exec",
            r.name(),
            "tcpdump",
            "-Z",
            "root",
            "-i",
            "lrr0",
            "-n",
            "-U",
            "-c",
            "20000",
            "-w",
        ])
        .arg(&pcap);
    let mut capture = common::start_until(tcpdump, "listening on");
    // 50 x 100 = 5000 flows, slowly enough for tcpdump to keep up.
    let out = gen_live(
        &g,
        &["-s", "10.0.0.1-10.0.0.50", "-d", "10.1.0.1-10.1.0.100", "-n", "20000", "-R", "20000"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::thread::sleep(std::time::Duration::from_millis(500));
    drop(capture.terminate().map(|mut c| c.wait()));
    let (frames, flows) = captured_flows(&pcap);
    let _ = std::fs::remove_file(&pcap);
    eprintln!("captured {frames} frames of {} flows", flows.len());
    assert!(frames >= 10_000, "captured {frames} frames");
    assert!(flows.len() >= 4000, "{} distinct flows in {frames} frames", flows.len());
    let in_range = |(s, sp, d, dp): &(u32, u16, u32, u16)| {
        (0x0a00_0001..=0x0a00_0032).contains(s)
            && (0x0a01_0001..=0x0a01_0064).contains(d)
            && *sp == 2000
            && *dp == 2000
    };
    assert!(flows.iter().all(in_range), "a flow outside the configured ranges");
}
