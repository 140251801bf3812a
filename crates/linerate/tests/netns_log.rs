//! pf's `log` and `linerate capture` end to end, host A -> linerate (namespace D) -> host B,
//! read by the real reader, tcpdump:
//!
//! * rules with `log` write a pflog capture file (`[log] file`) that `tcpdump -n -e -r` reads
//!   as pf's: `rule N.ID.0/0(match): block in on lrd0: ...`; `linerate log` prints the same
//!   records live, and `linerate log -w - | tcpdump -r -` reads them as a stream;
//! * `linerate capture -w FILE` at rx, tx and drop (a packet a rule blocks, a packet with TTL
//!   1) writes a capture tcpdump reads, with the frames as they were at that point.
//!
//! Needs root and tcpdump (skips without). Namespaces `lr<pid>{log,cap...}{a,d,b}` are
//! removed on drop, and every process is stopped, even when an assertion fails.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::topology::is_root;

mod common;

use common::{Guard, Lab, build, start_until, write_config};

fn usable() -> bool {
    is_root() && Command::new("tcpdump").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Starts linerate in D with `rules` and the config's `extra` tables.
fn start(lab: &Lab, rules: &str, extra: &str) -> (Guard, std::path::PathBuf) {
    let cfg =
        write_config(lab, "af_packet", &format!("[firewall]\nrules = \"rules.conf\"\n{extra}"));
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    (start_until(linerate, "forwarding with"), cfg)
}

fn stop(mut dut: Guard) -> String {
    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    out
}

/// Sends one UDP datagram from A to B's `port` (bash's /dev/udp).
fn udp(lab: &Lab, port: u16) {
    let _ = lab.a.exec("bash", &["-c", &format!("echo linerate > /dev/udp/198.19.0.2/{port}")]);
}

/// Runs `send` every 100 ms until `client` exits (at most 10 s); its stdout and stderr.
fn until_exit(client: &mut Guard, send: impl Fn()) -> (String, String) {
    let start = Instant::now();
    loop {
        let child = client.0.as_mut().unwrap();
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the client never got its packets");
        send();
        std::thread::sleep(Duration::from_millis(100));
    }
    let child = client.0.take().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Starts a client (`linerate ARGS`, or `sh -c SCRIPT` with `$LR` the binary) in D.
fn client(lab: &Lab, script: &str) -> Guard {
    let mut cmd = lab.d.command("sh");
    cmd.args(["-c", script])
        .env("LR", env!("CARGO_BIN_EXE_linerate"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    // Give it time to connect and subscribe before the traffic starts (the traffic repeats
    // anyway until it has what it waits for).
    std::thread::sleep(Duration::from_millis(300));
    Guard(Some(child))
}

fn tcpdump(file: &Path) -> String {
    let out = Command::new("tcpdump").args(["-n", "-e", "-r"]).arg(file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn log_rules_write_a_pflog_file_and_stream_live() {
    if !usable() {
        lab::topology::skip_test("needs root and tcpdump");
        return;
    }
    let lab = build("log");
    let rules = "pass all no state\nblock in log quick on lrd0 proto udp to port 9999 label \"udp9999\"\npass in log on lrd0 proto udp to port 53 no state\n";
    let (dut, cfg) = start(&lab, rules, "[log]\nfile = \"pflog.pcap\"\n");
    let c = cfg.display();
    let mut text = client(&lab, &format!("\"$LR\" log --config {c} -c 2"));
    let mut piped =
        client(&lab, &format!("\"$LR\" log --config {c} -w - -c 1 | tcpdump -n -e -r -"));
    let (lines, _) = until_exit(&mut text, || udp(&lab, 9999));
    let (dumped, _) = until_exit(&mut piped, || udp(&lab, 9999));
    udp(&lab, 53);
    std::thread::sleep(Duration::from_millis(200));
    let report = stop(dut);
    // `linerate log`: one line per packet, as tcpdump -e prints pflog.
    let first = lines.lines().next().unwrap_or_else(|| panic!("no line: {lines}"));
    assert!(first.contains(" rule 1/udp9999(match): block in on lrd0: IP 198.18.0.2."), "{first}");
    assert!(first.contains(" > 198.19.0.2.9999: UDP, length 9"), "{first}");
    // The stream read by tcpdump.
    assert!(
        dumped.contains("rule 1.udp9999.0/0(match): block in on lrd0: 198.18.0.2."),
        "{dumped}"
    );
    // The file: every logged packet, read by tcpdump as pf's log.
    let file = tcpdump(&lab.dir.join("pflog.pcap"));
    assert!(
        file.lines()
            .filter(|l| l.contains("rule 1.udp9999.0/0(match): block in on lrd0: 198.18.0.2."))
            .count()
            >= 2,
        "{file}"
    );
    let pass =
        file.lines().find(|l| l.contains("pass in on lrd0")).unwrap_or_else(|| panic!("{file}"));
    assert!(pass.contains("> 198.19.0.2.53: "), "{pass}");
    // A rule without a label: its id is a hash of its text, 8 hex digits.
    let id = pass
        .split("rule 2.")
        .nth(1)
        .and_then(|s| s.split(".0/0").next())
        .unwrap_or_else(|| panic!("{pass}"));
    assert!(id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit()), "{pass}");
    assert!(report.contains("log: ") && report.contains("rate limit 0, rings full 0"), "{report}");
}

/// Captures `count` frames at `point` on `iface` while `send` repeats; tcpdump's reading of
/// the file and the client's stderr.
fn capture(
    lab: &Lab,
    cfg: &Path,
    iface: &str,
    point: &str,
    count: u32,
    send: impl Fn(),
) -> (String, String) {
    let file = lab.dir.join(format!("{point}.pcap"));
    let mut c = client(
        lab,
        &format!(
            "\"$LR\" capture --config {} -i {iface} --at {point} -c {count} -w {}",
            cfg.display(),
            file.display()
        ),
    );
    let (_, stderr) = until_exit(&mut c, send);
    (tcpdump(&file), stderr)
}

#[test]
fn capture_at_rx_tx_and_drop_is_read_by_tcpdump() {
    if !usable() {
        lab::topology::skip_test("needs root and tcpdump");
        return;
    }
    let lab = build("cap");
    let (dut, cfg) =
        start(&lab, "pass all no state\nblock in quick on lrd0 proto udp to port 9999\n", "");
    // As received (A's ARP may come first: a few frames).
    let (rx, _) = capture(&lab, &cfg, "lrd0", "rx", 4, || udp(&lab, 7777));
    let want = format!(
        "{} > {}, ethertype IPv4 (0x0800), length 51: 198.18.0.2.",
        common::A_MAC,
        common::D0_MAC
    );
    assert!(
        rx.lines().any(|l| l.contains(&want) && l.contains("> 198.19.0.2.7777: UDP, length 9")),
        "{rx}"
    );
    // As sent on lrd1: D's MAC to B's, the TTL one less.
    let (tx, _) = capture(&lab, &cfg, "lrd1", "tx", 1, || udp(&lab, 7777));
    assert!(
        tx.contains(&format!("{} > {}", common::D1_MAC, common::B_MAC))
            && tx.contains("> 198.19.0.2.7777: UDP"),
        "{tx}"
    );
    let (blocked, why) = capture(&lab, &cfg, "lrd0", "drop", 1, || udp(&lab, 9999));
    assert!(blocked.contains("> 198.19.0.2.9999: UDP"), "{blocked}");
    assert!(why.contains("frame 1: dropped: filter_blocked"), "{why}");
    let (expired, why) = capture(&lab, &cfg, "lrd0", "drop", 1, || {
        let _ = lab.a.exec("ping", &["-c", "1", "-t", "1", "-W", "1", "198.19.0.2"]);
    });
    assert!(expired.contains("198.18.0.2 > 198.19.0.2: ICMP echo request"), "{expired}");
    assert!(why.contains("dropped: ttl_expired"), "{why}");
    // Captures end cleanly: the router still forwards and the next capture may start.
    let (again, _) = capture(&lab, &cfg, "any", "tx", 1, || udp(&lab, 7777));
    assert!(again.contains("> 198.19.0.2.7777: UDP"), "{again}");
    let report = stop(dut);
    assert!(report.contains("drop ttl_expired"), "{report}");
}
