//! pf's source tracking: `max-src-conn`, `max-src-states` and `max-src-nodes` count the
//! states of a rule per source address, shared by every worker's table; a connection
//! beyond `max-src-conn` is refused when it becomes established (its state removed), and
//! the counts come back when states go (killed, expired).

use std::path::Path;
use std::sync::Arc;

use fw::classifier::Classifier;
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::passes::{Drop, Passes};
use fw::rules::{RuleSet, parse};
use fw::state::{
    RuleLimits, StateDropReason, StateLookup, StateTable, StateVerdict, TcpSegment, Timeouts,
    tcp_flags,
};

fn rules(text: &str) -> RuleSet {
    parse(text, Path::new("src.conf"), &|n| {
        ["a", "b"].iter().position(|i| *i == n).map(|i| i as u16)
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

const SERVER: u128 = 0xc000_0201;

/// A TCP packet from 10.0.0.`src`:`sport` to the server's port 22, received on a.
fn tcp(src: u8, sport: u16, flags: u8) -> PacketKey {
    PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        proto: proto::TCP,
        src: u128::from(0x0a00_0000u32 | u32::from(src)),
        dst: SERVER,
        src_port: sport,
        dst_port: 22,
        tcp_flags: flags,
        len: 40,
        ..PacketKey::ZERO
    }
}

fn seg(seq: u32, ack: u32, flags: u8) -> TcpSegment {
    TcpSegment { seq, ack, win: 65535, flags, payload_len: 0, wscale: None }
}

struct World {
    rs: RuleSet,
    cl: Classifier,
    limits: Arc<RuleLimits>,
    /// Two workers' tables.
    t: [StateTable; 2],
}

impl World {
    fn new(text: &str) -> World {
        let rs = rules(text);
        let cl = Classifier::build(&rs).unwrap();
        let limits = RuleLimits::of(&rs).unwrap();
        World {
            rs,
            cl,
            limits,
            t: [
                StateTable::new(100, Timeouts::default(), 1),
                StateTable::new(100, Timeouts::default(), 2),
            ],
        }
    }

    /// The in pass of `key` (with its segment) through table `w`.
    fn pass_in(&mut self, w: usize, key: &PacketKey, s: &TcpSegment, now: u32) -> Result<(), Drop> {
        let mut p = Passes {
            rules: &self.rs,
            classifier: &self.cl,
            cache: None,
            states: &mut self.t[w],
            now,
            limits: Some(&self.limits),
        };
        p.inbound(key, Some(s), None).0.map(|_| ())
    }

    /// A connection from 10.0.0.`src`:`sport` on worker `w`: the SYN through the rules, the
    /// SYN-ACK and the ACK through the state. The ACK's verdict, if its state took it.
    fn connect(
        &mut self,
        w: usize,
        src: u8,
        sport: u16,
        now: u32,
    ) -> Result<Option<StateVerdict>, Drop> {
        self.pass_in(w, &tcp(src, sport, tcp_flags::SYN), &seg(1000, 0, tcp_flags::SYN), now)?;
        let k = tcp(src, sport, tcp_flags::SYN);
        let reply = PacketKey {
            src: k.dst,
            dst: k.src,
            src_port: k.dst_port,
            dst_port: k.src_port,
            tcp_flags: tcp_flags::SYN | tcp_flags::ACK,
            ..k
        };
        let synack =
            self.t[w].lookup(&reply, Some(&seg(5000, 1001, tcp_flags::SYN | tcp_flags::ACK)), now);
        assert!(
            matches!(synack, StateLookup::Hit { verdict: StateVerdict::Pass, .. }),
            "{synack:?}"
        );
        Ok(
            match self.t[w].lookup(
                &tcp(src, sport, tcp_flags::ACK),
                Some(&seg(1001, 5001, tcp_flags::ACK)),
                now,
            ) {
                StateLookup::Hit { verdict, .. } => Some(verdict),
                StateLookup::Miss => None,
            },
        )
    }

    fn node(&self, rule: u32, src: u8) -> Option<(u32, u32)> {
        let t = self.rs.rules[rule as usize].src_track.unwrap();
        self.limits.sources().counts(fw::state::Sources::key(
            rule,
            &t,
            Af::Inet,
            u128::from(0x0a00_0000u32 | u32::from(src)),
        ))
    }
}

const PASS: Result<Option<StateVerdict>, Drop> = Ok(Some(StateVerdict::Pass));

#[test]
fn max_src_conn_across_workers_and_back_when_states_go() {
    let mut w =
        World::new("block all\npass in on a proto tcp to port 22 keep state (max-src-conn 2)\n");
    assert_eq!(w.connect(0, 1, 4001, 1), PASS);
    assert_eq!(w.connect(1, 1, 4002, 1), PASS);
    // The third, on either worker, is refused as it becomes established; its state goes.
    assert_eq!(w.connect(0, 1, 4003, 1), Ok(Some(StateVerdict::Drop(StateDropReason::SrcConn))));
    assert!(!w.t[0].debug_contains(&tcp(1, 4003, 0)));
    assert_eq!(w.t[0].counters().src_limit_conn, 1);
    assert_eq!(w.node(1, 1), Some((2, 2)));
    // Its next segment is the rules' to judge: not a SYN, blocked (flags S/SA).
    assert_eq!(
        w.pass_in(0, &tcp(1, 4003, tcp_flags::ACK), &seg(1001, 5001, tcp_flags::ACK), 1),
        Err(Drop::Blocked)
    );
    // Another source is not limited by this one's connections.
    assert_eq!(w.connect(1, 2, 4001, 1), PASS);
    // A connection killed gives its count back.
    let id = (0..100)
        .map(fw::state::StateId)
        .find(|&id| w.t[1].rule_of(id).is_some() && w.t[1].debug_contains(&tcp(1, 4002, 0)))
        .unwrap();
    assert!(w.t[1].remove(id));
    assert_eq!(w.node(1, 1), Some((1, 1)));
    assert_eq!(w.connect(1, 1, 4004, 2), PASS);
    // Expired states go in the sweep, their source nodes with them.
    let later = 2 + Timeouts::default().tcp_established + 1;
    for t in &mut w.t {
        t.expire(later, 1000);
        assert_eq!(t.limited_entries(), 0);
    }
    assert_eq!((w.node(1, 1), w.node(1, 2), w.limits.sources().nodes()), (None, None, 0));
}

#[test]
fn max_src_states_and_nodes_across_workers() {
    let mut w = World::new("pass in proto tcp keep state (max-src-states 2, max-src-nodes 2)\n");
    let syn = |w: &mut World, t: usize, src: u8, sport: u16| {
        w.pass_in(t, &tcp(src, sport, tcp_flags::SYN), &seg(1000, 0, tcp_flags::SYN), 1)
    };
    assert_eq!(
        [syn(&mut w, 0, 1, 1), syn(&mut w, 1, 1, 2), syn(&mut w, 0, 1, 3)],
        [Ok(()), Ok(()), Err(Drop::SrcStates)]
    );
    assert_eq!([syn(&mut w, 1, 2, 1), syn(&mut w, 0, 3, 1)], [Ok(()), Err(Drop::SrcNodes)]);
    assert_eq!((w.t[0].counters().src_limit_states, w.t[0].counters().src_limit_nodes), (1, 1));
    // The SYNs' states time out (tcp.first): every count comes back.
    let later = 1 + Timeouts::default().tcp_first + 1;
    for t in &mut w.t {
        t.expire(later, 1000);
    }
    assert_eq!(w.limits.sources().nodes(), 0);
    assert_eq!(syn(&mut w, 0, 3, 9), Ok(()));
}

/// A reload: the new rules count from zero, the old states give back to the old counts.
#[test]
fn a_reload_starts_new_source_nodes() {
    let mut w = World::new("pass in proto tcp keep state (max-src-states 1)\n");
    let old = Arc::clone(&w.limits);
    assert_eq!(w.pass_in(0, &tcp(1, 1, tcp_flags::SYN), &seg(1000, 0, tcp_flags::SYN), 1), Ok(()));
    w.limits = RuleLimits::of(&w.rs).unwrap();
    assert_eq!(w.pass_in(0, &tcp(1, 2, tcp_flags::SYN), &seg(1000, 0, tcp_flags::SYN), 1), Ok(()));
    assert_eq!(
        w.pass_in(0, &tcp(1, 3, tcp_flags::SYN), &seg(1000, 0, tcp_flags::SYN), 1),
        Err(Drop::SrcStates)
    );
    w.t[0].expire(1000, 1000);
    assert_eq!((old.sources().nodes(), w.limits.sources().nodes()), (0, 0));
}

/// `overload ... flush`: the states the source opened, of the rule only or (`global`) all.
#[test]
fn flush_kills_the_sources_states_of_the_rule_or_all() {
    let mut w = World::new(
        "pass in proto tcp to port 22 keep state (source-track rule)\npass in proto tcp to port 80 keep state\n",
    );
    let syn = |src: u8, sport: u16, dport: u16| PacketKey {
        dst_port: dport,
        ..tcp(src, sport, tcp_flags::SYN)
    };
    for (src, sport, dport) in [(1, 1, 22), (1, 2, 80), (2, 1, 22)] {
        let mut p = Passes {
            rules: &w.rs,
            classifier: &w.cl,
            cache: None,
            states: &mut w.t[0],
            now: 1,
            limits: Some(&w.limits),
        };
        assert!(
            p.inbound(&syn(src, sport, dport), Some(&seg(1000, 0, tcp_flags::SYN)), None).0.is_ok()
        );
    }
    let host1 = u128::from(0x0a00_0001u32);
    // Rule 0's states of 10.0.0.1: one; then the rest of its states.
    assert_eq!(w.t[0].flush_source(0..100, Af::Inet, host1, Some(0)), 1);
    assert!(!w.t[0].debug_contains(&syn(1, 1, 22)) && w.t[0].debug_contains(&syn(1, 2, 80)));
    assert_eq!(w.t[0].flush_source(0..100, Af::Inet6, host1, None), 0);
    assert_eq!(w.t[0].flush_source(0..100, Af::Inet, host1, None), 1);
    assert_eq!((w.t[0].len(), w.t[0].counters().src_flushed), (1, 2));
}
