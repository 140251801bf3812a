//! Differential test of the stateless rule language against nftables: random pf rule sets
//! (prefixes, negations, lists, port operators and ranges, ICMP types, in/out, interfaces,
//! IPv4 and IPv6, quick and not, pass and block, up to 1000 rules) are compiled by linerate
//! (`fw::classifier`, the reference evaluator, and the tree through a verdict cache, which
//! answers packets by the classes of their fields) and, translated as `nft_diff` explains,
//! loaded into a namespace's kernel. Each packet goes through both: the kernel's verdict is
//! whether the packet, sent into the namespace on the interface standing for its direction
//! and interface, is forwarded out of its other side.
//!
//! Two namespaces `lrdiff<pid>g` (sender and receiver, python3 AF_PACKET sockets) and
//! `lrdiff<pid>d` (the kernel under test: forwarding, nftables on prerouting); removed on
//! drop. Needs root, nft and python3 (skips without). `LRDIFF_SEED=N` replays a seed.

use std::process::Command;

use fw::classifier::{BuildOptions, Classifier, Engine, VerdictCache};
use fw::packet::{Af, PacketKey};
use fw::reference::evaluate;
use fw::rules::{Action, parse};
use lab::topology::{End, Namespace, is_root, veth};

mod nft_diff;

use nft_diff::{Anchors, GenRule, PAIRS, Rng, kernel_iface};

const G_MAC: [u8; 6] = [2, 0, 0, 0, 0xd1, 0x01];
const D_MAC: [u8; 6] = [2, 0, 0, 0, 0xd1, 0x02];
const GW_MAC: &str = "02:00:00:00:d1:fe";

fn mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn usable() -> bool {
    let ok =
        |c: &str, a: &[&str]| Command::new(c).args(a).output().is_ok_and(|o| o.status.success());
    is_root() && ok("python3", &["-c", "pass"]) && ok("nft", &["--version"])
}

/// The DUT `d`: four input interfaces (one per pf direction and interface), one output
/// interface towards `g` with a permanent neighbour as the default gateway of both families.
struct Bench {
    g: Namespace,
    d: Namespace,
    dir: std::path::PathBuf,
}

