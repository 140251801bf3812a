//! The receive side: a TPACKET_V3 ring walked block by block.
//!
//! The kernel fills a block with variable-size frames and hands it over by setting
//! `block_status` to TP_STATUS_USER (when full, or when `tp_retire_blk_tov` expires). The port
//! reads that word with Acquire, copies frames into pool chunks, and when the block is empty
//! stores TP_STATUS_KERNEL with Release, so the kernel sees our reads done before it reuses it.
//! Blocks go back strictly in ring order, as the kernel expects. Frames sent by this host with
//! offloads pending (partial checksum, GSO) take the rare branch in [`rx_offload`].

use std::any::Any;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::ring::{self, BlockCursor, BlockHeader, RxGeometry, Step};
use super::rx_offload::{self, OffloadState};
use super::sys::{self, Mapping};
use crate::batch::Batch;
use crate::pool::{FramePool, MAX_FRAME_LEN};
use crate::port::{PortStats, RxDrops, RxPort};

/// Receive counters beyond [`PortStats`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxCounters {
    /// Frames skipped because the kernel cut them (longer than a ring frame or a pool chunk).
    pub truncated: u64,
    /// Frames that arrived flagged TP_STATUS_LOSING: the kernel dropped frames before them.
    pub losing: u64,
    /// Blocks given back early because their frame links were inconsistent (never expected).
    pub corrupt_blocks: u64,
    /// Calls that stopped because the pool was empty (the frame stays in the ring).
    pub pool_empty: u64,
}

/// The kernel's own counters for the socket (PACKET_STATISTICS), accumulated since open.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames the socket was offered.
    pub packets: u64,
    /// Frames dropped because the ring was full.
    pub drops: u64,
    /// Times the ring was found full and froze until a block came back.
    pub freezes: u64,
}

/// An AF_PACKET receive port (TPACKET_V3 ring).
pub struct PacketRx {
    // `ring` is declared before `fd` so that it is unmapped before the socket closes.
    ring: Mapping,
    fd: OwnedFd,
    geo: RxGeometry,
    /// The block the reader is at (owned by us or next to be handed over).
    block: u32,
    /// Position inside `block` once it is ours.
    cursor: Option<BlockCursor>,
    port: u16,
    stats: PortStats,
    counters: RxCounters,
    kernel: KernelStats,
    offload: OffloadState,
    /// What must live as long as the socket (the fast path its filter serves).
    _keep: Option<Arc<dyn Any + Send + Sync>>,
}

impl PacketRx {
    /// Goes on from the counters of the socket this one replaces (its interface created
    /// again), so that the port's counters never go back.
    pub fn inherit(&mut self, old: PortStats) {
        self.stats.rx_packets += old.rx_packets;
        self.stats.rx_bytes += old.rx_bytes;
        self.stats.rx_dropped += old.rx_dropped;
    }

    pub(crate) fn new(fd: OwnedFd, ring: Mapping, geo: RxGeometry, port: u16) -> PacketRx {
        debug_assert_eq!(Some(ring.len()), geo.ring_len());
        PacketRx {
            ring,
            fd,
            geo,
            block: 0,
            cursor: None,
            port,
            stats: PortStats::default(),
            counters: RxCounters::default(),
            kernel: KernelStats::default(),
            offload: OffloadState::default(),
            _keep: None,
        }
    }

    /// Puts eBPF socket filter `prog` on the socket (a frame it returns 0 for is not
    /// received), and keeps `keep` (what the filter relies on) as long as the socket.
    pub fn set_filter(&mut self, prog: RawFd, keep: Arc<dyn Any + Send + Sync>) -> io::Result<()> {
        sys::attach_bpf_filter(&self.fd, prog)?;
        self._keep = Some(keep);
        Ok(())
    }

    /// Counters beyond [`PortStats`].
    pub fn counters(&self) -> RxCounters {
        self.counters
    }

    /// The kernel's counters for this socket since it was opened (reads PACKET_STATISTICS,
    /// which the kernel resets on each read, and accumulates).
    pub fn kernel_stats(&mut self) -> KernelStats {
        if let Ok((packets, drops, freezes)) = sys::packet_stats(&self.fd) {
            self.kernel.packets += u64::from(packets);
            self.kernel.drops += u64::from(drops);
            self.kernel.freezes += u64::from(freezes);
        }
        self.kernel
    }

    /// True if a frame is ready for [`RxPort::rx_burst`] now.
    pub fn ready(&self) -> bool {
        self.cursor.is_some() || self.block_status() & ring::status::USER != 0
    }

