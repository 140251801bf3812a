//! Routes from the kernel's table and from the config, end to end: host A -> linerate (in
//! namespace D, `[router.kernel_routes]`) -> B on lrd1 and C on lrd2.
//!
//! - a multipath route added with `ip route` in D (the host stack's namespace, through the
//!   TAPs) appears in `linerate show routes` as a kernel route, and 2000 flows from A spread
//!   over B and C (each gets 35-65% of them, every frame arrives); deleting it in the kernel
//!   withdraws it (A's ping then gets "Net Unreachable" from linerate);
//! - an IPv6 route via a TAP reaches B;
//! - routes through nexthop objects (`ip route add P nhid N`, as FRR's zebra installs them),
//!   with `net.ipv4.nexthop_compat_mode` 0 so that the kernel says nothing of the routes when
//!   an object changes: one through a single object goes to B, one through a group to B and
//!   C; deleting a group member, replacing an object and deleting it move the traffic (or
//!   withdraw the routes) with no route message;
//! - `[[route]]` reload: a static route with a list of next hops is added, changed, removed
//!   by `linerate reload` and SIGHUP, while a flow to an unchanged route loses nothing.
//!
//! AF_PACKET only. Needs root (skips without). Namespaces `lr<pid>krt{a,d,b,c}`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use lab::topology::{End, Namespace, is_root, veth};

mod common;

use common::{D0_MAC, Lab, build, start_until, text, write_config};

const C_MAC: &str = "02:00:00:00:0c:01";
const D2_MAC: &str = "02:00:00:00:0d:02";

fn linerate(args: &[&str], cfg: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate")).args(args).arg("-c").arg(cfg).output().unwrap()
}

