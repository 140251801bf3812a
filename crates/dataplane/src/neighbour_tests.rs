//! Unit tests of the neighbour state machine (`neighbour.rs`).

use super::*;
use core::net::{Ipv4Addr, Ipv6Addr};

const S: u64 = SECOND;
const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const MAC2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

fn table() -> NeighbourTable<u32> {
    NeighbourTable::default()
}

/// Runs `tick` at `now` and returns its actions.
fn tick(t: &mut NeighbourTable<u32>, now: u64) -> Vec<Action<u32>> {
    let mut out = Vec::new();
    t.tick(now, &mut out);
    out
}

fn state(t: &NeighbourTable<u32>, a: IpAddr) -> State {
    t.get(a).unwrap().0
}

#[test]
fn defaults_are_rfc4861() {
    let c = Config::default();
    assert_eq!((c.retrans_ns, c.max_probes, c.reachable_ns), (S, 3, 30 * S));
    assert_eq!(c.queue_len, 8);
}

#[test]
fn first_packet_starts_resolution_and_answer_releases_queue() {
    let mut t = table();
    let mut out = Vec::new();
    assert_eq!(t.send(ip(1), 0, 10, 0, &mut out), Send::Queued);
    assert_eq!(out, vec![Action::SendRequest(ip(1), None)]);
    assert_eq!(t.get(ip(1)), Some((State::Incomplete, None)));
    out.clear();
    assert_eq!(t.send(ip(1), 0, 11, S / 2, &mut out), Send::Queued);
    assert!(out.is_empty(), "no second request before the retransmit timer");
    t.confirm(ip(1), MAC, S / 2, &mut out);
    assert_eq!(out, vec![Action::Resolved(ip(1), MAC, vec![10, 11])]);
    assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
    out.clear();
    assert_eq!(t.send(ip(1), 0, 12, S, &mut out), Send::Now(MAC, 12));
    assert!(out.is_empty());
    assert!(tick(&mut t, 10 * S).is_empty());
}

#[test]
fn queue_is_bounded_oldest_dropped() {
    let mut t = table();
    let mut out = Vec::new();
    for id in 0..8 {
        assert_eq!(t.send(ip(1), 0, id, 0, &mut out), Send::Queued);
    }
    assert_eq!(t.send(ip(1), 0, 8, 0, &mut out), Send::Dropped(0));
    assert_eq!(t.send(ip(1), 0, 9, 0, &mut out), Send::Dropped(1));
    assert_eq!(t.queue_overflows(), 2);
    assert_eq!(out.len(), 1, "one request for the whole burst");
    out.clear();
    t.confirm(ip(1), MAC, 0, &mut out);
    assert_eq!(out, vec![Action::Resolved(ip(1), MAC, (2..10).collect())]);
}

#[test]
fn incomplete_retransmits_three_times_then_fails() {
    let mut t = table();
    let mut out = Vec::new();
    t.send(ip(1), 0, 7, 0, &mut out);
    assert!(tick(&mut t, S - 1).is_empty());
    assert_eq!(tick(&mut t, S), vec![Action::SendRequest(ip(1), None)]);
    assert!(tick(&mut t, S + S / 2).is_empty());
    assert_eq!(tick(&mut t, 2 * S), vec![Action::SendRequest(ip(1), None)]);
    assert_eq!(state(&t, ip(1)), State::Incomplete);
    assert_eq!(tick(&mut t, 3 * S), vec![Action::Failed(ip(1), vec![7])]);
    assert_eq!(t.get(ip(1)), Some((State::Failed, None)));
    assert!(tick(&mut t, 100 * S).is_empty());
}

#[test]
fn failed_entry_restarts_resolution_on_traffic() {
    let mut t = table();
    let mut out = Vec::new();
    t.send(ip(1), 0, 1, 0, &mut out);
    for s in 1..=3 {
        tick(&mut t, s * S);
    }
    assert_eq!(state(&t, ip(1)), State::Failed);
    out.clear();
    assert_eq!(t.send(ip(1), 0, 2, 10 * S, &mut out), Send::Queued);
    assert_eq!(out, vec![Action::SendRequest(ip(1), None)]);
    assert_eq!(state(&t, ip(1)), State::Incomplete);
    assert_eq!(tick(&mut t, 11 * S), vec![Action::SendRequest(ip(1), None)]);
}

