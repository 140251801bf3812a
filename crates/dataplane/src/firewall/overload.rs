//! pf's `overload <table> [flush [global]]`: a source that a rule refused for `max-src-conn`
//! or `max-src-conn-rate` is added to the table, and with `flush` its states are killed.
//!
//! A worker that refuses such a source queues it in the rule set's limits
//! ([`fw::state::RuleLimits`], which the workers share); nothing else happens on the packet
//! path. Off it, [`RulesSlot::apply_overloads`] takes the queued sources, adds them to a copy
//! of the rule set's tables, compiles the classifier again and publishes the result like a
//! reload, with the same limits and source nodes (the counts go on) and a flush for each
//! worker. pf does the same from a task queue, outside the packet path. A thread per slot
//! ([`spawn_overloader`]), started by a worker's first batch under rules with `overload`,
//! calls it whenever sources are queued; it ends with the slot.
//!
//! A flush is a walk of the worker's state table, [`FLUSH_SLOTS_PER_BATCH`] slots per batch
//! (as operators' `kill` requests are), removing the states the source opened (of the rule,
//! or all of them with `flush global`).
//!
//! The table's new entries last until the rule file is loaded again, as in pf, where loading
//! the rules defines the tables anew (addresses to keep go in the table's file);
//! `linerate table` (`tables.rs`) changes tables the same way.

use std::sync::{Arc, Weak};
use std::time::Duration;

use fw::packet::Af;
use fw::rules::{Flush, Prefix, TableEntry};
use fw::state::OverloadEvent;

use super::{CompiledRules, Firewall, RulesSlot};

/// State slots a worker's flush walks per batch.
pub const FLUSH_SLOTS_PER_BATCH: usize = 1024;

/// The most entries `overload` fills a table to (pf's default `set limit table-entries`):
/// sources beyond it are not added (their states are still flushed), so that a flood of
/// refused sources cannot grow the rule set, and its compile time, without bound.
pub const MAX_OVERLOAD_TABLE_ENTRIES: usize = 200_000;

/// How long the overload thread waits for sources before it looks at the slot again.
const OVERLOAD_POLL: Duration = Duration::from_millis(250);

/// One source's states to kill, for a worker: its walk so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlushJob {
    pub af: Af,
    pub addr: u128,
    /// Only the states of this rule (`flush`), else all (`flush global`).
    pub rule: Option<u32>,
    /// The next slot to look at.
    pub cursor: usize,
}

impl FlushJob {
    fn of(ev: &OverloadEvent) -> Option<FlushJob> {
        let rule = match ev.flush {
            Flush::None => return None,
            Flush::Rule => Some(ev.rule),
            Flush::Global => None,
        };
        Some(FlushJob { af: ev.af, addr: ev.addr, rule, cursor: 0 })
    }
}

impl CompiledRules {
    /// This set with the sources of `events` added to their tables, compiled, sharing this
    /// set's limits and source nodes. `None` if every source was in its table already.
    fn overloaded(
        &self,
        events: &[OverloadEvent],
    ) -> Option<Result<CompiledRules, fw::classifier::BuildError>> {
        let mut rules = self.rules.clone();
        let mut added = false;
        for ev in events {
            let Some(table) = rules.tables.get_mut(ev.table) else { continue };
            let prefix = Prefix { af: ev.af, addr: ev.addr, len: Prefix::bits(ev.af) };
            if table.contains(ev.af, ev.addr) || table.entries.len() >= MAX_OVERLOAD_TABLE_ENTRIES {
                continue;
            }
            // A host entry: the most specific one, so it wins over any negated prefix.
            table.entries.retain(|e| e.prefix != prefix);
            table.entries.push(TableEntry { negated: false, prefix });
            added = true;
        }
        added.then(|| self.derived(rules))
    }
}

