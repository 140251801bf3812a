//! Next-hop adjacencies: what to do with a packet once the FIB has named its next hop.
//!
//! The FIB maps a prefix to a next-hop id; the adjacency table maps that id to an output port
//! and the next hop's MAC address. Each entry is one `AtomicU64` so that the control plane can
//! resolve or change a neighbour in place with one store, and a worker reading it concurrently
//! sees the old or the new entry, never a mix (a lock-free update, as the FreeBSD study asked
//! for after finding `arpresolve`'s lock on the forwarding path).
//!
//! Layout of an entry: bits 0-47 destination MAC, bits 48-59 output port, bits 60-63 kind.
//! An all-zero entry is `Unresolved` on port 0: an id nobody filled in never forwards.
//! An `Unresolved` entry with bit 0 set is a connected prefix's (a "glean" adjacency, as
//! VPP calls it): its packets are resolved by their own destination, not by one gateway. The
//! fast path never looks at that bit; the punt stage does, to throttle per next hop.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use wire::MacAddr;

/// Largest port index an adjacency can name.
pub const MAX_PORT: u16 = 0x0fff;

/// What a next hop means for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adjacency {
    /// The next hop's MAC is unknown: drop (later: queue and resolve with ARP/NDP).
    Unresolved { port: u16 },
    /// Rewrite the MACs and send on `port`.
    Forward { port: u16, mac: MacAddr },
    /// The destination is one of the router's own addresses.
    Local,
    /// Discard silently (a blackhole route).
    Blackhole,
    /// Drop with an ICMP destination unreachable (a kernel `unreachable` or `prohibit`
    /// route), counted as `no_route`.
    Unreachable,
    /// Equal-cost multipath: `paths` next-hop ids start at `members` in the table's member
    /// array; a packet takes the one its flow hash picks ([`crate::ecmp`]).
    Multipath { members: u32, paths: u16 },
}

const KIND_UNRESOLVED: u64 = 0;
const KIND_FORWARD: u64 = 1;
const KIND_LOCAL: u64 = 2;
const KIND_BLACKHOLE: u64 = 3;
const KIND_UNREACHABLE: u64 = 4;
const KIND_MULTIPATH: u64 = 5;
/// In an `Unresolved` entry: a connected prefix's (see the module docs).
const GLEAN: u64 = 1;

impl Adjacency {
    #[inline]
    pub fn encode(self) -> u64 {
        let (kind, port, mac) = match self {
            Adjacency::Unresolved { port } => (KIND_UNRESOLVED, port, 0),
            Adjacency::Forward { port, mac } => (KIND_FORWARD, port, mac_to_u64(mac)),
            Adjacency::Local => (KIND_LOCAL, 0, 0),
            Adjacency::Blackhole => (KIND_BLACKHOLE, 0, 0),
            Adjacency::Unreachable => (KIND_UNREACHABLE, 0, 0),
            Adjacency::Multipath { members, paths } => (KIND_MULTIPATH, paths, u64::from(members)),
        };
        debug_assert!(port <= MAX_PORT);
        kind << 60 | (u64::from(port) & 0xfff) << 48 | mac
    }

    #[inline]
    pub fn decode(word: u64) -> Adjacency {
        let port = ((word >> 48) & 0xfff) as u16;
        match word >> 60 {
            KIND_FORWARD => Adjacency::Forward { port, mac: mac_from_u64(word) },
            KIND_LOCAL => Adjacency::Local,
            KIND_BLACKHOLE => Adjacency::Blackhole,
            KIND_UNREACHABLE => Adjacency::Unreachable,
            KIND_MULTIPATH => Adjacency::Multipath { members: word as u32, paths: port },
            _ => Adjacency::Unresolved { port },
        }
    }
}