#[test]
fn reachable_ages_to_stale() {
    let mut t = table();
    let mut out = Vec::new();
    t.send(ip(1), 0, 1, 0, &mut out);
    t.confirm(ip(1), MAC, S, &mut out);
    assert!(tick(&mut t, 31 * S - 1).is_empty());
    assert_eq!(state(&t, ip(1)), State::Reachable);
    assert!(tick(&mut t, 31 * S).is_empty());
    assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC))));
    // Lazily too: a send after expiry but before any tick sees STALE (and probes).
    t.confirm(ip(1), MAC, 40 * S, &mut out);
    out.clear();
    assert_eq!(t.send(ip(1), 0, 2, 70 * S, &mut out), Send::Now(MAC, 2));
    assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
    assert_eq!(state(&t, ip(1)), State::Probe);
}

#[test]
fn stale_use_probes_unicast_then_fails() {
    let mut t = table();
    let mut out = Vec::new();
    t.learn(ip(1), 0, MAC, &mut out);
    assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC))));
    assert_eq!(t.send(ip(1), 0, 1, 0, &mut out), Send::Now(MAC, 1));
    assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
    out.clear();
    // Packets keep flowing with the cached MAC while probing.
    assert_eq!(t.send(ip(1), 0, 2, S / 2, &mut out), Send::Now(MAC, 2));
    assert!(out.is_empty());
    assert_eq!(tick(&mut t, S), vec![Action::SendRequest(ip(1), Some(MAC))]);
    assert_eq!(tick(&mut t, 2 * S), vec![Action::SendRequest(ip(1), Some(MAC))]);
    assert_eq!(tick(&mut t, 3 * S), vec![Action::Failed(ip(1), vec![])]);
    assert_eq!(t.get(ip(1)), Some((State::Failed, None)));
}

#[test]
fn probe_answered_becomes_reachable() {
    let mut t = table();
    let mut out = Vec::new();
    t.learn(ip(1), 0, MAC, &mut out);
    t.send(ip(1), 0, 1, 0, &mut out);
    out.clear();
    t.confirm(ip(1), MAC, S / 2, &mut out);
    assert!(out.is_empty(), "nothing was queued");
    assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
    assert!(tick(&mut t, 5 * S).is_empty(), "no more probes");
}

#[test]
fn refresh_on_traffic() {
    let mut t = table();
    let mut out = Vec::new();
    t.learn(ip(1), 0, MAC, &mut out);
    t.refresh(ip(1), 100 * S);
    assert_eq!(state(&t, ip(1)), State::Reachable);
    // Refreshed again before expiry: the 30 s restart.
    t.refresh(ip(1), 120 * S);
    tick(&mut t, 149 * S);
    assert_eq!(state(&t, ip(1)), State::Reachable);
    tick(&mut t, 150 * S);
    assert_eq!(state(&t, ip(1)), State::Stale);
    // A probing entry is confirmed by it too; an incomplete one is not (no MAC).
    t.send(ip(1), 0, 1, 151 * S, &mut out);
    assert_eq!(state(&t, ip(1)), State::Probe);
    t.refresh(ip(1), 151 * S);
    assert_eq!(state(&t, ip(1)), State::Reachable);
    t.send(ip(2), 0, 2, 0, &mut out);
    t.refresh(ip(2), 0);
    assert_eq!(state(&t, ip(2)), State::Incomplete);
    t.refresh(ip(3), 0); // unknown: nothing happens
    assert!(t.get(ip(3)).is_none());
}

#[test]
fn learn_transitions() {
    let mut t = table();
    let mut out = Vec::new();
    // INCOMPLETE + announcement: STALE with the MAC, queue released.
    t.send(ip(1), 0, 5, 0, &mut out);
    out.clear();
    t.learn(ip(1), 0, MAC, &mut out);
    assert_eq!(out, vec![Action::Resolved(ip(1), MAC, vec![5])]);
    assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC))));
    assert!(tick(&mut t, 10 * S).is_empty(), "no retransmits once resolved");
    // REACHABLE + same MAC: unchanged; + new MAC: STALE with the new MAC.
    out.clear();
    t.confirm(ip(1), MAC, 10 * S, &mut out);
    t.learn(ip(1), 0, MAC, &mut out);
    assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
    t.learn(ip(1), 0, MAC2, &mut out);
    assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC2))));
    assert!(out.is_empty());
    // FAILED + announcement: STALE.
    t.send(ip(2), 0, 1, 0, &mut out);
    for s in 1..=3 {
        tick(&mut t, s * S);
    }
    assert_eq!(state(&t, ip(2)), State::Failed);
    t.learn(ip(2), 0, MAC, &mut out);
    assert_eq!(t.get(ip(2)), Some((State::Stale, Some(MAC))));
}

