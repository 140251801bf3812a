//! End to end through real interfaces: host A -> linerate (in namespace D, between two veths)
//! -> host B, once per backend. Traffic comes from real kernel sockets (UDP datagrams from
//! bash's /dev/udp, and ping), a capture taken in B checks TTL and checksums, and linerate's
//! final counters must show the packets without a route dropped as `no_route`.
//!
//! Needs root (CI has it); without root each test says "skipped" and passes. Namespaces are
//! named `lr<pid><backend><host>` and removed on drop, also when a test fails.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use lab::topology::{End, Namespace, is_root, veth};

const A_MAC: &str = "02:00:00:00:0a:01";
const D0_MAC: &str = "02:00:00:00:0d:00";
const D1_MAC: &str = "02:00:00:00:0d:01";
const B_MAC: &str = "02:00:00:00:0b:01";

struct Lab {
    a: Namespace,
    d: Namespace,
    b: Namespace,
    dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn build(tag: &str) -> Lab {
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lr{pid}{tag}{host}")).unwrap();
    let (a, d, b) = (ns("a"), ns("d"), ns("b"));
    veth(End { ns: &a, name: "lra0", mac: A_MAC }, End { ns: &d, name: "lrd0", mac: D0_MAC }).unwrap();
    veth(End { ns: &d, name: "lrd1", mac: D1_MAC }, End { ns: &b, name: "lrb0", mac: B_MAC }).unwrap();
    a.addr("lra0", "198.18.0.2/24").unwrap();
    a.ip(&["route", "add", "default", "via", "198.18.0.1"]).unwrap();
    b.addr("lrb0", "198.19.0.2/24").unwrap();
    b.ip(&["route", "add", "default", "via", "198.19.0.1"]).unwrap();
    // The DUT's kernel owns the addresses (it answers ARP) but does not forward.
    d.addr("lrd0", "198.18.0.1/24").unwrap();
    d.addr("lrd1", "198.19.0.1/24").unwrap();
    d.sysctl("net.ipv4.ip_forward=0").unwrap();
    let dir = std::env::temp_dir().join(format!("lr-netns-{pid}-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    Lab { a, d, b, dir }
}

fn config(lab: &Lab, backend: &str) -> PathBuf {
    let text = format!(
        r#"
[[interface]]
name = "lrd0"
addresses = ["198.18.0.1/24"]
backend = "{backend}"

[[interface]]
name = "lrd1"
addresses = ["198.19.0.1/24"]
backend = "{backend}"

[[neighbour]]
address = "198.18.0.2"
mac = "{A_MAC}"

[[neighbour]]
address = "198.19.0.2"
mac = "{B_MAC}"
"#
    );
    let path = lab.dir.join("router.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Kills a child on drop (SIGTERM first), so a failing assertion leaves no process behind.
struct Guard(Option<Child>);

impl Guard {
    fn terminate(&mut self) -> Option<Child> {
        let child = self.0.take()?;
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        Some(child)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.terminate() {
            std::thread::sleep(Duration::from_millis(200));
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `cmd` and waits until a line of its stderr contains `ready`.
fn start_until(mut cmd: Command, ready: &str) -> Guard {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let ready = ready.to_owned();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(&ready) {
                let _ = tx.send(Ok(()));
            }
        }
        let _ = tx.send(Err(seen));
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(())) => Guard(Some(child)),
        other => panic!("{cmd:?} did not become ready: {other:?}"),
    }
}

fn forward_through(backend: &str, tag: &str) {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let lab = build(tag);
    let cfg = config(&lab, backend);
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");

    let pcap = lab.dir.join("b.pcap");
    let mut tcpdump = lab.b.command("tcpdump");
    tcpdump.args(["-i", "lrb0", "-n", "-U", "--immediate-mode", "-w"]).arg(&pcap).arg("udp or icmp");
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
        .find_map(|l| l.trim().strip_prefix("drop no_route").map(|n| n.trim().parse::<u64>().unwrap()))
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
                assert!(u.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()), "{backend}: bad UDP checksum");
                assert!(u.payload().starts_with(b"linerate-"));
                udp += 1;
            }
            wire::IpProtocol::Icmp => echo += 1,
            _ => {}
        }
    }
    assert_eq!(udp, 5, "{backend}: UDP datagrams seen in B ({} frames captured); linerate said:\n{linerate_out}", recs.len());
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
