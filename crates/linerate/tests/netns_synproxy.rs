//! pf's `synproxy state` end to end, host A -> linerate (namespace D) -> host B, with real
//! kernel TCP stacks, under `block all` and one `pass in on lrd0 proto tcp to B port ...
//! synproxy state`: 4 MB each way over IPv4 and 4 MB over IPv6 arrive intact (length and
//! SHA-256); the SYN B receives carries A's initial sequence number (the router sends it
//! only after A completed the router's handshake); and SYNs with no follow-up (a raw
//! socket's, which A's kernel answers with a reset) get the router's SYN-ACK while B sees
//! nothing at all of them.
//!
//! Needs root and python3 (skips without). Namespaces `lr<pid><tag><host>` are removed on
//! drop.

use std::io::Read;
use std::process::Command;

use lab::topology::is_root;

mod common;

use common::{build, finish, start_until, text, traffic_listen, traffic_run, write_config};

/// `serve HOST PORT`, `send HOST PORT BYTES`, `give HOST PORT BYTES`, `fetch HOST PORT` as in
/// netns_modulate; `sniff IFACE PORT` (the sequence number of the first SYN to PORT);
/// `count IFACE PORT SECS` (for SECS seconds: segments to PORT, and SYN-ACKs from it);
/// `syn SRC DST PORT` (three bare SYNs from a raw socket, nothing after).
const TRAFFIC: &str = r#"
import hashlib, random, socket, struct, sys, time
mode = sys.argv[1]
def ready():
    sys.stderr.write('ready\n'); sys.stderr.flush()
def listener(host, port):
    s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(60); ready()
    c, _ = s.accept(); c.settimeout(60); return c
def drain(c):
    h = hashlib.sha256(); n = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        h.update(b); n += len(b)
    print(n, h.hexdigest(), flush=True)
def tcp_of(f):
    if f[12:14] == b'\x08\x00' and f[23] == 6:
        return f[14 + (f[14] & 15) * 4:]
    if f[12:14] == b'\x86\xdd' and f[20] == 6:
        return f[54:]
    return None
if mode == 'serve':
    drain(listener(sys.argv[2], int(sys.argv[3])))
elif mode == 'send':
    data = random.Random(int(sys.argv[3])).randbytes(int(sys.argv[4]))
    c = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=60); c.sendall(data); c.close()
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
elif mode == 'give':
    data = random.Random(int(sys.argv[3])).randbytes(int(sys.argv[4]))
    c = listener(sys.argv[2], int(sys.argv[3])); c.sendall(data); c.close()
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
elif mode == 'fetch':
    drain(socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=60))
elif mode in ('sniff', 'count'):
    port = int(sys.argv[3])
    # ETH_P_ALL: a socket of one protocol does not see the host's own outgoing frames.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((sys.argv[2], 0))
    s.settimeout(0.2); ready()
    end = time.time() + (float(sys.argv[4]) if mode == 'count' else 30)
    to, synacks = 0, 0
    while time.time() < end:
        try:
            t = tcp_of(s.recv(65535))
        except socket.timeout:
            continue
        if t is None:
            continue
        if int.from_bytes(t[2:4], 'big') == port:
            to += 1
            if mode == 'sniff' and t[13] & 0x12 == 0x02:
                print(int.from_bytes(t[4:8], 'big'), flush=True); sys.exit(0)
        if int.from_bytes(t[0:2], 'big') == port and t[13] & 0x12 == 0x12:
            synacks += 1
    print('to', to, 'synacks', synacks, flush=True)
elif mode == 'syn':
    src, dst, port = sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    t = struct.pack('!HHIIBBHHH', 40404, port, 12345, 0, 5 << 4, 2, 65535, 0, 0)
    d = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, 6, len(t)) + t
    c = sum(int.from_bytes(d[i:i + 2], 'big') for i in range(0, len(d), 2))
    while c >> 16:
        c = (c & 0xffff) + (c >> 16)
    t = t[:16] + struct.pack('!H', ~c & 0xffff) + t[18:]
    for _ in range(3):
        s.sendto(t, (dst, 0)); time.sleep(0.3)
    print('sent', flush=True)
