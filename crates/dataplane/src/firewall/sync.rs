//! State synchronisation's side in a worker (issue 43): what changed in the worker's state
//! table since it last looked, exported for the peer, and a peer's states taken in, both
//! between batches. The threads that send and receive them, the wire format (`crates/ha`)
//! and which worker owns a peer's state are the caller's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use fw::state::{ImportError, Imported, StateChange, StateEnds, StateSnapshot};

use super::Firewall;
use super::route_hosts::port_toward;
pub use super::sync_nat::{NatSnapshot, NatTables};
use super::sync_nat::{session_of, session6_of, translation_of};

/// One item of state sync, either way: a state (new or changed), or a flow whose state is
/// gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncItem {
    /// With its NAT translation, if it has one ([`NatSnapshot`]).
    State(StateSnapshot, Option<NatSnapshot>),
    Removed {
        proto: u8,
        ends: StateEnds,
    },
    /// A worker's bulk update is complete (pfsync's BUS end, per worker).
    BulkEnd,
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
    /// Translations added to the NAT table with their states.
    pub translations: u64,
    /// Translations refused: the NAT table was full, or no route leads to the side the
    /// translation faces (the state is kept, its translated packets are not).
    pub translations_refused: u64,
}

impl Firewall {
    /// Starts recording the state table's changes for a peer, at most `journal` between two
    /// [`sync_changes`](Self::sync_changes).
    pub fn enable_sync(&mut self, journal: usize) {
        self.states.enable_journal(journal);
    }

    /// Appends to `out` what changed since the last call (`scratch`: reused between calls),
    /// with their translations in `nat`. Returns true if changes were lost (the journal was
    /// full): the caller then sends every state ([`sync_states_in`](Self::sync_states_in), a
    /// stretch at a time).
    pub fn sync_changes(
        &mut self,
        out: &mut Vec<SyncItem>,
        scratch: &mut Vec<StateChange>,
        nat: Option<&NatTables>,
    ) -> bool {
        scratch.clear();
        let lost = self.states.take_changes(scratch);
        for c in scratch.iter() {
            match *c {
                StateChange::Changed(id) => {
                    out.extend(self.states.export(id, self.now).map(|s| with_nat(s, nat)))
                }
                StateChange::Removed { proto, ends } => out.push(SyncItem::Removed { proto, ends }),
            }
        }
        lost
    }

    /// A bulk update's stretch: the states among slots `slots`, appended to `out`. Returns
    /// the slots the table has, where the walk ends.
    pub fn sync_states_in(
        &self,
        slots: std::ops::Range<usize>,
        out: &mut Vec<SyncItem>,
        nat: Option<&NatTables>,
    ) -> usize {
        let t = &self.states;
        let states = t.states_in(slots).filter_map(|id| t.export(id, self.now));
        out.extend(states.map(|s| with_nat(s, nat)));
        t.slot_count()
    }

    /// Takes a peer's items into the state table, and their translations into `nat`,
    /// counting what became of them.
    pub fn sync_in(
        &mut self,
        items: &[SyncItem],
        counts: &mut SyncInCounts,
        mut nat: Option<&mut NatTables>,
    ) {
        for item in items {
            match item {
                SyncItem::State(s, t) => {
                    match self.states.import(s, self.now) {
                        Ok(Imported::Inserted(_)) => counts.inserted += 1,
                        Ok(Imported::Updated(_)) => counts.updated += 1,
                        Ok(Imported::Stale(_)) => counts.stale += 1,
                        Err(ImportError::Full | ImportError::MixedFamilies) => {
                            counts.refused += 1;
                            continue;
                        }
                    }
                    if let (Some(t), Some(table)) = (t, nat.as_deref_mut()) {
                        self.import_translation(s, t, table, counts);
                    }
                }
                SyncItem::Removed { proto, ends } => {
                    counts.removed += u64::from(self.states.remove_flow(*proto, ends));
                }
                SyncItem::BulkEnd => {}
            }
        }
    }

    /// A peer's translation of state `s`, into `table` on the interface the route toward
    /// its translated side leaves by (the boxes need not number or name interfaces alike).
    fn import_translation(
        &self,
        s: &StateSnapshot,
        t: &NatSnapshot,
        tables: &mut NatTables,
        counts: &mut SyncInCounts,
    ) {
        let facing = if t.responder { s.ends.initiator.addr } else { s.ends.responder.addr };
        let iface = self.fib.as_deref().and_then(|fib| port_toward(fib, facing));
        let imported = iface.and_then(|i| match t.addr {
            std::net::IpAddr::V4(_) => session_of(s, t, i, self.now).map(|s| tables.v4.import(s)),
            std::net::IpAddr::V6(_) => session6_of(s, t, i, self.now).map(|s| tables.v6.import(s)),
        });
        match imported {
            Some(Ok(true)) => counts.translations += 1,
            Some(Ok(false)) => {}
            Some(Err(_)) | None => counts.translations_refused += 1,
        }
    }
}

