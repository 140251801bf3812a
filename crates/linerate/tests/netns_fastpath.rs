//! The kernel fast path (`router.fast_path`): the flows linerate's pipeline decided are
//! forwarded by its XDP program without waking a worker, every datagram still arrives, and a
//! change of the rules (here a table entry) applies to offloaded flows at once.
//!
//! B's veth has GRO on, so linerate's `lrd1` takes redirected frames (a veth does only while
//! its peer has an XDP program or GRO); A's has it too, for the replies. Needs root: the
//! test fails without it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{Guard, Lab, build, finish, start_until, turn, write_config};

/// Counts the UDP datagrams reaching B's port 9000 until 1.5 s pass without one.
const RECEIVER: &str = "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET,33,8<<20)\ns.bind(('0.0.0.0',9000))\nprint('ready',file=sys.stderr,flush=True)\ns.settimeout(5)\nn=0\ntry:\n  while True:\n    s.recv(64); n+=1; s.settimeout(1.5)\nexcept socket.timeout:\n  pass\nprint(n)\n";
/// Sends `argv[1]` datagrams to `argv[2]` from 8 fixed source ports (the same 8 flows at every
/// call: a later call finds them offloaded), paced.
const SENDER: &str = "import socket,sys,time\nn=int(sys.argv[1])\nss=[socket.socket(socket.AF_INET,socket.SOCK_DGRAM) for _ in range(8)]\nfor k,s in enumerate(ss):\n  s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); s.bind(('0.0.0.0',41000+k))\nfor i in range(n):\n  ss[i%8].sendto(b'x'*18,(sys.argv[2],9000))\n  if i%40==39: time.sleep(0.002)\n";

/// Datagrams from A that reach B, of `n` sent (B's address resolved first: the first
/// datagrams of a flow to an unresolved neighbour may be dropped while it is resolved).
fn udp_through(lab: &Lab, n: u32) -> u32 {
    udp_to(lab, n, "198.19.0.2")
}

/// Datagrams from A that reach B at `dst`, of `n` sent.
fn udp_to(lab: &Lab, n: u32, dst: &str) -> u32 {
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]);
    let mut rx = lab.b.command("python3");
    rx.args(["-c", RECEIVER]);
    let rx = start_until(rx, "ready");
    let out = lab.a.command("python3").args(["-c", SENDER, &n.to_string(), dst]).output().unwrap();
    assert!(out.status.success(), "sender: {out:?}");
    finish(rx).parse().unwrap()
}

