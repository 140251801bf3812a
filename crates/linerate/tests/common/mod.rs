//! What the namespace tests share: the A -> D (linerate) -> B topology, linerate's config for
//! it, and child processes that are stopped on drop (a failing assertion leaves nothing).

#![allow(dead_code)] // each test binary uses its own subset

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use lab::topology::{End, Namespace, veth_queues};

pub mod bgp;
pub mod tcp;

pub const A_MAC: &str = "02:00:00:00:0a:01";
pub const D0_MAC: &str = "02:00:00:00:0d:00";
pub const D1_MAC: &str = "02:00:00:00:0d:01";
pub const B_MAC: &str = "02:00:00:00:0b:01";

/// Namespaces `lr<pid><tag>{a,d,b}` and a scratch folder, all removed on drop.
pub struct Lab {
    pub a: Namespace,
    pub d: Namespace,
    pub b: Namespace,
    pub dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn build(tag: &str) -> Lab {
    build_queues(tag, 1)
}

/// [`build`] with veths of `queues` queues (one per worker).
pub fn build_queues(tag: &str, queues: usize) -> Lab {
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lr{pid}{tag}{host}")).unwrap();
    let (a, d, b) = (ns("a"), ns("d"), ns("b"));
    a_side(&a, &d, D0_MAC, queues);
    b_side(&d, &b, D1_MAC, queues);
    // The router's addresses are linerate's (on its host-stack TAPs); D's kernel has none on
    // the veths and does not forward.
    d.sysctl("net.ipv4.ip_forward=0").unwrap();
    let dir = std::env::temp_dir().join(format!("lr-netns-{pid}-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    Lab { a, d, b, dir }
}

/// The veth pair between A (`lra0`) and D (`lrd0`, with MAC `d_mac`), A's addresses and
/// routes: at build, and again when a test deletes and re-creates it.
pub fn a_side(a: &Namespace, d: &Namespace, d_mac: &str, queues: usize) {
    veth_queues(
        End { ns: a, name: "lra0", mac: A_MAC },
        End { ns: d, name: "lrd0", mac: d_mac },
        queues,
    )
    .unwrap();
    a.addr("lra0", "198.18.0.2/24").unwrap();
    a.ip(&["route", "add", "default", "via", "198.18.0.1"]).unwrap();
    // IPv6 without duplicate address detection, so the addresses work at once.
    a.ip(&["addr", "add", "2001:db8:a::2/64", "dev", "lra0", "nodad"]).unwrap();
    a.ip(&["-6", "route", "add", "default", "via", "2001:db8:a::1"]).unwrap();
}

/// The veth pair between D (`lrd1`, with MAC `d_mac`) and B (`lrb0`), B's addresses and
/// routes: at build, and again when a test deletes and re-creates it.
pub fn b_side(d: &Namespace, b: &Namespace, d_mac: &str, queues: usize) {
    veth_queues(
        End { ns: d, name: "lrd1", mac: d_mac },
        End { ns: b, name: "lrb0", mac: B_MAC },
        queues,
    )
    .unwrap();
    b.addr("lrb0", "198.19.0.2/24").unwrap();
    b.ip(&["route", "add", "default", "via", "198.19.0.1"]).unwrap();
    b.ip(&["addr", "add", "2001:db8:b::2/64", "dev", "lrb0", "nodad"]).unwrap();
    b.ip(&["-6", "route", "add", "default", "via", "2001:db8:b::1"]).unwrap();
}

/// linerate's config for the DUT namespace: both interfaces on `backend`, IPv4 and IPv6,
/// neighbours resolved by ARP/NDP, then `extra` (e.g. a `[router]` or `[firewall]` table, or
/// more interfaces). Written to the lab's folder; returns its path.
pub fn write_config(lab: &Lab, backend: &str, extra: &str) -> PathBuf {
    let control = lab.dir.join("control.sock");
    let text = format!(
        r#"
[router]
control_socket = "{}"

[[interface]]
name = "lrd0"
addresses = ["198.18.0.1/24", "2001:db8:a::1/64"]
backend = "{backend}"

[[interface]]
name = "lrd1"
addresses = ["198.19.0.1/24", "2001:db8:b::1/64"]
backend = "{backend}"

{extra}
"#,
        control.display()
    );
    let path = lab.dir.join("router.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Gives linerate's `lrd1` (B's side) an IP MTU of `mtu` in the config at `cfg` (B's
/// kernel keeps 1500, which is fine for receiving fragments).
pub fn set_b_mtu(cfg: &std::path::Path, mtu: u16) {
    let lrd1 = "name = \"lrd1\"\naddresses = [\"198.19.0.1/24\", \"2001:db8:b::1/64\"]";
    let text = std::fs::read_to_string(cfg).unwrap();
    assert!(text.contains(lrd1), "{text}");
    std::fs::write(cfg, text.replace(lrd1, &format!("{lrd1}\nmtu = {mtu}"))).unwrap();
}

/// Stops a child on drop (SIGTERM, then SIGKILL), so a failing assertion leaves no process
/// behind.
pub struct Guard(pub Option<Child>);

impl Guard {
    /// Sends SIGTERM and hands the child over (to read its output).
    pub fn terminate(&mut self) -> Option<Child> {
        let child = self.0.take()?;
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        Some(child)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            lab::process::terminate(&mut child);
        }
    }
}

/// Starts `cmd` with its stdout piped and waits until a line of its stderr contains `ready`.
pub fn start_until(mut cmd: Command, ready: &str) -> Guard {
    cmd.stdout(Stdio::piped());
    let never = AtomicBool::new(false);
    match lab::process::wait_ready(cmd, ready, Duration::from_secs(20), &never) {
        Ok(child) => Guard(Some(child)),
        Err(e) => panic!("{e}"),
    }
}

/// A finished command's stdout and stderr, for messages.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Starts the lab's traffic program (`traffic.py` in its folder, written by the test) with
/// `args` in `ns` and waits until it says "ready".
pub fn traffic_listen(lab: &Lab, ns: &Namespace, args: &[&str]) -> Guard {
    let mut cmd = ns.command("python3");
    cmd.arg(lab.dir.join("traffic.py")).args(args);
    start_until(cmd, "ready")
}

/// Runs the lab's traffic program to its end in `ns`; its stdout.
pub fn traffic_run(lab: &Lab, ns: &Namespace, args: &[&str]) -> String {
    let out = ns.command("python3").arg(lab.dir.join("traffic.py")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The stdout of a started program once it has exited.
pub fn finish(mut g: Guard) -> String {
    let mut child = g.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let _ = child.wait();
    out.trim().to_owned()
}

/// The control socket's `stats` document (what `show drops`, `top` and the metrics read),
/// asked of the router listening on `socket`.
pub fn stats(socket: &std::path::Path) -> serde_json::Value {
    use std::io::{BufRead, Write};
    let mut c = std::os::unix::net::UnixStream::connect(socket).unwrap();
    c.write_all(b"stats\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(&c).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// A turn among the tests of a binary that drive traffic through a linerate pinned to the same
/// CPU: at most two run at once. More, and their workers share that CPU so thinly that one
/// descheduled past its ring loses a burst on a loaded machine (CI saw 64 of 4000 datagrams
/// lost, a local run 2219).
pub struct Turn;

static TURNS: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

pub fn turn() -> Turn {
    let mut taken = TURNS.0.lock().unwrap_or_else(|e| e.into_inner());
    while *taken >= 2 {
        taken = TURNS.1.wait(taken).unwrap_or_else(|e| e.into_inner());
    }
    *taken += 1;
    Turn
}

impl Drop for Turn {
    fn drop(&mut self) {
        *TURNS.0.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        TURNS.1.notify_one();
    }
}
