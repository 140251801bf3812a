//! NAT66 end to end with real tools: inside host A (2001:db8:a::/64) -> linerate (namespace
//! D) -> outside host B (2001:db8:b::2), which has no route back to A's network, so only
//! translated traffic reaches it and comes back.
//! - `nat on lrd1 inet6 ... -> (lrd1)`: `ping -6`, TCP connections that B sees from
//!   2001:db8:b::1 (each from a port of pf's range, the payload echoed intact), and
//!   `traceroute -6`, whose last hop's "port unreachable", sent to 2001:db8:b::1, reaches A
//!   translated back;
//! - `rdr on lrd1 inet6` of 2001:db8:b::1 port 80 to A's server on 8080;
//! - OpenBSD's NAT64, `pass in ... to 64:ff9b::/96 af-to inet from (lrd1)`: A reaches B's
//!   IPv4 address 198.19.0.2 as 64:ff9b::c613:2 with `ping -6`, TCP (B sees 198.19.0.1) and
//!   `traceroute -6`, whose hops are linerate and B's address in the /96.
//! - OpenBSD's NAT46, `pass in ... to 198.51.100.2 af-to inet6 from 2001:db8:b::1 to
//!   2001:db8:b::2`: A, IPv4 only, reaches B's IPv6 address with `ping`, TCP and
//!   `traceroute`, whose last hop's ICMPv6 error comes back as ICMPv4.
//!
//! Needs root, python3 and traceroute. Namespaces `lr<pid>n6*` are removed on drop.

use std::path::PathBuf;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{Guard, Lab, build, finish, start_until, turn, write_config};

const RULES: &str = "\
ext_if = \"lrd1\"
rdr on $ext_if inet6 proto tcp to 2001:db8:b::1 port 80 -> 2001:db8:a::2 port 8080
nat on $ext_if inet6 from 2001:db8:a::/64 to any -> ($ext_if)
pass all
";

/// A TCP server on `[::]:PORT` (argv 1) for `n` connections (argv 2): echoes what each sends
/// and prints `peer_addr peer_port payload` per connection.
const SERVER: &str = r#"
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('::', port)); s.listen(16); s.settimeout(20)
print('ready', file=sys.stderr, flush=True)
seen = []
try:
    for _ in range(n):
        c, peer = s.accept()
        data = c.recv(100)
        seen.append(f"{peer[0]} {peer[1]} {data.decode()}")
        c.sendall(data); c.close()
except socket.timeout:
    pass
print("\n".join(seen))
"#;

/// Connects to `[argv 1]:argv 2` `argv 3` times, sends `hello N`, prints what comes back.
const CLIENT: &str = r#"
import socket, sys
for i in range(int(sys.argv[3])):
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    c.sendall(f"hello {i}".encode())
    print(c.recv(100).decode()); c.close()
"#;

fn nat66_lab(tag: &str, rules: &str) -> (Lab, Guard, PathBuf) {
    nat66_lab_with(tag, rules, 1)
}

/// [`nat66_lab`] with `workers` workers (AF_PACKET's fanout spreads the flows by their
/// symmetric hash; each translation's port is chosen so its replies come back to it).
fn nat66_lab_with(tag: &str, rules: &str, workers: usize) -> (Lab, Guard, PathBuf) {
    let lab = build(tag);
    lab.b.ip(&["-6", "route", "del", "default"]).unwrap();
    // traceroute's probes each want an answer.
    lab.b.sysctl("net.ipv6.icmp.ratelimit=0").unwrap();
    lab.b.sysctl("net.ipv4.icmp_ratelimit=0").unwrap();
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let check =
        Command::new(env!("CARGO_BIN_EXE_linerate")).args(["check", "-c"]).arg(&cfg).output();
    let check = check.unwrap();
    assert!(check.status.success(), "check: {}", String::from_utf8_lossy(&check.stderr));
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0", "--workers", &workers.to_string()]);
    let dut = start_until(linerate, "forwarding with");
    (lab, dut, cfg)
}

