//! Two routers as one (`[ha]`, issue 43): box D forwards A's flow and keeps its state; box E,
//! the standby with the same interfaces, gets the state over the sync link, so that B's reply
//! reaching E passes a rule set that blocks everything but replies; a state killed on D is
//! gone from E too. Namespaces: A - D - B as in the other tests, and E between F (A's side)
//! and G (B's side), D and E joined by a sync link (10.99.0.0/24). Needs root.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use lab::topology::{End, Namespace, is_root, veth};
use serde_json::Value;

mod common;

use common::{A_MAC, B_MAC, D0_MAC, D1_MAC, Guard, Lab, build, start_until, write_config};

/// Everything is blocked but what comes in on lrd0 and the replies of its states.
const RULES: &str = "block all\npass out keep state\npass in on lrd0 keep state\n";
const KEY: &str = "a secret of thirty-two bytes....\n";

/// E, F and G beside the lab, and the sync link D - E.
struct Standby {
    e: Namespace,
    f: Namespace,
    g: Namespace,
}

fn standby(lab: &Lab, tag: &str) -> Standby {
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lr{pid}{tag}{host}")).unwrap();
    let (e, f, g) = (ns("e"), ns("f"), ns("g"));
    // E's interfaces have D's names and MACs (the virtual MACs a VRRP pair moves).
    veth(End { ns: &f, name: "lrf0", mac: A_MAC }, End { ns: &e, name: "lrd0", mac: D0_MAC })
        .unwrap();
    veth(End { ns: &e, name: "lrd1", mac: D1_MAC }, End { ns: &g, name: "lrg0", mac: B_MAC })
        .unwrap();
    veth(
        End { ns: &lab.d, name: "lrs0", mac: "02:00:00:00:99:01" },
        End { ns: &e, name: "lrs1", mac: "02:00:00:00:99:02" },
    )
    .unwrap();
    lab.d.addr("lrs0", "10.99.0.1/24").unwrap();
    e.addr("lrs1", "10.99.0.2/24").unwrap();
    f.addr("lrf0", "198.18.0.2/24").unwrap();
    f.ip(&["route", "add", "default", "via", "198.18.0.1"]).unwrap();
    g.addr("lrg0", "198.19.0.2/24").unwrap();
    g.ip(&["route", "add", "default", "via", "198.19.0.1"]).unwrap();
    Standby { e, f, g }
}

/// The config of one box: the lab's, its own control socket, the rules and `[ha]`.
fn config(lab: &Lab, name: &str, listen: &str, peer: &str) -> PathBuf {
    std::fs::write(lab.dir.join("rules.conf"), RULES).unwrap();
    std::fs::write(lab.dir.join("ha.key"), KEY).unwrap();
    let extra = format!(
        "[firewall]\nrules = \"rules.conf\"\n\n[ha]\nlisten = \"{listen}\"\npeer = \"{peer}\"\nkey_file = \"ha.key\"\ntrack_file = \"track-{name}\"\n"
    );
    let text = std::fs::read_to_string(write_config(lab, "af_packet", &extra))
        .unwrap()
        .replace("control.sock", &format!("control-{name}.sock"))
        .replace("[router]\n", "[router]\nhost_stack = false\n");
    let path = lab.dir.join(format!("router-{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn linerate(args: &[&str], cfg: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate")).args(args).arg("-c").arg(cfg).output().unwrap()
}

/// The states of `cfg`'s router from 198.18.0.2.
fn states(cfg: &Path) -> Vec<Value> {
    let out = linerate(&["show", "states", "--json", "--src", "198.18.0.2"], cfg);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["states"].as_array().cloned().unwrap_or_default()
}

/// Waits up to 5 s for `cond`.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(5), "{what}: not within 5 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One datagram from `from` (port `sport`) to `dst`:`dport`.
fn send(from: &Namespace, sport: u16, dst: &str, dport: u16) {
    let code = "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('',int(sys.argv[1])))\ns.sendto(b'hello',(sys.argv[2],int(sys.argv[3])))\n";
    from.exec("python3", &["-c", code, &sport.to_string(), dst, &dport.to_string()]).unwrap();
}

/// Whether `to`, listening on `port`, gets a datagram that `from` sends it from `sport`.
fn arrives(from: &Namespace, sport: u16, to: &Namespace, port: u16) -> bool {
    arrives_by(from, sport, "198.18.0.2", port, to, port)
}

