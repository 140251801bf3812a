//! The firewall end to end: host A -> linerate (namespace D) -> host B, with a rule file that
//! blocks UDP port 9999; `linerate reload` swaps in rules that pass it; a bad rule file is
//! refused with its position and the running rules stay. Needs root (skips without).
//! Namespaces are named `lr<pid>f<host>` and removed on drop.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use lab::topology::{End, Namespace, is_root, veth};

const A_MAC: &str = "02:00:00:00:0a:01";
const B_MAC: &str = "02:00:00:00:0b:01";

struct Lab {
    a: Namespace,
    d: Namespace,
    b: Namespace,
    dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn build() -> Lab {
    let pid = std::process::id();
    let ns = |host: &str| Namespace::create(&format!("lr{pid}f{host}")).unwrap();
    let (a, d, b) = (ns("a"), ns("d"), ns("b"));
    veth(End { ns: &a, name: "lra0", mac: A_MAC }, End { ns: &d, name: "lrd0", mac: "02:00:00:00:0d:00" }).unwrap();
    veth(End { ns: &d, name: "lrd1", mac: "02:00:00:00:0d:01" }, End { ns: &b, name: "lrb0", mac: B_MAC }).unwrap();
    a.addr("lra0", "198.18.0.2/24").unwrap();
    a.ip(&["route", "add", "default", "via", "198.18.0.1"]).unwrap();
    b.addr("lrb0", "198.19.0.2/24").unwrap();
    b.ip(&["route", "add", "default", "via", "198.19.0.1"]).unwrap();
    d.addr("lrd0", "198.18.0.1/24").unwrap();
    d.addr("lrd1", "198.19.0.1/24").unwrap();
    d.sysctl("net.ipv4.ip_forward=0").unwrap();
    let dir = std::env::temp_dir().join(format!("lr-netns-fw-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    Lab { a, d, b, dir }
}

fn config(lab: &Lab) -> PathBuf {
    let sock = lab.dir.join("control.sock");
    let text = format!(
        r#"
[router]
control_socket = "{}"

[[interface]]
name = "lrd0"
addresses = ["198.18.0.1/24"]
backend = "af_packet"

[[interface]]
name = "lrd1"
addresses = ["198.19.0.1/24"]
backend = "af_packet"

[[neighbour]]
address = "198.18.0.2"
mac = "{A_MAC}"

[[neighbour]]
address = "198.19.0.2"
mac = "{B_MAC}"

[firewall]
rules = "rules.conf"
"#,
        sock.display()
    );
    let path = lab.dir.join("router.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Kills a child on drop (SIGTERM first), so a failing assertion leaves no process behind.
struct Guard(Option<Child>);

impl Guard {
    fn terminate(&mut self) -> Option<Child> {
        let child = self.0.take()?;
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        Some(child)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.terminate() {
            std::thread::sleep(Duration::from_millis(200));
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn start_until(mut cmd: Command, ready: &str) -> Guard {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let ready = ready.to_owned();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(&ready) {
                let _ = tx.send(Ok(()));
            }
        }
        let _ = tx.send(Err(seen));
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(())) => Guard(Some(child)),
        other => panic!("{cmd:?} did not become ready: {other:?}"),
    }
}

fn send_udp(lab: &Lab, tag: &str) {
    let udp = format!("for i in 1 2 3; do echo {tag}-$i > /dev/udp/198.19.0.2/9999; sleep 0.05; done");
    lab.a.exec("bash", &["-c", &udp]).unwrap();
}

fn ping(lab: &Lab) -> bool {
    lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok()
}

fn reload(cfg: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_linerate")).args(["reload", "-c"]).arg(cfg).output().unwrap()
}

/// UDP payload prefixes seen in the capture.
fn udp_payloads(pcap: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for rec in io::pcap::read_file(pcap).unwrap() {
        let Ok(eth) = wire::EthernetFrame::new_checked(&rec.data[..]) else { continue };
        if eth.ethertype() != wire::EtherType::Ipv4 {
            continue;
        }
        let ip = wire::Ipv4Packet::new_checked(eth.payload()).unwrap();
        if ip.protocol() == wire::IpProtocol::Udp {
            let u = wire::UdpPacket::new_checked(ip.payload()).unwrap();
            out.push(String::from_utf8_lossy(u.payload()).trim().to_owned());
        }
    }
    out
}

#[test]
fn rules_block_then_reload_passes_and_bad_file_is_refused() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let lab = build();
    let cfg = config(&lab);
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "block in quick proto udp to port 9999 label \"no9999\"\n").unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");
    let sock = lab.dir.join("control.sock");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "control socket mode");

    let pcap = lab.dir.join("b.pcap");
    let mut tcpdump = lab.b.command("tcpdump");
    tcpdump.args(["-i", "lrb0", "-n", "-U", "--immediate-mode", "-w"]).arg(&pcap).arg("udp");
    let mut capture = start_until(tcpdump, "listening on");

    send_udp(&lab, "blocked");
    assert!(ping(&lab), "ping must pass the first rule set");

    std::fs::write(&rules, "pass in quick proto udp to port 9999 no state\nblock in quick proto udp\n").unwrap();
    let out = reload(&cfg);
    assert!(out.status.success(), "reload: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok: 2 rules");
    send_udp(&lab, "passed");

    std::fs::write(&rules, "pass in quick proto udp to port 9999 no state\npass in on lrd9\n").unwrap();
    let out = reload(&cfg);
    assert!(!out.status.success(), "a bad rule file must be refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rules.conf:2:12:") && err.contains("lrd9"), "{err}");
    send_udp(&lab, "kept");
    assert!(ping(&lab), "ping after the refused reload");
    std::thread::sleep(Duration::from_millis(300));

    let mut tcpdump = capture.terminate().unwrap();
    tcpdump.wait().unwrap();
    let mut stdout = String::new();
    let mut linerate = dut.terminate().unwrap();
    linerate.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(linerate.wait().unwrap().success(), "{stdout}");
    assert!(!sock.exists(), "the control socket is removed at exit");

    let seen = udp_payloads(&pcap);
    let count = |tag: &str| seen.iter().filter(|p| p.starts_with(tag)).count();
    assert_eq!((count("blocked"), count("passed"), count("kept")), (0, 3, 3), "{seen:?}\n{stdout}");
    let blocked = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("drop filter_blocked").map(|n| n.trim().parse::<u64>().unwrap()))
        .unwrap_or(0);
    assert_eq!(blocked, 3, "{stdout}");
    assert!(stdout.contains("states: in_use"), "{stdout}");
}
