#![no_main]
//! Arbitrary frames through a worker: two ports and a VLAN sub-interface with small MTUs
//! (fragmentation, ICMP errors), routes and neighbours of both families, and one of four
//! rule sets (none; scrub, NAT and NAT66, rdr, binat, modulate state, tags and `block
//! return`; the same with `synproxy state`; stateless rules with options, ICMP types and
//! `return-icmp`, and NAT64 and NAT46 by `af-to`).
//!
//! Input: a byte choosing the rule set, then frames, each a control byte (bit 0: the port;
//! bit 1: the destination MAC made the port's; bit 2: the IP and L4 checksums fixed; bit 3:
//! a reload to the next rule set first), a two-byte length and the bytes.
//!
//! Checked after every frame: no panic, every frame received counted once (forwarded,
//! local, slow path, dropped, or held as a fragment), every IPv4 header that leaves has a
//! correct checksum, and so does every TCP, UDP, ICMP and ICMPv6 segment that leaves while
//! every frame sent so far had correct ones.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use dataplane::fib::{Fib, FibControl};
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::ports::PortInfo;
use dataplane::worker::Worker;
use io::mem::{CaptureTx, CountingTx, ReplayRx};
use io::pool::FramePool;
use libfuzzer_sys::fuzz_target;
use wire::MacAddr;

const MAC: [MacAddr; 2] = [MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2])];

const SCRUB: &str = "scrub in on if0 all max-mss 1200 random-id no-df min-ttl 10 set-tos 0x10 fragment reassemble\n";
const NAT: &str = "nat on if1 from 198.18.0.0/24 to any -> 198.19.0.1
rdr on if1 proto tcp from any to 198.19.0.1 port 8080 -> 198.18.0.2 port 80
binat on if1 from 198.18.0.3 to any -> 198.19.0.3
nat on if1 inet6 from 2001:db8:a::/64 to any -> (if1)
rdr on if1 inet6 proto tcp to 2001:db8:b::1 port 8080 -> 2001:db8:a::2 port 80
";
const FILTER: &str = "block return all
pass in on { if0, if0.10 } proto tcp from any to any port { 80, 443 } tag LAN modulate state
pass in on if0 proto { udp, icmp, icmp6 } all keep state
pass in on if1 proto tcp to port 80 keep state
pass out on if1 tagged LAN keep state
pass out on if1 proto { udp, icmp, icmp6 } all keep state
pass quick inet6 proto icmp6 icmp6-type { neighbrsol, neighbradv, routersol }
";
const STATELESS: &str = "pass in quick on if0 inet from any to 10.64.0.0/16 af-to inet6 from 2001:db8:b::1 to 2001:db8:f::/96
block return-icmp all
pass in quick on if0 inet proto icmp icmp-type { echoreq, unreach } allow-opts no state
pass in on if0 proto udp from 198.18.0.0/24 port 1024:65535 to ! 10.9.0.0/16 no state
pass out on if1 all no state
block return-rst in quick on if1 proto tcp to port 22
pass in quick on if0 inet6 from any to 64:ff9b::/96 af-to inet from 198.19.0.1
";

/// Built once: a FIB of 64 tables is large to allocate for every input.
fn fib() -> Arc<Fib> {
    static FIB: OnceLock<Arc<Fib>> = OnceLock::new();
    FIB.get_or_init(build_fib).clone()
}

fn build_fib() -> Arc<Fib> {
    let mut ctl = FibControl::new(64);
    let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
    let v6 = |x| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, x, 0, 0, 0, 0, 2));
    ctl.set_neighbour(v4(198, 18, 0, 2), 0, MacAddr([2, 0, 0, 0, 0, 0xa2])).unwrap();
    ctl.set_neighbour(v4(198, 19, 0, 2), 1, MacAddr([2, 0, 0, 0, 0, 0xb2])).unwrap();
    ctl.add_route(v4(10, 0, 0, 0), 8, v4(198, 19, 0, 2), 1).unwrap();
    ctl.add_route(v4(203, 0, 113, 0), 24, v4(198, 18, 0, 9), 0).unwrap();
    ctl.set_neighbour(v6(0xa), 0, MacAddr([2, 0, 0, 0, 0, 0xa6])).unwrap();
    ctl.set_neighbour(v6(0xb), 1, MacAddr([2, 0, 0, 0, 0, 0xb6])).unwrap();
    ctl.add_route(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xf, 0, 0, 0, 0, 0)), 48, v6(0xb), 1)
        .unwrap();
    ctl.fib()
}