/// Whether `to`, listening on `port`, gets a datagram that `from` sends from `sport` to
/// `dst`:`dport` (translated on the way).
fn arrives_by(
    from: &Namespace,
    sport: u16,
    dst: &str,
    dport: u16,
    to: &Namespace,
    port: u16,
) -> bool {
    let listen = "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('',int(sys.argv[1])))\ns.settimeout(1.5)\nprint('ready',file=sys.stderr,flush=True)\ntry:\n  print(s.recv(64).decode())\nexcept OSError:\n  print('timeout')\n";
    let mut rx = to.command("python3");
    rx.args(["-c", listen, &port.to_string()]);
    let mut guard = start_until(rx, "ready");
    send(from, sport, dst, dport);
    let mut child = guard.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.wait().unwrap();
    out.trim() == "hello"
}

fn run(ns: &Namespace, cfg: &Path, cpu: &str) -> Guard {
    let mut cmd = ns.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(cfg).args(["--cpu", cpu]);
    start_until(cmd, "forwarding with")
}

#[test]
fn a_state_made_on_one_box_passes_the_reply_on_the_other() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("ha");
    let sb = standby(&lab, "ha");
    let cfg_e = config(&lab, "e", "10.99.0.2:8384", "10.99.0.1:8384");
    let cfg_d = config(&lab, "d", "10.99.0.1:8384", "10.99.0.2:8384");
    let _e = run(&sb.e, &cfg_e, "0");
    let track = |name: &str| std::fs::read_to_string(lab.dir.join(format!("track-{name}")));
    assert_eq!(track("e").unwrap(), "1\n", "E's table is not complete while D is away");
    let mut d = run(&lab.d, &cfg_d, "1");
    // Each box's bulk update request is answered (E asks again): both tables complete.
    eventually("both tables complete", || {
        track("d").is_ok_and(|t| t == "0\n") && track("e").is_ok_and(|t| t == "0\n")
    });
    // Neighbours resolved on both boxes (ARP; ICMP passes out only, so no reply needed).
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    let _ = sb.g.exec("ping", &["-c", "1", "-W", "1", "198.18.0.2"]);
    let _ = sb.f.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);

    // Before: E has no state, so B's "reply" is blocked there.
    assert!(!arrives(&sb.g, 9000, &sb.f, 41000), "E passed a datagram with no state");
    // A's flow through D: its state reaches E.
    send(&lab.a, 41000, "198.19.0.2", 9000);
    eventually("the state on E", || {
        states(&cfg_e).iter().any(|s| s["sport"] == 41000 && s["dport"] == 9000)
    });
    assert!(!states(&cfg_d).is_empty(), "D has the state it made");
    // The reply through E (the standby, as after a failover) passes under the synced state.
    assert!(arrives(&sb.g, 9000, &sb.f, 41000), "B's reply did not pass E");
    let shown = linerate(&["show", "ha", "--json"], &cfg_e);
    let ha: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert!(ha["synced"] == true && ha["inserted"].as_u64() >= Some(1), "{ha}");
    assert_eq!(ha["peer"], "10.99.0.1:8384");

    // A state killed on D is gone from E too.
    let killed = linerate(&["kill", "states", "--src", "198.18.0.2"], &cfg_d);
    assert!(killed.status.success(), "{killed:?}");
    eventually("the state gone from E", || !states(&cfg_e).iter().any(|s| s["sport"] == 41000));

    let child = d.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let line = report.lines().find(|l| l.starts_with("state sync:")).unwrap_or_default();
    assert!(line.contains("0 refused"), "D refused nothing from E: {report}");
    assert!(!line.starts_with("state sync: sent 0 "), "D sent its states: {report}");
}

/// A box with another key refuses every datagram: nothing of its peer's reaches its table.
#[test]
fn a_peer_with_another_key_is_refused() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("hk");
    let sb = standby(&lab, "hk");
    let cfg_e = config(&lab, "e", "10.99.0.2:8384", "10.99.0.1:8384");
    let cfg_d = config(&lab, "d", "10.99.0.1:8384", "10.99.0.2:8384");
    std::fs::write(lab.dir.join("ha-e.key"), "another secret of 32 bytes......").unwrap();
    let text = std::fs::read_to_string(&cfg_e).unwrap().replace("\"ha.key\"", "\"ha-e.key\"");
    std::fs::write(&cfg_e, text).unwrap();
    let mut e = run(&sb.e, &cfg_e, "0");
    let _d = run(&lab.d, &cfg_d, "1");
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    send(&lab.a, 41001, "198.19.0.2", 9000);
    std::thread::sleep(Duration::from_millis(500));
    assert!(states(&cfg_e).is_empty(), "E took a state from a peer with another key");
    let child = e.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let line = report.lines().find(|l| l.starts_with("state sync:")).unwrap_or_default();
    let refused =
        line.contains("received 0 (0 messages, ") && !line.contains("messages, 0 refused");
    assert!(refused, "{line:?} in {report}");
}

