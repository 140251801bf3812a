//! Later fragments (IPv4 and IPv6) that arrive before their first, held until it comes. pf reassembles
//! (`set reassemble yes`, `scrub ... fragment reassemble`) and so judges a datagram whose
//! fragments came in any order; linerate's fragment tables ([`super::frags`],
//! [`super::frags6`]) give a later fragment its first fragment's ports, so one that comes
//! first waits here (its frame
//! kept, nothing copied) and goes through the filter again when the first has passed. What
//! waits longer than pf's `set timeout frag`, or finds no room, is dropped as
//! `fragment_no_first`.

use io::FrameDesc;

/// Fragments held per worker: a few reordered datagrams' worth, a small share of the frame
/// pool, so that a flood of orphan fragments cannot take the pool.
pub const MAX_HELD: usize = 256;

/// A datagram: source, destination, identification, protocol (IPv4's addresses and
/// identification widened).
pub type Ident = (u128, u128, u32, u8);

struct Held {
    ident: Ident,
    expires: u32,
    desc: FrameDesc,
}

/// One worker's held fragments, and those released or expired since the worker last asked.
#[derive(Default)]
pub struct HeldFragments {
    held: Vec<Held>,
    released: Vec<FrameDesc>,
    expired: Vec<FrameDesc>,
    pub counts: HeldCounts,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldCounts {
    pub held: u64,
    pub released: u64,
    pub expired: u64,
}

impl HeldFragments {
    /// Holds the fragment in `desc` of datagram `ident` until `expires` (seconds), or, if its
    /// first has passed meanwhile (`first_seen`: later in the same batch), releases it at
    /// once; gives it back if there is no room.
    pub fn hold(
        &mut self,
        ident: Ident,
        desc: FrameDesc,
        expires: u32,
        first_seen: bool,
    ) -> Result<(), FrameDesc> {
        if first_seen {
            self.released.push(desc);
            self.counts.held += 1;
            self.counts.released += 1;
            return Ok(());
        }
        if self.held.len() >= MAX_HELD {
            return Err(desc);
        }
        self.held.push(Held { ident, expires, desc });
        self.counts.held += 1;
        Ok(())
    }

    /// The first fragment of `ident` has passed: its held fragments are released, in the
    /// order they came.
    pub fn first_passed(&mut self, ident: Ident) {
        if self.held.iter().all(|h| h.ident != ident) {
            return;
        }
        let (go, stay): (Vec<Held>, Vec<Held>) =
            self.held.drain(..).partition(|h| h.ident == ident);
        self.held = stay;
        self.counts.released += go.len() as u64;
        self.released.extend(go.into_iter().map(|h| h.desc));
    }

    /// Moves what has waited past its time at `now` to the expired.
    pub fn expire(&mut self, now: u32) {
        if self.held.iter().all(|h| h.expires >= now) {
            return;
        }
        let (gone, stay): (Vec<Held>, Vec<Held>) =
            self.held.drain(..).partition(|h| h.expires < now);
        self.held = stay;
        self.counts.expired += gone.len() as u64;
        self.expired.extend(gone.into_iter().map(|h| h.desc));
    }

    /// Fragments waiting for their first.
    pub fn waiting(&self) -> usize {
        self.held.len()
    }

    /// Whether some fragment waits for its first.
    pub fn is_holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether there is anything for the worker: fragments held, released or expired.
    pub fn busy(&self) -> bool {
        !(self.held.is_empty() && self.released.is_empty() && self.expired.is_empty())
    }

    /// Up to `max` released fragments, to go through the filter again.
    pub fn take_released(&mut self, max: usize) -> impl Iterator<Item = FrameDesc> + '_ {
        let n = self.released.len().min(max);
        self.released.drain(..n)
    }

    /// The expired fragments, to free and count.
    pub fn take_expired(&mut self) -> impl Iterator<Item = FrameDesc> + '_ {
        self.expired.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(addr: u32) -> FrameDesc {
        FrameDesc { addr, len: 60, port: 0 }
    }

    #[test]
    fn held_fragments_go_with_their_first_or_their_time() {
        let (a, b) = ((1, 2, 7, 17), (1, 2, 8, 17));
        let mut h = HeldFragments::default();
        h.hold(a, desc(1), 30, false).unwrap();
        h.hold(b, desc(2), 20, false).unwrap();
        h.hold(a, desc(3), 30, false).unwrap();
        h.hold(b, desc(4), 20, true).unwrap();
        assert_eq!(
            h.take_released(64).map(|d| d.addr).collect::<Vec<_>>(),
            [4],
            "its first came in the same batch"
        );
        h.first_passed((1, 2, 9, 17));
        assert_eq!(h.take_released(64).count(), 0);
        h.first_passed(a);
        assert_eq!(
            h.take_released(64).map(|d| d.addr).collect::<Vec<_>>(),
            [1, 3],
            "in the order they came"
        );
        h.expire(20);
        assert_eq!(h.take_expired().count(), 0, "20 s is still its time");
        h.expire(21);
        assert_eq!(h.take_expired().map(|d| d.addr).collect::<Vec<_>>(), [2]);
        assert!(!h.busy());
        assert_eq!(h.counts, HeldCounts { held: 4, released: 3, expired: 1 });
    }

    #[test]
    fn room_is_bounded() {
        let mut h = HeldFragments::default();
        for i in 0..MAX_HELD as u32 {
            h.hold((i.into(), 0, 0, 17), desc(i), 30, false).unwrap();
        }
        assert_eq!(h.hold((9, 9, 9, 17), desc(9999), 30, false), Err(desc(9999)));
    }
}
