//! The four AF_XDP rings: index arithmetic (pure, [`RingIndex`]) and the mmap'd ring itself.
//!
//! Each ring is a single-producer single-consumer array of `size` (a power of two) entries
//! with free-running `u32` producer and consumer indices (kernel doc `af_xdp.rst`, "Rings").
//! Entry `i` lives in slot `i & (size - 1)`; all index arithmetic wraps. We keep cached copies
//! of both indices and only read the peer's index (Acquire) when the cache says we are out of
//! room or entries; we publish our own index (Release) after writing or reading the entries.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::{XDP_RING_NEED_WAKEUP, XdpRingOffset};

/// Cached producer/consumer indices of one ring, from one side's point of view.
/// Pure arithmetic: the caller passes in the peer's index when asked.
#[derive(Debug, Clone)]
pub struct RingIndex {
    size: u32,
    /// Next index we produce at (producer side) or the peer's last seen producer (consumer side).
    prod: u32,
    /// Next index we consume at (consumer side) or the peer's last seen consumer (producer side).
    cons: u32,
}

impl RingIndex {
    /// Indices of a ring of `size` entries (a power of two) currently at `prod` / `cons`.
    pub fn new(size: u32, prod: u32, cons: u32) -> Self {
        assert!(size.is_power_of_two(), "ring size must be a power of two");
        RingIndex { size, prod, cons }
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// Slot of entry `idx`.
    #[inline]
    pub fn slot(&self, idx: u32) -> usize {
        (idx & (self.size - 1)) as usize
    }

    /// Producer side: how many entries can be written. If the cache shows fewer than `want`,
    /// refreshes the peer's consumer index with `load_cons` first.
    #[inline]
    pub fn free(&mut self, want: u32, load_cons: impl FnOnce() -> u32) -> u32 {
        let free = self.size - self.prod.wrapping_sub(self.cons);
        if free >= want {
            return free;
        }
        self.cons = load_cons();
        self.size - self.prod.wrapping_sub(self.cons)
    }

    /// Producer side: claims `n` entries (no more than `free` returned); returns the first index.
    #[inline]
    pub fn produce(&mut self, n: u32) -> u32 {
        debug_assert!(n <= self.size - self.prod.wrapping_sub(self.cons));
        let start = self.prod;
        self.prod = self.prod.wrapping_add(n);
        start
    }

    /// Consumer side: how many entries can be read (at most `max`). If the cache shows fewer
    /// than `max`, refreshes the peer's producer index with `load_prod` first.
    #[inline]
    pub fn available(&mut self, max: u32, load_prod: impl FnOnce() -> u32) -> u32 {
        let mut n = self.prod.wrapping_sub(self.cons);
        if n < max {
            self.prod = load_prod();
            n = self.prod.wrapping_sub(self.cons);
        }
        debug_assert!(n <= self.size, "peer produced more than the ring holds");
        n.min(max)
    }

    /// Consumer side: releases `n` entries (no more than `available` returned); returns the
    /// first index.
    #[inline]
    pub fn consume(&mut self, n: u32) -> u32 {
        debug_assert!(n <= self.prod.wrapping_sub(self.cons));
        let start = self.cons;
        self.cons = self.cons.wrapping_add(n);
        start
    }

    /// Our producer index (producer side), to publish.
    pub fn prod(&self) -> u32 {
        self.prod
    }

    /// Our consumer index (consumer side), to publish.
    pub fn cons(&self) -> u32 {
        self.cons
    }

    /// Producer side: entries written and not yet consumed, as last seen.
    pub fn outstanding(&self) -> u32 {
        self.prod.wrapping_sub(self.cons)
    }
}

/// Which end of a ring user space holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// We write entries (fill, tx).
    Producer,
    /// We read entries (rx, completion).
    Consumer,
}

/// One ring mapped from an AF_XDP socket, holding entries of type `T` (`u64` addresses for
/// fill/completion, `XdpDesc` for rx/tx).
pub struct Ring<T: Copy> {
    map: NonNull<u8>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    side: Side,
    pub idx: RingIndex,
}

