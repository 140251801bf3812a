//! An adversary's TCP conversation through a worker whose rule set uses everything that
//! rewrites packets at once: `scrub` (max-mss, random-id, no-df, min-ttl, set-tos),
//! `modulate state` (or, in one variant, `synproxy state`), tags, `block return` and, in
//! another, `nat`. The segments follow a
//! real connection or not, carry random TCP options, are cut short or have bytes changed,
//! and ICMP errors quote what the far end received. Whatever comes in: no panic, every
//! packet counted once, and every frame that leaves with checksums that held when it came
//! in leaves with checksums that hold (IPv4 header, TCP, ICMP, and the quoted IPv4 header).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use dataplane::counters::Counts;
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::ports::PortInfo;
use dataplane::worker::Worker;
use io::mem::{CountingTx, ReplayRx};
use io::pool::FramePool;
use proptest::prelude::*;

mod frames;
use frames::world::{A_HOST, A6, FAR, FAR6, fib, ifaces};
use frames::{Capture, RX_MAC, TX_MAC};

const SCRUB: &str = "scrub on if1 all max-mss 1200 random-id no-df min-ttl 10 set-tos 0x10\n";
const FILTER: &str = "block return all
pass in on if0 proto tcp from any to any port 80 tag LAN modulate state
pass in on if0 proto { icmp, icmp6 } all keep state
pass out on if1 tagged LAN keep state
pass out on if1 proto { icmp, icmp6 } all keep state
";
const NAT: &str = "nat on if1 from 198.18.0.0/24 to any -> 198.19.0.1\n";

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

/// One step of the adversary: who sends what.
#[derive(Clone, Debug)]
enum Send {
    /// A TCP segment from A (`from_a`) or FAR: the numbers the connection expects
    /// (`consistent`) or `seq`/`ack` as given.
    Tcp {
        from_a: bool,
        flags: u8,
        consistent: bool,
        seq: u32,
        ack: u32,
        opts: Vec<u8>,
        payload: u8,
        harm: Harm,
    },
    /// FAR's ICMP error (type 3 code 4 or type 11) quoting the last segment it received,
    /// the quote cut to `quote` bytes past its IP header.
    IcmpError { time_exceeded: bool, quote: u8, harm: Harm },
}

/// What the adversary does to a frame after building it.
#[derive(Clone, Debug)]
struct Harm {
    /// (offset past the Ethernet header, xor mask): a byte changed.
    change: Option<(u16, u8)>,
    /// Bytes cut off the end (the IPv4 total length left as it was).
    cut: u8,
    /// The checksums recomputed after the change (so the header is odd but consistent).
    refix: bool,
}

fn harm() -> impl Strategy<Value = Harm> {
    let change = prop_oneof![3 => Just(None), 1 => (0u16..80, 1u8..=255).prop_map(Some)];
    let cut = prop_oneof![6 => Just(0u8), 1 => 1u8..40];
    (change, cut, any::<bool>()).prop_map(|(change, cut, refix)| Harm { change, cut, refix })
}

/// TCP options, well formed or not: MSS, window scale, SACK-permitted, timestamps, SACK
/// blocks, NOPs, an end, or arbitrary bytes; padded to a multiple of 4, at most 40.
fn options() -> impl Strategy<Value = Vec<u8>> {
    let atom = prop_oneof![
        any::<u16>().prop_map(|m| vec![2, 4, (m >> 8) as u8, m as u8]),
        Just(vec![3, 3, 7]),
        Just(vec![4, 2]),
        any::<[u8; 8]>().prop_map(|t| [&[8u8, 10][..], &t[..]].concat()),
        (1usize..4, any::<[u8; 24]>()).prop_map(|(n, e)| [
            &[5u8, (2 + 8 * n) as u8][..],
            &e[..8 * n]
        ]
        .concat()),
        Just(vec![1]),
        Just(vec![0]),
        proptest::collection::vec(any::<u8>(), 1..6),
    ];
    proptest::collection::vec(atom, 0..5).prop_map(|atoms| {
        let mut o: Vec<u8> = atoms.concat();
        o.truncate(40);
        o.resize(o.len().div_ceil(4) * 4, 1);
        o
    })
}

