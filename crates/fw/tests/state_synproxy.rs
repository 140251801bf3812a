//! `synproxy state`: the table's side of the proxied handshake (which packets are consumed,
//! what the router sends for each, the phases), then the connection's numbers shifted as
//! `modulate state` shifts them, tracked in each end's own sequence space.

use fw::packet::proto;
use fw::state::{
    Flow, Modulation, ProxyPhase, ProxyReply, ProxyStep, StateDropReason, StateId, StateLookup,
    StateOptions, StateTable, StateVerdict, TcpSegment, Timeouts, tcp_flags::*, tcp_state,
};

mod common;
use common::conn::key;

const C: u32 = 1_000_000;
const S: u32 = 0xfff0_0000;

fn seg(seq: u32, ack: u32, flags: u8, win: u16) -> TcpSegment {
    TcpSegment { seq, ack, win, flags, payload_len: 0, wscale: None }
}

const SYNPROXY: StateOptions = StateOptions {
    sloppy: false,
    allow_opts: false,
    bound: None,
    tag: 0,
    modulate: false,
    synproxy: true,
};

struct Proxy {
    t: StateTable,
    id: StateId,
    /// The router's initial sequence number towards the client.
    r: u32,
}

/// The client's SYN (with window scaling, which the proxy drops) creates the state.
fn open() -> Proxy {
    let mut t = StateTable::new(64, Timeouts::default(), 7);
    let syn = TcpSegment { wscale: Some(7), ..seg(C, 0, SYN, 64240) };
    let id = t.insert_with(&key(true, SYN), 0, 1, Some(&syn), SYNPROXY).unwrap();
    let Some(ProxyStep::SynAck { id: sid, seq: r, ack }) = t.take_proxy() else {
        panic!("the SYN is answered")
    };
    assert_eq!((sid, ack), (id, C + 1));
    assert_eq!(t.proxy_phase(id), Some(ProxyPhase::ProxySrc));
    let i = t.info(id).unwrap();
    assert_eq!(
        fw::state::state_name(proto::TCP, i.initiator_state),
        "PROXY:SRC",
        "as pfctl -ss shows it"
    );
    assert_eq!(i.timeout, fw::state::Tmo::TcpFirst);
    Proxy { t, id, r }
}

impl Proxy {
    fn send(&mut self, from_a: bool, s: TcpSegment) -> StateVerdict {
        match self.t.lookup(&key(from_a, s.flags), Some(&s), 2) {
            StateLookup::Hit { verdict, .. } => verdict,
            StateLookup::Miss => panic!("miss"),
        }
    }

    fn dropped(&mut self, from_a: bool, s: TcpSegment) {
        assert_eq!(self.send(from_a, s), StateVerdict::Drop(StateDropReason::Synproxy), "{s:?}");
        assert_eq!(self.t.take_proxy(), None, "{s:?} sends nothing");
    }

    /// Both handshakes: the client's ACK, then the server's SYN-ACK.
    fn complete(&mut self) -> ProxyStep {
        self.t.set_proxy_mss(self.id, 1460);
        assert_eq!(
            self.send(true, seg(C + 1, self.r.wrapping_add(1), ACK, 502)),
            StateVerdict::Drop(StateDropReason::Synproxy)
        );
        assert_eq!(
            self.t.take_proxy(),
            Some(ProxyStep::SynToServer { seq: C, win: 502, mss: 1460 })
        );
        assert_eq!(self.t.proxy_phase(self.id), Some(ProxyPhase::ProxyDst));
        let i = self.t.info(self.id).unwrap();
        assert_eq!(
            (fw::state::state_name(proto::TCP, i.initiator_state), i.timeout),
            ("PROXY:DST", fw::state::Tmo::TcpOpening)
        );
        assert_eq!(
            self.send(false, seg(S, C + 1, SYN | ACK, 65160)),
            StateVerdict::Drop(StateDropReason::Synproxy)
        );
        self.t.take_proxy().expect("the server's SYN-ACK is answered")
    }

    fn rewrite(&self, from_a: bool, s: TcpSegment) -> TcpSegment {
        match self.t.modulation(&Flow::of(&key(from_a, s.flags)), 2) {
            Some(Modulation { seq_add, ack_sub }) => TcpSegment {
                seq: s.seq.wrapping_add(seq_add),
                ack: s.ack.wrapping_sub(ack_sub),
                ..s
            },
            None => s,
        }
    }
}

#[test]
fn the_handshake_steps_and_their_packets() {
    let mut p = open();
    // A retransmitted SYN gets the same SYN-ACK.
    assert_eq!(p.send(true, seg(C, 0, SYN, 64240)), StateVerdict::Drop(StateDropReason::Synproxy));
    assert_eq!(p.t.take_proxy(), Some(ProxyStep::SynAck { id: p.id, seq: p.r, ack: C + 1 }));
    let step = p.complete();
    assert_eq!(
        step,
        ProxyStep::Established {
            to_server: ProxyReply { seq: C + 1, ack: S + 1, win: 502 },
            to_client: ProxyReply { seq: S + 1, ack: C + 1, win: 65160 },
        }
    );
    assert_eq!(p.t.proxy_phase(p.id), Some(ProxyPhase::Proxied));
    let i = p.t.info(p.id).unwrap();
    assert_eq!(
        (i.initiator_state, i.responder_state, i.timeout),
        (tcp_state::ESTABLISHED, tcp_state::ESTABLISHED, fw::state::Tmo::TcpEstablished)
    );
    let c = p.t.counters();
    assert_eq!(
        (c.synproxy_syn_acks, c.synproxy_syns, c.synproxy_established, c.synproxy_dropped),
        (2, 1, 1, 0)
    );
    // The ACK to the client leaves with the router's numbers: it acknowledges R + 1's SYN.
    assert_eq!(p.rewrite(false, seg(S + 1, C + 1, ACK, 65160)).seq, p.r.wrapping_add(1));
}

