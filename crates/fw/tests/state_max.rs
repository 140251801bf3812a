//! pf's `keep state (max N)`: a rule holds at most N states; the next flow it would keep
//! state for is dropped, and a state that goes (expiry, kill) makes room again. Counts are
//! per rule set, shared by every worker's table.

use std::path::Path;
use std::sync::Arc;

use fw::classifier::Classifier;
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::passes::{Drop, Passes};
use fw::rules::{RuleSet, parse};
use fw::state::{RuleLimits, StateTable, Timeouts};

fn rules(text: &str) -> RuleSet {
    parse(text, Path::new("max.conf"), &|n| {
        ["a", "b"].iter().position(|i| *i == n).map(|i| i as u16)
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A UDP packet from host `src` (10.0.0.src) on interface a.
fn udp(src: u8) -> PacketKey {
    PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        proto: proto::UDP,
        src: u128::from(0x0a00_0000u32 | u32::from(src)),
        dst: 0xc000_0201,
        src_port: 4000,
        dst_port: 53,
        len: 60,
        ..PacketKey::ZERO
    }
}

/// The in pass of `key` through `table` with the rules' limits.
fn pass_in(
    rs: &RuleSet,
    cl: &Classifier,
    limits: &Arc<RuleLimits>,
    table: &mut StateTable,
    key: &PacketKey,
    now: u32,
) -> Result<(), Drop> {
    let mut p =
        Passes { rules: rs, classifier: cl, cache: None, states: table, now, limits: Some(limits) };
    p.inbound(key, None, None).0.map(|_| ())
}

#[test]
fn max_parses_with_other_state_options() {
    let rs = rules(
        "pass in proto tcp keep state (max 100, sloppy)\npass in keep state (if-bound, max 1)\npass out\n",
    );
    assert_eq!(
        rs.rules.iter().map(|r| r.max_states).collect::<Vec<_>>(),
        [Some(100), Some(1), None]
    );
    for (text, want) in [
        ("pass in keep state (max 0)", "max.conf:1:25: max needs at least 1 state"),
        ("pass in keep state (max)", "max.conf:1:24: expected a number of states, found \")\""),
        (
            "pass in keep state (max 4294967296)",
            "max.conf:1:25: a number of states 4294967296 out of range (at most 4294967295)",
        ),
        ("pass in max 10", "max.conf:1:9: `max` is not supported by linerate"),
    ] {
        let e = parse(text, Path::new("max.conf"), &|_| None).expect_err(text).to_string();
        assert!(e.starts_with(want), "{text}: {e}");
    }
}

#[test]
fn a_rule_holds_at_most_max_states_across_tables() {
    let rs = rules(
        "block all\npass in on a proto udp keep state (max 3)\npass in on a proto tcp keep state\n",
    );
    let cl = Classifier::build(&rs).unwrap();
    let limits = RuleLimits::of(&rs).unwrap();
    // Two workers' tables share the rule set's counts.
    let mut t = [
        StateTable::new(100, Timeouts::default(), 1),
        StateTable::new(100, Timeouts::default(), 2),
    ];
    let mut results = Vec::new();
    for src in 1..=5u8 {
        results.push(pass_in(&rs, &cl, &limits, &mut t[usize::from(src % 2)], &udp(src), 1));
    }
    assert_eq!(results, [Ok(()), Ok(()), Ok(()), Err(Drop::RuleMax), Err(Drop::RuleMax)]);
    assert_eq!(limits.current(1), 3);
    // The same flow again is its state's: the rules (and the limit) are not asked.
    assert!(matches!(t[1].lookup(&udp(1), None, 1), fw::state::StateLookup::Hit { .. }));
    // Another rule is not limited.
    let tcp = PacketKey { proto: proto::TCP, tcp_flags: 0x02, ..udp(9) };
    assert_eq!(pass_in(&rs, &cl, &limits, &mut t[0], &tcp, 1), Ok(()));
    // A state killed gives its count back.
    let id = (0..100).map(fw::state::StateId).find(|&id| t[1].rule_of(id) == Some(1)).unwrap();
    assert!(t[1].remove(id));
    assert_eq!(limits.current(1), 2);
    assert_eq!(pass_in(&rs, &cl, &limits, &mut t[0], &udp(4), 1), Ok(()));
    assert_eq!(pass_in(&rs, &cl, &limits, &mut t[0], &udp(5), 1), Err(Drop::RuleMax));
    // Expired states go in the sweep, and their counts with them.
    let later = 1 + Timeouts::default().udp_first + 1;
    for table in &mut t {
        table.expire(later, 1000);
        assert_eq!(table.limited_entries(), 0);
    }
    assert_eq!(limits.current(1), 0);
    assert_eq!(pass_in(&rs, &cl, &limits, &mut t[0], &udp(5), later), Ok(()));
    assert_eq!(limits.current(1), 1);
}

/// After a reload the new rules count from zero; the old rules' states give back the old
/// counts, never the new ones.
#[test]
fn a_reload_starts_new_counts() {
    let rs = rules("pass in proto udp keep state (max 1)\n");
    let cl = Classifier::build(&rs).unwrap();
    let (old, new) = (RuleLimits::of(&rs).unwrap(), RuleLimits::of(&rs).unwrap());
    let mut t = StateTable::new(100, Timeouts::default(), 1);
    assert_eq!(pass_in(&rs, &cl, &old, &mut t, &udp(1), 1), Ok(()));
    assert_eq!(pass_in(&rs, &cl, &new, &mut t, &udp(2), 1), Ok(()));
    assert_eq!(pass_in(&rs, &cl, &new, &mut t, &udp(3), 1), Err(Drop::RuleMax));
    let later = 1 + Timeouts::default().udp_first + 1;
    t.expire(later, 1000);
    assert_eq!((old.current(0), new.current(0)), (0, 0));
}