fn step() -> impl Strategy<Value = Send> {
    let flags = prop_oneof![
        Just(SYN),
        Just(SYN | ACK),
        Just(ACK),
        Just(ACK | 0x08),
        Just(ACK | 0x01),
        Just(0x04),
        any::<u8>()
    ];
    let tcp =
        (
            any::<bool>(),
            flags,
            prop::bool::weighted(0.8),
            any::<u32>(),
            any::<u32>(),
            options(),
            prop_oneof![Just(0u8), 1u8..64],
            harm(),
        )
            .prop_map(|(from_a, flags, consistent, seq, ack, opts, payload, harm)| {
                Send::Tcp { from_a, flags, consistent, seq, ack, opts, payload, harm }
            });
    let icmp = (any::<bool>(), 0u8..60, harm())
        .prop_map(|(time_exceeded, quote, harm)| Send::IcmpError { time_exceeded, quote, harm });
    prop_oneof![8 => tcp, 1 => icmp]
}

/// The connection as each end knows it: the next numbers and what the far end saw last.
struct Conversation {
    w: Worker<ReplayRx, Capture, CountingTx>,
    /// A's and FAR's addresses: IPv4 or IPv6.
    a: IpAddr,
    far: IpAddr,
    a_next: u32,
    far_next: u32,
    /// The next sequence number of the other end, in the numbers this end receives.
    a_acks: u32,
    far_acks: u32,
    /// A's address and port as FAR sees them.
    a_seen: (IpAddr, u16),
    /// The last IP packet FAR received.
    far_got: Option<Vec<u8>>,
}

impl Conversation {
    fn new(rules: &str, v6: bool) -> Conversation {
        let ports = [PortInfo::new("if0", RX_MAC, 0), PortInfo::new("if1", TX_MAC, 1)];
        let rx =
            vec![ReplayRx::new(0, Vec::<Vec<u8>>::new()), ReplayRx::new(1, Vec::<Vec<u8>>::new())];
        let mut w = Worker::new(
            fib(),
            &ports,
            rx,
            vec![Capture::default(), Capture::default()],
            CountingTx::new(),
            FramePool::new(600),
            256,
        );
        let rules = CompiledRules::parse(rules, Path::new("adversary.conf"), &ifaces).unwrap();
        w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 11));
        let (a, far): (IpAddr, IpAddr) =
            if v6 { (A6.into(), FAR6.into()) } else { (A_HOST.into(), FAR.into()) };
        Conversation {
            w,
            a,
            far,
            a_next: 1000,
            far_next: 9_000_000,
            a_acks: 0,
            far_acks: 0,
            a_seen: (a, 40000),
            far_got: None,
        }
    }

    /// Builds `s`'s frame, sends it, and checks what leaves.
    fn send(&mut self, s: &Send) -> Result<(), TestCaseError> {
        let (port, frame, harm) = match s {
            Send::Tcp { from_a, flags, consistent, seq, ack, opts, payload, harm } => {
                let (seq, ack) = match (consistent, from_a) {
                    (true, true) => (self.a_next, self.a_acks),
                    (true, false) => (self.far_next, self.far_acks),
                    (false, _) => (*seq, *ack),
                };
                let segment = Segment { flags: *flags, seq, ack, opts, payload: *payload };
                let f = if *from_a {
                    tcp_frame(0, (self.a, 40000), (self.far, 80), &segment)
                } else {
                    tcp_frame(1, (self.far, 80), self.a_seen, &segment)
                };
                if *consistent {
                    let used = u32::from(*payload) + u32::from(flags & (SYN | FIN) != 0);
                    let next = if *from_a { &mut self.a_next } else { &mut self.far_next };
                    *next = next.wrapping_add(used);
                }
                (if *from_a { 0 } else { 1 }, f, harm)
            }
            Send::IcmpError { time_exceeded, quote, harm } => {
                let Some(got) = &self.far_got else {
                    return Ok(());
                };
                (1, icmp_error(self.far, got, *time_exceeded, usize::from(*quote)), harm)
            }
        };
        let (frame, intact) = harmed(frame, harm);
        let (before, held) = (self.w.counts(), self.w.fragments_held());
        self.w.rx[port] = ReplayRx::new(port as u16, vec![frame]).once();
        while !self.w.rx[port].finished() {
            self.w.poll();
        }
        let now_held = self.w.fragments_held() as i64 - held as i64;
        accounted(&before, &self.w.counts(), now_held)?;
        for out in 0..2 {
            for g in std::mem::take(&mut self.w.tx[out].frames) {
                if intact {
                    checksums_hold(&g)?;
                }
                self.learn(out, &g);
            }
        }
        Ok(())
    }

    /// What an end learns from a TCP segment it receives: the other end's next number, and,
    /// for FAR, A's address and port after NAT.
    fn learn(&mut self, out: usize, g: &[u8]) {
        let Some(ip) = g.get(14..) else { return };
        let Some((src, total, l4)) = tcp_in(ip) else {
            return;
        };
        let tcp = &ip[l4..total];
        let hlen = usize::from(tcp[12] >> 4) * 4;
        let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
        let used = (total - l4).saturating_sub(hlen) as u32 + u32::from(tcp[13] & (SYN | FIN) != 0);
        if out == 1 {
            self.far_acks = seq.wrapping_add(used);
            self.a_seen = (src, u16::from_be_bytes([tcp[0], tcp[1]]));
            self.far_got = Some(ip[..total].to_vec());
        } else if tcp[13] & RST == 0 {
            self.a_acks = seq.wrapping_add(used);
        }
    }
}

