//! NAT66 (pf's `nat`, `rdr`, `binat` for inet6) through a whole worker over in-memory ports:
//! the source of UDP and echo requests translated and their replies translated back, `rdr`
//! to an inside server, `binat`, an ICMPv6 error about a translated flow, and the out rules
//! judging the packet as it will leave. Every frame that comes out has its checksum checked
//! from scratch.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::punt::{PuntBatch, PuntPort};
use dataplane::{Fib, FibControl, PortInfo, Worker};
use io::FramePool;
use io::mem::ReplayRx;
use wire::MacAddr;
use wire::checksum::{fold, pseudo_header_v6, sum};

mod frames;
use frames::{Capture, RX_MAC, TX_MAC};

const LAN_HOST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
const EXT: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1);
const EXT_GW: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0xfe);
const FAR: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 1);
const ROUTER_BEYOND: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 0xfe);
const EXT4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const SERVER4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 50);
/// SERVER4 in the well-known prefix 64:ff9b::/96 (RFC 6052).
const SERVER6: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0xc000, 0x0232);
/// An IPv4-only host on the lan (NAT46's client).
const LAN_HOST4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const LAN_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa2]);
const GW_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb2]);

fn fib() -> Arc<Fib> {
    let mut ctl = FibControl::new(64);
    ctl.set_neighbour(IpAddr::V6(LAN_HOST), 0, LAN_MAC).unwrap();
    ctl.set_neighbour(IpAddr::V6(EXT_GW), 1, GW_MAC).unwrap();
    let far_net = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 0);
    ctl.add_route(IpAddr::V6(far_net), 48, IpAddr::V6(EXT_GW), 1).unwrap();
    ctl.add_local(IpAddr::V6(EXT)).unwrap();
    ctl.set_neighbour(IpAddr::V4(SERVER4), 1, GW_MAC).unwrap();
    ctl.set_neighbour(IpAddr::V4(LAN_HOST4), 0, LAN_MAC).unwrap();
    ctl.add_local(IpAddr::V4(EXT4)).unwrap();
    ctl.fib()
}

#[derive(Default)]
struct Punts;

impl PuntPort for Punts {
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch) {
        for (desc, _, _) in punts.drain() {
            pool.free(desc);
        }
    }
}

type NatWorker = Worker<ReplayRx, Capture, Punts>;

/// Port 0 ("lan") faces 2001:db8:1::/64; port 1 ("ext", 2001:db8:2::1) leads to
/// 2001:db8:9::/48.
fn worker(rules: &str) -> NatWorker {
    let mut ext = PortInfo::new("ext", TX_MAC, 1);
    ext.addresses.push((IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)), 64));
    ext.addresses.push((IpAddr::V6(EXT), 64));
    ext.addresses.push((IpAddr::V4(EXT4), 24));
    let rx = vec![
        ReplayRx::new(0, Vec::<Vec<u8>>::new()).once(),
        ReplayRx::new(1, Vec::<Vec<u8>>::new()).once(),
    ];
    let mut w = Worker::new(
        fib(),
        &[PortInfo::new("lan", RX_MAC, 0), ext],
        rx,
        vec![Capture::default(), Capture::default()],
        Punts,
        FramePool::new(600),
        256,
    );
    let ifaces = |n: &str| ["lan", "ext"].iter().position(|x| *x == n).map(|i| i as u16);
    let rules = CompiledRules::parse(rules, Path::new("nat66.conf"), &ifaces).unwrap();
    w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
    w
}

/// Sends `frames` in on `port` and returns what came out of each port.
fn send(w: &mut NatWorker, port: u16, frames: Vec<Vec<u8>>) -> [Vec<Vec<u8>>; 2] {
    w.rx[usize::from(port)] = ReplayRx::new(port, frames).once();
    while !w.rx[usize::from(port)].finished() {
        w.poll();
    }
    w.poll();
    [std::mem::take(&mut w.tx[0].frames), std::mem::take(&mut w.tx[1].frames)]
}

/// The L4 checksum offset of protocol `p`.
fn ck_at(p: u8) -> usize {
    match p {
        6 => 16,
        17 => 6,
        _ => 2,
    }
}