    /// Blocks up to `timeout_ms` (-1: no limit) until frames are ready, with poll(2), so an
    /// idle receiver need not spin. Returns whether frames are ready. A block is handed over
    /// when full or after the retire timeout (`PacketConfig::rx_timeout_ms`), so a lone
    /// frame shows up within that time.
    pub fn wait(&self, timeout_ms: i32) -> bool {
        if self.ready() {
            return true;
        }
        let _ = sys::poll_in(self.fd.as_raw_fd(), timeout_ms);
        self.ready()
    }

    fn block_status(&self) -> u32 {
        let off = self.geo.block_offset(self.block) + ring::block::BLOCK_STATUS;
        self.ring.status(off).load(Ordering::Acquire)
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        let off = self.geo.block_offset(self.block) + ring::block::BLOCK_STATUS;
        self.ring.status(off).store(ring::status::KERNEL, Ordering::Release);
        self.cursor = None;
        self.block = self.geo.next_block(self.block);
    }
}

impl RxPort for PacketRx {
    fn rx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        let want = max.min(batch.room());
        let (mut got, mut bytes) = (0usize, 0u64);
        let block_len = self.geo.block_size as usize;
        while got < want {
            if self.cursor.is_none() {
                if self.block_status() & ring::status::USER == 0 {
                    break; // the kernel still owns the next block: nothing more to read
                }
                // SAFETY: the block's status was just read (Acquire) as TP_STATUS_USER, so the
                // kernel has finished writing it and will not touch it until we store
                // TP_STATUS_KERNEL in `release_block`, after this slice is gone.
                let blk = unsafe { self.ring.bytes(self.geo.block_offset(self.block), block_len) };
                match BlockHeader::parse(blk) {
                    Some(h) => self.cursor = Some(BlockCursor::start(&h)),
                    None => {
                        self.counters.corrupt_blocks += 1;
                        self.release_block();
                        continue;
                    }
                }
            }
            let Some(cursor) = self.cursor else { break };
            // SAFETY: as above: the block is ours until `release_block`, which runs only after
            // the last use of `blk` in this iteration.
            let blk = unsafe { self.ring.bytes(self.geo.block_offset(self.block), block_len) };
            let mut next = cursor;
            match next.next(blk) {
                Step::Done => self.release_block(),
                Step::Corrupt => {
                    self.counters.corrupt_blocks += 1;
                    self.release_block();
                }
                Step::Frame(frame) if frame.status & ring::status::OFFLOAD != 0 => {
                    let room = want - got;
                    let took = rx_offload::take(
                        blk,
                        &frame,
                        cursor.offset as usize,
                        &mut self.offload,
                        &mut self.counters,
                        pool,
                        batch,
                        room,
                        self.port,
                    );
                    got += took.frames;
                    bytes += took.bytes;
                    if !took.finished {
                        break; // the rest of the frame on the next call
                    }
                    self.consumed(&frame, next);
                }
                Step::Frame(frame) => {
                    let len = ring::len_with_vlan(&frame);
                    let unusable =
                        frame.truncated() || len > MAX_FRAME_LEN || frame.data.len() < 14;
                    let desc = if unusable {
                        None
                    } else if let Some(desc) = pool.alloc() {
                        Some(desc)
                    } else {
                        // Leave the frame in the ring; a later call reads it.
                        self.counters.pool_empty += 1;
                        break;
                    };
                    if let Some(mut desc) = desc {
                        rx_offload::copy_in(pool, &mut desc, &blk[frame.data.clone()], frame.vlan);
                        desc.port = self.port;
                        bytes += u64::from(desc.len);
                        batch.push(desc);
                        got += 1;
                    } else {
                        self.counters.truncated += 1;
                        self.offload.drops.count_unusable(frame.data.len());
                    }
                    self.consumed(&frame, next);
                }
            }
        }
        self.stats.rx_packets += got as u64;
        self.stats.rx_bytes += bytes;
        got
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    /// Readable once a block is retired (full, or `rx_timeout_ms` after its first frame).
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.fd))
    }

    fn take_drops(&mut self) -> RxDrops {
        std::mem::take(&mut self.offload.drops)
    }
}

impl PacketRx {
    /// Moves the cursor past a frame read whole, and hands the block back after its last one
    /// (now, not on the next call).
    fn consumed(&mut self, frame: &ring::Frame, next: BlockCursor) {
        if frame.status & ring::status::LOSING != 0 {
            self.counters.losing += 1;
        }
        self.cursor = Some(next);
        if next.remaining == 0 {
            self.release_block();
        }
    }
}