/// The source, total length and TCP header offset of `ip`, an IPv4 or IPv6 packet carrying
/// a whole TCP header (no options, no extension headers).
fn tcp_in(ip: &[u8]) -> Option<(IpAddr, usize, usize)> {
    let (src, total, l4, next): (IpAddr, usize, usize, u8) = match *ip.first()? >> 4 {
        4 if ip.len() >= 20 && ip[0] == 0x45 => (
            Ipv4Addr::from(<[u8; 4]>::try_from(&ip[12..16]).ok()?).into(),
            usize::from(u16::from_be_bytes([ip[2], ip[3]])),
            20,
            ip[9],
        ),
        6 if ip.len() >= 40 => (
            Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).ok()?).into(),
            40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])),
            40,
            ip[6],
        ),
        _ => return None,
    };
    (next == 6 && total <= ip.len() && total >= l4 + 20).then_some((src, total, l4))
}

/// A TCP segment's fields.
struct Segment<'a> {
    flags: u8,
    seq: u32,
    ack: u32,
    opts: &'a [u8],
    payload: u8,
}

/// An untagged IPv4 or IPv6 frame received on `port` carrying `s` from `src` to `dst`,
/// checksums correct.
fn tcp_frame(port: u16, src: (IpAddr, u16), dst: (IpAddr, u16), s: &Segment) -> Vec<u8> {
    let mut tcp = Vec::with_capacity(80);
    tcp.extend_from_slice(&src.1.to_be_bytes());
    tcp.extend_from_slice(&dst.1.to_be_bytes());
    tcp.extend_from_slice(&s.seq.to_be_bytes());
    tcp.extend_from_slice(&s.ack.to_be_bytes());
    tcp.extend_from_slice(&[
        (((20 + s.opts.len()) / 4) << 4) as u8,
        s.flags,
        0xff,
        0xff,
        0,
        0,
        0,
        0,
    ]);
    tcp.extend_from_slice(s.opts);
    tcp.extend((0..s.payload).map(|i| i.wrapping_mul(37)));
    ip_frame(port, src.0, dst.0, 6, &tcp)
}

/// An Ethernet frame received on `port` with an IP header from `src` to `dst` (TTL / hop
/// limit 64) carrying `payload` of protocol `proto`, its checksums filled in.
fn ip_frame(port: u16, src: IpAddr, dst: IpAddr, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 40 + payload.len());
    f.extend_from_slice(&(if port == 0 { RX_MAC } else { TX_MAC }).0);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x99]);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, proto, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
            let total = (20 + payload.len()) as u16;
            f[16..18].copy_from_slice(&total.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => unreachable!("one family"),
    }
    f.extend_from_slice(payload);
    fix(&mut f);
    f
}

