//! What the routing-daemon tests share (`netns_bird.rs`, `netns_frr.rs`): host A -> D
//! (linerate, and a daemon in its namespace) -> B and C, each running a BIRD that announces
//! the same prefixes by eBGP (C with a longer AS path), and the checks on linerate's FIB.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::topology::{End, Namespace, veth};

use super::{D0_MAC, Guard};

/// Prefixes each neighbour announces.
pub const PREFIXES: u32 = 3000;

pub use super::text;

/// The i-th announced prefix: 10.200.0.0/24, 10.200.1.0/24, ...
pub fn prefix(i: u32) -> String {
    let a = 0x0ac8_0000 + (i << 8);
    format!("{}.{}.{}.0/24", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff)
}

/// Namespaces `lr<tag><pid>{a,d,b,c}` and a scratch folder, all removed on drop.
pub struct Lab {
    pub a: Namespace,
    pub d: Namespace,
    pub b: Namespace,
    pub c: Namespace,
    pub dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A (198.18.0.2) - lrd0 D lrd1 - B (198.19.0.2), D lrd2 - C (198.20.0.2); D does not
/// forward in its kernel.
pub fn build(tag: &str) -> Lab {
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lr{tag}{pid}{host}")).unwrap();
    let (a, d, b, c) = (ns("a"), ns("d"), ns("b"), ns("c"));
    veth(
        End { ns: &a, name: "lra0", mac: super::A_MAC },
        End { ns: &d, name: "lrd0", mac: D0_MAC },
    )
    .unwrap();
    veth(
        End { ns: &d, name: "lrd1", mac: super::D1_MAC },
        End { ns: &b, name: "lrb0", mac: super::B_MAC },
    )
    .unwrap();
    veth(
        End { ns: &d, name: "lrd2", mac: "02:00:00:00:0d:02" },
        End { ns: &c, name: "lrc0", mac: "02:00:00:00:0c:01" },
    )
    .unwrap();
    a.addr("lra0", "198.18.0.2/24").unwrap();
    a.ip(&["route", "add", "default", "via", "198.18.0.1"]).unwrap();
    b.addr("lrb0", "198.19.0.2/24").unwrap();
    c.addr("lrc0", "198.20.0.2/24").unwrap();
    d.sysctl("net.ipv4.ip_forward=0").unwrap();
    let dir = std::env::temp_dir().join(format!("lr-{tag}-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    Lab { a, d, b, c, dir }
}

/// linerate's config: three interfaces, the kernel's routes of `protocol` mirrored.
pub fn write_router_config(lab: &Lab, protocol: &str) -> PathBuf {
    let cfg = lab.dir.join("router.toml");
    let mut text = format!(
        "[router]\ncontrol_socket = \"{}\"\n\n[router.kernel_routes]\ntable = \"main\"\nprotocols = [\"{protocol}\"]\n",
        lab.dir.join("control.sock").display()
    );
    for (name, addr) in
        [("lrd0", "198.18.0.1/24"), ("lrd1", "198.19.0.1/24"), ("lrd2", "198.20.0.1/24")]
    {
        text += &format!(
            "\n[[interface]]\nname = \"{name}\"\naddresses = [\"{addr}\"]\nbackend = \"af_packet\"\n"
        );
    }
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// A BIRD in `ns` with config `conf`, in the foreground (stopped on drop).
pub fn bird(ns: &Namespace, dir: &Path, name: &str, conf: &str) -> (Guard, PathBuf) {
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

pub fn birdc(ns: &Namespace, sock: &Path, args: &[&str]) -> String {
    text(&ns.command("birdc").arg("-s").arg(sock).args(args).output().unwrap())
}

/// A neighbour's BIRD: the prefixes as static routes out of its interface, exported by
/// eBGP to the router (`prepend`: extra copies of its AS in the path, to be less preferred).
pub fn neighbour_conf(me: &str, router: &str, asn: u32, ifname: &str, prepend: u32) -> String {
    neighbour_conf_n(me, router, asn, ifname, prepend, PREFIXES)
}

/// [`neighbour_conf`] announcing the first `n` prefixes.
pub fn neighbour_conf_n(
    me: &str,
    router: &str,
    asn: u32,
    ifname: &str,
    prepend: u32,
    n: u32,
) -> String {
    let routes: String =
        (0..n).map(|i| format!("  route {} via \"{ifname}\";\n", prefix(i))).collect();
    let path: String = (0..prepend).map(|_| format!("bgp_path.prepend({asn}); ")).collect();
    format!(
        "router id {me};\nprotocol device {{ scan time 1; }}\nprotocol static announced {{\n  ipv4;\n{routes}}}\n\
         protocol bgp uplink {{\n  local {me} as {asn};\n  neighbor {router} as 65001;\n  connect retry time 1;\n\
         ipv4 {{ import none; export filter {{ {path}accept; }}; }};\n}}\n"
    )
}

/// B's and C's BIRDs (AS 65002 and 65003, C's path longer), peering with D's 198.19.0.1 and
/// 198.20.0.1 (AS 65001). B's control socket comes back with them.
pub fn neighbours(lab: &Lab) -> (Guard, Guard, PathBuf) {
    let (b, b_sock) =
        bird(&lab.b, &lab.dir, "b", &neighbour_conf("198.19.0.2", "198.19.0.1", 65002, "lrb0", 0));
    let (c, _) =
        bird(&lab.c, &lab.dir, "c", &neighbour_conf("198.20.0.2", "198.20.0.1", 65003, "lrc0", 2));
    (b, c, b_sock)
}

/// How many kernel routes in linerate's FIB go via `gateway`.
pub fn kernel_routes_via(cfg: &Path, gateway: &str) -> usize {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "routes", "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["source"] == "kernel" && r["via"] == gateway)
        .count()
}

pub fn rx_packets(ns: &Namespace, ifname: &str) -> u64 {
    let out = ns.exec("cat", &[&format!("/sys/class/net/{ifname}/statistics/rx_packets")]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Polls `ok` every 20 ms for up to `limit`; returns how long it took, or panics with `what`.
pub fn wait(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} (waited {limit:?})");
}

/// Traffic from A to 5 of the announced prefixes (20 sources, 2000 pps for 20 s); checks
/// that it arrives at B.
pub fn traffic_to_b(lab: &Lab) -> Guard {
    let mut traffic = lab.a.command(env!("CARGO_BIN_EXE_linerate"));
    traffic.args([
        "gen",
        "-i",
        "lra0",
        "-D",
        D0_MAC,
        "-s",
        "198.18.0.10-198.18.0.29",
        "-d",
        "10.200.5.1-10.200.9.1",
        "-R",
        "2000",
        "-t",
        "20",
    ]);
    traffic.stdout(Stdio::null()).stderr(Stdio::null());
    let guard = Guard(Some(traffic.spawn().unwrap()));
    let b0 = rx_packets(&lab.b, "lrb0");
    wait("traffic to the BGP prefixes at B", Duration::from_secs(5), || {
        rx_packets(&lab.b, "lrb0") > b0 + 1000
    });
    guard
}

/// B withdraws everything (its static protocol disabled): the traffic moves to C within a
/// second, and every prefix is in the FIB via C soon after.
pub fn withdrawal_moves_traffic_to_c(lab: &Lab, cfg: &Path, b_sock: &Path) {
    let c0 = rx_packets(&lab.c, "lrc0");
    let out = birdc(&lab.b, b_sock, &["disable", "announced"]);
    assert!(out.contains("disabled"), "{out}");
    let moved = wait("traffic at C after B's withdrawal", Duration::from_secs(1), || {
        rx_packets(&lab.c, "lrc0") > c0 + 50
    });
    eprintln!("withdrawal: traffic moved to C in {moved:?}");
    wait("3000 routes via C in linerate's FIB", Duration::from_secs(10), || {
        kernel_routes_via(cfg, "198.20.0.2") >= PREFIXES as usize
    });
}
