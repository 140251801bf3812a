//! keepalived (VRRPv3) on linerate's host-stack TAP (issue 43): the virtual address it adds
//! when it becomes master is the router's at once (A pings it, and its ARP answer is the
//! port's MAC), and when keepalived stops, the address goes and the router no longer
//! answers for it. Needs root and keepalived (`scripts/setup.sh` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lab::topology::{Namespace, is_root};

mod common;

use common::{D0_MAC, Guard, Lab, build, start_until, text, write_config};

/// A VRRP instance on `tap` holding `vip`, with `priority`.
fn keepalived_conf(lab: &Lab, name: &str, tap: &str, vip: &str, priority: u8) -> PathBuf {
    let text = format!(
        "global_defs {{\n  router_id lr{name}\n}}\nvrrp_instance lr{name} {{\n  state BACKUP\n  interface {tap}\n  virtual_router_id 51\n  priority {priority}\n  advert_int 1\n  version 3\n  virtual_ipaddress {{\n    {vip}\n  }}\n}}\n"
    );
    let path = lab.dir.join(format!("keepalived-{name}.conf"));
    std::fs::write(&path, text).unwrap();
    path
}

/// keepalived's VRRP process in `ns`, in the foreground, its pid files in `dir`.
fn keepalived_in(ns: &Namespace, dir: &Path, name: &str, conf: &Path) -> Guard {
    let pid = |what: &str| dir.join(format!("{what}-{name}.pid"));
    let mut cmd = ns.command("keepalived");
    cmd.args(["--dont-fork", "--log-console", "--vrrp", "-f"])
        .arg(conf)
        .arg("-p")
        .arg(pid("keepalived"))
        .arg("-r")
        .arg(pid("vrrp"));
    start_until(cmd, "Entering BACKUP STATE")
}

/// Waits up to `secs` for `cond`.
fn within(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(secs), "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pings(ns: &Namespace, addr: &str) -> bool {
    ns.exec("ping", &["-c", "1", "-W", "1", addr]).is_ok()
}

#[test]
fn keepalived_on_a_tap_gives_the_router_its_virtual_address() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    assert!(
        Command::new("keepalived").arg("--version").output().is_ok(),
        "needs keepalived: run scripts/setup.sh"
    );
    let lab = build("kv");
    let cfg = write_config(&lab, "af_packet", "");
    let mut dut = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    dut.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let _dut = start_until(dut, "forwarding with");
    assert!(!pings(&lab.a, "198.18.0.254"), "no one holds the address yet");

    let conf = keepalived_conf(&lab, "d", "lrhd0", "198.18.0.254/24", 150);
    let mut k = keepalived_in(&lab.d, &lab.dir, "d", &conf);
    // Master after three advertisement intervals without a peer's.
    within(8, "A pings the virtual address", || pings(&lab.a, "198.18.0.254"));
    let neigh = text(&lab.a.exec("ip", &["neigh", "show", "198.18.0.254"]).unwrap());
    assert!(neigh.contains(D0_MAC), "answered by the port's MAC: {neigh}");

    // keepalived stops: it removes the address, and the router gives it up.
    drop(k.terminate());
    within(5, "the address gone from the TAP", || {
        !text(&lab.d.exec("ip", &["addr", "show", "lrhd0"]).unwrap()).contains("198.18.0.254")
    });
    lab.a.exec("ip", &["neigh", "flush", "198.18.0.254"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!pings(&lab.a, "198.18.0.254"), "the router still answers for a given-up address");
    assert!(pings(&lab.a, "198.18.0.1"), "its own address stays");
}

