//! `block return` end to end, host A -> linerate (namespace D) -> host B, with the kernel's
//! own sockets: a TCP connect from A to a port of B that linerate blocks with `block return`
//! is refused at once (linerate's reset; B listens on that port, so the refusal cannot be
//! B's), a datagram to a blocked UDP port makes A's connected socket report ECONNREFUSED
//! (linerate's ICMP port unreachable), over IPv4 and IPv6; ports no rule blocks still
//! connect. linerate's exit report counts the resets and the unreachables.
//!
//! Needs root and python3 (skips without). Namespaces `lr<pid>r<host>` are removed on drop.

use std::io::Read;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{Lab, build, start_until, write_config};

fn usable() -> bool {
    is_root() && Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

/// TCP servers on B (both families) on 8080 and 8099, and UDP receivers on 9999.
const SERVER: &str = r#"
import socket, threading
def tcp(fam, addr, port):
    s = socket.socket(fam)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(16)
    while True:
        c, _ = s.accept(); c.sendall(b'hello\n'); c.close()
def udp(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, 9999))
    while True:
        s.recvfrom(2048)
for fam, addr in ((socket.AF_INET, '198.19.0.2'), (socket.AF_INET6, '2001:db8:b::2')):
    for p in (8080, 8099):
        threading.Thread(target=tcp, args=(fam, addr, p), daemon=True).start()
    threading.Thread(target=udp, args=(fam, addr), daemon=True).start()
import sys; print('ready', file=sys.stderr, flush=True)
threading.Event().wait()
"#;

/// From A: for each case, what happened and how long it took (seconds).
const CLIENT: &str = r#"
import socket, time
def tcp(addr, port):
    t = time.time()
    try:
        s = socket.create_connection((addr, port), timeout=5)
        s.settimeout(2)
        return ('connected' if s.recv(16) == b'hello\n' else 'bad', time.time() - t)
    except ConnectionRefusedError:
        return ('refused', time.time() - t)
    except socket.timeout:
        return ('timeout', time.time() - t)
def udp(addr):
    fam = socket.AF_INET6 if ':' in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.connect((addr, 9999))
    s.settimeout(2)
    t = time.time()
    try:
        s.send(b'x')
        s.recv(16)
        return ('answered', time.time() - t)
    except ConnectionRefusedError:
        return ('refused', time.time() - t)
    except socket.timeout:
        return ('timeout', time.time() - t)
for name, (what, secs) in (
    ('tcp4-8080', tcp('198.19.0.2', 8080)), ('tcp4-8099', tcp('198.19.0.2', 8099)),
    ('tcp6-8080', tcp('2001:db8:b::2', 8080)), ('tcp6-8099', tcp('2001:db8:b::2', 8099)),
    ('udp4', udp('198.19.0.2')), ('udp6', udp('2001:db8:b::2'))):
    print(name, what, '%.3f' % secs)
"#;

#[test]
fn block_return_refuses_tcp_and_udp_at_once() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab: Lab = build("r");
    let rules = "block return in on lrd0 proto tcp to port 8099\nblock return in on lrd0 proto udp to port 9999\n";
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER]);
    let _server = start_until(server, "ready");
    // IPv6 neighbours first, so that no case waits for address resolution.
    let _ = lab.a.exec("ping", &["-6", "-c", "1", "-W", "2", "2001:db8:b::2"]);
    let out = lab.a.exec("python3", &["-c", CLIENT]).unwrap();
    let got = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{got}");
    let mut child = dut.terminate().unwrap();
    let mut report = String::new();
    child.stdout.take().unwrap().read_to_string(&mut report).unwrap();
    assert!(child.wait().unwrap().success(), "{report}");
    let result = |name: &str| -> (String, f64) {
        let l = got
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {got}"));
        let f: Vec<&str> = l.split_whitespace().collect();
        (f[1].to_owned(), f[2].parse().unwrap())
    };
    for name in ["tcp4-8080", "tcp6-8080"] {
        assert_eq!(result(name).0, "connected", "{got}\n{report}");
    }
    for name in ["tcp4-8099", "tcp6-8099", "udp4", "udp6"] {
        let (what, secs) = result(name);
        assert_eq!(what, "refused", "{name}: {got}\n{report}");
        assert!(secs < 1.0, "{name} refused at once, not after a timeout: {secs} s\n{got}");
    }
    // Counted: resets (one per SYN: the refused connects do not retransmit) and unreachables.
    let count = |label: &str| -> u64 {
        let at = report.find(label).unwrap_or_else(|| panic!("{label}: {report}"));
        report[at + label.len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(count("block return resets ") >= 2, "{report}");
    assert!(count("block return unreachables ") >= 2, "{report}");
}
