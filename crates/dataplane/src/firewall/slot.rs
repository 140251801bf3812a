//! How the control side publishes a rule set to the workers ([`RulesSlot`]): see the
//! module documentation of `filter`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use fw::state::{StateAllocError, StateMemory};

use super::compiled::{CompiledRules, KeepCounts};
use super::overload::{self, FlushJob};
use super::state_limit;

/// The control side's handle for publishing rule sets to workers.
pub struct RulesSlot {
    generation: AtomicU64,
    /// The slot itself, for the overload thread it may start.
    me: Weak<RulesSlot>,
    /// Whether the overload thread runs (`overload.rs`).
    overloader: AtomicBool,
    /// Held while overloads are applied.
    pub(super) overloading: Mutex<()>,
    /// Where the workers' coarse clocks start: one epoch for all, so that the times they
    /// give the shared source nodes (`max-src-conn-rate`, `src.track`) agree.
    pub(super) epoch: Instant,
    current: Mutex<Published>,
    /// Told of every set published, so that flows offloaded under the old one are decided
    /// again ([`crate::offload`]).
    decisions: std::sync::OnceLock<Arc<crate::offload::Decisions>>,
}

/// The published set, and what each worker's firewall (by registration) needs to adopt it.
struct Published {
    rules: Arc<CompiledRules>,
    /// `None` once the firewall is dropped.
    workers: Vec<Option<WorkerMemory>>,
    /// `overload ... flush` jobs for the workers, numbered, kept until every worker took them.
    flushes: Vec<(u64, FlushJob)>,
    /// The number of the last flush job.
    flush_seq: u64,
}

/// The state capacity a worker's table will have once it adopts the published set, and the
/// memory reserved for it to get there (taken when it adopts).
struct WorkerMemory {
    capacity: usize,
    pending: Option<StateMemory>,
    /// The last flush job the worker took.
    flush_seen: u64,
}

impl RulesSlot {
    pub fn new(rules: Arc<CompiledRules>) -> Arc<RulesSlot> {
        Arc::new_cyclic(|me| RulesSlot {
            generation: AtomicU64::new(0),
            me: me.clone(),
            overloader: AtomicBool::new(false),
            overloading: Mutex::new(()),
            epoch: Instant::now(),
            current: Mutex::new(Published {
                rules,
                workers: Vec::new(),
                flushes: Vec::new(),
                flush_seq: 0,
            }),
            decisions: std::sync::OnceLock::new(),
        })
    }

    /// Has every publication void the decisions of `decisions` (the FIB's, once).
    pub fn set_decisions(&self, decisions: Arc<crate::offload::Decisions>) {
        let _ = self.decisions.set(decisions);
    }

