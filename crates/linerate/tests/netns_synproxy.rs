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

mod common;

use common::tcp::{MB, TRAFFIC, both_ways, stop_with_no_window_drops, usable};
use common::{build, finish, start_until, text, traffic_listen, traffic_run, write_config};

#[test]
fn tcp_through_synproxy_state() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
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
    let dut = start_until(linerate, "forwarding with");
    let ping = text(
        &lab.a
            .command("ping")
            .args(["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"])
            .output()
            .unwrap(),
    );
    assert!(!ping.contains(" 0 received"), "{ping}");
    let ping = text(
        &lab.a
            .command("ping")
            .args(["-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:b::2"])
            .output()
            .unwrap(),
    );
    assert!(!ping.contains(" 0 received"), "{ping}");

    // A's data to B (the SYN seen on each side), then B's to A (B's numbers shifted to the
    // router's).
    let (sniff_a, sniff_b) = (
        traffic_listen(&lab, &lab.a, &["sniff", "lra0", "5301"]),
        traffic_listen(&lab, &lab.b, &["sniff", "lrb0", "5301"]),
    );
    both_ways(&lab, "198.19.0.2", 5301, 5302, 4 * MB);
    let (isn_a, isn_b) = (finish(sniff_a), finish(sniff_b));
    assert!(!isn_a.is_empty(), "A's SYN seen");
    assert_eq!(isn_b, isn_a, "B's SYN (the router's) carries A's initial sequence number");

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
    assert!(
        n.len() == 2 && n[0] >= 3 && n[1] >= 3,
        "A's SYNs left and the router answered each: {seen_a}"
    );

    let out = stop_with_no_window_drops(dut);
    assert!(
        out.lines().any(|l| l.trim().starts_with("drop synproxy")),
        "the proxy's drops counted: {out}"
    );
}
