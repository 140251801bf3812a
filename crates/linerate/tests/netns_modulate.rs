//! pf's `modulate state` end to end, host A -> linerate (namespace D) -> host B, with real
//! kernel TCP stacks: A's connections to B pass `pass in on lrd0 proto tcp modulate state`;
//! the SYN B receives carries another initial sequence number than the one A sent, and a
//! few MB each way (A's data to B, then B's to A on a connection A opens) arrive intact
//! (length and SHA-256), with no packet dropped out of window.
//!
//! Needs root and python3 (skips without). Namespaces `lr<pid><tag><host>` are removed on
//! drop.

mod common;

use common::tcp::{MB, TRAFFIC, both_ways, stop_with_no_window_drops, usable};
use common::{build, finish, start_until, text, traffic_listen, write_config};

#[test]
fn tcp_through_modulate_state() {
    if !usable() {
        lab::topology::skip_test("needs root and python3");
        return;
    }
    let lab = build("mo");
    std::fs::write(lab.dir.join("traffic.py"), TRAFFIC).unwrap();
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    let rules = "block all\npass in on lrd0 proto tcp modulate state\npass out on lrd1 proto tcp\npass proto icmp\n";
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

    // A's data to B (the SYN seen on each side), then B's to A on a connection A opens.
    let (sniff_a, sniff_b) = (
        traffic_listen(&lab, &lab.a, &["sniff", "lra0", "5101"]),
        traffic_listen(&lab, &lab.b, &["sniff", "lrb0", "5101"]),
    );
    both_ways(&lab, "198.19.0.2", 5101, 5102, 4 * MB);
    let (isn_a, isn_b) = (finish(sniff_a), finish(sniff_b));
    assert!(
        !isn_a.is_empty() && !isn_b.is_empty(),
        "both sniffers saw the SYN: {isn_a:?} {isn_b:?}"
    );
    assert_ne!(isn_a, isn_b, "B sees another initial sequence number than A sent");
    stop_with_no_window_drops(dut);
}