fn routes(cfg: &std::path::Path) -> Vec<serde_json::Value> {
    let out = linerate(&["show", "routes", "--json"], cfg);
    assert!(out.status.success(), "show routes: {}", text(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

fn route(cfg: &std::path::Path, prefix: &str) -> Option<serde_json::Value> {
    routes(cfg).into_iter().find(|r| r["prefix"] == prefix)
}

/// Waits up to 5 s for `linerate show routes` to satisfy `ok` on `prefix`.
fn wait_route(
    cfg: &std::path::Path,
    prefix: &str,
    what: &str,
    ok: impl Fn(Option<&serde_json::Value>) -> bool,
) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if ok(route(cfg, prefix).as_ref()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{prefix}: {what}; show routes has {:?}", route(cfg, prefix));
}

fn rx_packets(ns: &Namespace, ifname: &str) -> u64 {
    let out = ns.exec("cat", &[&format!("/sys/class/net/{ifname}/statistics/rx_packets")]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// `linerate gen` in A: `n` UDP frames at `rate` per second to `dst`, from 20 sources.
fn traffic(lab: &Lab, dst: &str, n: u64, rate: u64) -> Command {
    let mut cmd = lab.a.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args([
        "gen",
        "-i",
        "lra0",
        "-D",
        D0_MAC,
        "-s",
        "198.18.0.10-198.18.0.29",
        "-d",
        dst,
        "-n",
        &n.to_string(),
        "-R",
        &rate.to_string(),
    ]);
    cmd
}

/// What `linerate gen` says it sent.
fn sent(o: &Output) -> u64 {
    let t = text(o);
    let line = t.lines().find(|l| l.starts_with("sent ")).unwrap_or_else(|| panic!("gen: {t}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn drops(cfg: &std::path::Path, reason: &str) -> u64 {
    let out = linerate(&["show", "drops", "--json"], cfg);
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[reason].as_u64().unwrap()
}

fn set_routes(cfg: &std::path::Path, routes: &str) {
    let text = std::fs::read_to_string(cfg).unwrap();
    let head = text.split("# static routes\n").next().unwrap().to_owned();
    std::fs::write(cfg, format!("{head}# static routes\n{routes}")).unwrap();
}

#[test]
fn kernel_routes_ecmp_and_static_reload() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("krt");
    let c = Namespace::create(&format!("lr{}krtc", std::process::id())).unwrap();
    veth(End { ns: &lab.d, name: "lrd2", mac: D2_MAC }, End { ns: &c, name: "lrc0", mac: C_MAC })
        .unwrap();
    c.addr("lrc0", "198.20.0.2/24").unwrap();
    let extra = r#"
[[interface]]
name = "lrd2"
addresses = ["198.20.0.1/24", "2001:db8:c::1/64"]
backend = "af_packet"

[router.kernel_routes]
table = "main"

# static routes
[[route]]
prefix = "10.97.0.0/16"
via = "198.19.0.2"
"#;
    let cfg = write_config(&lab, "af_packet", extra);
    let mut run = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    run.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = start_until(run, "forwarding with");

    kernel_multipath_spreads_flows(&lab, &c, &cfg);
    kernel_withdrawal_and_ipv6(&lab, &cfg);
    kernel_nexthop_objects(&lab, &c, &cfg);
    let pid = dut.0.as_ref().unwrap().id().to_string();
    static_routes_reload_without_loss(&lab, &cfg, &pid);

    let out = dut.terminate().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "linerate run: {}", text(&out));
}

/// A multipath route in the kernel's main table, through the TAPs: in the FIB as a kernel
/// route, and 2000 flows spread over B and C.
fn kernel_multipath_spreads_flows(lab: &Lab, c: &Namespace, cfg: &std::path::Path) {
    lab.d
        .ip(&[
            "route",
            "add",
            "10.99.0.0/16",
            "proto",
            "static",
            "nexthop",
            "via",
            "198.19.0.2",
            "dev",
            "lrhd1",
            "nexthop",
            "via",
            "198.20.0.2",
            "dev",
            "lrhd2",
        ])
        .unwrap();
    wait_route(cfg, "10.99.0.0/16", "no multipath kernel route", |r| {
        r.is_some_and(|r| r["kind"] == "multipath" && r["source"] == "kernel")
    });
    let paths = route(cfg, "10.99.0.0/16").unwrap()["paths"].clone();
    assert_eq!(paths.as_array().unwrap().len(), 2, "{paths}");
    // The kernel's own route for a TAP's subnet (proto kernel) stays linerate's connected one.
    assert_eq!(route(cfg, "198.19.0.0/24").unwrap()["source"], "interface");

    // 2000 flows (20 sources x 100 destinations): every frame arrives, spread over B and C.
    // The first frames wait for ARP (a few per next hop), so resolve both first.
    let warm = traffic(lab, "10.99.0.1-10.99.0.100", 2000, 2000).output().unwrap();
    assert!(warm.status.success(), "gen: {}", text(&warm));
    std::thread::sleep(Duration::from_millis(300));
    let (b0, c0) = (rx_packets(&lab.b, "lrb0"), rx_packets(c, "lrc0"));
    let out = traffic(lab, "10.99.0.1-10.99.0.100", 20_000, 10_000).output().unwrap();
    assert!(out.status.success(), "gen: {}", text(&out));
    let n = sent(&out);
    std::thread::sleep(Duration::from_millis(300));
    let (b, c_rx) = (rx_packets(&lab.b, "lrb0") - b0, rx_packets(c, "lrc0") - c0);
    eprintln!("ECMP: B got {b}, C got {c_rx} of {n}");
    // All of them (a shared test machine may drop a few in the veths' rings).
    assert!((b + c_rx) * 100 >= n * 99 && b + c_rx <= n + 20, "B {b} + C {c_rx} != {n}");
    assert!(b * 100 >= n * 35 && c_rx * 100 >= n * 35, "uneven spread: B {b}, C {c_rx} of {n}");
}

/// Withdrawn in the kernel: gone from the FIB, linerate answers net unreachable. Then an
/// IPv6 route via a TAP: B receives the ping (it has no such address and does not answer).
fn kernel_withdrawal_and_ipv6(lab: &Lab, cfg: &std::path::Path) {
    lab.d.ip(&["route", "del", "10.99.0.0/16"]).unwrap();
    wait_route(cfg, "10.99.0.0/16", "still installed", |r| r.is_none());
    let ping =
        text(&lab.a.command("ping").args(["-c", "1", "-W", "2", "10.99.0.1"]).output().unwrap());
    assert!(ping.contains("Net Unreachable"), "{ping}");

    lab.d
        .ip(&[
            "-6",
            "route",
            "add",
            "2001:db8:99::/48",
            "via",
            "2001:db8:b::2",
            "dev",
            "lrhd1",
            "proto",
            "bird",
        ])
        .unwrap();
    wait_route(cfg, "2001:db8:99::/48", "no IPv6 kernel route", |r| {
        r.is_some_and(|r| r["kind"] == "via" && r["source"] == "kernel")
    });
    let b0 = rx_packets(&lab.b, "lrb0");
    let _ = lab
        .a
        .command("ping")
        .args(["-6", "-c", "3", "-i", "0.2", "-W", "1", "2001:db8:99::1"])
        .output()
        .unwrap();
    assert!(rx_packets(&lab.b, "lrb0") - b0 >= 3, "B did not receive the IPv6 pings");
}

/// Sends 2000 frames to `dst` from A and returns how many B and C received, and how many
/// were sent.
fn delivered(lab: &Lab, c: &Namespace, dst: &str) -> (u64, u64, u64) {
    let (b0, c0) = (rx_packets(&lab.b, "lrb0"), rx_packets(c, "lrc0"));
    let out = traffic(lab, dst, 2000, 2000).output().unwrap();
    assert!(out.status.success(), "gen: {}", text(&out));
    std::thread::sleep(Duration::from_millis(300));
    (rx_packets(&lab.b, "lrb0") - b0, rx_packets(c, "lrc0") - c0, sent(&out))
}

/// Asserts that `dst`'s traffic reaches B (`to_b`) or C, none the other (which counts every
/// frame: a few ARP or NDP frames besides). A loaded shared machine drops some in the veths.
fn all_to(lab: &Lab, c: &Namespace, dst: &str, to_b: bool) {
    let (b, c_rx, n) = delivered(lab, c, dst);
    let (hit, miss) = if to_b { (b, c_rx) } else { (c_rx, b) };
    assert!(
        hit * 100 >= n * 90 && miss <= 10,
        "{dst}: B got {b}, C got {c_rx} of {n}; all should go to {}",
        if to_b { "B" } else { "C" }
    );
}

/// Routes through nexthop objects, followed with no route message from the kernel.
fn kernel_nexthop_objects(lab: &Lab, c: &Namespace, cfg: &std::path::Path) {
    lab.d.sysctl("net.ipv4.nexthop_compat_mode=0").unwrap();
    for cmd in [
        "nexthop add id 10 via 198.19.0.2 dev lrhd1",
        "nexthop add id 11 via 198.20.0.2 dev lrhd2",
        "nexthop add id 20 group 10/11",
        "route add 10.95.0.0/16 nhid 10 proto static",
        "route add 10.96.0.0/16 nhid 20 proto static",
    ] {
        lab.d.ip(&cmd.split(' ').collect::<Vec<_>>()).unwrap();
    }
    wait_route(cfg, "10.95.0.0/16", "no route through object 10", |r| {
        r.is_some_and(|r| r["via"] == "198.19.0.2" && r["source"] == "kernel")
    });
    wait_route(cfg, "10.96.0.0/16", "no route through group 20", |r| {
        r.is_some_and(|r| {
            r["kind"] == "multipath" && r["paths"].as_array().is_some_and(|p| p.len() == 2)
        })
    });
    all_to(lab, c, "10.95.0.1-10.95.0.100", true);
    let (b, c_rx, n) = delivered(lab, c, "10.96.0.1-10.96.0.100");
    eprintln!("group 20: B got {b}, C got {c_rx} of {n}");
    assert!(
        (b + c_rx) * 100 >= n * 90 && b * 100 >= n * 30 && c_rx * 100 >= n * 30,
        "group 20: B {b}, C {c_rx} of {n}"
    );

    // The kernel takes 11 out of group 20 and tells only of the group.
    lab.d.ip(&["nexthop", "del", "id", "11"]).unwrap();
    wait_route(cfg, "10.96.0.0/16", "group 20 still has object 11", |r| {
        r.is_some_and(|r| r["kind"] == "via" && r["via"] == "198.19.0.2")
    });
    all_to(lab, c, "10.96.0.1-10.96.0.100", true);
    // Object 10 now leads to C: both routes follow.
    lab.d.ip(&["nexthop", "replace", "id", "10", "via", "198.20.0.2", "dev", "lrhd2"]).unwrap();
    wait_route(cfg, "10.95.0.0/16", "did not follow object 10", |r| {
        r.is_some_and(|r| r["via"] == "198.20.0.2")
    });
    wait_route(cfg, "10.96.0.0/16", "did not follow object 10", |r| {
        r.is_some_and(|r| r["kind"] == "via" && r["via"] == "198.20.0.2")
    });
    all_to(lab, c, "10.95.0.1-10.95.0.100", false);
    all_to(lab, c, "10.96.0.1-10.96.0.100", false);
    // Deleting object 10 deletes both routes (and group 20) in the kernel, silently.
    lab.d.ip(&["nexthop", "del", "id", "10"]).unwrap();
    assert!(
        text(&lab.d.exec("ip", &["route", "show", "10.95.0.0/16"]).unwrap()).trim().is_empty(),
        "the kernel kept the route"
    );
    wait_route(cfg, "10.95.0.0/16", "still installed", |r| r.is_none());
    wait_route(cfg, "10.96.0.0/16", "still installed", |r| r.is_none());
}

/// Static routes reload while a flow to an unchanged static route (10.97/16) runs: add
/// 10.98/16 with two next hops, then change it to one, then remove it (SIGHUP to `pid`);
/// a config error changes nothing, and the flow loses nothing.
fn static_routes_reload_without_loss(lab: &Lab, cfg: &std::path::Path, pid: &str) {
    let (b0, no_route0) = (rx_packets(&lab.b, "lrb0"), drops(cfg, "no_route"));
    let mut flow = traffic(lab, "10.97.0.1-10.97.0.50", 15_000, 5_000);
    let flow = std::thread::spawn(move || flow.output().unwrap());
    std::thread::sleep(Duration::from_millis(500));
    set_routes(
        cfg,
        "[[route]]\nprefix = \"10.97.0.0/16\"\nvia = \"198.19.0.2\"\n[[route]]\nprefix = \"10.98.0.0/16\"\nvia = [\"198.19.0.2\", \"198.20.0.2\"]\n",
    );
    let out = linerate(&["reload"], cfg);
    assert!(out.status.success(), "reload: {}", text(&out));
    assert!(
        text(&out).contains("static routes: 1 added, 0 changed, 0 removed, 1 unchanged"),
        "{}",
        text(&out)
    );
    let r = route(cfg, "10.98.0.0/16").unwrap();
    assert_eq!(
        (r["kind"].as_str(), r["source"].as_str()),
        (Some("multipath"), Some("static")),
        "{r}"
    );
    set_routes(
        cfg,
        "[[route]]\nprefix = \"10.97.0.0/16\"\nvia = \"198.19.0.2\"\n[[route]]\nprefix = \"10.98.0.0/16\"\nvia = \"198.20.0.2\"\n",
    );
    let out = linerate(&["reload"], cfg);
    assert!(text(&out).contains("0 added, 1 changed, 0 removed, 1 unchanged"), "{}", text(&out));
    assert_eq!(route(cfg, "10.98.0.0/16").unwrap()["via"], "198.20.0.2");
    set_routes(cfg, "[[route]]\nprefix = \"10.97.0.0/16\"\nvia = \"198.19.0.2\"\n");
    assert!(Command::new("kill").args(["-HUP", pid]).status().unwrap().success());
    wait_route(cfg, "10.98.0.0/16", "not removed by SIGHUP", |r| r.is_none());
    // A config error changes nothing.
    set_routes(
        cfg,
        "[[route]]\nprefix = \"10.97.0.0/16\"\nvia = [\"198.19.0.2\", \"198.19.0.2\"]\n",
    );
    let out = linerate(&["reload"], cfg);
    assert!(
        !out.status.success() && text(&out).contains("via lists 198.19.0.2 twice"),
        "{}",
        text(&out)
    );
    set_routes(cfg, "[[route]]\nprefix = \"10.97.0.0/16\"\nvia = \"198.19.0.2\"\n");
    assert!(route(cfg, "10.97.0.0/16").is_some());
    let out = flow.join().unwrap();
    let steady = sent(&out);
    std::thread::sleep(Duration::from_millis(300));
    let got = rx_packets(&lab.b, "lrb0") - b0;
    eprintln!("during the reloads: B got {got} of {steady}");
    assert_eq!(drops(cfg, "no_route"), no_route0, "packets met no route during the reloads");
    assert!(
        got * 100 >= steady * 99 && got <= steady + 20,
        "the unchanged route lost packets during reloads: {got} of {steady}"
    );
}
