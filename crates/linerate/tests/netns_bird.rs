//! linerate under BIRD 2: eBGP on the host-stack TAPs, routes through the kernel's table
//! (`[router.kernel_routes]`) into linerate's FIB.
//!
//! Host A -> D (linerate, and a BIRD in its namespace) -> B and C, each with a BIRD of its own
//! announcing the same 3,000 prefixes (static routes), C with a longer AS path. D's BIRD
//! exports its best routes to the kernel; linerate mirrors them.
//!
//! - all 3,000 reach linerate's FIB, via B; traffic to them arrives at B;
//! - B withdraws them (its static protocol disabled): within a second the traffic arrives at
//!   C instead;
//! - `linerate reload` leaves both BGP sessions up (established before, still established,
//!   same since-time, after).
//!
//! Needs root and `bird` (Debian `bird2`; skips without). Namespaces `lrbgp<pid>{a,d,b,c}`;
//! BIRD's configs, control sockets and logs in a temporary folder; all removed on drop.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use lab::topology::{Namespace, is_root};

mod common;

use common::bgp::{Lab, PREFIXES, birdc, build, kernel_routes_via, text, write_router_config};

const ROUTER_CONF: &str = "router id 198.18.0.1;
protocol device { scan time 1; }
protocol kernel { ipv4 { import none; export all; }; }
protocol bgp b { local 198.19.0.1 as 65001; neighbor 198.19.0.2 as 65002; connect retry time 1; ipv4 { import all; export none; }; }
protocol bgp c { local 198.20.0.1 as 65001; neighbor 198.20.0.2 as 65003; connect retry time 1; ipv4 { import all; export none; }; }
";

/// The "since" column of a BGP protocol in `birdc show protocols`, if it is established.
fn established_since(ns: &Namespace, sock: &Path, proto: &str) -> Option<String> {
    let out = birdc(ns, sock, &["show", "protocols", proto]);
    let line = out.lines().find(|l| l.starts_with(proto) && l.contains("Established"))?;
    Some(line.split_whitespace().nth(4)?.to_owned())
}

#[test]
fn bgp_routes_from_bird_reach_the_fib() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    if Command::new("bird").arg("--version").output().is_err() {
        lab::topology::skip_test("needs bird (Debian bird2)");
        return;
    }
    let lab = build("bgp");
    let cfg = write_router_config(&lab, "bird");
    let mut run = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    run.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = common::start_until(run, "forwarding with");
    // BIRD on the router's TAPs, and on each neighbour.
    let (_router_bird, router_sock) = common::bgp::bird(&lab.d, &lab.dir, "router", ROUTER_CONF);
    let (_b_bird, _c_bird, b_sock) = common::bgp::neighbours(&lab);

    wait_for_routes_via_b(&lab, &cfg, &router_sock);
    let _traffic = common::bgp::traffic_to_b(&lab);
    sessions_survive_a_reload(&lab, &cfg, &router_sock);
    common::bgp::withdrawal_moves_traffic_to_c(&lab, &cfg, &b_sock);

    let out = dut.terminate().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "linerate run: {}", text(&out));
}

/// Waits up to 60 s for every prefix B announces to be in linerate's FIB, both sessions up.
fn wait_for_routes_via_b(lab: &Lab, cfg: &Path, router_sock: &Path) {
    let n = PREFIXES as usize;
    let diag = || {
        let kernel = text(&lab.d.ip(&["route", "show", "proto", "bird"]).unwrap()).lines().count();
        let logs: String = ["router", "b", "c"]
            .iter()
            .map(|b| {
                format!(
                    "--- {b}.log\n{}",
                    std::fs::read_to_string(lab.dir.join(format!("{b}.log"))).unwrap_or_default()
                )
            })
            .collect();
        format!(
            "{}\nkernel: {kernel} bird routes in D\n{logs}",
            birdc(&lab.d, router_sock, &["show", "protocols"])
        )
    };
    let start = Instant::now();
    while kernel_routes_via(cfg, "198.19.0.2") < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{n} routes via B not in linerate's FIB after 60 s:\n{}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = start.elapsed();
    eprintln!("BGP: {n} routes via B in the FIB {took:?} after the BIRDs started");
    // C's session comes up on its own schedule (connect retry, 1 s): B's routes can be in the
    // FIB before it is established.
    let both_up = || {
        established_since(&lab.d, router_sock, "b").is_some()
            && established_since(&lab.d, router_sock, "c").is_some()
    };
    let limit = Duration::from_secs(30);
    let start = Instant::now();
    while !both_up() {
        assert!(
            start.elapsed() < limit,
            "BGP sessions b and c not both established after {limit:?}:\n{}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The BGP sessions survive a reload of linerate.
fn sessions_survive_a_reload(lab: &Lab, cfg: &Path, router_sock: &Path) {
    let (since_b, since_c) =
        (established_since(&lab.d, router_sock, "b"), established_since(&lab.d, router_sock, "c"));
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["reload", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "reload: {}", text(&out));
    std::thread::sleep(Duration::from_secs(2));
    let protocols = birdc(&lab.d, router_sock, &["show", "protocols"]);
    for (proto, before) in [("b", since_b), ("c", since_c)] {
        let after = established_since(&lab.d, router_sock, proto);
        assert!(
            same_instant(before.as_deref(), after.as_deref()),
            "session {proto} reset by the reload ({before:?} -> {after:?}):\n{protocols}"
        );
    }
}

/// Whether two of BIRD's "since" times ("HH:MM:SS.mmm") are the same event. BIRD keeps the
/// time on a monotonic clock and adds the wall clock's offset as it prints, so one instant
/// can print a millisecond apart; a session reset and re-established would be seconds later.
fn same_instant(a: Option<&str>, b: Option<&str>) -> bool {
    let ms = |t: &str| -> Option<i64> {
        let (hms, frac) = t.split_once('.').unwrap_or((t, "0"));
        let mut parts = hms.split(':').map(|p| p.parse::<i64>().ok());
        let (h, m, s) = (parts.next()??, parts.next()??, parts.next()??);
        Some(((h * 60 + m) * 60 + s) * 1000 + frac.parse::<i64>().ok()?)
    };
    match (a.and_then(ms), b.and_then(ms)) {
        (Some(a), Some(b)) => (a - b).abs() <= 50,
        _ => false,
    }
}
