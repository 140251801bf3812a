//! NAT through a whole worker over in-memory ports: `nat` to the interface's address and
//! the reply back, `rdr` to an inside server and its replies, `binat` both ways, ICMP errors
//! and echo identifiers, what the filter sees (the translated packet, as pf's), `pass` on
//! translation rules, port exhaustion, and the choice of ports for
//! the steering of several workers. Every frame that comes out has its checksums checked
//! from scratch.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::punt::{Punt, PuntBatch, PuntPort};
use dataplane::{Counts, DropReason, Fib, FibControl, PortInfo, Worker};
use io::FramePool;
use io::mem::ReplayRx;
use io::rss::{SYMMETRIC_KEY, Toeplitz, queue_for};
use wire::{IpProtocol, Ipv4Packet, MacAddr};

mod frames;
use frames::{Capture, RX_MAC, TX_MAC, tcp_checksum, udp};

const LAN_HOST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const BINAT_HOST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 7);
const LAN_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa2]);
const EXT_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const BINAT_PUB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 7);
const EXT_GW: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 254);
const GW_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb2]);
const FAR: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 1);
const ROUTER_BEYOND: Ipv4Addr = Ipv4Addr::new(10, 9, 9, 9);
const EXT_GW6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0xfe);

/// Port 0 ("lan") faces the inside hosts; port 1 ("ext", 192.0.2.1) leads to 10/8.
/// A TCP segment with `flags` received on `port`.
fn tcp(port: u16, src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, flags: u8) -> Vec<u8> {
    frames::tcp(port, src, sport, dst, dport, flags, 1000, if flags & 0x10 != 0 { 5000 } else { 0 })
}

fn fib() -> Arc<Fib> {
    let mut ctl = FibControl::new(64);
    ctl.set_neighbour(IpAddr::V4(LAN_HOST), 0, LAN_MAC).unwrap();
    ctl.set_neighbour(IpAddr::V4(BINAT_HOST), 0, LAN_MAC).unwrap();
    ctl.set_neighbour(IpAddr::V4(EXT_GW), 1, GW_MAC).unwrap();
    ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, IpAddr::V4(EXT_GW), 1).unwrap();
    ctl.add_local(IpAddr::V4(EXT_ADDR)).unwrap();
    ctl.set_neighbour(IpAddr::V6(EXT_GW6), 1, GW_MAC).unwrap();
    ctl.add_route(
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 0)),
        48,
        IpAddr::V6(EXT_GW6),
        1,
    )
    .unwrap();
    ctl.fib()
}

fn ports() -> [PortInfo; 2] {
    let mut ext = PortInfo::new("ext", TX_MAC, 1);
    ext.addresses.push((IpAddr::V4(EXT_ADDR), 24));
    [PortInfo::new("lan", RX_MAC, 0), ext]
}

fn ifaces(name: &str) -> Option<u16> {
    ["lan", "ext"].iter().position(|n| *n == name).map(|i| i as u16)
}

/// Keeps what is punted to the slow path, with why.
#[derive(Default)]
struct Punts(Vec<(Punt, Vec<u8>)>);

impl PuntPort for Punts {
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch) {
        for (desc, punt, _) in punts.drain() {
            self.0.push((punt, pool.frame(desc).to_vec()));
            pool.free(desc);
        }
    }
}

type NatWorker = Worker<ReplayRx, Capture, Punts>;

fn worker(rules: &str, steering: Option<(u16, u16)>) -> NatWorker {
    let rx = vec![
        ReplayRx::new(0, Vec::<Vec<u8>>::new()).once(),
        ReplayRx::new(1, Vec::<Vec<u8>>::new()).once(),
    ];
    let mut w = Worker::new(
        fib(),
        &ports(),
        rx,
        vec![Capture::default(), Capture::default()],
        Punts::default(),
        FramePool::new(600),
        256,
    );
    if let Some((i, n)) = steering {
        w.set_nat_steering(i, n);
    }
    let rules = CompiledRules::parse(rules, Path::new("nat.conf"), &ifaces).unwrap();
    w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
    w
}

