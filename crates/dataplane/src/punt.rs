//! The exception path: frames the forwarding node hands to the slow path instead of a tx port.
//!
//! VPP calls this "punt". The fast path decides *that* something needs the control plane (a
//! frame for the router, an ICMP error to send, a next hop to resolve, a packet to fragment)
//! and hands the frame over with a [`Punt`] saying why; the slow path ([`crate::slowpath`],
//! another thread) does the rest. The worker stays simple and fast: it never builds replies,
//! never waits and never holds a lock.
//!
//! [`PuntPort`] is where a worker's punts go: in benchmarks and tests a counting sink, in
//! `linerate run` a [`PuntSender`], which copies each frame into a bounded channel to the slow
//! path (the frame goes back to the worker's pool at once). When the channel is full, the
//! frame is dropped and counted (the slow path is behind; the fast path never blocks).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use io::batch::MAX_BATCH;
use io::mem::CountingTx;
use io::{Batch, FrameDesc, FramePool, TxPort};
use lpm::NextHop;
use wire::icmp_reply::IcmpError;

/// Why a frame left the fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Punt {
    /// For the router itself: its addresses, ARP, NDP and other multicast, broadcast.
    Local,
    /// Dropped (and counted); the slow path may send this ICMP error about it.
    Error(IcmpError),
    /// The next hop's link-layer address is unknown: resolve it, then send the frame (its
    /// TTL already decremented) on logical port `port`.
    Unresolved { next_hop: NextHop, port: u16 },
    /// IPv4 without DF, larger than the MTU of logical port `port`: fragment (RFC 791) and
    /// send to `mac` (TTL already decremented).
    Fragment { port: u16, mac: wire::MacAddr },
}

/// The punts of one batch: frames with their reason and logical input port.
pub struct PuntBatch {
    items: Vec<(FrameDesc, Punt, u16)>,
}

impl Default for PuntBatch {
    fn default() -> Self {
        PuntBatch { items: Vec::with_capacity(MAX_BATCH) }
    }
}

impl PuntBatch {
    #[inline]
    pub fn push(&mut self, desc: FrameDesc, punt: Punt, in_port: u16) {
        self.items.push((desc, punt, in_port));
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, (FrameDesc, Punt, u16)> {
        self.items.drain(..)
    }
}

/// Where a worker's punted frames go.
pub trait PuntPort {
    /// Takes every frame of `punts` (leaving it empty), returning each to `pool` when done.
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch);
}

/// Benchmarks and tests: punted frames are counted (as sent) and freed.
impl PuntPort for CountingTx {
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch) {
        let mut batch = Batch::new();
        for (desc, _, _) in punts.drain() {
            batch.push(desc);
        }
        self.tx_burst(pool, &mut batch);
    }
}

/// A punted frame as the slow path receives it: a copy, so the worker's pool never waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PuntedFrame {
    pub punt: Punt,
    /// Physical port it arrived on.
    pub phys: u16,
    /// Logical port it arrived on.
    pub in_port: u16,
    pub frame: Vec<u8>,
}

/// Frames in flight between all workers and the slow path.
pub const PUNT_QUEUE: usize = 4096;

/// A worker's end of the channel to the slow path.
pub struct PuntSender {
    tx: SyncSender<PuntedFrame>,
    overflows: Arc<AtomicU64>,
}

/// The slow path's end, with the count of frames the workers dropped because it was full.
pub struct PuntReceiver {
    pub rx: Receiver<PuntedFrame>,
    pub overflows: Arc<AtomicU64>,
}

/// A bounded channel from the workers (clone the sender per worker) to the slow path.
pub fn punt_channel(capacity: usize) -> (PuntSender, PuntReceiver) {
    let (tx, rx) = sync_channel(capacity);
    let overflows = Arc::new(AtomicU64::new(0));
    (PuntSender { tx, overflows: Arc::clone(&overflows) }, PuntReceiver { rx, overflows })
}

impl Clone for PuntSender {
    fn clone(&self) -> Self {
        PuntSender { tx: self.tx.clone(), overflows: Arc::clone(&self.overflows) }
    }
}

impl PuntPort for PuntSender {
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch) {
        for (desc, punt, in_port) in punts.drain() {
            let msg = PuntedFrame { punt, phys: desc.port, in_port, frame: pool.frame(desc).to_vec() };
            pool.free(desc);
            match self.tx.try_send(msg) {
                Ok(()) => {}
                // Full: the slow path is behind. Disconnected: it is gone (shutting down).
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    self.overflows.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_copies_frees_and_counts_overflow() {
        let mut pool = FramePool::new(8);
        let (mut tx, rx) = punt_channel(1);
        let mut punts = PuntBatch::default();
        for i in 0..2u8 {
            let mut d = pool.alloc().unwrap();
            pool.write(&mut d, &[i; 60]);
            d.port = 3;
            punts.push(d, Punt::Local, 5);
        }
        tx.punt_burst(&mut pool, &mut punts);
        assert!(punts.is_empty());
        assert_eq!(pool.available(), 8);
        let got = rx.rx.try_recv().unwrap();
        assert_eq!((got.phys, got.in_port, got.frame[0], got.frame.len()), (3, 5, 0, 60));
        assert!(rx.rx.try_recv().is_err());
        assert_eq!(rx.overflows.load(Ordering::Relaxed), 1);
    }
}
