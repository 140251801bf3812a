//! `linerate gen` and `linerate rcv` counted against each other on a veth pair, for each
//! backend: every frame the generator reports sent is counted by the receiver. Needs root
//! (CI has it); says "skipped" otherwise.

use std::process::Stdio;

use lab::topology::{End, Namespace, is_root, veth};

fn last_json(out: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(out);
    serde_json::from_str(text.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn count_through(backend: &str, rcv_backend: &str, tag: &str) {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let pid = std::process::id();
    let a = Namespace::create(&format!("lr{pid}{tag}g")).unwrap();
    let b = Namespace::create(&format!("lr{pid}{tag}r")).unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap(); // no router solicitations
    }
    veth(End { ns: &a, name: "lrg0", mac: "02:00:00:00:0a:01" }, End { ns: &b, name: "lrr0", mac: "02:00:00:00:0b:01" }).unwrap();
    let bin = env!("CARGO_BIN_EXE_linerate");
    let rcv = b
        .command(bin)
        .args(["rcv", "-i", "lrr0", "-t", "3", "--json", "--backend", rcv_backend])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let generator = a
        .command(bin)
        .args(["gen", "-i", "lrg0", "-D", "02:00:00:00:0b:01", "-n", "50000", "-R", "50000", "--json", "--backend", backend])
        .output()
        .unwrap();
    assert!(generator.status.success(), "{}", String::from_utf8_lossy(&generator.stderr));
    let rcv = rcv.wait_with_output().unwrap();
    assert!(rcv.status.success(), "{}", String::from_utf8_lossy(&rcv.stderr));
    let (g, r) = (last_json(&generator.stdout), last_json(&rcv.stdout));
    let sent = g["sent"].as_u64().unwrap();
    assert_eq!(sent, 50_000, "{g}");
    // Every frame is accounted for: received, or dropped and reported by the receiver (a
    // receiver descheduled on a loaded machine can overrun its ring; it must say so).
    let (received, dropped) = (r["received"].as_u64().unwrap(), r["dropped"].as_u64().unwrap());
    assert_eq!(received + dropped, sent, "gen: {g}\nrcv: {r}");
    assert!(dropped * 20 < sent, "more than 5% dropped: gen: {g}\nrcv: {r}");
    assert!(g["per_second"].as_array().unwrap().iter().any(|v| v.as_f64().unwrap() > 40_000.0), "{g}");
}

/// One test, the backends one after the other: two generator/receiver pairs at once on two
/// CPUs would measure the machine, not the tools. The last receiver counts in the kernel
/// (the lab's): it sees every frame, so nothing may be reported dropped.
#[test]
fn gen_and_rcv_agree() {
    count_through("af-packet", "af-packet", "p");
    count_through("af-xdp", "af-xdp", "x");
    count_through("af-packet", "xdp-sink", "s");
}
