//! pf's `modulate state` end to end, host A -> linerate (namespace D) -> host B, with real
//! kernel TCP stacks: A's connections to B pass `pass in on lrd0 proto tcp modulate state`;
//! the SYN B receives carries another initial sequence number than the one A sent, and a
//! few MB each way (A's data to B, then B's to A on a connection A opens) arrive intact
//! (length and SHA-256), with no packet dropped out of window.
//!
//! Needs root and python3 (skips without). Namespaces `lr<pid><tag><host>` are removed on
//! drop.

use std::io::Read;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{build, finish, start_until, text, traffic_listen, traffic_run, write_config};

/// `serve HOST PORT` (prints bytes and SHA-256 of what it receives), `send HOST PORT BYTES`
/// (prints the same of what it sends), `give HOST PORT BYTES` (a server sending BYTES to its
/// one client), `fetch HOST PORT` (reads all), `sniff IFACE PORT` (prints the sequence
/// number of the first SYN to PORT seen on IFACE).
const TRAFFIC: &str = r#"
import hashlib, random, socket, sys
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def ready():
    sys.stderr.write('ready\n'); sys.stderr.flush()
def listener():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(60); ready()
    c, _ = s.accept(); c.settimeout(60); return c
def drain(c):
    h = hashlib.sha256(); n = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        h.update(b); n += len(b)
    print(n, h.hexdigest(), flush=True)
if mode == 'serve':
    drain(listener())
elif mode == 'send':
    data = random.Random(port).randbytes(int(sys.argv[4]))
    c = socket.create_connection((host, port), timeout=60); c.sendall(data); c.close()
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
elif mode == 'give':
    data = random.Random(port).randbytes(int(sys.argv[4]))
    c = listener(); c.sendall(data); c.close()
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
elif mode == 'fetch':
    drain(socket.create_connection((host, port), timeout=60))
elif mode == 'sniff':
    # ETH_P_ALL: a socket of one protocol does not see the host's own outgoing frames.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((host, 0))
    s.settimeout(30); ready()
    while True:
        f = s.recv(65535); ip = f[14:]; t = ip[(ip[0] & 15) * 4:]
        if f[12:14] == b'\x08\x00' and ip[9] == 6 and int.from_bytes(t[2:4], 'big') == port and t[13] & 0x12 == 0x02:
            print(int.from_bytes(t[4:8], 'big'), flush=True); break
"#;

const MB: usize = 1 << 20;

fn usable() -> bool {
    is_root() && Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

#[test]
fn tcp_through_modulate_state() {
    if !usable() {
        eprintln!("skipped: needs root and python3");
        return;
    }
    let lab = build("mo");
    std::fs::write(lab.dir.join("traffic.py"), TRAFFIC).unwrap();
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    let rules = "block all\npass in on lrd0 proto tcp modulate state\npass out on lrd1 proto tcp\npass proto icmp\n";
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");
    let ping = text(&lab.a.command("ping").args(["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]).output().unwrap());
    assert!(!ping.contains(" 0 received"), "{ping}");

    // A's data to B; the SYN seen on each side.
    let (sniff_a, sniff_b) = (traffic_listen(&lab, &lab.a, &["sniff", "lra0", "5101"]), traffic_listen(&lab, &lab.b, &["sniff", "lrb0", "5101"]));
    let server = traffic_listen(&lab, &lab.b, &["serve", "198.19.0.2", "5101"]);
    let sent = traffic_run(&lab, &lab.a, &["send", "198.19.0.2", "5101", &(4 * MB).to_string()]);
    assert_eq!(finish(server), sent, "A's data as B received it");
    let (isn_a, isn_b) = (finish(sniff_a), finish(sniff_b));
    assert!(!isn_a.is_empty() && !isn_b.is_empty(), "both sniffers saw the SYN: {isn_a:?} {isn_b:?}");
    assert_ne!(isn_a, isn_b, "B sees another initial sequence number than A sent");

    // B's data to A, on a connection A opens.
    let server = traffic_listen(&lab, &lab.b, &["give", "198.19.0.2", "5102", &(4 * MB).to_string()]);
    let got = traffic_run(&lab, &lab.a, &["fetch", "198.19.0.2", "5102"]);
    assert_eq!(got, finish(server), "B's data as A received it");

    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    assert!(!out.lines().any(|l| l.trim().starts_with("drop state_out_of_window")), "{out}");
}