#[test]
fn unsolicited_confirm_creates_nothing() {
    let mut t = table();
    let mut out = Vec::new();
    t.confirm(ip(9), MAC, 0, &mut out);
    assert!(t.is_empty() && out.is_empty());
}

#[test]
fn static_entries_never_age_or_change() {
    let mut t = table();
    let mut out = Vec::new();
    t.send(ip(1), 0, 3, 0, &mut out);
    out.clear();
    t.add_static(ip(1), 0, MAC, &mut out);
    assert_eq!(out, vec![Action::Resolved(ip(1), MAC, vec![3])]);
    out.clear();
    assert!(tick(&mut t, u64::MAX / 2).is_empty());
    t.learn(ip(1), 0, MAC2, &mut out);
    t.confirm(ip(1), MAC2, 0, &mut out);
    t.refresh(ip(1), 0);
    assert_eq!(t.get(ip(1)), Some((State::Permanent, Some(MAC))));
    assert_eq!(t.send(ip(1), 0, 4, u64::MAX / 2, &mut out), Send::Now(MAC, 4));
    assert!(out.is_empty());
}

#[test]
fn table_is_bounded_and_reachable_entries_are_never_evicted() {
    let mut t = NeighbourTable::new(Config { max_entries: 2, ..Config::default() });
    let mut out = Vec::new();
    t.learn(ip(1), 0, MAC, &mut out);
    t.confirm(ip(1), MAC, 0, &mut out);
    t.learn(ip(2), 0, MAC, &mut out);
    t.confirm(ip(2), MAC, 0, &mut out);
    // Both reachable: a new address finds no room, counted, and nothing changes.
    assert_eq!(t.send(ip(3), 0, 3, 0, &mut out), Send::Dropped(3));
    assert!(!t.learn(ip(4), 0, MAC, &mut out));
    assert_eq!((t.len(), t.table_full(), t.evictions()), (2, 2, 0));
    assert!(out.is_empty());
    // Existing entries still work.
    assert_eq!(t.send(ip(2), 0, 2, 0, &mut out), Send::Now(MAC, 2));
    t.remove(ip(1), &mut out);
    assert!(out.is_empty(), "nothing was queued on it");
    assert_eq!(t.send(ip(3), 0, 3, 0, &mut out), Send::Queued);
    // A static entry is added beyond the limit (the config is trusted) and never evicted.
    t.add_static(ip(5), 0, MAC2, &mut out);
    assert_eq!(t.len(), 3);
}

#[test]
fn full_table_evicts_failed_then_incomplete_then_stale_least_recently_used_first() {
    let mut t = NeighbourTable::new(Config { max_entries: 3, ..Config::default() });
    let mut out = Vec::new();
    t.learn(ip(1), 0, MAC, &mut out); // STALE
    t.send(ip(2), 0, 20, 0, &mut out); // INCOMPLETE, fails below
    for s in 1..=3 {
        tick(&mut t, s * S);
    }
    assert_eq!(state(&t, ip(2)), State::Failed);
    t.send(ip(3), 0, 30, 4 * S, &mut out); // INCOMPLETE
    out.clear();
    // The failed entry goes first, though more recently used than the stale one ...
    assert_eq!(t.send(ip(4), 0, 40, 4 * S, &mut out), Send::Queued);
    assert_eq!(out[0], Action::Evicted(ip(2), vec![]));
    // ... then the least recently used incomplete one, with its packets ...
    t.send(ip(3), 0, 31, 4 * S, &mut out); // ip(3) used after ip(4)
    out.clear();
    assert_eq!(t.send(ip(5), 0, 50, 4 * S, &mut out), Send::Queued);
    assert_eq!(out[0], Action::Evicted(ip(4), vec![40]));
    out.clear();
    assert!(t.learn(ip(6), 0, MAC2, &mut out));
    assert_eq!(out, vec![Action::Evicted(ip(3), vec![30, 31])]);
    // ... and only then the stale one.
    out.clear();
    t.confirm(ip(5), MAC2, 4 * S, &mut out);
    out.clear();
    assert!(t.learn(ip(7), 0, MAC2, &mut out));
    assert_eq!(out, vec![Action::Evicted(ip(1), vec![])]);
    assert_eq!((t.len(), t.evictions(), t.table_full()), (3, 4, 0));
    assert_eq!(t.get(ip(5)), Some((State::Reachable, Some(MAC2))));
}

