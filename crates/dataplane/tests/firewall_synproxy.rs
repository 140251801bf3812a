//! pf's `synproxy state` on real frames through a worker: the router answers A's SYN itself,
//! opens the connection to FAR only once A completed that handshake, hands it over when FAR
//! answers, and from then on shifts FAR's numbers to its own; checksums that hold on every
//! frame it builds or rewrites; packets out of turn dropped and counted, never forwarded.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use dataplane::counters::DropReason;
use dataplane::firewall::{CompiledRules, Firewall, RulesSlot};
use dataplane::ports::PortInfo;
use dataplane::worker::Worker;
use io::mem::{CountingTx, ReplayRx};
use io::pool::FramePool;

mod frames;
use frames::world::{A_HOST, A_MAC, B_MAC, FAR, fib, ifaces};
use frames::{Capture, RX_MAC, TX_MAC, fix_tcp_v4, tcp_v4_checksums_hold};

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const RULES: &str = "block all\npass in on if0 proto tcp to 10.0.0.0/8 port 80 synproxy state\n";
/// A's initial sequence number, FAR's.
const C: u32 = 0x1000_0000;
const S: u32 = 0x7654_3210;
/// The MAC of the hosts `frames` sends from.
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x99];

struct Router {
    w: Worker<ReplayRx, Capture, CountingTx>,
}

/// A received frame's fields.
#[derive(Debug)]
struct Seen {
    macs: ([u8; 6], [u8; 6]),
    src: (Ipv4Addr, u16),
    dst: (Ipv4Addr, u16),
    ttl: u8,
    seq: u32,
    ack: u32,
    flags: u8,
    win: u16,
    /// The MSS option, if the header has one.
    mss: Option<u16>,
    payload: usize,
}

fn seen(g: &[u8]) -> Seen {
    assert!(tcp_v4_checksums_hold(g), "checksums recomputed from scratch agree: {g:02x?}");
    assert_eq!(g[14], 0x45, "a plain IPv4 header");
    let total = usize::from(u16::from_be_bytes([g[16], g[17]]));
    assert_eq!(g.len().max(60), (14 + total).max(60), "the frame holds the IP packet");
    let word = |at: usize| u32::from_be_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]);
    let hl = usize::from(g[46] >> 4) * 4;
    let mss = (hl >= 24 && g[54] == 2 && g[55] == 4).then(|| u16::from_be_bytes([g[56], g[57]]));
    Seen {
        macs: (g[0..6].try_into().unwrap(), g[6..12].try_into().unwrap()),
        src: (Ipv4Addr::new(g[26], g[27], g[28], g[29]), u16::from_be_bytes([g[34], g[35]])),
        dst: (Ipv4Addr::new(g[30], g[31], g[32], g[33]), u16::from_be_bytes([g[36], g[37]])),
        ttl: g[22],
        seq: word(38),
        ack: word(42),
        flags: g[47],
        win: u16::from_be_bytes([g[48], g[49]]),
        mss,
        payload: total - 20 - hl,
    }
}

/// A segment from A (`from_a`) or FAR, with `frames::tcp`'s payload or none, and an MSS option.
fn segment(
    from_a: bool,
    flags: u8,
    seq: u32,
    ack: u32,
    payload: bool,
    mss: Option<u16>,
) -> Vec<u8> {
    segment_port(40000, from_a, flags, seq, ack, payload, mss)
}

/// [`segment`] of A's connection from port `sport`.
fn segment_port(
    sport: u16,
    from_a: bool,
    flags: u8,
    seq: u32,
    ack: u32,
    payload: bool,
    mss: Option<u16>,
) -> Vec<u8> {
    let mut f = if from_a {
        frames::tcp(0, A_HOST, sport, FAR, 80, flags, seq, ack)
    } else {
        frames::tcp(1, FAR, 80, A_HOST, sport, flags, seq, ack)
    };
    if !payload {
        f.truncate(34 + 20);
    }
    if let Some(m) = mss {
        f.splice(54..54, [2, 4, (m >> 8) as u8, m as u8]);
        f[46] = 6 << 4;
    }
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    fix_tcp_v4(&mut f);
    f
}

impl Router {
    fn new() -> Router {
        Router::with(fib(), RULES)
    }

    fn with(fib: Arc<dataplane::fib::Fib>, rules: &str) -> Router {
        let ports = [PortInfo::new("if0", RX_MAC, 0), PortInfo::new("if1", TX_MAC, 1)];
        let rx =
            vec![ReplayRx::new(0, Vec::<Vec<u8>>::new()), ReplayRx::new(1, Vec::<Vec<u8>>::new())];
        let mut w = Worker::new(
            fib,
            &ports,
            rx,
            vec![Capture::default(), Capture::default()],
            CountingTx::new(),
            FramePool::new(600),
            256,
        );
        let rules = CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap();
        w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
        Router { w }
    }