/// A flow D translates (`nat` to lrd1's address, its port kept) reaches E with its
/// translation: B's reply to the translated address through E goes back to A's address.
#[test]
fn a_translated_flow_keeps_its_translation_on_the_other_box() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("hn");
    let sb = standby(&lab, "hn");
    let cfg_e = config(&lab, "e", "10.99.0.2:8384", "10.99.0.1:8384");
    let cfg_d = config(&lab, "d", "10.99.0.1:8384", "10.99.0.2:8384");
    let rules = format!("nat on lrd1 from 198.18.0.0/24 to any -> (lrd1) static-port\n{RULES}");
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut e = run(&sb.e, &cfg_e, "0");
    let _d = run(&lab.d, &cfg_d, "1");
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    let _ = sb.g.exec("ping", &["-c", "1", "-W", "1", "198.19.0.1"]);
    let _ = sb.f.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    // Before: E has neither state nor translation.
    assert!(!arrives_by(&sb.g, 9000, "198.19.0.1", 41002, &sb.f, 41002), "E passed it untracked");
    send(&lab.a, 41002, "198.19.0.2", 9000);
    eventually("the state on E", || states(&cfg_e).iter().any(|s| s["sport"] == 41002));
    assert!(
        arrives_by(&sb.g, 9000, "198.19.0.1", 41002, &sb.f, 41002),
        "B's reply to the translated address did not reach A through E"
    );
    let shown = linerate(&["show", "ha", "--json"], &cfg_e);
    let ha: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert!(ha["translations"].as_u64() >= Some(1), "{ha}");
    let child = e.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("translations: 1 inserted, 0 refused"), "{report}");
}

/// [`arrives_by`] over IPv6: `to`, listening on `port`, gets a datagram that `from` sends
/// from `sport` to `dst`:`port` (translated on the way).
fn arrives_by6(from: &Namespace, sport: u16, dst: &str, port: u16, to: &Namespace) -> bool {
    let listen = "import socket,sys\ns=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)\ns.bind(('::',int(sys.argv[1])))\ns.settimeout(1.5)\nprint('ready',file=sys.stderr,flush=True)\ntry:\n  print(s.recv(64).decode())\nexcept OSError:\n  print('timeout')\n";
    let mut rx = to.command("python3");
    rx.args(["-c", listen, &port.to_string()]);
    let mut guard = start_until(rx, "ready");
    send6(from, sport, dst, port);
    let mut child = guard.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.wait().unwrap();
    out.trim() == "hello"
}

/// [`send`] over IPv6.
fn send6(from: &Namespace, sport: u16, dst: &str, dport: u16) {
    let code = "import socket,sys\ns=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)\ns.bind(('',int(sys.argv[1])))\ns.sendto(b'hello',(sys.argv[2],int(sys.argv[3])))\n";
    from.exec("python3", &["-c", code, &sport.to_string(), dst, &dport.to_string()]).unwrap();
}

/// NAT66: an IPv6 flow D translates reaches E with its translation, as an IPv4 one does.
#[test]
fn a_translated_ipv6_flow_keeps_its_translation_on_the_other_box() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("h6");
    let sb = standby(&lab, "h6");
    for (ns, dev, addr, gw) in [
        (&sb.f, "lrf0", "2001:db8:a::2/64", "2001:db8:a::1"),
        (&sb.g, "lrg0", "2001:db8:b::2/64", "2001:db8:b::1"),
    ] {
        ns.ip(&["addr", "add", addr, "dev", dev, "nodad"]).unwrap();
        ns.ip(&["-6", "route", "add", "default", "via", gw]).unwrap();
    }
    let cfg_e = config(&lab, "e", "10.99.0.2:8384", "10.99.0.1:8384");
    let cfg_d = config(&lab, "d", "10.99.0.1:8384", "10.99.0.2:8384");
    let rules =
        format!("nat on lrd1 inet6 from 2001:db8:a::/64 to any -> (lrd1) static-port\n{RULES}");
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut e = run(&sb.e, &cfg_e, "0");
    let _d = run(&lab.d, &cfg_d, "1");
    let _ = lab.a.exec("ping", &["-6", "-c", "1", "-W", "1", "2001:db8:b::2"]);
    let _ = sb.g.exec("ping", &["-6", "-c", "1", "-W", "1", "2001:db8:b::1"]);
    let _ = sb.f.exec("ping", &["-6", "-c", "1", "-W", "1", "2001:db8:b::2"]);
    assert!(!arrives_by6(&sb.g, 9000, "2001:db8:b::1", 41006, &sb.f), "E passed it untracked");
    send6(&lab.a, 41006, "2001:db8:b::2", 9000);
    eventually("the translation on E", || {
        let shown = linerate(&["show", "ha", "--json"], &cfg_e);
        let ha: Value = serde_json::from_slice(&shown.stdout).unwrap_or_default();
        ha["translations"].as_u64() >= Some(1)
    });
    assert!(
        arrives_by6(&sb.g, 9000, "2001:db8:b::1", 41006, &sb.f),
        "B's reply to the translated address did not reach A through E"
    );
    let child = e.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("translations: 1 inserted, 0 refused"), "{report}");
}

