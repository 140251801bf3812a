//! A bounded single-producer single-consumer ring of fixed-size records, for copies of packets
//! that a worker hands to a thread that writes them out (pflog records, captures).
//!
//! The producer never blocks and never allocates: [`Producer::push_with`] fills the next free
//! slot in place, or, when the ring is full, counts a drop and returns. The slots are
//! allocated once, when the ring is made. The classic Lamport ring: the producer owns `tail`,
//! the consumer `head`; each publishes its index with a release store that the other reads
//! with an acquire load, so a slot's bytes are written before the consumer can see it, and
//! read before the producer can reuse it. The two indices sit on separate cache lines.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[repr(align(64))]
struct Line(AtomicUsize);

struct Shared<T> {
    slots: Box<[UnsafeCell<T>]>,
    mask: usize,
    /// Next slot the consumer reads (written by the consumer only).
    head: Line,
    /// Next slot the producer writes (written by the producer only).
    tail: Line,
    /// Records the producer could not push: the ring was full.
    dropped: AtomicU64,
}

// SAFETY: a slot is accessed by one side at a time: the producer writes slot `tail` only while
// it is not yet published (tail - head < capacity), the consumer reads slot `head` only once
// the producer's release store of `tail` has published it, and the producer reuses it only
// after the consumer's release store of `head` has given it back. `T: Send` because records
// move from one thread to the other.
unsafe impl<T: Send> Sync for Shared<T> {}

/// The writing end; one per ring (not `Clone`).
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Local copy of `tail` (only this side writes it).
    tail: usize,
    /// Last `head` seen: re-read only when the ring looks full.
    head_seen: usize,
}

/// The reading end; one per ring (not `Clone`).
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
}

/// A ring of at least `capacity` slots (rounded up to a power of two, at least 2), each
/// starting as `T::default()`.
pub fn ring<T: Default + Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let n = capacity.max(2).next_power_of_two();
    let shared = Arc::new(Shared {
        slots: (0..n).map(|_| UnsafeCell::new(T::default())).collect(),
        mask: n - 1,
        head: Line(AtomicUsize::new(0)),
        tail: Line(AtomicUsize::new(0)),
        dropped: AtomicU64::new(0),
    });
    (Producer { shared: Arc::clone(&shared), tail: 0, head_seen: 0 }, Consumer { shared })
}

impl<T: Send> Producer<T> {
    /// Fills the next free slot with `fill` and publishes it; `false` (and a drop counted) if
    /// the ring is full. `fill` gets the slot as the consumer last left it: it must set every
    /// field the consumer reads.
    #[inline]
    pub fn push_with(&mut self, fill: impl FnOnce(&mut T)) -> bool {
        let s = &*self.shared;
        if self.tail.wrapping_sub(self.head_seen) > s.mask {
            self.head_seen = s.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.head_seen) > s.mask {
                // A single writer: a relaxed load and store is an increment nobody races.
                s.dropped.store(s.dropped.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                return false;
            }
        }
        // SAFETY: slot `tail` is not published (tail - head <= mask, checked above), so the
        // consumer does not read it; only this producer writes it (see `Shared`'s Sync).
        fill(unsafe { &mut *s.slots[self.tail & s.mask].get() });
        self.tail = self.tail.wrapping_add(1);
        s.tail.0.store(self.tail, Ordering::Release);
        true
    }

    /// Records dropped because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Whether the consumer end still exists.
    pub fn has_consumer(&self) -> bool {
        Arc::strong_count(&self.shared) > 1
    }
}

impl<T: Send> Consumer<T> {
    /// Hands the oldest record to `read` and frees its slot; `false` if the ring is empty.
    #[inline]
    pub fn pop_with(&mut self, read: impl FnOnce(&T)) -> bool {
        let s = &*self.shared;
        let head = s.head.0.load(Ordering::Relaxed);
        if head == s.tail.0.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: slot `head` was published by the producer's release store of `tail` (read
        // with acquire above) and is not reused until the store of `head` below.
        read(unsafe { &*s.slots[head & s.mask].get() });
        s.head.0.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Records the producer dropped because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Whether the producer end still exists (when it does not, what is left can still be read).
    pub fn has_producer(&self) -> bool {
        Arc::strong_count(&self.shared) > 1
    }

    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_until_full_then_drops_counted() {
        let (mut p, mut c) = ring::<u32>(3);
        assert_eq!(c.capacity(), 4);
        for i in 0..4 {
            assert!(p.push_with(|s| *s = i));
        }
        assert!(!p.push_with(|s| *s = 99), "full");
        assert_eq!((p.dropped(), c.dropped()), (1, 1));
        let mut got = Vec::new();
        while c.pop_with(|v| got.push(*v)) {}
        assert_eq!(got, [0, 1, 2, 3]);
        assert!(p.push_with(|s| *s = 4), "room again");
        assert!(c.pop_with(|v| assert_eq!(*v, 4)));
        assert!(!c.pop_with(|_| panic!("empty")));
    }

    #[test]
    fn ends_see_each_other_go() {
        let (p, c) = ring::<u8>(2);
        assert!(p.has_consumer() && c.has_producer());
        drop(p);
        assert!(!c.has_producer());
    }

    /// Two threads, a small ring: every record pushed arrives once, in order, and the pushes
    /// that found the ring full are exactly the missing ones.
    #[test]
    fn across_threads_in_order_nothing_lost_but_counted() {
        const N: u64 = 200_000;
        let (mut p, mut c) = ring::<[u64; 4]>(64);
        let writer = std::thread::spawn(move || {
            let mut pushed = 0u64;
            for i in 0..N {
                if p.push_with(|s| *s = [i, i * 2, i * 3, !i]) {
                    pushed += 1;
                }
            }
            (pushed, p.dropped())
        });
        let mut last = None;
        let mut got = 0u64;
        let mut drain = |c: &mut Consumer<[u64; 4]>| {
            while c.pop_with(|r| {
                assert_eq!(*r, [r[0], r[0] * 2, r[0] * 3, !r[0]], "torn record");
                assert!(last.is_none_or(|l| r[0] > l), "out of order");
                last = Some(r[0]);
                got += 1;
            }) {}
        };
        while c.has_producer() {
            drain(&mut c);
            std::hint::spin_loop();
        }
        let (pushed, dropped) = writer.join().unwrap();
        drain(&mut c);
        assert_eq!(got, pushed);
        assert_eq!(pushed + dropped, N);
    }
}
