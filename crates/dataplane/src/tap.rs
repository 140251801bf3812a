//! Packet capture inside the pipeline (`linerate capture`): copies of the frames a worker
//! receives (`rx`), sends (`tx`) or drops (`drop`, with the reason), as VPP's `pcap trace`.
//! Once AF_XDP owns an interface, tcpdump on it no longer sees the forwarded traffic: this is
//! what replaces it.
//!
//! Costs nothing measurable while nobody captures: each worker reads its [`CaptureSlot`]'s
//! generation with one relaxed load per poll round (a batch per port), and only when it
//! changed takes the armed [`Tap`] (under a lock, once). An armed worker copies up to the
//! snap length of each frame at the chosen point into its bounded ring ([`io::spsc`]); a
//! full ring drops the copy and counts it; the control thread drains the rings.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use io::spsc::{Consumer, Producer};
use io::{Batch, FrameDesc, FramePool};

use crate::counters::DropReason;

/// Largest snap length of a capture: a whole standard frame with two tags.
pub const CAPTURE_SNAP_MAX: usize = 1536;

/// Where in the pipeline a capture copies frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// As received, before any check.
    Rx,
    /// As the workers send them (forwarded frames: L2 rewritten, TTL decremented).
    Tx,
    /// Dropped by the forwarding path, with the reason (as received, but for a TTL already
    /// decremented by a packet the out rules blocked).
    Drop,
}

impl Point {
    pub fn name(self) -> &'static str {
        match self {
            Point::Rx => "rx",
            Point::Tx => "tx",
            Point::Drop => "drop",
        }
    }

    pub fn parse(s: &str) -> Option<Point> {
        [Point::Rx, Point::Tx, Point::Drop].into_iter().find(|p| p.name() == s)
    }
}

/// One captured frame.
#[derive(Clone, Copy)]
pub struct CaptureRecord {
    /// Wall-clock time, nanoseconds since 1970.
    pub ts_ns: u64,
    /// Physical port: where it came in (`rx`, `drop`) or goes out (`tx`).
    pub port: u16,
    /// Why it was dropped (`drop` only).
    pub reason: Option<DropReason>,
    pub orig_len: u16,
    /// Bytes of it in `data`.
    pub len: u16,
    pub data: [u8; CAPTURE_SNAP_MAX],
}

impl Default for CaptureRecord {
    fn default() -> Self {
        CaptureRecord {
            ts_ns: 0,
            port: 0,
            reason: None,
            orig_len: 0,
            len: 0,
            data: [0; CAPTURE_SNAP_MAX],
        }
    }
}

impl CaptureRecord {
    pub fn frame(&self) -> &[u8] {
        &self.data[..usize::from(self.len).min(CAPTURE_SNAP_MAX)]
    }
}

/// What to capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureSpec {
    pub point: Point,
    /// Only frames of this physical port (`None`: every port).
    pub port: Option<u16>,
    /// Bytes kept of each frame (at most [`CAPTURE_SNAP_MAX`]).
    pub snap: usize,
}

/// An armed capture in a worker: what it copies and where to.
pub struct Tap {
    spec: CaptureSpec,
    ring: Producer<CaptureRecord>,
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

impl Tap {
    /// Whether this tap copies frames at `point`.
    #[inline(always)]
    pub fn at(&self, point: Point) -> bool {
        self.spec.point == point
    }

    /// Copies `frame` (of physical port `port`) if the spec wants it; a full ring counts a drop.
    pub fn copy(&mut self, frame: &[u8], port: u16, reason: Option<DropReason>) {
        if self.spec.port.is_some_and(|p| p != port) {
            return;
        }
        let snap = self.spec.snap.min(frame.len()).min(CAPTURE_SNAP_MAX);
        let ts_ns = now_ns();
        self.ring.push_with(|r| {
            (r.ts_ns, r.port, r.reason) = (ts_ns, port, reason);
            r.orig_len = frame.len().min(usize::from(u16::MAX)) as u16;
            r.len = snap as u16;
            r.data[..snap].copy_from_slice(&frame[..snap]);
        });
    }

    /// Copies every frame of `batch` (all of physical port `port`, or, with `None`, each of
    /// its own descriptor's port).
    pub fn copy_batch(&mut self, pool: &FramePool, batch: &Batch, port: Option<u16>) {
        for d in batch.as_slice() {
            self.copy_desc(pool, *d, port.unwrap_or(d.port), None);
        }
    }

    pub fn copy_desc(
        &mut self,
        pool: &FramePool,
        desc: FrameDesc,
        port: u16,
        reason: Option<DropReason>,
    ) {
        self.copy(pool.frame(desc), port, reason);
    }