impl Drop for Bench {
    /// The rule files stay after a failure, for the report.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn bench() -> Bench {
    let pid = std::process::id();
    let g = Namespace::create(&format!("lrdiff{pid}g")).unwrap();
    let d = Namespace::create(&format!("lrdiff{pid}d")).unwrap();
    for s in [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv6.conf.default.accept_dad=0",
    ] {
        d.sysctl(s).unwrap();
    }
    let (gm, dm) = (mac(G_MAC), mac(D_MAC));
    for &(dir, i) in &PAIRS {
        let dn = kernel_iface(dir, i);
        let gn = dn.replacen("lrd", "lrg", 1);
        veth(End { ns: &d, name: &dn, mac: &dm }, End { ns: &g, name: &gn, mac: &gm }).unwrap();
    }
    veth(End { ns: &d, name: "lrdeg", mac: &dm }, End { ns: &g, name: "lrgeg", mac: GW_MAC })
        .unwrap();
    d.addr("lrdeg", "192.0.2.1/24").unwrap();
    d.addr("lrdeg", "fdff::1/64").unwrap();
    d.ip(&["neigh", "add", "192.0.2.2", "lladdr", GW_MAC, "dev", "lrdeg", "nud", "permanent"])
        .unwrap();
    d.ip(&["-6", "neigh", "add", "fdff::2", "lladdr", GW_MAC, "dev", "lrdeg", "nud", "permanent"])
        .unwrap();
    d.ip(&["route", "add", "default", "via", "192.0.2.2"]).unwrap();
    d.ip(&["-6", "route", "add", "default", "via", "fdff::2"]).unwrap();
    let dir = std::env::temp_dir().join(format!("lrdiff{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    Bench { g, d, dir }
}

/// Sends the frames of a file (records: interface index, length, frame) on `lrg*` in order,
/// paced, while counting on `lrgeg` the test packets that come out; prints their ids.
const IO: &str = r#"
import socket, struct, sys, threading, time
data = open(sys.argv[1], 'rb').read()
names = sys.argv[2:]
tx = []
for n in names:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((n, 0)); tx.append(s)
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
rx.setsockopt(socket.SOL_SOCKET, 33, 1 << 25)  # SO_RCVBUFFORCE
rx.bind(('lrgeg', 0))
rx.settimeout(0.05)
seen = set()
done = [False]
def receive():
    idle = 0
    while True:
        try:
            f = rx.recv(4096)
        except socket.timeout:
            if done[0]:
                idle += 1
                if idle > 10:
                    return
            continue
        at = f.find(b'LRDF')
        if at >= 0:
            seen.add(struct.unpack('!I', f[at + 4:at + 8])[0])
t = threading.Thread(target=receive); t.start()
off = 0; n = 0
while off < len(data):
    i, l = struct.unpack('!BH', data[off:off + 3])
    tx[i].send(data[off + 3:off + 3 + l])
    off += 3 + l; n += 1
    if n % 50 == 0:
        time.sleep(0.002)
done[0] = True
t.join()
print(' '.join(map(str, sorted(seen))))
"#;

/// Sends `frames` (interface index, frame, id) through the kernel: the ids that came out.
fn through_kernel(b: &Bench, frames: &[(usize, Vec<u8>, u32)]) -> std::collections::HashSet<u32> {
    let mut data = Vec::new();
    for (i, f, _) in frames {
        data.push(*i as u8);
        data.extend_from_slice(&(f.len() as u16).to_be_bytes());
        data.extend_from_slice(f);
    }
    let path = b.dir.join("frames.bin");
    std::fs::write(&path, data).unwrap();
    let mut args = vec!["-c".to_owned(), IO.to_owned(), path.display().to_string()];
    args.extend(PAIRS.iter().map(|&(d, i)| kernel_iface(d, i).replacen("lrd", "lrg", 1)));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = b.g.exec("python3", &args).unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(|w| w.parse().unwrap()).collect()
}

fn ifaces(name: &str) -> Option<u16> {
    ["if0", "if1"].iter().position(|n| *n == name).map(|i| i as u16)
}

fn show(k: &PacketKey) -> String {
    let a = |x: u128| match k.af {
        Af::Inet => std::net::Ipv4Addr::from(x as u32).to_string(),
        Af::Inet6 => std::net::Ipv6Addr::from(x).to_string(),
    };
    format!(
        "{:?} if{} proto {} {}:{} -> {}:{}",
        k.dir,
        k.iface,
        k.proto,
        a(k.src),
        k.src_port,
        a(k.dst),
        k.dst_port
    )
}

/// One round: `n_rules` random rules, `n_packets` packets; returns the disagreements.
fn round(b: &Bench, seed: u64, n_rules: usize, n_packets: usize, sparse: bool) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    // Rules of one site name a few dozen networks, not one per rule.
    let anchors = Anchors::new(&mut rng, (1 + n_rules / 4).min(24));
    let rules: Vec<GenRule> =
        (0..n_rules).map(|_| nft_diff::rule(&mut rng, &anchors, sparse)).collect();
    let text: String = rules.iter().map(|r| r.pf() + "\n").collect();
    let rs = parse(&text, std::path::Path::new("diff.conf"), &ifaces)
        .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
    let t = std::time::Instant::now();
    let cl = Classifier::build(&rs).unwrap_or_else(|e| panic!("seed {seed}, {n_rules} rules: {e}"));
    eprintln!("{n_rules} rules: classifier built in {:?}", t.elapsed());
    // The tree whatever the size, through a small verdict cache: packets answered from
    // entries other packets of their classes made are checked against the kernel too.
    let tree = Classifier::build_with(
        &rs,
        &BuildOptions { engine: Engine::Tree, ..BuildOptions::default() },
    )
    .unwrap();
    let cache = std::cell::RefCell::new(VerdictCache::new(256, seed));
    let script = nft_diff::nft_script(&rules);
    let nft_path = b.dir.join("rules.nft");
    std::fs::write(&nft_path, &script).unwrap();
    std::fs::write(b.dir.join("rules.conf"), &text).unwrap();
    let loaded = b.d.exec("nft", &["-f", &nft_path.display().to_string()]);
    assert!(loaded.is_ok(), "seed {seed}: nft refused the translation: {loaded:?}");
    let edges = nft_diff::port_edges(&rules);
    let keys: Vec<PacketKey> =
        (0..n_packets).map(|_| nft_diff::packet(&mut rng, &anchors, &edges)).collect();
    let frame = |id: usize| {
        let k = &keys[id];
        let i = PAIRS.iter().position(|&(d, f)| d == k.dir && f == k.iface).unwrap();
        (i, nft_diff::frame(k, id as u32, D_MAC, G_MAC), id as u32)
    };
    let frames: Vec<_> = (0..keys.len()).map(frame).collect();
    let mut passed = through_kernel(b, &frames);
    let want = |id: usize| {
        let v = cl.classify(&keys[id]);
        assert_eq!(
            v.action,
            evaluate(&rs, &keys[id]).action,
            "seed {seed}: classifier and reference disagree on {}",
            show(&keys[id])
        );
        let cached = cache.borrow_mut().lookup(&tree, &keys[id]);
        assert_eq!(
            cached.action,
            v.action,
            "seed {seed}: the tree through the verdict cache disagrees on {}",
            show(&keys[id])
        );
        v.action == Action::Pass
    };
    // A packet the kernel lost (a full queue) looks blocked: those are sent again, alone.
    for _ in 0..3 {
        let missing: Vec<_> = (0..keys.len())
            .filter(|&id| want(id) && !passed.contains(&(id as u32)))
            .map(frame)
            .collect();
        if missing.is_empty() {
            break;
        }
        passed.extend(through_kernel(b, &missing));
    }
    let mut bad = Vec::new();
    let n_pass = (0..keys.len()).filter(|&id| want(id)).count();
    let c = cache.borrow().counters();
    eprintln!(
        "{n_rules} rules ({} nftables rules): {n_pass} of {} packets pass, {} through the kernel; the cached tree: {} hits ({} by class)",
        script.lines().count() - 6,
        keys.len(),
        passed.len(),
        c.hits,
        c.class_hits
    );
    for (id, k) in keys.iter().enumerate() {
        let (lr, kernel) = (want(id), passed.contains(&(id as u32)));
        if lr != kernel {
            let v = cl.classify(k);
            let rule = v
                .rule
                .map_or("default".to_owned(), |i| text.lines().nth(i).unwrap_or("?").to_owned());
            bad.push(format!(
                "seed {seed}: {}: linerate {} (rule {rule}), nftables {}",
                show(k),
                if lr { "passes" } else { "blocks" },
                if kernel { "passes" } else { "blocks" }
            ));
        }
    }
    bad
}

#[test]
fn stateless_verdicts_match_nftables() {
    if !usable() {
        lab::topology::skip_test("needs root, python3 and nft");
        return;
    }
    let b = bench();
    let base =
        std::env::var("LRDIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
                as u64
        });
    let mut bad = Vec::new();
    let mut total = 0;
    for (k, &(rules, packets, sparse)) in [
        (5, 1000, false),
        (20, 1000, false),
        (100, 1500, false),
        (300, 1500, false),
        (1000, 2000, true),
    ]
    .iter()
    .enumerate()
    {
        let seed = base.wrapping_add(k as u64);
        bad.extend(round(&b, seed, rules, packets, sparse));
        total += packets;
    }
    assert!(
        bad.is_empty(),
        "{} of {total} packets disagree (first 20; files in {}):\n{}",
        bad.len(),
        b.dir.display(),
        bad[..bad.len().min(20)].join("\n")
    );
}