fn ports() -> Vec<PortInfo> {
    let mut p = vec![
        PortInfo::new("if0", MAC[0], 0),
        PortInfo::new("if1", MAC[1], 1),
        PortInfo::new("if0.10", MAC[0], 0),
    ];
    p[0].addresses =
        vec![("198.18.0.1".parse().unwrap(), 24), ("2001:db8:a::1".parse().unwrap(), 64)];
    p[1].addresses =
        vec![("198.19.0.1".parse().unwrap(), 24), ("2001:db8:b::1".parse().unwrap(), 64)];
    p[1].mtu = 1400;
    p[2].vlan = Some(10);
    p[2].mtu = 1280;
    p[2].addresses = vec![("203.0.114.1".parse().unwrap(), 24)];
    p
}

/// The four rule sets, compiled once (each input gets a firewall of its own).
fn rule_sets() -> &'static [Option<Arc<CompiledRules>>; 4] {
    static SETS: OnceLock<[Option<Arc<CompiledRules>>; 4]> = OnceLock::new();
    SETS.get_or_init(|| {
        let compile = |text: String| {
            let text = format!("set limit states 1000\n{text}");
            Some(Arc::new(
                CompiledRules::parse(&text, Path::new("fuzz.conf"), &ifaces)
                    .expect("the fuzz target's rules parse"),
            ))
        };
        [
            None,
            compile(format!("{SCRUB}{NAT}{FILTER}")),
            compile(format!("{SCRUB}{}", FILTER.replace("modulate state", "synproxy state"))),
            compile(STATELESS.to_string()),
        ]
    })
}

fn ifaces(name: &str) -> Option<u16> {
    ["if0", "if1", "if0.10"].iter().position(|n| *n == name).map(|i| i as u16)
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, mut rest)) = data.split_first() else { return };
    let rx = vec![ReplayRx::new(0, Vec::<Vec<u8>>::new()), ReplayRx::new(1, Vec::<Vec<u8>>::new())];
    let tx = vec![CaptureTx::default(), CaptureTx::default()];
    let mut w = Worker::new(fib(), &ports(), rx, tx, CountingTx::new(), FramePool::new(256), 64);
    let mut set = usize::from(choice % 4);
    let slot = rule_sets()[set].clone().map(RulesSlot::new);
    if let Some(slot) = &slot {
        w.set_firewall(Firewall::new(slot.clone(), 7));
    }
    // Every frame so far came with its checksums fixed: then every frame that leaves must
    // carry correct ones (rewrites update them; what the router sends it computes).
    let mut all_fixed = true;
    while let [control, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])) % 1600;
        let (bytes, next) = tail.split_at(len.min(tail.len()));
        rest = next;
        if control & 8 != 0
            && let Some(slot) = &slot
        {
            // A reload between two frames: the next of the three rule sets, over the states
            // and translations the last one made.
            set = set % 3 + 1;
            slot.publish(rule_sets()[set].clone().expect("a firewall's set"))
                .expect("the small limit fits");
        }
        let port = usize::from(control & 1);
        let mut frame = bytes.to_vec();
        if control & 2 != 0 && frame.len() >= 6 {
            frame[..6].copy_from_slice(&MAC[port].0);
        }
        if control & 4 != 0 {
            fix_checksums(&mut frame);
        }
        all_fixed &= control & 4 != 0;
        let (before, held) = (w.counts(), w.fragments_held() as i64);
        w.rx[port] = ReplayRx::new(port as u16, vec![frame]).once();
        while !w.rx[port].finished() {
            w.poll();
        }
        w.poll();
        let after = w.counts();
        let out = (after.forwarded - before.forwarded)
            + (after.local - before.local)
            + (after.slow_path - before.slow_path)
            + (after.dropped() - before.dropped());
        let now_held = w.fragments_held() as i64 - held;
        assert_eq!((after.rx - before.rx) as i64, out as i64 + now_held, "{after:?}");
        for p in 0..2 {
            for f in std::mem::take(&mut w.tx[p].frames) {
                if let Some(ip) = ipv4_header(&f) {
                    assert_eq!(checksum(ip, 0), 0xffff, "IPv4 header checksum of {f:02x?}");
                }
                assert!(!all_fixed || l4_checksum_holds(&f), "L4 checksum of {f:02x?}");
            }
        }
    }
});