#[inline]
fn mac_to_u64(mac: MacAddr) -> u64 {
    let b = mac.0;
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

#[inline]
fn mac_from_u64(word: u64) -> MacAddr {
    let b = word.to_be_bytes();
    MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// Most next hops of one multipath group (Linux allows more; BIRD's `merge paths` defaults to
/// 16).
pub const MAX_PATHS: usize = 16;

/// A fixed-capacity table of adjacencies indexed by next-hop id, and the member lists of
/// multipath groups: group `g` owns `members[g * MAX_PATHS ..][.. MAX_PATHS]`.
pub struct AdjacencyTable {
    entries: Box<[AtomicU64]>,
    members: Box<[AtomicU32]>,
}

impl AdjacencyTable {
    /// A table of `capacity` entries, all `Unresolved`, with room for `groups` multipath groups.
    pub fn new(capacity: usize) -> Self {
        Self::with_groups(capacity, 0)
    }

    /// A table of `capacity` entries and `groups` multipath groups.
    pub fn with_groups(capacity: usize, groups: usize) -> Self {
        AdjacencyTable {
            entries: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            members: (0..groups * MAX_PATHS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Multipath groups the member array has room for.
    pub fn group_capacity(&self) -> usize {
        self.members.len() / MAX_PATHS
    }

    /// Next-hop id `i` of the group whose members start at `members` (fast path); an index
    /// beyond the array reads as id 1, the blackhole.
    #[inline]
    pub fn member(&self, members: u32, i: usize) -> u32 {
        self.members.get(members as usize + i).map_or(1, |m| m.load(Ordering::Relaxed))
    }

    /// Writes group `group`'s member ids (control plane, before any adjacency names the
    /// group: the Release store of that adjacency publishes them). Returns the start index
    /// for [`Adjacency::Multipath`].
    pub fn set_members(&self, group: usize, ids: &[u32]) -> u32 {
        assert!(ids.len() <= MAX_PATHS, "at most {MAX_PATHS} paths");
        let base = group * MAX_PATHS;
        for (slot, &id) in self.members[base..base + ids.len()].iter().zip(ids) {
            slot.store(id, Ordering::Relaxed);
        }
        base as u32
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Reads an entry; ids beyond the table read as `Blackhole`.
    #[inline]
    pub fn get(&self, id: u32) -> Adjacency {
        match self.entries.get(id as usize) {
            // Acquire: a multipath entry's members were written before it was published.
            Some(word) => Adjacency::decode(word.load(Ordering::Acquire)),
            None => Adjacency::Blackhole,
        }
    }

    /// Replaces an entry in one store (control plane). Panics on an id beyond the capacity,
    /// which the id allocator never hands out.
    pub fn set(&self, id: u32, adj: Adjacency) {
        self.entries[id as usize].store(adj.encode(), Ordering::Release);
    }

    /// Makes `id` the unresolved adjacency of connected prefixes on `port` (control plane).
    pub fn set_glean(&self, id: u32, port: u16) {
        self.entries[id as usize]
            .store(Adjacency::Unresolved { port }.encode() | GLEAN, Ordering::Relaxed);
    }

    /// Whether `id` is a connected prefix's: its packets each resolve their own destination.
    pub fn is_glean(&self, id: u32) -> bool {
        self.entries.get(id as usize).is_some_and(|w| {
            let w = w.load(Ordering::Relaxed);
            w >> 60 == KIND_UNRESOLVED && w & GLEAN != 0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_roundtrip() {
        let mac = MacAddr([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]);
        for adj in [
            Adjacency::Unresolved { port: 7 },
            Adjacency::Forward { port: MAX_PORT, mac },
            Adjacency::Forward { port: 0, mac: MacAddr([0xff; 6]) },
            Adjacency::Local,
            Adjacency::Blackhole,
            Adjacency::Unreachable,
            Adjacency::Multipath { members: 48, paths: 3 },
            Adjacency::Multipath { members: u32::MAX, paths: MAX_PATHS as u16 },
        ] {
            assert_eq!(Adjacency::decode(adj.encode()), adj);
        }
        assert_eq!(Adjacency::decode(0), Adjacency::Unresolved { port: 0 });
    }

    #[test]
    fn table_defaults_to_unresolved_and_bounds() {
        let t = AdjacencyTable::new(4);
        assert_eq!(t.get(3), Adjacency::Unresolved { port: 0 });
        assert_eq!(t.get(4), Adjacency::Blackhole);
        t.set(2, Adjacency::Local);
        assert_eq!(t.get(2), Adjacency::Local);
        // A glean entry reads as unresolved; only `is_glean` tells it apart.
        t.set_glean(1, 9);
        assert_eq!(t.get(1), Adjacency::Unresolved { port: 9 });
        assert!(t.is_glean(1) && !t.is_glean(0) && !t.is_glean(2) && !t.is_glean(7));
        t.set(1, Adjacency::Forward { port: 9, mac: MacAddr([2, 0, 0, 0, 0, 1]) });
        assert!(!t.is_glean(1));
    }
}