    /// Receives `f` on A's port (`from_a`) or FAR's: what then leaves towards A, towards FAR.
    fn send(&mut self, from_a: bool, f: Vec<u8>) -> (Vec<Seen>, Vec<Seen>) {
        self.send_all(from_a, vec![f])
    }

    /// [`send`](Self::send) of several frames, received in one batch.
    fn send_all(&mut self, from_a: bool, f: Vec<Vec<u8>>) -> (Vec<Seen>, Vec<Seen>) {
        let port = if from_a { 0 } else { 1 };
        self.w.rx[port] = ReplayRx::new(port as u16, f).once();
        while !self.w.rx[port].finished() {
            self.w.poll();
        }
        let to_a = self.w.tx[0].frames.drain(..).map(|g| seen(&g)).collect();
        let to_far = self.w.tx[1].frames.drain(..).map(|g| seen(&g)).collect();
        (to_a, to_far)
    }

    fn synproxy_drops(&self) -> u64 {
        self.w.counts().drops[DropReason::Synproxy as usize]
    }

    /// A's SYN: the router's SYN-ACK, its initial number.
    fn syn(&mut self) -> u32 {
        let (to_a, to_far) = self.send(true, segment(true, SYN, C, 0, false, Some(1400)));
        assert!(to_far.is_empty(), "the SYN is not forwarded: {to_far:?}");
        let [sa] = &to_a[..] else { panic!("one SYN-ACK: {to_a:?}") };
        assert_eq!(sa.macs, (HOST_MAC, RX_MAC.0), "back to the SYN's sender, from the port's MAC");
        assert_eq!((sa.src, sa.dst), ((FAR, 80), (A_HOST, 40000)), "as if from FAR");
        assert_eq!(
            (sa.flags, sa.ack, sa.win, sa.mss, sa.ttl, sa.payload),
            (SYN | ACK, C + 1, 0, Some(1400), 64, 0)
        );
        sa.seq
    }

    /// A's ACK of the SYN-ACK: the router's SYN to FAR.
    fn ack(&mut self, r: u32) {
        let (to_a, to_far) =
            self.send(true, segment(true, ACK, C + 1, r.wrapping_add(1), false, None));
        assert!(to_a.is_empty(), "{to_a:?}");
        let [syn] = &to_far[..] else { panic!("one SYN to FAR: {to_far:?}") };
        assert_eq!(syn.macs, (B_MAC.0, TX_MAC.0), "routed to FAR's gateway");
        assert_eq!((syn.src, syn.dst), ((A_HOST, 40000), (FAR, 80)), "A's ends");
        assert_eq!(
            (syn.flags, syn.seq, syn.ack, syn.mss, syn.ttl, syn.payload),
            (SYN, C, 0, Some(1400), 63, 0),
            "A's number and MSS"
        );
    }
}

