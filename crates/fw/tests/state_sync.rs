//! States out of one table and into another (`StateTable::export` / `import`, what state
//! synchronisation between two routers carries): a state moves with its windows, pf states
//! and expiry; a stale update never rolls a peer's TCP tracking back (pfsync's rule); the
//! table's limit holds; export, import and export again gives the same snapshot for every
//! protocol and family; the table's journal records what a peer must hear of (new states,
//! timeout-class changes, removals) and not what a peer sent.

mod common;

use std::collections::BTreeMap;

use common::{Rng, seed};
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{
    ImportError, Imported, StateChange, StateLookup, StateOptions, StateSnapshot, StateTable,
    StateVerdict, TcpSegment, Timeouts, tcp_flags::*,
};

fn key(af: Af, p: u8, src: u128, sp: u16, dst: u128, dp: u16, flags: u8) -> PacketKey {
    PacketKey {
        af,
        dir: Dir::In,
        iface: 1,
        proto: p,
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        tcp_flags: flags,
        len: 40,
        icmp_id: if p == proto::ICMP || p == proto::ICMPV6 { sp ^ dp } else { 0 },
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

const A: u128 = 0x0a00_0001;
const B: u128 = 0x0a00_0002;

fn tcp(from_a: bool, flags: u8) -> PacketKey {
    if from_a {
        key(Af::Inet, proto::TCP, A, 40000, B, 80, flags)
    } else {
        key(Af::Inet, proto::TCP, B, 80, A, 40000, flags)
    }
}

fn seg(seq: u32, ack: u32, flags: u8, len: u16) -> TcpSegment {
    TcpSegment { seq, ack, win: 65535, flags, payload_len: len, wscale: None }
}

fn verdict(t: &mut StateTable, from_a: bool, s: TcpSegment, now: u32) -> Option<StateVerdict> {
    match t.lookup(&tcp(from_a, s.flags), Some(&s), now) {
        StateLookup::Hit { verdict, .. } => Some(verdict),
        StateLookup::Miss => None,
    }
}

/// A connection established in `t` at time 2, with 100 bytes from A.
fn established(t: &mut StateTable) -> fw::state::StateId {
    let id = t.insert(&tcp(true, SYN), 3, 0, Some(&seg(1000, 0, SYN, 0))).unwrap();
    assert_eq!(verdict(t, false, seg(5000, 1001, SYN | ACK, 0), 1), Some(StateVerdict::Pass));
    assert_eq!(verdict(t, true, seg(1001, 5001, ACK, 0), 2), Some(StateVerdict::Pass));
    assert_eq!(verdict(t, true, seg(1001, 5001, ACK | PSH, 100), 2), Some(StateVerdict::Pass));
    id
}

#[test]
fn a_tcp_state_moves_with_its_windows() {
    let mut one = StateTable::new(64, Timeouts::default(), 1);
    let id = established(&mut one);
    let snap = one.export(id, 2).unwrap();
    let mut two = StateTable::new(64, Timeouts::default(), 2);
    let Ok(Imported::Inserted(id2)) = two.import(&snap, 2) else { panic!("not inserted") };
    assert_eq!(two.info(id2), one.info(id));
    assert_eq!(two.export(id2, 2), Some(snap));
    // The next segments: in the window in both tables, and far outside it in both.
    let next = seg(1101, 5001, ACK | PSH, 100);
    assert_eq!(verdict(&mut two, true, next, 3), verdict(&mut one, true, next, 3));
    assert_eq!(verdict(&mut two, true, next, 3), Some(StateVerdict::Pass));
    let wild = seg(1101 + 3_000_000, 5001, ACK, 10);
    assert_ne!(verdict(&mut two, true, wild, 3), Some(StateVerdict::Pass));
    assert_eq!(verdict(&mut one, true, wild, 3), verdict(&mut two, true, wild, 3));
}

#[test]
fn a_stale_update_never_rolls_tcp_tracking_back() {
    let mut one = StateTable::new(64, Timeouts::default(), 1);
    let id = established(&mut one);
    let old = one.export(id, 2).unwrap();
    assert_eq!(
        verdict(&mut one, true, seg(1101, 5001, ACK | PSH, 500), 3),
        Some(StateVerdict::Pass)
    );
    let newer = one.export(id, 3).unwrap();
    assert_eq!(one.import(&old, 3), Ok(Imported::Stale(id)));
    assert_eq!(one.export(id, 3), Some(newer), "the initiator's seqlo moved back");
    // A newer snapshot is taken.
    let mut two = StateTable::new(64, Timeouts::default(), 2);
    let Ok(Imported::Inserted(id2)) = two.import(&old, 3) else { panic!() };
    assert_eq!(two.import(&newer, 3), Ok(Imported::Updated(id2)));
    assert_eq!(two.export(id2, 3), Some(newer));
}

#[test]
fn the_tables_limit_holds_and_bad_ends_are_refused() {
    let mut one = StateTable::new(64, Timeouts::default(), 1);
    let id = established(&mut one);
    let mut full = StateTable::new(1, Timeouts::default(), 3);
    full.insert(&key(Af::Inet, proto::UDP, A, 1, B, 2, 0), 0, 2, None).unwrap();
    let snap = one.export(id, 2).unwrap();
    assert_eq!(full.import(&snap, 2), Err(ImportError::Full));
    let mut mixed = snap;
    mixed.ends.responder.addr = "2001:db8::1".parse().unwrap();
    assert_eq!(full.import(&mixed, 2), Err(ImportError::MixedFamilies));
}

#[test]
fn states_that_do_not_travel_are_not_exported() {
    let mut t = StateTable::new(64, Timeouts::default(), 1);
    let modulated = StateOptions { modulate: true, ..StateOptions::default() };
    let id = t.insert_with(&tcp(true, SYN), 0, 0, Some(&seg(1000, 0, SYN, 0)), modulated).unwrap();
    assert_eq!(t.export(id, 0), None);
    let proxied = StateOptions { synproxy: true, ..StateOptions::default() };
    let k = key(Af::Inet, proto::TCP, A, 40001, B, 80, SYN);
    let id = t.insert_with(&k, 0, 0, Some(&seg(1000, 0, SYN, 0)), proxied).unwrap();
    assert_eq!(t.export(id, 0), None);
    // Dead states neither.
    let id = t.insert(&key(Af::Inet, proto::UDP, A, 5, B, 6, 0), 0, 0, None).unwrap();
    assert!(t.export(id, 0).is_some());
    assert_eq!(t.export(id, 1_000_000), None);
}

/// A random flow of any protocol and family, with random pf-state options.
fn random_flow(r: &mut Rng) -> (PacketKey, StateOptions, u32) {
    let p = [proto::TCP, proto::UDP, proto::ICMP, 47][r.below(4) as usize];
    let v6 = r.below(2) == 0;
    let (af, p) = match (v6, p) {
        (true, proto::ICMP) => (Af::Inet6, proto::ICMPV6),
        (true, p) => (Af::Inet6, p),
        (false, p) => (Af::Inet, p),
    };
    let addr = |r: &mut Rng| {
        if v6 {
            0x2001_0db8u128 << 96 | u128::from(r.below(50))
        } else {
            0x0a00_0000 | u128::from(r.below(50))
        }
    };
    let (src, dst) = (addr(r), addr(r));
    let (sp, dp) = match p {
        proto::TCP | proto::UDP => (1 + r.below(60000) as u16, 1 + r.below(60000) as u16),
        proto::ICMP => (8, 0),
        proto::ICMPV6 => (128, 0),
        _ => (0, 0),
    };
    let opts = StateOptions {
        sloppy: r.below(2) == 0,
        allow_opts: r.below(2) == 0,
        bound: (r.below(2) == 0).then(|| r.below(4) as u16),
        tag: r.below(3) as u8,
        ..StateOptions::default()
    };
    (key(af, p, src, sp, dst, dp, SYN), opts, r.below(100) as u32)
}

#[test]
fn export_import_export_gives_the_same_snapshots() {
    let mut r = Rng(seed(0x5eed_5ca1));
    let mut one = StateTable::new(4096, Timeouts::default(), 1);
    for _ in 0..2000 {
        let (k, opts, rule) = random_flow(&mut r);
        let s = (k.proto == proto::TCP).then(|| seg(r.next() as u32, 0, SYN, 0));
        let _ = one.insert_with(&k, rule, r.below(10) as u32, s.as_ref(), opts);
    }
    let snaps: Vec<StateSnapshot> =
        one.states_in(0..one.slot_count()).filter_map(|id| one.export(id, 10)).collect();
    assert!(snaps.len() > 1000, "{} states", snaps.len());
    let mut two = StateTable::new(4096, Timeouts::default(), 2);
    for s in &snaps {
        assert!(matches!(two.import(s, 10), Ok(Imported::Inserted(_))), "{s:?}");
    }
    let by_ends = |t: &StateTable| -> BTreeMap<String, StateSnapshot> {
        t.states_in(0..t.slot_count())
            .filter_map(|id| t.export(id, 10))
            .map(|s| (format!("{}{:?}", s.proto, s.ends), s))
            .collect()
    };
    assert_eq!(by_ends(&two), by_ends(&one));
    // Importing the same snapshots again changes nothing.
    for s in &snaps {
        assert!(matches!(two.import(s, 10), Ok(Imported::Updated(_))), "{s:?}");
    }
    assert_eq!(by_ends(&two), by_ends(&one));
}

fn changes(t: &mut StateTable) -> (Vec<StateChange>, bool) {
    let mut out = Vec::new();
    let lost = t.take_changes(&mut out);
    (out, lost)
}

#[test]
fn the_journal_records_new_states_transitions_and_removals() {
    let mut t = StateTable::new(64, Timeouts::default(), 1);
    t.enable_journal(16);
    let id = established(&mut t);
    // The insert and two transitions (opening, established): one entry, the state's last.
    assert_eq!(changes(&mut t), (vec![StateChange::Changed(id)], false));
    // Data in the same second as the last record: nothing more to tell.
    assert_eq!(verdict(&mut t, true, seg(1101, 5001, ACK | PSH, 100), 2), Some(StateVerdict::Pass));
    assert_eq!(changes(&mut t), (vec![], false));
    // The next second's first packet moves the window on: the state goes once that second
    // (pfsync sends a live state at least once a second), so the peer's window keeps up.
    for seq in [1201, 1301] {
        assert_eq!(
            verdict(&mut t, true, seg(seq, 5001, ACK | PSH, 100), 3),
            Some(StateVerdict::Pass)
        );
    }
    assert_eq!(changes(&mut t), (vec![StateChange::Changed(id)], false));
    let mut peer = StateTable::new(64, Timeouts::default(), 2);
    peer.import(&t.export(id, 3).unwrap(), 3).unwrap();
    assert_eq!(peer.export(id, 3).unwrap().peers[0].seqlo, 1401, "the peer has the new window");
    let ends = t.ends(id).unwrap();
    assert!(t.remove(id));
    assert_eq!(changes(&mut t), (vec![StateChange::Removed { proto: proto::TCP, ends }], false));
}

#[test]
fn a_flow_removed_and_created_again_goes_out_in_that_order() {
    let mut t = StateTable::new(64, Timeouts::default(), 1);
    t.enable_journal(16);
    let id = t.insert(&tcp(true, SYN), 0, 0, Some(&seg(1000, 0, SYN, 0))).unwrap();
    let ends = t.ends(id).unwrap();
    assert!(t.remove(id));
    let again = t.insert(&tcp(true, SYN), 0, 1, Some(&seg(9000, 0, SYN, 0))).unwrap();
    assert_eq!(again, id, "the slot is reused");
    let (c, _) = changes(&mut t);
    assert_eq!(c, vec![StateChange::Removed { proto: proto::TCP, ends }, StateChange::Changed(id)]);
}

#[test]
fn a_peers_states_are_not_journaled_and_a_full_journal_says_so() {
    let mut one = StateTable::new(64, Timeouts::default(), 1);
    let id = established(&mut one);
    let snap = one.export(id, 2).unwrap();
    let mut two = StateTable::new(64, Timeouts::default(), 2);
    two.enable_journal(2);
    two.import(&snap, 2).unwrap();
    assert_eq!(changes(&mut two), (vec![], false));
    for port in 1..=3 {
        two.insert(&key(Af::Inet, proto::UDP, A, port, B, 53, 0), 0, 2, None).unwrap();
    }
    let (c, lost) = changes(&mut two);
    assert_eq!((c.len(), lost), (2, true));
    assert_eq!(changes(&mut two), (vec![], false), "the loss is reported once");
}

/// A state the peer synced a second ago: the connection went on 3 MB each way since. Its
/// first packet here picks it up (pf picks up a connection established before it), the
/// other end's next one passes too, and once a packet passed by the windows a wild one is
/// refused again. A state made here is never picked up.
#[test]
fn a_synced_tcp_state_picks_its_connection_up_after_a_takeover() {
    let mut one = StateTable::new(64, Timeouts::default(), 1);
    let id = established(&mut one);
    let snap = one.export(id, 2).unwrap();
    let mut two = StateTable::new(64, Timeouts::default(), 2);
    let Ok(Imported::Inserted(_)) = two.import(&snap, 2) else { panic!("not inserted") };
    let (a_seq, b_seq) = (1101 + 3_000_000, 5001 + 3_000_000);
    let on = seg(a_seq, b_seq, ACK | PSH, 100);
    assert_eq!(
        verdict(&mut one, true, on, 3),
        Some(StateVerdict::Drop(fw::state::StateDropReason::OutOfWindow)),
        "a state made here refuses it"
    );
    assert_eq!(verdict(&mut two, true, on, 3), Some(StateVerdict::Pass), "picked up");
    assert_eq!(two.counters().picked_up, 1);
    let reply = seg(b_seq, a_seq + 100, ACK | PSH, 100);
    assert_eq!(verdict(&mut two, false, reply, 3), Some(StateVerdict::Pass), "the other end");
    let next = seg(a_seq + 100, b_seq + 100, ACK, 0);
    assert_eq!(verdict(&mut two, true, next, 3), Some(StateVerdict::Pass));
    let wild = seg(a_seq + 3_000_000, b_seq + 100, ACK, 10);
    assert_ne!(verdict(&mut two, true, wild, 3), Some(StateVerdict::Pass), "tracked again");
    assert_eq!(two.counters().picked_up, 1);
}
