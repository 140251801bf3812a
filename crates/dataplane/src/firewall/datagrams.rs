//! The datagrams being forwarded in fragments, by [`Ident`], for both families' fragment
//! tables ([`super::frags`], [`super::frags6`]): a first fragment records its datagram's
//! ports, later ones take them until all the datagram's bytes have passed. Sets of
//! [`WAYS`] entries; a new datagram takes a free or expired entry of its set, else evicts
//! the one that expires first.

use fw::packet::proto;

use super::frag_hold::Ident;
use crate::counters::DropReason;

/// Entries per set.
pub const WAYS: usize = 4;

#[derive(Clone, Copy, Default)]
struct Slot {
    ident: Ident,
    used: bool,
    sport: u16,
    dport: u16,
    expires: u32,
    /// Payload bytes seen, and the datagram's payload length once its last fragment came.
    seen: u32,
    total: Option<u32>,
}

/// What the table did, for the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragCounts {
    pub tracked: u64,
    pub evicted: u64,
}

/// One worker's datagrams of one family.
pub struct Datagrams {
    slots: Box<[Slot]>,
    seed: u64,
    pub counts: FragCounts,
}

/// The ports of a first fragment of protocol `p` (TCP, UDP, or `icmp`: ICMP or ICMPv6, whose
/// type and code stand for them), read from `l4`, which must hold the whole TCP header or
/// the first 8 bytes of the others (RFC 1858 3.1, RFC 7112): else `fragment_tiny`.
pub fn first_ports(p: u8, icmp: u8, l4: &[u8]) -> Result<(u16, u16), DropReason> {
    let need = if p == proto::TCP { 20 } else { 8 };
    let Some(h) = l4.get(..need) else {
        return Err(DropReason::FragmentTiny);
    };
    Ok(if p == icmp {
        (h[0].into(), h[1].into())
    } else {
        (u16::from_be_bytes([h[0], h[1]]), u16::from_be_bytes([h[2], h[3]]))
    })
}

impl Datagrams {
    /// A table for `datagrams` (rounded up to whole sets).
    pub fn new(datagrams: usize, seed: u64) -> Datagrams {
        Datagrams { slots: Self::slots(datagrams), seed: seed | 1, counts: FragCounts::default() }
    }

    fn slots(datagrams: usize) -> Box<[Slot]> {
        vec![Slot::default(); datagrams.div_ceil(WAYS).max(1) * WAYS].into_boxed_slice()
    }

    /// Datagrams the table holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Holds `datagrams` (rounded up to whole sets) from now on, if it does not already. The
    /// datagrams in flight are forgotten.
    pub fn resize(&mut self, datagrams: usize) {
        if datagrams.div_ceil(WAYS).max(1) * WAYS != self.slots.len() {
            self.slots = Self::slots(datagrams);
        }
    }

    fn set(&self, (src, dst, id, p): Ident) -> usize {
        let x = (src ^ dst.rotate_left(17)) as u64
            ^ ((src ^ dst) >> 64) as u64
            ^ (u64::from(id) << 8 | u64::from(p));
        (x.wrapping_mul(self.seed) >> 40) as usize % (self.slots.len() / WAYS) * WAYS
    }

    fn find(&mut self, ident: Ident, now: u32) -> Option<&mut Slot> {
        let s = self.set(ident);
        self.slots[s..s + WAYS].iter_mut().find(|e| e.used && e.expires >= now && e.ident == ident)
    }

    /// Whether datagram `ident`'s first fragment is recorded (at `now`).
    pub fn has_first(&mut self, ident: Ident, now: u32) -> bool {
        self.find(ident, now).is_some()
    }

    /// A later fragment of `ident` (`len` payload bytes at byte `offset`, more to come if
    /// `more`): its datagram's ports, else `fragment_no_first`. The entry goes once all the
    /// datagram's bytes have passed.
    pub fn later(
        &mut self,
        ident: Ident,
        offset: u32,
        len: u32,
        more: bool,
        now: u32,
    ) -> Result<(u16, u16), DropReason> {
        let Some(e) = self.find(ident, now) else {
            return Err(DropReason::FragmentNoFirst);
        };
        e.seen += len;
        if !more {
            e.total = Some(offset + len);
        }
        if e.total.is_some_and(|t| e.seen >= t) {
            e.used = false;
        }
        Ok((e.sport, e.dport))
    }

    /// Records the first fragment of `ident` (`len` payload bytes, its datagram's `ports`) at
    /// `now`, its datagram living `timeout` seconds. A retransmitted first fragment starts
    /// its datagram again.
    pub fn first(
        &mut self,
        ident: Ident,
        (sport, dport): (u16, u16),
        len: u32,
        now: u32,
        timeout: u32,
    ) {
        let entry = Slot {
            ident,
            used: true,
            sport,
            dport,
            expires: now.saturating_add(timeout),
            seen: len,
            total: None,
        };
        if let Some(e) = self.find(ident, now) {
            *e = entry;
            return;
        }
        let s = self.set(ident);
        let ways = &mut self.slots[s..s + WAYS];
        let victim = ways.iter().position(|e| !e.used || e.expires < now);
        let victim = victim.unwrap_or_else(|| {
            self.counts.evicted += 1;
            (0..WAYS).min_by_key(|&i| ways[i].expires).unwrap_or(0)
        });
        ways[victim] = entry;
        self.counts.tracked += 1;
    }
}
