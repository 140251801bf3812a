//! Fragments through the firewall end to end: host A sends 3000-byte UDP datagrams, which its
//! kernel fragments in three (MTU 1500), over IPv4 and IPv6, through `linerate run` with a
//! default-deny rule set that passes one port. Every fragment of a passed datagram gets
//! through (B's kernel reassembles it), every fragment of a blocked one is blocked, counted
//! under the rules.
//! Needs root and python3 (skips without). Namespaces are named `lr<pid>g<host>` and removed
//! on drop.

use std::io::Read;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{Lab, build, start_until, write_config};

/// Datagrams B receives on `port` (IPv6 if `v6`) within a second of the last, and their
/// sizes.
fn receive(lab: &Lab, port: u16, v6: bool, send: impl FnOnce()) -> Vec<usize> {
    let (family, any) = if v6 { ("AF_INET6", "::") } else { ("AF_INET", "0.0.0.0") };
    let listen = format!(
        "import socket, sys\nu = socket.socket(socket.{family}, socket.SOCK_DGRAM)\nu.bind(('{any}', {port}))\nu.settimeout(1.5)\nprint('ready', file=sys.stderr, flush=True)\ntry:\n    while True:\n        print(len(u.recv(65536)), flush=True)\nexcept OSError:\n    pass\n"
    );
    let mut rx = lab.b.command("python3");
    rx.args(["-c", &listen]);
    let mut guard = start_until(rx, "ready");
    send();
    let mut child = guard.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.wait().unwrap();
    out.lines().map(|l| l.trim().parse().unwrap()).collect()
}

/// A sends `n` datagrams of 3000 bytes to B's `port` (fragmented by A's kernel), over IPv6
/// if `v6`.
fn send_big(lab: &Lab, port: u16, v6: bool, n: usize) {
    let (family, b) = if v6 { ("AF_INET6", "2001:db8:b::2") } else { ("AF_INET", "198.19.0.2") };
    let send = format!(
        "import socket, time\nu = socket.socket(socket.{family}, socket.SOCK_DGRAM)\nfor i in range({n}):\n    u.sendto(bytes(3000), ('{b}', {port}))\n    time.sleep(0.05)\n"
    );
    lab.a.exec("python3", &["-c", &send]).unwrap();
}

fn counter(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix(name).map(|n| n.trim().parse::<u64>().unwrap()))
        .unwrap_or(0)
}

#[test]
fn fragmented_udp_passes_as_its_first_fragment_is_judged() {
    if !is_root()
        || !Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
    {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("g");
    let cfg = write_config(&lab, "auto", "[firewall]\nrules = \"rules.conf\"\n");
    std::fs::write(
        lab.dir.join("rules.conf"),
        // pf filters a forwarded packet on both interfaces: the pass out is needed too.
        // Neighbour discovery and the router's own IPv6 chatter (MLD) pass, so that
        // `filter_blocked` counts the fragments only.
        "block all\npass quick inet6 proto icmp6\npass in on lrd0 proto udp from { 198.18.0.2 2001:db8:a::2 } to { 198.19.0.2 2001:db8:b::2 } port 9999 keep state\npass out on lrd1 proto udp from { 198.18.0.2 2001:db8:a::2 } to { 198.19.0.2 2001:db8:b::2 } port 9999 keep state\n",
    )
    .unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");

    // The first datagram also resolves B's address (linerate queues while it asks).
    let mut results = Vec::new();
    for v6 in [false, true] {
        let passed = receive(&lab, 9999, v6, || send_big(&lab, 9999, v6, 5));
        let blocked = receive(&lab, 7777, v6, || send_big(&lab, 7777, v6, 4));
        results.push((passed, blocked));
    }

    let mut linerate = dut.terminate().unwrap();
    let mut stdout = String::new();
    linerate.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(linerate.wait().unwrap().success(), "{stdout}");
    for ((passed, blocked), family) in results.iter().zip(["IPv4", "IPv6"]) {
        assert_eq!(
            passed,
            &vec![3000; 5],
            "{family}: every fragment of the passed datagrams\n{stdout}"
        );
        assert!(blocked.is_empty(), "{family}: {blocked:?}");
    }
    // Three fragments per blocked datagram, each judged by the blocked datagram's ports.
    assert_eq!(counter(&stdout, "drop filter_blocked"), 24, "{stdout}");
    for reason in ["drop fragment_no_first", "drop fragment_tiny", "drop fragment_overlap"] {
        assert_eq!(counter(&stdout, reason), 0, "{reason}\n{stdout}");
    }
}
