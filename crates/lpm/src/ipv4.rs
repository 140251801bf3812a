//! IPv4 DIR-24-8 table (rte_lpm layout): tbl24 + one level of 256-entry tbl8 groups.

use std::sync::Mutex;
use std::sync::atomic::Ordering::Acquire;

use crate::dir::{EXT, GroupStats, Tables, Writer, decode, tbl8_index};
use crate::reclaim::{Grace, Reader, Registry};
use crate::{LpmError, NextHop};
use mem::prefetch::prefetch_read as prefetch;

/// Default tbl8 pool: 65,536 groups = 64 MiB of address space (committed as used). A
/// realistic 1M-prefix table has about 1% of prefixes longer than /24, i.e. ~10k groups.
pub const DEFAULT_TBL8_GROUPS_V4: u32 = 1 << 16;

/// Lanes of the batched lookup: enough independent misses to fill the line-fill buffers.
const LANES: usize = 8;

/// IPv4 longest-prefix-match table. Lookups are lock-free; updates are serialised
/// internally and visible to lookups as described in the crate docs.
pub struct Ipv4Lpm {
    t: Tables,
    writer: Mutex<Writer<u32>>,
    registry: Registry,
}

impl Default for Ipv4Lpm {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Ipv4Lpm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ipv4Lpm")
            .field("len", &self.len())
            .field("tbl8", &self.tbl8_stats())
            .finish()
    }
}

impl Ipv4Lpm {
    /// Empty table with [`DEFAULT_TBL8_GROUPS_V4`] groups; panics if its memory cannot be mapped (tests,
    /// benchmarks: a router uses [`try_new`](Self::try_new)).
    pub fn new() -> Self {
        Self::try_new().expect("cannot map an LPM table")
    }

    /// [`new`](Self::new), or the error if its memory cannot be mapped.
    pub fn try_new() -> Result<Self, LpmError> {
        Self::try_with_tbl8_groups(DEFAULT_TBL8_GROUPS_V4)
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
        Ok(Ipv4Lpm {
            t: Tables::try_new(groups)?,
            writer: Mutex::new(Writer::try_new(groups)?),
            registry: Registry::default(),
        })
    }

    fn w(&self) -> std::sync::MutexGuard<'_, Writer<u32>> {
        self.writer.lock().expect("lpm writer panicked")
    }

    /// Adds or replaces `prefix/len` (host order; bits beyond `len` are ignored). Returns the
    /// replaced next hop.
    pub fn insert(&self, prefix: u32, len: u8, nh: NextHop) -> Result<Option<NextHop>, LpmError> {
        self.w().insert(&self.t, &self.registry, prefix, len, nh)
    }

    /// Removes `prefix/len`, returning its next hop; addresses fall back to the covering route.
    pub fn remove(&self, prefix: u32, len: u8) -> Result<Option<NextHop>, LpmError> {
        self.w().remove(&self.t, &self.registry, prefix, len)
    }

    /// Longest-prefix match of `addr` (host order). One load for prefixes up to /24, two
    /// otherwise.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<NextHop> {
        let e = self.t.tbl24[(addr >> 8) as usize].load(Acquire);
        let e =
            if e & EXT == 0 { e } else { self.t.tbl8[tbl8_index(e, addr as usize)].load(Acquire) };
        decode(e)
    }

    /// Looks up `addrs[i]` into `out[i]` (`out` must be at least as long). Processes 8
    /// addresses at a time: prefetch all tbl24 lines, load them, then prefetch and load the
    /// tbl8 entries of the extended ones, so the cache misses of a batch overlap.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<NextHop>]) {
        assert!(out.len() >= addrs.len(), "lookup_batch: output shorter than input");
        let (tbl24, tbl8) = (&*self.t.tbl24, &*self.t.tbl8);
        let mut chunks = addrs.chunks_exact(LANES);
        let mut outs = out.chunks_exact_mut(LANES);
        for (a, o) in (&mut chunks).zip(&mut outs) {
            let idx: [usize; LANES] = std::array::from_fn(|i| (a[i] >> 8) as usize);
            for &i in &idx {
                prefetch(&tbl24[i]);
            }
            let mut e: [u32; LANES] = std::array::from_fn(|i| tbl24[idx[i]].load(Acquire));
            let ext = e.iter().fold(0, |m, &x| m | x) & EXT != 0;
            if ext {
                for i in 0..LANES {
                    if e[i] & EXT != 0 {
                        prefetch(&tbl8[tbl8_index(e[i], a[i] as usize)]);
                    }
                }
                for i in 0..LANES {
                    if e[i] & EXT != 0 {
                        e[i] = tbl8[tbl8_index(e[i], a[i] as usize)].load(Acquire);
                    }
                }
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

    /// Bytes in use: tbl24 (64 MiB) and its depth shadow (16 MiB), the groups ever
    /// touched (1 KiB + 256 B shadow each) and the rule table.
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