/// Sends `frames` in on `port` and returns what came out on each port (taken from the ports).
fn send(w: &mut NatWorker, port: u16, frames: Vec<Vec<u8>>) -> [Vec<Vec<u8>>; 2] {
    w.rx[usize::from(port)] = ReplayRx::new(port, frames).once();
    while !w.rx[usize::from(port)].finished() {
        w.poll();
    }
    w.poll();
    [std::mem::take(&mut w.tx[0].frames), std::mem::take(&mut w.tx[1].frames)]
}

/// An ICMP message of `typ` from `src` to `dst` with `body` after the 4 bytes of rest-of-header.
fn icmp(port: u16, src: Ipv4Addr, dst: Ipv4Addr, typ: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
    let mut f = udp(port, src, 0, dst, 0);
    f.truncate(34);
    let mut m = vec![typ, 0, 0, 0];
    m.extend_from_slice(&rest);
    m.extend_from_slice(body);
    let ck = wire::checksum::checksum(&m);
    m[2..4].copy_from_slice(&ck.to_be_bytes());
    f.extend_from_slice(&m);
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.set_protocol(IpProtocol::Icmp);
    ip.set_total_len((20 + m.len()) as u16);
    ip.fill_checksum();
    f
}

/// (src, sport, dst, dport) of a frame's IPv4 packet, after checking every checksum.
fn tuple(f: &[u8]) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
    let ip = &f[14..];
    assert_eq!(wire::checksum::checksum(&ip[..20]), 0, "IP checksum");
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    match ip[9] {
        6 => assert_eq!(tcp_checksum(ip), 0, "TCP checksum"),
        17 if ip[26..28] != [0, 0] => assert_eq!(tcp_checksum(ip), 0, "UDP checksum"),
        1 => assert_eq!(wire::checksum::checksum(&ip[20..total]), 0, "ICMP checksum"),
        _ => {}
    }
    let a = |i: usize| Ipv4Addr::new(ip[i], ip[i + 1], ip[i + 2], ip[i + 3]);
    let p = |i: usize| u16::from_be_bytes([ip[i], ip[i + 1]]);
    (a(12), p(20), a(16), p(22))
}

fn drops(c: &Counts, r: DropReason) -> u64 {
    c.drops[r as usize]
}

const NAT: &str = "nat on ext from 198.18.0.0/24 to any -> (ext)\n";

#[test]
fn nat_to_the_interface_address_and_back() {
    let mut w = worker(NAT, None);
    let [_, out] = send(
        &mut w,
        0,
        vec![udp(0, LAN_HOST, 1000, FAR, 53), tcp(0, LAN_HOST, 2000, FAR, 80, 0x02)],
    );
    assert_eq!(out.len(), 2);
    let (s, sp, d, dp) = tuple(&out[0]);
    assert_eq!((s, d, dp), (EXT_ADDR, FAR, 53));
    assert!((50001..=65535).contains(&sp), "pf's default range: {sp}");
    let (s2, tp, _, _) = tuple(&out[1]);
    assert_eq!(s2, EXT_ADDR);
    // The replies come back to the inside host.
    let [back, _] =
        send(&mut w, 1, vec![udp(1, FAR, 53, EXT_ADDR, sp), tcp(1, FAR, 80, EXT_ADDR, tp, 0x12)]);
    assert_eq!(back.len(), 2);
    assert_eq!(tuple(&back[0]), (FAR, 53, LAN_HOST, 1000));
    assert_eq!(tuple(&back[1]), (FAR, 80, LAN_HOST, 2000));
    // A packet to the address on a port no translation holds is for the router itself.
    let [a, b] = send(&mut w, 1, vec![udp(1, FAR, 53, EXT_ADDR, sp.wrapping_add(1))]);
    assert!(a.is_empty() && b.is_empty());
    assert_eq!(w.counts().local, 1);
}

/// OpenBSD's `match out ... nat-to` through a worker: translated out, and back, as `nat`.
#[test]
fn match_nat_to_translates_as_nat() {
    let mut w = worker(
        "match out on ext inet from 198.18.0.0/24 to any nat-to (ext)\nblock all\npass out quick inet\npass in on lan inet\n",
        None,
    );
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    assert_eq!(out.len(), 1);
    let (s, sp, d, dp) = tuple(&out[0]);
    assert_eq!((s, d, dp), (EXT_ADDR, FAR, 53));
    let [back, _] = send(&mut w, 1, vec![udp(1, FAR, 53, EXT_ADDR, sp)]);
    assert_eq!(back.len(), 1);
    assert_eq!(tuple(&back[0]), (FAR, 53, LAN_HOST, 1000));
}

