//! TCP through linerate with real kernel stacks: the traffic program the `modulate state`
//! and `synproxy state` tests share, and the checks they share.

use std::io::Read;
use std::process::Command;

use lab::topology::is_root;

use super::{Guard, Lab, finish, traffic_listen, traffic_run};

/// Written as the lab's `traffic.py`. `serve HOST PORT` (prints bytes and SHA-256 of what it
/// receives), `send HOST PORT BYTES` (prints the same of what it sends), `give HOST PORT
/// BYTES` (a server sending BYTES to its one client), `fetch HOST PORT` (reads all), `sniff
/// IFACE PORT` (the sequence number of the first SYN to PORT), `count IFACE PORT SECS` (for
/// SECS seconds: segments to PORT, and SYN-ACKs from it), `syn SRC DST PORT` (three bare
/// SYNs from a raw socket, nothing after). IPv4 or IPv6 by the host's address.
pub const TRAFFIC: &str = r#"
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

pub const MB: usize = 1 << 20;

/// Root and python3, which these tests need.
pub fn usable() -> bool {
    is_root() && Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

/// `bytes` from A to B at `host:to_b`, then `bytes` from B to A on a connection A opens to
/// `host:to_a`, each checked by length and SHA-256.
pub fn both_ways(lab: &Lab, host: &str, to_b: u16, to_a: u16, bytes: usize) {
    let server = traffic_listen(lab, &lab.b, &["serve", host, &to_b.to_string()]);
    let sent = traffic_run(lab, &lab.a, &["send", host, &to_b.to_string(), &bytes.to_string()]);
    assert_eq!(finish(server), sent, "A's data as B received it");
    let server =
        traffic_listen(lab, &lab.b, &["give", host, &to_a.to_string(), &bytes.to_string()]);
    let got = traffic_run(lab, &lab.a, &["fetch", host, &to_a.to_string()]);
    assert_eq!(got, finish(server), "B's data as A received it");
}

/// Stops linerate, checks that it exited cleanly having dropped nothing out of window, and
/// returns its exit report.
pub fn stop_with_no_window_drops(mut dut: Guard) -> String {
    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    assert!(!out.lines().any(|l| l.trim().starts_with("drop state_out_of_window")), "{out}");
    out
}