/// Two boxes, D (priority 200) and E (100), on the same two links through a switch S (a
/// bridge per link), A on one and B on the other, a sync link between D and E.
struct Pair {
    a: Namespace,
    b: Namespace,
    d: Namespace,
    e: Namespace,
    _s: Namespace,
    dir: PathBuf,
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const E0_MAC: &str = "02:00:00:00:0e:00";
const E1_MAC: &str = "02:00:00:00:0e:01";

fn pair(tag: &str) -> Pair {
    use lab::topology::{End, veth};
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lr{pid}{tag}{host}")).unwrap();
    let (a, b, d, e, s) = (ns("a"), ns("b"), ns("d"), ns("e"), ns("s"));
    for br in ["lrbr0", "lrbr1"] {
        s.ip(&["link", "add", br, "type", "bridge"]).unwrap();
        s.ip(&["link", "set", br, "up"]).unwrap();
    }
    let mac = |n: u8| format!("02:00:00:00:5{}:{n:02x}", tag.len());
    let ports: [(&Namespace, &str, &str, &str); 6] = [
        (&a, "lra0", common::A_MAC, "lrbr0"),
        (&d, "lrd0", common::D0_MAC, "lrbr0"),
        (&e, "lrd0", E0_MAC, "lrbr0"),
        (&b, "lrb0", common::B_MAC, "lrbr1"),
        (&d, "lrd1", common::D1_MAC, "lrbr1"),
        (&e, "lrd1", E1_MAC, "lrbr1"),
    ];
    for (i, (host, name, m, br)) in ports.iter().enumerate() {
        let sw = format!("lrs{i}");
        let sw_mac = mac(i as u8);
        veth(End { ns: host, name, mac: m }, End { ns: &s, name: &sw, mac: &sw_mac }).unwrap();
        s.ip(&["link", "set", &sw, "master", br]).unwrap();
    }
    veth(
        End { ns: &d, name: "lrsync0", mac: "02:00:00:00:99:01" },
        End { ns: &e, name: "lrsync1", mac: "02:00:00:00:99:02" },
    )
    .unwrap();
    d.addr("lrsync0", "10.99.0.1/24").unwrap();
    e.addr("lrsync1", "10.99.0.2/24").unwrap();
    a.addr("lra0", "198.18.0.2/24").unwrap();
    a.ip(&["route", "add", "default", "via", "198.18.0.254"]).unwrap();
    b.addr("lrb0", "198.19.0.2/24").unwrap();
    b.ip(&["route", "add", "default", "via", "198.19.0.254"]).unwrap();
    for r in [&d, &e] {
        r.sysctl("net.ipv4.ip_forward=0").unwrap();
    }
    let dir = std::env::temp_dir().join(format!("lr-netns-{pid}-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    Pair { a, b, d, e, _s: s, dir }
}

/// Everything is blocked but what comes in on lrd0 and its states' replies, and VRRP.
const RULES: &str =
    "block all\npass out keep state\npass in on lrd0 keep state\npass in proto 112\n";

/// Box `name`'s linerate config: its own addresses `.{host}`, the rules, state sync.
fn box_config(p: &Pair, name: &str, host: u8, listen: &str, peer: &str) -> PathBuf {
    std::fs::write(p.dir.join("rules.conf"), RULES).unwrap();
    std::fs::write(p.dir.join("ha.key"), "a secret of thirty-two bytes....\n").unwrap();
    let text = format!(
        r#"
[router]
control_socket = "control-{name}.sock"

[[interface]]
name = "lrd0"
addresses = ["198.18.0.{host}/24"]
backend = "af_packet"

[[interface]]
name = "lrd1"
addresses = ["198.19.0.{host}/24"]
backend = "af_packet"

[firewall]
rules = "rules.conf"

[ha]
listen = "{listen}"
peer = "{peer}"
key_file = "ha.key"
track_file = "track-{name}"
"#
    );
    let path = p.dir.join(format!("router-{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// keepalived's config for a box: both links' addresses in one sync group (they move
/// together), the box kept from mastership while linerate's table is not complete.
fn pair_conf(p: &Pair, name: &str, priority: u8) -> PathBuf {
    let track = p.dir.join(format!("track-{name}"));
    let instance = |i: u8, vip: &str| {
        format!(
            "vrrp_instance lr{i} {{\n  state BACKUP\n  interface lrhd{i}\n  virtual_router_id {}\n  priority {priority}\n  advert_int 0.5\n  version 3\n  track_file {{\n    lrsync\n  }}\n  virtual_ipaddress {{\n    {vip}\n  }}\n}}\n",
            51 + i
        )
    };
    let text = format!(
        "global_defs {{\n  router_id lr{name}\n}}\ntrack_file lrsync {{\n  file \"{}\"\n  weight 0\n}}\nvrrp_sync_group lr {{\n  group {{\n    lr0\n    lr1\n  }}\n}}\n{}{}",
        track.display(),
        instance(0, "198.18.0.254/24"),
        instance(1, "198.19.0.254/24"),
    );
    let path = p.dir.join(format!("keepalived-{name}.conf"));
    std::fs::write(&path, text).unwrap();
    path
}

/// B, once A's first datagram arrives, sends A one every 10 ms for `argv[1]` seconds (a
/// server pushing data: after a takeover only the state synced from the old master passes
/// them, A sends nothing more). A sends a few, then prints how many of B's came and the
/// longest time between two.
const PUSH: &str = "import socket,sys,time\nsecs=float(sys.argv[1])\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('',9000))\nm,a=s.recvfrom(64)\nt0=time.time(); i=0\nwhile time.time()-t0<secs:\n  s.sendto(b'%d'%i,a); i+=1; time.sleep(0.01)\n";
const CLIENT: &str = "import socket,sys,time\nsecs=float(sys.argv[1])\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('',41000)); s.settimeout(0.01)\nfor _ in range(5):\n  s.sendto(b'hi',('198.19.0.2',9000))\nt0=time.time(); last=None; gap=0.0; got=0\nwhile time.time()-t0<secs:\n  try:\n    s.recv(64); now=time.time(); got+=1\n    if last is not None: gap=max(gap,now-last)\n    last=now\n  except socket.timeout:\n    pass\nprint(got, round(gap,3))\n";

fn linerate_on(ns: &Namespace, cfg: &Path, cpu: &str) -> Guard {
    let mut cmd = ns.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(cfg).args(["--cpu", cpu]).current_dir(cfg.parent().unwrap());
    start_until(cmd, "forwarding with")
}

/// How the master goes away.
#[derive(Debug, Clone, Copy)]
enum Failover {
    /// `kill -9` of its linerate: its TAPs go, keepalived there faults.
    Killed,
    /// Its links set down: linerate drops the TAPs' carriers, keepalived there faults.
    LinksDown,
    /// keepalived stopped (a planned handover): it sends a priority-0 advertisement.
    Handover,
}

/// The master goes away mid-flow (`how`): keepalived on the other box takes both addresses
/// (after the master-down interval, or at once on a priority-0 advertisement), linerate there
/// answers for them, and B's datagrams to A pass there under the state that came over the
/// sync link (the rules let nothing in on B's side without a state, and A sends nothing
/// after its first datagrams). Prints the longest gap. With `tcp`, an iperf3 connection at
/// 20 Mbit/s instead, which must go on (its state's windows as the sync last sent them).
fn failover(tag: &str, how: Failover, tcp: bool) {
    // One pair at a time: four linerates and two keepalived on two CPUs would time out
    // each other's advertisements.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    assert!(
        Command::new("keepalived").arg("--version").output().is_ok(),
        "needs keepalived: run scripts/setup.sh"
    );
    let p = pair(tag);
    let cfg_d = box_config(&p, "d", 1, "10.99.0.1:8384", "10.99.0.2:8384");
    let cfg_e = box_config(&p, "e", 3, "10.99.0.2:8384", "10.99.0.1:8384");
    let mut d = linerate_on(&p.d, &cfg_d, "1");
    let _e = linerate_on(&p.e, &cfg_e, "0");
    let (kd, ke) = (pair_conf(&p, "d", 200), pair_conf(&p, "e", 100));
    let mut keep_d = keepalived_in(&p.d, &p.dir, "d", &kd);
    let _keep_e = keepalived_in(&p.e, &p.dir, "e", &ke);
    within(10, "A reaches B through the master", || pings(&p.a, "198.19.0.254"));

    let (mut server, client) = if tcp {
        let mut server = p.b.command("iperf3");
        server.args(["-s", "-1", "-B", "198.19.0.2"]).stdout(std::process::Stdio::null());
        let mut client = p.a.command("iperf3");
        client.args(["-c", "198.19.0.2", "-J", "-t", "10", "-b", "20M", "-i", "0.5"]);
        (server, client)
    } else {
        let mut push = p.b.command("python3");
        push.args(["-c", PUSH, "10"]);
        let mut client = p.a.command("python3");
        client.args(["-c", CLIENT, "10"]);
        (push, client)
    };
    let _server = Guard(Some(server.spawn().unwrap()));
    std::thread::sleep(Duration::from_millis(500));
    let client = { client }.stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    match how {
        Failover::Killed => d.0.take().unwrap().kill().unwrap(),
        Failover::LinksDown => {
            for dev in ["lrd0", "lrd1"] {
                p.d.ip(&["link", "set", dev, "down"]).unwrap();
            }
        }
        Failover::Handover => drop(keep_d.terminate()),
    }
    let out = client.wait_with_output().unwrap();
    if tcp {
        return tcp_survived(how, &out);
    }
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let f: Vec<f64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (got, gap) = (f[0], f[1]);
    eprintln!("failover ({how:?}): {got} of B's datagrams reached A, longest gap {gap} s");
    // Master-down interval: 3 x 0.5 s + (256 - 100) / 256 x 0.5 s = 1.8 s, less the time
    // since the last advertisement; then the gratuitous ARPs.
    assert!(gap < 3.0, "{how:?}: the flow stopped for {gap} s: {line}");
    assert!(got > 500.0, "{how:?}: B's datagrams passed E after the takeover: {line}");
}

#[test]
fn a_flow_survives_the_master_killed() {
    failover("kf", Failover::Killed, false);
}

#[test]
fn a_flow_survives_the_masters_links_going_down() {
    failover("kl", Failover::LinksDown, false);
}

#[test]
fn a_flow_survives_a_planned_handover() {
    failover("kh", Failover::Handover, false);
}

/// iperf3's report after a failover: the connection was not reset, and how long it carried
/// nothing.
fn tcp_survived(how: Failover, out: &std::process::Output) {
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{how:?}: iperf3 failed: {report}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let intervals = json["intervals"].as_array().cloned().unwrap_or_default();
    let (mut stall, mut longest) = (0.0f64, 0.0f64);
    for i in &intervals {
        let s = &i["sum"];
        if s["bytes"].as_u64() == Some(0) {
            stall += s["seconds"].as_f64().unwrap_or(0.0);
            longest = longest.max(stall);
        } else {
            stall = 0.0;
        }
    }
    let received = json["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    eprintln!("failover ({how:?}, TCP): {received} bytes received, longest stall {longest} s");
    assert!(longest <= 4.0, "{how:?}: the connection stalled {longest} s");
    assert!(received > 15_000_000, "{how:?}: {received} bytes of ~25 MB");
}

#[test]
fn a_tcp_connection_survives_the_master_killed() {
    failover("kt", Failover::Killed, true);
}
