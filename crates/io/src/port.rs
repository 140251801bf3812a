//! The batch-first port traits every backend implements.
//!
//! Ports move descriptors, never bytes: an rx port fills frames from the pool and appends their
//! descriptors to a batch; a tx port takes a whole batch and owns its frames from then on
//! (sends them, or frees them and counts a tx drop). The worker is generic over the port types,
//! so each call is static dispatch, made once per batch rather than once per packet.

use crate::batch::Batch;
use crate::offload::OffloadError;
use crate::pool::FramePool;

/// Counters of one port, kept by the port itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames the port could not send (ring full, write error) and freed.
    pub tx_dropped: u64,
    /// Frames the port could not receive (no free frame in the pool).
    pub rx_dropped: u64,
}

/// Frames a port received but dropped itself (it could not turn them into frames the
/// pipeline takes), by reason, since the last [`RxPort::take_drops`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxDrops {
    /// Offload metadata that does not match its frame ([`OffloadError::Malformed`]).
    pub offload_malformed: u64,
    /// GSO frames linerate does not segment ([`OffloadError::Unsupported`]).
    pub gso_unsupported: u64,
    /// Frames longer than a frame buffer holds ([`crate::pool::MAX_FRAME_LEN`]), cut by the
    /// kernel: a link MTU above the interface's (jumbo frames).
    pub too_long: u64,
    /// Frames shorter than an Ethernet header.
    pub runt: u64,
}

impl RxDrops {
    pub fn is_empty(&self) -> bool {
        *self == RxDrops::default()
    }

    /// Counts one frame that cannot be a frame in the pool: `too_long`, or a `runt`.
    pub fn count_unusable(&mut self, len: usize) {
        if len < 14 {
            self.runt += 1;
        } else {
            self.too_long += 1;
        }
    }

    /// Counts one frame dropped for `e`.
    pub fn count(&mut self, e: OffloadError) {
        match e {
            OffloadError::Malformed => self.offload_malformed += 1,
            OffloadError::Unsupported => self.gso_unsupported += 1,
        }
    }
}

/// A source of frames.
pub trait RxPort {
    /// Receives up to `max` frames from the pool into `batch` (appending), returns how many.
    fn rx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize;
    fn stats(&self) -> PortStats;
    /// A descriptor that `poll(2)` reports readable when frames arrive, for a worker that
    /// sleeps while idle; `None` for ports that cannot wake anyone (in-memory ports).
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// The frames the port dropped since the last call (and resets them): the worker counts
    /// them under their drop reasons. Ports that never drop need not implement it.
    #[inline(always)]
    fn take_drops(&mut self) -> RxDrops {
        RxDrops::default()
    }
}

/// A sink of frames.
pub trait TxPort {
    /// Sends every frame of `batch` (leaving it empty); frames it cannot send are freed to the
    /// pool and counted in `tx_dropped`.
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch);
    /// Pushes out anything the port buffered (a no-op for most ports).
    fn flush(&mut self, _pool: &mut FramePool) {}
    fn stats(&self) -> PortStats;
}
