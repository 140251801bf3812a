//! Real tools through linerate, as its users would run them: iperf3 and ssh between two
//! hosts across a stateful pf rule set, and ssh to the router's own address through its
//! host-stack TAP. Veths keep the kernel's default offloads (TSO, GSO, checksum offload), and
//! linerate runs two workers, so both workers, TCP window tracking and the offload path see
//! bulk TCP. Needs root, iperf3 and sshd (`scripts/setup.sh` installs them); without root
//! each test says "skipped" and passes.

use std::io::Read;
use std::path::Path;
use std::process::Command;

use lab::topology::{Namespace, is_root};

mod common;

use common::{Guard, Lab, build, start_until, text, write_config};

/// A stateful rule set as a firewall in front of a server would have: everything blocked but
/// TCP to iperf3's and ssh's ports from A's side (with pf's random sequence numbers, also
/// for ssh to the router itself), ICMP, and neighbour discovery.
const RULES: &str = "\
block all
pass out keep state
pass in on lrd0 proto tcp from 198.18.0.0/24 to any port { 22, 5201 } flags S/SA modulate state
pass in on lrd0 inet proto icmp keep state
pass quick inet6 proto icmp6 icmp6-type { neighbrsol, neighbradv }
";

/// Starts linerate in D with `RULES`, `workers` workers on `backend`.
fn start_dut(lab: &Lab, backend: &str, workers: u32) -> Guard {
    start_dut_with(lab, backend, workers, RULES, true)
}

/// Starts linerate in D with `rules`; `ping`: checks that A reaches B (which also resolves
/// B before the traffic).
fn start_dut_with(lab: &Lab, backend: &str, workers: u32, rules: &str, ping: bool) -> Guard {
    let cfg = write_config(lab, backend, "[firewall]\nrules = \"rules.conf\"\n");
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--workers", &workers.to_string()]);
    let dut = start_until(linerate, "forwarding with");
    if ping {
        // Resolve B first (on a loaded machine the first echo may time out: one reply is
        // enough).
        let ping = text(
            &lab.a
                .command("ping")
                .args(["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"])
                .output()
                .unwrap(),
        );
        assert!(!ping.contains(" 0 received"), "{ping}");
    }
    dut
}

/// Stops linerate and returns its exit summary (counters and drop reasons).
fn stop_dut(mut dut: Guard) -> String {
    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "linerate failed: {out}");
    out
}

