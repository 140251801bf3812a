//! IPv6 table: the DIR-24-8 layout of DPDK's *rte_lpm6* / *rte_fib6* "trie": a 2^24-entry
//! tbl24 indexed by the top 24 bits, then a chain of 256-entry groups, one per further
//! byte (up to 13 levels for a /128).
//!
//! Why this structure: it shares the IPv4 engine (same entry format, update algorithms,
//! group pool and grace periods), and its cost follows the prefix length of the match, which
//! in the global table is concentrated on /32-/48: 2 loads for /25-/32, 3 for /33-/40, 4 for
//! /41-/48. A 2^16 first stride would halve tbl24 (and is what a tree bitmap would start
//! with) but add a load for every /17-/24 and /25-/32 and more groups per /32; a
//! 16-bit stride throughout (fewer levels) would make each group 256 KiB, unaffordable at
//! 200k prefixes. The price of 8-bit groups is memory for sparse long prefixes (a /48 in a
//! fresh /40 costs a whole 1 KiB group): the 200k-prefix test mix needs ~240k groups
//! (~380 MiB with tbl24 and the writer's shadows).

use std::sync::Mutex;
use std::sync::atomic::Ordering::Acquire;

use crate::dir::{EXT, GroupStats, Tables, Writer, decode, tbl8_index};
use crate::reclaim::{Grace, Reader, Registry};
use crate::{LpmError, NextHop};
use mem::prefetch::prefetch_read as prefetch;

/// Default tbl8 pool: 2^19 groups = 512 MiB of address space, committed only as groups are
/// first used (a realistic 200k-prefix table touches well under half).
pub const DEFAULT_TBL8_GROUPS_V6: u32 = 1 << 19;

const LANES: usize = 8;

/// IPv6 longest-prefix-match table (addresses as host-order `u128`, i.e.
/// `u128::from(Ipv6Addr)`). Same API and concurrency model as [`Ipv4Lpm`](crate::Ipv4Lpm).
pub struct Ipv6Lpm {
    t: Tables,
    writer: Mutex<Writer<u128>>,
    registry: Registry,
}

impl Default for Ipv6Lpm {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Ipv6Lpm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ipv6Lpm")
            .field("len", &self.len())
            .field("tbl8", &self.tbl8_stats())
            .finish()
    }
}

impl Ipv6Lpm {
    /// Empty table with [`DEFAULT_TBL8_GROUPS_V6`] groups; panics if its memory cannot be mapped (tests,
    /// benchmarks: a router uses [`try_new`](Self::try_new)).
    pub fn new() -> Self {
        Self::try_new().expect("cannot map an LPM table")
    }

    /// [`new`](Self::new), or the error if its memory cannot be mapped.
    pub fn try_new() -> Result<Self, LpmError> {
        Self::try_with_tbl8_groups(DEFAULT_TBL8_GROUPS_V6)
    }

    /// Empty table whose pool holds `groups` tbl8 groups; panics if its memory cannot be
    /// mapped (see [`try_with_tbl8_groups`](Self::try_with_tbl8_groups)).
    pub fn with_tbl8_groups(groups: u32) -> Self {
        Self::try_with_tbl8_groups(groups).expect("cannot map an LPM table")
    }

    /// Empty table whose pool holds `groups` tbl8 groups (1 KiB each); each prefix longer
    /// than /24 (IPv4; than its first stride, IPv6) under a distinct entry needs one. The
    /// pool never grows (that would move memory under lock-free readers): inserts fail with
    /// [`LpmError::Tbl8Exhausted`] when full. Errors: the memory cannot be mapped, or more
    /// groups than an entry can name.
    pub fn try_with_tbl8_groups(groups: u32) -> Result<Self, LpmError> {
        Ok(Ipv6Lpm {
            t: Tables::try_new(groups)?,
            writer: Mutex::new(Writer::try_new(groups)?),
            registry: Registry::default(),
        })
    }

