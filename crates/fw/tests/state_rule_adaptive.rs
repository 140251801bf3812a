//! pf's per-rule adaptive timeouts (pf_state_expires): a rule with `keep state
//! (adaptive.start N, adaptive.end M)`, or with `max` (pfctl gives it 60% and 120% of its
//! `max`), scales its own states' timeouts by its own count, shared by every worker's
//! table, and the rule set's scaling does not apply to them.

use std::path::Path;
use std::sync::Arc;

use fw::classifier::Classifier;
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::passes::{Drop, Passes};
use fw::rules::{RuleSet, parse};
use fw::state::{FlowV4, RuleLimits, StateLookup, StateTable};

fn rules(text: &str) -> RuleSet {
    parse(text, Path::new("adaptive.conf"), &|n| {
        ["a", "b"].iter().position(|i| *i == n).map(|i| i as u16)
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A UDP packet from host 10.0.0.`src` to port `dport`.
fn udp(src: u8, dport: u16) -> PacketKey {
    PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        proto: proto::UDP,
        src: u128::from(0x0a00_0000u32 | u32::from(src)),
        dst: 0xc000_0201,
        src_port: 4000,
        dst_port: dport,
        len: 60,
        ..PacketKey::ZERO
    }
}

struct Setup {
    rs: RuleSet,
    cl: Classifier,
    limits: Arc<RuleLimits>,
}

impl Setup {
    fn new(text: &str) -> Setup {
        let rs = rules(text);
        let cl = Classifier::build(&rs).unwrap();
        let limits = RuleLimits::of(&rs).expect("a rule with adaptive timeouts is counted");
        Setup { rs, cl, limits }
    }

    fn table(&self) -> StateTable {
        StateTable::new(100, self.rs.timeouts, 1)
    }

    /// The in pass of `key` at `now`: its state's id if it made one.
    fn pass(&self, t: &mut StateTable, key: &PacketKey, now: u32) -> Result<(), Drop> {
        let mut p = Passes {
            rules: &self.rs,
            classifier: &self.cl,
            cache: None,
            states: t,
            now,
            limits: Some(&self.limits),
        };
        p.inbound(key, None, None).0.map(|_| ())
    }
}

/// The deadline `show states` gives the state of `key`'s flow (scaled as it stands now).
fn expire_of(t: &StateTable, key: &PacketKey) -> u32 {
    t.info(t.debug_id(key).expect("a state")).unwrap().expire
}

#[test]
fn parsed_as_pfctl_does() {
    let r = |text: &str| rules(text).rules[0].state_adaptive;
    assert_eq!(r("pass in keep state (adaptive.start 10, adaptive.end 20)"), Some((10, 20)));
    assert_eq!(r("pass in keep state (max 100)"), Some((60, 120)), "60% and 120% of max");
    assert_eq!(
        r("pass in keep state (max 100, adaptive.end 500)"),
        None,
        "written: start 0, the rule set's apply"
    );
    assert_eq!(r("pass in keep state (max 5)"), None, "60% of 5 is 0 in pf's integers");
    assert_eq!(
        r("pass in keep state (adaptive.start 5)"),
        Some((5, 0)),
        "its own, and no scaling at all (end 0)"
    );
    assert_eq!(r("pass in keep state"), None);
}

#[test]
fn a_rule_scales_by_its_own_count_across_tables() {
    // Rule 0 has its own scaling from 2 to 6 states; rule 1 falls under the rule set's,
    // which would kill every state from 2 entries on.
    let s = Setup::new(
        "set timeout { udp.first 60, adaptive.start 1, adaptive.end 2 }\npass in proto udp to port 53 keep state (adaptive.start 2, adaptive.end 6)\npass in proto udp to port 54 keep state\n",
    );
    let mut t = [s.table(), s.table()];
    for src in 1..=4u8 {
        s.pass(&mut t[usize::from(src % 2)], &udp(src, 53), 0).unwrap();
    }
    assert_eq!(s.limits.current(0), 4, "the count is the rule's, over both tables");
    // 4 states: 60 * (6 - 4) / (6 - 2) = 30; each table holds 2 entries, at the rule set's
    // end, but these states are the rule's.
    assert_eq!(expire_of(&t[0], &udp(2, 53)), 30);
    assert_eq!(expire_of(&t[1], &udp(1, 53)), 30);
    // A state of rule 1 in a table at the rule set's end is dead at once.
    s.pass(&mut t[0], &udp(9, 54), 0).unwrap();
    assert_eq!(expire_of(&t[0], &udp(9, 54)), 0, "dead: 3 entries, the rule set's end is 2");
    // Two more states of rule 0 reach its end: every one of them is dead.
    s.pass(&mut t[1], &udp(5, 53), 0).unwrap();
    s.pass(&mut t[1], &udp(6, 53), 0).unwrap();
    assert_eq!(s.limits.current(0), 6);
    // The first table's sweep removes rule 1's state and the first of rule 0's it meets;
    // the other five then keep 60 * 1 / 4 = 15 s.
    assert_eq!((t[0].expire(0, 100), t[1].expire(0, 100)), (2, 0));
    assert_eq!(expire_of(&t[1], &udp(5, 53)), 15);
    assert_eq!(s.limits.current(0), 5);
}

#[test]
fn max_gives_its_rule_scaling() {
    let s =
        Setup::new("set timeout udp.first 60\npass in proto udp to port 53 keep state (max 10)\n");
    let mut t = s.table();
    for src in 1..=8u8 {
        s.pass(&mut t, &udp(src, 53), 0).unwrap();
    }
    // 8 of max 10: scaled from 6 to 12, 60 * (12 - 8) / 6 = 40. The rule set's scaling
    // (60000 states) is far off: only the rule's own cuts the deadline.
    assert_eq!(expire_of(&t, &udp(1, 53)), 40);
    assert!(matches!(t.lookup(&udp(1, 53), None, 39), StateLookup::Hit { .. }));
    assert_eq!(t.lookup(&udp(2, 53), None, 40), StateLookup::Miss);
    // The fast lookup of IPv4 flows judges the same way (7 states now: 60 * 5 / 6 = 50).
    let f = |src: u8| FlowV4::new(proto::UDP, 0x0a00_0000 | u32::from(src), 4000, 0xc000_0201, 53);
    assert!(t.lookup_v4(&f(3), t.hash_v4(&f(3)), None, None, 49).is_some());
    assert!(t.lookup_v4(&f(4), t.hash_v4(&f(4)), None, None, 50).is_none());
    // And the sweep: at 50, each removal lengthens the others' lives (6 states: 60 s).
    assert_eq!(t.expire(50, 100), 0, "6 states left: 60 * 6 / 6 = 60 s");
}
