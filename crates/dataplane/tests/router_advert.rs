//! Router advertisements through the slow path (RFC 4861 6.2): sent at start and then
//! periodically on the ports that ask for them, brought forward by a valid Router
//! Solicitation, a final one with lifetime 0 at stop; invalid solicitations are counted.

use std::net::{IpAddr, Ipv6Addr};

use dataplane::fib::FibControl;
use dataplane::ports::PortInfo;
use dataplane::punt::{Punt, PuntedFrame};
use dataplane::router_adv::AdvertSettings;
use dataplane::slowpath::{Reject, SlowPath, link_local};
use wire::ndisc::NdError;
use wire::router_advert::{AdvertPrefix, RouterAdvert};
use wire::{Icmpv6Packet, Icmpv6Type, Ipv6Packet, MacAddr};

mod common;

use common::Recorder;

const R_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const R_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
const SECOND: u64 = 1_000_000_000;

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Ports a (advertising every `min`..=`max` s) and b (not advertising).
fn setup(min: u32, max: u32) -> SlowPath {
    let mut a = PortInfo::new("a", R_A, 0);
    a.addresses = vec![(IpAddr::V6(v6("2001:db8:a::1")), 64)];
    let mut b = PortInfo::new("b", R_B, 1);
    b.addresses = vec![(IpAddr::V6(v6("2001:db8:b::1")), 64)];
    let mut sp = SlowPath::new(FibControl::new(64), vec![a, b], false, 1000);
    sp.advertise(0, &advert_settings(min, max), 42);
    sp
}

/// What `ra = { min_interval = MIN, max_interval = MAX, mtu = 1500 }` on port a says: its
/// /64 as the prefix, RFC 4861 6.2.1's defaults otherwise.
fn advert_settings(min: u32, max: u32) -> AdvertSettings {
    let prefix = AdvertPrefix {
        prefix: v6("2001:db8:a::"),
        len: 64,
        valid_lifetime: 2_592_000,
        preferred_lifetime: 604_800,
    };
    let advert = RouterAdvert {
        hop_limit: 64,
        managed: false,
        other_config: false,
        router_lifetime: (3 * max) as u16,
        reachable_time: 0,
        retrans_timer: 0,
        mtu: Some(1500),
        prefixes: vec![prefix],
    };
    AdvertSettings { advert, min_interval: min, max_interval: max }
}

/// The advertisements in `io`: (physical port, router lifetime, prefix options).
fn adverts(io: &Recorder) -> Vec<(u16, u16, usize)> {
    io.wire
        .iter()
        .filter_map(|(phys, f)| {
            let ip = Ipv6Packet::new_checked(&f[14..]).ok()?;
            let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
            (icmp.msg_type() == Icmpv6Type::RouterAdvert).then(|| {
                assert_eq!(ip.src_addr(), link_local(R_A), "from the port's link-local address");
                assert_eq!(ip.dst_addr(), v6("ff02::1"));
                assert_eq!(ip.hop_limit(), 255);
                assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
                let p = ip.payload();
                (
                    *phys,
                    u16::from_be_bytes([p[6], p[7]]),
                    p[16..].chunks(8).filter(|o| o[0] == 3).count(),
                )
            })
        })
        .collect()
}

/// A Router Solicitation from `src` on port a, with a source link-layer option unless `src`
/// is unspecified.
fn rs(src: Ipv6Addr, hop_limit: u8) -> Vec<u8> {
    let with_opt = !src.is_unspecified();
    let icmp_len = if with_opt { 16 } else { 8 };
    let mut f = vec![0u8; 14 + 40 + icmp_len];
    f[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xa1]);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let mut ip = Ipv6Packet::new_unchecked(&mut f[14..]);
    ip.set_version(6);
    ip.set_payload_len(icmp_len as u16);
    ip.set_next_header(wire::IpProtocol::Icmpv6);
    ip.set_hop_limit(hop_limit);
    ip.set_src_addr(src);
    ip.set_dst_addr(v6("ff02::2"));
    if with_opt {
        f[62..70].copy_from_slice(&[1, 1, 2, 0, 0, 0, 0, 0xa1]);
    }
    let mut icmp = Icmpv6Packet::new_unchecked(&mut f[54..]);
    icmp.set_msg_type(Icmpv6Type::RouterSolicit);
    icmp.fill_checksum(&src, &v6("ff02::2"));
    f
}

