//! pf's `keep state (max N)`: a rule has at most N states at a time; a packet that would
//! create one more is dropped (pf's PFRES_MAXSTATES). The counts are shared by the workers,
//! one atomic per rule, touched only when a state of a limited rule is created or removed,
//! never per packet. They belong to the rule set that made them: after a reload the new
//! rules count from zero, as pf's do, while states of the old rules give their old counts
//! back as they go.
//!
//! The same object holds the rule set's source nodes (`sources.rs`: `max-src-conn`,
//! `max-src-conn-rate`, `max-src-states`, `max-src-nodes`), and what a state holds of both
//! is a [`Held`], kept by the worker's table beside the entry and released with it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::sources::{ConnRefusal, SourceKey, Sources, SrcRefusal};
use crate::packet::{Af, PacketKey};
use crate::rules::{Flush, RuleSet, SrcTrack};

/// The state counts of a rule set's rules with `max`, and the source nodes of its rules
/// with source tracking (`sources.rs`).
#[derive(Debug)]
pub struct RuleLimits {
    /// Per rule: its `max`, 0 without one.
    max: Box<[u32]>,
    /// Per rule: its own adaptive timeouts ([`Rule::state_adaptive`](crate::rules::Rule::state_adaptive)),
    /// scaled by its count in `cur`.
    adaptive: Box<[Option<(u32, u32)>]>,
    /// Per rule with `max` or its own adaptive timeouts: its states now (pf's
    /// `states_cur`).
    cur: Box<[AtomicU32]>,
    /// Per rule: its source tracking.
    track: Box<[Option<SrcTrack>]>,
    sources: Sources,
    /// Sources to add to `overload` tables, for whoever applies them ([`Self::wait_overloads`]).
    overloads: Mutex<Vec<OverloadEvent>>,
    overloaded: Condvar,
    /// Events not queued because the queue was full.
    overloads_lost: AtomicU64,
}

/// Pending events at most: a flood of refused sources waits for the table updates rather
/// than growing the queue.
const MAX_PENDING_OVERLOADS: usize = 4096;

/// A source refused by a rule with `overload <table>`: to be added to the table, and its
/// states flushed as the rule says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverloadEvent {
    pub table: usize,
    pub af: Af,
    pub addr: u128,
    pub flush: Flush,
    /// The rule that refused it (`flush` without `global` kills its states only).
    pub rule: u32,
}

/// What a state of a limited rule holds, given back when it goes: a count of the rule's
/// `max`, a count in a source node and whether that counts a connection too.
#[derive(Debug)]
pub struct Held {
    limits: Arc<RuleLimits>,
    rule: u32,
    /// Counted in the rule's `cur`.
    max: bool,
    source: Option<SourceKey>,
    established: bool,
}

/// Why a limited rule refused a new state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitRefusal {
    /// `max N`.
    Max,
    /// Source tracking.
    Source(SrcRefusal),
}

impl RuleLimits {
    /// The limits of `rs`, or `None` if no rule has `max`, source tracking or adaptive
    /// timeouts of its own.
    pub fn of(rs: &RuleSet) -> Option<Arc<RuleLimits>> {
        let max: Box<[u32]> = rs.rules.iter().map(|r| r.max_states.unwrap_or(0)).collect();
        let track: Box<[Option<SrcTrack>]> = rs.rules.iter().map(|r| r.src_track).collect();
        let adaptive: Box<[Option<(u32, u32)>]> =
            rs.rules.iter().map(|r| r.state_adaptive).collect();
        (max.iter().any(|&m| m > 0)
            || track.iter().any(Option::is_some)
            || adaptive.iter().any(Option::is_some))
        .then(|| {
            let cur = max.iter().map(|_| AtomicU32::new(0)).collect();
            let limit = u32::try_from(rs.limit_src_nodes).unwrap_or(u32::MAX);
            let sources = Sources::new(max.len(), limit, rs.timeouts.src_track);
            Arc::new(RuleLimits {
                max,
                adaptive,
                cur,
                track,
                sources,
                overloads: Mutex::new(Vec::new()),
                overloaded: Condvar::new(),
                overloads_lost: AtomicU64::new(0),
            })
        })
    }

    /// Whether rule `i` has a `max`, source tracking or adaptive timeouts of its own.
    #[inline]
    pub fn limits(&self, i: usize) -> bool {
        self.counts(i) || self.track.get(i).is_some_and(Option::is_some)
    }

    /// Whether rule `i`'s states are counted: it has a `max` or adaptive timeouts.
    fn counts(&self, i: usize) -> bool {
        self.max.get(i).is_some_and(|&m| m > 0) || self.adaptive.get(i).is_some_and(Option::is_some)
    }