fn table(cfg: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["table"])
        .args(args)
        .arg("-c")
        .arg(cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "table {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The fast path's "N packets in" for `lrd0` in linerate's exit report.
fn fast_packets_in(report: &str) -> u64 {
    let line = report
        .lines()
        .skip_while(|l| !l.starts_with("fast path"))
        .find(|l| l.trim_start().starts_with("lrd0:"));
    let line = line.unwrap_or_else(|| panic!("no fast path lines in the report:\n{report}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn start(lab: &Lab, extra: &str) -> (std::path::PathBuf, Guard) {
    start_with(lab, "", extra)
}

/// linerate between A and B with `extra` in its config and `router` in its `[router]`.
/// GRO on: the veth then takes redirected frames. Checksums done by the senders: a partial
/// one (left to "the NIC" by a sender on this host) sends its flow's frames to the pipeline,
/// which finishes it (see pipeline_finishes_partial_checksums).
fn start_with(lab: &Lab, router: &str, extra: &str) -> (std::path::PathBuf, Guard) {
    start_on(lab, "af_xdp", router, extra)
}

/// As [`start_with`], the ports opened with `backend`.
fn start_on(lab: &Lab, backend: &str, router: &str, extra: &str) -> (std::path::PathBuf, Guard) {
    for (ns, dev) in [(&lab.b, "lrb0"), (&lab.a, "lra0")] {
        assert!(
            ns.exec("ethtool", &["-K", dev, "gro", "on", "tx", "off"]).is_ok(),
            "ethtool -K {dev} gro on tx off"
        );
    }
    let cfg = write_config(lab, backend, extra);
    let text = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[router]\n",
        &format!("[router]\n{router}"),
        1,
    );
    std::fs::write(&cfg, text).unwrap();
    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    (cfg, start_until(cmd, "forwarding with"))
}

fn report(mut dut: Guard) -> String {
    let child = dut.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn decided_flows_are_forwarded_in_the_kernel() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fp");
    let (_cfg, dut) = start(&lab, "");
    // The ARP resolutions and the first datagrams of each flow go through the pipeline.
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
    assert_eq!(udp_through(&lab, 4000), 4000, "every datagram arrives");
    std::thread::sleep(Duration::from_millis(200));
    let report = report(dut);
    let fast = fast_packets_in(&report);
    assert!(fast >= 3000, "the fast path took {fast} of 4000 datagrams:\n{report}");
}

/// An output deleted and created again (a recreated veth): the router rebuilds its port in
/// place and the flows offloaded through the old interface are offloaded again through the
/// new one (their entries named the old ifindex).
#[test]
fn flows_are_offloaded_again_through_a_rebuilt_port() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fb");
    let (cfg, dut) = start(&lab, "");
    assert_eq!(udp_through(&lab, 4000), 4000, "every datagram arrives");
    lab.d.ip(&["link", "del", "lrd1"]).unwrap();
    common::b_side(&lab.d, &lab.b, common::D1_MAC, 1);
    assert!(lab.b.exec("ethtool", &["-K", "lrb0", "gro", "on", "tx", "off"]).is_ok());
    let rebuilt = || {
        let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["show", "interfaces", "--json", "-c"])
            .arg(&cfg)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "lrd1" && i["rebuilds"] == 1 && i["link"] == "up")
    };
    let start = std::time::Instant::now();
    while !rebuilt() {
        assert!(start.elapsed() < Duration::from_secs(5), "lrd1 not rebuilt within 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A second after the rebuild the offload thread has read the new output's features.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(udp_through(&lab, 4000), 4000, "every datagram arrives through the rebuilt port");
    std::thread::sleep(Duration::from_millis(200));
    let report = report(dut);
    let fast = fast_packets_in(&report);
    assert!(fast >= 6000, "the fast path took {fast} of 8000 datagrams:\n{report}");
}

/// Checksums left partial by A's sockets ("to the NIC"): the first datagrams of each flow
/// go through the pipeline, which finishes them (B drops a bad one); once decided, XDP
/// passes the flow's frames to the kernel, whose tc program forwards the skbs as they are.
#[test]
fn partial_checksums_take_the_tc_program() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fc");
    let (_cfg, dut) = start(&lab, "");
    assert!(lab.a.exec("ethtool", &["-K", "lra0", "tx", "on"]).is_ok());
    assert_eq!(udp_through(&lab, 2000), 2000, "every datagram arrives, with a good checksum");
    let report = report(dut);
    // The first 50 ms or so of each flow go through the pipeline (the offload thread's nap,
    // longer in a debug build on a busy machine).
    assert!(fast_packets_in(&report) >= 500, "{report}");
}

/// One iperf3 test from A to B for `secs` seconds: the bytes B received.
fn iperf3(lab: &Lab, secs: u32) -> u64 {
    let mut server = lab.b.command("iperf3");
    server.args(["-s", "-1", "-B", "198.19.0.2"]).stdout(std::process::Stdio::null());
    let _server = Guard(Some(server.spawn().unwrap()));
    std::thread::sleep(Duration::from_millis(500));
    let out = lab
        .a
        .command("iperf3")
        .args(["-c", "198.19.0.2", "-J", "--connect-timeout", "5000", "-t", &secs.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "iperf3: {out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0)
}

/// TCP with the veths' offloads on (checksum offload, TSO where XDP leaves it): once the
/// pipeline has decided the connection, its segments (partial checksums) go by the tc
/// program, both ways, with no firewall and with a stateless one.
#[test]
fn tcp_with_offloads_on_goes_by_the_tc_program() {
    assert!(is_root(), "needs root (namespaces, XDP, iperf3): run the suite as root");
    let _turn = turn();
    let lab = build("fk");
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "block in quick proto tcp to any port 22\npass all no state\n").unwrap();
    for firewall in [String::new(), format!("[firewall]\nrules = \"{}\"\n", rules.display())] {
        let (_cfg, dut) = start(&lab, &firewall);
        for (ns, dev) in [(&lab.a, "lra0"), (&lab.b, "lrb0")] {
            assert!(ns.exec("ethtool", &["-K", dev, "tx", "on"]).is_ok());
        }
        assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
        let bytes = iperf3(&lab, 2);
        assert!(bytes > 10_000_000, "iperf3 moved {bytes} bytes");
        let report = report(dut);
        assert!(
            fast_packets_in(&report) >= 5000,
            "the connection's segments went by the fast path:\n{report}"
        );
    }
}

#[test]
fn pipeline_alone_when_the_fast_path_is_off() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fo");
    let (_cfg, dut) = start_with(&lab, "fast_path = false\n", "");
    assert_eq!(udp_through(&lab, 1000), 1000);
    let report = report(dut);
    assert!(!report.contains("fast path (in the kernel)"), "{report}");
}

