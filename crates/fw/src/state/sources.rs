//! pf's source tracking (pf.conf(5), STATEFUL TRACKING OPTIONS): the states of a rule with
//! `max-src-conn`, `max-src-conn-rate`, `max-src-states`, `max-src-nodes` or `source-track`
//! are counted per source address in a *source node* (pf's `pf_ksrc_node`): the states it
//! holds, its fully established TCP connections, and the rate at which they became
//! established (pf's decaying threshold). A node belongs to one rule (`source-track rule`) or
//! to every globally tracking rule (`source-track global`).
//!
//! The flows of one source land on different workers, so the nodes are shared: a hash map
//! per shard (64, chosen by a keyed hash of the node's key), each behind its own mutex. A
//! worker touches them only when a state of a tracking rule is created, becomes established
//! or goes, never for a packet of a state that changes nothing; two workers wait on each
//! other only when both do that, at the same moment, for sources of one shard. Rules
//! without tracking never get here.
//!
//! Memory is bounded: at most `set limit src-nodes` nodes (pf's default 10000) in all; a
//! state that would need one more is refused, as pf refuses it (PFRES_SRCLIMIT), once the
//! nodes that outlived their states have been swept. A node goes with its last state,
//! unless `set timeout src.track` or its connection rate's window keeps it a while: then a
//! later state of the source finds its counts, or the sweep removes it once that time is over.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::packet::Af;
use crate::rules::SrcTrack;

const SHARDS: usize = 64;
/// The scope of the nodes of globally tracking rules.
const GLOBAL: u32 = u32::MAX;
/// pf's PF_THRESHOLD_MULT: the rate counts in thousandths of a connection.
const THRESHOLD_MULT: u64 = 1000;

/// The node a state counts in: its scope (the rule, or global) and the source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceKey {
    scope: u32,
    af: Af,
    addr: u128,
}

impl SourceKey {
    pub fn addr(&self) -> (Af, u128) {
        (self.af, self.addr)
    }
}

/// A source node's counts.
#[derive(Debug, Clone, Copy, Default)]
struct Node {
    /// States counting in it.
    states: u32,
    /// Fully established TCP connections among them (pf's `conn`).
    conn: u32,
    /// pf's `conn_rate` threshold: the decaying count of connections established, in
    /// thousandths, and when it was last added to.
    rate: u64,
    last: u32,
    /// With no state left: when it may go (kept meanwhile for `src.track` or its rate).
    expire: u32,
}

/// Why a state was refused its source node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrcRefusal {
    /// `max-src-states`: the source has that many states of the node.
    States,
    /// `max-src-nodes` of the rule, or `set limit src-nodes`, reached.
    Nodes,
}

/// Why an established connection was refused (the first limit it broke, connections first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnRefusal {
    /// `max-src-conn`.
    Conn,
    /// `max-src-conn-rate`.
    Rate,
}

/// The source nodes of one rule set's tracking rules.
#[derive(Debug)]
pub struct Sources {
    shards: Box<[Mutex<HashMap<SourceKey, Node>>]>,
    hasher: RandomState,
    /// Nodes in all shards, at most `limit`.
    nodes: AtomicU32,
    limit: u32,
    /// Per rule: its nodes (for `max-src-nodes`).
    rule_nodes: Box<[AtomicU32]>,
    /// `set timeout src.track`.
    linger: u32,
    /// When the pool was last swept for want of a node (`take`).
    last_sweep: AtomicU32,
}

/// Adds one to `a` unless it is at `max`.
fn inc_below(a: &AtomicU32, max: u32) -> bool {
    a.fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| (c < max).then_some(c + 1)).is_ok()
}

/// Takes one from `a`, never below zero.
fn dec(a: &AtomicU32) {
    let _ = a.fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1));
}