#[test]
fn icmp_echo_identifiers_and_errors_are_translated() {
    let mut w = worker(NAT, None);
    let echo = icmp(0, LAN_HOST, FAR, 8, [0x12, 0x34, 0, 1], b"ping-payload");
    let [_, out] = send(&mut w, 0, vec![echo, udp(0, LAN_HOST, 3333, FAR, 33434)]);
    assert_eq!(out.len(), 2);
    let (s, _, _, _) = tuple(&out[0]);
    assert_eq!(s, EXT_ADDR);
    let id = u16::from_be_bytes([out[0][38], out[0][39]]);
    tuple(&out[1]);
    // The echo reply, and a time exceeded from a router beyond quoting the UDP probe.
    let reply = icmp(1, FAR, EXT_ADDR, 0, [(id >> 8) as u8, id as u8, 0, 1], b"ping-payload");
    let quoted = out[1][14..14 + 28].to_vec();
    let timex = icmp(1, ROUTER_BEYOND, EXT_ADDR, 11, [0; 4], &quoted);
    let [back, _] = send(&mut w, 1, vec![reply, timex]);
    assert_eq!(back.len(), 2, "{:?}", w.counts());
    let (_, _, d, _) = tuple(&back[0]);
    assert_eq!((d, u16::from_be_bytes([back[0][38], back[0][39]])), (LAN_HOST, 0x1234));
    let (s, _, d, _) = tuple(&back[1]);
    assert_eq!((s, d), (ROUTER_BEYOND, LAN_HOST));
    // The quoted packet is the probe as the inside host sent it (but its TTL).
    let q = &back[1][14 + 28..];
    assert_eq!(wire::checksum::checksum(&q[..20]), 0, "quoted header checksum");
    assert_eq!((&q[12..16], u16::from_be_bytes([q[20], q[21]])), (&LAN_HOST.octets()[..], 3333));
    assert_eq!(&q[16..20], &FAR.octets()[..]);
}

#[test]
fn rdr_to_an_inside_server_and_the_filter_sees_the_translated_destination() {
    let rules = "rdr on ext proto tcp from any to 192.0.2.1 port 80 -> 198.18.0.2 port 8080\n\
                 block all\n\
                 pass in on ext proto tcp to 198.18.0.2 port 8080\n\
                 pass out on lan proto tcp to 198.18.0.2 port 8080\n";
    let mut w = worker(rules, None);
    let [inside, _] = send(&mut w, 1, vec![tcp(1, FAR, 5555, EXT_ADDR, 80, 0x02)]);
    assert_eq!(inside.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&inside[0]), (FAR, 5555, LAN_HOST, 8080));
    // The server's SYN-ACK passes by the state and leaves with the outside address and port.
    let [_, out] = send(&mut w, 0, vec![tcp(0, LAN_HOST, 8080, FAR, 5555, 0x12)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&out[0]), (EXT_ADDR, 80, FAR, 5555));
    // Another port is not redirected, and the default-deny filter drops it.
    let [a, b] = send(&mut w, 1, vec![tcp(1, FAR, 5556, EXT_ADDR, 81, 0x02)]);
    assert!(a.is_empty() && b.is_empty());
}

#[test]
fn rdr_maps_a_port_range_onto_a_range() {
    let mut w = worker(
        "rdr on ext proto udp to 192.0.2.1 port 7000:7009 -> 198.18.0.2 port 9000:*\n",
        None,
    );
    let [inside, _] =
        send(&mut w, 1, vec![udp(1, FAR, 1, EXT_ADDR, 7000), udp(1, FAR, 1, EXT_ADDR, 7007)]);
    assert_eq!(inside.iter().map(|f| tuple(f).3).collect::<Vec<_>>(), vec![9000, 9007]);
}

