//! linerate follows its ports' links (issue 46): a port set down and up again shows in `show
//! interfaces`, its route is withdrawn and its neighbours flushed meanwhile, and traffic
//! resumes; an AF_XDP port whose interface is deleted and created again is rebuilt in place
//! (two workers, either port, three times), traffic resuming within 2 s of the link coming
//! up, and so is an AF_PACKET port; with `rebuild_ports = false` a deleted port stops the
//! router with an error naming it instead of forwarding nothing in silence. Needs root.

use std::process::Command;
use std::time::{Duration, Instant};

use lab::topology::is_root;
use serde_json::Value;

mod common;

use common::{D1_MAC, build, start_until, write_config};

fn link_of(cfg: &std::path::Path, name: &str) -> (String, u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "interfaces", "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let i = v.as_array().unwrap().iter().find(|i| i["name"] == name).cloned().unwrap();
    (i["link"].as_str().unwrap_or("?").to_owned(), i["link_changes"].as_u64().unwrap_or(0))
}

/// Whether `cfg`'s router has a route for `prefix` (as `show routes` prints it).
fn has_route(cfg: &std::path::Path, prefix: &str) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "routes", "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().any(|r| r["prefix"] == prefix)
}

/// Whether `cfg`'s router has a neighbour entry for `addr`.
fn has_neighbour(cfg: &std::path::Path, addr: &str) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "neighbours", "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().any(|n| n["address"] == addr)
}

/// linerate run on `cfg` in D with its workers from `cpu`, its stderr also into a file (the
/// ready line is read off the pipe, later lines from the file); `exec`, so that the guard
/// stops linerate itself.
fn run_logged(
    lab: &common::Lab,
    cfg: &std::path::Path,
    cpu: &str,
) -> (common::Guard, std::path::PathBuf) {
    let log = lab.dir.join("run.err");
    let mut cmd = lab.d.command("bash");
    cmd.args(["-c", "exec \"$0\" run -c \"$1\" --cpu \"$3\" 2> >(tee \"$2\" >&2)"])
        .arg(env!("CARGO_BIN_EXE_linerate"))
        .arg(cfg)
        .arg(&log)
        .arg(cpu);
    (start_until(cmd, "forwarding with"), log)
}

fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(3), "{what}: not within 3 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_port_set_down_and_up_is_followed_and_a_recreated_af_packet_port_rebuilt() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("lk");
    let cfg = write_config(&lab, "af_packet", "");
    let (mut dut, _log) = run_logged(&lab, &cfg, "1");
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
    assert_eq!(link_of(&cfg, "lrd1"), ("up".into(), 0));

    assert!(has_route(&cfg, "198.19.0.0/24"));
    lab.d.ip(&["link", "set", "lrd1", "down"]).unwrap();
    eventually("lrd1 down", || link_of(&cfg, "lrd1").0 == "down");
    eventually("the down port's route withdrawn", || !has_route(&cfg, "198.19.0.0/24"));
    // B, resolved by the ping, is forgotten with the link: resolved again when it is back.
    eventually("B's neighbour entry flushed", || !has_neighbour(&cfg, "198.19.0.2"));
    // Its host-stack TAP (lrhd1) has no carrier meanwhile.
    let carrier = || {
        let out = lab.d.exec("ip", &["link", "show", "lrhd1"]).unwrap();
        !String::from_utf8_lossy(&out.stdout).contains("NO-CARRIER")
    };
    eventually("the TAP without carrier", || !carrier());
    lab.d.ip(&["link", "set", "lrd1", "up"]).unwrap();
    eventually("lrd1 up", || link_of(&cfg, "lrd1") == ("up".into(), 2));
    eventually("the route back with the link", || has_route(&cfg, "198.19.0.0/24"));
    eventually("the TAP's carrier back", carrier);
    eventually("ping across after the link came back", || {
        lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]).is_ok()
    });
    assert!(has_neighbour(&cfg, "198.19.0.2"), "B resolved again");

    // The veth pair deleted and created again with the same names and MACs: the AF_PACKET
    // port is rebuilt on it (a new fanout group, the kernel bypass again).
    lab.d.ip(&["link", "del", "lrd1"]).unwrap();
    common::b_side(&lab.d, &lab.b, D1_MAC, 1);
    eventually("lrd1 rebuilt", || interface(&cfg, "lrd1")["rebuilds"] == 1);
    let start = Instant::now();
    while !ping_b(&lab) {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "no ping across the rebuilt AF_PACKET port"
        );
    }
    assert!(dut.0.as_mut().unwrap().try_wait().unwrap().is_none(), "linerate stopped");
}