/// With two workers on E (AF_PACKET fanout by linerate's Toeplitz hash), each of D's states
/// goes to the one worker whose queue its flow reaches: E holds each UDP state once (an ICMP
/// state, whose hash this side does not mirror, goes to both), and every flow's reply passes
/// E.
#[test]
fn a_peers_states_go_to_the_worker_of_their_flow() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("hw");
    let sb = standby(&lab, "hw");
    let cfg_e = config(&lab, "e", "10.99.0.2:8384", "10.99.0.1:8384");
    let cfg_d = config(&lab, "d", "10.99.0.1:8384", "10.99.0.2:8384");
    let text = std::fs::read_to_string(&cfg_e).unwrap().replacen(
        "[router]\n",
        "[router]\nworkers = 2\n",
        1,
    );
    std::fs::write(&cfg_e, text).unwrap();
    let _e = run(&sb.e, &cfg_e, "0");
    let _d = run(&lab.d, &cfg_d, "1");
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    let _ = sb.g.exec("ping", &["-c", "1", "-W", "1", "198.18.0.2"]);
    let _ = sb.f.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    let ports: Vec<u16> = (41010..41018).collect();
    for &p in &ports {
        send(&lab.a, p, "198.19.0.2", 9000);
    }
    let udp = |cfg: &Path| -> Vec<Value> {
        states(cfg).into_iter().filter(|s| s["proto"] == "udp").collect()
    };
    eventually("every state on E", || udp(&cfg_e).len() >= ports.len());
    std::thread::sleep(Duration::from_millis(300));
    let held = udp(&cfg_e);
    assert_eq!(held.len(), ports.len(), "each state once on E: {held:?}");
    let shown = linerate(&["show", "ha", "--json"], &cfg_e);
    let ha: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(ha["states_to"], "the worker of the flow", "{ha}");
    for &p in &ports {
        assert!(arrives(&sb.g, 9000, &sb.f, p), "the reply to port {p} did not pass E");
    }
}

/// A sync link that loses 5% of its datagrams (an nftables rule on E's side drops them at
/// random; this kernel has no netem): each state's updates, sent again once a second while
/// its flow lasts, bring E to every one of D's 100 flows.
#[test]
fn the_standby_converges_when_the_sync_link_loses_datagrams() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("hl");
    let sb = standby(&lab, "hl");
    let loss = "table netdev lrloss {\n  chain in {\n    type filter hook ingress device \"lrs1\" priority 0; policy accept;\n    udp dport 8384 numgen random mod 20 0 counter drop\n  }\n}\n";
    let rules = lab.dir.join("loss.nft");
    std::fs::write(&rules, loss).unwrap();
    let nft = sb.e.command("nft").arg("-f").arg(&rules).output().unwrap();
    assert!(nft.status.success(), "nft: {}", String::from_utf8_lossy(&nft.stderr));
    let cfg_e = config(&lab, "e", "10.99.0.2:8384", "10.99.0.1:8384");
    let cfg_d = config(&lab, "d", "10.99.0.1:8384", "10.99.0.2:8384");
    let _e = run(&sb.e, &cfg_e, "0");
    let _d = run(&lab.d, &cfg_d, "1");
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    // 100 flows from A, a datagram each every 200 ms for 5 s.
    let flows = "import socket,time\nss=[socket.socket(socket.AF_INET,socket.SOCK_DGRAM) for _ in range(100)]\nfor k,s in enumerate(ss): s.bind(('',42000+k))\nfor _ in range(25):\n  for s in ss: s.sendto(b'x',('198.19.0.2',9000))\n  time.sleep(0.2)\n";
    let out = lab.a.command("python3").args(["-c", flows]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let udp = |cfg: &Path| states(cfg).into_iter().filter(|s| s["proto"] == "udp").count();
    assert_eq!(udp(&cfg_d), 100, "D's states");
    let held = udp(&cfg_e);
    let dropped = sb.e.command("nft").args(["list", "table", "netdev", "lrloss"]).output().unwrap();
    let dropped = String::from_utf8_lossy(&dropped.stdout).into_owned();
    assert!(!dropped.contains("packets 0 "), "the loss rule dropped nothing: {dropped}");
    assert_eq!(held, 100, "E holds every state despite the loss: {dropped}");
}
