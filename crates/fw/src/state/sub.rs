//! pf's states of a forwarded flow, held in one entry.
//!
//! pf filters a forwarded packet twice, inbound on its input interface and outbound on its
//! output interface, and a pass that keeps state creates a state *for that pass*. A pf state
//! is keyed by its addresses and ports in the order of the packet that created it, read
//! from the outside in: `(src, dst)` for an inbound packet, `(dst, src)` for an outbound one
//! (pf.c, `pf_state_key_setup`). So a state matches packets in one sense on the way in and
//! replies on the way out, and a forwarded flow normally gets two: an `in` state on the
//! input interface and an `out` state on the output interface.
//!
//! An entry of the table holds the canonical flow and up to two pf states of it, one per
//! orientation: `F_PF_A` is the pf state whose key starts with endpoint A of the canonical
//! key (it decides the inbound pass of A's packets and the outbound pass of B's), `F_PF_B`
//! the other. A packet from endpoint X is inbound-covered by X's pf state and
//! outbound-covered by the other's. One lookup finds both, so an established flow still
//! costs one probe; [`StateTable::sub_states`] tells the caller which pass still needs the
//! rules. Each pf state may be bound to an interface (`set state-policy if-bound`) and may
//! allow IP options (`allow-opts`).
//!
//! What one entry cannot hold: two pf states of the same orientation bound to different
//! interfaces (pf can have them with `if-bound` when a flow changes interface). The first
//! stays; packets of the flow on the other interface then go through the rules each time.

use super::{Entry, F_USED, InsertError, StateId, StateOptions, StateTable, TcpSegment};
use crate::packet::PacketKey;
use crate::state::Flow;

/// The pf state keyed from endpoint A (resp. B) of the canonical key is present.
pub(super) const F_PF_A: u8 = 32;
pub(super) const F_PF_B: u8 = 64;
/// Every pf state in the entry floats (none is bound to an interface).
pub(super) const F_FLOATING: u8 = 128;
const ALLOW_A: u8 = 1;
const ALLOW_B: u8 = 2;

/// Which of pf's passes over a packet created a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    In,
    Out,
}

/// One of pf's states in an entry, as a pass of one packet sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubState {
    /// The interface it is bound to (`None`: floating).
    pub bound: Option<u16>,
    pub allow_opts: bool,
    /// The tag it gives the packets it passes (0: none, they keep theirs).
    pub tag: u8,
}

impl SubState {
    /// Whether it decides a pass on interface `iface`.
    #[inline]
    pub fn on(&self, iface: u16) -> bool {
        self.bound.is_none_or(|b| b == iface)
    }
}

/// The flags a state needs for a packet from endpoint A (`from_a`) or B to be settled by the
/// lookup alone: the pf state of its inbound pass if some rule can act on inbound packets
/// (`has_in`: block or keep state; otherwise the inbound pass passes without state whatever
/// the rules, and nothing is lost by skipping it), the one of its outbound pass likewise,
/// and no binding (a bound state needs the interfaces compared). Indexed by `from_a`.
pub(super) fn want(has_in: bool, has_out: bool) -> [u8; 2] {
    let need = |own: u8, other: u8| {
        F_FLOATING | if has_in { own } else { 0 } | if has_out { other } else { 0 }
    };
    [need(F_PF_B, F_PF_A), need(F_PF_A, F_PF_B)]
}

/// `kif` of a floating pf state (port indices stay far below it).
const FLOAT: u16 = u16::MAX;

/// Adds to `e` the pf state keyed from endpoint A (`from_a`) or B (both if the two ends are
/// the same: then one key serves both orientations). An entry's window tracking is the first
/// state's: `sloppy` applies as that state's rule says.
pub(super) fn add(e: &mut Entry, from_a: bool, opts: StateOptions) {
    if e.key.symmetric() {
        add_one(e, !from_a, opts);
    }
    add_one(e, from_a, opts);
}

pub(super) fn add_one(e: &mut Entry, from_a: bool, opts: StateOptions) {
    let (bit, side) = if from_a { (F_PF_A, 0) } else { (F_PF_B, 1) };
    if e.flags & bit != 0 {
        return;
    }
    e.flags |= bit;
    e.kif[side] = opts.bound.unwrap_or(FLOAT);
    e.tags[side] = opts.tag;
    if opts.allow_opts {
        e.allow |= if from_a { ALLOW_A } else { ALLOW_B };
    }
    let floats = |present: u8, kif: u16| e.flags & present == 0 || kif == FLOAT;
    let floating = floats(F_PF_A, e.kif[0]) && floats(F_PF_B, e.kif[1]);
    e.flags = (e.flags & !F_FLOATING) | if floating { F_FLOATING } else { 0 };
}