/// A frame received on `port` carrying protocol `p` from `src` to `dst` with L4 bytes `l4`,
/// its checksum filled in.
fn frame(port: u16, p: u8, src: Ipv6Addr, dst: Ipv6Addr, l4: &[u8]) -> Vec<u8> {
    let dst_mac = if port == 0 { RX_MAC } else { TX_MAC };
    let mut f = dst_mac.0.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x99, 0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    f.extend_from_slice(&[p, 64]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(l4);
    let ck = l4_checksum(&f[14..], p);
    let at = 54 + ck_at(p);
    f[at..at + 2].copy_from_slice(&ck.to_be_bytes());
    f
}

/// The L4 checksum of the IPv6 packet `ip`, computed with its field taken as zero.
fn l4_checksum(ip: &[u8], p: u8) -> u16 {
    let src: [u8; 16] = ip[8..24].try_into().unwrap();
    let dst: [u8; 16] = ip[24..40].try_into().unwrap();
    let mut msg = ip[40..].to_vec();
    msg[ck_at(p)..ck_at(p) + 2].fill(0);
    let pseudo = pseudo_header_v6(&src.into(), &dst.into(), p, msg.len() as u32);
    !fold(u64::from(pseudo) + u64::from(sum(&msg)))
}

fn udp(port: u16, src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Vec<u8> {
    let mut l4 = [0u8; 12];
    l4[..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    l4[4..6].copy_from_slice(&12u16.to_be_bytes());
    l4[8..].copy_from_slice(b"ping");
    frame(port, 17, src, dst, &l4)
}

/// (src, sport or echo id, dst, dport) of a frame's IPv6 packet, its checksum checked.
fn tuple(f: &[u8]) -> (Ipv6Addr, u16, Ipv6Addr, u16) {
    let ip = &f[14..];
    let p = ip[6];
    let at = 40 + ck_at(p);
    assert_eq!(u16::from_be_bytes([ip[at], ip[at + 1]]), l4_checksum(ip, p), "checksum of {p}");
    let a = |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&ip[at..at + 16]).unwrap());
    let w = |at: usize| u16::from_be_bytes([ip[40 + at], ip[41 + at]]);
    if p == 58 { (a(8), w(4), a(24), w(4)) } else { (a(8), w(0), a(24), w(2)) }
}

#[test]
fn nat_translates_udp_and_its_replies() {
    let mut w =
        worker("nat on ext inet6 from 2001:db8:1::/64 to any -> (ext)\npass all keep state\n");
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    let (src, sport, dst, dport) = tuple(&out[0]);
    assert_eq!((src, dst, dport), (EXT, FAR, 53), "the source is the interface's global address");
    assert!(sport >= 50001, "a port of pf's range: {sport}");
    let [back, _] = send(&mut w, 1, vec![udp(1, FAR, 53, EXT, sport)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&back[0]), (FAR, 53, LAN_HOST, 1000));
    // The flow's next datagram takes the same translation.
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    assert_eq!(tuple(&out[0]), (EXT, sport, FAR, 53));
    let counts = w.nat_counts().unwrap();
    assert_eq!((counts.sessions, counts.translated), (1, 3));
}

#[test]
fn echo_identifiers_are_translated_as_ports() {
    let mut w = worker("nat on ext inet6 from 2001:db8:1::/64 -> 2001:db8:2::100\npass all\n");
    let echo = |port, typ: u8, src, dst, id: u16| {
        let mut l4 = vec![typ, 0, 0, 0];
        l4.extend_from_slice(&id.to_be_bytes());
        l4.extend_from_slice(&[0, 1, 0xab, 0xcd]);
        frame(port, 58, src, dst, &l4)
    };
    let pool = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x100);
    let [_, out] = send(&mut w, 0, vec![echo(0, 128, LAN_HOST, FAR, 0x1234)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    let (src, id, _, _) = tuple(&out[0]);
    assert_eq!(src, pool);
    let [back, _] = send(&mut w, 1, vec![echo(1, 129, FAR, pool, id)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&back[0]), (FAR, 0x1234, LAN_HOST, 0x1234));
}

/// traceroute through NAT66: a router beyond says "time exceeded" about the translated
/// datagram; the error reaches the inside host with the quote as it sent it.
#[test]
fn an_error_about_a_translated_flow_goes_back_inside() {
    let mut w = worker("nat on ext inet6 from 2001:db8:1::/64 to any -> (ext)\npass all\n");
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 33434, FAR, 33435)]);
    let sent = out[0][14..].to_vec();
    let mut l4 = vec![3, 0, 0, 0, 0, 0, 0, 0];
    l4.extend_from_slice(&sent);
    let [back, _] = send(&mut w, 1, vec![frame(1, 58, ROUTER_BEYOND, EXT, &l4)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&back[0]).2, LAN_HOST);
    let quote = &back[0][14 + 48..];
    assert_eq!(&quote[8..24], &LAN_HOST.octets(), "the quoted source");
    assert_eq!(u16::from_be_bytes([quote[40], quote[41]]), 33434, "the quoted port");
    let qck = u16::from_be_bytes([quote[46], quote[47]]);
    assert_eq!(qck, l4_checksum(quote, 17), "the quoted datagram's checksum");
}