#[test]
fn a_table_change_applies_to_offloaded_flows_at_once() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("ft");
    let rules = lab.dir.join("rules.conf");
    std::fs::write(
        &rules,
        "table <bad> persist\nblock in quick from any to <bad>\npass all no state\n",
    )
    .unwrap();
    let (cfg, dut) = start(&lab, &format!("[firewall]\nrules = \"{}\"\n", rules.display()));
    assert_eq!(udp_through(&lab, 2000), 2000);
    table(&cfg, &["bad", "add", "198.19.0.2"]);
    assert_eq!(udp_through(&lab, 500), 0, "blocked at once, offloaded or not");
    table(&cfg, &["bad", "delete", "198.19.0.2"]);
    assert_eq!(udp_through(&lab, 2000), 2000);
    let report = report(dut);
    assert!(fast_packets_in(&report) >= 2000, "stateless rules: their flows offloaded\n{report}");
}

/// A route withdrawn by a reload applies to the flows offloaded by it at once.
#[test]
fn a_route_withdrawn_applies_to_offloaded_flows_at_once() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fr");
    lab.b.addr("lrb0", "198.20.0.1/32").unwrap();
    let route = "[[route]]\nprefix = \"198.20.0.0/16\"\nvia = \"198.19.0.2\"\n";
    let (cfg, dut) = start(&lab, route);
    assert_eq!(udp_to(&lab, 2000, "198.20.0.1"), 2000);
    let text = std::fs::read_to_string(&cfg).unwrap().replace(route, "");
    std::fs::write(&cfg, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["reload", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "reload: {out:?}");
    assert_eq!(udp_to(&lab, 500, "198.20.0.1"), 0, "no route any more, offloaded or not");
    assert!(fast_packets_in(&report(dut)) >= 1000, "the flows were offloaded before");
}

/// The frames B receives when A sends `fastpath_frames.py`'s crafted frames 30 times over
/// through linerate run with `extra` in its config, and linerate's exit report.
fn crafted_through(lab: &Lab, extra: &str, firewall: &str) -> (Vec<String>, String) {
    crafted_through_on(lab, "af_xdp", extra, firewall)
}

fn crafted_through_on(
    lab: &Lab,
    backend: &str,
    extra: &str,
    firewall: &str,
) -> (Vec<String>, String) {
    let (_cfg, dut) = start_on(lab, backend, extra, firewall);
    // Both neighbours resolved first: the queue of a resolution is not what is compared.
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
    assert!(lab.a.exec("ping", &["-6", "-c", "1", "-W", "2", "2001:db8:b::2"]).is_ok());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fastpath_frames.py");
    let mut rx = lab.b.command("python3");
    rx.args([script, "recv", "lrb0", "1.5"]);
    let rx = start_until(rx, "ready");
    let router_mac = common::D0_MAC;
    let out = lab
        .a
        .command("python3")
        .args([script, "send", "lra0", common::A_MAC, router_mac, "30"])
        .output()
        .unwrap();
    assert!(out.status.success(), "sender: {out:?}");
    let frames = finish(rx).lines().map(str::to_owned).collect();
    (frames, report(dut))
}

