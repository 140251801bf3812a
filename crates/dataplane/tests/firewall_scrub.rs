//! pf's `scrub` rules on real frames through a worker: the first matching rule normalizes a
//! packet inbound (before the filter and the TTL decrement) or outbound, with checksums
//! that still hold; what pf drops is dropped and counted.

use std::path::Path;
use std::sync::Arc;

use dataplane::counters::{Counts, DropReason};
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::ports::PortInfo;
use dataplane::worker::Worker;
use io::mem::{CountingTx, ReplayRx};
use io::pool::FramePool;

mod frames;
use frames::world::{A_HOST, A6, FAR, FAR6, fib, ifaces};
use frames::{Capture, RX_MAC, TX_MAC, fix_tcp_v4, tcp_v4_checksums_hold};

/// A TCP segment from A to FAR:80 received on port 0, `flags`, with TCP options `opts`,
/// IPv4 flags word `frag` and TTL `ttl`; checksums correct.
fn tcp(flags: u8, opts: &[u8], frag: u16, ttl: u8) -> Vec<u8> {
    let mut f = frames::tcp(0, A_HOST, 40000, FAR, 80, flags, 1000, 0);
    f.truncate(34 + 20);
    f.extend_from_slice(opts);
    f[34 + 12] = (((20 + opts.len()) / 4) << 4) as u8;
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[20..22].copy_from_slice(&frag.to_be_bytes());
    f[22] = ttl;
    fix_tcp_v4(&mut f);
    f
}

/// Runs `frames` (received on port 0) through a worker with `rules`: the counts, what port 1
/// sent, and the firewall's scrub counters.
/// The scrub counters that are not zero.
type ScrubCounters = Vec<(&'static str, u64)>;

fn run(rules: &str, frames: Vec<Vec<u8>>) -> (Counts, Vec<Vec<u8>>, ScrubCounters) {
    let rx = vec![ReplayRx::new(0, frames).once(), ReplayRx::new(1, Vec::<Vec<u8>>::new()).once()];
    let ports = [PortInfo::new("if0", RX_MAC, 0), PortInfo::new("if1", TX_MAC, 1)];
    let mut w = Worker::new(
        fib(),
        &ports,
        rx,
        vec![Capture::default(), Capture::default()],
        CountingTx::new(),
        FramePool::new(600),
        256,
    );
    let rules = CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap();
    w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
    while !(w.rx[0].finished() && w.rx[1].finished()) {
        w.poll();
    }
    let c = w.counts();
    assert_eq!(c.rx, c.forwarded + c.local + c.dropped(), "{c:?}");
    let scrub = w.firewall_stats().unwrap().scrub().into_iter().filter(|&(_, n)| n > 0).collect();
    (c, std::mem::take(&mut w.tx[1].frames), scrub)
}

const SYN: u8 = 0x02;
const MSS_1460: [u8; 4] = [0x02, 0x04, 0x05, 0xb4];

/// Issue 17's case: a SYN with MSS 1460 through `scrub on if1 all max-mss 1400` leaves with
/// MSS 1400 and checksums that hold; pf scrubs outbound on if1 (the rule has no direction).
#[test]
fn a_syn_forwarded_through_max_mss_has_its_mss_clamped() {
    let syn = tcp(SYN, &MSS_1460, 0x4000, 64);
    assert!(tcp_v4_checksums_hold(&syn));
    let (c, out, scrub) = run("scrub on if1 all max-mss 1400\npass all\n", vec![syn.clone()]);
    assert_eq!(c.forwarded, 1, "{c:?}");
    let f = &out[0];
    assert_eq!(&f[54..58], &[0x02, 0x04, 0x05, 0x78], "MSS 1400");
    assert!(tcp_v4_checksums_hold(f), "checksums after the clamp and the TTL decrement");
    assert_eq!(f[22], 63);
    assert_eq!(scrub, [("packets", 1), ("mss_clamped", 1)]);
    // Not on if0 inbound: the SYN leaves as it came (but its TTL).
    let (_, out, scrub) = run("scrub in on if1 all max-mss 1400\npass all\n", vec![syn]);
    assert_eq!(&out[0][54..58], &MSS_1460);
    assert!(scrub.is_empty());
}

/// Inbound scrub runs before the TTL decrement (pf's in pass precedes ip_forward), outbound
/// after it; `no-df` lets the packet leave without DF; the first matching rule decides and
/// `no scrub` exempts.
#[test]
fn inbound_and_outbound_scrub_and_the_first_match() {
    let pkt = || tcp(SYN, &MSS_1460, 0x4000, 5);
    let (_, out, _) = run("scrub in on if0 all min-ttl 64 no-df\npass all\n", vec![pkt()]);
    assert_eq!(
        (out[0][22], out[0][20] & 0x40),
        (63, 0),
        "raised to 64 in, then decremented; DF cleared"
    );
    assert!(tcp_v4_checksums_hold(&out[0]));
    let (_, out, _) = run("scrub out on if1 all min-ttl 64\npass all\n", vec![pkt()]);
    assert_eq!(out[0][22], 64, "raised after the decrement");
    assert!(tcp_v4_checksums_hold(&out[0]));
    // A rule set of scrub rules alone (every packet passes by default, nothing to filter).
    let (_, out, _) = run("scrub in all min-ttl 32\nscrub out all min-ttl 64\n", vec![pkt()]);
    assert_eq!(out[0][22], 64);
    assert!(tcp_v4_checksums_hold(&out[0]));
    let (_, out, _) =
        run("no scrub in from 198.18.0.0/24\nscrub in all min-ttl 64\npass all\n", vec![pkt()]);
    assert_eq!(out[0][22], 4, "exempted");
    let (_, out, _) = run(
        "scrub in proto tcp from 198.18.0.0/24 to any port 80 max-mss 1200\nscrub in all max-mss 1000\npass all\n",
        vec![pkt()],
    );
    assert_eq!(&out[0][56..58], &1200u16.to_be_bytes(), "the first match, not the last");
    assert!(tcp_v4_checksums_hold(&out[0]));
}

/// What pf's normalization drops (SYN+FIN, no flags) is dropped under `scrub_bad_tcp`;
/// without a scrub rule the same packets go to the rules.
#[test]
fn illegal_tcp_flags_are_dropped_and_counted() {
    let bad = vec![tcp(SYN | 0x01, &[], 0, 64), tcp(0, &[], 0, 64), tcp(SYN, &[], 0, 64)];
    let (c, out, _) = run("scrub in all\npass all no state\n", bad.clone());
    assert_eq!(
        (c.drops[DropReason::ScrubBadTcp as usize], c.forwarded, out.len()),
        (2, 1, 1),
        "{c:?}"
    );
    let (c, _, _) = run("pass all no state\n", bad);
    assert_eq!((c.drops[DropReason::ScrubBadTcp as usize], c.forwarded), (0, 3), "{c:?}");
}

/// The TCP checksum of IPv6 frame `f` (TCP right after the fixed header), recomputed.
fn tcp6_checksum(f: &[u8]) -> u16 {
    let seg = &f[54..];
    let mut b = f[22..54].to_vec();
    b.extend_from_slice(&(seg.len() as u32).to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 6]);
    b.extend_from_slice(seg);
    b[40 + 16..40 + 18].fill(0);
    wire::checksum::checksum(&b)
}

