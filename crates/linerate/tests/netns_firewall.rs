//! The firewall end to end: host A -> linerate (namespace D) -> host B, with a rule file that
//! blocks UDP port 9999; `linerate reload` swaps in rules that pass it; a bad rule file is
//! refused with its position and the running rules stay. Needs root (skips without).
//! Namespaces are named `lr<pid>f<host>` and removed on drop.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{Lab, build, start_until, write_config};

fn config(lab: &Lab) -> PathBuf {
    write_config(lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n")
}

fn send_udp(lab: &Lab, tag: &str) {
    let udp =
        format!("for i in 1 2 3; do echo {tag}-$i > /dev/udp/198.19.0.2/9999; sleep 0.05; done");
    lab.a.exec("bash", &["-c", &udp]).unwrap();
}

fn ping(lab: &Lab) -> bool {
    lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok()
}

fn reload(cfg: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_linerate")).args(["reload", "-c"]).arg(cfg).output().unwrap()
}

/// UDP payload prefixes seen in the capture.
fn udp_payloads(pcap: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for rec in io::pcap::read_file(pcap).unwrap() {
        let Ok(eth) = wire::EthernetFrame::new_checked(&rec.data[..]) else { continue };
        if eth.ethertype() != wire::EtherType::Ipv4 {
            continue;
        }
        let ip = wire::Ipv4Packet::new_checked(eth.payload()).unwrap();
        if ip.protocol() == wire::IpProtocol::Udp {
            let u = wire::UdpPacket::new_checked(ip.payload()).unwrap();
            out.push(String::from_utf8_lossy(u.payload()).trim().to_owned());
        }
    }
    out
}

#[test]
fn rules_block_then_reload_passes_and_bad_file_is_refused() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("f");
    let cfg = config(&lab);
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "block in quick proto udp to port 9999 label \"no9999\"\n").unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");
    let sock = lab.dir.join("control.sock");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "control socket mode");

    let pcap = lab.dir.join("b.pcap");
    let mut tcpdump = lab.b.command("tcpdump");
    tcpdump.args(["-i", "lrb0", "-n", "-U", "--immediate-mode", "-w"]).arg(&pcap).arg("udp");
    let mut capture = start_until(tcpdump, "listening on");

    send_udp(&lab, "blocked");
    assert!(ping(&lab), "ping must pass the first rule set");

    std::fs::write(
        &rules,
        "pass in quick proto udp to port 9999 no state\nblock in quick proto udp\n",
    )
    .unwrap();
    let out = reload(&cfg);
    assert!(out.status.success(), "reload: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok: 2 rules");
    send_udp(&lab, "passed");

    std::fs::write(&rules, "pass in quick proto udp to port 9999 no state\npass in on lrd9\n")
        .unwrap();
    let out = reload(&cfg);
    assert!(!out.status.success(), "a bad rule file must be refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rules.conf:2:12:") && err.contains("lrd9"), "{err}");
    send_udp(&lab, "kept");
    assert!(ping(&lab), "ping after the refused reload");
    std::thread::sleep(Duration::from_millis(300));

    let mut tcpdump = capture.terminate().unwrap();
    tcpdump.wait().unwrap();
    let mut stdout = String::new();
    let mut linerate = dut.terminate().unwrap();
    linerate.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(linerate.wait().unwrap().success(), "{stdout}");
    assert!(!sock.exists(), "the control socket is removed at exit");

    let seen = udp_payloads(&pcap);
    let count = |tag: &str| seen.iter().filter(|p| p.starts_with(tag)).count();
    assert_eq!((count("blocked"), count("passed"), count("kept")), (0, 3, 3), "{seen:?}\n{stdout}");
    let blocked = stdout
        .lines()
        .find_map(|l| {
            l.trim().strip_prefix("drop filter_blocked").map(|n| n.trim().parse::<u64>().unwrap())
        })
        .unwrap_or(0);
    assert_eq!(blocked, 3, "{stdout}");
    assert!(stdout.contains("states: in_use"), "{stdout}");
}

/// Sends three datagrams to B's port 9999 and says how many arrived (B counts them with a
/// socket of its own).
fn udp_through(lab: &Lab, tag: &str) -> usize {
    let listen = "import socket, sys\nu = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nu.bind(('0.0.0.0', 9999))\nu.settimeout(1.5)\nprint('ready', file=sys.stderr, flush=True)\nn = 0\ntry:\n    while True:\n        u.recv(64)\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n";
    let mut rx = lab.b.command("python3");
    rx.args(["-c", listen]);
    let mut guard = start_until(rx, "ready");
    send_udp(lab, tag);
    let mut child = guard.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.wait().unwrap();
    out.trim().parse().unwrap()
}

