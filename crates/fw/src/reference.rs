//! The reference evaluator: a plain linear loop over the rules with pf's semantics, written
//! for obviousness. It is the oracle the compiled [`classifier`](crate::classifier) is tested
//! against; the fast path never calls it.
//!
//! pf semantics: rules are evaluated in order; every matching rule becomes the current
//! decision (the **last** match wins), except that a matching `quick` rule decides at once.
//! A packet matching no rule is **passed** without state (pf's implicit default).
//!
//! Tags as pf's `pf_test_rule` keeps them (see `rules/tags.rs`): `tagged` compares the tag
//! the packet carries at that point of the walk, and every matching rule with `tag` retags
//! it, deciding or not; the verdict's tag is the last one set.

use crate::packet::{Af, PacketKey};
use crate::rules::{Action, Rule, RuleSet, StateMode};
pub use crate::verdict::Verdict;

/// Whether `rule` matches `key` ([`Rule::matches`]).
pub fn rule_matches(rs: &RuleSet, rule: &Rule, key: &PacketKey) -> bool {
    rule.matches(rs, key)
}

/// Evaluates the rule set on one packet, pf's way.
pub fn evaluate(rs: &RuleSet, key: &PacketKey) -> Verdict {
    let mut verdict = Verdict::DEFAULT;
    // The packet as the walk sees it: its tag changes at each matching rule with `tag`.
    let mut k = *key;
    let mut tag = 0;
    for (i, rule) in rs.rules.iter().enumerate() {
        if rule_matches(rs, rule, &k) {
            if let Some(t) = rule.tag {
                (k.tag, tag) = (t, t);
            }
            verdict = Verdict::of_rule(rs, i);
            if rule.quick {
                break;
            }
        }
    }
    Verdict { tag, ..verdict }
}

/// A pf state as pf keys it: addresses and ports in the order of the packet that created it,
/// seen from the outside in (`(src, dst)` inbound, `(dst, src)` outbound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PfState {
    af: Af,
    proto: u8,
    key: [(u128, u16); 2],
    /// `if-bound`: the interface it was created on.
    bound: Option<u16>,
    allow_opts: bool,
    /// The tag the creating packet left its pass with (0: none): the tag of the packets the
    /// state passes.
    tag: u8,
}

/// pf's filtering of forwarded packets, written for obviousness: a list of states searched
/// linearly, and the rules evaluated by [`evaluate`]. The oracle of the property tests for
/// [`crate::passes`]. No TCP window tracking and no timeouts: it decides which packets pass,
/// not how long states live.
#[derive(Debug, Default)]
pub struct Pf {
    states: Vec<PfState>,
}

/// The state key of a packet from `src` to `dst` (addresses and ports as the state table
/// keys them, [`crate::state::flow_ports`]) in a pass of direction `dir`.
fn pf_key(src: (u128, u16), dst: (u128, u16), dir: crate::packet::Dir) -> [(u128, u16); 2] {
    match dir {
        crate::packet::Dir::In => [src, dst],
        crate::packet::Dir::Out => [dst, src],
    }
}

/// The ends of `k` as keyed: `(src, dst)`.
fn ends(k: &PacketKey) -> ((u128, u16), (u128, u16)) {
    let (sp, dp) = crate::state::flow_ports(k);
    ((k.src, sp), (k.dst, dp))
}

impl Pf {
    pub fn new() -> Pf {
        Pf::default()
    }

    /// Number of pf states (a forwarded flow usually has two).
    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Filters a packet received as `key` (`dir` In) and routed to interface `out`: the
    /// inbound pass, then the outbound pass. `quoted`: for an ICMP error, the packet it quotes
    /// (whose flow's states it passes under). `Err` names the pass's reason to drop.
    pub fn forward(
        &mut self,
        rs: &RuleSet,
        key: &PacketKey,
        quoted: Option<&PacketKey>,
        out: u16,
    ) -> Result<(), crate::passes::Drop> {
        let tag = self.pass(rs, key, quoted)?;
        let out_key = PacketKey { dir: crate::packet::Dir::Out, iface: out, tag, ..*key };
        self.pass(rs, &out_key, quoted).map(|_| ())
    }

    /// One pass of pf_test: the state of the pass, else the rules. `Ok`: the tag the packet
    /// leaves the pass with.
    fn pass(
        &mut self,
        rs: &RuleSet,
        key: &PacketKey,
        quoted: Option<&PacketKey>,
    ) -> Result<u8, crate::passes::Drop> {
        use crate::passes::Drop;
        if rs.skip.contains(&key.iface) {
            return Ok(key.tag);
        }
        let icmp_error = crate::state::is_icmp_error(key.proto, key.src_port);
        // An error is looked up as the packet it quotes, travelling the other way.
        let (af, proto_, sk) = match quoted.filter(|_| icmp_error) {
            Some(q) => {
                let (qs, qd) = ends(q);
                (q.af, q.proto, pf_key(qd, qs, key.dir))
            }
            None => {
                let (s, d) = ends(key);
                (key.af, key.proto, pf_key(s, d, key.dir))
            }
        };
        let found = self.states.iter().find(|s| {
            s.af == af && s.proto == proto_ && s.key == sk && s.bound.is_none_or(|b| b == key.iface)
        });
        if let Some(s) = found {
            let tag = if s.tag != 0 { s.tag } else { key.tag };
            return if key.ip_opts && !s.allow_opts { Err(Drop::IpOptions) } else { Ok(tag) };
        }
        let v = evaluate(rs, key);
        if v.action == Action::Block {
            return Err(Drop::Blocked);
        }
        let allow_opts = v.rule.is_some_and(|r| rs.rules[r].allow_opts);
        if key.ip_opts && !allow_opts {
            return Err(Drop::IpOptions);
        }
        let tag = if v.tag != 0 { v.tag } else { key.tag };
        if v.keep_state != StateMode::None && !icmp_error {
            let policy = v.rule.and_then(|r| rs.rules[r].state_policy).unwrap_or(rs.state_policy);
            let bound = (policy == crate::rules::StatePolicy::IfBound).then_some(key.iface);
            self.states.push(PfState { af, proto: proto_, key: sk, bound, allow_opts, tag });
        }
        Ok(tag)
    }
}