/// Runs python3 `script` with `args` in `ns` to its end; its stdout.
fn python(ns: &lab::topology::Namespace, script: &str, args: &[&str]) -> String {
    let out = ns.command("python3").arg("-c").arg(script).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn nat66_with_ping_tcp_traceroute_and_rdr() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let _turn = turn();
    let (lab, _dut, _cfg) = nat66_lab("n6", RULES);
    let ping = lab.a.exec("ping", &["-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:b::2"]);
    assert!(ping.is_ok(), "ping -6 through NAT66: {ping:?}");

    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER, "7000", "3"]);
    let server = start_until(server, "ready");
    let echoed = python(&lab.a, CLIENT, &["2001:db8:b::2", "7000", "3"]);
    assert_eq!(echoed.lines().collect::<Vec<_>>(), ["hello 0", "hello 1", "hello 2"]);
    let seen = finish(server);
    let peers: Vec<(&str, u16)> = seen
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap(), w.next().unwrap().parse().unwrap())
        })
        .collect();
    assert_eq!(peers.len(), 3, "{seen}");
    for (addr, port) in &peers {
        assert_eq!(*addr, "2001:db8:b::1", "B sees the router's address: {seen}");
        assert!(*port >= 50001, "a port of pf's range: {seen}");
    }

    // The first hop is linerate; the last is B, whose "port unreachable" goes to the
    // translated address and must reach A translated back.
    let trace = lab
        .a
        .exec("traceroute", &["-6", "-n", "-q", "1", "-w", "2", "-m", "4", "2001:db8:b::2"])
        .unwrap();
    let trace = String::from_utf8_lossy(&trace.stdout).into_owned();
    let hops: Vec<&str> =
        trace.lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(hops, ["2001:db8:a::1", "2001:db8:b::2"], "{trace}");

    let mut server = lab.a.command("python3");
    server.args(["-c", SERVER, "8080", "1"]);
    let server = start_until(server, "ready");
    let echoed = python(&lab.b, CLIENT, &["2001:db8:b::1", "80", "1"]);
    assert_eq!(echoed.trim(), "hello 0");
    let seen = finish(server);
    assert!(seen.starts_with("2001:db8:b::2 "), "A's server sees B as it is: {seen}");
}

/// B's TCP server for IPv4 (the same script, on 0.0.0.0).
fn server4() -> String {
    SERVER.replace("AF_INET6", "AF_INET").replace("('::', port)", "('0.0.0.0', port)")
}

const AF_TO: &str =
    "pass in quick on lrd0 inet6 from any to 64:ff9b::/96 af-to inet from (lrd1)\npass all\n";

#[test]
fn nat64_with_af_to() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let _turn = turn();
    let (lab, dut, _cfg) = nat66_lab("n4", AF_TO);
    let ping =
        lab.a.exec("ping", &["-6", "-c", "3", "-i", "0.2", "-W", "2", "64:ff9b::198.19.0.2"]);
    assert!(ping.is_ok(), "ping -6 through NAT64: {ping:?}");

    let mut server = lab.b.command("python3");
    server.args(["-c", &server4(), "7000", "2"]);
    let server = start_until(server, "ready");
    let echoed = python(&lab.a, CLIENT, &["64:ff9b::198.19.0.2", "7000", "2"]);
    assert_eq!(echoed.lines().collect::<Vec<_>>(), ["hello 0", "hello 1"]);
    let seen = finish(server);
    assert_eq!(seen.lines().count(), 2, "{seen}");
    assert!(
        seen.lines().all(|l| l.starts_with("198.19.0.1 ")),
        "B sees the pool's address: {seen}"
    );

    let trace = lab
        .a
        .exec("traceroute", &["-6", "-n", "-q", "1", "-w", "2", "-m", "4", "64:ff9b::198.19.0.2"])
        .unwrap();
    let trace = String::from_utf8_lossy(&trace.stdout).into_owned();
    let hops: Vec<&str> =
        trace.lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(hops, ["2001:db8:a::1", "64:ff9b::c613:2"], "{trace}");
    drop(dut);
}

/// OpenBSD's NAT46: A, IPv4 only, reaches B's IPv6 address as 198.51.100.2, with `ping`, TCP
/// and `traceroute`; B sees the router's IPv6 address.
const AF_TO_INET6: &str = "pass in quick on lrd0 inet from any to 198.51.100.2 af-to inet6 from 2001:db8:b::1 to 2001:db8:b::2\npass all\n";

