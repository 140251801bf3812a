//! The fast path's first loop: hits of established UDP flows (IPv4 and IPv6), the bulk of a
//! stateful firewall's traffic, found with nothing but a probe and a deadline refresh.
//!
//! A UDP state's pseudo-states and timeout kind change only on some packets: after a packet
//! from one endpoint, the next packet from the same endpoint changes nothing (pf's update is
//! idempotent), and once both ends are MULTIPLE no packet changes anything. Each entry keeps
//! two *steady* bits, one per endpoint of its key, set when a UDP packet from that endpoint
//! would only move the deadline and the entry settles such a packet (`sub.rs`)
//! ([`mark_steady`], recomputed by every full update). A
//! [`QuickHits`] lookup takes a packet only when its state is live and steady for its sender;
//! anything else (a miss, a dead or non-steady state, TCP) is left to the general lookup.
//!
//! The data plane runs [`QuickHits`] over a whole batch first, then the general path over the
//! packets it left, in order. That is the outcome of looking every packet up in order: a
//! quick hit changes only its state's deadline, to the same value within a batch (one `now`);
//! and when it leaves a packet whose state it found, it clears that state's steady bits, so
//! that every later packet of the flow in the batch is left to the general path too, in
//! order. The general path cannot remove or change a live UDP state of another flow (it only
//! removes dead states and TCP states). The caller must leave, with everything after it, any
//! packet whose full key could name a UDP state but that it does not give to the quick loop
//! (the data plane: an IPv4 UDP packet with IP options, a fragment, an odd UDP length).

use super::index::{find_key, find_v4, home_of};
use super::{Entry, F_INIT_B, Flow, FlowV4, StateTable, Tmo, adaptive_cut, pseudo_states};
use crate::state::flow::FlowHasher;

/// The most packets one [`QuickHits`] may look up (the data plane's batch): what the quick
/// loop allows for when pf's adaptive scaling makes a state's life depend on the count.
pub const QUICK_BATCH_MAX: usize = 256;

/// A UDP packet from endpoint A (resp. B) of the key changes nothing but the deadline.
pub(super) const F_STEADY_A: u8 = 8;
pub(super) const F_STEADY_B: u8 = 16;
const F_STEADY: u8 = F_STEADY_A | F_STEADY_B;

/// Recomputes a UDP entry's steady bits from its pseudo-states and timeout kind (after a full
/// update, an insert, a pf state added), and from whether the entry settles a packet of that
/// sender (`want`: [`StateTable`]'s, see `sub.rs`): only then may the quick loop take it.
/// A state under its rule's own timeouts is never steady: the quick loop refreshes by the
/// table's.
#[inline]
pub(super) fn mark_steady(e: &mut Entry, want: [u8; 2]) {
    if e.profile != 0 || e.allow & super::RULE_ADAPTIVE != 0 {
        e.flags &= !F_STEADY;
        return;
    }
    steady_bits(e, want);
}

/// [`mark_steady`] for an entry under the table's timeouts.
#[inline]
pub(super) fn steady_bits(e: &mut Entry, want: [u8; 2]) {
    let mut bits = 0;
    for (from_a, bit) in [(true, F_STEADY_A), (false, F_STEADY_B)] {
        let mut pseudo = e.pseudo;
        let both_multiple = pseudo_states(&mut pseudo, from_a ^ (e.flags & F_INIT_B != 0));
        let tmo = if both_multiple { Tmo::UdpMultiple } else { Tmo::UdpSingle };
        let settles = e.flags & want[usize::from(from_a)] == want[usize::from(from_a)];
        if pseudo == e.pseudo && e.tmo == tmo as u8 && settles {
            bits |= bit;
        }
    }
    e.flags = (e.flags & !F_STEADY) | bits;
}

/// Clears every entry's steady bits (the rule set changed what settles a packet: the next
/// full update of each entry recomputes them).
pub(super) fn clear_steady(slots: &mut [Entry]) {
    for e in slots {
        e.flags &= !F_STEADY;
    }
}