/// A state as sync sends it: with its translation in `nat`, if it has one.
fn with_nat(s: StateSnapshot, nat: Option<&NatTables>) -> SyncItem {
    SyncItem::State(s, nat.and_then(|t| translation_of(t.v4, t.v6, &s)))
}

/// Slots a worker walks per poll during a bulk update (as for operators' requests, short
/// against what a receive ring holds).
const BULK_SLOTS_PER_POLL: usize = super::requests::SLOTS_PER_POLL;

/// Batches of items a worker's outbound channel holds before it counts them lost (and sends
/// the whole table instead).
pub const OUT_BATCHES: usize = 256;

/// What a worker's state sync did, published for `show` and the metrics.
#[derive(Debug, Default)]
pub struct SyncStats {
    pub sent: AtomicU64,
    /// Times changes were lost (journal full, or the channel to the sync thread full) and a
    /// bulk update replaced them.
    pub lost: AtomicU64,
    pub bulk_updates: AtomicU64,
    pub inserted: AtomicU64,
    pub updated: AtomicU64,
    pub stale: AtomicU64,
    pub removed: AtomicU64,
    pub refused: AtomicU64,
    pub translations: AtomicU64,
    pub translations_refused: AtomicU64,
}

/// A worker's end of state sync: its changes out to the sync thread, a peer's items in,
/// served between batches ([`SyncPort::serve`]).
pub struct SyncPort {
    out: SyncSender<Vec<SyncItem>>,
    inbox: Receiver<Vec<SyncItem>>,
    /// Set by the sync thread when a peer asks for every state.
    bulk_wanted: Arc<AtomicBool>,
    /// The next slot of a bulk update under way.
    bulk_at: Option<usize>,
    pending: Vec<SyncItem>,
    scratch: Vec<StateChange>,
    pub stats: Arc<SyncStats>,
}

impl SyncPort {
    pub fn new(
        out: SyncSender<Vec<SyncItem>>,
        inbox: Receiver<Vec<SyncItem>>,
        bulk_wanted: Arc<AtomicBool>,
    ) -> SyncPort {
        SyncPort {
            out,
            inbox,
            bulk_wanted,
            bulk_at: None,
            pending: Vec::new(),
            scratch: Vec::new(),
            stats: Arc::default(),
        }
    }

    /// Between batches: a peer's items taken, this worker's changes (or the next stretch of
    /// a bulk update) sent, with the translations of its NAT table `nat`. Returns whether a
    /// bulk update is under way (the worker then does not sleep).
    pub fn serve(&mut self, fw: Option<(&mut Firewall, NatTables)>) -> bool {
        let Some((fw, mut nat)) = fw else { return false };
        self.take_in(fw, &mut nat);
        if fw.sync_changes(&mut self.pending, &mut self.scratch, Some(&nat))
            || self.bulk_wanted.swap(false, Ordering::Relaxed)
        {
            self.start_bulk();
        }
        if let Some(at) = self.bulk_at {
            let range = at..at + BULK_SLOTS_PER_POLL;
            let slots = fw.sync_states_in(range, &mut self.pending, Some(&nat));
            self.bulk_at = (at + BULK_SLOTS_PER_POLL < slots).then_some(at + BULK_SLOTS_PER_POLL);
            if self.bulk_at.is_none() {
                self.pending.push(SyncItem::BulkEnd);
            }
        }
        self.send();
        self.bulk_at.is_some()
    }

    fn start_bulk(&mut self) {
        if self.bulk_at.is_none() {
            self.stats.bulk_updates.fetch_add(1, Ordering::Relaxed);
        }
        self.bulk_at = Some(0);
    }

    /// At most a few batches of a peer's items per poll, so that a flood of them never holds
    /// up the worker's traffic for long.
    fn take_in(&mut self, fw: &mut Firewall, nat: &mut NatTables) {
        let mut counts = SyncInCounts::default();
        for _ in 0..4 {
            let Ok(items) = self.inbox.try_recv() else { break };
            fw.sync_in(&items, &mut counts, Some(&mut *nat));
        }
        let s = &self.stats;
        for (a, n) in [
            (&s.inserted, counts.inserted),
            (&s.updated, counts.updated),
            (&s.stale, counts.stale),
            (&s.removed, counts.removed),
            (&s.refused, counts.refused),
            (&s.translations, counts.translations),
            (&s.translations_refused, counts.translations_refused),
        ] {
            if n > 0 {
                a.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    fn send(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let n = self.pending.len() as u64;
        match self.out.try_send(std::mem::take(&mut self.pending)) {
            Ok(()) => {
                self.stats.sent.fetch_add(n, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) => {
                // Lost: the whole table follows, which the peer merges (nothing rolls back).
                self.stats.lost.fetch_add(1, Ordering::Relaxed);
                self.start_bulk();
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}
