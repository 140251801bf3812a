//! `examples/rules.conf`, unchanged, in front of a LAN: an inside host (on `lr-b`, the
//! example's `$int_if`, in its `$lan` and `$lan6`) pings an outside host (on `lr-a`,
//! `$ext_if`) over IPv4 and IPv6 through `linerate run`, and gets its replies (the states of
//! `pass in on $int_if` and `pass out on $ext_if`); the outside host's pings to the inside
//! host are blocked (`block in quick on $ext_if from any to ! $web_server`). IPv6 needs
//! neighbour discovery with the router on both sides.
//!
//! Needs root (skips without). Namespaces `lr<pid>x{i,d,o}` are removed on drop; the
//! router's interfaces carry the example's names, inside its own namespace.

use std::io::Read;
use std::path::Path;

use lab::topology::{End, Namespace, is_root, veth};

mod common;

use common::start_until;

struct Net {
    inside: Namespace,
    d: Namespace,
    outside: Namespace,
    dir: std::path::PathBuf,
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn build() -> Net {
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lr{pid}x{host}")).unwrap();
    let (inside, d, outside) = (ns("i"), ns("d"), ns("o"));
    veth(
        End { ns: &outside, name: "lro0", mac: "02:00:00:00:0e:01" },
        End { ns: &d, name: "lr-a", mac: "02:00:00:00:0d:0a" },
    )
    .unwrap();
    veth(
        End { ns: &d, name: "lr-b", mac: "02:00:00:00:0d:0b" },
        End { ns: &inside, name: "lri0", mac: "02:00:00:00:01:01" },
    )
    .unwrap();
    for (ns, dev, v4, v6, gw4, gw6) in [
        (&inside, "lri0", "10.1.0.10/16", "2001:db8:1::10/64", "10.1.0.1", "2001:db8:1::1"),
        (
            &outside,
            "lro0",
            "203.0.113.10/24",
            "2001:db8:ff::10/64",
            "203.0.113.1",
            "2001:db8:ff::1",
        ),
    ] {
        ns.addr(dev, v4).unwrap();
        ns.addr(dev, v6).unwrap();
        ns.ip(&["route", "add", "default", "via", gw4]).unwrap();
        ns.ip(&["-6", "route", "add", "default", "via", gw6]).unwrap();
    }
    d.sysctl("net.ipv4.ip_forward=0").unwrap();
    let dir = std::env::temp_dir().join(format!("lr-netns-{pid}-example"));
    std::fs::create_dir_all(&dir).unwrap();
    Net { inside, d, outside, dir }
}

fn ping(ns: &Namespace, dst: &str) -> bool {
    ns.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", dst]).is_ok()
}

#[test]
fn example_rules_let_the_lan_ping_out_over_both_families() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let net = build();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/rules.conf")
        .canonicalize()
        .unwrap();
    let cfg = net.dir.join("router.toml");
    let text = format!(
        "[router]\ncontrol_socket = \"{}\"\n\n\
         [[interface]]\nname = \"lr-a\"\naddresses = [\"203.0.113.1/24\", \"2001:db8:ff::1/64\"]\nbackend = \"af_packet\"\n\n\
         [[interface]]\nname = \"lr-b\"\naddresses = [\"10.1.0.1/16\", \"2001:db8:1::1/64\"]\nbackend = \"af_packet\"\n\n\
         [firewall]\nrules = \"{}\"\n",
        net.dir.join("control.sock").display(),
        example.display()
    );
    std::fs::write(&cfg, text).unwrap();
    let mut linerate = net.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");

    assert!(ping(&net.inside, "203.0.113.10"), "IPv4: the LAN pings out");
    assert!(ping(&net.inside, "2001:db8:ff::10"), "IPv6: the LAN pings out");
    assert!(!ping(&net.outside, "10.1.0.10"), "IPv4: nothing reaches the LAN from outside");
    assert!(!ping(&net.outside, "2001:db8:1::10"), "IPv6: nothing reaches the LAN from outside");
    assert!(ping(&net.inside, "203.0.113.10"), "IPv4 still");

    let mut child = dut.terminate().unwrap();
    let mut report = String::new();
    child.stdout.take().unwrap().read_to_string(&mut report).unwrap();
    assert!(child.wait().unwrap().success(), "{report}");
    assert!(report.contains("drop filter_blocked"), "the outside's pings were blocked: {report}");
}
