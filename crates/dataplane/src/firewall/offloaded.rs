//! Rule counters for the flows the kernel's fast path forwards (`crate::offload`): what a
//! flow's packets are counted under when it is offered, and its offloaded packets credited
//! there when the control plane reads them back from the flow's entry.
//!
//! A packet is counted as the pipeline counts it: under its state's rule when the state
//! settles both of its passes, else (no state) under its `in` rule and, if the set has `out`
//! rules, its `out` rule, or pf's default. A flow counted any other way (a state that leaves
//! a pass to the rules, a rule that would keep state) is not offered.

use fw::packet::{Dir, PacketKey};

use super::Firewall;
use super::keys;

/// A pass that counts nothing (`set skip on` its interface).
const NO_RULE: u32 = u32::MAX;

/// The rule set a late credit's rules belong to, and where their counts went when the worker
/// adopted the next one.
pub(super) struct PreviousRules {
    generation: u64,
    /// For each of its rules, the same rule's index now; `None`: the same rules (a table
    /// changed, not the rules).
    map: Option<Box<[Option<usize>]>>,
}

impl PreviousRules {
    pub(super) fn same(generation: u64) -> PreviousRules {
        PreviousRules { generation, map: None }
    }

    /// From `set keepcounters`' map (each new rule's index in the old set, `new_to_old`).
    pub(super) fn mapped(generation: u64, new_to_old: &[Option<usize>], old_len: usize) -> Self {
        let mut map = vec![None; old_len];
        for (new, old) in new_to_old.iter().enumerate() {
            if let Some(slot) = old.and_then(|o| map.get_mut(o)) {
                *slot = Some(new);
            }
        }
        PreviousRules { generation, map: Some(map.into_boxed_slice()) }
    }

    fn index(&self, rule: usize) -> Option<usize> {
        match &self.map {
            None => Some(rule),
            Some(m) => m.get(rule).copied().flatten(),
        }
    }
}

/// A flow as the fast path takes it over, from the frame the pipeline sent.
pub struct OfferedFlow<'a> {
    /// The frame as it left (untagged), with the flow's addresses and ports as it arrived.
    pub frame: &'a [u8],
    pub v4: bool,
    pub in_port: u16,
    pub out_port: u16,
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
}

impl Firewall {
    /// The rules each packet of `flow` is counted under, and the generation of the rule set
    /// they are in; `None` when the flow's packets are not counted in the simple way the
    /// fast path can mirror (see the module's documentation).
    pub fn counted_under(&self, flow: &OfferedFlow) -> Option<([u32; 2], u64)> {
        let mut key = PacketKey::ZERO;
        let mut tcp = None;
        keys::extract(flow.frame, 14, flow.v4, flow.in_port, &mut key, &mut tcp);
        key = PacketKey {
            dir: Dir::In,
            src: flow.src,
            dst: flow.dst,
            src_port: flow.sport,
            dst_port: flow.dport,
            ..key
        };
        let rules = if self.states.is_empty() {
            self.stateless_rules(&key, flow.out_port)?
        } else if let Some((id, from_a)) = self.states.peek(&key) {
            if !self.states.settled(id, from_a) {
                return None;
            }
            [self.states.rule_of(id)?, NO_RULE]
        } else {
            self.stateless_rules(&key, flow.out_port)?
        };
        Some((rules, self.adopted))
    }

    /// The `in` and `out` rules that pass `key` leaving by `out` without keeping state.
    fn stateless_rules(&self, key: &PacketKey, out: u16) -> Option<[u32; 2]> {
        let rules = &self.cur.rules;
        let default = rules.rule_count() as u32;
        let skipped = |iface: u16| rules.rules.skip.contains(&iface);
        let mut key = *key;
        let mut counted = [NO_RULE; 2];
        if !skipped(key.iface) {
            self.fill_route_bits(&mut key);
            let v = rules.classifier.classify(&key);
            if fw::passes::stateless(&rules.rules, &v, &key) != Some(Ok(())) {
                return None;
            }
            counted[0] = v.rule.map_or(default, |r| r as u32);
            key.tag = v.tag;
        }
        if rules.has_out && !skipped(out) {
            let mut out_key = PacketKey { dir: Dir::Out, iface: out, ..key };
            self.fill_route_bits(&mut out_key);
            let v = rules.classifier.classify(&out_key);
            if fw::passes::stateless(&rules.rules, &v, &out_key) != Some(Ok(())) {
                return None;
            }
            counted[1] = v.rule.map_or(default, |r| r as u32);
        }
        Some(counted)
    }