#[test]
fn the_out_filter_sees_the_translated_source() {
    // pf translates before it filters: the out rules name the NAT address (and its ports),
    // not the inside hosts.
    let rules = format!(
        "{NAT}block all\npass in on lan\npass out on ext proto udp from 192.0.2.1 port 50001:65535 to any port 53\n"
    );
    let mut w = worker(&rules, None);
    let [_, out] = send(
        &mut w,
        0,
        vec![
            udp(0, LAN_HOST, 1000, FAR, 53),
            udp(0, BINAT_HOST, 1000, FAR, 53),
            udp(0, LAN_HOST, 1001, FAR, 54),
        ],
    );
    assert_eq!(
        out.len(),
        2,
        "both hosts pass out as 192.0.2.1, port 54 does not: {:?}",
        w.counts()
    );
    assert!(out.iter().all(|f| tuple(f).0 == EXT_ADDR));
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 1);
    // The blocked flow left no translation; the two that passed hold one each.
    let nat = w.nat_counts().unwrap();
    assert_eq!((nat.sessions, nat.created, nat.translated), (2, 2, 2));
    // Their replies match the states (kept on the inside form) and come back.
    let replies = out.iter().map(|f| udp(1, FAR, 53, EXT_ADDR, tuple(f).1)).collect();
    let [back, _] = send(&mut w, 1, replies);
    assert_eq!(
        back.iter().map(|f| tuple(f).2).collect::<Vec<_>>(),
        vec![LAN_HOST, BINAT_HOST],
        "{:?}",
        w.counts()
    );
}

#[test]
fn a_block_out_on_the_inside_source_no_longer_matches_translated_packets() {
    // As in pf: once translated, the packet's source is 192.0.2.1, so a rule on the inside
    // network does not see it.
    let rules = format!("{NAT}block out quick on ext from 198.18.0.0/24\npass all\n");
    let mut w = worker(&rules, None);
    let [_, out] = send(
        &mut w,
        0,
        vec![udp(0, LAN_HOST, 1000, FAR, 53), tcp(0, BINAT_HOST, 2000, FAR, 80, 0x02)],
    );
    assert_eq!(out.len(), 2, "{:?}", w.counts());
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 0);
}

#[test]
fn a_blocked_new_flow_leaves_no_translation_behind() {
    // Two ports only: a blocked flow must not take one.
    let rules = "nat on ext from 198.18.0.0/24 -> 192.0.2.1 port 50001:50002\n\
                 block out quick on ext proto udp from 192.0.2.1 to any port 9\n\
                 pass all\n";
    let mut w = worker(rules, None);
    let blocked: Vec<_> = (0..5).map(|i| udp(0, LAN_HOST, 3000 + i, FAR, 9)).collect();
    let [_, out] = send(&mut w, 0, blocked);
    assert!(out.is_empty());
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 5);
    let nat = w.nat_counts().unwrap();
    assert_eq!((nat.sessions, nat.created, nat.translated), (0, 0, 0), "nothing translated");
    // Both ports are still free for flows that pass.
    let [_, out] =
        send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53), udp(0, LAN_HOST, 1001, FAR, 53)]);
    assert_eq!(out.len(), 2, "{:?}", w.counts());
    assert_eq!(drops(&w.counts(), DropReason::NatExhausted), 0);
}

#[test]
fn a_block_return_on_the_translated_source_answers_the_inside_host() {
    let rules = format!(
        "{NAT}block return out on ext proto tcp from 192.0.2.1 to any port 25\npass in all\n"
    );
    let mut w = worker(&rules, None);
    w.set_icmp_rate(1000);
    let [back, out] = send(&mut w, 0, vec![tcp(0, LAN_HOST, 4000, FAR, 25, 0x02)]);
    assert!(out.is_empty());
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 1);
    assert_eq!(w.nat_counts().unwrap().sessions, 0);
    // The slow path answers the packet as its sender wrote it: the reset goes to the inside
    // host, not to the translation the packet never got.
    assert!(back.is_empty());
    let punts = std::mem::take(&mut w.local.0);
    assert_eq!(punts.len(), 1);
    assert_eq!(punts[0].0, Punt::Reset { ttl: 64 });
    assert_eq!(tuple(&punts[0].1), (LAN_HOST, 4000, FAR, 25));
}

