//! NAT end to end: inside host A (198.18.0.0/24) -> linerate (namespace D) -> outside host B
//! (198.19.0.2), and C (198.20.0.2) one router (B) further. B has no route back to A's
//! network: only translated traffic can reach it and come back. Checked with real tools:
//! - `nat on lrd1 ... -> (lrd1)`: 100 inside addresses open TCP connections (one and two
//!   workers); B sees every one from 198.19.0.1, each from its own port in pf's range, the
//!   payloads intact;
//! - ping through it, and traceroute to C: B's "time exceeded" and C's "port unreachable",
//!   sent to 198.19.0.1, reach A translated back (quoted packet included);
//! - `rdr` of 198.19.0.1:80 to A's server on 8080; `binat` of 198.18.0.7 <-> 198.19.0.7;
//! - a pf rule set that filters on the translated address (`pass out on $ext_if from
//!   ($ext_if)`, a `block out` of the inside network that translated packets never match)
//!   and forwards a port with `rdr pass` under `block all`.
//!
//! Needs root and python3 (skips without). Namespaces `lr<pid>nat*` are removed on drop.

use std::io::Read;
use std::path::PathBuf;
use std::process::Command;

use lab::topology::{End, Namespace, is_root, veth};

mod common;

use common::{D1_MAC, Guard, Lab, build, start_until, write_config};

const RULES: &str = "\
ext_if = \"lrd1\"
lan = \"198.18.0.0/24\"
table <outside> { 198.19.0.0/24 198.20.0.0/24 }
binat on $ext_if from 198.18.0.7 to any -> 198.19.0.7
rdr on $ext_if proto tcp from <outside> to ($ext_if) port 80 -> 198.18.0.2 port 8080
nat on $ext_if inet from $lan to any -> ($ext_if)
pass all
";

/// The lab, B without its route back, and namespace C behind B.
struct NatLab {
    lab: Lab,
    _c: Namespace,
}

fn skip() -> bool {
    if !is_root()
        || !Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
    {
        lab::topology::skip_test("needs root and python3");
        return true;
    }
    false
}

fn nat_lab(tag: &str) -> NatLab {
    let lab = build(tag);
    lab.b.ip(&["route", "del", "default"]).unwrap();
    let c = Namespace::create(&format!("lr{}{tag}c", std::process::id())).unwrap();
    veth(
        End { ns: &lab.b, name: "lrb1", mac: "02:00:00:00:0b:02" },
        End { ns: &c, name: "lrc0", mac: "02:00:00:00:0c:01" },
    )
    .unwrap();
    lab.b.addr("lrb1", "198.20.0.1/24").unwrap();
    c.addr("lrc0", "198.20.0.2/24").unwrap();
    c.ip(&["route", "add", "default", "via", "198.20.0.1"]).unwrap();
    lab.b.sysctl("net.ipv4.ip_forward=1").unwrap();
    for ns in [&lab.b, &c] {
        ns.sysctl("net.ipv4.icmp_ratelimit=0").unwrap();
    }
    // binat's outside address: B reaches it at linerate's MAC (pf users publish it by ARP).
    lab.b
        .ip(&["neigh", "add", "198.19.0.7", "lladdr", D1_MAC, "dev", "lrb0", "nud", "permanent"])
        .unwrap();
    lab.a.ip(&["addr", "add", "198.18.0.7/24", "dev", "lra0"]).unwrap();
    for i in 10..110 {
        lab.a.ip(&["addr", "add", &format!("198.18.0.{i}/24"), "dev", "lra0"]).unwrap();
    }
    NatLab { lab, _c: c }
}