/// Where the IP header of an Ethernet frame starts (untagged or one 802.1Q tag), and its
/// ethertype.
fn l3_start(f: &[u8]) -> Option<(usize, u16)> {
    let ty = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    match ty(12)? {
        0x8100 => Some((18, ty(16)?)),
        t => Some((14, t)),
    }
}

/// The IPv4 header of an Ethernet frame, if whole.
fn ipv4_header(f: &[u8]) -> Option<&[u8]> {
    let (at, 0x0800) = l3_start(f)? else { return None };
    let ip = f.get(at..)?;
    let hlen = usize::from(ip.first()? & 0x0f) * 4;
    (ip[0] >> 4 == 4 && hlen >= 20).then(|| ip.get(..hlen)).flatten()
}

/// The one's-complement sum of `b` (16-bit big-endian words) and `start`, folded. Written
/// here rather than taken from `wire::checksum`, so that a bug there cannot hide from the
/// check.
fn checksum(b: &[u8], start: u32) -> u16 {
    let mut s = b
        .chunks(2)
        .fold(start, |s, c| s + (u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))));
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The L4 segment of a frame whose checksum can be checked: TCP, UDP, ICMP or ICMPv6 right
/// behind the IP header, not a fragment, all of it in the frame. Its bytes, the offset of
/// its checksum field and the sum of its pseudo-header.
struct L4 {
    span: std::ops::Range<usize>,
    at: usize,
    pseudo: u32,
}

fn l4(f: &[u8]) -> Option<L4> {
    let (l3, ty) = l3_start(f)?;
    let ip = f.get(l3..)?;
    let (hlen, total, proto, pseudo) = match (ty, ip.first()? >> 4) {
        (0x0800, 4) => {
            let hlen = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            let fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x3fff != 0;
            if hlen < 20 || fragment || total < hlen || total > ip.len() {
                return None;
            }
            (hlen, total, ip[9], checksum(&ip[12..20], u32::from(ip[9]) + (total - hlen) as u32))
        }
        (0x86dd, 6) => {
            let total = 40 + usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            if ip.len() < total.max(40) {
                return None;
            }
            (40, total, ip[6], checksum(&ip[8..40], u32::from(ip[6]) + (total - 40) as u32))
        }
        _ => return None,
    };
    let (at, pseudo) = match proto {
        6 => (16, pseudo),
        17 => (6, pseudo),
        1 if ty == 0x0800 => (2, 0),
        58 if ty == 0x86dd => (2, pseudo),
        _ => return None,
    };
    (total - hlen >= at + 2).then_some(L4 {
        span: l3 + hlen..l3 + total,
        at,
        pseudo: u32::from(pseudo),
    })
}

/// Sets the IPv4 header checksum and the L4 checksum ([`l4`]) of a frame, so that the
/// fuzzer's frames get past the checks to the code behind them.
fn fix_checksums(f: &mut [u8]) {
    if let Some((at, 0x0800)) = l3_start(f)
        && let Some(&v) = f.get(at)
        && let Some(ip) = f.get_mut(at..at + (usize::from(v & 0x0f) * 4).max(20))
    {
        ip[10..12].fill(0);
        let c = !checksum(ip, 0);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let Some(L4 { span, at, pseudo }) = l4(f) else { return };
    let seg = &mut f[span];
    seg[at..at + 2].fill(0);
    let c = !checksum(seg, pseudo);
    seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Whether a frame's L4 checksum holds, where [`l4`] can check it (a UDP checksum of 0 is
/// none in IPv4, and what the fixer writes for a sum of 0).
fn l4_checksum_holds(f: &[u8]) -> bool {
    let Some(L4 { span, at, pseudo }) = l4(f) else { return true };
    let seg = &f[span];
    (at == 6 && seg[6..8] == [0, 0]) || checksum(seg, pseudo) == 0xffff
}
