//! The reference evaluator: a plain linear loop over the rules with pf's semantics, written
//! for obviousness. It is the oracle the compiled [`classifier`](crate::classifier) is tested
//! against; the fast path never calls it.
//!
//! pf semantics: rules are evaluated in order; every matching rule becomes the current
//! decision (the **last** match wins), except that a matching `quick` rule decides at once.
//! A packet matching no rule is **passed** without state (pf's implicit default).

use crate::packet::{Af, PacketKey, proto};
use crate::rules::{Action, AddrItem, AddrMatch, AddrTarget, Rule, RuleSet, StateMode};

/// The outcome of rule evaluation for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Verdict {
    pub action: Action,
    /// Index in [`RuleSet::rules`] of the deciding rule; `None` = no rule matched (default pass).
    pub rule: Option<usize>,
    /// Whether (and how) the deciding rule creates a state; `None` for blocks and the default.
    pub keep_state: StateMode,
}

impl Verdict {
    /// The verdict when no rule matches: pass, no state.
    pub const DEFAULT: Verdict = Verdict {
        action: Action::Pass,
        rule: None,
        keep_state: StateMode::None,
    };

    /// The verdict decided by rule `i`.
    pub fn of_rule(rs: &RuleSet, i: usize) -> Verdict {
        let r = &rs.rules[i];
        Verdict {
            action: r.action,
            rule: Some(i),
            keep_state: r.keep_state,
        }
    }
}

fn item_matches(rs: &RuleSet, item: &AddrItem, af: Af, addr: u128) -> bool {
    match item.target {
        // An element of one family only ever matches packets of that family.
        AddrTarget::Prefix(p) => p.af == af && (p.contains(af, addr) != item.negated),
        AddrTarget::Table(t) => rs.tables[t].contains(af, addr) != item.negated,
    }
}

fn addr_matches(rs: &RuleSet, m: &AddrMatch, af: Af, addr: u128) -> bool {
    match m {
        AddrMatch::Any => true,
        AddrMatch::List(items) => items.iter().any(|i| item_matches(rs, i, af, addr)),
    }
}

/// Whether `rule` matches `key`.
pub fn rule_matches(rs: &RuleSet, rule: &Rule, key: &PacketKey) -> bool {
    if rule.dir.is_some_and(|d| d != key.dir) {
        return false;
    }
    if let Some(i) = rule.iface
        && (i == key.iface) == rule.iface_neg
    {
        return false;
    }
    if rule.af.is_some_and(|a| a != key.af) {
        return false;
    }
    if !rule.protos.is_empty() && !rule.protos.contains(&key.proto) {
        return false;
    }
    if !addr_matches(rs, &rule.src, key.af, key.src)
        || !addr_matches(rs, &rule.dst, key.af, key.dst)
    {
        return false;
    }
    if !rule.src_ports.matches(key.src_port) || !rule.dst_ports.matches(key.dst_port) {
        return false;
    }
    if rule.icmp_type.is_some_and(|t| u16::from(t) != key.src_port) {
        return false;
    }
    if rule.icmp_code.is_some_and(|c| u16::from(c) != key.dst_port) {
        return false;
    }
    // Flags are only checked on TCP packets, as pf does.
    if let Some((set, mask)) = rule.flags
        && key.proto == proto::TCP
        && key.tcp_flags & mask != set
    {
        return false;
    }
    true
}

/// Evaluates the rule set on one packet, pf's way.
pub fn evaluate(rs: &RuleSet, key: &PacketKey) -> Verdict {
    let mut verdict = Verdict::DEFAULT;
    for (i, rule) in rs.rules.iter().enumerate() {
        if rule_matches(rs, rule, key) {
            verdict = Verdict::of_rule(rs, i);
            if rule.quick {
                break;
            }
        }
    }
    verdict
}