/// pf's way: translation before filtering. The out rules on the outside interface name the
/// router's address, as pf's see the translated source; the port forward passes by `rdr
/// pass` alone (pf's `pass` on a translation rule), the out pass to A by `pass out on lrd0`.
const PF_RULES: &str = "\
ext_if = \"lrd1\"
int_if = \"lrd0\"
lan = \"198.18.0.0/24\"
rdr pass on $ext_if proto tcp from any to ($ext_if) port 80 -> 198.18.0.2 port 8080
nat on $ext_if inet from $lan to any -> ($ext_if)
block all
pass in on $int_if from $lan
pass out on $int_if
block out quick on $ext_if from $lan
block out quick on $ext_if inet proto icmp from ($ext_if) to 198.20.0.2
pass out on $ext_if inet proto { tcp udp icmp } from ($ext_if)
";

fn start(lab: &Lab, workers: usize) -> (Guard, PathBuf) {
    start_with(lab, workers, RULES)
}

fn start_with(lab: &Lab, workers: usize, rules: &str) -> (Guard, PathBuf) {
    let extra = "[firewall]\nrules = \"rules.conf\"\n\n[[route]]\nprefix = \"198.20.0.0/24\"\nvia = \"198.19.0.2\"\n";
    let cfg = write_config(lab, "af_packet", extra);
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["check", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(check.status.success(), "check: {}", String::from_utf8_lossy(&check.stderr));
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--workers", &workers.to_string(), "--cpu", "0"]);
    (start_until(linerate, "forwarding with"), cfg)
}

/// Stops linerate; its exit report.
fn stop(mut dut: Guard) -> String {
    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    out
}

/// B's server: accepts `n` connections on port 7000 (or until 60 s pass), echoes what each
/// sends, and prints `peer_addr peer_port payload` per connection.
const SERVER: &str = r#"
import asyncio, sys
n = int(sys.argv[1]); seen = []; done = asyncio.Event()
async def serve(r, w):
    data = await r.read(100)
    host, port = w.get_extra_info('peername')[:2]
    seen.append(f"{host} {port} {data.decode()}")
    w.write(data); await w.drain(); w.close()
    if len(seen) >= n: done.set()
async def main():
    srv = await asyncio.start_server(serve, '0.0.0.0', 7000, backlog=4096)
    print('ready', file=sys.stderr, flush=True)
    try: await asyncio.wait_for(done.wait(), 60)
    except asyncio.TimeoutError: pass
    print("\n".join(seen))
asyncio.run(main())
"#;

/// A's client: from each of the given source addresses, `per` connections to B:7000 (at
/// most 256 at a time); each sends `src:port/i` (its inside address and port) and checks the
/// echo. Prints how many matched.
const CLIENT: &str = r#"
import asyncio, sys
per = int(sys.argv[1]); srcs = sys.argv[2:]; sem = asyncio.Semaphore(256)
async def one(src, i):
    async with sem:
        for attempt in range(3):
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection('198.19.0.2', 7000, local_addr=(src, 0)), 5)
                lport = w.get_extra_info('sockname')[1]
                msg = f"{src}:{lport}/{i}".encode(); w.write(msg); await w.drain()
                got = await asyncio.wait_for(r.read(100), 5); w.close()
                return got == msg
            except (OSError, asyncio.TimeoutError):
                await asyncio.sleep(0.2)
        return False
async def main():
    ok = await asyncio.gather(*(one(s, i) for s in srcs for i in range(per)))
    print(sum(ok))
asyncio.run(main())
"#;

