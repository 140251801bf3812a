//! Which states changed since the sync layer last asked (state synchronisation, issue 43):
//! what pfsync sends as INS, UPD and DEL. Off unless [`StateTable::enable_journal`] is
//! called: a table without one pays a test of an `Option` where a state is created, changes
//! its timeout class or is removed, never per packet otherwise.
//!
//! Recorded: a new state, a state whose timeout class changed (a TCP state's transition:
//! opening, established, closing; UDP's first, single, multiple), a state removed by an
//! operator or a rule (`kill states`, `flush`, `overload ... flush`) with its flow, since
//! its slot is gone by the time the journal is read; and a state a packet refreshed (its
//! deadline, a TCP window moved on), once a second at most per state, as pfsync sends each
//! live state at least once a second: the peer's copy then keeps the deadline and the window
//! a takeover needs. Not recorded: expiry (the peer's copy expires on its own clock).

use super::{StateEnds, StateId, StateTable};

/// A change the journal recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateChange {
    /// State `id` is new or changed: export it.
    Changed(StateId),
    /// The state of this flow was removed.
    Removed { proto: u8, ends: StateEnds },
}

/// The table's record of changes, bounded: past `cap` entries it stops recording and says
/// so, and the sync layer then sends the whole table (pfsync's bulk update).
pub(super) struct Journal {
    changes: Vec<StateChange>,
    cap: usize,
    overflowed: bool,
    /// One bit per slot: refreshed states recorded in second `period` already.
    refreshed: Vec<u64>,
    period: u32,
}

impl Journal {
    fn push(&mut self, c: StateChange) {
        if self.changes.len() >= self.cap {
            self.overflowed = true;
            return;
        }
        self.changes.push(c);
    }

    /// A packet refreshed state `id` at second `now`: recorded if it was not this second.
    #[inline]
    fn refreshed(&mut self, id: usize, now: u32) {
        if now != self.period {
            self.refreshed.fill(0);
            self.period = now;
        }
        let (w, bit) = (id / 64, 1u64 << (id % 64));
        if w >= self.refreshed.len() {
            self.refreshed.resize(w + 1, 0);
        }
        if self.refreshed[w] & bit == 0 {
            self.refreshed[w] |= bit;
            self.push(StateChange::Changed(StateId(id as u32)));
        }
    }
}

impl StateTable {
    /// Starts recording changes, at most `cap` between two [`take_changes`](Self::take_changes).
    pub fn enable_journal(&mut self, cap: usize) {
        let cap = cap.max(1);
        self.journal = Some(Box::new(Journal {
            changes: Vec::with_capacity(cap),
            cap,
            overflowed: false,
            refreshed: vec![0; self.slots.len().div_ceil(64)],
            period: 0,
        }));
    }

    /// Moves the recorded changes into `out`, in order, each state once at its last change
    /// (a flow removed and created again in the same slot goes out as the removal, then
    /// the new state). Returns true if changes were lost since the last call (the journal
    /// was full): the caller then sends every state.
    pub fn take_changes(&mut self, out: &mut Vec<StateChange>) -> bool {
        let Some(j) = self.journal.as_deref_mut() else { return false };
        let mut seen = std::collections::HashSet::with_capacity(j.changes.len());
        let start = out.len();
        out.extend(j.changes.drain(..).rev().filter(|c| match c {
            StateChange::Changed(id) => seen.insert(id.0),
            StateChange::Removed { .. } => true,
        }));
        out[start..].reverse();
        std::mem::take(&mut j.overflowed)
    }

    /// Records that entry `id` is new or changed.
    #[inline]
    pub(super) fn journal_changed(&mut self, id: usize) {
        if let Some(j) = self.journal.as_deref_mut() {
            j.push(StateChange::Changed(StateId(id as u32)));
        }
    }

    /// Whether the table records its changes (state sync is on). The quick loop of UDP hits
    /// does not record refreshes: the data plane leaves such hits to the general lookup then.
    #[inline]
    pub fn journaling(&self) -> bool {
        self.journal.is_some()
    }

    /// Records that a packet refreshed entry `id` at `now` (once a second per entry).
    #[inline]
    pub(super) fn journal_refreshed(&mut self, id: usize, now: u32) {
        if let Some(j) = self.journal.as_deref_mut() {
            j.refreshed(id, now);
        }
    }

    /// Records that entry `id` is about to be removed.
    #[cold]
    pub(super) fn journal_removed(&mut self, id: usize) {
        if self.journal.is_none() {
            return;
        }
        let proto = self.slots[id].key.proto();
        if let (Some(ends), Some(j)) = (self.ends(StateId(id as u32)), self.journal.as_deref_mut())
        {
            j.push(StateChange::Removed { proto, ends });
        }
    }

    /// Runs `f` without recording (a peer's states coming in must not go back out).
    pub(super) fn unjournaled<T>(&mut self, f: impl FnOnce(&mut StateTable) -> T) -> T {
        let j = self.journal.take();
        let r = f(self);
        self.journal = j;
        r
    }
}
