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

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lab::topology::{End, Namespace, is_root, veth};

mod common;

use common::{D0_MAC, Guard};

const PREFIXES: u32 = 3000;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The i-th announced prefix: 10.200.0.0/24, 10.200.1.0/24, ...
fn prefix(i: u32) -> String {
    let a = 0x0ac8_0000 + (i << 8);
    format!("{}.{}.{}.0/24", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff)
}

struct Lab {
    a: Namespace,
    d: Namespace,
    b: Namespace,
    c: Namespace,
    dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn build() -> Lab {
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lrbgp{pid}{host}")).unwrap();
    let (a, d, b, c) = (ns("a"), ns("d"), ns("b"), ns("c"));
    veth(End { ns: &a, name: "lra0", mac: common::A_MAC }, End { ns: &d, name: "lrd0", mac: D0_MAC }).unwrap();
    veth(End { ns: &d, name: "lrd1", mac: common::D1_MAC }, End { ns: &b, name: "lrb0", mac: common::B_MAC }).unwrap();
    veth(End { ns: &d, name: "lrd2", mac: "02:00:00:00:0d:02" }, End { ns: &c, name: "lrc0", mac: "02:00:00:00:0c:01" }).unwrap();
    a.addr("lra0", "198.18.0.2/24").unwrap();
    a.ip(&["route", "add", "default", "via", "198.18.0.1"]).unwrap();
    b.addr("lrb0", "198.19.0.2/24").unwrap();
    c.addr("lrc0", "198.20.0.2/24").unwrap();
    d.sysctl("net.ipv4.ip_forward=0").unwrap();
    let dir = std::env::temp_dir().join(format!("lr-bgp-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    Lab { a, d, b, c, dir }
}

/// A BIRD in `ns` with config `conf`, in the foreground (stopped on drop).
fn bird(ns: &Namespace, dir: &Path, name: &str, conf: &str) -> (Guard, PathBuf) {
    let cfg = dir.join(format!("{name}.conf"));
    let sock = dir.join(format!("{name}.ctl"));
    std::fs::write(&cfg, conf).unwrap();
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let child = ns
        .command("bird")
        .args(["-f", "-c"])
        .arg(&cfg)
        .arg("-s")
        .arg(&sock)
        .arg("-P")
        .arg(dir.join(format!("{name}.pid")))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    (Guard(Some(child)), sock)
}

fn birdc(ns: &Namespace, sock: &Path, args: &[&str]) -> String {
    text(&ns.command("birdc").arg("-s").arg(sock).args(args).output().unwrap())
}

/// A neighbour's BIRD: the prefixes as static routes out of its interface, exported by
/// eBGP to the router (`prepend`: extra copies of its AS in the path, to be less preferred).
fn neighbour_conf(me: &str, router: &str, asn: u32, ifname: &str, prepend: u32) -> String {
    let routes: String = (0..PREFIXES).map(|i| format!("  route {} via \"{ifname}\";\n", prefix(i))).collect();
    let path: String = (0..prepend).map(|_| format!("bgp_path.prepend({asn}); ")).collect();
    format!(
        "router id {me};\nprotocol device {{ scan time 1; }}\nprotocol static announced {{\n  ipv4;\n{routes}}}\n\
         protocol bgp uplink {{\n  local {me} as {asn};\n  neighbor {router} as 65001;\n  connect retry time 1;\n\
         ipv4 {{ import none; export filter {{ {path}accept; }}; }};\n}}\n"
    )
}

const ROUTER_CONF: &str = "router id 198.18.0.1;
protocol device { scan time 1; }
protocol kernel { ipv4 { import none; export all; }; }
protocol bgp b { local 198.19.0.1 as 65001; neighbor 198.19.0.2 as 65002; connect retry time 1; ipv4 { import all; export none; }; }
protocol bgp c { local 198.20.0.1 as 65001; neighbor 198.20.0.2 as 65003; connect retry time 1; ipv4 { import all; export none; }; }
";

fn kernel_routes_via(cfg: &Path, gateway: &str) -> usize {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate")).args(["show", "routes", "--json", "-c"]).arg(cfg).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array().into_iter().flatten().filter(|r| r["source"] == "kernel" && r["via"] == gateway).count()
}

fn rx_packets(ns: &Namespace, ifname: &str) -> u64 {
    let out = ns.exec("cat", &[&format!("/sys/class/net/{ifname}/statistics/rx_packets")]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The "since" column of a BGP protocol in `birdc show protocols`, if it is established.
fn established_since(ns: &Namespace, sock: &Path, proto: &str) -> Option<String> {
    let out = birdc(ns, sock, &["show", "protocols", proto]);
    let line = out.lines().find(|l| l.starts_with(proto) && l.contains("Established"))?;
    Some(line.split_whitespace().nth(4)?.to_owned())
}

fn wait(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} (waited {limit:?})");
}

#[test]
fn bgp_routes_from_bird_reach_the_fib() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    if Command::new("bird").arg("--version").output().is_err() {
        eprintln!("skipped: needs bird (Debian bird2)");
        return;
    }
    let lab = build();
    let cfg = write_router_config(&lab);
    let mut run = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    run.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = common::start_until(run, "forwarding with");
    // BIRD on the router's TAPs, and on each neighbour.
    let (_router_bird, router_sock) = bird(&lab.d, &lab.dir, "router", ROUTER_CONF);
    let (_b_bird, b_sock) = bird(&lab.b, &lab.dir, "b", &neighbour_conf("198.19.0.2", "198.19.0.1", 65002, "lrb0", 0));
    let (_c_bird, _c_sock) = bird(&lab.c, &lab.dir, "c", &neighbour_conf("198.20.0.2", "198.20.0.1", 65003, "lrc0", 2));

    wait_for_routes_via_b(&lab, &cfg, &router_sock);
    // Traffic to the announced prefixes (5 of them, 20 sources) arrives at B.
    let mut traffic = lab.a.command(env!("CARGO_BIN_EXE_linerate"));
    traffic.args(["gen", "-i", "lra0", "-D", D0_MAC, "-s", "198.18.0.10-198.18.0.29", "-d", "10.200.5.1-10.200.9.1", "-R", "2000", "-t", "20"]);
    traffic.stdout(Stdio::null()).stderr(Stdio::null());
    let _traffic = Guard(Some(traffic.spawn().unwrap()));
    let b0 = rx_packets(&lab.b, "lrb0");
    wait("traffic to the BGP prefixes at B", Duration::from_secs(5), || rx_packets(&lab.b, "lrb0") > b0 + 1000);
    sessions_survive_a_reload(&lab, &cfg, &router_sock);
    withdrawal_moves_traffic_to_c(&lab, &cfg, &b_sock);

    let out = dut.terminate().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "linerate run: {}", text(&out));
}

/// linerate's config: three interfaces, routes from BIRD mirrored from the kernel.
fn write_router_config(lab: &Lab) -> PathBuf {
    let cfg = lab.dir.join("router.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[router]
control_socket = "{}"

[router.kernel_routes]
table = "main"
protocols = ["bird"]

[[interface]]
name = "lrd0"
addresses = ["198.18.0.1/24"]
backend = "af_packet"

[[interface]]
name = "lrd1"
addresses = ["198.19.0.1/24"]
backend = "af_packet"

[[interface]]
name = "lrd2"
addresses = ["198.20.0.1/24"]
backend = "af_packet"
"#,
            lab.dir.join("control.sock").display()
        ),
    )
    .unwrap();
    cfg
}

/// Waits up to 60 s for every prefix B announces to be in linerate's FIB, both sessions up.
fn wait_for_routes_via_b(lab: &Lab, cfg: &Path, router_sock: &Path) {
    let n = PREFIXES as usize;
    let diag = || {
        let kernel = text(&lab.d.ip(&["route", "show", "proto", "bird"]).unwrap()).lines().count();
        let logs: String = ["router", "b", "c"].iter().map(|b| format!("--- {b}.log\n{}", std::fs::read_to_string(lab.dir.join(format!("{b}.log"))).unwrap_or_default())).collect();
        format!("{}\nkernel: {kernel} bird routes in D\n{logs}", birdc(&lab.d, router_sock, &["show", "protocols"]))
    };
    let start = Instant::now();
    while kernel_routes_via(cfg, "198.19.0.2") < n {
        assert!(start.elapsed() < Duration::from_secs(60), "{n} routes via B not in linerate's FIB after 60 s:\n{}", diag());
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = start.elapsed();
    eprintln!("BGP: {n} routes via B in the FIB {took:?} after the BIRDs started");
    // C's session comes up on its own schedule (connect retry, 1 s): B's routes can be in the
    // FIB before it is established.
    let both_up = || established_since(&lab.d, router_sock, "b").is_some() && established_since(&lab.d, router_sock, "c").is_some();
    let limit = Duration::from_secs(30);
    let start = Instant::now();
    while !both_up() {
        assert!(start.elapsed() < limit, "BGP sessions b and c not both established after {limit:?}:\n{}", diag());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The BGP sessions survive a reload of linerate.
fn sessions_survive_a_reload(lab: &Lab, cfg: &Path, router_sock: &Path) {
    let (since_b, since_c) = (established_since(&lab.d, router_sock, "b"), established_since(&lab.d, router_sock, "c"));
    let out = Command::new(env!("CARGO_BIN_EXE_linerate")).args(["reload", "-c"]).arg(cfg).output().unwrap();
    assert!(out.status.success(), "reload: {}", text(&out));
    std::thread::sleep(Duration::from_secs(2));
    let protocols = birdc(&lab.d, router_sock, &["show", "protocols"]);
    for (proto, before) in [("b", since_b), ("c", since_c)] {
        let after = established_since(&lab.d, router_sock, proto);
        assert!(same_instant(before.as_deref(), after.as_deref()), "session {proto} reset by the reload ({before:?} -> {after:?}):\n{protocols}");
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

/// B withdraws everything: the traffic moves to C within a second.
fn withdrawal_moves_traffic_to_c(lab: &Lab, cfg: &Path, b_sock: &Path) {
    let c0 = rx_packets(&lab.c, "lrc0");
    let out = birdc(&lab.b, b_sock, &["disable", "announced"]);
    assert!(out.contains("disabled"), "{out}");
    let moved = wait("traffic at C after B's withdrawal", Duration::from_secs(1), || rx_packets(&lab.c, "lrc0") > c0 + 50);
    eprintln!("withdrawal: traffic moved to C in {moved:?}");
    wait("3000 routes via C in linerate's FIB", Duration::from_secs(10), || kernel_routes_via(cfg, "198.20.0.2") >= PREFIXES as usize);
}