    fn w(&self) -> std::sync::MutexGuard<'_, Writer<u128>> {
        self.writer.lock().expect("lpm writer panicked")
    }

    /// Adds or replaces `prefix/len` (bits beyond `len` ignored); returns the replaced next hop.
    pub fn insert(&self, prefix: u128, len: u8, nh: NextHop) -> Result<Option<NextHop>, LpmError> {
        self.w().insert(&self.t, &self.registry, prefix, len, nh)
    }

    /// Removes `prefix/len`, returning its next hop.
    pub fn remove(&self, prefix: u128, len: u8) -> Result<Option<NextHop>, LpmError> {
        self.w().remove(&self.t, &self.registry, prefix, len)
    }

    /// Longest-prefix match of `addr`: one load per level down to the matching one.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<NextHop> {
        let mut e = self.t.tbl24[(addr >> 104) as usize].load(Acquire);
        let mut shift: u32 = 96;
        while e & EXT != 0 {
            e = self.t.tbl8[tbl8_index(e, (addr >> shift) as usize)].load(Acquire);
            if shift == 0 {
                break; // never reached: the writer builds at most 13 levels
            }
            shift -= 8;
        }
        decode(e)
    }

    /// Batched lookup (`out` at least as long as `addrs`): 8 addresses at a time, level by
    /// level, prefetching every lane's entry of a level before loading any of them.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<NextHop>]) {
        assert!(out.len() >= addrs.len(), "lookup_batch: output shorter than input");
        let (tbl24, tbl8) = (&*self.t.tbl24, &*self.t.tbl8);
        let mut chunks = addrs.chunks_exact(LANES);
        let mut outs = out.chunks_exact_mut(LANES);
        for (a, o) in (&mut chunks).zip(&mut outs) {
            let idx: [usize; LANES] = std::array::from_fn(|i| (a[i] >> 104) as usize);
            for &i in &idx {
                prefetch(&tbl24[i]);
            }
            let mut e: [u32; LANES] = std::array::from_fn(|i| tbl24[idx[i]].load(Acquire));
            let mut shift: u32 = 96;
            while e.iter().fold(0, |m, &x| m | x) & EXT != 0 {
                let idx: [usize; LANES] =
                    std::array::from_fn(|i| tbl8_index(e[i], (a[i] >> shift) as usize));
                for i in 0..LANES {
                    if e[i] & EXT != 0 {
                        prefetch(&tbl8[idx[i]]);
                    }
                }
                for i in 0..LANES {
                    if e[i] & EXT != 0 {
                        e[i] = tbl8[idx[i]].load(Acquire);
                    }
                }
                if shift == 0 {
                    break;
                }
                shift -= 8;
            }
            for i in 0..LANES {
                o[i] = decode(e[i]);
            }
        }
        for (a, o) in chunks.remainder().iter().zip(outs.into_remainder()) {
            *o = self.lookup(*a);
        }
    }

    /// Number of prefixes.
    pub fn len(&self) -> usize {
        self.w().len()
    }

    /// Whether the table holds no prefix.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts a grace period over this table's readers: call it after removing the last
    /// route to a next-hop id; the id may be reused once [`Grace::is_over`].
    pub fn grace(&self) -> Grace {
        self.registry.grace()
    }

    /// Registers a lookup thread for the grace-period scheme (see [`Reader`]).
    pub fn reader(&self) -> Reader {
        self.registry.register()
    }

    /// Bytes in use (see [`Ipv4Lpm::memory_bytes`](crate::Ipv4Lpm::memory_bytes)).
    pub fn memory_bytes(&self) -> usize {
        self.w().memory_bytes()
    }

    /// Address space reserved by the arrays (committed only as written).
    pub fn reserved_bytes(&self) -> usize {
        (self.t.tbl24.mapped_bytes() + self.t.tbl8.mapped_bytes()) * 5 / 4
    }

    /// tbl8 pool usage.
    pub fn tbl8_stats(&self) -> GroupStats {
        self.w().stats()
    }
}
