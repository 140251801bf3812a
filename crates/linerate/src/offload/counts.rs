//! The fast path's counts of offloaded flows, read back from the program's entries once a
//! second and credited to the rule counters of the worker that offered each flow
//! (`dataplane::offload::Credit`): a rule's counters then hold every packet it passed,
//! whichever path forwarded it.
//!
//! An entry that will count no more (its generation is past, or its time is up) is read a
//! last time and removed, so that entries never outlive their decision. An entry about to be
//! replaced is read first. What an entry counted between its last read and its eviction by
//! the table (full: more flows than `fast_path_flows`) is lost, and counted as such.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use dataplane::offload::{ControlQueues, CountedUnder, Credit};
use io::xdp::fastpath::{FastPath, FlowEntry, FlowKey};

use super::OffloadStats;

/// One installed entry: who offered it, what its packets are counted under, and what it had
/// counted when last read.
struct Tracked {
    worker: usize,
    counted: CountedUnder,
    generation: u32,
    packets: u64,
    bytes: u64,
    /// Seen in the current walk of the table.
    seen: bool,
}

/// The entries installed, and the credits their workers' queues had no room for yet.
#[derive(Default)]
pub(super) struct Counts {
    tracked: HashMap<FlowKey, Tracked>,
    backlog: Vec<Vec<Credit>>,
}

impl Counts {
    /// An entry is about to be written for `key`: what the one it replaces counted since its
    /// last read is credited first.
    pub(super) fn replacing(&mut self, fast: &FastPath, key: &FlowKey) {
        if self.tracked.contains_key(key)
            && let Ok(Some(e)) = fast.lookup(key)
        {
            self.read(key, &e);
        }
    }

    /// The entry for `key` was written from `worker`'s offer.
    pub(super) fn installed(
        &mut self,
        key: FlowKey,
        worker: usize,
        counted: CountedUnder,
        generation: u32,
    ) {
        let t = Tracked { worker, counted, generation, packets: 0, bytes: 0, seen: true };
        self.tracked.insert(key, t);
    }

    /// Credits what `e` counted since it was last read.
    fn read(&mut self, key: &FlowKey, e: &FlowEntry) {
        let Some(t) = self.tracked.get_mut(key) else { return };
        t.seen = true;
        if e.generation != t.generation || e.packets < t.packets {
            return; // another entry than the one installed: not ours to count
        }
        let credit = Credit {
            counted: t.counted,
            packets: e.packets - t.packets,
            bytes: e.bytes.saturating_sub(t.bytes),
        };
        (t.packets, t.bytes) = (e.packets, e.bytes);
        if credit.packets == 0 {
            return;
        }
        if self.backlog.len() <= t.worker {
            self.backlog.resize_with(t.worker + 1, Vec::new);
        }
        self.backlog[t.worker].push(credit);
    }

    /// Reads every entry of the program: credits what each counted, removes those that will
    /// count no more (`generation` is the decisions' now; `now_ns`: CLOCK_MONOTONIC), and
    /// forgets those the table evicted.
    pub(super) fn harvest(
        &mut self,
        fast: &FastPath,
        generation: u32,
        now_ns: u64,
        stats: &OffloadStats,
    ) {
        let mut done = Vec::new();
        let walked = fast.for_each_flow(|key, e| {
            self.read(key, e);
            let expired = e.flags & FlowEntry::EXPIRES != 0 && e.expires < now_ns;
            if e.generation != generation || expired {
                done.push(*key);
            }
        });
        if walked.is_err() {
            return; // read again next round; nothing is forgotten
        }
        for key in &done {
            if fast.remove(key).is_ok() {
                self.tracked.remove(key);
                stats.retired.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.tracked.retain(|_, t| {
            let kept = std::mem::replace(&mut t.seen, false);
            if !kept {
                stats.evicted.fetch_add(1, Ordering::Relaxed);
            }
            kept
        });
    }

    /// Hands the credits to their workers, as far as their queues take them.
    pub(super) fn send(&mut self, queues: &mut [ControlQueues], stats: &OffloadStats) {
        for (credits, q) in self.backlog.iter_mut().zip(queues.iter_mut()) {
            let mut sent = 0;
            for c in credits.iter() {
                if !q.credits.push_with(|slot| *slot = *c) {
                    break;
                }
                stats.credited.fetch_add(c.packets, Ordering::Relaxed);
                sent += 1;
            }
            credits.drain(..sent);
        }
    }
}