#[test]
fn rdr_pass_skips_the_in_rules_and_its_replies_come_back() {
    // pf: `rdr pass` passes the redirected packets without the rules of that pass (in on
    // ext), keeping a state; the pass out on lan still needs a rule.
    let rdr = "rdr pass on ext proto tcp from any to 192.0.2.1 port 80 -> 198.18.0.2 port 8080\n";
    let rules = format!("{rdr}block all\npass out on lan\n");
    let mut w = worker(&rules, None);
    let [inside, _] = send(&mut w, 1, vec![tcp(1, FAR, 5555, EXT_ADDR, 80, 0x02)]);
    assert_eq!(inside.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&inside[0]), (FAR, 5555, LAN_HOST, 8080));
    // The server's SYN-ACK: in on lan by the `pass out on lan` state, out on ext by the
    // state `rdr pass` kept.
    let [_, out] = send(&mut w, 0, vec![tcp(0, LAN_HOST, 8080, FAR, 5555, 0x12)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&out[0]), (EXT_ADDR, 80, FAR, 5555));
    let [inside, _] = send(&mut w, 1, vec![tcp(1, FAR, 5555, EXT_ADDR, 80, 0x10)]);
    assert_eq!(inside.len(), 1, "the client's ACK, by the state: {:?}", w.counts());
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 0);
    // Without `pass`, `block all` drops it on the way in.
    let mut w =
        worker(&format!("{}block all\npass out on lan\n", rdr.replace("rdr pass", "rdr")), None);
    let [a, b] = send(&mut w, 1, vec![tcp(1, FAR, 5555, EXT_ADDR, 80, 0x02)]);
    assert!(a.is_empty() && b.is_empty());
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 1);
}

/// A worker as [`worker`] makes, and the slot its rule sets are published in.
fn worker_with_slot(rules: &str) -> (NatWorker, Arc<RulesSlot>) {
    let mut w = worker("pass all\n", None);
    let slot = RulesSlot::new(Arc::new(
        CompiledRules::parse(rules, Path::new("nat.conf"), &ifaces).unwrap(),
    ));
    w.set_firewall(Firewall::new(Arc::clone(&slot), 7));
    (w, slot)
}

#[test]
fn a_reload_that_moves_rules_keeps_each_translations_pass() {
    // Each flow's translation keeps whether the rule that made it had `pass`: a reload that
    // puts another rule at that rule's place does not lend it that rule's `pass`.
    let rdr80 = "rdr on ext proto tcp from any to 192.0.2.1 port 80 -> 198.18.0.2 port 8080\n";
    let rdr81 = "rdr pass on ext proto tcp from any to 192.0.2.1 port 81 -> 198.18.0.2 port 8081\n";
    let (mut w, slot) = worker_with_slot(&format!("{rdr80}{rdr81}pass all no state\n"));
    let syns = vec![tcp(1, FAR, 5555, EXT_ADDR, 80, 0x02), tcp(1, FAR, 5556, EXT_ADDR, 81, 0x02)];
    let [inside, _] = send(&mut w, 1, syns);
    assert_eq!(inside.len(), 2, "{:?}", w.counts());
    assert_eq!(w.nat_counts().unwrap().sessions, 2);
    // The rules swap places, and the in rules now block both servers.
    let moved =
        format!("{rdr81}{rdr80}pass all no state\nblock in on ext proto tcp to 198.18.0.2\n");
    slot.publish(Arc::new(CompiledRules::parse(&moved, Path::new("nat.conf"), &ifaces).unwrap()))
        .unwrap();
    let acks = vec![tcp(1, FAR, 5555, EXT_ADDR, 80, 0x10), tcp(1, FAR, 5556, EXT_ADDR, 81, 0x10)];
    let [inside, _] = send(&mut w, 1, acks);
    // The flow `rdr` made (no `pass`) meets the in rules: blocked. The one `rdr pass` made
    // passes by the state it kept.
    assert_eq!(inside.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&inside[0]), (FAR, 5556, LAN_HOST, 8081));
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 1);
}