/// One batch's quick lookups ([`StateTable::quick`]); adds its hits to the table's counters
/// when dropped.
pub struct QuickHits<'a> {
    index: &'a [u64],
    slots: &'a mut [Entry],
    hasher: &'a FlowHasher,
    /// A state whose deadline is at or before this is dead to the loop: `now`, or later
    /// under pf's adaptive scaling ([`StateTable::quick`]).
    live_after: u32,
    /// The deadline of a state refreshed now, by timeout kind (`Tmo as usize`; a steady
    /// state's kind is `UdpSingle` or `UdpMultiple`): one load per hit, no branch on the kind.
    deadlines: &'a [u32; 16],
    hits: u64,
    counter: &'a mut u64,
}

impl StateTable {
    /// The loop's dead-before time under adaptive scaling. A state's life then depends on
    /// the count, which the in-order lookups of the batch's other packets may raise by one
    /// entry each: the loop takes only states live at the count the batch could reach, and
    /// by the larger cut of the two kinds it holds (`udp.single`, `udp.multiple`), so that
    /// whatever it takes is live in order too. It leaves the others to those lookups.
    #[cold]
    fn quick_live_after(&self, now: u32) -> u32 {
        let Some(range) = self.timeouts.adaptive() else { return now };
        let reach = self.len + QUICK_BATCH_MAX;
        let cut = |t: Tmo| adaptive_cut(self.secs[t as usize], reach, range);
        now.saturating_add(cut(Tmo::UdpSingle).max(cut(Tmo::UdpMultiple)))
    }

    /// Quick lookups at time `now` (see the module documentation of `quick`): use
    /// [`QuickHits::udp_v4`] on every packet of a batch, then the general lookup on those it
    /// leaves, in order.
    pub fn quick(&mut self, now: u32) -> QuickHits<'_> {
        self.deadlines =
            std::array::from_fn(|k| self.secs.get(k).map_or(now, |&s| now.saturating_add(s)));
        let live_after = if self.len + QUICK_BATCH_MAX > self.adaptive_from {
            self.quick_live_after(now)
        } else {
            now
        };
        QuickHits {
            index: &self.index,
            slots: &mut self.slots,
            hasher: &self.hasher,
            live_after,
            deadlines: &self.deadlines,
            hits: 0,
            counter: &mut self.counters.hits,
        }
    }
}

impl QuickHits<'_> {
    /// The rule of `f`'s state if `f` is a UDP flow whose state is live, steady for the
    /// packet's sender and settles its passes (`sub.rs`): its deadline is refreshed and the
    /// packet passes. `None` leaves the
    /// packet to [`StateTable::lookup_v4`] (and if the state was found, it clears its steady
    /// bits: the flow's later packets in the batch are left too).
    #[inline(always)]
    pub fn udp_v4(&mut self, f: &FlowV4) -> Option<u32> {
        let h = self.hasher.hash_v4(f);
        self.udp_v4_from(f, h, home_of(h, self.index.len()))
    }

    /// [`udp_v4`](Self::udp_v4) for a flow of hash `h` ([`StateTable::hash_v4`]), probing
    /// from index word `i`: its home, or where [`StateTable::probe`] stopped on the same
    /// table (nothing the quick loop does moves index words).
    #[inline(always)]
    pub fn udp_v4_from(&mut self, f: &FlowV4, h: u64, i: usize) -> Option<u32> {
        let id = find_v4(self.index, self.slots, f, h, i)?;
        self.hit(id, f.from_a())
    }

    /// [`udp_v4`](Self::udp_v4) for a UDP flow of either family ([`Flow::v6`], [`Flow::v4`]):
    /// the data plane's for IPv6.
    #[inline(always)]
    pub fn udp(&mut self, f: &Flow) -> Option<u32> {
        let h = self.hasher.hash(&f.key);
        self.udp_from(f, h, home_of(h, self.index.len()))
    }

    /// [`udp`](Self::udp) for a flow of hash `h` ([`StateTable::hash_flow`]), probing from
    /// index word `i` (as [`udp_v4_from`](Self::udp_v4_from)).
    #[inline(always)]
    pub fn udp_from(&mut self, f: &Flow, h: u64, i: usize) -> Option<u32> {
        let id = find_key(self.index, self.slots, &f.key, h, i)?;
        self.hit(id, f.from_a)
    }

    /// The quick lookup's outcome for the state in slot `id`, found for a packet sent by
    /// endpoint A of its key (`from_a`) or B.
    #[inline(always)]
    fn hit(&mut self, id: usize, from_a: bool) -> Option<u32> {
        let steady = F_STEADY_A << u8::from(!from_a);
        let e = self.slots.get_mut(id)?;
        if e.expire <= self.live_after || e.flags & steady == 0 {
            e.flags &= !F_STEADY;
            return None;
        }
        e.expire = self.deadlines[usize::from(e.tmo) % 16];
        self.hits += 1;
        Some(e.rule)
    }
}

