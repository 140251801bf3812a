//! pf's `modulate state` on real frames through a worker: a TCP connection's handshake and
//! data both ways, each end's sequence numbers leaving shifted by one constant, non-zero
//! offset, the acknowledgements each receives in its own numbers, checksums that hold, no
//! packet dropped out of window.

use std::net::{Ipv4Addr, Ipv6Addr};
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

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;
/// TCP payload bytes of a `frames::tcp` segment.
const PAYLOAD: u32 = 48;

/// A worker between A (port 0, "if0") and FAR (port 1, "if1"), fed one frame at a time.
struct Router {
    w: Worker<ReplayRx, Capture, CountingTx>,
    /// A's address and port as FAR sees them (NAT's, with `nat`).
    a_seen: Ipv4Addr,
    a_port_seen: u16,
}

impl Router {
    fn new(rules: &str) -> Router {
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
        let rules = CompiledRules::parse(rules, Path::new("test.conf"), &ifaces).unwrap();
        w.set_firewall(Firewall::new(RulesSlot::new(Arc::new(rules)), 7));
        Router { w, a_seen: A_HOST, a_port_seen: 40000 }
    }

    /// A segment sent by A (`from_a`) or FAR, `payload` bytes or none: (seq, ack) of the
    /// segment as the other end receives it.
    fn send(&mut self, from_a: bool, flags: u8, seq: u32, ack: u32, payload: bool) -> (u32, u32) {
        let (port, out) = if from_a { (0, 1) } else { (1, 0) };
        let mut f = if from_a {
            frames::tcp(0, A_HOST, 40000, FAR, 80, flags, seq, ack)
        } else {
            frames::tcp(1, FAR, 80, self.a_seen, self.a_port_seen, flags, seq, ack)
        };
        if !payload {
            f.truncate(34 + 20);
            f[16..18].copy_from_slice(&40u16.to_be_bytes());
            fix_tcp_v4(&mut f);
        }
        self.w.rx[port] = ReplayRx::new(port as u16, vec![f]).once();
        while !self.w.rx[port].finished() {
            self.w.poll();
        }
        let g = self.w.tx[out].frames.pop().expect("the segment was forwarded");
        assert!(tcp_v4_checksums_hold(&g), "checksums recomputed from scratch agree");
        let src = Ipv4Addr::new(g[26], g[27], g[28], g[29]);
        assert_eq!(src, if from_a { self.a_seen } else { FAR });
        if from_a {
            self.a_port_seen = u16::from_be_bytes([g[34], g[35]]);
        } else {
            assert_eq!(
                (u16::from_be_bytes([g[36], g[37]]), Ipv4Addr::new(g[30], g[31], g[32], g[33])),
                (40000, A_HOST),
                "translated back"
            );
        }
        let word = |at: usize| u32::from_be_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]);
        (word(38), word(42))
    }

    fn counts(&self) -> Counts {
        self.w.counts()
    }
}

/// A's connection to FAR:80: handshake, `rounds` of data both ways, close. Returns the
/// offsets A's and FAR's numbers were shifted by, as the other end saw them.
fn connection(r: &mut Router, isn_a: u32, isn_far: u32, rounds: usize) -> (u32, u32) {
    let (syn_seq, _) = r.send(true, SYN, isn_a, 0, false);
    let da = syn_seq.wrapping_sub(isn_a);
    let (seq, ack) = r.send(false, SYN | ACK, isn_far, syn_seq.wrapping_add(1), false);
    let df = seq.wrapping_sub(isn_far);
    assert_eq!(ack, isn_a.wrapping_add(1), "A sees its own numbers acknowledged");
    // Each end's next number in its own space: the other end sees it shifted.
    let (mut a, mut far) = (isn_a.wrapping_add(1), isn_far.wrapping_add(1));
    let (seq, ack) = r.send(true, ACK, a, far.wrapping_add(df), false);
    assert_eq!((seq, ack), (a.wrapping_add(da), far));
    for _ in 0..rounds {
        let (seq, ack) = r.send(true, ACK | PSH, a, far.wrapping_add(df), true);
        assert_eq!((seq, ack), (a.wrapping_add(da), far), "constant offsets");
        a = a.wrapping_add(PAYLOAD);
        let (seq, ack) = r.send(false, ACK | PSH, far, seq.wrapping_add(PAYLOAD), true);
        assert_eq!((seq, ack), (far.wrapping_add(df), a), "FAR's acknowledgement in A's numbers");
        far = far.wrapping_add(PAYLOAD);
    }
    let (seq, _) = r.send(true, FIN | ACK, a, far.wrapping_add(df), false);
    let (_, ack) = r.send(false, FIN | ACK, far, seq.wrapping_add(1), false);
    assert_eq!(ack, a.wrapping_add(1));
    let (_, ack) =
        r.send(true, ACK, a.wrapping_add(1), far.wrapping_add(df).wrapping_add(1), false);
    assert_eq!(ack, far.wrapping_add(1));
    (da, df)
}

