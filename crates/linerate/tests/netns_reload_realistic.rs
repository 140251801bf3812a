//! Reloading a realistic 10,000-rule set under a steady stream loses no packet: host A sends
//! numbered UDP datagrams through linerate (namespace D) to host B at a modest rate while
//! `linerate reload` swaps in one generated 10k-rule set ([`fw::testgen`]) after another;
//! every datagram must arrive. The rules are compiled on the control thread and published
//! to the workers, which never wait for a compile. Needs root (skips without). Namespaces
//! are `lr<pid>rl{a,d,b}`, removed on drop.

use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use lab::topology::is_root;

mod common;

use common::{build, start_until, write_config};

const DATAGRAMS: usize = 10_000;
const RATE: usize = 400;

/// A generated 10k-rule set on linerate's interfaces, after two rules that pass the test's
/// stream and ping (so their fate does not depend on the seed).
fn rule_file(seed: u64) -> String {
    let text = fw::testgen::ruleset(seed, 10_000);
    let text = text
        .replace("lr-g0", "lrd0")
        .replace("lr-g1", "lrd1")
        .replace("lr-g2", "lrd0")
        .replace("lr-g3", "lrd1");
    let at = text.find("\npass").into_iter().chain(text.find("\nblock")).min().expect("rules") + 1;
    format!(
        "{}pass quick proto udp to 198.19.0.2 port 9999 no state\npass quick inet proto icmp no state\n{}",
        &text[..at],
        &text[at..]
    )
}

fn reload(cfg: &Path) -> (std::process::Output, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["reload", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    (out, t.elapsed())
}

#[test]
fn reloading_ten_thousand_realistic_rules_under_a_stream_loses_no_datagram() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("rl");
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    let rules = lab.dir.join("rules.conf");
    let sets: Vec<String> = (1..=3).map(rule_file).collect();
    std::fs::write(&rules, &sets[0]).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");
    // Neighbours resolved before the stream starts.
    lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.2"]).unwrap();

    let listen = "import socket, sys\nu = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nu.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)\nu.bind(('0.0.0.0', 9999))\nprint('ready', file=sys.stderr, flush=True)\nseen = set()\nu.settimeout(10)\ntry:\n    while True:\n        seen.add(int(u.recv(64)))\n        u.settimeout(3)\nexcept OSError:\n    pass\nprint(len(seen))\n";
    let mut rx = lab.b.command("python3");
    rx.args(["-c", listen]);
    let mut receiver = start_until(rx, "ready");
    let send = format!(
        "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nt0 = time.monotonic()\nfor i in range({DATAGRAMS}):\n    d = t0 + i / {RATE} - time.monotonic()\n    if d > 0:\n        time.sleep(d)\n    s.sendto(str(i).encode(), ('198.19.0.2', 9999))\n"
    );
    let mut tx = lab.a.command("python3");
    tx.args(["-c", &send]);
    let mut sender = tx.spawn().unwrap();

    // Reloads during the stream's 25 s, alternating the sets.
    let mut times = Vec::new();
    for i in 0..4 {
        std::thread::sleep(Duration::from_millis(700));
        std::fs::write(&rules, &sets[(i + 1) % sets.len()]).unwrap();
        let (out, took) = reload(&cfg);
        assert!(out.status.success(), "reload {i}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok: 10002 rules");
        times.push(took);
    }
    assert!(sender.try_wait().unwrap().is_none(), "the reloads ({times:?}) outlasted the stream");
    assert!(sender.wait().unwrap().success(), "the sender failed");
    let mut child = receiver.0.take().unwrap();
    let mut got = String::new();
    child.stdout.take().unwrap().read_to_string(&mut got).unwrap();
    child.wait().unwrap();
    let mut stdout = String::new();
    let mut linerate = dut.terminate().unwrap();
    linerate.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(linerate.wait().unwrap().success(), "{stdout}");
    eprintln!("reloads took {times:?}");
    assert_eq!(
        got.trim().parse::<usize>().unwrap(),
        DATAGRAMS,
        "datagrams lost across 4 reloads of 10k rules\n{stdout}"
    );
}