impl Sources {
    /// Nodes for `rules` rules, at most `limit` of them, kept `linger` seconds after their
    /// last state.
    pub fn new(rules: usize, limit: u32, linger: u32) -> Sources {
        Sources {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            nodes: AtomicU32::new(0),
            limit,
            rule_nodes: (0..rules).map(|_| AtomicU32::new(0)).collect(),
            linger,
            last_sweep: AtomicU32::new(0),
        }
    }

    fn shard(&self, key: &SourceKey) -> MutexGuard<'_, HashMap<SourceKey, Node>> {
        let i = (self.hasher.hash_one(key) % SHARDS as u64) as usize;
        // A panic elsewhere while holding it leaves counts that are still counts.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node key of a state of rule `rule` (tracking as `t`) from `addr`.
    pub fn key(rule: u32, t: &SrcTrack, af: Af, addr: u128) -> SourceKey {
        SourceKey { scope: if t.global { GLOBAL } else { rule }, af, addr }
    }

    /// Counts one more state in node `key` of rule `rule`, creating the node if need be.
    pub fn take(
        &self,
        key: SourceKey,
        rule: u32,
        t: &SrcTrack,
        now: u32,
    ) -> Result<(), SrcRefusal> {
        let mut swept = false;
        loop {
            let mut shard = self.shard(&key);
            if let Some(n) = shard.get_mut(&key) {
                if n.states == 0 && n.expire <= now {
                    // Outlived its time: the source starts afresh.
                    *n = Node::default();
                }
                if t.max_states.is_some_and(|m| n.states >= m) {
                    return Err(SrcRefusal::States);
                }
                n.states += 1;
                return Ok(());
            }
            let rule_nodes = self.rule_nodes.get(rule as usize).filter(|_| key.scope != GLOBAL);
            let rule_ok = match (rule_nodes, t.max_nodes) {
                (Some(c), Some(m)) => inc_below(c, m),
                (Some(c), None) => {
                    c.fetch_add(1, Ordering::AcqRel);
                    true
                }
                _ => true,
            };
            let pool_ok = rule_ok && inc_below(&self.nodes, self.limit);
            if pool_ok {
                shard.insert(key, Node { states: 1, ..Node::default() });
                return Ok(());
            }
            if rule_ok && let Some(c) = rule_nodes {
                dec(c);
            }
            drop(shard);
            // Nodes kept after their last state may be over their time: sweep, then once
            // more. At most one sweep a second, whoever asks: a flood of new sources against
            // a full pool must not walk it for each of them.
            let last = self.last_sweep.load(Ordering::Acquire);
            if swept
                || now <= last
                || self
                    .last_sweep
                    .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
            {
                return Err(SrcRefusal::Nodes);
            }
            self.sweep(now);
            swept = true;
        }
    }

    /// A state counted in node `key` of rule `rule` is gone (`established`: it was counted
    /// as a connection too).
    pub fn give_back(&self, key: SourceKey, t: &SrcTrack, established: bool, now: u32) {
        let mut shard = self.shard(&key);
        let Some(n) = shard.get_mut(&key) else { return };
        n.states = n.states.saturating_sub(1);
        if established {
            n.conn = n.conn.saturating_sub(1);
        }
        if n.states > 0 {
            return;
        }
        let rate_until = t.max_conn_rate.map_or(0, |(_, secs)| n.last.saturating_add(secs));
        let until = now.saturating_add(self.linger).max(rate_until);
        if until > now && (self.linger > 0 || n.rate > 0) {
            n.expire = until;
            return;
        }
        shard.remove(&key);
        self.forget(key);
    }

    /// Node `key` was removed: its counts in the pool and its rule.
    fn forget(&self, key: SourceKey) {
        dec(&self.nodes);
        if key.scope != GLOBAL
            && let Some(c) = self.rule_nodes.get(key.scope as usize)
        {
            dec(c);
        }
    }

