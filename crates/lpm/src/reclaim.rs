//! Grace periods for retired tbl8 groups: quiescent-state based reclamation (QSBR).
//!
//! A retired group may still be read by a lookup that loaded its parent entry just before
//! the writer replaced it, so it must not be refilled for another prefix until every such
//! lookup has finished. As in DPDK's `rte_rcu_qsbr`, each worker owns a [`Reader`] whose
//! counter it bumps between batches ([`Reader::quiescent`]): a bump means "I hold no
//! reference into the tables from before this point".
//!
//! Protocol. Reader state = `seq << 1 | offline`. The writer, after unpublishing groups,
//! issues a `SeqCst` fence and *snapshots* every registered reader's state; the groups are
//! reusable once each reader that was online in the snapshot has changed state since (it
//! went quiescent or offline). Ordering argument:
//!
//! * lookups before a bump are ordered before it by its `Release` store, and the writer reads
//!   the bumped value with `Acquire`, so they happen-before the group's refill;
//! * lookups after a bump (or after going online) follow a `SeqCst` fence; the writer's
//!   unpublish store precedes its own `SeqCst` fence and snapshot load. By the fence rules,
//!   if the writer's snapshot did not see the bump, the reader's later loads see the
//!   unpublished parent, so they cannot reach the retired group. (Without the reader-side
//!   fence x86 could satisfy those loads before the bump leaves the store buffer.)
//!
//! Cost on the forwarding path: one store and one `mfence` per batch, no lock, no shared
//! cache-line writes other than the reader's own counter. Registration is behind a mutex
//! (control plane only). This is the "global epoch" scheme of the design brief with the
//! epoch recorded per reader in the snapshot, which needs no extra global counter.

use std::cell::Cell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::LpmError;

const OFFLINE: u64 = 1;
const STEP: u64 = 2;

/// A worker's registration with one table's reclamation scheme (one per thread; `Send`,
/// not `Sync`).
///
/// Call [`quiescent`](Reader::quiescent) between batches of lookups, or
/// [`offline`](Reader::offline) before blocking for a long time. While a registered reader
/// stays online without reporting, retired tbl8 groups are not reused (inserts needing a
/// group may then fail with [`LpmError::Tbl8Exhausted`] once the pool runs dry).
/// Dropping the reader unregisters it.
#[derive(Debug)]
pub struct Reader {
    state: Arc<AtomicU64>,
    _not_sync: PhantomData<Cell<()>>,
}

impl Reader {
    #[inline]
    fn next(&self) -> u64 {
        (self.state.load(Ordering::Relaxed) & !OFFLINE) + STEP
    }

    /// Declares that this thread holds no reference obtained from a lookup before this call.
    #[inline]
    pub fn quiescent(&self) {
        self.state.store(self.next(), Ordering::Release);
        fence(Ordering::SeqCst);
    }

    /// Declares this thread idle: it does no lookups until [`online`](Reader::online).
    #[inline]
    pub fn offline(&self) {
        self.state.store(self.next() | OFFLINE, Ordering::Release);
    }

    /// Resumes lookups after [`offline`](Reader::offline).
    #[inline]
    pub fn online(&self) {
        self.state.store(self.next(), Ordering::Release);
        fence(Ordering::SeqCst);
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.offline();
    }
}

type Snapshot = Vec<(Arc<AtomicU64>, u64)>;

/// The set of readers registered with one table.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    readers: Mutex<Vec<Arc<AtomicU64>>>,
}

impl Registry {
    pub(crate) fn register(&self) -> Reader {
        let state = Arc::new(AtomicU64::new(0));
        self.readers.lock().unwrap_or_else(|e| e.into_inner()).push(state.clone());
        fence(Ordering::SeqCst);
        Reader { state, _not_sync: PhantomData }
    }

    /// Online readers and their current state; called after unpublishing groups.
    fn snapshot(&self) -> Snapshot {
        fence(Ordering::SeqCst);
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        // Only the registry holds a dropped reader's state: forget it.
        readers.retain(|s| Arc::strong_count(s) > 1);
        readers
            .iter()
            .filter_map(|s| {
                let v = s.load(Ordering::Acquire);
                (v & OFFLINE == 0).then(|| (s.clone(), v))
            })
            .collect()
    }
}

fn grace_period_over(snap: &Snapshot) -> bool {
    snap.iter().all(|(s, v)| s.load(Ordering::Acquire) != *v)
}

/// A grace period started by [`Ipv4Lpm::grace`](crate::Ipv4Lpm::grace) or
/// [`Ipv6Lpm::grace`](crate::Ipv6Lpm::grace): over once every reader online at its start has
/// reported a quiescent state (or gone offline). A caller retiring something that lookups may
/// still hold, such as a next-hop id whose last route was just removed, reuses it only then.
#[derive(Debug)]
pub struct Grace(Snapshot);

impl Grace {
    /// Whether no lookup from before the start of this grace period is still running.
    pub fn is_over(&self) -> bool {
        grace_period_over(&self.0)
    }
}

