//! pf's semantics end to end, host A -> linerate (namespace D) -> host B, with real tools:
//!
//! * the out rules of the output interface apply to flows an in rule passed with state:
//!   `block out quick on lrd1 proto tcp to port 8099` stops TCP connections to B's port 8099
//!   while connections to another port of B, and pings, go through (issue 17);
//! * ICMP states are keyed by the echo identifier: A's ping gets its reply, while echo
//!   requests from B to A (with A's identifier, or another) are blocked. Built with python3
//!   raw sockets, so the identifiers are known.
//!
//! Needs root and python3 (skips without). Namespaces `lr<pid><tag><host>` are removed on
//! drop.

use std::io::Read;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{Lab, build, start_until, write_config};

fn usable() -> bool {
    is_root() && Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

/// Starts linerate in D with `rules`; stopped (and its report returned) by [`stop`].
fn start(lab: &Lab, rules: &str) -> common::Guard {
    let cfg = write_config(lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    start_until(linerate, "forwarding with")
}

/// Stops linerate; its exit report (per-rule counters, drops).
fn stop(mut dut: common::Guard) -> String {
    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    out
}

/// A TCP server on B accepting on `ports` (it answers each connection with a line).
const SERVER: &str = r#"
import socket, sys, threading
def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', port)); s.listen(16)
    while True:
        c, _ = s.accept(); c.sendall(b'hello\n'); c.close()
for p in sys.argv[1:]:
    threading.Thread(target=serve, args=(int(p),), daemon=True).start()
print('ready', file=sys.stderr, flush=True)
threading.Event().wait()
"#;

/// Whether A can open a TCP connection to B's `port` and read the server's line (2 s).
fn connects(lab: &Lab, port: u16) -> bool {
    let client = format!(
        "import socket\ns = socket.create_connection(('198.19.0.2', {port}), timeout=2)\ns.settimeout(2)\nassert s.recv(16) == b'hello\\n'\n"
    );
    lab.a.exec("python3", &["-c", &client]).is_ok()
}

#[test]
fn out_rule_blocks_a_port_of_flows_passed_in() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("o");
    let dut = start(
        &lab,
        "block all\npass in on lrd0\npass out on lrd1\nblock out quick on lrd1 proto tcp to port 8099 label \"8099\"\n",
    );
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER, "8080", "8099"]);
    let _server = start_until(server, "ready");
    assert!(connects(&lab, 8080), "port 8080 must pass");
    assert!(!connects(&lab, 8099), "port 8099 must be blocked on the way out");
    assert!(connects(&lab, 8080), "port 8080 still passes");
    assert!(lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok(), "ping");
    let report = stop(dut);
    // The exit report's rule line: line, label, action, packets, bytes, states.
    let blocked = report
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&"8099"))
        .unwrap_or_else(|| panic!("{report}"));
    let packets: u64 = blocked[3].parse().unwrap();
    assert!(packets >= 1, "the out rule counted the SYNs it blocked: {blocked:?}\n{report}");
}

/// Sends ICMP echo messages (type `kind`, identifier `id`) to `dst` from a raw socket and
/// counts, for `secs`, the echo messages of type `want` with identifier `id` from `dst`.
const ICMP: &str = r#"
import socket, struct, sys, time
dst, kind, ident, want, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
def csum(b):
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(0.2)
seen = 0
end = time.time() + secs
seq = 0
while time.time() < end:
    seq += 1
    body = struct.pack('!BBHHH', kind, 0, 0, ident, seq) + b'linerate'
    body = body[:2] + struct.pack('!H', csum(body)) + body[4:]
    s.sendto(body, (dst, 0))
    try:
        while True:
            pkt, addr = s.recvfrom(2048)
            hl = (pkt[0] & 15) * 4
            t, _, _, i = struct.unpack('!BBHH', pkt[hl:hl + 6])
            if addr[0] == dst and t == want and i == ident:
                seen += 1
    except socket.timeout:
        pass
print(seen)
"#;

/// Listens on a raw ICMP socket for `secs` and counts echo requests from `src`.
const LISTEN: &str = r#"
import socket, struct, sys, time
src, secs = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(0.2)
print('ready', file=sys.stderr, flush=True)
seen = 0
end = time.time() + secs
while time.time() < end:
    try:
        pkt, addr = s.recvfrom(2048)
        if addr[0] == src and pkt[(pkt[0] & 15) * 4] == 8:
            seen += 1
    except socket.timeout:
        pass
print(seen)
"#;