// SAFETY: the ring is a private mapping of kernel memory reached only through `&mut self`
// (entries, our index) or atomics (the peer's index, flags); moving it to another thread moves
// sole user-space ownership with it.
unsafe impl<T: Copy + Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries at page offset `pgoff` of socket `fd`, whose layout
    /// the kernel reported in `off`.
    pub fn map(
        fd: RawFd,
        pgoff: libc::off_t,
        off: &XdpRingOffset,
        size: u32,
        side: Side,
    ) -> io::Result<Self> {
        let map_len = off.desc as usize + size as usize * size_of::<T>();
        // SAFETY: a fresh shared mapping chosen by the kernel (addr NULL); it aliases no Rust
        // object. The socket's ring of this size was created by setsockopt before.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(ptr.cast::<u8>()).expect("mmap returned NULL");
        // SAFETY: the kernel-reported offsets lie inside the `map_len` bytes just mapped and
        // are suitably aligned for u32 indices and for `T` entries (the kernel lays them out so).
        let at = |o: u64| unsafe { NonNull::new_unchecked(map.as_ptr().add(o as usize)) };
        let producer = at(off.producer).cast::<AtomicU32>();
        let consumer = at(off.consumer).cast::<AtomicU32>();
        let flags = at(off.flags).cast::<AtomicU32>();
        let descs = at(off.desc).cast::<T>();
        // SAFETY: both index words are live in the mapping (see above); AtomicU32 has the
        // layout of u32 and the kernel only accesses them atomically (READ_ONCE/smp_store_release).
        let (p, c) = unsafe {
            (producer.as_ref().load(Ordering::Acquire), consumer.as_ref().load(Ordering::Acquire))
        };
        Ok(Ring {
            map,
            map_len,
            producer,
            consumer,
            flags,
            descs,
            side,
            idx: RingIndex::new(size, p, c),
        })
    }

    /// Producer side: free entries, refreshing from the kernel's consumer index if fewer than `want`.
    #[inline]
    pub fn free(&mut self, want: u32) -> u32 {
        let consumer = self.consumer;
        // SAFETY: `consumer` points into our live mapping (see `map`); Acquire pairs with the
        // kernel's release of its consumer index, so slots it has read are ours to overwrite.
        self.idx.free(want, || unsafe { consumer.as_ref() }.load(Ordering::Acquire))
    }

    /// Consumer side: entries ready (at most `max`), refreshing from the kernel's producer index.
    #[inline]
    pub fn available(&mut self, max: u32) -> u32 {
        let producer = self.producer;
        // SAFETY: as in `free`; Acquire pairs with the kernel's release of its producer index,
        // so the entries it covers are fully written before we read them.
        self.idx.available(max, || unsafe { producer.as_ref() }.load(Ordering::Acquire))
    }

    /// Writes entry `idx` (producer side, `idx` claimed with `idx.produce`).
    #[inline]
    pub fn write(&mut self, idx: u32, value: T) {
        debug_assert!(self.side == Side::Producer);
        let slot = self.idx.slot(idx);
        // SAFETY: `slot < size`, so the entry lies in the mapping; the kernel does not read it
        // until we publish a producer index past `idx`, so we have exclusive access.
        unsafe { self.descs.as_ptr().add(slot).write_volatile(value) }
    }

    /// Reads entry `idx` (consumer side, `idx` below the producer index last loaded).
    #[inline]
    pub fn read(&self, idx: u32) -> T {
        debug_assert!(self.side == Side::Consumer);
        let slot = self.idx.slot(idx);
        // SAFETY: `slot < size`, so the entry lies in the mapping; the kernel published it
        // (Acquire in `available`) and will not rewrite it until we release our consumer index.
        unsafe { self.descs.as_ptr().add(slot).read_volatile() }
    }

    /// Publishes our index (producer index after writes, or consumer index after reads).
    #[inline]
    pub fn publish(&mut self) {
        let (word, value) = match self.side {
            Side::Producer => (self.producer, self.idx.prod()),
            Side::Consumer => (self.consumer, self.idx.cons()),
        };
        // SAFETY: `word` points into our live mapping; Release orders the entry writes/reads
        // before the index the kernel will Acquire.
        unsafe { word.as_ref() }.store(value, Ordering::Release);
    }

    /// Producer side, once the kernel has stopped using the ring (its socket unbound: the
    /// interface is gone): the entries it never consumed, ours again.
    pub fn unconsumed(&mut self) -> Vec<T> {
        debug_assert!(self.side == Side::Producer);
        let size = self.idx.size();
        let left = size - self.free(size);
        let first = self.idx.prod().wrapping_sub(left);
        (0..left)
            .map(|i| {
                let slot = self.idx.slot(first.wrapping_add(i));
                // SAFETY: `slot < size`, so the entry lies in the mapping; we wrote it and the
                // kernel, having stopped, neither reads nor rewrites it.
                unsafe { self.descs.as_ptr().add(slot).read_volatile() }
            })
            .collect()
    }

    /// True if the kernel asked to be woken up (syscall) to process this ring.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: `flags` points into our live mapping; the kernel updates it atomically.
        unsafe { self.flags.as_ref() }.load(Ordering::Acquire) & XDP_RING_NEED_WAKEUP != 0
    }
}

impl<T: Copy> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `map`; no reference into it outlives
        // `self`.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_free_and_wrap() {
        let start = u32::MAX - 2;
        let mut r = RingIndex::new(8, start, start);
        assert_eq!(r.free(8, || unreachable!()), 8);
        let first = r.produce(5);
        assert_eq!(first, start);
        assert_eq!(r.prod(), 2); // wrapped past u32::MAX
        assert_eq!(r.slot(first), (start & 7) as usize);
        // Cache says 3 free: asking for 3 does not touch the peer.
        assert_eq!(r.free(3, || unreachable!()), 3);
        // Asking for more reloads the consumer: the kernel consumed 4 (across the wrap).
        assert_eq!(r.free(4, || start.wrapping_add(4)), 7);
        r.produce(7);
        assert_eq!(r.free(1, || start.wrapping_add(4)), 0);
        assert_eq!(r.outstanding(), 8);
    }

    #[test]
    fn consumer_available_and_wrap() {
        let start = u32::MAX - 1;
        let mut r = RingIndex::new(4, start, start);
        assert_eq!(r.available(4, || start), 0);
        // Kernel produced 3, wrapping the index.
        assert_eq!(r.available(2, || start.wrapping_add(3)), 2);
        assert_eq!(r.consume(2), start);
        assert_eq!(r.cons(), 0);
        // One left in the cache; a larger ask reloads and sees only what is there.
        assert_eq!(r.available(8, || start.wrapping_add(3)), 1);
        assert_eq!(r.consume(1), 0);
        assert_eq!(r.available(8, || start.wrapping_add(7)), 4);
        assert_eq!(r.consume(4), 1);
        assert_eq!(r.cons(), 5);
        assert_eq!(r.slot(r.cons()), 1);
    }

    #[test]
    fn full_ring_at_wrap() {
        let mut r = RingIndex::new(2048, u32::MAX, u32::MAX);
        assert_eq!(r.free(2048, || unreachable!()), 2048);
        r.produce(2048);
        assert_eq!(r.prod(), 2047);
        assert_eq!(r.free(1, || u32::MAX), 0);
        assert_eq!(r.free(1, || 1023), 1024);
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn rejects_odd_size() {
        RingIndex::new(3, 0, 0);
    }
}
