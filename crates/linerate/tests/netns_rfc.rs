//! The RFC edge cases a router must get right, each with a packet sent through linerate by
//! the kernel's own tools: the Subnet-Router anycast address answers (RFC 4291 2.6.1),
//! link-local sources and destinations are not forwarded (RFC 3927 2.7), and a packet from
//! outside with the router's own address as its source is a martian (as Linux drops it).
//! Needs root: the tests fail without it.

use std::path::Path;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{Guard, Lab, build, start_until, write_config};

fn start(lab: &Lab) -> (std::path::PathBuf, Guard) {
    let cfg = write_config(lab, "af_xdp", "");
    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let dut = start_until(cmd, "forwarding with");
    (cfg, dut)
}

fn drops(cfg: &Path, reason: &str) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "drops", "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[reason]
        .as_u64()
        .unwrap_or_else(|| panic!("no {reason}"))
}

#[test]
fn the_subnet_router_anycast_address_answers() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let lab = build("ra");
    let (_cfg, _dut) = start(&lab);
    // On A's own link (solicited, then answered), and B's link's through the router.
    for target in ["2001:db8:a::", "2001:db8:b::"] {
        let ping = lab.a.exec("ping", &["-6", "-c", "2", "-W", "2", target]);
        assert!(ping.is_ok(), "ping {target}: {ping:?}");
    }
}

#[test]
fn link_local_packets_are_not_forwarded() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let lab = build("rl");
    let (cfg, _dut) = start(&lab);
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok(), "the path works");
    // To a link-local address beyond the router, and from one.
    lab.b.addr("lrb0", "169.254.5.5/16").unwrap();
    lab.a.ip(&["route", "add", "169.254.5.0/24", "via", "198.18.0.1"]).unwrap();
    assert!(
        lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "1", "169.254.5.5"]).is_err(),
        "forwarded to 169.254.5.5"
    );
    assert!(
        lab.b
            .exec("ping", &["-c", "2", "-i", "0.2", "-W", "1", "-I", "169.254.5.5", "198.18.0.2"])
            .is_err(),
        "forwarded from 169.254.5.5"
    );
    assert!(drops(&cfg, "link_local") >= 4, "counted: {}", drops(&cfg, "link_local"));
}

#[test]
fn the_routers_own_address_as_a_source_is_a_martian() {
    assert!(is_root(), "needs root (namespaces, XDP): run the suite as root");
    let lab = build("ro");
    let (cfg, _dut) = start(&lab);
    assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", "198.19.0.2"]).is_ok(), "the path works");
    let before = drops(&cfg, "martian_source");
    // A claims the router's address on B's side and sends from it.
    lab.a.ip(&["addr", "add", "198.19.0.1/32", "dev", "lra0"]).unwrap();
    assert!(
        lab.a
            .exec("ping", &["-c", "2", "-i", "0.2", "-W", "1", "-I", "198.19.0.1", "198.19.0.2"])
            .is_err(),
        "a spoofed source forwarded"
    );
    assert!(drops(&cfg, "martian_source") >= before + 2, "counted");
}