#[test]
fn rdr_and_binat_for_inet6() {
    let rules = "rdr on ext inet6 proto udp to 2001:db8:2::1 port 80 -> 2001:db8:1::2 port 8080\n\
                 binat on ext from 2001:db8:1::7 to any -> 2001:db8:2::7\npass all\n";
    let mut w = worker(rules);
    let [back, _] = send(&mut w, 1, vec![udp(1, FAR, 4000, EXT, 80)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&back[0]), (FAR, 4000, LAN_HOST, 8080));
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 8080, FAR, 4000)]);
    assert_eq!(tuple(&out[0]), (EXT, 80, FAR, 4000), "the server's reply as the client knows it");
    let inside = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7);
    let outside = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 7);
    let [_, out] = send(&mut w, 0, vec![udp(0, inside, 5000, FAR, 53)]);
    assert_eq!(tuple(&out[0]), (outside, 5000, FAR, 53));
}

/// pf translates before the out rules judge: a rule on the translated source blocks the
/// packet, and leaves no translation behind.
#[test]
fn out_rules_see_the_translated_source() {
    let rules = "nat on ext inet6 from 2001:db8:1::/64 to any -> (ext)\npass all\n\
                 block out on ext inet6 proto udp from 2001:db8:2::1 to any port 53\n";
    let mut w = worker(rules);
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 53)]);
    assert!(out.is_empty(), "blocked as it would leave");
    assert_eq!(w.nat_counts().unwrap().sessions, 0, "no translation left behind");
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, FAR, 54)]);
    assert_eq!(tuple(&out[0]).0, EXT);
}

/// An IPv4 frame received on port 1 carrying `l4` of protocol `p`, its checksums filled in.
fn frame4(p: u8, src: Ipv4Addr, dst: Ipv4Addr, l4: &[u8]) -> Vec<u8> {
    frame4_to(TX_MAC, p, src, dst, l4)
}

/// [`frame4`] to the MAC of the port it arrives on (`RX_MAC`: port 0).
fn frame4_to(mac: MacAddr, p: u8, src: Ipv4Addr, dst: Ipv4Addr, l4: &[u8]) -> Vec<u8> {
    let mut f = mac.0.to_vec();
    f.extend_from_slice(&[
        2, 0, 0, 0, 0, 0x98, 0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, p, 0, 0,
    ]);
    let total = (20 + l4.len()) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let ck = wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&ck.to_be_bytes());
    let mut l4 = l4.to_vec();
    let at = ck_at(p);
    l4[at..at + 2].fill(0);
    let pseudo =
        if p == 1 { 0 } else { wire::checksum::pseudo_header_v4(&src, &dst, p, l4.len() as u32) };
    let ck = !fold(u64::from(pseudo) + u64::from(sum(&l4)));
    l4[at..at + 2].copy_from_slice(&ck.to_be_bytes());
    f.extend_from_slice(&l4);
    f
}

