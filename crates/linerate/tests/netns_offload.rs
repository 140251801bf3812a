//! Senders on the same host with their offloads on (the kernel's defaults on veth: tx
//! checksumming, TSO, GSO, USO), through `linerate run`, once per backend: their TCP/UDP
//! checksums arrive partial and, over AF_PACKET, their TCP and UDP GSO frames arrive whole
//! (up to 64 KiB). linerate must finish the checksums and cut the frames (`io::offload`).
//!
//! Real kernel sockets (python3): a few MB of TCP each way across linerate, checked byte for
//! byte by SHA-256, with a 1400-byte MTU on B's side so that A's 1500-byte segments take the
//! too-big path (ICMP frag-needed, path MTU discovery); TCP to the router's own address
//! through its TAP; a UDP_SEGMENT send cut into datagrams. Needs root; without it each test
//! says "skipped" and passes.

use lab::topology::is_root;

mod common;

use common::{Lab, build, finish, start_until, text, traffic_listen, traffic_run, write_config};

/// The traffic programs: `serve HOST PORT` (prints bytes and SHA-256 of what it receives),
/// `send HOST PORT BYTES` (prints the same of what it sends), `udprecv HOST PORT COUNT`,
/// `udpsend HOST PORT` (UDP_SEGMENT: 10 sends of 4 datagrams of 1000 bytes).
const TRAFFIC: &str = r#"
import hashlib, random, socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ':' in host else socket.AF_INET
def ready():
    sys.stderr.write('ready\n'); sys.stderr.flush()
if mode == 'serve':
    s = socket.socket(fam); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(60); ready()
    c, _ = s.accept(); c.settimeout(60); h = hashlib.sha256(); n = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        h.update(b); n += len(b)
    print(n, h.hexdigest(), flush=True)
elif mode == 'send':
    data = random.Random(port).randbytes(int(sys.argv[4]))
    c = socket.create_connection((host, port), timeout=60); c.sendall(data); c.close()
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
elif mode == 'udprecv':
    s = socket.socket(fam, socket.SOCK_DGRAM); s.bind((host, port)); s.settimeout(5); ready()
    good = 0
    try:
        while good < int(sys.argv[4]):
            b = s.recv(65536)
            i = int.from_bytes(b[:4], 'big')
            good += len(b) == 1000 and b == (i.to_bytes(4, 'big') * 250)
    except socket.timeout:
        pass
    print(good, flush=True)
elif mode == 'udpsend':
    s = socket.socket(fam, socket.SOCK_DGRAM); s.setsockopt(socket.SOL_UDP, 103, 1000)
    for k in range(10):
        s.sendto(b''.join((4 * k + j).to_bytes(4, 'big') * 250 for j in range(4)), (host, port))
        time.sleep(0.01)
"#;

const MB: usize = 1 << 20;

/// `bytes` of TCP from `from` to `to_addr` (a listener in `to`): both ends must agree on
/// length and SHA-256.
fn tcp_transfer(
    lab: &Lab,
    backend: &str,
    from: &lab::topology::Namespace,
    to: &lab::topology::Namespace,
    to_addr: &str,
    port: u16,
    bytes: usize,
) {
    let port = port.to_string();
    let server = traffic_listen(lab, to, &["serve", to_addr, &port]);
    let sent = traffic_run(lab, from, &["send", to_addr, &port, &bytes.to_string()]);
    let got = finish(server);
    assert!(sent.starts_with(&bytes.to_string()), "{backend}: sender said {sent:?}");
    assert_eq!(got, sent, "{backend}: TCP to {to_addr}: received (bytes, sha256) differ from sent");
}

/// The offloads the test relies on, on A's veth (before linerate starts: native XDP turns
/// TSO off on the peer).
fn assert_offloads_on(lab: &Lab) {
    let k = text(&lab.a.exec("ethtool", &["-k", "lra0"]).unwrap());
    for feature in
        ["tx-checksumming: on", "tcp-segmentation-offload: on", "generic-segmentation-offload: on"]
    {
        assert!(k.contains(feature), "A's veth lacks {feature}:\n{k}");
    }
}

fn offloads_on(backend: &str, tag: &str) {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build(tag);
    std::fs::write(lab.dir.join("traffic.py"), TRAFFIC).unwrap();
    assert_offloads_on(&lab);
    let cfg = write_config(&lab, backend, "");
    common::set_b_mtu(&cfg, 1400);
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = start_until(linerate, "forwarding with");
    // Resolve B first, so the UDP test's datagrams do not wait for ARP (on a loaded machine
    // the first echo may time out: one reply is enough).
    let ping = text(
        &lab.a
            .command("ping")
            .args(["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"])
            .output()
            .unwrap(),
    );
    assert!(!ping.contains(" 0 received"), "{backend}: {ping}");

    tcp_transfer(&lab, backend, &lab.a, &lab.b, "198.19.0.2", 5001, 4 * MB);
    tcp_transfer(&lab, backend, &lab.b, &lab.a, "198.18.0.2", 5002, 4 * MB);
    tcp_transfer(&lab, backend, &lab.a, &lab.b, "2001:db8:b::2", 5003, 2 * MB);
    // The router's own address: a listener on its TAP in D, reached through linerate.
    tcp_transfer(&lab, backend, &lab.a, &lab.d, "198.18.0.1", 5004, 2 * MB);
    let udp = traffic_listen(&lab, &lab.b, &["udprecv", "198.19.0.2", "9999", "40"]);
    traffic_run(&lab, &lab.a, &["udpsend", "198.19.0.2", "9999"]);
    assert_eq!(finish(udp), "40", "{backend}: UDP datagrams of 1000 bytes, intact, seen in B");

    let child = dut.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    let summary = text(&out);
    assert!(out.status.success(), "{backend}: linerate exited with {}: {summary}", out.status);
    for reason in ["offload_malformed", "gso_unsupported"] {
        assert!(
            !summary.lines().any(|l| l.trim().starts_with(&format!("drop {reason}"))),
            "{backend}: {reason}:\n{summary}"
        );
    }
    // A's 1500-byte segments do not fit B's 1400-byte link: linerate said so (too big) and
    // A's TCP went on with smaller ones.
    assert!(
        summary.lines().any(|l| l.trim().starts_with("drop too_big")),
        "{backend}: no too_big drop:\n{summary}"
    );
}

#[test]
fn offloads_on_with_af_packet() {
    offloads_on("af_packet", "op");
}

#[test]
fn offloads_on_with_af_xdp() {
    offloads_on("af_xdp", "ox");
}