/// 100 inside addresses x `per` TCP connections through `nat`; what B saw is checked.
fn many_connections(workers: usize, per: usize) {
    let nl = nat_lab(if workers == 1 { "nat1" } else { "nat2" });
    let lab = &nl.lab;
    let (dut, _) = start(lab, workers);
    let srcs: Vec<String> = (10..110).map(|i| format!("198.18.0.{i}")).collect();
    let total = srcs.len() * per;
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER, &total.to_string()]);
    let mut server = start_until(server, "ready");
    let mut client = lab.a.command("python3");
    client.args(["-c", CLIENT, &per.to_string()]).args(&srcs);
    let out = client.output().unwrap();
    let matched: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    let mut child = server.0.take().unwrap();
    let mut seen = String::new();
    child.stdout.take().unwrap().read_to_string(&mut seen).unwrap();
    child.wait().unwrap();
    let report = stop(dut);
    assert_eq!(matched, total, "echoes intact: {}\n{report}", String::from_utf8_lossy(&out.stderr));
    // Each translated port stands for one inside (address, port): a port is never handed
    // out to a second inside flow while the first holds it. (A connection retried from
    // the same inside port, after a timeout on this busy machine, keeps its translation.)
    let mut inside_of = std::collections::HashMap::new();
    let mut payload_srcs = std::collections::HashSet::new();
    let mut done = std::collections::HashSet::new();
    for line in seen.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f[0], "198.19.0.1", "B sees only the translated address: {line}");
        let port: u16 = f[1].parse().unwrap();
        assert!((50001..=65535).contains(&port), "port in pf's default range: {line}");
        let (inside, i) = f[2].split_once('/').unwrap();
        let prev = inside_of.insert(port, inside.to_owned());
        assert!(
            prev.as_deref().is_none_or(|p| p == inside),
            "port {port} handed out to {prev:?} and {inside}"
        );
        payload_srcs.insert(inside.split(':').next().unwrap().to_owned());
        done.insert((inside.split(':').next().unwrap().to_owned(), i.to_owned()));
    }
    assert_eq!(done.len(), total, "every connection reached B");
    assert_eq!(payload_srcs.len(), srcs.len(), "from every inside address");
    assert!(!report.contains("nat_exhausted"), "{report}");
}

#[test]
fn many_inside_hosts_through_nat_one_worker() {
    if skip() {
        return;
    }
    many_connections(1, 100);
}

#[test]
fn many_inside_hosts_through_nat_two_workers() {
    if skip() {
        return;
    }
    many_connections(2, 50);
}

