//! The firewall end to end: host A -> linerate (namespace D) -> host B, with a rule file that
//! blocks UDP port 9999; `linerate reload` swaps in rules that pass it; a bad rule file is
//! refused with its position and the running rules stay. Needs root (skips without).
//! Namespaces are named `lr<pid>f<host>` and removed on drop.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{Lab, build, start_until, write_config};

fn config(lab: &Lab) -> PathBuf {
    write_config(lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n")
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
    let lab = build("f");
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