/// SIGHUP reloads the rule file (the process goes on); a reload whose `set limit states` is
/// out of range, or whose state tables cannot be allocated, is refused and the old rules
/// still apply; then a reasonable one is taken.
#[test]
fn sighup_reloads_and_refused_limits_keep_the_old_rules() {
    if !is_root()
        || !Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
    {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("h");
    let cfg = config(&lab);
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "block in quick proto udp to port 9999\n").unwrap();
    // 2 GiB of address space: the run fits, a table of 50M states (5.2 GB) does not.
    let mut linerate = lab.d.command("bash");
    linerate.args([
        "-c",
        &format!(
            "ulimit -v 2097152; exec {} run -c {} --workers 2",
            env!("CARGO_BIN_EXE_linerate"),
            cfg.display()
        ),
    ]);
    let mut dut = start_until(linerate, "forwarding with");
    let pid = dut.0.as_ref().unwrap().id().to_string();
    assert_eq!(udp_through(&lab, "blocked"), 0);

    std::fs::write(&rules, "pass in quick proto udp to port 9999 no state\n").unwrap();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(udp_through(&lab, "passed"), 3, "SIGHUP must load the rules that pass");

    for (text, want) in [
        (
            "set limit states 4000000000\nblock in quick proto udp\n",
            "rules.conf:1:18: a number of states 4000000000 out of range (at most 100000000)",
        ),
        (
            "set limit states 50000000\nblock in quick proto udp\n",
            "cannot allocate a state table for 50000000 states (5200 MB)",
        ),
    ] {
        std::fs::write(&rules, text).unwrap();
        let out = reload(&cfg);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{text:?}: {err}");
        assert_eq!(udp_through(&lab, "kept"), 3, "{text:?}: the old rules still pass");
    }
    // The same refusal by SIGHUP leaves the process and the old rules as they were.
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(udp_through(&lab, "kept"), 3);
    std::fs::write(&rules, "set limit states 1000000\nblock in quick proto udp\n").unwrap();
    let out = reload(&cfg);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(udp_through(&lab, "blocked"), 0, "the reload with room for its table applies");

    let mut linerate = dut.terminate().unwrap();
    let mut stdout = String::new();
    linerate.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(linerate.wait().unwrap().success(), "{stdout}");
}

/// `show` and `top` whose reader went away end quietly with status 0 (no panic on EPIPE).
#[test]
fn show_and_top_survive_a_closed_pipe() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("p");
    let cfg = config(&lab);
    std::fs::write(lab.dir.join("rules.conf"), "pass all\n").unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg);
    let mut dut = start_until(linerate, "forwarding with");
    let bin = env!("CARGO_BIN_EXE_linerate");
    let cfg = cfg.display();
    for (cmd, reader) in [
        (format!("{bin} show routes -c {cfg}"), "head -1"),
        (format!("{bin} show routes -c {cfg}"), "true"),
        (format!("{bin} show interfaces -c {cfg}"), "true"),
        (format!("{bin} show drops --json -c {cfg}"), "true"),
        (format!("{bin} top -w 0.1 -n 3 -c {cfg}"), "true"),
    ] {
        // The reader is gone before linerate writes (it connects to the socket first).
        let script =
            format!("{cmd} 2>err.txt | {reader} >/dev/null; echo ${{PIPESTATUS[0]}}; cat err.txt");
        let out =
            Command::new("bash").args(["-c", &script]).current_dir(&lab.dir).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("0"), "{cmd} | {reader}: {text}");
        assert!(
            !text.contains("panicked") && !text.contains("Broken pipe"),
            "{cmd} | {reader}: {text}"
        );
    }
    let mut child = dut.terminate().unwrap();
    assert!(child.wait().unwrap().success());
}

fn table(cfg: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["table"])
        .args(args)
        .arg("-c")
        .arg(cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "table {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `linerate table` (pfctl -t -T) on a running router: host A added to `<bad>` is blocked at
/// once, deleted it passes again, a table file replaces the entries; the rules' counters go
/// on across the changes, and a reload defines the table anew from the rule file.
#[test]
fn tables_change_while_running() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("t");
    let cfg = config(&lab);
    let rules = lab.dir.join("rules.conf");
    std::fs::write(
        &rules,
        "table <bad> persist { 203.0.113.7 }\nblock in quick from <bad>\npass all no state\n",
    )
    .unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");
    let rule_packets = |rule: u64| {
        let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["show", "rules", "--json", "-c"])
            .arg(&cfg)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array().unwrap().iter().find(|r| r["number"] == rule).unwrap()["packets"]
            .as_u64()
            .unwrap()
    };

    assert_eq!(udp_through(&lab, "before"), 3);
    assert_eq!(
        table(&cfg, &["bad", "add", "198.18.0.2", "!198.18.0.0/24"]),
        "<bad>: 2 added, 0 deleted, 3 entries\n"
    );
    assert_eq!(
        table(&cfg, &["<bad>", "show"]),
        "   203.0.113.7\n   198.18.0.2\n   !198.18.0.0/24\n"
    );
    assert_eq!(
        table(&cfg, &["bad", "test", "198.18.0.2", "198.18.0.3"]),
        "198.18.0.2 matches\n198.18.0.3 does not match\n"
    );
    assert_eq!(udp_through(&lab, "added"), 0);
    assert_eq!(rule_packets(0), 3, "the block rule counted them");
    assert_eq!(
        table(&cfg, &["bad", "delete", "198.18.0.2"]),
        "<bad>: 0 added, 1 deleted, 2 entries\n"
    );
    assert_eq!(udp_through(&lab, "deleted"), 3);
    let file = lab.dir.join("bad.txt");
    std::fs::write(&file, "# blocklist\n198.18.0.0/24 192.0.2.1\n").unwrap();
    assert_eq!(
        table(&cfg, &["bad", "replace", "-f", file.to_str().unwrap()]),
        "<bad>: 2 added, 2 deleted, 2 entries\n"
    );
    assert_eq!(udp_through(&lab, "replaced"), 0);
    // Carried across every change: the six blocked, and the six passed (in and out each).
    assert_eq!(rule_packets(0), 6);
    assert!(rule_packets(1) >= 12, "{}", rule_packets(1));
    // A reload defines the table from the file again; a change is refused for an unknown table.
    assert!(reload(&cfg).status.success());
    assert_eq!(udp_through(&lab, "reloaded"), 3);
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["table", "nope", "flush", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr)
                .contains("no table <nope> in the running rules"),
        "{out:?}"
    );

    let mut linerate = dut.terminate().unwrap();
    assert!(linerate.wait().unwrap().success());
}