#[test]
fn nat46_with_af_to_inet6() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let _turn = turn();
    let (lab, dut, _cfg) = nat66_lab("n46", AF_TO_INET6);
    let ping = lab.a.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "198.51.100.2"]);
    assert!(ping.is_ok(), "ping through NAT46: {ping:?}");

    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER, "7000", "2"]);
    let server = start_until(server, "ready");
    let echoed = python(&lab.a, CLIENT, &["198.51.100.2", "7000", "2"]);
    assert_eq!(echoed.lines().collect::<Vec<_>>(), ["hello 0", "hello 1"]);
    let seen = finish(server);
    assert_eq!(seen.lines().count(), 2, "{seen}");
    assert!(
        seen.lines().all(|l| l.starts_with("2001:db8:b::1 ")),
        "B sees the rule's IPv6 source: {seen}"
    );
    // B's "port unreachable" (ICMPv6) reaches A as ICMPv4 from the address A wrote to.
    let trace =
        lab.a.exec("traceroute", &["-n", "-q", "1", "-w", "2", "-m", "4", "198.51.100.2"]).unwrap();
    let trace = String::from_utf8_lossy(&trace.stdout).into_owned();
    let hops: Vec<&str> =
        trace.lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(hops, ["198.18.0.1", "198.51.100.2"], "{trace}");
    drop(dut);
}

/// Two workers: NAT66's and NAT64's connections spread over both, each answered through the
/// worker that holds its translation (pings and 12 TCP connections each). pf's `nat` and
/// `af-to` do not load together (`docs/firewall.md`): one linerate for each.
#[test]
fn nat66_and_nat64_with_two_workers() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let _turn = turn();
    let cases = [
        (RULES, "n2", SERVER.to_owned(), "2001:db8:b::2"),
        (AF_TO, "n3", server4(), "64:ff9b::198.19.0.2"),
    ];
    for (rules, tag, script, to) in cases {
        let (lab, _dut, _cfg) = nat66_lab_with(tag, rules, 2);
        let ping = lab.a.exec("ping", &["-6", "-c", "4", "-i", "0.2", "-W", "2", to]);
        assert!(ping.is_ok(), "ping -6 {to}: {ping:?}");
        let mut server = lab.b.command("python3");
        server.args(["-c", &script, "7000", "12"]);
        let server = start_until(server, "ready");
        let echoed = python(&lab.a, CLIENT, &[to, "7000", "12"]);
        assert_eq!(echoed.lines().count(), 12, "{to}: {echoed}");
        assert_eq!(finish(server).lines().count(), 12, "{to}");
    }
}

/// Bulk TCP both ways through NAT66 and NAT64 (iperf3, 2 s each, veth offloads at their
/// defaults): full-size segments cross, none dropped as untranslatable.
#[test]
fn bulk_tcp_through_nat66_and_nat64() {
    assert!(is_root(), "needs root (namespaces, iperf3): run the suite as root");
    let _turn = turn();
    for (rules, tag, to) in [(RULES, "nb", "2001:db8:b::2"), (AF_TO, "nc", "64:ff9b::198.19.0.2")] {
        let (lab, dut, _cfg) = nat66_lab(tag, rules);
        let mut server = lab.b.command("iperf3");
        server.args(["-s", "-1"]).stdout(std::process::Stdio::null());
        let _server = Guard(Some(server.spawn().unwrap()));
        std::thread::sleep(std::time::Duration::from_millis(500));
        let out = lab
            .a
            .command("iperf3")
            .args(["-6", "-c", to, "-J", "--connect-timeout", "5000", "-t", "2"])
            .output()
            .unwrap();
        assert!(out.status.success(), "iperf3 to {to}: {}", String::from_utf8_lossy(&out.stdout));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let bytes = json["end"]["sum_received"]["bytes"].as_u64().unwrap();
        let mut dut = dut;
        let child = dut.terminate().unwrap();
        let report =
            String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned();
        eprintln!("iperf3 -6 to {to}: {bytes} bytes in 2 s");
        assert!(bytes > 5_000_000, "iperf3 to {to} moved {bytes} bytes\n{report}");
        assert!(!report.contains("nat_untranslatable"), "{report}");
    }
}