/// The same crafted traffic (UDP and TCP flows, SYN and FIN, IP options, a fragment, TTL 1,
/// a bad checksum, ICMP, IPv6, a frame to another station) delivers the same frames, byte for
/// byte and as many of each, with the fast path on and off.
#[test]
fn the_fast_path_delivers_what_the_pipeline_delivers() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fd");
    let on_and_off = |firewall: &str| {
        let (on, report_on) = crafted_through(&lab, "", firewall);
        let (off, _) = crafted_through(&lab, "fast_path = false\n", firewall);
        assert!(fast_packets_in(&report_on) > 100, "the fast path took part:\n{report_on}");
        let (on, off) = (count(&on), count(&off));
        assert_eq!(on, off, "the frames B received differ ({firewall})");
        on
    };
    // 4 UDP flows, UDP without a checksum, TCP ACK, SYN, FIN, IP options (the router forwards
    // them), a fragment, ICMP; UDP and TCP over IPv6: 13 kinds, each 30 times.
    let delivered = on_and_off("");
    assert_eq!(delivered.len(), 13, "{delivered:#?}");
    assert!(delivered.values().all(|&n| n == 30), "{delivered:#?}");
    // A stateless rule set blocking one flow, whose other flows are offloaded: the same
    // frames pass, all but that flow's (the IP options are NOPs, which pf does not count as
    // options to block without allow-opts).
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "block in quick proto udp from any port 1001\npass all no state\n")
        .unwrap();
    let delivered = on_and_off(&format!("[firewall]\nrules = \"{}\"\n", rules.display()));
    assert_eq!(
        delivered.len(),
        12,
        "{:?}",
        delivered.keys().map(|k| &k[28..48]).collect::<Vec<_>>()
    );
    // Stateful, translated: UDP flows offloaded with their translation (addresses, ports
    // kept by static-port, both checksums) byte for byte as the pipeline translates them.
    std::fs::write(&rules, "nat on lrd1 from any to any -> (lrd1) static-port\npass all\n")
        .unwrap();
    let delivered = on_and_off(&format!("[firewall]\nrules = \"{}\"\n", rules.display()));
    let translated = delivered.keys().filter(|f| f[52..60] == *"c6130001").count();
    assert!(translated >= 5, "sources translated to lrd1's 198.19.0.1: {delivered:#?}");
}

/// How many times each distinct frame is in `frames`.
fn count(frames: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for f in frames {
        *m.entry(f.clone()).or_insert(0) += 1;
    }
    m
}

/// UDP between A's ports 41000..41007 and B's port 9000, by role: `a-send N SECS` (A to B, N
/// datagrams paced over SECS), `b-send N SECS` (B back to A through the translation: to
/// 198.19.0.1, A's ports kept by static-port), `a-recv` / `b-recv` (count what arrives until
/// 1.5 s pass without a datagram).
const UDP_PAIR: &str = r#"
import select,socket,sys,time
role=sys.argv[1]
def bound(p):
  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); s.bind(('0.0.0.0',p)); return s
if role.endswith('recv'):
  ss=[bound(41000+k) for k in range(8)] if role=='a-recv' else [bound(9000)]
  print('ready',file=sys.stderr,flush=True)
  n=0; wait=5
  while True:
    r,_,_=select.select(ss,[],[],wait)
    if not r: break
    for s in r: s.recv(64); n+=1
    wait=1.5
  print(n)
else:
  n,secs=int(sys.argv[2]),float(sys.argv[3])
  if role=='a-send': ss=[bound(41000+k) for k in range(8)]; to=[('198.19.0.2',9000)]*8
  else: ss=[bound(9000)]*8; to=[('198.19.0.1',41000+k) for k in range(8)]
  t0=time.time()
  for i in range(n):
    ss[i%8].sendto(b'x'*18,to[i%8])
    if i%40==39: time.sleep(max(0,t0+secs*(i+1)/n-time.time()))
"#;

/// Datagrams of `role`'s direction that arrive (`a-send` to B, `b-send` back to A).
fn pair(lab: &Lab, role: &str, n: u32, secs: f32) -> u32 {
    let (tx, rx) = if role == "a-send" { (&lab.a, &lab.b) } else { (&lab.b, &lab.a) };
    let mut recv = rx.command("python3");
    recv.args(["-c", UDP_PAIR, if role == "a-send" { "b-recv" } else { "a-recv" }]);
    let recv = start_until(recv, "ready");
    let out = tx
        .command("python3")
        .args(["-c", UDP_PAIR, role, &n.to_string(), &secs.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{role}: {out:?}");
    finish(recv).parse().unwrap()
}

/// A stateful, translating rule set whose states last 4 s: flows offloaded for 6 s keep
/// their states and translations (the pipeline sees each flow again every second), so that
/// B's replies still pass, by the state alone, translated back; `kill states` then applies
/// to the offloaded replies at once.
#[test]
fn offloaded_flows_keep_their_states_and_translations() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fs");
    let rules = lab.dir.join("rules.conf");
    let text = "set timeout { udp.first 4, udp.single 4, udp.multiple 4 }\nnat on lrd1 from any to any -> (lrd1) static-port\nblock all\npass in on lrd0 all\npass out on lrd1 all\n";
    std::fs::write(&rules, text).unwrap();
    let (cfg, dut) =
        start_with(&lab, "", &format!("[firewall]\nrules = \"{}\"\n", rules.display()));
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]);
    assert_eq!(pair(&lab, "a-send", 6000, 6.0), 6000, "A to B, for twice the states' timeout");
    assert_eq!(
        pair(&lab, "b-send", 2000, 1.0),
        2000,
        "B's replies: the states and translations lived on"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["flush", "states", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "flush states: {out:?}");
    assert_eq!(
        pair(&lab, "b-send", 300, 0.3),
        0,
        "no state: B's replies blocked at once, offloaded or not"
    );
    let report = report(dut);
    assert!(fast_packets_in(&report) >= 4000, "the stateful flows were offloaded:\n{report}");
}