fn solicit(sp: &mut SlowPath, io: &mut Recorder, frame: Vec<u8>, now: u64) {
    sp.handle(io, PuntedFrame { punt: Punt::Local, phys: 0, in_port: 0, frame }, now);
}

#[test]
fn periodic_solicited_and_final_adverts() {
    let mut sp = setup(3, 4);
    let mut io = Recorder::default();
    sp.tick(&mut io, 0);
    assert_eq!(adverts(&io), [(0, 12, 1)], "one at start, on port a only, lifetime 3 x 4 s");
    // Ticks every 100 ms for 20 s: one every 3 to 4 s.
    io.wire.clear();
    let mut times = Vec::new();
    for t in 1..=200u64 {
        sp.tick(&mut io, t * SECOND / 10);
        if !io.wire.is_empty() {
            times.push(t);
            io.wire.clear();
        }
    }
    let gaps: Vec<u64> = std::iter::once(0)
        .chain(times.iter().copied())
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    assert!(
        gaps.len() >= 5 && gaps.iter().all(|g| (30..=41).contains(g)),
        "gaps in 100 ms: {gaps:?}"
    );

    // A solicitation 0.5 s after an advertisement: answered 3 s after it (plus up to 0.5 s),
    // not at once; a second one changes nothing.
    let last = *times.last().unwrap() * SECOND / 10;
    let now = last + SECOND / 2;
    solicit(&mut sp, &mut io, rs(v6("fe80::a1"), 255), now);
    solicit(&mut sp, &mut io, rs(Ipv6Addr::UNSPECIFIED, 255), now + 1);
    assert_eq!(sp.stats.router_solicits, 2);
    let mut t = now;
    while io.wire.is_empty() {
        t += SECOND / 100;
        sp.tick(&mut io, t);
    }
    assert!(
        (last + 3 * SECOND..=last + 3 * SECOND + SECOND / 2 + SECOND / 100).contains(&t),
        "answered after {} ms",
        (t - last) / 1_000_000
    );

    io.wire.clear();
    sp.stop(&mut io);
    assert_eq!(adverts(&io), [(0, 0, 1)], "the final advertisement has lifetime 0");
}

#[test]
fn a_solicitation_after_a_quiet_time_is_answered_within_half_a_second() {
    let mut sp = setup(200, 600);
    let mut io = Recorder::default();
    sp.tick(&mut io, 0);
    io.wire.clear();
    // The next unsolicited one is 16 s away (the initial ones' cap).
    let quiet = 10 * SECOND;
    solicit(&mut sp, &mut io, rs(v6("fe80::a1"), 255), quiet);
    let mut u = quiet;
    while io.wire.is_empty() {
        u += SECOND / 100;
        sp.tick(&mut io, u);
    }
    assert!(u - quiet <= SECOND / 2 + SECOND / 100, "{} ms", (u - quiet) / 1_000_000);
    assert_eq!(adverts(&io), [(0, 1800, 1)]);
}

#[test]
fn invalid_solicitations_are_counted_not_answered() {
    let mut sp = setup(3, 4);
    let mut io = Recorder::default();
    solicit(&mut sp, &mut io, rs(v6("fe80::a1"), 64), SECOND);
    assert_eq!(sp.stats.rejects.get(Reject::Nd(NdError::HopLimit)), 1);
    let mut bad = rs(v6("fe80::a1"), 255);
    bad[60] ^= 0xff;
    solicit(&mut sp, &mut io, bad, SECOND);
    assert_eq!(sp.stats.rejects.get(Reject::Nd(NdError::Checksum)), 1);
    assert_eq!(sp.stats.router_solicits, 0);
}
