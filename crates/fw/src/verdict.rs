//! What rule evaluation decides for one packet: the same type from the reference evaluator
//! and the compiled classifier, so the two can be compared.

use crate::rules::{Action, RuleSet, StateMode};

/// The outcome of rule evaluation for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Verdict {
    pub action: Action,
    /// Index in [`RuleSet::rules`] of the deciding rule; `None` = no rule matched (default pass).
    pub rule: Option<usize>,
    /// Whether (and how) the deciding rule creates a state; `None` for blocks and the default.
    pub keep_state: StateMode,
    /// The tag the pass leaves on the packet (pf's `tag`: the last matching rule with `tag`
    /// up to the deciding one, whether or not it decides); 0: the pass sets none and the
    /// packet keeps the tag it came with.
    pub tag: u8,
}

impl Verdict {
    /// The verdict when no rule matches: pass, no state.
    pub const DEFAULT: Verdict =
        Verdict { action: Action::Pass, rule: None, keep_state: StateMode::None, tag: 0 };

    /// The verdict of a pass that a translation rule with `pass` decides (`nat pass`, `rdr
    /// pass`, `binat pass`): pf skips the filter rules, the default rule decides, and a state
    /// is kept because a translation applied.
    pub const TRANSLATION_PASS: Verdict =
        Verdict { action: Action::Pass, rule: None, keep_state: StateMode::Keep, tag: 0 };

    /// The verdict decided by rule `i` (without the tag, which earlier rules may set).
    pub fn of_rule(rs: &RuleSet, i: usize) -> Verdict {
        let r = &rs.rules[i];
        Verdict { action: r.action, rule: Some(i), keep_state: r.keep_state, tag: 0 }
    }
}