/// Issue 17's case: `pass in on if0 proto tcp modulate state`.
#[test]
fn a_modulated_connection_both_ways() {
    for rules in [
        "pass in on if0 proto tcp modulate state\n",
        "block all\npass in on if0 proto tcp modulate state (max 10)\npass out on if1 proto tcp\n",
    ] {
        let mut r = Router::new(rules);
        let (da, df) = connection(&mut r, 1000, 5_000_000, 4);
        assert!(da != 0 && df != 0, "{rules}");
        let c = r.counts();
        assert_eq!(c.drops[DropReason::StateOutOfWindow as usize], 0, "{c:?}");
        assert_eq!((c.forwarded, c.dropped()), (c.rx, 0), "{c:?}");
    }
}

/// The initiator's numbers wrap around mid-connection.
#[test]
fn a_modulated_connection_across_the_wrap() {
    let mut r = Router::new("pass in on if0 proto tcp modulate state\n");
    connection(&mut r, u32::MAX - 100, 7, 5);
    assert_eq!(r.counts().drops[DropReason::StateOutOfWindow as usize], 0);
}

/// pf modulates the states that `pass out ... modulate state` creates too: the SYN that
/// created the state leaves shifted.
#[test]
fn a_state_the_out_pass_creates_modulates_its_first_packet() {
    let mut r = Router::new(
        "block all\npass in proto tcp no state\npass out on if0 proto tcp no state\npass out on if1 proto tcp modulate state\n",
    );
    let (da, df) = connection(&mut r, 1000, 5_000_000, 2);
    assert!(da != 0 && df != 0);
    assert_eq!(r.counts().drops[DropReason::StateOutOfWindow as usize], 0);
}

/// Without `modulate state` nothing is rewritten, and two connections' offsets differ.
#[test]
fn keep_state_leaves_numbers_alone() {
    let mut r = Router::new("pass in on if0 proto tcp keep state\n");
    assert_eq!(connection(&mut r, 1000, 5_000_000, 1), (0, 0));
}

/// With NAT on the flow: the state is keyed by A's own address (the inside view, where pf
/// keeps it too), the numbers are shifted as without NAT, and both rewrites' checksum updates
/// hold together.
#[test]
fn a_modulated_connection_through_nat() {
    let mut r = Router::new(
        "nat on if1 from 198.18.0.0/16 to any -> 192.0.2.7\npass in on if0 proto tcp modulate state\n",
    );
    r.a_seen = Ipv4Addr::new(192, 0, 2, 7);
    let (da, df) = connection(&mut r, 1000, 5_000_000, 3);
    assert!(da != 0 && df != 0);
    let c = r.counts();
    assert_eq!((c.forwarded, c.dropped()), (c.rx, 0), "{c:?}");
}