/// An output that takes no frame redirected by XDP (B's veth with neither GRO nor an XDP
/// program): its flows stay in the pipeline, counted, and every datagram arrives.
#[test]
fn an_output_without_xdp_redirects_keeps_its_flows_in_the_pipeline() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fn");
    let (_cfg, dut) = start(&lab, "");
    assert!(lab.b.exec("ethtool", &["-K", "lrb0", "gro", "off"]).is_ok());
    // linerate reads its outputs' XDP features every second.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(udp_through(&lab, 2000), 2000);
    let report = report(dut);
    assert_eq!(fast_packets_in(&report), 0, "{report}");
    assert!(
        !report.contains("flows left to the pipeline (output takes no redirected frames): 0"),
        "{report}"
    );
}

/// AF_PACKET ports: the fast path runs at tc ingress, with no XDP program (which on a veth
/// turns the peer's TSO off), and the sockets' filter keeps its frames from the pipeline:
/// every datagram arrives once, most by the fast path.
#[test]
fn af_packet_ports_forward_decided_flows_at_tc_ingress() {
    assert!(is_root(), "needs root (namespaces, tcx): run the suite as root");
    let _turn = turn();
    let lab = build("fs");
    let (_cfg, dut) = start_on(&lab, "af_packet", "", "");
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
    assert_eq!(udp_through(&lab, 4000), 4000, "every datagram arrives, once");
    let xdp = lab.d.exec("ip", &["-d", "link", "show", "lrd0"]).unwrap();
    let xdp = String::from_utf8_lossy(&xdp.stdout);
    assert!(!xdp.contains("prog/xdp"), "no XDP program on the AF_PACKET port: {xdp}");
    let report = report(dut);
    let fast = fast_packets_in(&report);
    assert!(fast >= 3000, "the fast path took {fast} of 4000 datagrams:\n{report}");
}

/// Two workers on AF_PACKET ports (one fanout group per port, a socket filter on each
/// member): every datagram arrives once, most by the fast path; TCP gets through too.
#[test]
fn af_packet_ports_with_two_workers() {
    assert!(is_root(), "needs root (namespaces, tcx): run the suite as root");
    let _turn = turn();
    let lab = build("fw");
    let (_cfg, dut) = start_on(&lab, "af_packet", "workers = 2\n", "");
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
    assert_eq!(udp_through(&lab, 4000), 4000, "every datagram arrives, once");
    for (ns, dev) in [(&lab.a, "lra0"), (&lab.b, "lrb0")] {
        assert!(ns.exec("ethtool", &["-K", dev, "tx", "on"]).is_ok());
    }
    assert!(iperf3(&lab, 2) > 10_000_000, "TCP through two workers");
    let report = report(dut);
    assert!(report.contains("2 worker(s)"), "{report}");
    let fast = fast_packets_in(&report);
    assert!(fast >= 3000, "the fast path took {fast} packets:\n{report}");
}

/// TCP through AF_PACKET ports with every offload on: A keeps its TSO (no XDP on its
/// peer), the connection's segments go by the tc program as the sender's large skbs.
#[test]
fn tcp_through_af_packet_ports_keeps_the_senders_tso() {
    assert!(is_root(), "needs root (namespaces, tcx, iperf3): run the suite as root");
    let _turn = turn();
    let lab = build("ft");
    let (_cfg, dut) = start_on(&lab, "af_packet", "", "");
    for (ns, dev) in [(&lab.a, "lra0"), (&lab.b, "lrb0")] {
        assert!(ns.exec("ethtool", &["-K", dev, "tx", "on"]).is_ok());
    }
    let features = lab.a.exec("ethtool", &["-k", "lra0"]).unwrap();
    let features = String::from_utf8_lossy(&features.stdout);
    assert!(
        features.lines().any(|l| l.starts_with("tcp-segmentation-offload: on")),
        "A's TSO stays on: {features}"
    );
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
    let bytes = iperf3(&lab, 2);
    assert!(bytes > 10_000_000, "iperf3 moved {bytes} bytes");
    let report = report(dut);
    assert!(fast_packets_in(&report) >= 5000, "the segments went by the fast path:\n{report}");
}

