//! UDP / ICMP / other pseudo-states, ICMP error matching, expiry, the state limit.

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{
    InsertError, StateAllocError, StateId, StateLookup, StateMemory, StateTable, StateVerdict,
    Timeouts, Tmo, is_icmp_error, pseudo_state::*,
};

fn udp(src: u128, sp: u16, dst: u128, dp: u16) -> PacketKey {
    PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface: 0,
        proto: proto::UDP,
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        tcp_flags: 0,
        len: 100,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

fn rev(k: &PacketKey) -> PacketKey {
    PacketKey {
        src: k.dst,
        dst: k.src,
        src_port: k.dst_port,
        dst_port: k.src_port,
        dir: if k.dir == Dir::In { Dir::Out } else { Dir::In },
        ..*k
    }
}

fn hit(t: &mut StateTable, k: &PacketKey, now: u32) -> (StateId, bool) {
    match t.lookup(k, None, now) {
        StateLookup::Hit { id, dir_from_initiator, verdict: StateVerdict::Pass } => {
            (id, dir_from_initiator)
        }
        other => panic!("expected pass hit, got {other:?}"),
    }
}

#[test]
fn udp_single_multiple() {
    let mut t = StateTable::new(16, Timeouts::default(), 9);
    let k = udp(0xc0a8_0001, 5353, 0x0808_0808, 53);
    let id = t.insert(&k, 3, 100, None).unwrap();
    let i = t.info(id).unwrap();
    assert_eq!(
        (i.initiator_state, i.responder_state, i.timeout, i.expire),
        (SINGLE, NO_TRAFFIC, Tmo::UdpFirst, 160)
    );
    assert_eq!(i.rule, 3);
    // Second packet from the initiator: single.
    assert_eq!(hit(&mut t, &k, 101), (id, true));
    let i = t.info(id).unwrap();
    assert_eq!(
        (i.initiator_state, i.responder_state, i.timeout, i.expire),
        (SINGLE, NO_TRAFFIC, Tmo::UdpSingle, 131)
    );
    // Reply: the initiator becomes MULTIPLE, the responder SINGLE; still udp.single.
    assert_eq!(hit(&mut t, &rev(&k), 102), (id, false));
    let i = t.info(id).unwrap();
    assert_eq!(
        (i.initiator_state, i.responder_state, i.timeout, i.expire),
        (MULTIPLE, SINGLE, Tmo::UdpSingle, 132)
    );
    // Next packet from the initiator: both MULTIPLE -> udp.multiple.
    assert_eq!(hit(&mut t, &k, 103), (id, true));
    let i = t.info(id).unwrap();
    assert_eq!(
        (i.initiator_state, i.responder_state, i.timeout, i.expire),
        (MULTIPLE, MULTIPLE, Tmo::UdpMultiple, 163)
    );
    // Interface and direction do not matter (floating state).
    let k2 = PacketKey { iface: 7, dir: Dir::Out, ..k };
    assert_eq!(hit(&mut t, &k2, 104), (id, true));
    // Expires after udp.multiple of silence.
    assert!(matches!(hit(&mut t, &rev(&k), 104 + 59), (_, false)));
    assert_eq!(t.lookup(&k, None, 163 + 60), StateLookup::Miss);
    assert!(t.is_empty());
}

#[test]
fn other_protocol_pseudo_states() {
    let mut t = StateTable::new(16, Timeouts::default(), 9);
    let k = PacketKey { proto: 47, src_port: 0, dst_port: 0, ..udp(1, 0, 2, 0) }; // GRE
    let id = t.insert(&k, 0, 0, None).unwrap();
    assert_eq!(t.info(id).unwrap().timeout, Tmo::OtherFirst);
    hit(&mut t, &rev(&k), 1);
    assert_eq!(t.info(id).unwrap().timeout, Tmo::OtherSingle);
    assert_eq!(t.info(id).unwrap().expire, 31);
    hit(&mut t, &k, 2);
    assert_eq!(t.info(id).unwrap().timeout, Tmo::OtherMultiple);
    assert_eq!(t.info(id).unwrap().expire, 62);
}

#[test]
fn icmp_echo_state() {
    let mut t = StateTable::new(16, Timeouts::default(), 9);
    let req = PacketKey { proto: proto::ICMP, src_port: 8, dst_port: 0, ..udp(1, 0, 2, 0) };
    let id = t.insert(&req, 0, 0, None).unwrap();
    assert_eq!(t.info(id).unwrap().timeout, Tmo::IcmpFirst);
    assert_eq!(t.info(id).unwrap().expire, 20);
    let reply = PacketKey { src: 2, dst: 1, src_port: 0, dst_port: 0, ..req };
    assert_eq!(hit(&mut t, &reply, 1), (id, false));
    assert_eq!(t.info(id).unwrap().timeout, Tmo::IcmpError);
    assert_eq!(t.info(id).unwrap().expire, 11);
    // Another type (timestamp) between the same hosts is a different flow.
    let ts = PacketKey { src_port: 13, ..req };
    assert_eq!(t.lookup(&ts, None, 1), StateLookup::Miss);
    // ICMPv6 echo.
    let req6 = PacketKey {
        af: Af::Inet6,
        proto: proto::ICMPV6,
        src: 0x2001_0db8 << 96 | 1,
        dst: 0x2001_0db8 << 96 | 2,
        src_port: 128,
        dst_port: 0,
        ..req
    };
    let id6 = t.insert(&req6, 0, 0, None).unwrap();
    let reply6 = PacketKey { src: req6.dst, dst: req6.src, src_port: 129, ..req6 };
    assert_eq!(hit(&mut t, &reply6, 1), (id6, false));
}

#[test]
fn icmp_error_matching() {
    assert!(is_icmp_error(proto::ICMP, 3) && is_icmp_error(proto::ICMP, 11));
    assert!(is_icmp_error(proto::ICMPV6, 2) && !is_icmp_error(proto::ICMPV6, 128));
    assert!(!is_icmp_error(proto::ICMP, 8));
    let mut t = StateTable::new(16, Timeouts::default(), 9);
    let k = udp(0x0a00_0001, 33434, 0x0101_0101, 33435); // traceroute probe
    let id = t.insert(&k, 0, 0, None).unwrap();
    // Time exceeded from a router to 10.0.0.1 quoting the probe as sent.
    assert_eq!(t.lookup_icmp_error(&k, None, 1), Some(id));
    // Port unreachable about a reply (quoted the other way round) also matches.
    assert_eq!(t.lookup_icmp_error(&rev(&k), None, 1), Some(id));
    // Packet Too Big (ICMPv6) about a tracked IPv6 flow.
    let k6 = PacketKey { af: Af::Inet6, src: 0xfd00 << 112 | 1, dst: 0xfd00 << 112 | 2, ..k };
    let id6 = t.insert(&k6, 0, 0, None).unwrap();
    assert_eq!(t.lookup_icmp_error(&k6, None, 1), Some(id6));
    // Same addresses, other port: no state.
    assert_eq!(t.lookup_icmp_error(&PacketKey { dst_port: 1, ..k }, None, 1), None);
    // Errors quoting an ICMP echo request.
    let echo = PacketKey { proto: proto::ICMP, src_port: 8, dst_port: 0, ..udp(5, 0, 6, 0) };
    let ide = t.insert(&echo, 0, 0, None).unwrap();
    assert_eq!(t.lookup_icmp_error(&echo, None, 1), Some(ide));
    // Errors do not refresh the state: gone after udp.first.
    assert_eq!(t.lookup_icmp_error(&k, None, 60), None);
    let c = t.counters();
    assert_eq!((c.icmp_error_hits, c.icmp_error_misses), (4, 2));
}

/// The paced sweep: the whole table once per `set timeout interval` (500 slots over 10 s:
/// 50 a second, at most the budget a call), and the budget every call while the table is
/// full.
#[test]
fn paced_sweep_keeps_pfs_interval() {
    let to = Timeouts { interval: 10, ..Timeouts::default() };
    let mut t = StateTable::new(1000, to, 5);
    for i in 0..500u16 {
        t.insert(&udp(1, 1000 + i, 2, 53), 0, 0, None).unwrap();
    }
    // At 59 (udp.first is 60): a whole table's credit spent, nothing dead.
    assert_eq!(t.expire_paced(59, 1000), 0);
    // At 60 every state is dead; a second's credit is 50 slots, taken 16 a call.
    let swept: Vec<usize> = (0..5).map(|_| t.expire_paced(60, 16)).collect();
    assert_eq!(swept, [16, 16, 16, 2, 0], "50 slots in the second");
    assert_eq!(t.len(), 450);
    // Ten more seconds: the rest of the table (the credit never exceeds the table).
    let rest: usize = (0..100).map(|_| t.expire_paced(70, 16)).sum();
    assert_eq!((rest, t.len()), (450, 0));
    // Full: the whole budget, credit or not.
    let mut t = StateTable::new(100, to, 5);
    for i in 0..100u16 {
        t.insert(&udp(1, 1000 + i, 2, 53), 0, 0, None).unwrap();
    }
    assert_eq!(t.expire_paced(59, 1000), 0);
    assert_eq!(
        (t.expire_paced(60, 16), t.expire_paced(60, 16)),
        (16, 0),
        "full, then the second's credit (10) spent"
    );
}

#[test]
fn expiry_by_sweep() {
    let to = Timeouts::default();
    let mut t = StateTable::new(1000, to, 5);
    for i in 0..500u16 {
        t.insert(&udp(1, 1000 + i, 2, 53), 0, 0, None).unwrap();
    }
    // Keep the even ones alive.
    for i in (0..500u16).step_by(2) {
        hit(&mut t, &udp(1, 1000 + i, 2, 53), 50); // udp.single: 80
    }
    // Nothing expired yet.
    assert_eq!(t.expire(59, 10_000), 0);
    // Budget bounds the work: 100 slots examined, the odd ones among them go.
    assert_eq!(t.expire(60, 100), 50);
    assert_eq!(t.len(), 450);
    assert_eq!(t.expire(60, 10_000), 200);
    assert_eq!(t.len(), 250);
    assert_eq!(t.debug_check(), t.debug_check());
    for i in 0..500u16 {
        let live = t.debug_contains(&udp(1, 1000 + i, 2, 53));
        assert_eq!(live, i % 2 == 0, "{i}");
    }
    assert_eq!(t.expire(80, 1000), 250);
    assert!(t.is_empty());
    assert_eq!(t.counters().expired_sweep, 500);
    t.debug_check();
    // Slots are reused.
    for i in 0..1000u16 {
        t.insert(&udp(3, i, 4, 53), 0, 100, None).unwrap();
    }
    assert_eq!(t.insert(&udp(3, 5000, 4, 53), 0, 100, None), Err(InsertError::Full));
    t.debug_check();
}

#[test]
fn expired_entry_replaced_by_insert() {
    let mut t = StateTable::new(1, Timeouts::default(), 5);
    let k = udp(1, 1, 2, 2);
    let id = t.insert(&k, 1, 0, None).unwrap();
    // Dead at 60, not yet reclaimed: a new insert of the same flow reuses it, even when full.
    assert_eq!(t.len(), 1);
    let id2 = t.insert(&rev(&k), 2, 60, None).unwrap();
    assert_eq!(id, id2);
    assert_eq!(t.info(id).unwrap().rule, 2);
    // The new initiator is the other side.
    assert_eq!(hit(&mut t, &rev(&k), 61), (id, true));
}

#[test]
fn limit_refuses_new_existing_keep_flowing() {
    let mut t = StateTable::new(4, Timeouts::default(), 5);
    let keys: Vec<_> = (0..4u16).map(|i| udp(10, 1000 + i, 20, 53)).collect();
    let ids: Vec<_> = keys.iter().map(|k| t.insert(k, 0, 0, None).unwrap()).collect();
    assert_eq!(t.len(), 4);
    assert_eq!(t.limit(), 4);
    let new = udp(10, 2000, 20, 53);
    assert_eq!(t.insert(&new, 0, 1, None), Err(InsertError::Full));
    assert_eq!(t.insert(&new, 0, 1, None), Err(InsertError::Full));
    assert_eq!(t.counters().insert_full, 2);
    // Existing flows still pass both ways.
    for (k, id) in keys.iter().zip(&ids) {
        assert_eq!(hit(&mut t, k, 2), (*id, true));
        assert_eq!(hit(&mut t, &rev(k), 2), (*id, false));
    }
    // Once one is gone, a new flow fits.
    assert!(t.remove(ids[1]));
    assert!(!t.remove(ids[1]));
    assert_eq!(t.lookup(&keys[1], None, 3), StateLookup::Miss);
    let idn = t.insert(&new, 0, 3, None).unwrap();
    assert_eq!(idn, ids[1]);
    assert_eq!(t.insert(&keys[1], 0, 3, None), Err(InsertError::Full));
    // Memory is what was allocated at creation.
    assert!(t.memory_bytes() < 4096);
    t.debug_check();
    let c = t.counters();
    assert_eq!((c.in_use, c.inserts, c.removed), (4, 5, 1));
}

#[test]
fn limit_stops_at_capacity_until_grown_into_new_memory() {
    let mut t = StateTable::new(2, Timeouts::default(), 5);
    let keys: Vec<_> = (0..6u16).map(|i| udp(10, 1000 + i, 20, 53)).collect();
    let ids: Vec<_> = keys[..2].iter().map(|k| t.insert(k, 0, 0, None).unwrap()).collect();
    // A higher limit than the table's memory holds is cut to it: setting it never allocates.
    t.set_limit(6);
    assert_eq!((t.limit(), t.capacity()), (2, 2));
    assert_eq!(t.insert(&keys[2], 0, 0, None), Err(InsertError::Full));
    // Memory allocated elsewhere: the states move with their ids, both directions still hit.
    t.grow_into(StateMemory::try_new(6).unwrap());
    t.set_limit(6);
    assert_eq!((t.limit(), t.capacity()), (6, 6));
    for (k, id) in keys.iter().zip(&ids) {
        assert_eq!(hit(&mut t, k, 1), (*id, true));
        assert_eq!(hit(&mut t, &rev(k), 1), (*id, false));
    }
    for k in &keys[2..] {
        t.insert(k, 0, 1, None).unwrap();
    }
    assert_eq!(t.insert(&udp(10, 9, 20, 53), 0, 1, None), Err(InsertError::Full));
    // Smaller memory than the table has is ignored.
    t.grow_into(StateMemory::try_new(3).unwrap());
    assert_eq!(t.capacity(), 6);
    t.debug_check();
    assert!(matches!(
        StateTable::try_new(fw::state::MAX_LIMIT + 1, Timeouts::default(), 0),
        Err(StateAllocError::TooLarge(_))
    ));
}

#[test]
fn zero_limit() {
    let mut t = StateTable::new(0, Timeouts::default(), 0);
    assert_eq!(t.insert(&udp(1, 1, 2, 2), 0, 0, None), Err(InsertError::Full));
    assert_eq!(t.lookup(&udp(1, 1, 2, 2), None, 0), StateLookup::Miss);
    assert_eq!(t.expire(0, 100), 0);
}

#[test]
fn custom_timeouts() {
    let to = Timeouts { udp_first: 5, ..Timeouts::default() };
    let mut t = StateTable::new(4, to, 5);
    let id = t.insert(&udp(1, 1, 2, 2), 0, 10, None).unwrap();
    assert_eq!(t.info(id).unwrap().expire, 15);
    assert_eq!(t.lookup(&udp(1, 1, 2, 2), None, 15), StateLookup::Miss);
    assert_eq!(t.counters().expired_lookup, 1);
}

/// pf keys ICMP query states by the query's identifier: only replies with it match, and a
/// query sent the other way (by the host that was pinged) does not, whatever its identifier.
#[test]
fn icmp_query_states_are_keyed_by_identifier() {
    let mut t = StateTable::new(16, Timeouts::default(), 9);
    let ping = |src, dst, ty, id| PacketKey {
        proto: proto::ICMP,
        src_port: ty,
        icmp_id: id,
        ..udp(src, 0, dst, 0)
    };
    let id = t.insert(&ping(1, 2, 8, 77), 0, 0, None).unwrap();
    assert_eq!(hit(&mut t, &ping(2, 1, 0, 77), 1), (id, false), "the reply");
    assert_eq!(hit(&mut t, &ping(1, 2, 8, 77), 1), (id, true), "the next request");
    assert_eq!(t.lookup(&ping(2, 1, 0, 78), None, 1), StateLookup::Miss, "a reply with another id");
    assert_eq!(
        t.lookup(&ping(2, 1, 8, 77), None, 1),
        StateLookup::Miss,
        "a request the other way, same id"
    );
    assert_eq!(t.lookup(&ping(2, 1, 8, 5), None, 1), StateLookup::Miss, "a request the other way");
    assert_eq!(t.lookup(&ping(1, 2, 8, 78), None, 1), StateLookup::Miss, "a second ping");
    // Timestamp request and reply (13, 14) likewise; ICMPv6 echo (128, 129).
    let ts = t.insert(&ping(1, 2, 13, 9), 0, 0, None).unwrap();
    assert_eq!(hit(&mut t, &ping(2, 1, 14, 9), 1), (ts, false));
    let v6 = |src, dst, ty, id| PacketKey {
        af: Af::Inet6,
        proto: proto::ICMPV6,
        ..ping(src, dst, ty, id)
    };
    let id6 = t.insert(&v6(1, 2, 128, 3), 0, 0, None).unwrap();
    assert_eq!(hit(&mut t, &v6(2, 1, 129, 3), 1), (id6, false));
    assert_eq!(t.lookup(&v6(2, 1, 128, 4), None, 1), StateLookup::Miss);
}

/// pf's adaptive timeouts (pf_state_expires): above `adaptive.start` states every state's
/// timeout is scaled by (end - states) / (end - start), counted when it is judged, and at
/// `adaptive.end` every state is dead.
#[test]
fn adaptive_scaling_follows_the_count() {
    let to =
        Timeouts { udp_first: 60, adaptive_start: 10, adaptive_end: 30, ..Timeouts::default() };
    let mut t = StateTable::new(100, to, 5);
    let flow = |i: u16| udp(1, i, 2, 2);
    let ids: Vec<StateId> = (0..10).map(|i| t.insert(&flow(i), 0, 0, None).unwrap()).collect();
    assert_eq!(t.info(ids[0]).unwrap().expire, 60, "10 states: not above the start");
    for i in 10..20 {
        t.insert(&flow(i), 0, 0, None).unwrap();
    }
    assert_eq!(t.info(ids[0]).unwrap().expire, 30, "20 states: 60 * (30 - 20) / (30 - 10)");
    assert_eq!(t.lookup(&flow(0), None, 30), StateLookup::Miss);
    assert_eq!(t.info(ids[1]).unwrap().expire, 33, "19 states: 60 * 11 / 20");
    assert!(matches!(t.lookup(&flow(1), None, 32), StateLookup::Hit { .. }));
    // The sweep judges by the count as it goes, and each removal lengthens the others'
    // lives: at 40 s, with 19 states the untouched ones end at 33, with 18 at 36, with 17 at
    // 39, with 16 at 42.
    assert_eq!(t.expire(40, 100), 3);
    assert_eq!(t.len(), 16);
    // At the end, everything is dead at once.
    for i in 100..114 {
        t.insert(&flow(i), 0, 40, None).unwrap();
    }
    assert_eq!(t.len(), 30);
    assert_eq!(t.lookup(&flow(100), None, 40), StateLookup::Miss);
    assert_eq!(t.insert(&flow(100), 0, 40, None).map(|_| ()), Ok(()), "a dead entry is replaced");
}