impl RulesSlot {
    /// Applies the overloads the current set's rules have queued: the sources added to
    /// their tables (a new set published, see the module's doc) and their flushes handed to
    /// the workers. Returns how many sources were taken. Called by the slot's overload
    /// thread; tests call it themselves.
    pub fn apply_overloads(&self) -> usize {
        // One at a time: the thread and a test may both call it.
        let _one = self.overloading.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.current();
        let Some(limits) = cur.limits.as_ref() else { return 0 };
        let events = limits.take_overloads();
        if events.is_empty() {
            return 0;
        }
        let flushes: Vec<FlushJob> = events.iter().filter_map(FlushJob::of).collect();
        match cur.overloaded(&events) {
            Some(Ok(rules)) => {
                // The same limit of states: publishing reserves nothing. A reload meanwhile
                // defined the tables anew: the sources are not added to its tables (their
                // indices were the old set's), their states are still flushed.
                match self.publish_derived(&cur, Arc::new(rules), flushes.clone()) {
                    Ok(true) => {}
                    Ok(false) => self.publish_flushes(flushes),
                    Err(e) => eprintln!("linerate: warning: overload: {e}"),
                }
            }
            Some(Err(e)) => eprintln!(
                "linerate: warning: overload: the rules with the new table entries do not compile: {e}"
            ),
            None => self.publish_flushes(flushes),
        }
        events.len()
    }
}

/// Starts `slot`'s overload thread, which applies overloads as they are queued and ends
/// when the slot goes.
pub(super) fn spawn_overloader(slot: Weak<RulesSlot>) {
    let spawned = std::thread::Builder::new().name("lr-overload".into()).spawn(move || {
        loop {
            let Some(s) = slot.upgrade() else { return };
            let cur = s.current();
            drop(s);
            match cur.limits.as_ref() {
                Some(l) => l.wait_overloads(OVERLOAD_POLL),
                None => std::thread::sleep(OVERLOAD_POLL),
            }
            drop(cur);
            let Some(s) = slot.upgrade() else { return };
            s.apply_overloads();
        }
    });
    if let Err(e) = spawned {
        eprintln!("linerate: warning: overload thread: {e}: `overload` tables will not be updated");
    }
}

impl Firewall {
    /// Walks the next stretch of the pending flushes (once per batch while there are some,
    /// from [`Firewall::adopt_or_flush`]).
    #[cold]
    #[inline(never)]
    pub(super) fn flush_step(&mut self) {
        let Some(job) = self.flushes.first_mut() else { return };
        let end = job.cursor + FLUSH_SLOTS_PER_BATCH;
        self.states.flush_source(job.cursor..end, job.af, job.addr, job.rule);
        job.cursor = end;
        if end >= self.states.slot_count() {
            self.flushes.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn ev(addr: u128, flush: Flush) -> OverloadEvent {
        OverloadEvent { table: 1, af: Af::Inet, addr, flush, rule: 3 }
    }

    #[test]
    fn a_source_joins_its_table_once_and_the_rules_stay_the_same() {
        let text = "table <a> { 10.0.0.0/8 }\ntable <bad> { 192.0.2.0/24, !192.0.2.7 }\nblock quick from <bad>\n\
                    pass in proto tcp keep state (max-src-conn 1, overload <bad>)\n";
        let rules = CompiledRules::parse(text, Path::new("o.conf"), &|_| None).unwrap();
        let (x, inside, excluded) = (0xc633_6401, 0xc000_0201, 0xc000_0207);
        // Already a member: nothing to compile.
        assert!(rules.overloaded(&[ev(inside, Flush::None)]).is_none());
        let new = rules
            .overloaded(&[ev(x, Flush::None), ev(x, Flush::Rule), ev(excluded, Flush::None)])
            .unwrap()
            .unwrap();
        let bad = &new.rules.tables[1];
        assert!(
            bad.contains(Af::Inet, x)
                && bad.contains(Af::Inet, excluded)
                && bad.contains(Af::Inet, inside)
        );
        // The negated host entry was replaced by the plain one: the /24, x and .7.
        assert_eq!(bad.entries.len(), 3);
        assert_eq!(new.rules.tables[0], rules.rules.tables[0]);
        assert!(rules.same_rules(&new) && new.overloads());
        let fresh = CompiledRules::parse(text, Path::new("o.conf"), &|_| None).unwrap();
        assert!(!rules.same_rules(&fresh));
    }

    #[test]
    fn flush_jobs_as_the_rule_says() {
        assert_eq!(FlushJob::of(&ev(1, Flush::None)), None);
        assert_eq!(FlushJob::of(&ev(1, Flush::Rule)).map(|j| j.rule), Some(Some(3)));
        assert_eq!(
            FlushJob::of(&ev(1, Flush::Global)).map(|j| (j.rule, j.cursor)),
            Some((None, 0))
        );
    }
}