impl Drop for QuickHits<'_> {
    fn drop(&mut self) {
        *self.counter += self.hits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Af, Dir, PacketKey, proto};
    use crate::state::pseudo_state::{MULTIPLE, SINGLE};

    /// pf's UDP pseudo-states, packet by packet, and which packets the quick lookup takes:
    /// none right after the insert (the timeout kind is still `udp.first_packet`), the
    /// sender's next packets once it has sent one, both directions once both are MULTIPLE.
    #[test]
    fn quick_hits_follow_the_pseudo_states() {
        let timeouts = crate::state::Timeouts::default();
        let mut t = StateTable::new(16, timeouts, 7);
        let (a, b) = (0x0a00_0001u32, 0xc612_0001u32);
        let key = PacketKey {
            af: Af::Inet,
            dir: Dir::In,
            iface: 0,
            proto: proto::UDP,
            src: a.into(),
            dst: b.into(),
            src_port: 1000,
            dst_port: 53,
            tcp_flags: 0,
            len: 60,
            icmp_id: 0,
            ip_opts: false,
            route: 0,
            tag: 0,
        };
        let out = FlowV4::new(proto::UDP, a, 1000, b, 53);
        let back = FlowV4::new(proto::UDP, b, 53, a, 1000);
        let id = t.insert(&key, 3, 10, None).unwrap();
        let quick = |t: &mut StateTable, f: &FlowV4, now: u32| t.quick(now).udp_v4(f);
        let general = |t: &mut StateTable, f: &FlowV4, now: u32| {
            t.lookup_v4(f, t.hash_v4(f), None, None, now).map(|h| h.rule)
        };
        let states = |t: &StateTable| {
            let i = t.info(id).unwrap();
            (i.initiator_state, i.responder_state, i.timeout, i.expire)
        };
        assert_eq!(quick(&mut t, &out, 11), None, "first packet's timeout still applies");
        assert_eq!(general(&mut t, &out, 11), Some(3));
        assert_eq!(states(&t), (SINGLE, 0, Tmo::UdpSingle, 11 + timeouts.udp_single));
        assert_eq!(quick(&mut t, &out, 12), Some(3), "the same sender again");
        assert_eq!(states(&t), (SINGLE, 0, Tmo::UdpSingle, 12 + timeouts.udp_single));
        assert_eq!(quick(&mut t, &back, 12), None, "the reply changes the states");
        assert_eq!(quick(&mut t, &out, 12), None, "left after a packet of its flow was left");
        assert_eq!(general(&mut t, &back, 13), Some(3));
        assert_eq!(states(&t), (MULTIPLE, SINGLE, Tmo::UdpSingle, 13 + timeouts.udp_single));
        assert_eq!(quick(&mut t, &out, 13), None, "makes the responder MULTIPLE");
        assert_eq!(general(&mut t, &out, 14), Some(3));
        assert_eq!(states(&t), (MULTIPLE, MULTIPLE, Tmo::UdpMultiple, 14 + timeouts.udp_multiple));
        assert_eq!(quick(&mut t, &back, 15), Some(3));
        assert_eq!(quick(&mut t, &out, 16), Some(3));
        assert_eq!(states(&t), (MULTIPLE, MULTIPLE, Tmo::UdpMultiple, 16 + timeouts.udp_multiple));
        assert_eq!(quick(&mut t, &out, 16 + timeouts.udp_multiple), None, "expired");
        assert_eq!(t.counters().hits, 6);
    }
}
