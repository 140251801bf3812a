//! State synchronisation's side in a worker (issue 43): what changed in the worker's state
//! table since it last looked, exported for the peer, and a peer's states taken in, both
//! between batches. The threads that send and receive them, the wire format (`crates/ha`)
//! and which worker owns a peer's state are the caller's.

use fw::state::{ImportError, Imported, StateChange, StateEnds, StateSnapshot};

use super::Firewall;

/// One item of state sync, either way: a state (new or changed), or a flow whose state is
/// gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncItem {
    State(StateSnapshot),
    Removed { proto: u8, ends: StateEnds },
}

/// What a worker did with a peer's items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncInCounts {
    pub inserted: u64,
    pub updated: u64,
    /// Updates older than the state here (pfsync's stale updates): not applied where ours
    /// is ahead.
    pub stale: u64,
    pub removed: u64,
    /// Refused: the table was full, or the state's ends were of two families.
    pub refused: u64,
}

impl Firewall {
    /// Starts recording the state table's changes for a peer, at most `journal` between two
    /// [`sync_changes`](Self::sync_changes).
    pub fn enable_sync(&mut self, journal: usize) {
        self.states.enable_journal(journal);
    }

    /// Appends to `out` what changed since the last call (`scratch`: reused between calls).
    /// Returns true if changes were lost (the journal was full): the caller then sends every
    /// state ([`sync_states_in`](Self::sync_states_in), a stretch at a time).
    pub fn sync_changes(
        &mut self,
        out: &mut Vec<SyncItem>,
        scratch: &mut Vec<StateChange>,
    ) -> bool {
        scratch.clear();
        let lost = self.states.take_changes(scratch);
        for c in scratch.iter() {
            match *c {
                StateChange::Changed(id) => {
                    out.extend(self.states.export(id, self.now).map(SyncItem::State))
                }
                StateChange::Removed { proto, ends } => out.push(SyncItem::Removed { proto, ends }),
            }
        }
        lost
    }

    /// A bulk update's stretch: the states among slots `slots`, appended to `out`. Returns
    /// the slots the table has, where the walk ends.
    pub fn sync_states_in(&self, slots: std::ops::Range<usize>, out: &mut Vec<SyncItem>) -> usize {
        let t = &self.states;
        out.extend(t.states_in(slots).filter_map(|id| t.export(id, self.now)).map(SyncItem::State));
        t.slot_count()
    }

    /// Takes a peer's items into the state table, counting what became of them.
    pub fn sync_in(&mut self, items: &[SyncItem], counts: &mut SyncInCounts) {
        for item in items {
            match item {
                SyncItem::State(s) => match self.states.import(s, self.now) {
                    Ok(Imported::Inserted(_)) => counts.inserted += 1,
                    Ok(Imported::Updated(_)) => counts.updated += 1,
                    Ok(Imported::Stale(_)) => counts.stale += 1,
                    Err(ImportError::Full | ImportError::MixedFamilies) => counts.refused += 1,
                },
                SyncItem::Removed { proto, ends } => {
                    counts.removed += u64::from(self.states.remove_flow(*proto, ends));
                }
            }
        }
    }
}