    /// A state counted in node `key` has become a fully established TCP connection (pf's
    /// `pf_src_connlimit`): counted, and refused if the source now has more than
    /// `max-src-conn` connections or more than `max-src-conn-rate` (the count stays: the
    /// caller removes the state, which gives it back).
    pub fn establish(&self, key: SourceKey, t: &SrcTrack, now: u32) -> Result<(), ConnRefusal> {
        let mut shard = self.shard(&key);
        let Some(n) = shard.get_mut(&key) else { return Ok(()) };
        n.conn += 1;
        // pf_add_threshold: the count decays linearly over the window, then restarts.
        let secs = t.max_conn_rate.map_or(1, |(_, s)| s.max(1));
        let diff = now.saturating_sub(n.last);
        if diff >= secs {
            n.rate = 0;
        } else {
            n.rate -= n.rate * u64::from(diff) / u64::from(secs);
        }
        n.rate += THRESHOLD_MULT;
        n.last = now;
        if t.max_conn.is_some_and(|m| n.conn > m) {
            return Err(ConnRefusal::Conn);
        }
        if t.max_conn_rate.is_some_and(|(lim, _)| n.rate > u64::from(lim) * THRESHOLD_MULT) {
            return Err(ConnRefusal::Rate);
        }
        Ok(())
    }

    /// Removes the nodes without states whose time is over.
    pub fn sweep(&self, now: u32) {
        for shard in self.shards.iter() {
            let mut s = shard.lock().unwrap_or_else(|e| e.into_inner());
            let gone: Vec<SourceKey> = s
                .iter()
                .filter(|(_, n)| n.states == 0 && n.expire <= now)
                .map(|(k, _)| *k)
                .collect();
            for k in gone {
                s.remove(&k);
                self.forget(k);
            }
        }
    }

    /// Nodes held now.
    pub fn nodes(&self) -> u32 {
        self.nodes.load(Ordering::Acquire)
    }