/// The differential test on AF_PACKET ports: the crafted frames arrive the same, byte for
/// byte and as many of each, with the fast path at tc ingress and without it.
#[test]
fn the_skb_fast_path_delivers_what_the_pipeline_delivers() {
    assert!(is_root(), "needs root (namespaces, tcx): run the suite as root");
    let _turn = turn();
    let lab = build("fe");
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "block in quick proto udp from any port 1001\npass all no state\n")
        .unwrap();
    for firewall in [String::new(), format!("[firewall]\nrules = \"{}\"\n", rules.display())] {
        let (on, report_on) = crafted_through_on(&lab, "af_packet", "", &firewall);
        let (off, _) = crafted_through_on(&lab, "af_packet", "fast_path = false\n", &firewall);
        assert!(fast_packets_in(&report_on) > 100, "the fast path took part:\n{report_on}");
        assert_eq!(count(&on), count(&off), "the frames B received differ ({firewall})");
    }
}

/// The counters of every rule of the running set: `(packets, bytes)` by rule number.
fn rule_counts(cfg: &Path) -> Vec<(u64, u64)> {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "rules", "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "show rules: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap();
    v.as_array().unwrap().iter().map(|r| (n(r, "packets"), n(r, "bytes"))).collect()
}

/// Rule counters count the offloaded packets too (read back from the program's entries once
/// a second): the same counts, packets and IP bytes, with the fast path on as with the
/// pipeline alone, under a stateless set (each datagram under its `in` rule; an `out` pass
/// that cannot act is skipped by both) and a stateful one (under its state's rule).
#[test]
fn rule_counters_count_the_offloaded_packets() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let _turn = turn();
    let lab = build("fc");
    let rules = lab.dir.join("rules.conf");
    // Rule 0 takes the rest (pings); 1 (and 2), the datagrams.
    let stateless = "pass all no state\npass in on lrd0 proto udp to port 9000 no state\npass out on lrd1 proto udp to port 9000 no state\n";
    let stateful = "pass all no state\npass in on lrd0 proto udp to port 9000 keep state\n";
    for text in [stateless, stateful] {
        std::fs::write(&rules, text).unwrap();
        let firewall = format!("[firewall]\nrules = \"{}\"\n", rules.display());
        let mut runs = Vec::new();
        for router in ["", "fast_path = false\n"] {
            runs.push(counted_without_loss(&lab, router, &firewall));
        }
        let (on, off) = (&runs[0], &runs[1]);
        assert!(fast_packets_in(&on.1) >= 3000, "the flows were offloaded:\n{}", on.1);
        assert!(on.1.contains("packets credited to their rules: "), "{}", on.1);
        // 18 bytes of payload: 46 bytes of IP each.
        assert_eq!(on.0[0], (4000, 4000 * 46), "{text}\n{}", on.1);
        assert_eq!(on.0, off.0, "fast path on and off, rules\n{text}");
    }
}

/// 4000 datagrams through a fresh linerate, then its rule counters (all but the first and
/// the last rule) and its exit report. A run that lost datagrams on the loaded machine (a
/// worker or the receiver descheduled past its ring) is run again: the counts compare only
/// when every datagram arrived.
fn counted_without_loss(lab: &Lab, router: &str, firewall: &str) -> (Vec<(u64, u64)>, String) {
    let mut lost = Vec::new();
    for _ in 0..3 {
        let (cfg, dut) = start_with(lab, router, firewall);
        let arrived = udp_through(lab, 4000);
        std::thread::sleep(Duration::from_millis(2500));
        let counts = rule_counts(&cfg);
        let report = report(dut);
        if arrived == 4000 {
            return (counts[1..counts.len() - 1].to_vec(), report);
        }
        eprintln!("{arrived} of 4000 arrived, run again:\n{report}");
        lost.push(format!("{arrived} of 4000 arrived:\n{report}"));
    }
    panic!("every run lost datagrams:\n{}", lost.join("\n"));
}