/// Adds to `e` the pf state of the other orientation than the one keyed from endpoint A
/// (`from_a`) or B, with the same binding, tag and `allow-opts` (`synproxy state`: the one
/// pf state of a proxied connection covers both sides, `proxy.rs`).
pub(super) fn mirror(e: &mut Entry, from_a: bool) {
    let Some(s) = sub_state(e, from_a) else { return };
    let opts = StateOptions {
        bound: s.bound,
        allow_opts: s.allow_opts,
        tag: s.tag,
        ..StateOptions::default()
    };
    add_one(e, !from_a, opts);
}

pub(super) fn sub_state(e: &Entry, from_a: bool) -> Option<SubState> {
    let (bit, side, allow) = if from_a { (F_PF_A, 0, ALLOW_A) } else { (F_PF_B, 1, ALLOW_B) };
    (e.flags & bit != 0).then(|| SubState {
        bound: (e.kif[side] != FLOAT).then_some(e.kif[side]),
        allow_opts: e.allow & allow != 0,
        tag: e.tags[side],
    })
}

impl StateTable {
    /// Says which of pf's passes the rules can act on (see `want`): a rule set's property,
    /// set when the table takes a rule set. It decides which hits are settled.
    pub fn set_passes(&mut self, has_in: bool, has_out: bool) {
        let w = want(has_in, has_out);
        if w != self.want {
            // What settles a packet changed: no quick hit until each entry's next update.
            super::quick::clear_steady(&mut self.slots);
            self.want = w;
        }
    }

    /// Whether entry `id` settles a packet sent by endpoint A (`from_a`) or B of its key, as
    /// [`FlowHit::settled`](super::FlowHit::settled) says for the fast path's lookups.
    pub fn settled(&self, id: StateId, from_a: bool) -> bool {
        let want = self.want[usize::from(from_a)];
        self.slots.get(id.0 as usize).is_some_and(|e| e.flags & want == want)
    }

    /// pf's states in entry `id` for a packet sent by endpoint A of the key (`from_a`) or
    /// B: `[inbound, outbound]`, the states that decide its inbound and outbound passes.
    /// `None` for a free slot.
    pub fn sub_states(&self, id: StateId, from_a: bool) -> Option<[Option<SubState>; 2]> {
        let e = self.slots.get(id.0 as usize).filter(|e| e.flags & F_USED != 0)?;
        Some([sub_state(e, from_a), sub_state(e, !from_a)])
    }

    /// [`sub_states`](Self::sub_states) for a packet of `key` if entry `id` is still its
    /// flow's (a state found earlier in a batch may have been replaced since).
    pub fn sub_states_of(&self, id: StateId, key: &PacketKey) -> Option<[Option<SubState>; 2]> {
        let f = Flow::of(key);
        let e =
            self.slots.get(id.0 as usize).filter(|e| e.flags & F_USED != 0 && e.key == f.key)?;
        Some([sub_state(e, f.from_a), sub_state(e, !f.from_a)])
    }

    /// pf's `keep state` for a packet of `key` (its source is the sender) in pass `pass`:
    /// adds the pf state of that pass to the flow's entry, creating the entry if there is
    /// none (the packet's sender then initiates it). Adding a state the entry holds already
    /// changes nothing. Returns the entry and whether a pf state was added; `Full` when a
    /// new entry does not fit.
    pub fn keep(
        &mut self,
        key: &PacketKey,
        rule: u32,
        now: u32,
        tcp: Option<&TcpSegment>,
        opts: StateOptions,
        pass: Pass,
    ) -> Result<(StateId, bool), InsertError> {
        let id = match self.create(key, rule, now, tcp, opts) {
            Ok(id) => id,
            Err(InsertError::Exists(id)) => id.0 as usize,
            Err(e) => return Err(e),
        };
        // The inbound pass's state is keyed from the sender, the outbound's from the receiver.
        let from_a = Flow::of(key).from_a ^ (pass == Pass::Out);
        let e = &mut self.slots[id];
        let before = e.flags;
        add(e, from_a, StateOptions { bound: opts.bound.map(|b| b.min(FLOAT - 1)), ..opts });
        if e.key.proto() == crate::packet::proto::UDP {
            super::quick::mark_steady(e, self.want);
        }
        Ok((StateId(id as u32), e.flags != before))
    }
}
