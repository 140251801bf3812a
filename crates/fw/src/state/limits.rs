//! pf's `keep state (max N)`: a rule has at most N states at a time; a packet that would
//! create one more is dropped (pf's PFRES_MAXSTATES). The counts are shared by the workers,
//! one atomic per rule, touched only when a state of a limited rule is created or removed,
//! never per packet. They belong to the rule set that made them: after a reload the new
//! rules count from zero, as pf's do, while states of the old rules give their old counts
//! back as they go.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::rules::RuleSet;

/// The state counts of a rule set's rules with `max`.
#[derive(Debug)]
pub struct RuleLimits {
    /// Per rule: its `max`, 0 without one.
    max: Box<[u32]>,
    cur: Box<[AtomicU32]>,
}

impl RuleLimits {
    /// The limits of `rs`, or `None` if no rule has `max`.
    pub fn of(rs: &RuleSet) -> Option<Arc<RuleLimits>> {
        let max: Box<[u32]> = rs.rules.iter().map(|r| r.max_states.unwrap_or(0)).collect();
        max.iter().any(|&m| m > 0).then(|| {
            let cur = max.iter().map(|_| AtomicU32::new(0)).collect();
            Arc::new(RuleLimits { max, cur })
        })
    }

    /// Whether rule `i` has a `max`.
    #[inline]
    pub fn limits(&self, i: usize) -> bool {
        self.max.get(i).is_some_and(|&m| m > 0)
    }

    /// Counts one more state of rule `i`; false (and nothing counted) if it has its `max`.
    pub fn take(&self, i: usize) -> bool {
        let max = self.max[i];
        self.cur[i].fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| (c < max).then_some(c + 1)).is_ok()
    }

    /// A state of rule `i` is gone.
    pub fn give_back(&self, i: usize) {
        // Never below zero, whatever the caller does.
        let _ = self.cur[i].fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1));
    }

    /// States of rule `i` now.
    pub fn current(&self, i: usize) -> u32 {
        self.cur.get(i).map_or(0, |c| c.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse;
    use std::path::Path;

    #[test]
    fn counts_up_to_max_and_back() {
        let rs = parse("pass in all keep state (max 2)\npass out all\n", Path::new("t.conf"), &|_| None).unwrap();
        let l = RuleLimits::of(&rs).unwrap();
        assert!(l.limits(0) && !l.limits(1) && !l.limits(7));
        assert!(l.take(0) && l.take(0) && !l.take(0));
        assert_eq!(l.current(0), 2);
        l.give_back(0);
        assert!(l.take(0));
        for _ in 0..5 {
            l.give_back(0);
        }
        assert_eq!(l.current(0), 0);
        assert!(RuleLimits::of(&parse("pass all\n", Path::new("t.conf"), &|_| None).unwrap()).is_none());
    }
}
