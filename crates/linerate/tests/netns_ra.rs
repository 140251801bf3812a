//! Router advertisements (RFC 4861 6.2) from `linerate run` configure a real Linux host: the
//! host namespace, with SLAAC on (`accept_ra`, `autoconf`), gets a global address in the
//! advertised prefix and a default route via linerate's link-local address, and reaches the
//! router's address with them.
//!
//! Needs root (skips without). Namespaces `lr<pid>ra{h,d}` are removed on drop.

use std::time::{Duration, Instant};

use lab::topology::{End, Namespace, is_root, veth};

mod common;

use common::start_until;

fn out(ns: &Namespace, args: &[&str]) -> String {
    String::from_utf8_lossy(&ns.ip(args).unwrap().stdout).into_owned()
}

#[test]
fn slaac_host_gets_an_address_and_a_default_route() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let pid = std::process::id();
    let host = Namespace::create(&format!("lr{pid}rah")).unwrap();
    let dut = Namespace::create(&format!("lr{pid}rad")).unwrap();
    let dir = std::env::temp_dir().join(format!("lr-netns-{pid}-ra"));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Dir(dir.clone());
    // The host takes advertisements before its link comes up (a host, not a router).
    host.ip(&["link", "set", "lo", "up"]).unwrap();
    veth(
        End { ns: &dut, name: "lrrad0", mac: "02:00:00:00:7d:01" },
        End { ns: &host, name: "lrrah0", mac: "02:00:00:00:7a:01" },
    )
    .unwrap();
    for s in ["forwarding=0", "accept_ra=2", "autoconf=1", "accept_dad=0"] {
        host.sysctl(&format!("net.ipv6.conf.lrrah0.{s}")).unwrap();
    }
    let cfg = dir.join("router.toml");
    let text = format!(
        "[router]\ncontrol_socket = \"{}\"\n\n[[interface]]\nname = \"lrrad0\"\naddresses = [\"2001:db8:7::1/64\", \"198.18.7.1/24\"]\nbackend = \"af_packet\"\nra = {{ min_interval = 3, max_interval = 4, mtu = 1400 }}\n",
        dir.join("control.sock").display()
    );
    std::fs::write(&cfg, text).unwrap();
    let mut run = dut.command(env!("CARGO_BIN_EXE_linerate"));
    run.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut linerate = start_until(run, "forwarding with");

    let router_ll = "fe80::ff:fe00:7d01";
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut addrs, mut routes);
    loop {
        addrs = out(&host, &["-6", "addr", "show", "dev", "lrrah0", "scope", "global"]);
        routes = out(&host, &["-6", "route", "show", "default"]);
        if (addrs.contains("2001:db8:7::ff:fe00:7a01/64") && routes.contains(router_ll))
            || Instant::now() > deadline
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // SLAAC: the prefix and the host's EUI-64 identifier (02:00:00:00:7a:01).
    assert!(addrs.contains("2001:db8:7::ff:fe00:7a01/64"), "no SLAAC address:\n{addrs}");
    assert!(
        routes.contains(&format!("default via {router_ll} dev lrrah0 proto ra")),
        "no default route from the RA:\n{routes}"
    );
    // The MTU option reached the host's interface settings.
    let mtu = host.exec("sysctl", &["-n", "net.ipv6.conf.lrrah0.mtu"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&mtu.stdout).trim(), "1400");
    let ping = host
        .command("ping")
        .args(["-6", "-c", "2", "-i", "0.2", "-W", "2", "2001:db8:7::1"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains(" 0% packet loss"),
        "ping of the router with the SLAAC address: {ping:?}"
    );

    let mut child = linerate.terminate().unwrap();
    let mut report = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut report).unwrap();
    assert!(child.wait().unwrap().success());
    let sent: u64 = report
        .split("router adverts ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        sent >= 2,
        "the initial and at least one more advertisement (and the final one): {report}"
    );
    // The final advertisement (lifetime 0) withdraws the default route.
    std::thread::sleep(Duration::from_millis(300));
    let after = out(&host, &["-6", "route", "show", "default"]);
    assert!(
        !after.contains(router_ll),
        "the default route stays after linerate's final advertisement:\n{after}"
    );
}

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
