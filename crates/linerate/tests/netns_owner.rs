//! One `linerate run` per interface, and nothing touched by a run that cannot start:
//! - a second run on interfaces in use exits non-zero naming the interface and the first
//!   run's pid, and the first still forwards; killed (a crash), the first leaves no lock;
//! - a rule file with an error leaves no TAP, no XDP or tc program and no nftables table.
//!
//! Needs root (skips without); namespaces `lr<pid><tag><host>` are removed on drop.

use std::process::Command;
use std::time::Duration;

use lab::topology::{Namespace, is_root};

mod common;

use common::{Lab, build, start_until, stats, write_config};

fn forwarded(lab: &Lab) -> u64 {
    stats(&lab.dir.join("control.sock"))["totals"]["forwarded"].as_u64().unwrap()
}

/// Whether some of `n` echo requests from A to B get their reply (three tries: on a busy
/// machine the first may wait for ARP while the worker is descheduled).
fn ping(lab: &Lab, n: u32) -> bool {
    (0..3).any(|_| {
        lab.a.exec("ping", &["-c", &n.to_string(), "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok()
    })
}

/// `linerate run -c CFG` in D, to completion.
fn run_to_end(lab: &Lab, cfg: &std::path::Path) -> std::process::Output {
    let mut cmd = lab.d.command("timeout");
    cmd.args(["20", env!("CARGO_BIN_EXE_linerate"), "run", "-c"]).arg(cfg);
    cmd.output().unwrap()
}

#[test]
fn second_run_on_an_interface_in_use_is_refused() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("o");
    let cfg = write_config(&lab, "auto", "");
    let mut first = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    first.args(["run", "-c"]).arg(&cfg);
    let mut dut = start_until(first, "forwarding with");
    let pid = dut.0.as_ref().unwrap().id();
    assert!(ping(&lab, 2), "the first run forwards");

    // Same interfaces, its own control socket: refused before it touches them.
    let text = std::fs::read_to_string(&cfg).unwrap().replace("control.sock", "control2.sock");
    let cfg2 = lab.dir.join("second.toml");
    std::fs::write(&cfg2, text).unwrap();
    let out = run_to_end(&lab, &cfg2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("interface lrd0 is in use by another linerate (pid {pid}")),
        "{err}"
    );
    assert!(!err.contains("forwarding with"), "{err}");

    let before = forwarded(&lab);
    let replies = lab
        .a
        .exec("ping", &["-c", "5", "-i", "0.2", "-W", "2", "198.19.0.2"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let received: u64 =
        replies.split(", ").find_map(|p| p.strip_suffix(" received")?.parse().ok()).unwrap_or(0);
    assert!(received >= 4, "the first run still forwards: {replies}");
    // Workers publish their counters every few batches: wait for them.
    let mut now = forwarded(&lab);
    for _ in 0..40 {
        if now >= before + 2 * received {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        now = forwarded(&lab);
    }
    assert!(
        now >= before + 2 * received,
        "{received} echo requests and replies forwarded by the first run: {before} -> {now}"
    );

    // A crash leaves no lock behind: the kernel drops the flock with the process.
    let mut crashed = dut.0.take().unwrap();
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    let mut again = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    again.args(["run", "-c"]).arg(&cfg2);
    let mut dut2 = start_until(again, "forwarding with");
    assert!(ping(&lab, 2), "the run after the crash forwards");
    let mut child = dut2.terminate().unwrap();
    assert!(child.wait().unwrap().success());
}

/// What a run may leave in D: links (with any XDP program), tc and tcx programs, nftables.
fn footprint(d: &Namespace) -> String {
    let mut all = String::new();
    let mut show = |program: &str, args: &[&str]| {
        let out = d.command(program).args(args).output().unwrap();
        all.push_str(&format!(
            "$ {program} {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    };
    show("ip", &["-d", "link", "show"]);
    show("nft", &["list", "ruleset"]);
    for dev in ["lrd0", "lrd1"] {
        show("tc", &["filter", "show", "dev", dev, "ingress"]);
    }
    if Command::new("bpftool").arg("version").output().is_ok() {
        show("bpftool", &["net", "show"]);
    }
    all
}

#[test]
fn rule_file_errors_touch_nothing() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("n");
    let cfg = write_config(&lab, "auto", "[firewall]\nrules = \"rules.conf\"\n");
    let rules = lab.dir.join("rules.conf");
    // The veths' carrier comes up a moment after they do.
    let mut clean = footprint(&lab.d);
    for _ in 0..40 {
        if !clean.contains("NO-CARRIER") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        clean = footprint(&lab.d);
    }
    assert!(!clean.contains("prog/xdp") && !clean.contains("lrhd0"), "{clean}");
    let cases = [
        (
            "pass all\npass out reply-to (lrd1 198.19.0.2) inet all\n",
            "rules.conf:2:10: `reply-to` on an `out` rule is not supported by linerate",
        ),
        (
            "pass in log (to pflog1) all\n",
            "rules.conf:1:14: `log (to IFACE)` is not supported by linerate",
        ),
        (
            "set limit states 4000000000\npass all\n",
            "rules.conf:1:18: a number of states 4000000000 out of range",
        ),
        ("pass in on lrd7 all\n", "rules.conf:1:12: unknown interface \"lrd7\""),
    ];
    for (text, want) in cases {
        std::fs::write(&rules, text).unwrap();
        let out = run_to_end(&lab, &cfg);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(want), "{text:?}: {err}");
        assert!(!err.contains("(port 0)"), "no interface may be opened: {err}");
        assert_eq!(footprint(&lab.d), clean, "{text:?} left something behind");
    }
    // The same check holds a run that does start: it shows up in the footprint.
    std::fs::write(&rules, "pass all\n").unwrap();
    let mut good = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    good.args(["run", "-c"]).arg(&cfg);
    let mut dut = start_until(good, "forwarding with");
    let running = footprint(&lab.d);
    assert_ne!(running, clean, "the footprint must see a running linerate");
    assert!(running.contains("lrhd0"), "{running}");
    let mut child = dut.terminate().unwrap();
    assert!(child.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(footprint(&lab.d), clean, "a stopped run leaves nothing behind");
}