/// FAR's ICMP or ICMPv6 error (destination unreachable, or time exceeded) about `got` (the
/// IP packet it received), quoting its header and `quote` bytes more, to its source.
fn icmp_error(far: IpAddr, got: &[u8], time_exceeded: bool, quote: usize) -> Vec<u8> {
    let (to, hlen, proto, ty): (IpAddr, usize, u8, [u8; 2]) = match far {
        IpAddr::V4(_) => (
            Ipv4Addr::from(<[u8; 4]>::try_from(&got[12..16]).unwrap()).into(),
            20,
            1,
            if time_exceeded { [11, 0] } else { [3, 4] },
        ),
        IpAddr::V6(_) => (
            Ipv6Addr::from(<[u8; 16]>::try_from(&got[8..24]).unwrap()).into(),
            40,
            58,
            if time_exceeded { [3, 0] } else { [1, 4] },
        ),
    };
    let mut icmp = vec![ty[0], ty[1], 0, 0, 0, 0, 0x05, 0x00];
    icmp.extend_from_slice(&got[..(hlen + quote).min(got.len())]);
    ip_frame(1, far, to, proto, &icmp)
}

/// The frame as the adversary leaves it, and whether its checksums still held as sent.
fn harmed(mut f: Vec<u8>, h: &Harm) -> (Vec<u8>, bool) {
    if let Some((at, x)) = h.change {
        let at = 14 + usize::from(at) % (f.len() - 14);
        f[at] ^= x;
    }
    f.truncate(f.len().saturating_sub(usize::from(h.cut)).max(15));
    if h.refix {
        fix(&mut f);
    }
    let intact = checksums_hold(&f).is_ok();
    (f, intact)
}

/// Recomputes the checksums of `f` as far as its bytes let it: the IPv4 header's, and the
/// TCP segment's or the ICMP(v6) message's (after the quoted IPv4 header's, which it covers).
fn fix(f: &mut [u8]) {
    let Some(ip) = f.get_mut(14..) else { return };
    let Some(&first) = ip.first() else { return };
    let (hlen, total, proto, pseudo) = match first >> 4 {
        4 => {
            let hlen = usize::from(first & 0xf) * 4;
            if hlen < 20 || ip.len() < hlen {
                return;
            }
            ip[10..12].fill(0);
            let c = wire::checksum::checksum(&ip[..hlen]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if total > ip.len() || total < hlen {
                return;
            }
            let (s, d) = (
                Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
                Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
            );
            let pseudo = if ip[9] == 6 {
                wire::checksum::pseudo_header_v4(&s, &d, 6, (total - hlen) as u32)
            } else {
                0
            };
            (hlen, total, ip[9], pseudo)
        }
        6 if ip.len() >= 40 => {
            let total = 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if total > ip.len() {
                return;
            }
            let s = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
            let d = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap());
            (40, total, ip[6], wire::checksum::pseudo_header_v6(&s, &d, ip[6], (total - 40) as u32))
        }
        _ => return,
    };
    let at = match proto {
        6 if total >= hlen + 20 => 16,
        1 | 58 if total >= hlen + 8 => {
            fix_quoted(&mut ip[hlen + 8..total]);
            2
        }
        _ => return,
    };
    ip[hlen + at..hlen + at + 2].fill(0);
    let c =
        !wire::checksum::fold(u64::from(pseudo) + u64::from(wire::checksum::sum(&ip[hlen..total])));
    ip[hlen + at..hlen + at + 2].copy_from_slice(&c.to_be_bytes());
}

/// The header checksum of the IPv4 packet an ICMP error quotes, if its whole header is there.
fn fix_quoted(q: &mut [u8]) {
    if q.len() >= 20 && q[0] == 0x45 {
        q[10..12].fill(0);
        let c = wire::checksum::checksum(&q[..20]);
        q[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// Whether the checksums of `f` hold, recomputed from scratch.
fn checksums_hold(f: &[u8]) -> Result<(), TestCaseError> {
    let mut g = f.to_vec();
    fix(&mut g);
    prop_assert_eq!(&g, &f.to_vec(), "checksums of a frame that left");
    Ok(())
}

/// The packet the worker just received was counted exactly once, or waits as a fragment
/// for its first (`held`: the change in fragments held).
fn accounted(before: &Counts, after: &Counts, held: i64) -> Result<(), TestCaseError> {
    let rx = (after.rx - before.rx) as i64;
    let out = (after.forwarded - before.forwarded)
        + (after.local - before.local)
        + (after.slow_path - before.slow_path)
        + (after.dropped() - before.dropped());
    prop_assert_eq!(rx, out as i64 + held, "{:?}", after);
    Ok(())
}

proptest! {
    // PROPTEST_CASES changes the number of conversations (the default here: 1000).
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000), ..ProptestConfig::default() })]

    #[test]
    fn an_adversarys_conversation_through_every_rewrite(v6 in any::<bool>(), steps in proptest::collection::vec(step(), 1..40)) {
        let mut c = Conversation::new(&format!("{SCRUB}{FILTER}"), v6);
        for s in &steps {
            c.send(s)?;
        }
    }

    #[test]
    fn the_same_through_synproxy(v6 in any::<bool>(), steps in proptest::collection::vec(step(), 1..40)) {
        let mut c = Conversation::new(&format!("{SCRUB}{}", FILTER.replace("modulate state", "synproxy state")), v6);
        for s in &steps {
            c.send(s)?;
        }
    }

    #[test]
    fn the_same_behind_nat(steps in proptest::collection::vec(step(), 1..40)) {
        let mut c = Conversation::new(&format!("{SCRUB}{NAT}{FILTER}"), false);
        for s in &steps {
            c.send(s)?;
        }
    }
}