#[test]
fn handshake_then_data_both_ways_shifted() {
    let mut r = Router::new();
    let isn = r.syn();
    // A retransmitted SYN: the same SYN-ACK.
    assert_eq!(r.syn(), isn);
    r.ack(isn);
    // FAR's SYN-ACK: the router's ACK back to FAR, and an ACK to A opening its window.
    let (to_a, to_far) = r.send(false, segment(false, SYN | ACK, S, C + 1, false, Some(1300)));
    let [ack_far] = &to_far[..] else { panic!("one ACK to FAR: {to_far:?}") };
    assert_eq!(ack_far.macs, (HOST_MAC, TX_MAC.0));
    assert_eq!((ack_far.src, ack_far.dst), ((A_HOST, 40000), (FAR, 80)));
    assert_eq!(
        (ack_far.flags, ack_far.seq, ack_far.ack, ack_far.win, ack_far.mss),
        (ACK, C + 1, S + 1, 65535, None),
        "A's window"
    );
    let [ack_a] = &to_a[..] else { panic!("one ACK to A: {to_a:?}") };
    assert_eq!(ack_a.macs, (A_MAC.0, RX_MAC.0), "routed to A");
    assert_eq!((ack_a.src, ack_a.dst), ((FAR, 80), (A_HOST, 40000)));
    assert_eq!(
        (ack_a.flags, ack_a.seq, ack_a.ack, ack_a.win, ack_a.mss),
        (ACK, isn.wrapping_add(1), C + 1, 65535, None),
        "the router's numbers, FAR's window"
    );
    // Data both ways: A's numbers reach FAR as they are, FAR's reach A shifted to the
    // router's, each end's acknowledgements in its own numbers.
    let p = frames::tcp(0, A_HOST, 40000, FAR, 80, ACK, 0, 0).len() as u32 - 54;
    let mut a_seq = C + 1;
    let mut f_seq = S + 1;
    for round in 0..4 {
        let (to_a, to_far) = r.send(
            true,
            segment(true, ACK | PSH, a_seq, f_seq.wrapping_sub(S).wrapping_add(isn), true, None),
        );
        assert!(to_a.is_empty());
        let [d] = &to_far[..] else { panic!("round {round}: A's data forwarded: {to_far:?}") };
        assert_eq!((d.seq, d.ack, d.payload as u32), (a_seq, f_seq, p), "round {round}");
        a_seq += p;
        let (to_a, to_far) = r.send(false, segment(false, ACK | PSH, f_seq, a_seq, true, None));
        assert!(to_far.is_empty());
        let [d] = &to_a[..] else { panic!("round {round}: FAR's data forwarded: {to_a:?}") };
        assert_eq!(
            (d.seq, d.ack, d.payload as u32),
            (f_seq.wrapping_sub(S).wrapping_add(isn), a_seq, p),
            "round {round}"
        );
        f_seq += p;
    }
    let states = r.w.firewall().unwrap().stats().states();
    let get = |n: &str| states.iter().find(|(k, _)| *k == n).unwrap().1;
    assert_eq!(
        (
            get("synproxy_syn_acks"),
            get("synproxy_syns"),
            get("synproxy_established"),
            get("synproxy_dropped")
        ),
        (2, 1, 1, 0)
    );
    // The two SYNs were consumed (answered); A's ACK and FAR's SYN-ACK left as the router's
    // SYN and ACK.
    assert_eq!(r.synproxy_drops(), 2);
    assert_eq!(r.w.counts().drops[DropReason::StateOutOfWindow as usize], 0);
}

#[test]
fn out_of_turn_packets_are_dropped_and_counted() {
    let mut r = Router::new();
    let isn = r.syn();
    // FAR's side before the router sent it anything: a SYN-ACK, data.
    for f in [
        segment(false, SYN | ACK, S, C + 1, false, None),
        segment(false, ACK | PSH, S + 1, C + 1, true, None),
    ] {
        let (to_a, to_far) = r.send(false, f);
        assert!(to_a.is_empty() && to_far.is_empty(), "{to_a:?} {to_far:?}");
    }
    // A's ACK with a wrong acknowledgement, a wrong sequence number, data before its ACK.
    for f in [
        segment(true, ACK, C + 1, isn.wrapping_add(2), false, None),
        segment(true, ACK, C + 9, isn.wrapping_add(1), false, None),
        segment(true, PSH, C + 1, 0, true, None),
    ] {
        let (to_a, to_far) = r.send(true, f);
        assert!(to_a.is_empty() && to_far.is_empty(), "{to_a:?} {to_far:?}");
    }
    assert_eq!(r.synproxy_drops(), 1 + 5, "the SYN, and the five out of turn");
    r.ack(isn);
    // Waiting for FAR: a SYN-ACK acknowledging something else is dropped.
    let (to_a, to_far) = r.send(false, segment(false, SYN | ACK, S, C + 5, false, None));
    assert!(to_a.is_empty() && to_far.is_empty());
    let states = r.w.firewall().unwrap().stats().states();
    assert_eq!(states.iter().find(|(k, _)| *k == "synproxy_dropped").unwrap().1, 6);
}

#[test]
fn other_traffic_is_not_proxied() {
    let mut r = Router::new();
    // Another port: no rule passes it, blocked as before.
    let mut f = frames::tcp(0, A_HOST, 40000, FAR, 81, SYN, C, 0);
    f.truncate(54);
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    fix_tcp_v4(&mut f);
    let (to_a, to_far) = r.send(true, f);
    assert!(to_a.is_empty() && to_far.is_empty());
    assert_eq!(
        (r.synproxy_drops(), r.w.counts().drops[DropReason::FilterBlocked as usize]),
        (0, 1)
    );
}