    /// Starts the overload thread, once: from a worker's first batch with rules that have
    /// `overload` (not before: `linerate run` starts no thread before it drops its
    /// privileges).
    pub(super) fn start_overloader(&self) {
        if !self.overloader.swap(true, Ordering::AcqRel) {
            overload::spawn_overloader(self.me.clone());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Published> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `rules` the set every worker uses from its next batch on. If its `set limit
    /// states` is above a worker's table, the memory for that worker is reserved here, on the
    /// caller's thread; if any reservation fails nothing is published (the workers keep the
    /// old set) and the error says how much was asked.
    pub fn publish(&self, rules: Arc<CompiledRules>) -> Result<(), StateAllocError> {
        self.publish_with(rules, Vec::new())
    }

    /// [`publish`](Self::publish), with flush jobs for every worker.
    fn publish_with(
        &self,
        rules: Arc<CompiledRules>,
        flushes: Vec<FlushJob>,
    ) -> Result<(), StateAllocError> {
        self.publish_over(None, rules, flushes).map(|_| ())
    }

    /// Publishes `rules`, which were made from `from` by changing table entries (`overload`,
    /// `linerate table`), unless another set was published since (a reload): then nothing is
    /// published and it says `false`, so that the change is not made on rules gone by.
    pub(super) fn publish_derived(
        &self,
        from: &Arc<CompiledRules>,
        rules: Arc<CompiledRules>,
        flushes: Vec<FlushJob>,
    ) -> Result<bool, StateAllocError> {
        self.publish_over(Some(from), rules, flushes)
    }

    fn publish_over(
        &self,
        from: Option<&Arc<CompiledRules>>,
        rules: Arc<CompiledRules>,
        flushes: Vec<FlushJob>,
    ) -> Result<bool, StateAllocError> {
        let limit = state_limit(&rules.rules);
        // `set keepcounters`: the rules matched before the lock (a workers' adopt waits on it).
        let keep = (from.is_none() && rules.rules.keep_counters).then(|| {
            let old = self.current();
            (KeepCounts::of(&old, &rules), old)
        });
        // Held throughout: two publishers (the control socket, SIGHUP) reserve in turn.
        let mut cur = self.lock();
        if from.is_some_and(|f| !Arc::ptr_eq(f, &cur.rules)) {
            return Ok(false);
        }
        if let Some((k, old)) = keep
            && !rules.same_rules(&cur.rules)
        {
            // Another set was published meanwhile: matched again, against it.
            let k =
                if Arc::ptr_eq(&old, &cur.rules) { k } else { KeepCounts::of(&cur.rules, &rules) };
            let _ = rules.keep.set(k);
        }
        let mut reserved = Vec::new();
        for (i, w) in cur.workers.iter().enumerate() {
            if let Some(w) = w
                && limit > w.capacity
            {
                reserved.push((i, StateMemory::try_new(limit)?));
            }
        }
        for (i, mem) in reserved {
            // A reservation the worker has not taken yet is smaller: replaced.
            if let Some(w) = &mut cur.workers[i] {
                w.capacity = limit;
                w.pending = Some(mem);
            }
        }
        cur.rules = rules;
        Self::push_flushes(&mut cur, flushes);
        // Bumped under the lock: a worker that sees the new generation finds the new set.
        self.generation.fetch_add(1, Ordering::Release);
        drop(cur);
        if let Some(d) = self.decisions.get() {
            d.changed();
        }
        Ok(true)
    }

    /// Voids every decision offloaded to the kernel's fast path (states were killed: their
    /// flows must come back to the pipeline, which finds none).
    pub(super) fn void_decisions(&self) {
        if let Some(d) = self.decisions.get() {
            d.changed();
        }
    }

    /// Hands flush jobs to the workers, the rules unchanged.
    pub(super) fn publish_flushes(&self, flushes: Vec<FlushJob>) {
        if flushes.is_empty() {
            return;
        }
        let mut cur = self.lock();
        Self::push_flushes(&mut cur, flushes);
        // The workers look for flushes when they adopt a generation.
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn push_flushes(cur: &mut Published, flushes: Vec<FlushJob>) {
        for job in flushes {
            cur.flush_seq += 1;
            let seq = cur.flush_seq;
            cur.flushes.push((seq, job));
        }
        // Those every worker took go.
        let taken =
            cur.workers.iter().flatten().map(|w| w.flush_seen).min().unwrap_or(cur.flush_seq);
        cur.flushes.retain(|&(seq, _)| seq > taken);
    }

    pub fn current(&self) -> Arc<CompiledRules> {
        Arc::clone(&self.lock().rules)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Registers a worker's firewall whose table holds `capacity` states: its id, the
    /// generation and the set it starts with; `None` if the current set wants more states
    /// (published since the caller looked).
    pub(super) fn register(&self, capacity: usize) -> Option<(usize, u64, Arc<CompiledRules>)> {
        let mut cur = self.lock();
        if state_limit(&cur.rules.rules) > capacity {
            return None;
        }
        let flush_seen = cur.flush_seq;
        cur.workers.push(Some(WorkerMemory { capacity, pending: None, flush_seen }));
        Some((cur.workers.len() - 1, self.generation(), Arc::clone(&cur.rules)))
    }

    /// The current set and generation for worker `id`, with the memory reserved for it.
    /// The flush jobs worker `id` has not taken are added to `flushes`.
    pub(super) fn adopt(
        &self,
        id: usize,
        flushes: &mut Vec<FlushJob>,
    ) -> (Arc<CompiledRules>, u64, Option<StateMemory>) {
        let mut cur = self.lock();
        let seq = cur.flush_seq;
        let mut seen = seq;
        let mem = cur.workers.get_mut(id).and_then(|w| {
            let w = w.as_mut()?;
            seen = std::mem::replace(&mut w.flush_seen, seq);
            w.pending.take()
        });
        flushes.extend(cur.flushes.iter().filter(|&&(n, _)| n > seen).map(|&(_, job)| job));
        (Arc::clone(&cur.rules), self.generation(), mem)
    }

    pub(super) fn unregister(&self, id: usize) {
        if let Some(w) = self.lock().workers.get_mut(id) {
            *w = None;
        }
    }
}
