//! The counters a worker's firewall publishes for other threads: per rule ([`RuleCounters`]),
//! for the state table and the verdict cache ([`FirewallStats`]), and the per-rule counts
//! it sums within a batch ([`Pending`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fw::classifier::CacheCounters;
use fw::rules::Action;
use fw::state::StateCounters;

use super::compiled::CompiledRules;
use super::scrub;

/// Per-rule counters of one worker for one rule set; index `rule_count()` counts packets no
/// rule matched (pf's default pass).
pub struct RuleCounters {
    pub rules: Arc<CompiledRules>,
    packets: Box<[AtomicU64]>,
    bytes: Box<[AtomicU64]>,
    pub(super) states: Box<[AtomicU64]>,
}

fn zeroed(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// Single writer: a relaxed load and a plain store, no locked read-modify-write; on x86 and
/// ARM this costs what incrementing a plain integer does, and readers see it at once.
#[inline(always)]
pub(super) fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl RuleCounters {
    pub(super) fn new(rules: Arc<CompiledRules>) -> RuleCounters {
        let n = rules.rule_count() + 1;
        RuleCounters { rules, packets: zeroed(n), bytes: zeroed(n), states: zeroed(n) }
    }

    /// Adds the counts `old` holds for the rules `map` names (`set keepcounters`).
    pub(super) fn add_mapped(&self, old: &RuleCounters, map: &[Option<usize>]) {
        for (new, old) in
            [(&self.packets, &old.packets), (&self.bytes, &old.bytes), (&self.states, &old.states)]
        {
            for (n, o) in new.iter().zip(map) {
                if let Some(o) = o.and_then(|o| old.get(o)) {
                    bump(n, o.load(Ordering::Relaxed));
                }
            }
        }
    }

    /// Adds `old`'s counts (of the same rules) to these.
    pub(super) fn add(&self, old: &RuleCounters) {
        for (new, old) in
            [(&self.packets, &old.packets), (&self.bytes, &old.bytes), (&self.states, &old.states)]
        {
            for (n, o) in new.iter().zip(old.iter()) {
                bump(n, o.load(Ordering::Relaxed));
            }
        }
    }

    /// Adds `packets` and `bytes` to rule `i` (out of range: the default's).
    pub(super) fn add_counts(&self, i: usize, packets: u64, bytes: u64) {
        let i = i.min(self.packets.len() - 1);
        bump(&self.packets[i], packets);
        bump(&self.bytes[i], bytes);
    }

    /// A copy of the counters of every rule, in rule order.
    pub fn snapshot(&self) -> Vec<RuleStat> {
        let r = &self.rules.rules.rules;
        (0..=r.len())
            .map(|i| RuleStat {
                rule: r.get(i).map(|_| i),
                line: r.get(i).map_or(0, |r| r.line),
                label: r.get(i).and_then(|r| r.label.clone()),
                ridentifier: r.get(i).and_then(|r| r.ridentifier),
                action: r.get(i).map_or(Action::Pass, |r| r.action),
                packets: self.packets[i].load(Ordering::Relaxed),
                bytes: self.bytes[i].load(Ordering::Relaxed),
                states: self.states[i].load(Ordering::Relaxed),
            })
            .collect()
    }
}

/// Counters of one rule (or of the default pass, `rule: None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleStat {
    pub rule: Option<usize>,
    /// Line of the rule in its file (0 for the default).
    pub line: usize,
    pub label: Option<String>,
    /// The rule's `ridentifier` (pfSense's `tracker`), if it has one.
    pub ridentifier: Option<u32>,
    pub action: Action,
    pub packets: u64,
    pub bytes: u64,
    /// States created by the rule.
    pub states: u64,
}

const STATE_FIELDS: usize = 26;

/// Names of the state-table counters, in [`FirewallStats::states`] order.
pub const STATE_COUNTER_NAMES: [&str; STATE_FIELDS] = [
    "in_use",
    "inserts",
    "insert_full",
    "insert_exists",
    "hits",
    "misses",
    "drop_out_of_window",
    "expired_lookup",
    "expired_sweep",
    "reused_closed",
    "picked_up",
    "removed",
    "icmp_error_hits",
    "icmp_error_misses",
    "icmp_error_bad_seq",
    "rule_max",
    "src_limit_states",
    "src_limit_nodes",
    "src_limit_conn",
    "src_limit_conn_rate",
    "src_overload",
    "src_flushed",
    "synproxy_syn_acks",
    "synproxy_syns",
    "synproxy_established",
    "synproxy_dropped",
];