/// Two workers: pings from 20 inside addresses (each its own identifier) and a traceroute.
/// The replies and errors reach the worker that holds the translation: the fanout hashes an
/// echo by its identifier and an error by the flow it quotes, and `nat` picks an identifier
/// whose replies hash to the worker choosing it.
#[test]
fn ping_and_traceroute_through_nat_two_workers() {
    if skip() {
        return;
    }
    let nl = nat_lab("natw");
    let lab = &nl.lab;
    let (dut, _) = start(lab, 2);
    let mut answered = 0;
    for i in 10..30 {
        let src = format!("198.18.0.{i}");
        let ping =
            lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "-I", &src, "198.19.0.2"]);
        answered += usize::from(
            ping.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(" 2 received")),
        );
    }
    let tr =
        lab.a.exec("traceroute", &["-n", "-q", "1", "-w", "2", "-m", "5", "198.20.0.2"]).unwrap();
    let report = stop(dut);
    assert_eq!(answered, 20, "pings answered through nat on two workers\n{report}");
    let text = String::from_utf8_lossy(&tr.stdout).to_string();
    let hops: Vec<&str> = text
        .lines()
        .skip_while(|l| l.starts_with("traceroute"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(hops, ["198.18.0.1", "198.19.0.2", "198.20.0.2"], "{text}\n{report}");
}

#[test]
fn ping_traceroute_rdr_and_binat() {
    if skip() {
        return;
    }
    let nl = nat_lab("natp");
    let lab = &nl.lab;
    let (dut, _) = start(lab, 1);
    let ping = lab.a.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]);
    assert!(ping.is_ok(), "ping through nat: {ping:?}");
    // Hop 2 (B) answers "time exceeded", hop 3 (C) "port unreachable": both sent to
    // 198.19.0.1 and translated back to A with the UDP probe they quote.
    let tr =
        lab.a.exec("traceroute", &["-n", "-q", "1", "-w", "2", "-m", "5", "198.20.0.2"]).unwrap();
    let text = String::from_utf8_lossy(&tr.stdout).to_string();
    let hops: Vec<&str> = text
        .lines()
        .skip_while(|l| l.starts_with("traceroute"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(hops, ["198.18.0.1", "198.19.0.2", "198.20.0.2"], "{text}");

    // rdr: B reaches A's server on 8080 through 198.19.0.1:80; A sees B's own address.
    let serve = "import socket, sys\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('0.0.0.0', 8080)); s.listen(8)\nprint('ready', file=sys.stderr, flush=True)\nfor _ in range(2):\n    c, peer = s.accept()\n    c.sendall(('A saw %s ' % peer[0]).encode() + c.recv(64)); c.close()\n";
    let mut server = lab.a.command("python3");
    server.args(["-c", serve]);
    let _server = start_until(server, "ready");
    let get = |dst: &str| {
        let script = format!(
            "import socket\nc = socket.create_connection(('{dst}', {}), 5)\nc.sendall(b'hello')\nprint(c.recv(100).decode())\n",
            if dst == "198.19.0.1" { 80 } else { 8080 }
        );
        let out = lab.b.exec("python3", &["-c", &script]).unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(get("198.19.0.1"), "A saw 198.19.0.2 hello", "rdr");
    // binat: B reaches 198.18.0.7 as 198.19.0.7 ...
    assert_eq!(get("198.19.0.7"), "A saw 198.19.0.2 hello", "binat inbound");
    // ... and 198.18.0.7's own connections leave as 198.19.0.7 (not the nat address).
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER, "1"]);
    let mut server = start_until(server, "ready");
    let out = lab.a.exec("python3", &["-c", CLIENT, "1", "198.18.0.7"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    let mut child = server.0.take().unwrap();
    let mut seen = String::new();
    child.stdout.take().unwrap().read_to_string(&mut seen).unwrap();
    child.wait().unwrap();
    let report = stop(dut);
    assert!(
        seen.starts_with("198.19.0.7 "),
        "binat outbound keeps its own address: {seen}\n{report}"
    );
}

/// A's server on 8080 for `n` connections: answers each with the peer's address and what
/// it sent.
const ECHO_PEER: &str = "import socket, sys\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('0.0.0.0', 8080)); s.listen(8)\nprint('ready', file=sys.stderr, flush=True)\nfor _ in range(int(sys.argv[1])):\n    c, peer = s.accept()\n    c.sendall(('A saw %s ' % peer[0]).encode() + c.recv(64)); c.close()\n";

#[test]
fn pf_rules_filter_on_the_translated_address_and_rdr_pass() {
    if skip() {
        return;
    }
    let nl = nat_lab("natf");
    let lab = &nl.lab;
    let (dut, _) = start_with(lab, 1, PF_RULES);
    // Out on lrd1 as 198.19.0.1: passed by `from ($ext_if)`, not blocked by `from $lan`.
    let ping = lab.a.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]);
    assert!(ping.is_ok(), "ping through nat, passed on the translated source: {ping:?}");
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER, "1"]);
    let mut server = start_until(server, "ready");
    let out = lab.a.exec("python3", &["-c", CLIENT, "1", "198.18.0.2"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "TCP through nat");
    let mut child = server.0.take().unwrap();
    let mut seen = String::new();
    child.stdout.take().unwrap().read_to_string(&mut seen).unwrap();
    child.wait().unwrap();
    assert!(seen.starts_with("198.19.0.1 "), "B sees the translated address: {seen}");
    // The rule on the translated source and C's address blocks this one.
    let blocked = lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "1", "198.20.0.2"]);
    assert!(blocked.is_err(), "blocked out as 198.19.0.1 to C: {blocked:?}");
    // `rdr pass`: B reaches A's server through 198.19.0.1:80 with no `pass in` rule for it.
    let mut server = lab.a.command("python3");
    server.args(["-c", ECHO_PEER, "1"]);
    let _server = start_until(server, "ready");
    let script = "import socket\nc = socket.create_connection(('198.19.0.1', 80), 5)\nc.sendall(b'hello')\nprint(c.recv(100).decode())\n";
    let got = lab
        .b
        .exec("python3", &["-c", script])
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let report = stop(dut);
    assert_eq!(got.ok().as_deref(), Some("A saw 198.19.0.2 hello"), "rdr pass\n{report}");
    // Blocked: the two pings to C, each before any translation was made for it.
    assert!(report.contains("filter_blocked"), "{report}");
}