    /// Adds what the fast path forwarded of flows counted under `rules` (of the rule set of
    /// `generation`) to those rules' counters. Counts of the set adopted before this one go
    /// where its counts went (the same rules, or `set keepcounters`); of older sets, or of a
    /// set whose counters a reload reset, nowhere, as pf's own would have been.
    pub fn credit_offloaded(&mut self, rules: [u32; 2], generation: u64, packets: u64, bytes: u64) {
        for rule in rules.into_iter().filter(|&r| r != NO_RULE) {
            let rule = rule as usize;
            let at = if generation == self.adopted {
                Some(rule)
            } else {
                self.previous
                    .as_ref()
                    .filter(|p| p.generation == generation)
                    .and_then(|p| p.index(rule))
            };
            if let Some(i) = at {
                self.cur.add_counts(i, packets, bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::firewall::{CompiledRules, RulesSlot};

    fn firewall(text: &str) -> Firewall {
        let ifaces = |n: &str| ["lan", "wan"].iter().position(|i| *i == n).map(|i| i as u16);
        let rules = CompiledRules::parse(text, Path::new("t.conf"), &ifaces).unwrap();
        Firewall::new(RulesSlot::new(Arc::new(rules)), 3)
    }

    /// UDP 198.18.0.2:1234 -> 198.19.0.2:9 as it leaves, untagged.
    fn frame() -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa, 0x08, 0x00];
        f.extend_from_slice(&[
            0x45, 0, 0, 28, 0, 1, 0x40, 0, 63, 17, 0, 0, 198, 18, 0, 2, 198, 19, 0, 2,
        ]);
        f.extend_from_slice(&[0x04, 0xd2, 0, 9, 0, 8, 0, 0]);
        f
    }

    fn offered(frame: &[u8]) -> OfferedFlow<'_> {
        let a = |b: [u8; 4]| u128::from(u32::from_be_bytes(b));
        OfferedFlow {
            frame,
            v4: true,
            in_port: 0,
            out_port: 1,
            src: a([198, 18, 0, 2]),
            dst: a([198, 19, 0, 2]),
            sport: 1234,
            dport: 9,
        }
    }

    #[test]
    fn a_stateless_flow_counts_under_its_in_and_out_rules() {
        let f = frame();
        let fw = firewall("pass all no state\npass in on lan proto udp no state\n");
        assert_eq!(fw.counted_under(&offered(&f)), Some(([1, NO_RULE], fw.adopted)), "no out pass");
        let fw = firewall(
            "pass all no state\nblock out on wan proto tcp\npass out on wan proto udp no state\n",
        );
        assert_eq!(fw.counted_under(&offered(&f)).unwrap().0, [0, 2]);
        let fw = firewall("block out on lan all\npass in on wan all no state\n");
        assert_eq!(fw.counted_under(&offered(&f)).unwrap().0, [2, 2], "both by pf's default");
        let fw = firewall("pass all no state\npass in on lan proto udp keep state\n");
        assert_eq!(fw.counted_under(&offered(&f)), None, "the rules would keep state");
    }

    #[test]
    fn credits_go_to_the_rules_of_their_set() {
        let f = frame();
        let mut fw = firewall("pass all no state\npass in on lan proto udp no state\n");
        let (rules, generation) = fw.counted_under(&offered(&f)).unwrap();
        fw.credit_offloaded(rules, generation, 10, 280);
        fw.credit_offloaded(rules, generation + 5, 7, 196);
        let rows = fw.stats().rules().snapshot();
        assert_eq!((rows[1].packets, rows[1].bytes), (10, 280), "an unknown set's credit dropped");
        fw.previous = Some(PreviousRules::same(generation + 5));
        fw.credit_offloaded(rules, generation + 5, 7, 196);
        assert_eq!(fw.stats().rules().snapshot()[1].packets, 17, "the set before: same rules");
    }

    #[test]
    fn keepcounters_maps_the_old_rules_to_the_new() {
        // New rule 0 was old 2, new 1 is new, new 2 was old 0; old 1 went away.
        let p = PreviousRules::mapped(4, &[Some(2), None, Some(0)], 3);
        assert_eq!(
            [p.index(0), p.index(1), p.index(2), p.index(9)],
            [Some(2), None, Some(0), None]
        );
    }
}