#[test]
fn a_blocked_flow_leaves_no_sticky_address_behind() {
    let rules = "nat on ext from 198.18.0.0/24 -> { 192.0.2.1, 192.0.2.2 } round-robin sticky-address\n\
                 block out quick on ext proto udp from any to any port 9\n\
                 pass all\n";
    let mut w = worker(rules, None);
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 3000, FAR, 9)]);
    assert!(out.is_empty());
    assert_eq!(drops(&w.counts(), DropReason::FilterBlocked), 1);
    assert_eq!(w.nat_counts().unwrap().sticky, 0, "no choice kept for a flow that was blocked");
    // The host's first flow that passes chooses its address, and its later flows keep it.
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    assert_eq!(w.nat_counts().unwrap().sticky, 1);
    let first = tuple(&out[0]).0;
    for sport in 1001..1005 {
        let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, sport, FAR, 53)]);
        assert_eq!(tuple(&out[0]).0, first, "sticky-address");
    }
    assert_eq!(w.nat_counts().unwrap().sticky, 1);
}

#[test]
fn ipv6_leaves_a_translating_interface_as_it_came() {
    // Translation is IPv4's: an IPv6 packet routed out of `ext` keeps its addresses, ports and
    // payload, whether the out rules judge it (its flow's first packet) or a state settles it.
    let mut w = worker("nat on ext from any to any -> (ext)\npass all keep state\n", None);
    let (src, dst) = (
        Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2),
        Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 1),
    );
    let mut frame = vec![0u8; 128];
    let n =
        wire::build::udp_frame(&frames::flow(0, src.into(), 1000, dst.into(), 53), 80, &mut frame)
            .unwrap();
    frame.truncate(n);
    for _ in 0..3 {
        let [_, out] = send(&mut w, 0, vec![frame.clone()]);
        assert_eq!(out.len(), 1, "{:?}", w.counts());
        // Past the hop limit (byte 7 of the IPv6 header): addresses, UDP header and payload.
        assert_eq!(out[0][22..], frame[22..]);
        assert_eq!(out[0][21], frame[21] - 1, "hop limit");
    }
    assert_eq!(w.nat_counts().unwrap().sessions, 0);
}

#[test]
fn nat_pass_skips_the_out_rules_and_keeps_a_state_for_the_replies() {
    let rules = "nat pass on ext from 198.18.0.0/24 to any -> (ext)\nblock all\npass in on lan\n";
    let mut w = worker(rules, None);
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    let (s, sp, _, _) = tuple(&out[0]);
    assert_eq!(s, EXT_ADDR);
    // The reply passes in on ext by the state `nat pass` kept, not by a rule.
    let [back, _] = send(&mut w, 1, vec![udp(1, FAR, 53, EXT_ADDR, sp)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&back[0]), (FAR, 53, LAN_HOST, 1000));
    // No filter rule acts on the out pass here but `nat pass`: the data plane must still run
    // that pass, for the state that lets the reply in past `block in on ext`.
    let mut w =
        worker("nat pass on ext from 198.18.0.0/24 to any -> (ext)\nblock in on ext\n", None);
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    let [back, _] = send(
        &mut w,
        1,
        vec![udp(1, FAR, 53, EXT_ADDR, tuple(&out[0]).1), udp(1, FAR, 53, EXT_ADDR, 40000)],
    );
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(
        drops(&w.counts(), DropReason::FilterBlocked),
        1,
        "the other, to a port no translation holds, is blocked"
    );
    // Without `pass`, `block all` drops it on the way out, and no translation is made.
    let mut w = worker(&rules.replace("nat pass", "nat"), None);
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    assert!(out.is_empty());
    assert_eq!(w.nat_counts().unwrap().sessions, 0);
}

#[test]
fn binat_pass_lets_the_outside_reach_the_inside_host() {
    let rules =
        "binat pass on ext from 198.18.0.7 to any -> 192.0.2.7\nblock all\npass out on lan\n";
    let mut w = worker(rules, None);
    let [inside, _] = send(&mut w, 1, vec![tcp(1, FAR, 6000, BINAT_PUB, 22, 0x02)]);
    assert_eq!(inside.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&inside[0]), (FAR, 6000, BINAT_HOST, 22));
    let [_, out] = send(&mut w, 0, vec![tcp(0, BINAT_HOST, 22, FAR, 6000, 0x12)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&out[0]), (BINAT_PUB, 22, FAR, 6000));
}