/// A router beyond the firewall answers A's (shifted) segment with a time exceeded: A gets it
/// with the quoted sequence number its own, the ICMP checksum holding.
#[test]
fn an_icmp_error_about_a_shifted_segment_reaches_a_unshifted() {
    let mut r = Router::new(
        "block all\npass in on if0 proto tcp modulate state\npass out on if1 proto tcp\n",
    );
    let (syn_seq, _) = r.send(true, SYN, 1000, 0, false);
    assert_ne!(syn_seq, 1000);
    let (far_seq, _) = r.send(false, SYN | ACK, 77, syn_seq.wrapping_add(1), false);
    // What left toward FAR: A's data segment, shifted.
    let mut f = frames::tcp(0, A_HOST, 40000, FAR, 80, ACK | PSH, 1001, far_seq.wrapping_add(1));
    fix_tcp_v4(&mut f);
    r.w.rx[0] = ReplayRx::new(0, vec![f]).once();
    while !r.w.rx[0].finished() {
        r.w.poll();
    }
    let sent = r.w.tx[1].frames.pop().expect("forwarded");
    let quoted = sent[14..14 + 28].to_vec();
    assert_eq!(
        u32::from_be_bytes([quoted[24], quoted[25], quoted[26], quoted[27]]),
        syn_seq.wrapping_add(1)
    );
    let router = Ipv4Addr::new(10, 1, 1, 254);
    let mut buf = frames::udp(1, router, 0, A_HOST, 0);
    buf.truncate(34);
    buf[23] = 1; // ICMP
    buf.extend_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
    buf.extend_from_slice(&quoted);
    let total = (buf.len() - 14) as u16;
    buf[16..18].copy_from_slice(&total.to_be_bytes());
    buf[24..26].fill(0);
    let c = wire::checksum::checksum(&buf[14..34]);
    buf[24..26].copy_from_slice(&c.to_be_bytes());
    let c = wire::checksum::checksum(&buf[34..]);
    buf[36..38].copy_from_slice(&c.to_be_bytes());
    r.w.rx[1] = ReplayRx::new(1, vec![buf]).once();
    while !r.w.rx[1].finished() {
        r.w.poll();
    }
    let got = r.w.tx[0].frames.pop().expect("the error reached A");
    assert_eq!(got[34], 11);
    assert_eq!(
        u32::from_be_bytes([got[42 + 24], got[42 + 25], got[42 + 26], got[42 + 27]]),
        1001,
        "A's own number"
    );
    assert_eq!(wire::checksum::checksum(&got[34..]), 0, "ICMP checksum");
    assert_eq!(r.counts().drops[DropReason::StateOutOfWindow as usize], 0);
}

/// A bare IPv6 TCP segment (no payload) from A (`from_a`, received on port 0) to FAR:80, or
/// back (received on port 1), checksum filled.
fn tcp6(from_a: bool, flags: u8, seq: u32, ack: u32) -> Vec<u8> {
    let (port, src, sport, dst, dport) =
        if from_a { (0, A6, 40000, FAR6, 80) } else { (1, FAR6, 80, A6, 40000) };
    let mut buf = vec![0u8; 128];
    let n = wire::build::udp_frame(
        &frames::flow(port, src.into(), sport, dst.into(), dport),
        14 + 40 + 20,
        &mut buf,
    )
    .unwrap();
    buf.truncate(n);
    assert_eq!(buf.len(), 14 + 40 + 20);
    buf[20] = 6; // next header: TCP
    let mut t = wire::TcpPacket::new_unchecked(&mut buf[54..]);
    t.set_src_port(sport);
    t.set_dst_port(dport);
    t.set_seq_number(seq);
    t.set_ack_number(ack);
    t.set_header_len(20);
    t.set_flags(wire::TcpFlags(flags));
    t.set_window_len(65535);
    t.set_urgent(0);
    t.fill_checksum_v6(&src, &dst);
    buf
}

/// The same over IPv6: the segment found behind the IPv6 header, shifted, its checksum (over
/// the IPv6 pseudo-header) holding.
#[test]
fn a_modulated_ipv6_handshake() {
    let mut r = Router::new("pass in on if0 proto tcp modulate state\n");
    let mut send = |port: usize, f: Vec<u8>, src: Ipv6Addr, dst: Ipv6Addr| {
        r.w.rx[port] = ReplayRx::new(port as u16, vec![f]).once();
        while !r.w.rx[port].finished() {
            r.w.poll();
        }
        let g = r.w.tx[1 - port].frames.pop().expect("forwarded");
        assert!(
            wire::TcpPacket::new_unchecked(&g[54..]).verify_checksum_v6(&src, &dst),
            "TCP checksum"
        );
        let word = |at: usize| u32::from_be_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]);
        (word(58), word(62))
    };
    let (seq, _) = send(0, tcp6(true, SYN, 1000, 0), A6, FAR6);
    assert_ne!(seq, 1000);
    let (s2, a2) = send(1, tcp6(false, SYN | ACK, 9, seq.wrapping_add(1)), FAR6, A6);
    assert_ne!(s2, 9);
    assert_eq!(a2, 1001);
    let (s3, a3) = send(0, tcp6(true, ACK, 1001, s2.wrapping_add(1)), A6, FAR6);
    assert_eq!((s3, a3), (seq.wrapping_add(1), 10));
    let c = r.counts();
    assert_eq!((c.forwarded, c.dropped()), (3, 0), "{c:?}");
}