    /// The counts of node `key`: states and established connections (for tests and
    /// operators).
    pub fn counts(&self, key: SourceKey) -> Option<(u32, u32)> {
        self.shard(&key).get(&key).map(|n| (n.states, n.conn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(f: impl FnOnce(&mut SrcTrack)) -> SrcTrack {
        let mut t = SrcTrack::default();
        f(&mut t);
        t
    }

    #[test]
    fn states_per_source_and_nodes_per_rule() {
        let s = Sources::new(2, 100, 0);
        let t = track(|t| {
            t.max_states = Some(2);
            t.max_nodes = Some(2);
        });
        let k = |a| Sources::key(0, &t, Af::Inet, a);
        assert_eq!((s.take(k(1), 0, &t, 1), s.take(k(1), 0, &t, 1)), (Ok(()), Ok(())));
        assert_eq!(s.take(k(1), 0, &t, 1), Err(SrcRefusal::States));
        assert_eq!(s.take(k(2), 0, &t, 1), Ok(()));
        assert_eq!(s.take(k(3), 0, &t, 1), Err(SrcRefusal::Nodes));
        assert_eq!(s.nodes(), 2);
        // The last state of source 2 goes, and its node with it: room for source 3.
        s.give_back(k(2), &t, false, 1);
        assert_eq!((s.nodes(), s.counts(k(2))), (1, None));
        assert_eq!(s.take(k(3), 0, &t, 1), Ok(()));
        s.give_back(k(1), &t, false, 1);
        assert_eq!(s.counts(k(1)), Some((1, 0)));
        assert_eq!(s.take(k(1), 0, &t, 1), Ok(()));
        for key in [k(1), k(1), k(3)] {
            s.give_back(key, &t, false, 2);
        }
        assert_eq!(s.nodes(), 0);
        assert_eq!(s.rule_nodes[0].load(Ordering::Acquire), 0);
    }

    #[test]
    fn global_nodes_are_shared_by_rules_and_bounded_by_the_pool() {
        let s = Sources::new(3, 2, 0);
        let g = track(|t| {
            t.global = true;
            t.max_states = Some(3);
        });
        let g1 = track(|t| {
            t.global = true;
            t.max_states = Some(1);
        });
        let k = |a| Sources::key(0, &g, Af::Inet6, a);
        assert_eq!(k(7), Sources::key(2, &g1, Af::Inet6, 7));
        assert_eq!(s.take(k(7), 0, &g, 1), Ok(()));
        // Rule 2 allows one state per source, and the source has one (of rule 0) already.
        assert_eq!(s.take(k(7), 2, &g1, 1), Err(SrcRefusal::States));
        assert_eq!(s.take(k(7), 0, &g, 1), Ok(()));
        assert_eq!(s.take(k(8), 0, &g, 1), Ok(()));
        // The pool (set limit src-nodes 2) is full.
        assert_eq!(s.take(k(9), 0, &g, 1), Err(SrcRefusal::Nodes));
        // Another family is another node.
        assert_ne!(k(9), Sources::key(0, &g, Af::Inet, 9));
    }

    #[test]
    fn connections_per_source() {
        let s = Sources::new(1, 100, 0);
        let t = track(|t| t.max_conn = Some(2));
        let k = Sources::key(0, &t, Af::Inet, 1);
        for _ in 0..3 {
            s.take(k, 0, &t, 1).unwrap();
        }
        assert_eq!(s.establish(k, &t, 1), Ok(()));
        assert_eq!(s.establish(k, &t, 1), Ok(()));
        assert_eq!(s.establish(k, &t, 1), Err(ConnRefusal::Conn));
        assert_eq!(s.counts(k), Some((3, 3)));
        // The refused one is removed, one more goes: one connection left, room for one.
        s.give_back(k, &t, true, 1);
        s.give_back(k, &t, true, 1);
        assert_eq!(s.counts(k), Some((1, 1)));
        s.take(k, 0, &t, 1).unwrap();
        assert_eq!(s.establish(k, &t, 1), Ok(()));
    }

    /// pf's threshold: N per S seconds, the count decaying linearly; the node outlives its
    /// states for the rest of the window, then goes in the sweep.
    #[test]
    fn connection_rate_decays_over_its_window() {
        let s = Sources::new(1, 100, 0);
        let t = track(|t| t.max_conn_rate = Some((3, 10)));
        let k = Sources::key(0, &t, Af::Inet, 1);
        let conn = |now| {
            s.take(k, 0, &t, now).unwrap();
            let r = s.establish(k, &t, now);
            s.give_back(k, &t, true, now);
            r
        };
        assert_eq!([conn(100), conn(100), conn(100)], [Ok(()); 3]);
        assert_eq!(conn(100), Err(ConnRefusal::Rate));
        // The node is kept (no state, but its window is open): the count is remembered.
        assert_eq!(s.nodes(), 1);
        // Five seconds later 4000 has decayed to 2000; one more is 3000, not over 3.
        assert_eq!(conn(105), Ok(()));
        assert_eq!(conn(105), Err(ConnRefusal::Rate));
        // A whole window later the count starts over.
        assert_eq!([conn(200), conn(200), conn(200)], [Ok(()); 3]);
        s.sweep(209);
        assert_eq!(s.nodes(), 1);
        s.sweep(210);
        assert_eq!(s.nodes(), 0);
    }

    /// `set timeout src.track`: a node outlives its last state that long; a full pool sweeps
    /// the nodes over their time before refusing.
    #[test]
    fn src_track_timeout_keeps_nodes_and_a_full_pool_sweeps() {
        let s = Sources::new(1, 1, 30);
        let t = track(|t| t.max_states = Some(5));
        let k = |a| Sources::key(0, &t, Af::Inet, a);
        s.take(k(1), 0, &t, 10).unwrap();
        s.give_back(k(1), &t, false, 10);
        assert_eq!(s.counts(k(1)), Some((0, 0)));
        assert_eq!(s.take(k(2), 0, &t, 39), Err(SrcRefusal::Nodes));
        assert_eq!(s.take(k(2), 0, &t, 40), Ok(()));
        assert_eq!((s.nodes(), s.counts(k(1))), (1, None));
    }
}