pub(super) fn state_fields(c: &StateCounters) -> [u64; STATE_FIELDS] {
    [
        c.in_use,
        c.inserts,
        c.insert_full,
        c.insert_exists,
        c.hits,
        c.misses,
        c.drop_out_of_window,
        c.expired_lookup,
        c.expired_sweep,
        c.reused_closed,
        c.picked_up,
        c.removed,
        c.icmp_error_hits,
        c.icmp_error_misses,
        c.icmp_error_bad_seq,
        c.rule_max,
        c.src_limit_states,
        c.src_limit_nodes,
        c.src_limit_conn,
        c.src_limit_conn_rate,
        c.src_overload,
        c.src_flushed,
        c.synproxy_syn_acks,
        c.synproxy_syns,
        c.synproxy_established,
        c.synproxy_dropped,
    ]
}

/// A worker's firewall counters as published for other threads.
pub struct FirewallStats {
    /// Replaced (under the lock) only when the worker adopts a new rule set.
    pub(super) rules: Mutex<Arc<RuleCounters>>,
    pub(super) states: [AtomicU64; STATE_FIELDS],
    /// Generation of the rule set the worker uses.
    pub(super) generation: AtomicU64,
    /// The verdict cache's hits, misses, invalidations and class hits.
    pub(super) cache: [AtomicU64; 4],
    /// Normalization's counts ([`scrub::ScrubCounts`]).
    pub(super) scrub: [AtomicU64; scrub::SCRUB_COUNTER_NAMES.len()],
    /// Translations the worker's NAT table holds.
    pub(super) nat_sessions: AtomicU64,
}

impl FirewallStats {
    /// The rule set in use and its per-rule counters (plus the default's, last).
    pub fn rules(&self) -> Arc<RuleCounters> {
        Arc::clone(&self.rules.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// State-table counters, named by [`STATE_COUNTER_NAMES`].
    pub fn states(&self) -> [(&'static str, u64); STATE_FIELDS] {
        std::array::from_fn(|i| (STATE_COUNTER_NAMES[i], self.states[i].load(Ordering::Relaxed)))
    }

    /// The worker's verdict cache's counters (in use only in front of the tree engine).
    pub fn verdict_cache(&self) -> CacheCounters {
        let [hits, misses, invalidations, class_hits] =
            std::array::from_fn(|i| self.cache[i].load(Ordering::Relaxed));
        CacheCounters { hits, misses, class_hits, invalidations }
    }

    /// Normalization's counters (`scrub` rules), named by [`scrub::SCRUB_COUNTER_NAMES`].
    pub fn scrub(&self) -> [(&'static str, u64); scrub::SCRUB_COUNTER_NAMES.len()] {
        std::array::from_fn(|i| {
            (scrub::SCRUB_COUNTER_NAMES[i], self.scrub[i].load(Ordering::Relaxed))
        })
    }

    /// Translations the worker's NAT table holds (live, and expired not yet swept).
    pub fn nat_sessions(&self) -> u64 {
        self.nat_sessions.load(Ordering::Relaxed)
    }

    /// The [`RulesSlot`](super::RulesSlot) generation the worker has adopted.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// Packets and bytes counted in a row under one rule (index as in [`Pending::count`]).
#[derive(Clone, Copy)]
pub(super) struct Pending {
    rule: usize,
    packets: u64,
    bytes: u64,
}

pub(super) const NO_PENDING: Pending = Pending { rule: usize::MAX, packets: 0, bytes: 0 };

impl Pending {
    /// Counts a packet under rule `i` (`usize::MAX`: no rule, pf's default). Consecutive
    /// packets of one rule (a batch of state hits, typically) are summed here and added to the
    /// shared counters once, at the end of the batch or when the rule changes: pf counts every
    /// packet that matches a state under the state's rule, and doing that per packet cost two
    /// loads and two stores into counters that other threads read.
    #[inline(always)]
    pub(super) fn count(&mut self, cur: &RuleCounters, i: usize, len: u16) {
        if self.rule == i {
            self.packets += 1;
            self.bytes += u64::from(len);
        } else {
            self.flush(cur);
            *self = Pending { rule: i, packets: 1, bytes: u64::from(len) };
        }
    }

    /// Adds the counts to `cur`'s counters. States keep the index of the rule that created
    /// them, which after a reload may be out of range for the new set: such packets are
    /// counted under the default slot rather than indexing out of bounds.
    #[inline]
    pub(super) fn flush(&mut self, cur: &RuleCounters) {
        let p = std::mem::replace(self, NO_PENDING);
        if p.packets > 0 {
            let i = p.rule.min(cur.packets.len() - 1);
            bump(&cur.packets[i], p.packets);
            bump(&cur.bytes[i], p.bytes);
        }
    }
}
