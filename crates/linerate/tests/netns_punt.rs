//! Punt classes end to end: `linerate gen` in A floods, as fast as it can, addresses of a
//! connected prefix behind the router where no host lives (198.51.0.0/16 on B's link), so
//! every frame needs resolution. Meanwhile, with A's and B's neighbour caches flushed (their
//! next packets need ARP and NDP with the router), `ping` of the router and across it to B
//! (IPv4 and IPv6) keeps working, and the refused punts are counted under their class
//! (`linerate show drops`, the exit summary).
//!
//! AF_PACKET, one worker. Needs root (skips without). Namespaces `lr<pid>p{a,d,b}`, removed on
//! drop. Run it alone (it saturates a CPU): `flock /tmp/lr-bench.lock cargo test ...`.

use std::process::{Command, Stdio};
use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{D0_MAC, build, start_until, text, write_config};

/// Replies received out of `ping -c N` output.
fn received(out: &str) -> u32 {
    out.lines()
        .find_map(|l| {
            l.split(", ")
                .find_map(|p| p.strip_suffix(" received").and_then(|n| n.trim().parse().ok()))
        })
        .unwrap_or(0)
}

#[test]
fn pings_survive_a_flood_to_unresolved_addresses() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("p");
    let extra = "[[route]]\nprefix = \"198.51.0.0/16\"\ninterface = \"lrd1\"\n";
    let cfg = write_config(&lab, "af_packet", extra);
    // The kernel's receive work in softirq, not in a thread below the worker: on a shared
    // machine other processes' work would starve such a thread and limit the flood.
    let text_cfg = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[router]\n", "[router]\nnapi_threads = false\n");
    std::fs::write(&cfg, text_cfg).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = start_until(linerate, "forwarding with");
    let ping = |args: &[&str]| {
        lab.a
            .command("ping")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // B is resolved before the flood (both families).
    for dst in ["198.19.0.2", "2001:db8:b::2"] {
        let out =
            text(&ping(&["-c", "2", "-i", "0.2", "-W", "2", dst]).wait_with_output().unwrap());
        assert_eq!(received(&out), 2, "before the flood: {out}");
    }
    for ns in [&lab.a, &lab.b] {
        ns.ip(&["neigh", "flush", "all"]).unwrap();
    }

    // 65,534 addresses nobody answers, at full speed, for 8 seconds, from the CPU the worker
    // does not use (on the worker's, it would starve the receive thread placed below it).
    let bin = env!("CARGO_BIN_EXE_linerate");
    let flood = lab
        .a
        .command(bin)
        .args([
            "gen",
            "-i",
            "lra0",
            "-s",
            "198.18.0.2",
            "-d",
            "198.51.0.1-198.51.255.254",
            "-D",
            D0_MAC,
            "-t",
            "8",
            "--json",
            "--cpu",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let pings = [
        ("the router", ping(&["-c", "20", "-i", "0.25", "-W", "1", "198.18.0.1"])),
        ("B", ping(&["-c", "20", "-i", "0.25", "-W", "1", "198.19.0.2"])),
        ("B over IPv6", ping(&["-6", "-c", "20", "-i", "0.25", "-W", "1", "2001:db8:b::2"])),
    ];
    let results: Vec<(&str, String)> =
        pings.into_iter().map(|(who, p)| (who, text(&p.wait_with_output().unwrap()))).collect();
    let flood = flood.wait_with_output().unwrap();
    assert!(flood.status.success(), "gen: {}", text(&flood));
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&flood.stdout).lines().last().unwrap_or(""))
            .unwrap();
    let sent = report["sent"].as_u64().unwrap();
    assert!(sent >= 400_000, "not much of a flood: {report}");
    for (who, out) in &results {
        assert!(received(out) >= 16, "ping {who} during the flood of {sent} frames:\n{out}");
    }

    let show = Command::new(bin).args(["show", "drops", "-c"]).arg(&cfg).output().unwrap();
    let table = text(&show);
    assert!(show.status.success(), "{table}");
    let count = |name: &str| {
        table.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    let refused = count("punt_resolve_policed")
        + count("punt_resolve_queue_full")
        + count("punt_resolve_next_hop_limit");
    assert!(
        refused * 2 > sent,
        "most of the flood refused at the punt stage: {refused} of {sent}\n{table}"
    );
    assert_eq!(count("punt_arp_nd_policed") + count("punt_arp_nd_queue_full"), 0, "{table}");
    let out = dut.terminate().unwrap().wait_with_output().unwrap();
    let summary = text(&out);
    assert!(out.status.success(), "{summary}");
    assert!(summary.contains("drop punt_resolve_policed"), "{summary}");
    eprintln!("flood: {report}\n{table}");
}
