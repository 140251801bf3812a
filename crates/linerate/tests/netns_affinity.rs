//! `keep state` with two workers: each worker has its own state table, so both directions of
//! every flow must reach the same worker. Rules `block all` + `pass in on lrd0 ... keep
//! state` + `pass out on lrd1 ... keep state` (pf filters a forwarded packet on both
//! interfaces): 200 TCP connections, 50 UDP exchanges (a new source port each), pings from A to
//! B and B's port unreachables for 40 datagrams to a closed port (ICMP errors steered by the
//! flow they quote) through `linerate run --workers 2` must all succeed, and both workers must have had
//! flows. Backend `auto` on veth (no RSS to make symmetric) must pick AF_PACKET; `af_xdp` is
//! refused, as is a reload that brings `keep state` to an AF_XDP run with two workers.
//!
//! Needs root and python3 (skips without); namespaces `lr<pid><tag><host>` are removed on
//! drop.

use std::io::Read;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{build, start_until, stats, write_config};

/// The router's own packets take the out pass too (pf): its IPv6 chatter (router and
/// neighbour solicitations, MLD reports) is passed, so that `filter_blocked` counts only
/// forwarded packets.
const RULES: &str = "block all\n\
    pass out quick inet6 proto icmp6\n\
    pass in on lrd0 proto tcp keep state\n\
    pass in on lrd0 proto udp keep state\n\
    pass in on lrd0 proto icmp keep state\n\
    pass out on lrd1 proto { tcp udp icmp } keep state\n";

/// B: a TCP echo server on 7000 (one line per connection) and a UDP echo server on 7001.
const SERVER: &str = r#"
import socket, sys, threading
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", 7000))
t.listen(512)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", 7001))
def udp():
    while True:
        d, a = u.recvfrom(64)
        u.sendto(d, a)
def serve(c):
    try:
        c.sendall(c.recv(64))
    finally:
        c.close()
threading.Thread(target=udp, daemon=True).start()
print("ready", file=sys.stderr, flush=True)
while True:
    c, _ = t.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// A: 200 TCP connections (20 at a time), 50 UDP exchanges, and 40 datagrams to a closed port
/// (each from a new port: B's port unreachable must pass back under its flow's state, so it
/// must reach that flow's worker); prints the successes and the refusals.
const CLIENT: &str = r#"
import socket, threading
ok = []
def tcp(i):
    try:
        s = socket.create_connection(("198.19.0.2", 7000), timeout=2)
        s.settimeout(2)
        s.sendall(b"tcp %d\n" % i)
        if s.recv(64) == b"tcp %d\n" % i:
            ok.append(i)
        s.close()
    except OSError:
        pass
for batch in range(10):
    ts = [threading.Thread(target=tcp, args=(batch * 20 + j,)) for j in range(20)]
    for t in ts: t.start()
    for t in ts: t.join()
udp_ok = 0
for i in range(50):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(1)
    u.sendto(b"udp %d" % i, ("198.19.0.2", 7001))
    try:
        udp_ok += u.recvfrom(64)[0] == b"udp %d" % i
    except OSError:
        pass
    u.close()
refused = 0
for i in range(40):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(1)
    u.connect(("198.19.0.2", 7009))
    u.send(b"closed %d" % i)
    try:
        u.recv(64)
    except ConnectionRefusedError:
        refused += 1
    except OSError:
        pass
    u.close()
print(len(ok), udp_ok, refused)
"#;

fn have_python() -> bool {
    Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

#[test]
fn keep_state_with_two_workers_passes_every_flow() {
    if !is_root() || !have_python() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("k");
    let cfg = write_config(&lab, "auto", "[firewall]\nrules = \"rules.conf\"\n");
    std::fs::write(lab.dir.join("rules.conf"), RULES).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--workers", "2"]);
    let mut dut = start_until(linerate, "forwarding with 2 worker(s)");
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER]);
    let _server = start_until(server, "ready");
    // Every datagram to the closed port gets its port unreachable (no per-peer rate limit).
    lab.b.exec("sysctl", &["-qw", "net.ipv4.icmp_ratelimit=0"]).unwrap();

    let ping = lab
        .a
        .exec("ping", &["-c", "5", "-i", "0.2", "-W", "2", "198.19.0.2"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    let client = lab.a.exec("python3", &["-c", CLIENT]).unwrap();
    let counts = String::from_utf8_lossy(&client.stdout).trim().to_owned();
    let s = stats(&lab.dir.join("control.sock"));
    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");

    // The first ping may wait for ARP; the other four must come back.
    let ping = ping.unwrap_or_else(|e| panic!("ping: {e}\n{out}"));
    assert!(ping.contains(" 5 received") || ping.contains(" 4 received"), "{ping}\n{out}");
    assert_eq!(
        counts, "200 50 40",
        "TCP connections, UDP exchanges, port unreachables received\n{out}"
    );
    for iface in s["interfaces"].as_array().unwrap() {
        assert!(
            iface["backend"].as_str().unwrap().contains("af_packet"),
            "auto on veth with keep state and 2 workers: {iface}"
        );
    }
    let per_worker: Vec<u64> =
        s["workers"].as_array().unwrap().iter().map(|w| w["forwarded"].as_u64().unwrap()).collect();
    assert!(per_worker.iter().all(|&n| n > 100), "both workers must carry flows: {per_worker:?}");
    assert!(!out.contains("drop filter_blocked"), "no reply may be blocked:\n{out}");
}

#[test]
fn af_xdp_with_two_workers_refuses_keep_state() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("x");
    // Two queues per veth, one per worker (queue w: worker w).
    for dev in ["lrd0", "lrd1"] {
        lab.d.exec("ethtool", &["-L", dev, "rx", "2", "tx", "2"]).unwrap();
    }
    let cfg = write_config(&lab, "af_xdp", "[firewall]\nrules = \"rules.conf\"\n");
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let out = lab
        .d
        .command("timeout")
        .args(["20", env!("CARGO_BIN_EXE_linerate"), "run", "-c"])
        .arg(&cfg)
        .args(["--workers", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("lrd0: `keep state` with 2 workers needs both directions of a flow on one worker, and AF_XDP cannot promise it"), "{err}");

    // Without keep state it runs; a reload that brings keep state is refused, one that does
    // not is taken.
    std::fs::write(&rules, "pass all no state\n").unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--workers", "2"]);
    let mut dut = start_until(linerate, "forwarding with 2 worker(s)");
    let reload = || {
        Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["reload", "-c"])
            .arg(&cfg)
            .output()
            .unwrap()
    };
    std::fs::write(&rules, RULES).unwrap();
    let out = reload();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("`keep state` with 2 workers on AF_XDP"),
        "{err}"
    );
    std::fs::write(&rules, "block in proto udp no state\npass all no state\n").unwrap();
    let out = reload();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut child = dut.terminate().unwrap();
    assert!(child.wait().unwrap().success());
}
