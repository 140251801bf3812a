//! linerate under FRR: zebra and bgpd in linerate's namespace, eBGP on the host-stack TAPs,
//! routes through the kernel's table (`[router.kernel_routes]`, protocol `bgp`) into
//! linerate's FIB.
//!
//! Host A -> D (linerate, FRR's zebra and bgpd run by hand in its namespace) -> B and C, each
//! with a BIRD announcing the same 3,000 prefixes, C with a longer AS path. bgpd picks B's,
//! zebra installs them in the kernel as it does by default (through nexthop objects,
//! `RTA_NH_ID`), linerate mirrors them.
//!
//! - all 3,000 reach linerate's FIB via B, and the kernel's table has them as `proto bgp`,
//!   through a nexthop object; traffic to them arrives at B;
//! - B withdraws them: within a second the traffic arrives at C instead, and all 3,000 are
//!   in the FIB via C.
//!
//! Needs root, FRR (Debian `frr`) and `bird` (Debian `bird2`); skips without. Namespaces
//! `lrfr<pid>{a,d,b,c}`; the daemons' configs, sockets, pid files and logs in a temporary
//! folder; all removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::topology::{Namespace, is_root};

mod common;

use common::Guard;
use common::bgp::{Lab, PREFIXES, build, kernel_routes_via, text, write_router_config};

const FRR: &str = "/usr/lib/frr";

const ZEBRA_CONF: &str = "hostname lrfr-zebra
";

const BGPD_CONF: &str = "hostname lrfr-bgpd
router bgp 65001
 bgp router-id 198.18.0.1
 no bgp ebgp-requires-policy
 neighbor 198.19.0.2 remote-as 65002
 neighbor 198.19.0.2 timers connect 1
 neighbor 198.20.0.2 remote-as 65003
 neighbor 198.20.0.2 timers connect 1
 address-family ipv4 unicast
  neighbor 198.19.0.2 activate
  neighbor 198.20.0.2 activate
 exit-address-family
";

/// An FRR daemon, stopped on drop; then the folder it made for its crash log
/// (`/var/tmp/frr/<daemon>.<pid>`, made as root before it became `frr`, so it cannot remove
/// it itself) is removed.
struct Daemon {
    child: Guard,
    crash_dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.0.take() {
            lab::process::terminate(&mut c);
        }
        let _ = std::fs::remove_dir(&self.crash_dir);
    }
}

/// An FRR daemon in `ns`, in the foreground, its config, pid file, log, vty socket and zebra's
/// API socket in `dir`, no vty on TCP. It runs as FRR's user (`frr`, in group `frrvty`), which
/// must own `dir`.
fn frr_daemon(ns: &Namespace, dir: &Path, name: &str, conf: &str) -> Daemon {
    let cfg = dir.join(format!("{name}.conf"));
    std::fs::write(&cfg, conf).unwrap();
    let log = std::fs::File::create(dir.join(format!("{name}.out"))).unwrap();
    let child = ns
        .command(&format!("{FRR}/{name}"))
        .arg("-f")
        .arg(&cfg)
        .arg("-i")
        .arg(dir.join(format!("{name}.pid")))
        .arg("-z")
        .arg(dir.join("zserv.api"))
        .arg("--vty_socket")
        .arg(dir)
        .args(["-P", "0", "--log"])
        .arg(format!("file:{}", dir.join(format!("{name}.log")).display()))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let crash_dir = PathBuf::from(format!("/var/tmp/frr/{name}.{}", child.id()));
    Daemon { child: Guard(Some(child)), crash_dir }
}

fn vtysh(ns: &Namespace, dir: &Path, cmd: &str) -> String {
    text(&ns.command("vtysh").arg("--vty_socket").arg(dir).args(["-c", cmd]).output().unwrap())
}

