//! Per-rule state timeouts (pf.conf(5) `keep state (tcp.established 5, udp.first 30)`): a
//! state lives by its rule's timeouts for the kinds the rule names and by the table's for
//! the others; states of other rules are untouched. Driven on the table's clock.

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{StateId, StateLookup, StateTable, TcpSegment, Timeouts, Tmo, tcp_flags::*};

const A: u128 = 0x0a00_0001;
const B: u128 = 0x0a00_0002;

fn key(p: u8, from_a: bool, sport: u16, flags: u8) -> PacketKey {
    let (src, dst, src_port, dst_port) = if from_a { (A, B, sport, 80) } else { (B, A, 80, sport) };
    let dir = if from_a { Dir::Out } else { Dir::In };
    PacketKey {
        af: Af::Inet,
        dir,
        iface: 1,
        proto: p,
        src,
        dst,
        src_port,
        dst_port,
        tcp_flags: flags,
        len: 40,
        ..PacketKey::ZERO
    }
}

fn seg(seq: u32, ack: u32, flags: u8) -> TcpSegment {
    TcpSegment { seq, ack, win: 65535, flags, payload_len: 0, wscale: None }
}

/// A TCP connection from port `sport` created by rule `rule` at time 0 and established at 2.
fn connect(t: &mut StateTable, rule: u32, sport: u16) -> StateId {
    let id =
        t.insert(&key(proto::TCP, true, sport, SYN), rule, 0, Some(&seg(1000, 0, SYN))).unwrap();
    assert!(matches!(
        t.lookup(&key(proto::TCP, false, sport, SYN | ACK), Some(&seg(5000, 1001, SYN | ACK)), 1),
        StateLookup::Hit { .. }
    ));
    assert!(matches!(
        t.lookup(&key(proto::TCP, true, sport, ACK), Some(&seg(1001, 5001, ACK)), 2),
        StateLookup::Hit { .. }
    ));
    assert_eq!(t.info(id).unwrap().timeout, Tmo::TcpEstablished);
    id
}

fn alive(t: &mut StateTable, p: u8, sport: u16, now: u32) -> bool {
    let s = (p == proto::TCP).then(|| seg(1001, 5001, ACK));
    matches!(t.lookup(&key(p, true, sport, ACK), s.as_ref(), now), StateLookup::Hit { .. })
}

#[test]
fn a_rules_established_timeout_ends_its_states_only() {
    let mut t = StateTable::new(64, Timeouts::default(), 7);
    // Rule 0: `keep state (tcp.established 5)`; rule 1: the table's timeouts.
    let own: [&[(Tmo, u32)]; 2] = [&[(Tmo::TcpEstablished, 5)], &[]];
    t.set_rule_timeouts(own);
    let short = connect(&mut t, 0, 40000);
    let long = connect(&mut t, 1, 40001);
    assert_eq!((t.info(short).unwrap().expire, t.info(short).unwrap().timeout_secs), (2 + 5, 5));
    assert_eq!(t.info(long).unwrap().expire, 2 + 86400);
    // Idle for 5 s: the short one is gone, the other lives on.
    assert!(!alive(&mut t, proto::TCP, 40000, 7));
    assert!(alive(&mut t, proto::TCP, 40001, 7));
    // Its other kinds are the table's: a new connection of rule 0 opens under tcp.first.
    let id = t.insert(&key(proto::TCP, true, 40002, SYN), 0, 10, Some(&seg(1000, 0, SYN))).unwrap();
    assert_eq!(t.info(id).unwrap().expire, 10 + 120);
    // Activity keeps a state alive by its own timeout: refreshed at 10, gone after 15.
    let id = connect(&mut t, 0, 40003);
    assert!(alive(&mut t, proto::TCP, 40003, 6));
    assert_eq!(t.info(id).unwrap().expire, 6 + 5);
    assert!(!alive(&mut t, proto::TCP, 40003, 11));
}

#[test]
fn udp_states_follow_their_rules_timeouts_and_reloads_keep_them() {
    let mut t = StateTable::new(64, Timeouts::default(), 7);
    let own: [&[(Tmo, u32)]; 2] = [&[], &[(Tmo::UdpFirst, 3), (Tmo::UdpMultiple, 4)]];
    t.set_rule_timeouts(own);
    let plain = t.insert(&key(proto::UDP, true, 5000, 0), 0, 0, None).unwrap();
    let own_id = t.insert(&key(proto::UDP, true, 5001, 0), 1, 0, None).unwrap();
    assert_eq!((t.info(plain).unwrap().expire, t.info(own_id).unwrap().expire), (60, 3));
    // The answer: udp.single, which the rule leaves to the table (30 s).
    assert!(matches!(t.lookup(&key(proto::UDP, false, 5001, 0), None, 2), StateLookup::Hit { .. }));
    assert_eq!(
        (t.info(own_id).unwrap().timeout, t.info(own_id).unwrap().expire),
        (Tmo::UdpSingle, 2 + 30)
    );
    // Traffic both ways: udp.multiple, the rule's 4 s (the general lookup: never steady).
    assert!(alive(&mut t, proto::UDP, 5001, 3));
    assert_eq!(
        (t.info(own_id).unwrap().timeout, t.info(own_id).unwrap().expire),
        (Tmo::UdpMultiple, 3 + 4)
    );
    // A reload whose rule 1 has no timeouts of its own: the states made keep theirs.
    t.set_rule_timeouts([&[][..], &[][..]]);
    assert!(alive(&mut t, proto::UDP, 5001, 6));
    assert_eq!(t.info(own_id).unwrap().expire, 6 + 4);
    assert!(!alive(&mut t, proto::UDP, 5001, 10));
    assert!(alive(&mut t, proto::UDP, 5000, 10));
    // New states of rule 1 are under the table's timeouts now.
    let id = t.insert(&key(proto::UDP, true, 5002, 0), 1, 10, None).unwrap();
    assert_eq!(t.info(id).unwrap().expire, 10 + 60);
}
