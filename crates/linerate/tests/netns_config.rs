//! The config's large-table and reload paths, end to end: host A -> linerate (in namespace D)
//! -> host B.
//!
//! - `router.route_file`: a table of 20,000 routes from a route file; a ping crosses linerate
//!   through one of them (to an address B holds on its loopback), and the host-stack TAP
//!   gets the routes. `show`, `top`'s socket
//!   lookup and `reload -c` read only the config's `control_socket`: they work with the route
//!   file made unreadable, and `show --socket` without a config.
//! - `linerate reload`: a static neighbour with a wrong MAC blackholes B; fixing it in the
//!   config and reloading makes the ping pass; an interface address change is refused by name
//!   (and changes nothing); removing the neighbour leaves B to ARP.
//!
//! Needs root (skips without). Namespaces `lr<pid><tag><host>` are removed on drop.

use std::path::Path;
use std::process::{Command, Output};

use lab::topology::is_root;

mod common;

use common::{B_MAC, Lab, build, start_until, text, write_config};

fn linerate(args: &[&str], cfg: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(args);
    if let Some(cfg) = cfg {
        cmd.arg("-c").arg(cfg);
    }
    cmd.output().unwrap()
}

/// Whether `count` pings from A to `dst` are all answered.
fn ping(lab: &Lab, dst: &str, count: &str) -> bool {
    let out =
        lab.a.command("ping").args(["-c", count, "-i", "0.2", "-W", "1", dst]).output().unwrap();
    text(&out).contains(" 0% packet loss")
}

/// Puts `line` into the config's `[router]` table.
fn router_key(cfg: &Path, line: &str) {
    let t = std::fs::read_to_string(cfg).unwrap();
    std::fs::write(cfg, t.replacen("[router]\n", &format!("[router]\n{line}\n"), 1)).unwrap();
}

#[test]
fn route_file_forwards_and_thin_commands_skip_it() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("rf");
    lab.b.ip(&["addr", "add", "100.64.0.1/32", "dev", "lo"]).unwrap();
    let cfg = write_config(&lab, "af_packet", "");
    router_key(&cfg, "route_file = \"routes.txt\"");
    let mut table = String::from("# generated\n");
    for i in 0..19_999u32 {
        let a = 0x0100_0000 + i * 512;
        table.push_str(&format!(
            "{}.{}.{}.0/24 198.19.0.2\n",
            a >> 24,
            (a >> 16) & 255,
            (a >> 8) & 255
        ));
    }
    table.push_str("100.64.0.0/24   198.19.0.2   dev lrd1\n");
    std::fs::write(lab.dir.join("routes.txt"), &table).unwrap();
    let check = linerate(&["check"], Some(&cfg));
    assert!(check.status.success() && text(&check).contains("20000 routes"), "{}", text(&check));

    let mut run = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    run.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let _dut = start_until(run, "forwarding with");
    assert!(ping(&lab, "100.64.0.1", "3"), "ping through a route from the route file");
    // The host stack's TAPs get the table in the background.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let tap_route = loop {
        let out = text(&lab.d.ip(&["route", "show", "100.64.0.0/24"]).unwrap());
        if !out.trim().is_empty() || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(tap_route.contains("via 198.19.0.2 dev lrhd1"), "{tap_route}");

    // The thin commands never read the route file.
    std::fs::write(lab.dir.join("routes.txt"), "this is not a route\n").unwrap();
    let show = linerate(&["show", "routes", "--json"], Some(&cfg));
    assert!(show.status.success(), "{}", text(&show));
    let routes: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let via_b = routes.as_array().unwrap().iter().filter(|r| r["via"] == "198.19.0.2").count();
    assert_eq!(via_b, 20_000, "every file route is in the FIB");
    let sock = lab.dir.join("control.sock");
    let show = linerate(&["show", "interfaces", "--socket", sock.to_str().unwrap()], None);
    assert!(show.status.success() && text(&show).contains("lrd1"), "{}", text(&show));
    // reload -c does read the whole config (to apply it): a broken route file is refused
    // with its position, and the running table stays.
    let reload = linerate(&["reload"], Some(&cfg));
    assert!(
        !reload.status.success() && text(&reload).contains("routes.txt:1:1:"),
        "{}",
        text(&reload)
    );
    assert!(ping(&lab, "100.64.0.1", "2"), "ping after the refused reload");
}

#[test]
fn reload_applies_static_neighbours_and_refuses_address_changes() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("rl");
    let neighbour =
        |mac: &str| format!("[[neighbour]]\naddress = \"198.19.0.2\"\nmac = \"{mac}\"\n");
    let cfg = write_config(&lab, "af_packet", &neighbour("02:00:00:00:0b:99"));
    let mut run = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    run.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(run, "forwarding with");
    assert!(!ping(&lab, "198.19.0.2", "2"), "a static neighbour with B's wrong MAC blackholes B");

    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, base.replace("02:00:00:00:0b:99", B_MAC)).unwrap();
    let out = linerate(&["reload"], Some(&cfg));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok: no firewall; static neighbours: 1 set, 0 removed"
    );
    assert!(ping(&lab, "198.19.0.2", "3"), "the reloaded neighbour forwards");
    let show = linerate(&["show", "neighbours", "--json"], Some(&cfg));
    let list: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let b =
        list.as_array().unwrap().iter().find(|n| n["address"] == "198.19.0.2").cloned().unwrap();
    assert_eq!(
        (b["state"].as_str(), b["mac"].as_str()),
        (Some("permanent"), Some(B_MAC)),
        "{list}"
    );

    // An address change cannot be applied while running: refused by name, nothing changes.
    let fixed = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        fixed
            .replace("\"198.18.0.1/24\"", "\"198.18.0.1/24\", \"198.18.9.1/24\"")
            .replace(B_MAC, "02:00:00:00:0b:77"),
    )
    .unwrap();
    let out = linerate(&["reload"], Some(&cfg));
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("interface lrd0 address changed (+198.18.9.1/24): restart needed"),
        "{}",
        text(&out)
    );
    assert!(ping(&lab, "198.19.0.2", "2"), "the refused reload changed no neighbour");

    // Without the entry, B is resolved by ARP.
    std::fs::write(&cfg, fixed.replace(&neighbour(B_MAC), "")).unwrap();
    let out = linerate(&["reload"], Some(&cfg));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok: no firewall; static neighbours: 0 set, 1 removed",
        "{}",
        text(&out)
    );
    assert!(ping(&lab, "198.19.0.2", "3"), "B resolved by ARP after the static entry went");
    let show = linerate(&["show", "neighbours", "--json"], Some(&cfg));
    let list: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let b =
        list.as_array().unwrap().iter().find(|n| n["address"] == "198.19.0.2").cloned().unwrap();
    assert_ne!(b["state"].as_str(), Some("permanent"), "{list}");
    let mut child = dut.terminate().unwrap();
    assert!(child.wait().unwrap().success());
}