#[test]
fn anything_but_the_handshake_is_dropped_and_counted() {
    let mut p = open();
    let r = p.r;
    p.dropped(true, seg(C + 1, r.wrapping_add(2), ACK, 502)); // wrong ack
    p.dropped(true, seg(C + 2, r.wrapping_add(1), ACK, 502)); // wrong seq
    p.dropped(true, seg(C + 1, r.wrapping_add(1), ACK | SYN, 502));
    p.dropped(true, TcpSegment { payload_len: 10, ..seg(C + 1, r.wrapping_add(1), PSH, 502) });
    p.dropped(true, seg(C + 7, 0, SYN, 502)); // another SYN number
    // The server's side before the router sent it anything.
    p.dropped(false, seg(S, C + 1, SYN | ACK, 65160));
    p.dropped(false, seg(S, 0, RST, 0));
    assert_eq!(p.t.counters().synproxy_dropped, 7);
    assert_eq!(p.t.proxy_phase(p.id), Some(ProxyPhase::ProxySrc), "nothing moved it on");
    // Waiting for the server: a SYN-ACK acknowledging anything but C + 1 is dropped, the
    // client's data too; the client's ACK again repeats the SYN.
    assert_eq!(
        p.send(true, seg(C + 1, r.wrapping_add(1), ACK, 502)),
        StateVerdict::Drop(StateDropReason::Synproxy)
    );
    assert!(matches!(p.t.take_proxy(), Some(ProxyStep::SynToServer { seq: C, .. })));
    p.dropped(false, seg(S, C + 2, SYN | ACK, 65160));
    p.dropped(true, TcpSegment { payload_len: 5, ..seg(C + 1, r.wrapping_add(2), PSH | ACK, 502) });
    // Data right behind the ACK: dropped, and (as pf) it repeats the SYN too.
    let data = TcpSegment { payload_len: 5, ..seg(C + 1, r.wrapping_add(1), PSH | ACK, 502) };
    assert_eq!(p.send(true, data), StateVerdict::Drop(StateDropReason::Synproxy));
    assert_eq!(
        p.t.take_proxy(),
        Some(ProxyStep::SynToServer { seq: C, win: 502, mss: 536 }),
        "no MSS recorded: the default"
    );
    assert_eq!(p.t.counters().synproxy_syns, 2);
    assert_eq!(p.t.counters().synproxy_dropped, 9);
}

#[test]
fn data_both_ways_shifted_and_tracked() {
    let mut p = open();
    p.complete();
    let d = p.r.wrapping_sub(S);
    // Client -> server: its numbers as they are, its acks of the router's numbers shifted back.
    let out = p.rewrite(true, seg(C + 1, p.r.wrapping_add(1), ACK | PSH, 502));
    assert_eq!((out.seq, out.ack), (C + 1, S + 1));
    assert_eq!(
        p.t.modulation(&Flow::of(&key(true, ACK)), 2),
        Some(Modulation { seq_add: 0, ack_sub: d })
    );
    // Tracking takes the client's acks in the server's numbers: in window, passed.
    for i in 0..20u32 {
        let c = TcpSegment {
            payload_len: 100,
            ..seg(C + 1 + i * 100, p.r.wrapping_add(1 + i * 50), ACK | PSH, 502)
        };
        assert_eq!(p.send(true, c), StateVerdict::Pass, "client segment {i}");
        let s = TcpSegment {
            payload_len: 50,
            ..seg(S + 1 + i * 50, C + 1 + (i + 1) * 100, ACK, 65160)
        };
        assert_eq!(p.send(false, s), StateVerdict::Pass, "server segment {i}");
        assert_eq!(p.rewrite(false, s).seq, p.r.wrapping_add(1 + i * 50));
    }
    // An ack of numbers the router never sent is out of window.
    let bogus = seg(C + 2001, p.r.wrapping_add(900_000), ACK, 502);
    assert_eq!(p.send(true, bogus), StateVerdict::Drop(StateDropReason::OutOfWindow));
    assert!(p.t.modulates());
}

#[test]
fn without_synproxy_nothing_is_proxied() {
    let mut t = StateTable::new(8, Timeouts::default(), 1);
    let opts = StateOptions { synproxy: false, ..SYNPROXY };
    let id = t.insert_with(&key(true, SYN), 0, 1, Some(&seg(C, 0, SYN, 1000)), opts).unwrap();
    assert_eq!((t.take_proxy(), t.proxy_phase(id)), (None, None));
    // A synproxy rule matched by something other than a bare SYN keeps a plain state.
    let mut t = StateTable::new(8, Timeouts::default(), 1);
    let id = t.insert_with(&key(true, ACK), 0, 1, Some(&seg(C, 5, ACK, 1000)), SYNPROXY).unwrap();
    assert_eq!((t.take_proxy(), t.proxy_phase(id)), (None, None));
    assert!(!t.modulates());
}