#[test]
fn a_scan_recycles_its_own_entries() {
    let max = 1000;
    let mut t = NeighbourTable::new(Config { max_entries: max, ..Config::default() });
    let mut out = Vec::new();
    let real = IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1));
    t.send(real, 1, 0, 0, &mut out);
    t.confirm(real, MAC, 0, &mut out);
    for i in 0..100_000u32 {
        let a = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        assert_eq!(t.send(a, 0, i, u64::from(i) * 1000, &mut out), Send::Queued);
        assert!(t.len() <= max);
    }
    assert_eq!(t.evictions(), 100_000 + 1 - max as u64);
    assert_eq!(t.get(real), Some((State::Reachable, Some(MAC))));
    assert_eq!(t.port(real), Some(1));
    let newest = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + 99_999));
    assert_eq!(state(&t, newest), State::Incomplete);
}

#[test]
fn advertisements_follow_rfc4861_7_2_5() {
    let mut t = table();
    let mut out = Vec::new();
    // No entry: nothing is created, whatever the flags.
    assert_eq!(t.advert(ip(1), Some(MAC), false, true, 0, &mut out), Advert::NoEntry);
    assert_eq!(t.advert(ip(1), Some(MAC), true, true, 0, &mut out), Advert::NoEntry);
    assert!(t.is_empty());
    // INCOMPLETE: no target address: ignored; solicited: REACHABLE, queue released.
    t.send(ip(1), 0, 7, 0, &mut out);
    out.clear();
    assert_eq!(t.advert(ip(1), None, true, true, 0, &mut out), Advert::Ignored);
    assert_eq!(state(&t, ip(1)), State::Incomplete);
    assert_eq!(t.advert(ip(1), Some(MAC), true, false, S, &mut out), Advert::Updated);
    assert_eq!(out, vec![Action::Resolved(ip(1), MAC, vec![7])]);
    assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
    // Unsolicited, no override, a different address: REACHABLE becomes STALE, MAC kept.
    assert_eq!(t.advert(ip(1), Some(MAC2), false, false, S, &mut out), Advert::Ignored);
    assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC))));
    // Solicited without an address: REACHABLE with the cached one.
    assert_eq!(t.advert(ip(1), None, true, false, S, &mut out), Advert::Updated);
    assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
    // Override with a new address, unsolicited: STALE with it.
    assert_eq!(t.advert(ip(1), Some(MAC2), false, true, S, &mut out), Advert::Updated);
    assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC2))));
    // Unsolicited, same address: no change of state.
    assert_eq!(t.advert(ip(1), Some(MAC2), false, false, S, &mut out), Advert::Updated);
    assert_eq!(state(&t, ip(1)), State::Stale);
    // INCOMPLETE with an unsolicited advertisement: STALE.
    t.send(ip(2), 0, 8, 0, &mut out);
    out.clear();
    assert_eq!(t.advert(ip(2), Some(MAC), false, false, 0, &mut out), Advert::Updated);
    assert_eq!(out, vec![Action::Resolved(ip(2), MAC, vec![8])]);
    assert_eq!(state(&t, ip(2)), State::Stale);
    // Static entries ignore it.
    t.add_static(ip(3), 0, MAC, &mut out);
    assert_eq!(t.advert(ip(3), Some(MAC2), true, true, 0, &mut out), Advert::Ignored);
    assert_eq!(t.get(ip(3)), Some((State::Permanent, Some(MAC))));
}