/// OpenBSD's way: `match out ... nat-to` for the inside network, a port forward written as
/// `pass in ... rdr-to` under `block all`.
const OPENBSD_RULES: &str = "\
ext_if = \"lrd1\"
int_if = \"lrd0\"
lan = \"198.18.0.0/24\"
match out on $ext_if inet from $lan to any nat-to ($ext_if)
block all
pass in quick on $ext_if inet proto tcp from any to ($ext_if) port 80 rdr-to 198.18.0.2 port 8080
pass in on $int_if from $lan
pass out on $int_if
pass out on $ext_if inet proto { tcp udp icmp }
";

#[test]
fn openbsd_rules_match_nat_to_and_pass_rdr_to() {
    if skip() {
        return;
    }
    let nl = nat_lab("nato");
    let lab = &nl.lab;
    let (dut, _) = start_with(lab, 1, OPENBSD_RULES);
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER, "1"]);
    let mut server = start_until(server, "ready");
    let out = lab.a.exec("python3", &["-c", CLIENT, "1", "198.18.0.2"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "TCP through match ... nat-to");
    let mut child = server.0.take().unwrap();
    let mut seen = String::new();
    child.stdout.take().unwrap().read_to_string(&mut seen).unwrap();
    child.wait().unwrap();
    assert!(seen.starts_with("198.19.0.1 "), "B sees the translated address: {seen}");
    // The port forward: B reaches A's server through 198.19.0.1:80; port 81 stays blocked.
    let mut server = lab.a.command("python3");
    server.args(["-c", ECHO_PEER, "1"]);
    let _server = start_until(server, "ready");
    let connect = |port: u16| {
        let script = format!(
            "import socket\nc = socket.create_connection(('198.19.0.1', {port}), 3)\nc.sendall(b'hello')\nprint(c.recv(100).decode())\n"
        );
        lab.b
            .exec("python3", &["-c", &script])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    assert!(connect(81).is_err(), "no forward for port 81: blocked");
    let got = connect(80);
    let report = stop(dut);
    assert_eq!(got.ok().as_deref(), Some("A saw 198.19.0.2 hello"), "pass in ... rdr-to\n{report}");
}

/// B's UDP side of the differential: echoes every datagram on port 9000 and, after 2 s of
/// silence, prints `peer_addr peer_port payload` per datagram.
const UDP_ECHO: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', 9000)); s.settimeout(2)
print('ready', file=sys.stderr, flush=True)
seen = []
try:
    while True:
        data, peer = s.recvfrom(200)
        seen.append(f"{peer[0]} {peer[1]} {data.decode()}"); s.sendto(data, peer)
except OSError:
    pass
print("\n".join(seen))
"#;

/// A's side: `n` flows, each from a source address drawn (seeded) among A's 100, its own
/// socket and a random payload; prints how many echoes came back intact.
const UDP_FLOWS: &str = r#"
import random, socket, sys
n = int(sys.argv[1]); random.seed(7); ok = 0
for i in range(n):
    src = f"198.18.0.{random.randrange(10, 110)}"
    tag = f"{i}:{src}:{random.getrandbits(64):016x}"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((src, 0)); s.settimeout(2)
    msg = f"{tag}|{s.getsockname()[1]}".encode()
    s.sendto(msg, ('198.19.0.2', 9000))
    try:
        ok += s.recv(200) == msg
    except OSError:
        pass
    s.close()
print(ok)
"#;

/// The same seeded UDP flows through `dut` (started on the lab): what B saw, per datagram
/// (outside address, outside port, payload), and how many echoes A got back.
fn udp_flows_through(lab: &Lab, n: usize) -> (Vec<(String, u16, String)>, usize) {
    let mut server = lab.b.command("python3");
    server.args(["-c", UDP_ECHO]);
    let mut server = start_until(server, "ready");
    let out = lab.a.exec("python3", &["-c", UDP_FLOWS, &n.to_string()]).unwrap();
    let echoed = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    let mut child = server.0.take().unwrap();
    let mut seen = String::new();
    child.stdout.take().unwrap().read_to_string(&mut seen).unwrap();
    child.wait().unwrap();
    let rows = seen.lines().filter(|l| !l.is_empty()).map(|l| {
        let f: Vec<&str> = l.splitn(3, ' ').collect();
        (f[0].to_owned(), f[1].parse().unwrap(), f[2].to_owned())
    });
    (rows.collect(), echoed)
}

/// Differential: the same random UDP flows through the kernel's nftables `masquerade` and
/// through linerate's `nat ... -> (lrd1)`. Both must deliver every payload intact from
/// 198.19.0.1, each inside flow on an outside port of its own, and return every echo; they
/// differ where they may (the kernel keeps the source port when it is free, linerate takes
/// one of pf's range).
#[test]
fn differential_against_nftables_masquerade() {
    if skip() || !Command::new("nft").arg("--version").status().is_ok_and(|s| s.success()) {
        lab::topology::skip_test("needs root, python3 and nft");
        return;
    }
    const FLOWS: usize = 400;
    let kernel = {
        let nl = nat_lab("natk");
        let lab = &nl.lab;
        lab.d.addr("lrd0", "198.18.0.1/24").unwrap();
        lab.d.addr("lrd1", "198.19.0.1/24").unwrap();
        lab.d.sysctl("net.ipv4.ip_forward=1").unwrap();
        let nft = lab.dir.join("masq.nft");
        std::fs::write(&nft, "table ip lrnat {\n chain post {\n  type nat hook postrouting priority 100;\n  oifname \"lrd1\" masquerade\n }\n}\n").unwrap();
        lab.d.exec("nft", &["-f", nft.to_str().unwrap()]).unwrap();
        udp_flows_through(lab, FLOWS)
    };
    let linerate = {
        let nl = nat_lab("natl");
        let (dut, _) = start(&nl.lab, 1);
        let r = udp_flows_through(&nl.lab, FLOWS);
        stop(dut);
        r
    };
    for (name, (rows, echoed)) in [("kernel", &kernel), ("linerate", &linerate)] {
        assert_eq!(*echoed, FLOWS, "{name}: every echo back");
        assert_eq!(rows.len(), FLOWS, "{name}: every datagram once");
        assert!(rows.iter().all(|r| r.0 == "198.19.0.1"), "{name}: {rows:?}");
        // Inside (address, port) <-> outside port, one to one (a socket of a later flow may
        // get the port of an earlier one: the same inside flow, the same translation).
        let inside = |r: &(String, u16, String)| {
            let (tag, port) = r.2.split_once('|').unwrap();
            (tag.split(':').nth(1).unwrap().to_owned(), port.to_owned())
        };
        let mut out_of = std::collections::HashMap::new();
        let mut in_of = std::collections::HashMap::new();
        for r in rows {
            assert_eq!(
                *out_of.entry(inside(r)).or_insert(r.1),
                r.1,
                "{name}: one outside port per inside flow"
            );
            assert_eq!(
                in_of.entry(r.1).or_insert_with(|| inside(r)),
                &inside(r),
                "{name}: one inside flow per outside port"
            );
        }
    }
    let payloads = |rows: &[(String, u16, String)]| {
        rows.iter()
            .map(|r| r.2.split('|').next().unwrap().to_owned())
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(payloads(&kernel.0), payloads(&linerate.0), "the same payloads reach B");
    assert!(linerate.0.iter().all(|r| (50001..=65535).contains(&r.1)), "linerate: pf's range");
}