/// A drop reason's count in linerate's exit summary (`drop <reason> <count>` lines).
fn dropped(summary: &str, reason: &str) -> u64 {
    summary
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("drop ")?
                .strip_prefix(reason)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// One iperf3 test from A to B's server; returns the bytes B received.
fn iperf3(lab: &Lab, args: &[&str]) -> u64 {
    iperf3_json(lab, args)["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0)
}

/// One iperf3 test from A to B's server: its JSON report.
fn iperf3_json(lab: &Lab, args: &[&str]) -> serde_json::Value {
    let server = lab
        .b
        .command("iperf3")
        .args(["-s", "-1", "-B", "198.19.0.2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = Guard(Some(server));
    listening(&lab.b, ":5201");
    let out = lab
        .a
        .command("iperf3")
        .args(["-c", "198.19.0.2", "-J", "--connect-timeout", "5000"])
        .args(args)
        .output()
        .unwrap();
    drop(server);
    assert!(out.status.success(), "iperf3 {args:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits (up to 10 s) until a TCP socket in `ns` listens on `addr_port` (as `ss` writes it).
fn listening(ns: &Namespace, addr_port: &str) {
    for _ in 0..100 {
        if text(&ns.exec("ss", &["-ltn"]).unwrap()).contains(addr_port) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("nothing listens on {addr_port}");
}

fn iperf3_across(backend: &str, tag: &str, workers: u32) {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build(tag);
    let dut = start_dut(&lab, backend, workers);
    // Eight streams each way (flows spread over both workers), 3 s each.
    let up = iperf3(&lab, &["-t", "3", "-P", "8"]);
    let down = iperf3(&lab, &["-t", "3", "-P", "8", "-R"]);
    // Blocked: nothing passes to another port (the client gives up; the rule set answers
    // nothing).
    let blocked = lab
        .a
        .command("iperf3")
        .args(["-c", "198.19.0.2", "-p", "5202", "-t", "1", "--connect-timeout", "1000"])
        .output()
        .unwrap();
    let summary = stop_dut(dut);
    // At least 20 MB each way in 3 s (a loaded 2-vCPU machine moves hundreds of MB): the
    // check is that bulk TCP flows, not how fast.
    assert!(
        up > 20 << 20 && down > 20 << 20,
        "{backend}: iperf3 moved only {up} / {down} bytes:\n{summary}"
    );
    assert!(!blocked.status.success(), "{backend}: iperf3 to a blocked port succeeded");
    for reason in ["offload_malformed", "gso_unsupported", "state_out_of_window"] {
        assert_eq!(dropped(&summary, reason), 0, "{backend}: {reason}:\n{summary}");
    }
    eprintln!("{backend}: iperf3 {up} bytes up, {down} down\n{summary}");
}

#[test]
fn iperf3_across_a_stateful_firewall_af_xdp() {
    iperf3_across("af_xdp", "ix", 1);
}

#[test]
fn iperf3_across_a_stateful_firewall_af_packet() {
    iperf3_across("af_packet", "ip", 2);
}

/// Tags and normalization on real TCP: A's connections are tagged on the way in and pass
/// out only as tagged (A's pings, untagged, are blocked on the way out), and `scrub ...
/// max-mss` on B's side clamps both SYNs, so both ends send segments of at most 1200 bytes.
#[test]
fn tagged_and_scrubbed_tcp_across() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("tg");
    let rules = "scrub on lrd1 all max-mss 1200 random-id\nblock all\n\
                 pass in on lrd0 proto tcp from 198.18.0.0/24 to any port 5201 tag LAN keep state\n\
                 pass in on lrd0 inet proto icmp keep state\n\
                 pass out on lrd1 tagged LAN keep state\n";
    let dut = start_dut_with(&lab, "af_packet", 2, rules, false);
    let json = iperf3_json(&lab, &["-t", "2", "-P", "2"]);
    let ping = text(
        &lab.a
            .command("ping")
            .args(["-c", "2", "-i", "0.2", "-W", "1", "198.19.0.2"])
            .output()
            .unwrap(),
    );
    let summary = stop_dut(dut);
    let bytes = json["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(bytes > 10 << 20, "tagged TCP moved only {bytes} bytes:\n{summary}");
    let mss = json["start"]["tcp_mss_default"].as_u64().unwrap_or(0);
    assert!(mss > 0 && mss <= 1200, "A's MSS {mss}: the SYN-ACK was not clamped:\n{summary}");
    assert!(ping.contains(" 0 received"), "untagged pings passed out:\n{ping}");
    assert!(summary.contains("scrub"), "{summary}");
    eprintln!("tagged TCP: {bytes} bytes, MSS {mss}; pings: {ping}");
}

/// An sshd for namespace `ns` on `addr`, root by key only, its files in `dir`.
fn sshd(ns: &Namespace, dir: &Path, addr: &str) -> Guard {
    let conf = dir.join(format!("sshd-{addr}.conf"));
    std::fs::write(
        &conf,
        format!(
            "ListenAddress {addr}\nHostKey {}\nAuthorizedKeysFile {}\nPermitRootLogin prohibit-password\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n\
             PidFile none\nLogLevel VERBOSE\n",
            dir.join("host_key").display(),
            dir.join("authorized_keys").display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    let mut cmd = ns.command("/usr/sbin/sshd");
    cmd.args(["-D", "-e", "-f"]).arg(&conf);
    start_until(cmd, "Server listening")
}

/// Runs `sh_command` as root over ssh from namespace `from` to `addr` with `input` on its
/// stdin; its stdout, or "failed: " and what ssh said.
fn ssh(lab: &Lab, from: &Namespace, addr: &str, sh_command: &str, input: &[u8]) -> String {
    use std::io::Write;
    let mut child = from
        .command("ssh")
        .args(["-i"])
        .arg(lab.dir.join("client_key"))
        .args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
        ])
        .arg(format!("root@{addr}"))
        .arg(sh_command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let t = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    eprintln!("ssh {addr} {sh_command:?}: {:?}, {}", t.elapsed(), out.status);
    if !out.status.success() {
        return format!("failed: {}", text(&out));
    }
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn ssh_across_and_to_the_router() {
    ssh_across("auto", "ss", 2);
}

/// The same over AF_XDP: the worker sends the router's own packets on its AF_XDP socket.
#[test]
fn ssh_across_and_to_the_router_af_xdp() {
    ssh_across("af_xdp", "sx", 1);
}

fn ssh_across(backend: &str, tag: &str, workers: u32) {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build(tag);
    keygen(&lab.dir.join("host_key"));
    keygen(&lab.dir.join("client_key"));
    std::fs::copy(lab.dir.join("client_key.pub"), lab.dir.join("authorized_keys")).unwrap();
    let dut = start_dut(&lab, backend, workers);
    let _b = sshd(&lab.b, &lab.dir, "198.19.0.2");
    // The router's own address: sshd in D listens on linerate's TAP, as an operator's would.
    let _d = sshd(&lab.d, &lab.dir, "198.18.0.1");
    // 8 MB of random bytes through ssh, both directions of the same session's channel.
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let want = sha256(&data);
    let to_b = ssh(&lab, &lab.a, "198.19.0.2", "sha256sum | cut -d' ' -f1", &data);
    let from_b = ssh(
        &lab,
        &lab.a,
        "198.19.0.2",
        "head -c 8388608 /dev/zero | sha256sum | cut -d' ' -f1",
        b"",
    );
    // To the router: its replies leave through linerate's workers, which show them to the
    // state the connection made (pf's window tracking sees both directions).
    let to_router = ssh(&lab, &lab.a, "198.18.0.1", "sha256sum | cut -d' ' -f1", &data);
    // From the router: `block all` lets B's replies in only by the state that the router's
    // own first packet made under `pass out keep state`.
    let router_to_b = ssh(&lab, &lab.d, "198.19.0.2", "sha256sum | cut -d' ' -f1", &data);
    let ping = text(
        &lab.d
            .command("ping")
            .args(["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"])
            .output()
            .unwrap(),
    );
    let summary = stop_dut(dut);
    assert_eq!(to_b, want, "8 MB to B over ssh:\n{summary}");
    assert_eq!(from_b, sha256(&vec![0u8; 8 << 20]), "B's own command output:\n{summary}");
    assert_eq!(to_router, want, "8 MB to the router over ssh:\n{summary}");
    assert_eq!(router_to_b, want, "8 MB from the router to B over ssh:\n{summary}");
    assert!(ping.contains(" 3 received"), "the router's pings to B:\n{ping}\n{summary}");
    for reason in ["offload_malformed", "gso_unsupported"] {
        assert_eq!(dropped(&summary, reason), 0, "{reason}:\n{summary}");
    }
}

fn sha256(data: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_owned()
}