/// Several handshakes in one batch, mixed with packets the proxy drops and packets the rules
/// block: each answer is built from its own packet (the proxy pass pairs the firewall's
/// queued steps with the batch's dropped packets in order).
#[test]
fn handshakes_in_one_batch() {
    let mut r = Router::new();
    let blocked = || {
        let mut f = frames::tcp(0, A_HOST, 40009, FAR, 81, SYN, 1, 0);
        f.truncate(54);
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        fix_tcp_v4(&mut f);
        f
    };
    let isn = |p: u16| C + u32::from(p) * 1000;
    let syns = vec![
        blocked(),
        segment_port(40001, true, SYN, isn(40001), 0, false, Some(1401)),
        blocked(),
        segment_port(40002, true, SYN, isn(40002), 0, false, Some(1402)),
    ];
    let (to_a, to_far) = r.send_all(true, syns);
    assert!(to_far.is_empty(), "{to_far:?}");
    assert_eq!(to_a.len(), 2, "{to_a:?}");
    let mut routers = std::collections::HashMap::new();
    for sa in &to_a {
        let p = sa.dst.1;
        assert_eq!(
            (sa.flags, sa.ack, sa.mss),
            (SYN | ACK, isn(p) + 1, Some(p - 40001 + 1401)),
            "{sa:?}"
        );
        routers.insert(p, sa.seq);
    }
    // One batch: 40002's wrong ACK (dropped, nothing sent), a blocked packet, 40001's and
    // 40002's right ACKs.
    let acks = vec![
        segment_port(
            40002,
            true,
            ACK,
            isn(40002) + 1,
            routers[&40002].wrapping_add(7),
            false,
            None,
        ),
        blocked(),
        segment_port(
            40001,
            true,
            ACK,
            isn(40001) + 1,
            routers[&40001].wrapping_add(1),
            false,
            None,
        ),
        segment_port(
            40002,
            true,
            ACK,
            isn(40002) + 1,
            routers[&40002].wrapping_add(1),
            false,
            None,
        ),
    ];
    let (to_a, to_far) = r.send_all(true, acks);
    assert!(to_a.is_empty(), "{to_a:?}");
    let got: Vec<_> = to_far.iter().map(|s| (s.src.1, s.flags, s.seq, s.mss)).collect();
    assert_eq!(
        got,
        vec![(40001, SYN, isn(40001), Some(1401)), (40002, SYN, isn(40002), Some(1402))]
    );
    // Both servers' SYN-ACKs in one batch.
    let sas = vec![
        segment_port(40001, false, SYN | ACK, S, isn(40001) + 1, false, None),
        segment_port(40002, false, SYN | ACK, S + 5, isn(40002) + 1, false, None),
    ];
    let (to_a, to_far) = r.send_all(false, sas);
    let got: Vec<_> = to_far.iter().map(|s| (s.src.1, s.flags, s.seq, s.ack)).collect();
    assert_eq!(got, vec![(40001, ACK, isn(40001) + 1, S + 1), (40002, ACK, isn(40002) + 1, S + 6)]);
    let got: Vec<_> = to_a.iter().map(|s| (s.dst.1, s.flags, s.seq, s.ack)).collect();
    assert_eq!(
        got,
        vec![
            (40001, ACK, routers[&40001].wrapping_add(1), isn(40001) + 1),
            (40002, ACK, routers[&40002].wrapping_add(1), isn(40002) + 1)
        ]
    );
    assert_eq!(r.w.counts().drops[DropReason::FilterBlocked as usize], 3);
}

/// A SYN to the router's own address under a `synproxy` rule is not proxied (the host's
/// answer would never reach the proxy): it goes to the host, its state a plain one.
#[test]
fn connections_to_the_router_are_not_proxied() {
    let router = Ipv4Addr::new(198, 18, 0, 1);
    let mut ctl = dataplane::fib::FibControl::new(64);
    ctl.set_neighbour(std::net::IpAddr::V4(A_HOST), 0, A_MAC).unwrap();
    ctl.add_local(std::net::IpAddr::V4(router)).unwrap();
    let mut r = Router::with(ctl.fib(), "block all\npass in on if0 proto tcp synproxy state\n");
    let mut f = frames::tcp(0, A_HOST, 40000, router, 22, SYN, C, 0);
    f.truncate(54);
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    fix_tcp_v4(&mut f);
    let (to_a, to_far) = r.send(true, f);
    assert!(to_a.is_empty() && to_far.is_empty(), "no SYN-ACK from the proxy: {to_a:?}");
    assert_eq!((r.w.counts().local, r.synproxy_drops()), (1, 0), "the SYN went to the host");
    let states = r.w.firewall().unwrap().stats().states();
    let get = |n: &str| states.iter().find(|(k, _)| *k == n).unwrap().1;
    assert_eq!((get("inserts"), get("synproxy_syn_acks")), (1, 0));
}