/// How many routes of D's kernel table came from bgpd (through zebra) via `gateway`.
fn kernel_bgp_routes_via(ns: &Namespace, gateway: &str) -> usize {
    let out = text(&ns.ip(&["route", "show", "proto", "bgp"]).unwrap());
    out.lines().filter(|l| l.contains(&format!("via {gateway} "))).count()
}

#[test]
fn bgp_routes_from_frr_reach_the_fib() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    if !Path::new(FRR).join("zebra").exists()
        || Command::new("bird").arg("--version").output().is_err()
    {
        lab::topology::skip_test("needs FRR (Debian frr) and bird (Debian bird2)");
        return;
    }
    let lab = build("fr");
    let cfg = write_router_config(&lab, "bgp");
    let mut run = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    run.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = common::start_until(run, "forwarding with");
    let frr = lab.dir.join("frr");
    std::fs::create_dir_all(&frr).unwrap();
    let chown = Command::new("chown").arg("frr:frr").arg(&frr).output().unwrap();
    assert!(chown.status.success(), "chown frr:frr: {}", text(&chown));
    // zebra first: bgpd connects to its API socket.
    let _zebra = frr_daemon(&lab.d, &frr, "zebra", ZEBRA_CONF);
    common::bgp::wait("zebra's API socket", Duration::from_secs(10), || {
        frr.join("zserv.api").exists()
    });
    let _bgpd = frr_daemon(&lab.d, &frr, "bgpd", BGPD_CONF);
    let (_b_bird, _c_bird, b_sock) = common::bgp::neighbours(&lab);

    wait_for_routes_via_b(&lab, &frr, &cfg);
    let _traffic = common::bgp::traffic_to_b(&lab);
    common::bgp::withdrawal_moves_traffic_to_c(&lab, &cfg, &b_sock);
    assert_eq!(
        kernel_bgp_routes_via(&lab.d, "198.20.0.2"),
        PREFIXES as usize,
        "zebra's routes via C in the kernel"
    );

    let out = dut.terminate().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "linerate run: {}", text(&out));
}

/// Waits up to 60 s for every prefix B announces to be in the kernel's table as bgpd's and
/// in linerate's FIB.
fn wait_for_routes_via_b(lab: &Lab, frr: &Path, cfg: &Path) {
    let n = PREFIXES as usize;
    let diag = || {
        let logs: String = [
            frr.join("zebra.log"),
            frr.join("bgpd.log"),
            lab.dir.join("b.log"),
            lab.dir.join("c.log"),
        ]
        .iter()
        .map(|f| format!("--- {}\n{}", f.display(), std::fs::read_to_string(f).unwrap_or_default()))
        .collect();
        format!(
            "{}\nkernel: {} bgp routes via B in D\n{logs}",
            vtysh(&lab.d, frr, "show bgp summary"),
            kernel_bgp_routes_via(&lab.d, "198.19.0.2")
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
    eprintln!("BGP: {n} routes via B in the FIB {:?} after FRR started", start.elapsed());
    assert_eq!(
        kernel_bgp_routes_via(&lab.d, "198.19.0.2"),
        n,
        "zebra's routes in the kernel:\n{}",
        diag()
    );
    let kernel = text(&lab.d.ip(&["route", "show", "proto", "bgp"]).unwrap());
    assert!(
        kernel.lines().all(|l| l.contains(" nhid ")),
        "zebra installed routes without nexthop objects:\n{kernel}"
    );
    // C's session may come up after B's routes are in: wait for it, so that its routes are
    // there to take over.
    let limit = Duration::from_secs(30);
    let start = Instant::now();
    while !vtysh(&lab.d, frr, "show bgp summary").lines().any(|l| {
        l.starts_with("198.20.0.2")
            && l.split_whitespace().nth(9).is_some_and(|p| p.parse::<u32>() == Ok(PREFIXES))
    }) {
        assert!(
            start.elapsed() < limit,
            "C's session not established with {PREFIXES} prefixes after {limit:?}:\n{}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