/// IPv6: `min-ttl` raises the hop limit before the forwarding's decrement, `max-mss`
/// clamps a SYN's MSS, and the TCP checksum still holds.
#[test]
fn ipv6_hop_limit_and_mss() {
    let mut buf = vec![0u8; 256];
    let n =
        wire::build::udp_frame(&frames::flow(0, A6.into(), 40000, FAR6.into(), 80), 16, &mut buf)
            .unwrap();
    buf.truncate(n);
    buf.resize(54 + 24, 0);
    buf[18..20].copy_from_slice(&24u16.to_be_bytes()); // payload length
    buf[20] = 6; // next header: TCP
    buf[21] = 3; // hop limit
    let mut seg = vec![
        0x9c, 0x40, 0x00, 0x50, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0x60, SYN, 0xff, 0xff, 0, 0, 0, 0,
    ];
    seg.extend_from_slice(&MSS_1460);
    buf[54..].copy_from_slice(&seg);
    let c = tcp6_checksum(&buf);
    buf[70..72].copy_from_slice(&c.to_be_bytes());
    let (c, out, scrub) =
        run("scrub in inet6 proto tcp all min-ttl 64 max-mss 1220\npass all\n", vec![buf]);
    assert_eq!(c.forwarded, 1, "{c:?}");
    let f = &out[0];
    assert_eq!(f[21], 63, "raised to 64, then decremented");
    assert_eq!(&f[74..78], &[0x02, 0x04, 0x04, 0xc4], "MSS 1220");
    assert_eq!(u16::from_be_bytes([f[70], f[71]]), tcp6_checksum(f));
    assert_eq!(scrub, [("packets", 1), ("ttl_raised", 1), ("mss_clamped", 1)]);
}