/// Runs the ICMP sender in `ns`: how many matching replies came back.
fn icmp(ns: &lab::topology::Namespace, dst: &str, kind: u8, id: u16, want: u8, secs: f32) -> u64 {
    let out = ns
        .command("python3")
        .args([
            "-c",
            ICMP,
            dst,
            &kind.to_string(),
            &id.to_string(),
            &want.to_string(),
            &secs.to_string(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn icmp_states_pass_only_replies_with_the_identifier() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("i");
    let dut = start(&lab, "block all\npass in on lrd0\npass out on lrd1\n");
    // A pings B with identifier 4660: B's kernel answers, the replies come back.
    assert!(icmp(&lab.a, "198.19.0.2", 8, 4660, 0, 1.0) >= 3, "A's ping must get its replies");
    // Meanwhile A listens for echo requests from B: B pings A with A's identifier (the other
    // way), then with another one. None may reach A, and B sees no reply.
    let mut listener = lab.a.command("python3");
    listener.args(["-c", LISTEN, "198.19.0.2", "2.5"]);
    let mut listen = start_until(listener, "ready");
    assert_eq!(
        icmp(&lab.b, "198.18.0.2", 8, 4660, 0, 1.0),
        0,
        "a request the other way, A's identifier"
    );
    assert_eq!(
        icmp(&lab.b, "198.18.0.2", 8, 22136, 0, 1.0),
        0,
        "a request with another identifier"
    );
    let mut child = listen.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.wait().unwrap();
    assert_eq!(out.trim(), "0", "echo requests from B reached A");
    // A's flow still works.
    assert!(icmp(&lab.a, "198.19.0.2", 8, 4660, 0, 0.6) >= 2);
    let report = stop(dut);
    assert!(report.contains("drop filter_blocked"), "{report}");
}

/// pf's `urpf-failed` with real pings: A's own source passes; a source of B's network sent
/// from A (an address A gives itself) fails the reverse-path check on lrd0 and never
/// reaches B. The rule's counter shows the spoofed requests.
#[test]
fn urpf_failed_stops_a_spoofed_source() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("u");
    lab.a.addr("lra0", "198.19.0.77/32").unwrap();
    let dut = start(&lab, "block in quick on lrd0 from urpf-failed label \"urpf\"\npass all\n");
    assert!(
        lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok(),
        "A's own source passes"
    );
    let mut listener = lab.b.command("python3");
    listener.args(["-c", LISTEN, "198.19.0.77", "2.0"]);
    let mut listen = start_until(listener, "ready");
    let spoofed =
        lab.a.exec("ping", &["-c", "4", "-i", "0.2", "-W", "1", "-I", "198.19.0.77", "198.19.0.2"]);
    assert!(spoofed.is_err(), "no answer to the spoofed source");
    let mut child = listen.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.wait().unwrap();
    assert_eq!(out.trim(), "0", "echo requests from the spoofed source reached B");
    let report = stop(dut);
    let urpf = report
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&"urpf"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        urpf[3].parse::<u64>().unwrap() >= 4,
        "the rule blocked the spoofed requests: {urpf:?}\n{report}"
    );
}

/// A TCP server on B that answers each connection with a line and keeps it open (until the
/// client closes it).
const KEEP_SERVER: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(16)
print('ready', file=sys.stderr, flush=True)
held = []
while True:
    c, _ = s.accept(); c.sendall(b'hello\n'); held.append(c)
"#;

/// Holds `n` TCP connections to B's `port` open for `secs`; prints how many connected.
const HOLD: &str = r#"
import socket, sys, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held = []
for _ in range(n):
    try:
        s = socket.create_connection(('198.19.0.2', port), timeout=1.5)
        s.settimeout(1.5)
        if s.recv(16) == b'hello\n':
            held.append(s)
    except OSError:
        pass
print(len(held), flush=True)
time.sleep(secs)
"#;

/// `keep state (max 2)`: of three connections A opens at once, two are established; once
/// they are closed and their states gone, A connects again.
#[test]
fn max_states_limit_a_rules_connections() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("m");
    let dut = start(
        &lab,
        "set timeout { tcp.closing 1, tcp.finwait 1, tcp.closed 1 }\nblock all\npass out all\npass in on lrd0 proto tcp to port 8080 keep state (max 2)\n",
    );
    let mut server = lab.b.command("python3");
    server.args(["-c", KEEP_SERVER, "8080"]);
    let _server = start_until(server, "ready");
    let out = lab.a.command("python3").args(["-c", HOLD, "8080", "3", "0"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "2",
        "two of three connections: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The connections are closed; their states time out (1 s here), then the rule has room.
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(connects(&lab, 8080), "a connection once the states are gone");
    let report = stop(dut);
    assert!(report.contains("drop rule_state_max"), "{report}");
}

/// `max-src-conn 2, overload <bruteforce> flush global`: of three connections A opens at
/// once, two are established, the third is refused as its handshake completes; A then goes
/// into <bruteforce>, its two connections' states are flushed, and `block quick from
/// <bruteforce>` stops everything from it, pings included.
#[test]
fn max_src_conn_overloads_a_source_into_a_table() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("s");
    let rules = "table <bruteforce> persist\nblock all\nblock quick from <bruteforce>\npass out all\npass in on lrd0 proto icmp\n\
                 pass in on lrd0 proto tcp to port 8080 keep state (max-src-conn 2, overload <bruteforce> flush global)\n";
    let dut = start(&lab, rules);
    let mut server = lab.b.command("python3");
    server.args(["-c", KEEP_SERVER, "8080"]);
    let _server = start_until(server, "ready");
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok(), "ping before");
    let out = lab.a.command("python3").args(["-c", HOLD, "8080", "3", "0"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "2",
        "two of three connections: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]).is_err(),
        "A is in <bruteforce>: its pings are blocked"
    );
    assert!(!connects(&lab, 8080), "A is in <bruteforce>: no connection");
    let report = stop(dut);
    assert!(report.contains("drop src_conn_limit"), "{report}");
}
