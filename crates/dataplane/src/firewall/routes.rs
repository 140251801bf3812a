//! `route-to` and `reply-to` (`fw::rules::RouteOpt`) as the firewall answers them: which
//! gateway a packet of a state leaves towards (the forwarder's `forward/route_opts.rs` asks),
//! and keeping each state's option across reloads, as pf's states keep their rule.
//!
//! A state holds its rule's index, which a reload may give to another rule (a rule added
//! above it). pf's state keeps the rule it was made by, so its route stays. When either
//! set has route options, adopting the new set moves each state to the index of the same
//! rule in it (equal but for its line, as `keepcounters` pairs rules), or, when the new set
//! lacks that rule, to an *orphan* index that keeps its option (or to no rule if it had
//! none). Orphans are past any set's rules: counters and logs, bounds-checked, skip them.
//! While orphans are kept, the forwarder's pass runs even for a set without options; a scan
//! of a few slots per batch forgets them once a whole round of the table finds no state of
//! theirs (pf frees a removed rule with its last state).

use std::collections::HashMap;

use fw::packet::PacketKey;
use fw::rules::RouteOpt;
use fw::state::Flow;

use super::compiled::rule_identity;
use super::{CompiledRules, Firewall};

/// The first orphan index; at most [`MAX_ORPHANS`] distinct options are kept.
const ORPHAN_BASE: u32 = u32::MAX - 1 - MAX_ORPHANS as u32;
const MAX_ORPHANS: usize = 256;
/// A state's rule index when its rule is gone and had no option.
const NO_RULE: u32 = u32::MAX;
/// State slots the orphan scan reads per batch.
const SCAN_SLOTS: usize = 256;

/// Where the scan for states of orphans is, and whether its round has found one.
#[derive(Default)]
pub(crate) struct OrphanScan {
    next: usize,
    found: bool,
}

impl Firewall {
    /// Whether some rule has `route-to` or `reply-to`.
    #[inline(always)]
    pub(crate) fn routes(&self) -> bool {
        self.cur.rules.route_opts || !self.orphan_routes.is_empty()
    }

    /// Whether some `out` rule has `route-to` (its first packet is routed after the out pass).
    #[inline(always)]
    pub(crate) fn routes_out(&self) -> bool {
        self.cur.rules.routes_out
    }

    /// Once per batch while [`routes`](Self::routes): a step of the scan that forgets the
    /// orphans when no state holds one.
    pub(crate) fn scan_orphans(&mut self) {
        if self.orphan_routes.is_empty() {
            return;
        }
        let OrphanScan { next, found } = self.orphan_scan;
        let end = (next + SCAN_SLOTS).min(self.states.slot_count());
        let found = found
            || self.states.rules_of_slots(next..end).any(|r| (ORPHAN_BASE..NO_RULE).contains(&r));
        self.orphan_scan = match end == self.states.slot_count() {
            true if !found => {
                self.orphan_routes.clear();
                OrphanScan::default()
            }
            true => OrphanScan::default(),
            false => OrphanScan { next: end, found },
        };
    }

    /// The option of the rule whose state passes the packet of `key`, if it applies to the
    /// packet's side of its flow (`route-to`: sent by the initiator; `reply-to`: by the
    /// responder), as pf routes a state's packets.
    pub(crate) fn route_option(&self, key: &PacketKey) -> Option<RouteOpt> {
        let (id, from_initiator) = self.states.initiator_side(&Flow::of(key), self.now)?;
        let rule = self.states.rule_of(id)?;
        let opt = match rule.checked_sub(ORPHAN_BASE) {
            Some(k) => self.orphan_routes.get(k as usize).copied(),
            None => self.cur.rules.rules.rules.get(rule as usize)?.route,
        };
        opt.filter(|r| r.reply != from_initiator)
    }

    /// Before adopting `new`: each state's rule index moved to its rule in `new`, or to a
    /// orphan (see the module documentation).
    #[cold]
    pub(super) fn carry_routes(&mut self, new: &CompiledRules) {
        let mut news: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, r) in new.rules.rules.iter().enumerate().rev() {
            news.entry(rule_identity(r)).or_default().push(i as u32);
        }
        let cur = std::sync::Arc::clone(&self.cur);
        let map: Vec<u32> = cur
            .rules
            .rules
            .rules
            .iter()
            .map(|r| match news.get_mut(&rule_identity(r)).and_then(Vec::pop) {
                Some(j) => j,
                None => r.route.map_or(NO_RULE, |opt| self.orphan(opt)),
            })
            .collect();
        // An index past the old set (a reload without the options left it there, its rule
        // gone) names no rule; a orphan stays one.
        self.states.map_rules(|r| {
            map.get(r as usize).copied().unwrap_or(if r >= ORPHAN_BASE { r } else { NO_RULE })
        });
        // States scanned before may hold the new orphans: a new round.
        self.orphan_scan = OrphanScan::default();
    }

    /// The orphan index keeping `opt` (no rule once [`MAX_ORPHANS`] are kept).
    fn orphan(&mut self, opt: RouteOpt) -> u32 {
        let k = match self.orphan_routes.iter().position(|g| *g == opt) {
            Some(k) => k,
            None if self.orphan_routes.len() < MAX_ORPHANS => {
                self.orphan_routes.push(opt);
                self.orphan_routes.len() - 1
            }
            None => return NO_RULE,
        };
        ORPHAN_BASE + k as u32
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use fw::packet::{Af, proto};

    use super::*;
    use crate::firewall::RulesSlot;

    fn compile(text: &str) -> CompiledRules {
        let ifaces = |n: &str| ["lan", "wan"].iter().position(|i| *i == n).map(|i| i as u16);
        CompiledRules::parse(text, Path::new("t.conf"), &ifaces).unwrap()
    }

    /// A state of a removed `route-to` rule keeps its route through a orphan, and the orphan
    /// is forgotten by the first round of the scan after the state is gone.
    #[test]
    fn orphans_live_as_long_as_their_states() {
        let with = "pass all\npass in on lan route-to (wan 192.0.2.1) inet proto udp keep state\n";
        let mut fw = Firewall::new(RulesSlot::new(Arc::new(compile(with))), 7);
        let key = PacketKey {
            af: Af::Inet,
            proto: proto::UDP,
            src: 0x0a00_0002,
            dst: 0xcb00_7105,
            src_port: 5000,
            dst_port: 53,
            ..PacketKey::ZERO
        };
        let id = fw.states.insert(&key, 1, fw.now, None).unwrap();
        let opt = RouteOpt { reply: false, af: Af::Inet, gateway: 0xc000_0201, port: Some(1) };
        assert_eq!(fw.route_option(&key), Some(opt));
        fw.carry_routes(&compile("pass all\npass in on lan inet proto udp keep state\n"));
        fw.cur = Arc::new(super::super::RuleCounters::new(Arc::new(compile("pass all\n"))));
        assert!(fw.routes(), "a orphan keeps the pass on");
        assert_eq!(fw.route_option(&key), Some(opt), "the old state's route");
        fw.scan_orphans();
        assert!(fw.routes(), "its state is there");
        assert!(fw.states.remove(id));
        fw.scan_orphans();
        assert!(!fw.routes(), "forgotten with its last state");
        assert_eq!(fw.route_option(&key), None);
    }
}
