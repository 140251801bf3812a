//! TCP window tracking with real sequences (pf_tcp_track_full semantics).

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{
    InsertError, StateDropReason, StateId, StateLookup, StateOptions, StateTable, StateVerdict,
    TcpSegment, Timeouts, Tmo, tcp_flags::*, tcp_state::*,
};

const A: u128 = 0x0a00_0001; // 10.0.0.1, initiator
const B: u128 = 0x0a00_0002; // 10.0.0.2
const PA: u16 = 40000;
const PB: u16 = 80;

fn key(from_a: bool, flags: u8) -> PacketKey {
    let (src, dst, sp, dp) = if from_a { (A, B, PA, PB) } else { (B, A, PB, PA) };
    PacketKey {
        af: Af::Inet,
        dir: if from_a { Dir::Out } else { Dir::In },
        iface: if from_a { 1 } else { 2 },
        proto: proto::TCP,
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        tcp_flags: flags,
        len: 40,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

fn seg(seq: u32, ack: u32, win: u16, flags: u8, len: u16) -> TcpSegment {
    TcpSegment { seq, ack, win, flags, payload_len: len, wscale: None }
}

struct Flow {
    t: StateTable,
    id: StateId,
}

impl Flow {
    /// Sends a packet; returns the verdict and checks the direction.
    fn send(&mut self, from_a: bool, s: TcpSegment, now: u32) -> StateVerdict {
        match self.t.lookup(&key(from_a, s.flags), Some(&s), now) {
            StateLookup::Hit { id, dir_from_initiator, verdict } => {
                assert_eq!(id, self.id);
                assert_eq!(dir_from_initiator, from_a);
                verdict
            }
            StateLookup::Miss => panic!("unexpected miss"),
        }
    }
    fn states(&self) -> (u8, u8) {
        let i = self.t.info(self.id).unwrap();
        (i.initiator_state, i.responder_state)
    }
    fn timeout(&self) -> Tmo {
        self.t.info(self.id).unwrap().timeout
    }
    fn expire(&self) -> u32 {
        self.t.info(self.id).unwrap().expire
    }
}

const ISA: u32 = 1000;
const ISB: u32 = 5000;
const PASS: StateVerdict = StateVerdict::Pass;
const OOW: StateVerdict = StateVerdict::Drop(StateDropReason::OutOfWindow);

/// SYN from A creates the state, SYN|ACK and ACK complete the handshake.
fn handshake(wa: Option<u8>, wb: Option<u8>, opts: StateOptions) -> Flow {
    let mut t = StateTable::new(64, Timeouts::default(), 42);
    let syn = TcpSegment { wscale: wa, ..seg(ISA, 0, 65535, SYN, 0) };
    let id = t.insert_with(&key(true, SYN), 7, 0, Some(&syn), opts).unwrap();
    let mut f = Flow { t, id };
    assert_eq!(f.states(), (SYN_SENT, CLOSED));
    assert_eq!(f.timeout(), Tmo::TcpFirst);
    assert_eq!(f.expire(), 120);
    let synack = TcpSegment { wscale: wb, ..seg(ISB, ISA + 1, 65535, SYN | ACK, 0) };
    assert_eq!(f.send(false, synack, 1), PASS);
    assert_eq!(f.states(), (ESTABLISHED, SYN_SENT));
    assert_eq!(f.timeout(), Tmo::TcpOpening);
    assert_eq!(f.expire(), 1 + 30);
    assert_eq!(f.send(true, seg(ISA + 1, ISB + 1, 512, ACK, 0), 2), PASS);
    assert_eq!(f.states(), (ESTABLISHED, ESTABLISHED));
    assert_eq!(f.timeout(), Tmo::TcpEstablished);
    assert_eq!(f.expire(), 2 + 86400);
    f
}

#[test]
fn handshake_data_fin_close_and_closed_timeout() {
    let mut f = handshake(None, None, StateOptions::default());
    // Data both ways.
    assert_eq!(f.send(true, seg(ISA + 1, ISB + 1, 65535, ACK | PSH, 100), 3), PASS);
    assert_eq!(f.send(false, seg(ISB + 1, ISA + 101, 65535, ACK | PSH, 1000), 3), PASS);
    assert_eq!(f.send(true, seg(ISA + 101, ISB + 1001, 65535, ACK, 0), 3), PASS);
    // Retransmission of old data is fine.
    assert_eq!(f.send(true, seg(ISA + 1, ISB + 1001, 65535, ACK | PSH, 100), 3), PASS);
    // Bulk data within the window.
    let mut sa = ISA + 101;
    for _ in 0..40 {
        assert_eq!(f.send(true, seg(sa, ISB + 1001, 65535, ACK, 1460), 4), PASS);
        sa += 1460;
        assert_eq!(f.send(false, seg(ISB + 1001, sa, 65535, ACK, 0), 4), PASS);
    }
    assert_eq!(f.t.counters().drop_out_of_window, 0);

    // FIN from A, ACK from B, FIN from B, ACK from A.
    assert_eq!(f.send(true, seg(sa, ISB + 1001, 65535, FIN | ACK, 0), 10), PASS);
    assert_eq!(f.states(), (CLOSING, ESTABLISHED));
    assert_eq!(f.timeout(), Tmo::TcpClosing);
    assert_eq!(f.send(false, seg(ISB + 1001, sa + 1, 65535, ACK, 0), 11), PASS);
    assert_eq!(f.states(), (FIN_WAIT_2, ESTABLISHED));
    assert_eq!(f.timeout(), Tmo::TcpClosing);
    assert_eq!(f.send(false, seg(ISB + 1001, sa + 1, 65535, FIN | ACK, 0), 12), PASS);
    assert_eq!(f.states(), (FIN_WAIT_2, CLOSING));
    assert_eq!(f.timeout(), Tmo::TcpFinWait);
    assert_eq!(f.expire(), 12 + 45);
    assert_eq!(f.send(true, seg(sa + 1, ISB + 1002, 65535, ACK, 0), 13), PASS);
    assert_eq!(f.states(), (FIN_WAIT_2, FIN_WAIT_2));
    assert_eq!(f.timeout(), Tmo::TcpClosed);
    assert_eq!(f.expire(), 13 + 90);

    // Still there just before tcp.closed runs out (a late ACK passes)...
    assert_eq!(f.send(true, seg(sa + 1, ISB + 1002, 65535, ACK, 0), 13 + 89), PASS);
    // ... which refreshed it; gone after 90 s of silence.
    let k = key(true, ACK);
    assert_eq!(
        f.t.lookup(&k, Some(&seg(sa + 1, ISB + 1002, 65535, ACK, 0)), 102 + 90),
        StateLookup::Miss
    );
    assert_eq!(f.t.len(), 0);
    assert_eq!(f.t.counters().expired_lookup, 1);
}

#[test]
fn syn_on_closed_state_recreates() {
    let mut f = handshake(None, None, StateOptions::default());
    assert_eq!(f.send(false, seg(ISB + 1, ISA + 1, 65535, RST | ACK, 0), 5), PASS);
    assert_eq!(f.states(), (TIME_WAIT, TIME_WAIT));
    assert_eq!(f.timeout(), Tmo::TcpClosed);
    // A new SYN on the same ports: the old state goes, the rules decide.
    let syn = seg(90000, 0, 65535, SYN, 0);
    assert_eq!(f.t.lookup(&key(true, SYN), Some(&syn), 6), StateLookup::Miss);
    assert_eq!(f.t.counters().reused_closed, 1);
    assert!(f.t.is_empty());
    f.t.insert(&key(true, SYN), 7, 6, Some(&syn)).unwrap();
}

#[test]
fn out_of_window_dropped() {
    let mut f = handshake(None, None, StateOptions::default());
    // Sequence far beyond what B's window allows.
    assert_eq!(f.send(true, seg(ISA + 1 + 200_000, ISB + 1, 65535, ACK, 100), 3), OOW);
    // The window edge: B's SYN|ACK advertised 65535, so A may send up to ISA+1+65535.
    assert_eq!(f.send(true, seg(ISA + 1 + 65535 - 100, ISB + 1, 65535, ACK, 100), 3), PASS);
    assert_eq!(f.send(true, seg(ISA + 1 + 65535, ISB + 1, 65535, ACK, 1), 3), OOW);
    // Too old: more than one window back.
    assert_eq!(f.send(false, seg((ISB + 1).wrapping_sub(70_000), ISA + 1, 65535, ACK, 10), 3), OOW);
    // Acking data never sent (more than MAXACKWINDOW ahead).
    assert_eq!(f.send(true, seg(ISA + 1, ISB + 1 + 100_000, 65535, ACK, 0), 3), OOW);
    // Acking far behind.
    assert_eq!(f.send(true, seg(ISA + 1, (ISB + 1).wrapping_sub(100_000), 65535, ACK, 0), 3), OOW);
    let c = f.t.counters();
    assert_eq!(c.drop_out_of_window, 5);
    // The connection is unaffected.
    assert_eq!(f.send(false, seg(ISB + 1, ISA + 1, 65535, ACK, 10), 4), PASS);
    assert_eq!(f.states(), (ESTABLISHED, ESTABLISHED));
    // Drops do not refresh the state.
    let e = f.expire();
    assert_eq!(f.send(true, seg(ISA + 1 + 200_000, ISB + 1, 65535, ACK, 100), 100), OOW);
    assert_eq!(f.expire(), e);
}

#[test]
fn window_scaling() {
    // Both ends negotiate shift 7: B's window of 1000 means 128000 bytes.
    let mut f = handshake(Some(7), Some(7), StateOptions::default());
    assert_eq!(f.send(false, seg(ISB + 1, ISA + 1, 1000, ACK, 0), 3), PASS);
    assert_eq!(f.send(true, seg(ISA + 1 + 120_000, ISB + 1, 512, ACK, 1000), 3), PASS);
    assert_eq!(f.send(true, seg(ISA + 1 + 130_000, ISB + 1, 512, ACK, 1000), 3), OOW);

    // Without scaling the same segment is out of window.
    let mut g = handshake(None, None, StateOptions::default());
    assert_eq!(g.send(false, seg(ISB + 1, ISA + 1, 1000, ACK, 0), 3), PASS);
    assert_eq!(g.send(true, seg(ISA + 1 + 120_000, ISB + 1, 512, ACK, 1000), 3), OOW);

    // Only one side sends the option: no scaling (RFC 7323), the window of 1000 is 1000 bytes
    // (the SYN|ACK's 65535 still counts as the max window).
    let mut h = handshake(Some(7), None, StateOptions::default());
    assert_eq!(h.send(false, seg(ISB + 1, ISA + 1, 1000, ACK, 0), 3), PASS);
    assert_eq!(h.send(true, seg(ISA + 1 + 120_000, ISB + 1, 512, ACK, 1000), 3), OOW);
    assert_eq!(h.send(true, seg(ISA + 1 + 60_000, ISB + 1, 512, ACK, 1000), 3), PASS);
}

#[test]
fn rst_exact_sequence_required() {
    let mut f = handshake(None, None, StateOptions::default());
    // A blind RST inside the window but not at the exact sequence number: dropped.
    assert_eq!(f.send(false, seg(ISB + 1 + 1000, 0, 0, RST, 0), 3), OOW);
    assert_eq!(f.states(), (ESTABLISHED, ESTABLISHED));
    // The exact one tears the connection down.
    assert_eq!(f.send(false, seg(ISB + 1, 0, 0, RST, 0), 4), PASS);
    assert_eq!(f.states(), (TIME_WAIT, TIME_WAIT));
    assert_eq!(f.timeout(), Tmo::TcpClosed);
    assert_eq!(f.expire(), 4 + 90);
}

#[test]
fn retransmitted_syn_and_synack() {
    let mut t = StateTable::new(16, Timeouts::default(), 1);
    let syn = seg(ISA, 0, 65535, SYN, 0);
    let id = t.insert(&key(true, SYN), 0, 0, Some(&syn)).unwrap();
    let mut f = Flow { t, id };
    // Retransmitted SYN (1 s and 3 s later).
    assert_eq!(f.send(true, syn, 1), PASS);
    assert_eq!(f.send(true, syn, 3), PASS);
    assert_eq!(f.states(), (SYN_SENT, CLOSED));
    // A second insert for the same flow is refused as existing, from either side.
    assert_eq!(f.t.insert(&key(true, SYN), 0, 3, Some(&syn)), Err(InsertError::Exists(id)));
    assert_eq!(f.t.insert(&key(false, SYN), 0, 3, Some(&syn)), Err(InsertError::Exists(id)));
    let synack = seg(ISB, ISA + 1, 65535, SYN | ACK, 0);
    assert_eq!(f.send(false, synack, 4), PASS);
    // Retransmitted SYN|ACK.
    assert_eq!(f.send(false, synack, 5), PASS);
    assert_eq!(f.send(true, seg(ISA + 1, ISB + 1, 65535, ACK, 0), 5), PASS);
    assert_eq!(f.states(), (ESTABLISHED, ESTABLISHED));
    // A SYN|ACK with the wrong ack is out of window.
    assert_eq!(f.send(false, seg(ISB, ISA + 500_000, 65535, SYN | ACK, 0), 6), OOW);
}

#[test]
fn shotgun_syn_passes_without_refresh() {
    let mut t = StateTable::new(16, Timeouts::default(), 1);
    let id = t.insert(&key(true, SYN), 0, 0, Some(&seg(ISA, 0, 65535, SYN, 0))).unwrap();
    let mut f = Flow { t, id };
    // A second SYN with another ISN before the peer answered: pf's loose clause.
    assert_eq!(f.send(true, seg(ISA + 9000, 0, 65535, SYN, 0), 10), PASS);
    assert_eq!(f.expire(), 120, "loose clause must not refresh");
}

#[test]
fn handshake_mismatch_resets_tracking() {
    let mut t = StateTable::new(16, Timeouts::default(), 1);
    let id = t.insert(&key(true, SYN), 0, 0, Some(&seg(ISA, 0, 65535, SYN, 0))).unwrap();
    let mut f = Flow { t, id };
    // Simultaneous-open style SYN from B, then a bogus packet from B while both are SYN_SENT.
    assert_eq!(f.send(false, seg(ISB, 0, 65535, SYN, 0), 1), PASS);
    assert_eq!(f.states(), (SYN_SENT, SYN_SENT));
    assert_eq!(f.send(false, seg(ISB + 900_000, ISA + 1, 65535, ACK, 10), 2), OOW);
    // B's tracking restarts from its next packet: a proper SYN|ACK with a new ISN passes.
    assert_eq!(f.send(false, seg(7777, ISA + 1, 65535, SYN | ACK, 0), 3), PASS);
    assert_eq!(f.send(true, seg(ISA + 1, 7778, 65535, ACK, 0), 3), PASS);
    assert_eq!(f.states(), (ESTABLISHED, ESTABLISHED));
}

#[test]
fn picked_up_connection() {
    // State created from a mid-stream ACK (e.g. after a state flush, `flags any`).
    let mut t = StateTable::new(16, Timeouts::default(), 1);
    let id = t
        .insert(&key(true, ACK), 0, 0, Some(&seg(ISA + 5000, ISB + 7000, 65535, ACK, 100)))
        .unwrap();
    let mut f = Flow { t, id };
    assert_eq!(f.send(false, seg(ISB + 7000, ISA + 5100, 65535, ACK, 200), 1), PASS);
    assert_eq!(f.send(true, seg(ISA + 5100, ISB + 7200, 65535, ACK, 100), 2), PASS);
    assert_eq!(f.states(), (ESTABLISHED, ESTABLISHED));
}

#[test]
fn sloppy_skips_window_checks() {
    let mut f = handshake(None, None, StateOptions { sloppy: true, ..StateOptions::default() });
    assert!(f.t.info(f.id).unwrap().sloppy);
    assert_eq!(f.send(true, seg(ISA + 1 + 200_000, ISB + 1, 65535, ACK, 100), 3), PASS);
    assert_eq!(f.send(false, seg(1, 2, 0, ACK, 0), 3), PASS);
    assert_eq!(f.send(false, seg(123, 0, 0, FIN | ACK, 0), 4), PASS);
    assert_eq!(f.states(), (ESTABLISHED, CLOSING));
    assert_eq!(f.send(true, seg(9, 9, 0, RST, 0), 5), PASS);
    assert_eq!(f.states(), (TIME_WAIT, TIME_WAIT));
    assert_eq!(f.t.counters().drop_out_of_window, 0);

    // One-sided sloppy connection (asymmetric routing): SYN then ACK from the same side.
    let mut t = StateTable::new(16, Timeouts::default(), 1);
    let id = t
        .insert_with(
            &key(true, SYN),
            0,
            0,
            Some(&seg(ISA, 0, 65535, SYN, 0)),
            StateOptions { sloppy: true, ..StateOptions::default() },
        )
        .unwrap();
    let mut g = Flow { t, id };
    assert_eq!(g.send(true, seg(ISA + 1, ISB + 1, 65535, ACK, 0), 1), PASS);
    assert_eq!(g.states(), (ESTABLISHED, ESTABLISHED));
    assert_eq!(g.timeout(), Tmo::TcpEstablished);
}

#[test]
fn no_segment_means_flag_tracking() {
    // Without TcpSegment the state tracks flags only (from PacketKey::tcp_flags).
    let mut t = StateTable::new(16, Timeouts::default(), 1);
    let id = t.insert(&key(true, SYN), 0, 0, None).unwrap();
    assert!(t.info(id).unwrap().sloppy);
    assert!(matches!(
        t.lookup(&key(false, SYN | ACK), None, 1),
        StateLookup::Hit { verdict: PASS, .. }
    ));
    assert!(matches!(t.lookup(&key(true, ACK), None, 1), StateLookup::Hit { verdict: PASS, .. }));
    let i = t.info(id).unwrap();
    assert_eq!((i.initiator_state, i.responder_state), (ESTABLISHED, ESTABLISHED));
}

#[test]
fn icmp_error_quoting_tcp() {
    let mut f = handshake(None, None, StateOptions::default());
    // A router sends "unreachable" to A quoting A's segment A->B.
    let quoted = key(true, ACK);
    assert_eq!(f.t.lookup_icmp_error(&quoted, Some(ISA + 1), 5), Some(f.id));
    // Quoting B's segment (error sent to B).
    assert_eq!(f.t.lookup_icmp_error(&key(false, ACK), Some(ISB + 1), 5), Some(f.id));
    // Without the sequence number.
    assert_eq!(f.t.lookup_icmp_error(&quoted, None, 5), Some(f.id));
    // A quoted sequence number outside A's window: forged.
    assert_eq!(f.t.lookup_icmp_error(&quoted, Some(ISA + 10_000_000), 5), None);
    let c = f.t.counters();
    assert_eq!((c.icmp_error_hits, c.icmp_error_bad_seq), (3, 1));
    // Unknown flow.
    let other = PacketKey { dst_port: 81, ..quoted };
    assert_eq!(f.t.lookup_icmp_error(&other, None, 5), None);
    // Not refreshed by errors; gone after expiry.
    assert_eq!(f.t.lookup_icmp_error(&quoted, None, 2 + 86400), None);
    assert!(f.t.is_empty());
}