#[test]
fn probe_stale_probes_only_stale_entries_and_an_answer_makes_them_reachable() {
    let mut t = table();
    let mut out = Vec::new();
    t.learn(ip(1), 0, MAC, &mut out); // STALE
    t.learn(ip(2), 0, MAC2, &mut out);
    t.confirm(ip(2), MAC2, 0, &mut out); // REACHABLE until 30 s
    t.send(ip(3), 0, 3, 0, &mut out); // INCOMPLETE
    t.add_static(ip(4), 0, MAC, &mut out); // PERMANENT
    out.clear();
    t.probe_stale(10 * S, &mut out);
    assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
    assert_eq!(t.get(ip(1)), Some((State::Probe, Some(MAC))));
    assert_eq!(state(&t, ip(2)), State::Reachable);
    assert_eq!(state(&t, ip(3)), State::Incomplete);
    assert_eq!(state(&t, ip(4)), State::Permanent);
    // Probing again before an answer changes nothing: the entry is PROBE, not STALE.
    out.clear();
    t.probe_stale(10 * S, &mut out);
    assert!(out.is_empty());
    // Answered: REACHABLE, no more requests.
    t.confirm(ip(1), MAC, 10 * S + S / 2, &mut out);
    assert!(out.is_empty(), "nothing was queued");
    assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
    assert!(!tick(&mut t, 12 * S).contains(&Action::SendRequest(ip(1), Some(MAC))));
    // One reachable period later both expired entries (aged by tick or not) are probed.
    t.confirm(ip(3), MAC2, 12 * S, &mut out);
    out.clear();
    tick(&mut t, 40 * S + S / 2); // ip(1) STALE; ip(2) too
    t.probe_stale(40 * S + S / 2, &mut out); // ip(3)'s deadline (42 s) not reached
    out.sort_by_key(|a| format!("{a:?}"));
    assert_eq!(
        out,
        vec![Action::SendRequest(ip(1), Some(MAC)), Action::SendRequest(ip(2), Some(MAC2))]
    );
    out.clear();
    t.probe_stale(42 * S, &mut out); // REACHABLE past its deadline, before any tick
    assert_eq!(out, vec![Action::SendRequest(ip(3), Some(MAC2))]);
    assert_eq!(state(&t, ip(3)), State::Probe);
}

#[test]
fn probe_stale_unanswered_fails_with_an_action() {
    let mut t = table();
    let mut out = Vec::new();
    t.learn(ip(1), 0, MAC, &mut out);
    t.probe_stale(100 * S, &mut out);
    assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
    assert!(tick(&mut t, 101 * S - 1).is_empty());
    assert_eq!(tick(&mut t, 101 * S), vec![Action::SendRequest(ip(1), Some(MAC))]);
    assert_eq!(tick(&mut t, 102 * S), vec![Action::SendRequest(ip(1), Some(MAC))]);
    // Three unicast requests unanswered: FAILED, reported even though nothing waited.
    assert_eq!(tick(&mut t, 103 * S), vec![Action::Failed(ip(1), vec![])]);
    assert_eq!(t.get(ip(1)), Some((State::Failed, None)));
    assert!(tick(&mut t, 200 * S).is_empty(), "reported once");
    out.clear();
    t.probe_stale(200 * S, &mut out);
    assert!(out.is_empty(), "a FAILED entry has no MAC to probe");
}

#[test]
fn entries_lists_state_mac_and_queue() {
    let mut t = table();
    let mut out = Vec::new();
    assert_eq!(t.entries().count(), 0);
    t.send(ip(1), 0, 1, 0, &mut out);
    t.send(ip(1), 0, 2, 0, &mut out);
    t.learn(ip(2), 0, MAC, &mut out);
    t.add_static(ip(3), 0, MAC2, &mut out);
    let mut got: Vec<_> = t.entries().collect();
    got.sort_by_key(|e| e.0);
    assert_eq!(
        got,
        vec![
            (ip(1), State::Incomplete, None, 0, 2),
            (ip(2), State::Stale, Some(MAC), 0, 0),
            (ip(3), State::Permanent, Some(MAC2), 0, 0),
        ]
    );
    t.confirm(ip(1), MAC2, 0, &mut out);
    assert!(t.entries().any(|e| e == (ip(1), State::Reachable, Some(MAC2), 0, 0)));
}

#[test]
fn config_reports_what_is_in_use() {
    let cfg =
        Config { retrans_ns: 2 * S, reachable_ns: 60 * S, max_entries: 10, ..Config::default() };
    assert_eq!(NeighbourTable::<u32>::new(cfg).config(), cfg);
    assert_eq!(NeighbourTable::<u32>::default().config(), Config::default());
    let floored =
        NeighbourTable::<u32>::new(Config { queue_len: 0, max_probes: 0, ..cfg }).config();
    assert_eq!((floored.queue_len, floored.max_probes), (1, 1));
}

#[test]
fn ipv6_keys_and_config_floors() {
    let mut t: NeighbourTable<u32> =
        NeighbourTable::new(Config { queue_len: 0, max_probes: 0, ..Config::default() });
    let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let mut out = Vec::new();
    assert_eq!(t.send(a, 0, 1, 0, &mut out), Send::Queued);
    assert_eq!(t.send(a, 0, 2, 0, &mut out), Send::Dropped(1)); // queue_len raised to 1
    assert_eq!(tick(&mut t, S), vec![Action::Failed(a, vec![2])]); // one request only
    t.remove(a, &mut out);
    assert!(t.is_empty());
}