"#;

const MB: usize = 1 << 20;

fn usable() -> bool {
    is_root() && Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

#[test]
fn tcp_through_synproxy_state() {
    if !usable() {
        eprintln!("skipped: needs root and python3");
        return;
    }
    let lab = build("sp");
    std::fs::write(lab.dir.join("traffic.py"), TRAFFIC).unwrap();
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    let rules = "block all\n\
                 pass in on lrd0 proto tcp to { 198.19.0.2, 2001:db8:b::2 } port { 5301, 5302, 5303 } synproxy state\n\
                 pass proto icmp\npass proto icmp6\n";
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(linerate, "forwarding with");
    let ping = text(&lab.a.command("ping").args(["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]).output().unwrap());
    assert!(!ping.contains(" 0 received"), "{ping}");
    let ping = text(&lab.a.command("ping").args(["-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:b::2"]).output().unwrap());
    assert!(!ping.contains(" 0 received"), "{ping}");

    // A's data to B; the SYN seen on each side.
    let (sniff_a, sniff_b) = (traffic_listen(&lab, &lab.a, &["sniff", "lra0", "5301"]), traffic_listen(&lab, &lab.b, &["sniff", "lrb0", "5301"]));
    let server = traffic_listen(&lab, &lab.b, &["serve", "198.19.0.2", "5301"]);
    let sent = traffic_run(&lab, &lab.a, &["send", "198.19.0.2", "5301", &(4 * MB).to_string()]);
    assert_eq!(finish(server), sent, "A's data as B received it");
    let (isn_a, isn_b) = (finish(sniff_a), finish(sniff_b));
    assert!(!isn_a.is_empty(), "A's SYN seen");
    assert_eq!(isn_b, isn_a, "B's SYN (the router's) carries A's initial sequence number");

    // B's data to A, on a connection A opens (B's numbers shifted to the router's).
    let server = traffic_listen(&lab, &lab.b, &["give", "198.19.0.2", "5302", &(4 * MB).to_string()]);
    let got = traffic_run(&lab, &lab.a, &["fetch", "198.19.0.2", "5302"]);
    assert_eq!(got, finish(server), "B's data as A received it");

    // The same over IPv6.
    let server = traffic_listen(&lab, &lab.b, &["serve", "2001:db8:b::2", "5301"]);
    let sent = traffic_run(&lab, &lab.a, &["send", "2001:db8:b::2", "5301", &(4 * MB).to_string()]);
    assert_eq!(finish(server), sent, "A's data over IPv6 as B received it");

    // SYNs with no follow-up: answered by the router, never seen by B.
    let seen_b = traffic_listen(&lab, &lab.b, &["count", "lrb0", "5303", "3"]);
    let seen_a = traffic_listen(&lab, &lab.a, &["count", "lra0", "5303", "3"]);
    assert_eq!(traffic_run(&lab, &lab.a, &["syn", "198.18.0.2", "198.19.0.2", "5303"]), "sent");
    let (seen_a, seen_b) = (finish(seen_a), finish(seen_b));
    assert_eq!(seen_b, "to 0 synacks 0", "B saw nothing of the unanswered SYNs");
    let n: Vec<u32> = seen_a.split(' ').filter_map(|w| w.parse().ok()).collect();
    // To the port: the three SYNs, and the resets A's kernel answers the SYN-ACKs with.
    assert!(n.len() == 2 && n[0] >= 3 && n[1] >= 3, "A's SYNs left and the router answered each: {seen_a}");

    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    assert!(!out.lines().any(|l| l.trim().starts_with("drop state_out_of_window")), "{out}");
    assert!(out.lines().any(|l| l.trim().starts_with("drop synproxy")), "the proxy's drops counted: {out}");
}