/// With `router.rebuild_ports = false`, a port whose interface is deleted stops the router
/// with an error naming the port (its sockets and programs are bound to the interface that
/// is gone), for the service manager to restart it, instead of forwarding nothing in silence.
#[test]
fn a_deleted_port_stops_the_router_when_ports_are_not_rebuilt() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("ls");
    let cfg = write_config(&lab, "af_packet", "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("[router]\n", "[router]\nrebuild_ports = false\n")).unwrap();
    let (mut dut, log) = run_logged(&lab, &cfg, "1");
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok());
    lab.d.ip(&["link", "del", "lrd1"]).unwrap();
    let mut child = dut.0.take().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "linerate kept running on a deleted port"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(100));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{status:?}");
    assert!(err.contains("interface lrd1") && err.contains("deleted"), "{err}");
    assert!(err.contains("rebuilds no port in place"), "{err}");
}

/// `show interfaces --json` of `cfg`'s router: port `name`'s entry.
fn interface(cfg: &std::path::Path, name: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "interfaces", "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().find(|i| i["name"] == name).cloned().unwrap()
}

fn ping_b(lab: &common::Lab) -> bool {
    lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]).is_ok()
}

#[test]
fn a_port_deleted_and_created_again_is_rebuilt_in_place() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let _turn = common::turn();
    let lab = common::build_queues("rb", 2);
    // Two workers (a socket each on both ports, sharing each worker's pool) and a firewall
    // (stateless: AF_XDP on veth cannot keep a flow's directions on one worker).
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "pass all no state\n").unwrap();
    let cfg =
        write_config(&lab, "af_xdp", &format!("[firewall]\nrules = \"{}\"\n", rules.display()));
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("[router]\n", "[router]\nworkers = 2\n")).unwrap();
    let (mut dut, log) = run_logged(&lab, &cfg, "0");
    eventually("ping across", || ping_b(&lab));
    let socket = lab.dir.join("control.sock");
    // B's replies, received on lrd1 (the requests go out by the slow path while B is being
    // resolved).
    let received = || {
        let s = common::stats(&socket);
        let i = s["interfaces"].as_array().unwrap().iter().find(|i| i["name"] == "lrd1").cloned();
        i.and_then(|i| i["rx_packets"].as_u64()).unwrap_or(0)
    };
    // lrd1 twice, then lrd0: the interface whose socket registered each worker's pool.
    for (round, port) in [(1u64, "lrd1"), (2, "lrd1"), (1, "lrd0")] {
        lab.a.exec("ping", &["-c", "3", "-i", "0.2", "198.19.0.2"]).unwrap();
        let before = received();
        lab.d.ip(&["link", "del", port]).unwrap();
        eventually("down once deleted", || link_of(&cfg, port).0 == "down");
        let net = if port == "lrd1" { "198.19.0.0/24" } else { "198.18.0.0/24" };
        eventually("its route withdrawn", || !has_route(&cfg, net));
        // Created again with another MAC, as a container runtime would: the router gives it
        // the port's MAC back, so the neighbours' caches of it stay right.
        if port == "lrd1" {
            common::b_side(&lab.d, &lab.b, "02:00:00:00:0d:99", 2);
        } else {
            common::a_side(&lab.a, &lab.d, "02:00:00:00:0d:98", 2);
        }
        eventually("rebuilt", || interface(&cfg, port)["rebuilds"] == round);
        eventually("up", || link_of(&cfg, port).0 == "up");
        let start = Instant::now();
        while !ping_b(&lab) {
            let err = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                start.elapsed() < Duration::from_secs(3),
                "{port} round {round}: no ping across the rebuilt port within 3 s; linerate said:\n{err}"
            );
        }
        eprintln!("{port} round {round}: ping across {:?} after the re-creation", start.elapsed());
        assert!(start.elapsed() < Duration::from_secs(2), "{port}: {:?}", start.elapsed());
        let mac = lab.d.exec("cat", &[&format!("/sys/class/net/{port}/address")]).unwrap();
        let want = if port == "lrd1" { common::D1_MAC } else { common::D0_MAC };
        assert_eq!(String::from_utf8_lossy(&mac.stdout).trim(), want);
        let after = received();
        assert!(
            after > before,
            "{port} round {round}: lrd1's counters went back: {before} -> {after}"
        );
        assert!(dut.0.as_mut().unwrap().try_wait().unwrap().is_none(), "linerate stopped");
    }
    // Nothing of the pools lost.
    let mut child = dut.terminate().unwrap();
    assert!(child.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(100));
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(err.matches("rebuilt as ifindex").count(), 3, "{err}");
    assert_eq!(err.matches(", 0 lost").count(), 3, "{err}");
}
