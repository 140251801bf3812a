//! pf's `route-to` and `reply-to` end to end, on a two-WAN router: A (198.18.0.0/24) behind
//! linerate (namespace D), WAN1 to B (198.19.0.2, the default route), WAN2 to W
//! (198.21.0.2), which owns 203.0.113.5. B does not forward, so what the routing table sends
//! by WAN1 to 203.0.113.5 is lost:
//! - A's pings to 203.0.113.5 are answered only through a LAN rule with `route-to (lrd2
//!   198.21.0.2)`, which linerate resolves itself (ARP for the gateway, not the target);
//! - W's pings from 203.0.113.5 to A come in by WAN2; A's replies are answered only through
//!   a WAN2 rule with `reply-to (lrd2 198.21.0.2)`;
//! - the router's own pings from its WAN2 address (sent by its kernel by WAN1, its default
//!   route) are answered only through pfSense's `pass out route-to (lrd2 198.21.0.2) from
//!   198.21.0.1 to !198.21.0.0/24` ("let out anything from firewall host itself");
//! - A's pings to B still take the routing table;
//! - with one worker and with two.
//!
//! Needs root. Namespaces `lr<pid>rt*` are removed on drop.

use std::process::Command;

use lab::topology::{End, Namespace, is_root, veth};

mod common;

use common::{build, start_until, write_config};

const RULES: &str = "\
pass all
pass in quick on lrd0 route-to (lrd2 198.21.0.2) inet proto icmp from 198.18.0.0/24 to 203.0.113.0/24
pass in quick on lrd2 reply-to (lrd2 198.21.0.2) inet proto icmp to 198.18.0.0/24
pass out route-to ( lrd2 198.21.0.2 ) from 198.21.0.1 to !198.21.0.0/24 keep state
";

const EXTRA: &str = r#"
[[interface]]
name = "lrd2"
addresses = ["198.21.0.1/24"]
backend = "af_packet"

[[route]]
prefix = "0.0.0.0/0"
via = "198.19.0.2"

[firewall]
rules = "rules.conf"
"#;

fn answered(ns: &Namespace, args: &[&str]) -> bool {
    let mut all = vec!["-c", "3", "-i", "0.2", "-W", "2"];
    all.extend_from_slice(args);
    ns.exec("ping", &all).is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(" 3 received"))
}

#[test]
fn route_to_and_reply_to_choose_the_wan() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("rt");
    let w = Namespace::create(&format!("lr{}rtw", std::process::id())).unwrap();
    veth(
        End { ns: &lab.d, name: "lrd2", mac: "02:00:00:00:0d:02" },
        End { ns: &w, name: "lrw0", mac: "02:00:00:00:0e:01" },
    )
    .unwrap();
    w.addr("lrw0", "198.21.0.2/24").unwrap();
    w.ip(&["addr", "add", "203.0.113.5/32", "dev", "lo"]).unwrap();
    w.ip(&["route", "add", "198.18.0.0/24", "via", "198.21.0.1"]).unwrap();
    let cfg = write_config(&lab, "af_packet", EXTRA);
    // One worker, then two: each flow's states on the worker its packets reach.
    for workers in ["1", "2"] {
        route_both_ways(&lab, &w, &cfg, workers);
    }
}

/// Starts linerate with `workers` workers and the options, pings both ways, reloads without.
fn route_both_ways(lab: &common::Lab, w: &Namespace, cfg: &std::path::Path, workers: &str) {
    std::fs::write(lab.dir.join("rules.conf"), RULES).unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["check", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(check.status.success(), "check: {}", common::text(&check));
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(cfg).args(["--cpu", "0", "--workers", workers]);
    let _dut = start_until(linerate, "forwarding with");
    // The router's kernel (its TAPs) routes its own traffic by WAN1.
    lab.d.ip(&["route", "replace", "default", "via", "198.19.0.2"]).unwrap();

    assert!(
        answered(&lab.a, &["198.19.0.2"]),
        "{workers} workers: A to B: the routing table's way"
    );
    assert!(
        answered(&lab.a, &["203.0.113.5"]),
        "{workers} workers: A to 203.0.113.5: route-to by WAN2"
    );
    assert!(
        answered(w, &["-I", "203.0.113.5", "198.18.0.2"]),
        "{workers} workers: W to A: the replies by WAN2 (reply-to)"
    );
    assert!(
        answered(&lab.d, &["-I", "198.21.0.1", "203.0.113.5"]),
        "{workers} workers: the router's own pings by WAN2 (route-to on pass out)"
    );
    // Without the options the same pings are lost by WAN1 (B does not forward).
    std::fs::write(lab.dir.join("rules.conf"), "pass all\n").unwrap();
    let reload = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["reload", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(reload.status.success(), "reload: {}", common::text(&reload));
    assert!(
        !answered(w, &["-I", "203.0.113.5", "-W", "1", "198.18.0.2"]),
        "{workers} workers: W to A without reply-to"
    );
    assert!(
        !answered(&lab.a, &["-W", "1", "203.0.113.5"]),
        "{workers} workers: A to 203.0.113.5 without route-to"
    );
    assert!(
        !answered(&lab.d, &["-I", "198.21.0.1", "-W", "1", "203.0.113.5"]),
        "{workers} workers: the router's own pings without route-to on pass out"
    );
}
