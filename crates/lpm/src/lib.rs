//! Longest-prefix match for IPv4 and IPv6, built for a lock-free forwarding path.
//!
//! # Structure
//!
//! Both tables belong to the DIR-24-8 family described in DPDK's *rte_lpm* programmer's guide
//! (Gupta, Lin, McKeown, "Routing lookups in hardware at memory access speeds", 1998):
//!
//! * **tbl24**: 2^24 `u32` entries indexed by the top 24 bits of the address. A prefix of
//!   length <= 24 is expanded into every tbl24 entry it covers, so the common case (the
//!   destination is covered by a /24 or shorter route) costs **one memory read**.
//! * **tbl8 groups**: 256-entry groups indexed by the next 8 bits. A tbl24 entry may point to
//!   a group instead of holding a next hop ("extended" entry); prefixes /25-/32 cost two
//!   reads. IPv6 ([`Ipv6Lpm`]) chains groups: one per further byte, as DPDK's *rte_lpm6* (see
//!   `ipv6.rs` for why).
//!
//! An entry is one `u32`: bit 31 = valid route, bit 30 = extended (low 30 bits = group index),
//! otherwise low 30 bits = next hop, hence [`MAX_NEXT_HOP`] = 2^30 - 1. The *depth* of the
//! prefix that produced each entry (needed so that inserting a shorter prefix does not
//! overwrite a longer one, and so that a delete restores the right less-specific route) is
//! kept by the writer in a *shadow* byte array parallel to the tables instead of inside the
//! entry as DPDK does: readers never look at it, and the entry keeps 30 bits of next hop. The
//! writer also keeps the *rule table* (one hash map per prefix length) from which the covering
//! prefix of a deleted route is recomputed, exactly as rte_lpm's `rule_find` /
//! `find_previous_rule` do.
//!
//! # Concurrency: how updates become visible
//!
//! Lookups never lock. The tables are arrays of `AtomicU32` updated **in place** by a single
//! writer (writers are serialised by an internal mutex that lookups never touch); readers do
//! `Acquire` loads, which are plain `mov`s on x86. Every entry is written with a single
//! atomic store, so a racing lookup sees either the old or the new answer for its address,
//! never a torn value. Stores are ordered as rte_lpm orders them:
//!
//! * a /25+ prefix landing in a tbl24 slot that held a plain entry: a free group is filled
//!   completely (the old entry in all 256 slots, then the new prefix's range) and only then
//!   published with one `Release` store of the extended entry into tbl24;
//! * a group that became uniform after a delete: the plain entry is stored into its parent
//!   first; the group is then *retired*, not freed, because a reader that loaded the old
//!   parent entry just before may still be reading it.
//!
//! Retired groups are reused only after a grace period, detected with quiescent-state based
//! reclamation (QSBR, as in DPDK's `rte_rcu_qsbr` which `rte_lpm_rcu_qsbr_add` uses). Each
//! worker thread takes a [`Reader`] from the table ([`Ipv4Lpm::reader`]) and calls
//! [`Reader::quiescent`] between batches (or [`Reader::offline`] while idle). See
//! `reclaim.rs` for the protocol and its memory-ordering argument. **A thread that looks up
//! while another thread updates must hold a registered [`Reader`]**; with no registered
//! reader retired groups are reused at once (nothing could be reading them). Unregistered
//! concurrent lookups remain memory-safe (every index is in bounds), but during group reuse
//! they may return another prefix's next hop.
//!
//! ```
//! use std::sync::Arc;
//! let fib = Arc::new(lpm::Ipv4Lpm::with_tbl8_groups(64));
//! fib.insert(0x0a00_0000, 8, 1).unwrap(); // 10.0.0.0/8 -> 1
//! let worker = {
//!     let fib = fib.clone();
//!     let reader = fib.reader(); // one per worker thread
//!     std::thread::spawn(move || {
//!         let addrs = [0x0a01_0203, 0x0b00_0001];
//!         let mut out = [None; 2];
//!         fib.lookup_batch(&addrs, &mut out); // lock-free
//!         reader.quiescent(); // between batches: no reference into the tables kept
//!         out
//!     })
//! };
//! fib.insert(0x0a01_0203, 32, 2).unwrap(); // concurrently: old or new answer
//! let out = worker.join().unwrap();
//! assert!(matches!(out[0], Some(1 | 2)) && out[1].is_none());
//! ```
//!
//! # Memory
//!
//! The large arrays are anonymous `mmap`s advised with `MADV_HUGEPAGE` ([`mem::hugemem`]), so a
//! random lookup costs one TLB-friendly cache miss. Pages are only committed when written:
//! an empty table costs almost nothing, the group pool commits as groups are first used.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod dir;
mod hash;

mod ipv4;
mod ipv6;
mod reclaim;
pub mod reference;

pub use dir::GroupStats;
pub use hash::{IntBuild, IntHasher};
pub use ipv4::{DEFAULT_TBL8_GROUPS_V4, Ipv4Lpm};
pub use ipv6::{DEFAULT_TBL8_GROUPS_V6, Ipv6Lpm};
pub use reclaim::{Grace, Reader};

/// Next-hop identifier stored in the tables, `0 ..= MAX_NEXT_HOP`.
pub type NextHop = u32;

/// Largest storable next hop: entries keep 30 bits of payload (2 bits are flags).
pub const MAX_NEXT_HOP: u32 = (1 << 30) - 1;

/// Errors of the control-plane operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpmError {
    /// Prefix length above 32 (IPv4) or 128 (IPv6).
    InvalidPrefixLen(u8),
    /// Next hop above [`MAX_NEXT_HOP`].
    NextHopTooLarge(u32),
    /// No free tbl8 group (configure more with `with_tbl8_groups`); the table is unchanged.
    Tbl8Exhausted,
    /// The memory for a table of this size could not be mapped.
    OutOfMemory {
        /// The size of the array that could not be mapped.
        bytes: usize,
    },
    /// More tbl8 groups asked for than an entry can name (2^30 - 1).
    TooManyGroups(u32),
}

impl std::fmt::Display for LpmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LpmError::InvalidPrefixLen(l) => write!(f, "invalid prefix length /{l}"),
            LpmError::NextHopTooLarge(nh) => {
                write!(f, "next hop {nh} above the maximum {MAX_NEXT_HOP}")
            }
            LpmError::Tbl8Exhausted => write!(f, "no free tbl8 group left"),
            LpmError::OutOfMemory { bytes } => {
                write!(f, "cannot map {} MiB for a route table", bytes.div_ceil(1 << 20))
            }
            LpmError::TooManyGroups(n) => {
                write!(f, "{n} tbl8 groups asked for, at most {}", (1u32 << 30) - 1)
            }
        }
    }
}

impl std::error::Error for LpmError {}