/// (src, sport or echo id, dst, dport) of an IPv4 frame, its checksums checked.
fn tuple4(f: &[u8]) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
    let ip = &f[14..];
    assert_eq!(wire::checksum::checksum(&ip[..20]), 0, "IPv4 header checksum");
    let a = |at: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&ip[at..at + 4]).unwrap());
    let l4 = &ip[20..];
    let pseudo = match ip[9] {
        1 => 0,
        p => wire::checksum::pseudo_header_v4(&a(12), &a(16), p, l4.len() as u32),
    };
    assert_eq!(fold(u64::from(pseudo) + u64::from(sum(l4))), 0xffff, "L4 checksum");
    let w = |at: usize| u16::from_be_bytes([l4[at], l4[at + 1]]);
    if ip[9] == 1 { (a(12), w(4), a(16), w(4)) } else { (a(12), w(0), a(16), w(2)) }
}

/// OpenBSD's NAT64: the client's IPv6 datagram leaves as IPv4 from the pool, the reply
/// comes back as IPv6 from the server's address in 64:ff9b::/96, and so do pings and the
/// server's "port unreachable" (as traceroute's last hop sends it).
#[test]
fn af_to_translates_ipv6_to_ipv4_and_back() {
    let rules = "pass in quick on lan inet6 from any to 64:ff9b::/96 af-to inet from 192.0.2.1\n\
                 pass all\n";
    let mut w = worker(rules);
    let [_, out] = send(&mut w, 0, vec![udp(0, LAN_HOST, 1000, SERVER6, 53)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    let (src, sport, dst, dport) = tuple4(&out[0]);
    assert_eq!((src, dst, dport), (EXT4, SERVER4, 53));
    assert!(sport >= 50001, "{sport}");
    let mut reply = [0u8; 12];
    reply[..2].copy_from_slice(&53u16.to_be_bytes());
    reply[2..4].copy_from_slice(&sport.to_be_bytes());
    reply[4..6].copy_from_slice(&12u16.to_be_bytes());
    let [back, _] = send(&mut w, 1, vec![frame4(17, SERVER4, EXT4, &reply)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&back[0]), (SERVER6, 53, LAN_HOST, 1000));

    let mut err = vec![3, 3, 0, 0, 0, 0, 0, 0];
    err.extend_from_slice(&out[0][14..]);
    let [back, _] = send(&mut w, 1, vec![frame4(1, SERVER4, EXT4, &err)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    let ip = &back[0][14..];
    assert_eq!((ip[6], ip[40], ip[41]), (58, 1, 4), "ICMPv6 port unreachable");
    assert_eq!(tuple(&back[0]).2, LAN_HOST);
    assert_eq!(&ip[48 + 8..48 + 24], &LAN_HOST.octets(), "the quote's source");

    let echo = |typ: u8, id: u16| {
        let mut l4 = vec![typ, 0, 0, 0];
        l4.extend_from_slice(&id.to_be_bytes());
        l4.extend_from_slice(&[0, 1]);
        l4
    };
    let [_, out] = send(&mut w, 0, vec![frame(0, 58, LAN_HOST, SERVER6, &echo(128, 0x4242))]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    let (src, id, dst, _) = tuple4(&out[0]);
    assert_eq!((src, dst, out[0][34]), (EXT4, SERVER4, 8));
    let [back, _] = send(&mut w, 1, vec![frame4(1, SERVER4, EXT4, &echo(0, id))]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple(&back[0]), (SERVER6, 0x4242, LAN_HOST, 0x4242));
    assert_eq!(back[0][54], 129, "echo reply");
}

/// OpenBSD's NAT46: the IPv4 client's datagram leaves as IPv6 from the rule's address and a
/// port of pf's range to the server's IPv4 address within the /96; the reply comes back as
/// IPv4 from the address the client wrote to; so do pings.
#[test]
fn af_to_inet6_translates_ipv4_to_ipv6_and_back() {
    let rules = "pass in quick on lan inet from any to 198.51.100.0/24 af-to inet6 from 2001:db8:2::1 to 2001:db8:9::/96\n\
                 pass all\n";
    let mut w = worker(rules);
    let server4 = Ipv4Addr::new(198, 51, 100, 7);
    let server6 = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0xc633, 0x6407);
    let mut l4 = [0u8; 12];
    l4[..2].copy_from_slice(&1000u16.to_be_bytes());
    l4[2..4].copy_from_slice(&53u16.to_be_bytes());
    l4[4..6].copy_from_slice(&12u16.to_be_bytes());
    let [_, out] = send(&mut w, 0, vec![frame4_to(RX_MAC, 17, LAN_HOST4, server4, &l4)]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    let (src, sport, dst, dport) = tuple(&out[0]);
    assert_eq!((src, dst, dport), (EXT, server6, 53));
    assert!(sport >= 50001, "{sport}");
    let [back, _] = send(&mut w, 1, vec![udp(1, server6, 53, EXT, sport)]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple4(&back[0]), (server4, 53, LAN_HOST4, 1000));
    // The flow's next datagram takes the same translation.
    let [_, out] = send(&mut w, 0, vec![frame4_to(RX_MAC, 17, LAN_HOST4, server4, &l4)]);
    assert_eq!(tuple(&out[0]), (EXT, sport, server6, 53));
    // The server's "port unreachable" and a router's "time exceeded" about the translated
    // datagram: ICMPv4 errors to the client, quoting its datagram as it sent it.
    let sent = out[0][14..].to_vec();
    for (from, typ, code, want) in [(server6, 1, 4, (3, 3)), (EXT_GW, 3, 0, (11, 0))] {
        let mut err = vec![typ, code, 0, 0, 0, 0, 0, 0];
        err.extend_from_slice(&sent);
        let [back, _] = send(&mut w, 1, vec![frame(1, 58, from, EXT, &err)]);
        assert_eq!(back.len(), 1, "{:?}", w.counts());
        let ip = &back[0][14..];
        assert_eq!(wire::checksum::checksum(&ip[..20]), 0, "IPv4 header checksum");
        assert_eq!(wire::checksum::checksum(&ip[20..]), 0, "ICMP checksum");
        assert_eq!((ip[9], ip[20], ip[21]), (1, want.0, want.1), "ICMPv4 {want:?}");
        assert_eq!(&ip[16..20], &LAN_HOST4.octets());
        let q = &ip[28..];
        assert_eq!(wire::checksum::checksum(&q[..20]), 0, "the quote's header checksum");
        assert_eq!((&q[12..16], &q[16..20]), (&LAN_HOST4.octets()[..], &server4.octets()[..]));
        assert_eq!(u16::from_be_bytes([q[20], q[21]]), 1000, "the client's own port");
    }

    let echo = |typ: u8, id: u16| {
        let mut l4 = vec![typ, 0, 0, 0];
        l4.extend_from_slice(&id.to_be_bytes());
        l4.extend_from_slice(&[0, 1]);
        l4
    };
    let [_, out] =
        send(&mut w, 0, vec![frame4_to(RX_MAC, 1, LAN_HOST4, server4, &echo(8, 0x4242))]);
    assert_eq!(out.len(), 1, "{:?}", w.counts());
    let (src, id, dst, _) = tuple(&out[0]);
    assert_eq!((src, dst, out[0][54]), (EXT, server6, 128), "an ICMPv6 echo request");
    let [back, _] = send(&mut w, 1, vec![frame(1, 58, server6, EXT, &echo(129, id))]);
    assert_eq!(back.len(), 1, "{:?}", w.counts());
    assert_eq!(tuple4(&back[0]), (server4, 0x4242, LAN_HOST4, 0x4242));
    assert_eq!(back[0][34], 0, "an ICMPv4 echo reply");
    let counts = w.nat_counts().unwrap();
    assert_eq!((counts.sessions, counts.translated), (2, 7));
    // Not the rule's destination: routed as IPv4, untranslated (no route here).
    let [_, out] =
        send(&mut w, 0, vec![frame4_to(RX_MAC, 17, LAN_HOST4, Ipv4Addr::new(203, 0, 113, 1), &l4)]);
    assert!(out.is_empty());
    assert_eq!(w.nat_counts().unwrap().translated, 7);
}
