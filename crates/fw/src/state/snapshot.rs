//! A state as it leaves one table and enters another: what state synchronisation between
//! two routers carries (issue 43, pfsync's INS and UPD), in the table's own terms but with
//! no slot id and no absolute clock (the two boxes' clocks differ).
//!
//! Not carried (the importing box derives or lacks them): the quick loop's bits and the
//! per-rule timeout profile (derived from the rule on import), counts held for `max` and
//! source tracking, states in `synproxy state`'s handshake, and `modulate state`'s offsets
//! (the responder's is derived under the table's own secret): [`StateTable::export`] leaves
//! those states out.

use super::sub::{self, SubState};
use super::{
    Class, Entry, F_INIT_B, F_SLOPPY, Flow, InsertError, StateEnds, StateId, StateOptions,
    StateTable, Tmo, class, quick::mark_steady, tcp::Peer,
};
use crate::packet::proto;

/// One end's TCP tracking (pf's `pf_state_peer` without scrub data); for other protocols
/// only `state`, its pseudo-state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerSnapshot {
    pub seqlo: u32,
    pub seqhi: u32,
    pub max_win: u16,
    pub wscale: u8,
    pub state: u8,
}

/// A state out of its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateSnapshot {
    pub proto: u8,
    /// The endpoints as the key holds them (for ICMP, pf's mapping of the query id and type).
    pub ends: StateEnds,
    /// The index of the rule that created it, in the exporting box's rule set.
    pub rule: u32,
    pub timeout: Tmo,
    /// Seconds until it expires.
    pub expires_in: u32,
    pub sloppy: bool,
    /// The initiator's and the responder's tracking.
    pub peers: [PeerSnapshot; 2],
    /// pf's state keyed from the initiator's end and the one keyed from the responder's
    /// (see `sub.rs`): present or not, bound or floating, tag, `allow-opts`.
    pub pf_states: [Option<SubState>; 2],
}

/// Why [`StateTable::import`] refused a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The table holds its limit of states.
    #[error("state table full")]
    Full,
    /// The two ends are of different address families.
    #[error("the state's ends are of different address families")]
    MixedFamilies,
}

/// What [`StateTable::import`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// A new state.
    Inserted(StateId),
    /// The flow's state took the snapshot's tracking and expiry.
    Updated(StateId),
    /// The flow's state is ahead of the snapshot on some end (pfsync's stale update: a
    /// peer's TCP state and `seqlo` never move backwards); what is newer in it was taken.
    Stale(StateId),
}

impl From<Peer> for PeerSnapshot {
    fn from(p: Peer) -> PeerSnapshot {
        PeerSnapshot {
            seqlo: p.seqlo,
            seqhi: p.seqhi,
            max_win: p.max_win,
            wscale: p.wscale,
            state: p.state,
        }
    }
}

impl From<PeerSnapshot> for Peer {
    fn from(p: PeerSnapshot) -> Peer {
        Peer {
            seqlo: p.seqlo,
            seqhi: p.seqhi,
            max_win: p.max_win,
            wscale: p.wscale,
            state: p.state,
        }
    }
}

/// Whether `ours` is ahead of `theirs` (pfsync_upd_tcp: a later TCP state, or the same
/// state with a later `seqlo`, modulo 2^32).
fn ahead(ours: &Peer, theirs: &Peer) -> bool {
    ours.state > theirs.state
        || (ours.state == theirs.state && (ours.seqlo.wrapping_sub(theirs.seqlo) as i32) > 0)
}

impl StateTable {
    /// State `id` as a snapshot at time `now`, or `None` if it is dead, free, or of a kind
    /// that does not travel (module documentation).
    pub fn export(&self, id: StateId, now: u32) -> Option<StateSnapshot> {
        let i = id.0 as usize;
        let e = self.slots.get(i)?;
        let ends = self.ends(id)?;
        if self.dead(i, now) || e.proxy() != 0 || e.seqdiff != 0 {
            return None;
        }
        let init_a = e.flags & F_INIT_B == 0;
        let peers = match class(e.key.proto()) {
            Class::Tcp => self.tcp[i].map(PeerSnapshot::from),
            _ => e.pseudo.map(|state| PeerSnapshot { state, ..PeerSnapshot::default() }),
        };
        Some(StateSnapshot {
            proto: e.key.proto(),
            ends,
            rule: e.rule,
            timeout: Tmo::ALL.get(usize::from(e.tmo)).copied().unwrap_or(Tmo::ALL[0]),
            expires_in: e.expire.saturating_sub(now),
            sloppy: e.flags & F_SLOPPY != 0,
            peers,
            pf_states: [sub::sub_state(e, init_a), sub::sub_state(e, !init_a)],
        })
    }