impl Registry {
    pub(crate) fn grace(&self) -> Grace {
        Grace(self.snapshot())
    }
}

/// Allocator of tbl8 group indices with deferred reuse.
#[derive(Debug)]
pub(crate) struct GroupPool {
    capacity: u32,
    /// Groups `next_fresh..capacity` were never used.
    next_fresh: u32,
    /// Retired groups whose grace period is over.
    ready: Vec<u32>,
    /// Retired groups waiting for readers, with the snapshot taken when they were retired.
    deferred: VecDeque<(Vec<u32>, Snapshot)>,
    /// Retired during the current operation, snapshot not yet taken.
    pending: Vec<u32>,
    in_use: u32,
    reused: u64,
}

/// How long an insert needing a group waits for readers to pass a grace period before
/// giving up with [`LpmError::Tbl8Exhausted`].
const MAX_WAIT: Duration = Duration::from_millis(100);

impl GroupPool {
    pub(crate) fn new(capacity: u32) -> Self {
        GroupPool {
            capacity,
            next_fresh: 0,
            ready: Vec::new(),
            deferred: VecDeque::new(),
            pending: Vec::new(),
            in_use: 0,
            reused: 0,
        }
    }

    fn available(&self) -> usize {
        self.ready.len() + (self.capacity - self.next_fresh) as usize
    }

    fn reclaim(&mut self) {
        let ready = &mut self.ready;
        self.deferred.retain(|(groups, snap)| {
            let over = grace_period_over(snap);
            if over {
                ready.extend_from_slice(groups);
            }
            !over
        });
    }

    /// Makes sure `n` groups can be allocated, waiting briefly for a grace period if the only
    /// free groups are retired ones.
    pub(crate) fn reserve(&mut self, n: usize) -> Result<(), LpmError> {
        if n == 0 || self.available() >= n {
            return Ok(());
        }
        let start = Instant::now();
        loop {
            self.reclaim();
            if self.available() >= n {
                return Ok(());
            }
            if self.deferred.is_empty() || start.elapsed() > MAX_WAIT {
                return Err(LpmError::Tbl8Exhausted);
            }
            std::thread::yield_now();
        }
    }

    /// Allocates a group; call only after a successful `reserve`.
    pub(crate) fn alloc(&mut self) -> u32 {
        let g = if let Some(g) = self.ready.pop() {
            self.reused += 1;
            g
        } else {
            assert!(self.next_fresh < self.capacity, "tbl8 alloc without reserve");
            self.next_fresh += 1;
            self.next_fresh - 1
        };
        self.in_use += 1;
        g
    }

    /// Retires a group already unpublished from the tables.
    pub(crate) fn retire(&mut self, g: u32) {
        self.in_use -= 1;
        self.pending.push(g);
    }

    /// Ends a writer operation: starts the grace period of the groups it retired.
    pub(crate) fn end_op(&mut self, registry: &Registry) {
        if self.pending.is_empty() {
            return;
        }
        let groups = std::mem::take(&mut self.pending);
        let snap = registry.snapshot();
        if snap.is_empty() {
            self.ready.extend(groups);
        } else {
            self.deferred.push_back((groups, snap));
        }
        // Opportunistically move finished grace periods to `ready`.
        self.reclaim();
    }

    pub(crate) fn stats(&self) -> crate::GroupStats {
        crate::GroupStats {
            capacity: self.capacity,
            in_use: self.in_use,
            high_water: self.next_fresh,
            awaiting_grace_period: self.deferred.iter().map(|(g, _)| g.len() as u32).sum(),
            reused: self.reused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_grace_waits_for_online_readers_only() {
        let reg = Registry::default();
        assert!(reg.grace().is_over(), "no reader: over at once");
        let (r1, r2) = (reg.register(), reg.register());
        r2.offline();
        let g = reg.grace();
        assert!(!g.is_over());
        r1.quiescent();
        assert!(g.is_over());
        let g = reg.grace();
        drop(r1);
        assert!(g.is_over(), "a dropped reader is offline");
    }

    #[test]
    fn grace_period_needs_every_online_reader() {
        let reg = Registry::default();
        let mut pool = GroupPool::new(2);
        let r1 = reg.register();
        let r2 = reg.register();
        r2.offline();
        pool.reserve(2).unwrap();
        let (a, b) = (pool.alloc(), pool.alloc());
        pool.retire(a);
        pool.end_op(&reg);
        assert_eq!(pool.stats().awaiting_grace_period, 1);
        assert_eq!(pool.reserve(1), Err(LpmError::Tbl8Exhausted)); // r1 never reported
        r1.quiescent();
        pool.reserve(1).unwrap();
        assert_eq!(pool.alloc(), a);
        pool.retire(b);
        pool.end_op(&reg);
        drop(r1); // dropping unregisters
        pool.reserve(1).unwrap();
        assert_eq!(pool.alloc(), b);
        assert_eq!(pool.stats().reused, 2);
        drop(r2);
    }
}
