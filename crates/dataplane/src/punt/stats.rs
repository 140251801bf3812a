//! Why a punted frame never reached the slow path: one counter per class and reason.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::PuntClass;

/// Why a worker dropped a frame it meant to punt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PuntDrop {
    /// The class's token bucket was empty (for `icmp_error`: the workers' ICMP rate limit).
    Policed,
    /// The class's queue to the slow path was full: the slow path is behind.
    QueueFull,
    /// (`resolve` only) its next hop already had its share of packets waiting for it.
    NextHopLimit,
}

impl PuntDrop {
    pub const ALL: [PuntDrop; 3] = [PuntDrop::Policed, PuntDrop::QueueFull, PuntDrop::NextHopLimit];

    pub fn name(self) -> &'static str {
        match self {
            PuntDrop::Policed => "policed",
            PuntDrop::QueueFull => "queue_full",
            PuntDrop::NextHopLimit => "next_hop_limit",
        }
    }
}

const CLASSES: usize = PuntClass::ALL.len();
const REASONS: usize = PuntDrop::ALL.len();

/// Punt drops as plain numbers, by class and reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PuntDrops {
    counts: [[u64; REASONS]; CLASSES],
}

impl PuntDrops {
    pub fn get(&self, class: PuntClass, reason: PuntDrop) -> u64 {
        self.counts[class as usize][reason as usize]
    }

    pub fn add(&mut self, class: PuntClass, reason: PuntDrop, n: u64) {
        self.counts[class as usize][reason as usize] += n;
    }

    /// Every frame of `class` dropped, whatever the reason.
    pub fn class_total(&self, class: PuntClass) -> u64 {
        self.counts[class as usize].iter().sum()
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().flatten().sum()
    }

    /// `punt_<class>_<reason>` and its count, for every pair that can happen (zeros included).
    pub fn named(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        PuntClass::ALL.into_iter().flat_map(move |c| {
            PuntDrop::ALL
                .into_iter()
                .filter(move |&r| r != PuntDrop::NextHopLimit || c == PuntClass::Resolve)
                .map(move |r| (format!("punt_{}_{}", c.name(), r.name()), self.get(c, r)))
        })
    }
}

/// One worker's punt drops: it alone writes them, anyone reads.
#[derive(Debug, Default)]
pub(super) struct SenderCounters {
    counts: [[AtomicU64; REASONS]; CLASSES],
}

impl SenderCounters {
    pub(super) fn count(&self, class: PuntClass, reason: PuntDrop) {
        self.counts[class as usize][reason as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Every worker's punt drops, for `linerate show drops` and the exit summary.
#[derive(Debug, Clone, Default)]
pub struct PuntStats {
    senders: Arc<Mutex<Vec<Arc<SenderCounters>>>>,
}

impl PuntStats {
    /// Counters for one more sender (a worker's clone of the channel).
    pub(super) fn register(&self) -> Arc<SenderCounters> {
        let c = Arc::new(SenderCounters::default());
        self.senders.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::clone(&c));
        c
    }

    /// The sum over every sender so far.
    pub fn drops(&self) -> PuntDrops {
        let mut out = PuntDrops::default();
        for s in self.senders.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            for c in PuntClass::ALL {
                for r in PuntDrop::ALL {
                    out.add(c, r, s.counts[c as usize][r as usize].load(Ordering::Relaxed));
                }
            }
        }
        out
    }
}