    /// Takes a peer's snapshot: a new state for its flow, or the flow's state updated as
    /// pfsync updates one. The table's limit holds.
    pub fn import(&mut self, s: &StateSnapshot, now: u32) -> Result<Imported, ImportError> {
        let flow = Flow::of_ends(s.proto, &s.ends).ok_or(ImportError::MixedFamilies)?;
        let created =
            self.unjournaled(|t| t.create_flow(&flow, s.rule, now, None, StateOptions::default()));
        match created {
            Ok(i) => {
                self.fill(i, s, flow.from_a, now);
                Ok(Imported::Inserted(StateId(i as u32)))
            }
            Err(InsertError::Exists(id)) => Ok(self.merge(id, s, flow.from_a, now)),
            Err(InsertError::Full) => Err(ImportError::Full),
        }
    }

    /// Removes the state of a peer's removed flow (its `proto` and `ends` as
    /// [`StateTable::ends`] gives them). False if there is none.
    pub fn remove_flow(&mut self, proto: u8, ends: &StateEnds) -> bool {
        let Some(flow) = Flow::of_ends(proto, ends) else { return false };
        let h = self.hash(&flow.key);
        let Ok(found) = self.find(&flow.key, h) else { return false };
        let id = StateId(found.id as u32);
        self.unjournaled(|t| t.remove(id))
    }

    /// A new entry made what the snapshot says (`init_a`: the initiator is endpoint A).
    fn fill(&mut self, i: usize, s: &StateSnapshot, init_a: bool, now: u32) {
        let tcp = class(s.proto) == Class::Tcp;
        let e = &mut self.slots[i];
        e.flags &= !F_SLOPPY;
        if s.sloppy {
            e.flags |= F_SLOPPY;
        }
        if tcp {
            self.tcp[i] = s.peers.map(Peer::from);
            e.pseudo = [0, super::PICK_UP];
        } else {
            e.pseudo = s.peers.map(|p| p.state);
        }
        e.tmo = s.timeout as u8;
        e.expire = now.saturating_add(s.expires_in);
        add_pf_states(e, s, init_a);
        if s.proto == proto::UDP {
            mark_steady(e, self.want);
        }
    }

    /// The flow's state `id` updated from the snapshot: each end's tracking unless ours is
    /// ahead, the later expiry, and pf states it lacks.
    fn merge(&mut self, id: StateId, s: &StateSnapshot, init_a: bool, now: u32) -> Imported {
        let i = id.0 as usize;
        let mut stale = false;
        if class(s.proto) == Class::Tcp {
            for (ours, theirs) in self.tcp[i].iter_mut().zip(s.peers.map(Peer::from)) {
                if ahead(ours, &theirs) {
                    stale = true;
                } else {
                    *ours = theirs;
                }
            }
            let e = &mut self.slots[i];
            if !stale && e.proxy() == 0 {
                e.pseudo[1] = super::PICK_UP;
            }
        } else {
            let e = &mut self.slots[i];
            for (ours, theirs) in e.pseudo.iter_mut().zip(s.peers) {
                stale |= *ours > theirs.state;
                *ours = (*ours).max(theirs.state);
            }
        }
        let e = &mut self.slots[i];
        e.expire = e.expire.max(now.saturating_add(s.expires_in));
        add_pf_states(e, s, init_a);
        if s.proto == proto::UDP {
            mark_steady(e, self.want);
        }
        if stale { Imported::Stale(id) } else { Imported::Updated(id) }
    }
}

/// Adds the snapshot's pf states the entry lacks, each keyed from its end.
fn add_pf_states(e: &mut Entry, s: &StateSnapshot, init_a: bool) {
    for (pf, from_a) in s.pf_states.iter().zip([init_a, !init_a]) {
        if let Some(p) = pf {
            let opts = StateOptions {
                bound: p.bound,
                allow_opts: p.allow_opts,
                tag: p.tag,
                ..StateOptions::default()
            };
            sub::add_one(e, from_a, opts);
        }
    }
}