    /// Counts one more state of rule `i` (created by a packet of `key` at `now`): in its
    /// `max` and its source node. Nothing is counted if it is refused.
    pub fn acquire(
        self: &Arc<Self>,
        i: usize,
        key: &PacketKey,
        now: u32,
    ) -> Result<Held, LimitRefusal> {
        let max = self.counts(i);
        if max && !self.take(i) {
            return Err(LimitRefusal::Max);
        }
        let mut source = None;
        if let Some(t) = self.track.get(i).and_then(Option::as_ref) {
            let k = Sources::key(i as u32, t, key.af, key.src);
            if let Err(e) = self.sources.take(k, i as u32, t, now) {
                if max {
                    self.give_back(i);
                }
                return Err(LimitRefusal::Source(e));
            }
            source = Some(k);
        }
        Ok(Held { limits: Arc::clone(self), rule: i as u32, max, source, established: false })
    }

    /// Counts one more state of rule `i`; false (and nothing counted) if it has its `max`.
    pub fn take(&self, i: usize) -> bool {
        let max = if self.max[i] == 0 { u32::MAX } else { self.max[i] };
        self.cur[i]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| (c < max).then_some(c + 1))
            .is_ok()
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

    /// The source nodes.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// Whether some rule has `overload`.
    pub fn has_overload(&self) -> bool {
        self.track.iter().flatten().any(|t| t.overload.is_some())
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<OverloadEvent>> {
        self.overloads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an overload (once per table and address while it waits).
    fn overload(&self, ev: OverloadEvent) {
        let mut q = self.queue();
        if q.iter().any(|e| {
            (e.table, e.af, e.addr) == (ev.table, ev.af, ev.addr)
                && e.flush == ev.flush
                && e.rule == ev.rule
        }) {
            return;
        }
        if q.len() >= MAX_PENDING_OVERLOADS {
            self.overloads_lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push(ev);
        self.overloaded.notify_all();
    }

    /// Waits up to `timeout` for overload events to be queued (they stay queued).
    pub fn wait_overloads(&self, timeout: Duration) {
        let q = self.queue();
        let _q = self
            .overloaded
            .wait_timeout_while(q, timeout, |q| q.is_empty())
            .unwrap_or_else(|e| e.into_inner());
    }

    /// Takes the overload events queued, without waiting.
    pub fn take_overloads(&self) -> Vec<OverloadEvent> {
        std::mem::take(&mut *self.queue())
    }

    /// Events lost to a full queue.
    pub fn overloads_lost(&self) -> u64 {
        self.overloads_lost.load(Ordering::Relaxed)
    }
}

impl Held {
    /// The state became a fully established TCP connection: counted in its source node,
    /// once; `Err` if that breaks the rule's `max-src-conn` or `max-src-conn-rate`.
    pub fn establish(&mut self, now: u32) -> Result<(), ConnRefusal> {
        let (Some(k), false) = (self.source, self.established) else { return Ok(()) };
        let t = self.limits.track[self.rule as usize]
            .as_ref()
            .expect("a source has its rule's tracking");
        if t.max_conn.is_none() && t.max_conn_rate.is_none() {
            // Nothing limits connections: not counted (no lock taken).
            return Ok(());
        }
        self.established = true;
        let r = self.limits.sources.establish(k, t, now);
        if r.is_err()
            && let Some(o) = t.overload
        {
            let (af, addr) = k.addr();
            self.limits.overload(OverloadEvent {
                table: o.table,
                af,
                addr,
                flush: o.flush,
                rule: self.rule,
            });
        }
        r
    }

    /// The state's rule's own adaptive timeouts and its states now, if it has them.
    pub fn adaptive(&self) -> Option<((u32, u32), u32)> {
        let i = self.rule as usize;
        Some((self.limits.adaptive[i]?, self.limits.current(i)))
    }

    /// Whether the state's rule has `overload` (its refusals are queued as overloads).
    pub fn overloads(&self) -> bool {
        self.limits.track[self.rule as usize].is_some_and(|t| t.overload.is_some())
    }

    /// Gives the counts back (the state is gone).
    pub fn release(self, now: u32) {
        let i = self.rule as usize;
        if self.max {
            self.limits.give_back(i);
        }
        if let (Some(k), Some(t)) = (self.source, self.limits.track[i].as_ref()) {
            self.limits.sources.give_back(k, t, self.established, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse;
    use std::path::Path;

    #[test]
    fn counts_up_to_max_and_back() {
        let rs =
            parse("pass in all keep state (max 2)\npass out all\n", Path::new("t.conf"), &|_| None)
                .unwrap();
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
        assert!(
            RuleLimits::of(&parse("pass all\n", Path::new("t.conf"), &|_| None).unwrap()).is_none()
        );
    }
}