#[test]
fn binat_both_ways() {
    let mut w = worker("binat on ext from 198.18.0.7 to any -> 192.0.2.7\n", None);
    let [_, out] = send(&mut w, 0, vec![udp(0, BINAT_HOST, 4000, FAR, 53)]);
    assert_eq!(tuple(&out[0]), (BINAT_PUB, 4000, FAR, 53), "source mapped, port kept");
    let [inside, _] = send(&mut w, 1, vec![tcp(1, FAR, 6000, BINAT_PUB, 22, 0x02)]);
    assert_eq!(tuple(&inside[0]), (FAR, 6000, BINAT_HOST, 22), "reachable from outside");
}

#[test]
fn no_nat_exempts_and_exhaustion_is_counted() {
    let rules = "no nat on ext from 198.18.0.9\nnat on ext from 198.18.0.0/24 -> 192.0.2.1 port 50001:50002\n";
    let mut w = worker(rules, None);
    let exempt = Ipv4Addr::new(198, 18, 0, 9);
    let frames = vec![
        udp(0, exempt, 1, FAR, 53),
        udp(0, LAN_HOST, 1, FAR, 53),
        udp(0, LAN_HOST, 2, FAR, 53),
        udp(0, LAN_HOST, 3, FAR, 53),
        udp(0, LAN_HOST, 4, FAR, 54),
    ];
    let [_, out] = send(&mut w, 0, frames);
    let t: Vec<_> = out.iter().map(|f| tuple(f)).collect();
    assert_eq!(t[0].0, exempt, "no nat");
    let ports: Vec<u16> = t[1..].iter().map(|x| x.1).collect();
    // Two ports towards FAR:53, then exhausted; FAR:54 is another destination: ports again.
    assert_eq!(t.len(), 4, "{:?}", w.counts());
    assert!(ports[0] != ports[1] && ports.iter().all(|p| (50001..=50002).contains(p)));
    assert_eq!(drops(&w.counts(), DropReason::NatExhausted), 1);
}

#[test]
fn ports_steer_replies_to_the_worker_that_translated() {
    let hash = Toeplitz::new(&SYMMETRIC_KEY);
    for worker_id in 0..2u16 {
        let mut w = worker(NAT, Some((worker_id, 2)));
        let frames: Vec<_> = (0..50).map(|i| udp(0, LAN_HOST, 1000 + i, FAR, 53)).collect();
        let [_, out] = send(&mut w, 0, frames);
        assert_eq!(out.len(), 50);
        for f in &out {
            let (s, sp, d, dp) = tuple(f);
            // The reply d:dp -> s:sp, hashed as the fanout program hashes it.
            assert_eq!(queue_for(hash.ipv4_ports(d, s, dp, sp), 2), worker_id);
        }
    }
}