    /// The consumer went away (the client disconnected): the worker can drop this tap.
    pub fn abandoned(&self) -> bool {
        !self.ring.has_consumer()
    }
}

/// How the control thread arms a capture in one worker.
#[derive(Default)]
pub struct CaptureSlot {
    /// Bumped on every arm and disarm; read by the worker once per poll round.
    generation: AtomicU64,
    /// The tap the worker takes when it sees a new generation (`None`: disarmed).
    next: Mutex<Option<Tap>>,
}

impl CaptureSlot {
    pub fn new() -> Arc<CaptureSlot> {
        Arc::new(CaptureSlot::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Tap>> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms `spec` with a ring of `capacity` records; the worker starts copying at its next
    /// poll round. The returned end reads the copies.
    pub fn arm(&self, spec: CaptureSpec, capacity: usize) -> Consumer<CaptureRecord> {
        let (ring, consumer) = io::spsc::ring(capacity);
        *self.lock() = Some(Tap {
            spec: CaptureSpec { snap: spec.snap.clamp(1, CAPTURE_SNAP_MAX), ..spec },
            ring,
        });
        self.generation.fetch_add(1, Ordering::Release);
        consumer
    }

    /// Stops the capture (the worker drops its tap at its next poll round).
    pub fn disarm(&self) {
        *self.lock() = None;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The worker's check, once per poll round: `Some(tap)` when the capture changed since
    /// generation `seen` (which is then updated).
    #[inline(always)]
    pub fn changed(&self, seen: &mut u64) -> Option<Option<Tap>> {
        let g = self.generation.load(Ordering::Relaxed);
        if g == *seen {
            return None;
        }
        Some(self.take(g, seen))
    }

    #[cold]
    fn take(&self, g: u64, seen: &mut u64) -> Option<Tap> {
        // Acquire: the tap published before the generation bump is visible.
        std::sync::atomic::fence(Ordering::Acquire);
        *seen = g;
        self.lock().take()
    }
}

/// One capture across workers: the control side's handle, which disarms every worker when
/// dropped.
pub struct Capture {
    slots: Vec<Arc<CaptureSlot>>,
    pub rings: Vec<Consumer<CaptureRecord>>,
}

/// Arms `spec` in every worker's slot (rings of `capacity` records each).
pub fn arm_all(slots: &[Arc<CaptureSlot>], spec: CaptureSpec, capacity: usize) -> Capture {
    let rings = slots.iter().map(|s| s.arm(spec, capacity)).collect();
    Capture { slots: slots.to_vec(), rings }
}

impl Capture {
    /// Copies dropped because a worker's ring was full.
    pub fn ring_drops(&self) -> u64 {
        self.rings.iter().map(Consumer::dropped).sum()
    }
}

impl std::ops::Drop for Capture {
    fn drop(&mut self) {
        for s in &self.slots {
            s.disarm();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn armed_once_per_generation_and_filtered_by_port() {
        let slot = CaptureSlot::new();
        let mut seen = 0;
        assert!(slot.changed(&mut seen).is_none(), "nothing armed: no change");
        let mut rx = slot.arm(CaptureSpec { point: Point::Drop, port: Some(1), snap: 4 }, 8);
        let mut tap = slot.changed(&mut seen).expect("changed").expect("armed");
        assert!(slot.changed(&mut seen).is_none(), "taken once");
        assert!(tap.at(Point::Drop) && !tap.at(Point::Rx));
        tap.copy(&[1, 2, 3, 4, 5, 6], 1, Some(DropReason::TtlExpired));
        tap.copy(&[9; 6], 0, None);
        let mut got = Vec::new();
        while rx.pop_with(|r| got.push((r.port, r.reason, r.orig_len, r.frame().to_vec()))) {}
        assert_eq!(got, [(1, Some(DropReason::TtlExpired), 6, vec![1, 2, 3, 4])]);
        slot.disarm();
        assert!(matches!(slot.changed(&mut seen), Some(None)), "disarmed");
        drop(rx);
        assert!(tap.abandoned());
    }

    #[test]
    fn a_full_ring_counts_what_it_drops() {
        let slots = [CaptureSlot::new()];
        let cap = arm_all(&slots, CaptureSpec { point: Point::Rx, port: None, snap: 64 }, 2);
        let mut seen = 0;
        let mut tap = slots[0].changed(&mut seen).unwrap().unwrap();
        for _ in 0..5 {
            tap.copy(&[0; 60], 0, None);
        }
        assert_eq!(cap.ring_drops(), 3);
        drop(cap);
        assert!(matches!(slots[0].changed(&mut seen), Some(None)), "dropping the capture disarms");
    }
}