/// The adversary's honest case: a real connection's handshake and data both ways get
/// through, so the properties above are not met by dropping everything.
#[test]
fn an_honest_conversation_gets_through() {
    for (rules, v6) in [
        (format!("{SCRUB}{FILTER}"), false),
        (format!("{SCRUB}{FILTER}"), true),
        (format!("{SCRUB}{NAT}{FILTER}"), false),
    ] {
        let mut c = Conversation::new(&rules, v6);
        let mss = [2, 4, 0x05, 0xb4];
        let script = [
            (true, SYN),
            (false, SYN | ACK),
            (true, ACK),
            (true, ACK | 0x08),
            (false, ACK | 0x08),
            (true, ACK),
        ];
        for (from_a, flags) in script {
            let payload = if flags & 0x08 != 0 { 30 } else { 0 };
            let opts = if flags & SYN != 0 { mss.to_vec() } else { Vec::new() };
            c.send(&Send::Tcp {
                from_a,
                flags,
                consistent: true,
                seq: 0,
                ack: 0,
                opts,
                payload,
                harm: Harm { change: None, cut: 0, refix: false },
            })
            .unwrap();
        }
        c.send(&Send::IcmpError {
            time_exceeded: false,
            quote: 8,
            harm: Harm { change: None, cut: 0, refix: false },
        })
        .unwrap();
        let counts = c.w.counts();
        assert_eq!(
            (counts.forwarded, counts.dropped()),
            (7, 0),
            "{rules} (IPv6: {v6}): {counts:?}"
        );
    }
}

/// The honest case through `synproxy state`: the router answers A's SYN itself, opens the
/// connection to FAR on A's ACK, and data then flows both ways with checksums that hold.
#[test]
fn an_honest_conversation_through_synproxy() {
    for v6 in [false, true] {
        let mut c = Conversation::new(
            &format!("{SCRUB}{}", FILTER.replace("modulate state", "synproxy state")),
            v6,
        );
        let mss = [2, 4, 0x05, 0xb4];
        // A's data is the last segment FAR receives.
        let script =
            [(true, SYN), (true, ACK), (false, SYN | ACK), (false, ACK | 0x08), (true, ACK | 0x08)];
        for (from_a, flags) in script {
            let payload = if flags & 0x08 != 0 { 30 } else { 0 };
            let opts = if flags & SYN != 0 { mss.to_vec() } else { Vec::new() };
            c.send(&Send::Tcp {
                from_a,
                flags,
                consistent: true,
                seq: 0,
                ack: 0,
                opts,
                payload,
                harm: Harm { change: None, cut: 0, refix: false },
            })
            .unwrap();
        }
        let counts = c.w.counts();
        assert_eq!(
            counts.drops[dataplane::counters::DropReason::StateOutOfWindow as usize],
            0,
            "IPv6 {v6}: {counts:?}"
        );
        assert!(counts.forwarded >= 4, "IPv6 {v6}: {counts:?}");
        let got = c.far_got.expect("FAR received the connection");
        assert_eq!(
            got[got.len() - 30..],
            (0..30u8).map(|i| i.wrapping_mul(37)).collect::<Vec<_>>()[..],
            "A's data reached FAR"
        );
    }
}