/// A table past the size at which the NAT stage prefetches a batch's lookups (and hands the
/// outbound pass the slot each probe named) translates as a small one: new flows whose first
/// and second packets share a batch, the same flows in a later batch, their replies.
#[test]
fn a_table_large_enough_to_prefetch_translates_as_a_small_one() {
    use fw::nat::table::{NatKey, Session};
    let mut w = worker(NAT, None);
    // 12,000 translations of other flows: some 1.2 MiB of index and slots.
    let table = w.nat_table_mut().unwrap();
    for i in 0..12_000u32 {
        let out_key = NatKey {
            src: 0xac10_0000 + (i >> 16),
            dst: 0x6440_0000,
            sport: i as u16,
            dport: 9,
            proto: 17,
        };
        let port = 1024 + (i % 60_000) as u16;
        let in_key =
            NatKey { src: 0x6440_0000, dst: u32::from(EXT_ADDR), sport: 9, dport: port, proto: 17 };
        let s = Session {
            iface: 1,
            kind: fw::nat::NatKind::Nat,
            pass: false,
            out_key,
            out_to: (u32::from(EXT_ADDR), port),
            in_key,
            in_to: (out_key.src, out_key.sport),
            last: 0,
            phase: Default::default(),
        };
        table.insert(s).unwrap();
    }
    assert!(table.working_set_bytes() > 1 << 20, "{} bytes", table.working_set_bytes());
    // Each flow's first packet, then its second, in one batch.
    let flows: Vec<u16> = (1000..1060).collect();
    let batch: Vec<Vec<u8>> = flows
        .iter()
        .flat_map(|&p| [udp(0, LAN_HOST, p, FAR, 53), tcp(0, LAN_HOST, p, FAR, 80, 0x02)])
        .chain(flows.iter().map(|&p| udp(0, LAN_HOST, p, FAR, 53)))
        .collect();
    let [_, out] = send(&mut w, 0, batch);
    assert_eq!(out.len(), 3 * flows.len());
    let n = flows.len();
    assert!(out.iter().all(|f| (tuple(f).0, tuple(f).2) == (EXT_ADDR, FAR)));
    let port = |i: usize| tuple(&out[i]).1;
    let udp_ports: std::collections::HashSet<u16> = (0..n).map(|k| port(2 * k)).collect();
    let tcp_ports: std::collections::HashSet<u16> = (0..n).map(|k| port(2 * k + 1)).collect();
    assert_eq!((udp_ports.len(), tcp_ports.len()), (n, n), "a port per flow");
    assert!(
        (0..n).all(|k| port(2 * n + k) == port(2 * k)),
        "a flow's second packet takes its first's translation"
    );
    // Again, a batch later (the probes' slots now name every flow's session), and the replies.
    let [_, again] = send(&mut w, 0, flows.iter().map(|&p| udp(0, LAN_HOST, p, FAR, 53)).collect());
    let ports: Vec<u16> = again.iter().map(|f| tuple(f).1).collect();
    let first: Vec<u16> = out[2 * flows.len()..].iter().map(|f| tuple(f).1).collect();
    assert_eq!(ports, first, "the same translation for each flow");
    let [back, _] = send(&mut w, 1, ports.iter().map(|&p| udp(1, FAR, 53, EXT_ADDR, p)).collect());
    let got: Vec<(Ipv4Addr, u16, Ipv4Addr, u16)> = back.iter().map(|f| tuple(f)).collect();
    let want: Vec<(Ipv4Addr, u16, Ipv4Addr, u16)> =
        flows.iter().map(|&p| (FAR, 53, LAN_HOST, p)).collect();
    assert_eq!(got, want);
    assert_eq!(w.nat_counts().unwrap().created, 12_000 + 2 * flows.len() as u64);
}

/// A table as the pool (`-> <pool>`, round-robin): new translations take its addresses in
/// turn, and its entries as they are now: after `linerate table` replaces them, the new
/// address; with none left, translations fail as `nat_no_address` (pf's empty pool).
#[test]
fn a_table_as_the_pool_follows_its_changes() {
    use dataplane::firewall::tables::TableOp;
    let entry = |s: &str| fw::rules::TableEntry {
        negated: false,
        prefix: fw::rules::parse_prefix(s).unwrap(),
    };
    let rules =
        "table <pool> { 192.0.2.10 192.0.2.11 }\nnat on ext from any to any -> <pool>\npass all\n";
    let rules = CompiledRules::parse(rules, Path::new("nat.conf"), &ifaces).unwrap();
    let slot = RulesSlot::new(Arc::new(rules));
    let mut w = worker("pass all\n", None);
    w.set_firewall(Firewall::new(Arc::clone(&slot), 7));
    let sources = |w: &mut NatWorker, sports: std::ops::Range<u16>| -> Vec<Ipv4Addr> {
        let frames = sports.map(|p| udp(0, LAN_HOST, p, FAR, 53)).collect();
        let [_, out] = send(w, 0, frames);
        out.iter().map(|f| tuple(f).0).collect()
    };
    let (a, b) = (Ipv4Addr::new(192, 0, 2, 10), Ipv4Addr::new(192, 0, 2, 11));
    assert_eq!(sources(&mut w, 1000..1004), [a, b, a, b], "{:?}", w.counts());
    slot.change_table("pool", TableOp::Replace(vec![entry("192.0.2.20")])).unwrap();
    assert_eq!(sources(&mut w, 2000..2002), [Ipv4Addr::new(192, 0, 2, 20); 2]);
    assert_eq!(sources(&mut w, 1000..1001), [a], "a flow keeps its translation");
    slot.change_table("pool", TableOp::Flush).unwrap();
    assert!(sources(&mut w, 3000..3001).is_empty());
    assert_eq!(drops(&w.counts(), DropReason::NatNoAddress), 1);
}
