//! The transmit side: a TPACKET_V2 tx ring of fixed slots.
//!
//! A slot is ours while its `tp_status` reads TP_STATUS_AVAILABLE (Acquire). We copy the frame
//! in, write `tp_len`, then store TP_STATUS_SEND_REQUEST (Release) so the kernel sees the bytes
//! before the flag. One zero-length `sendto` per burst makes the kernel send every requested
//! slot and mark each AVAILABLE again once the device is done with it. Each frame is preceded
//! by a `virtio_net_hdr` (PACKET_VNET_HDR) that makes the kernel copy it into the skb rather
//! than point into the ring (see [`ring::vnet_hdr`]).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use super::ring::{self, TxGeometry};
use super::sys::{self, Mapping};
use crate::batch::Batch;
use crate::pool::FramePool;
use crate::port::{PortStats, TxPort};

/// Transmit error counters beyond [`PortStats`] (each such frame is also in `tx_dropped`,
/// except `wrong_format` and `kick_errors`, which the kernel reports after the fact).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxErrors {
    /// Frames refused before the ring: shorter than an Ethernet header or longer than the MTU.
    pub invalid: u64,
    /// Frames dropped because every ring slot was still waiting for the kernel.
    pub ring_full: u64,
    /// Slots the kernel returned as TP_STATUS_WRONG_FORMAT (it refused the frame).
    pub wrong_format: u64,
    /// Kicks (`sendto`) that failed with something other than "try again".
    pub kick_errors: u64,
}

/// An AF_PACKET transmit port (TPACKET_V2 tx ring).
pub struct PacketTx {
    // `ring` is declared before `fd` so that it is unmapped before the socket closes.
    ring: Mapping,
    fd: OwnedFd,
    geo: TxGeometry,
    /// Next slot to fill.
    next: u32,
    /// Slots requested since the last kick.
    unkicked: u32,
    mtu: usize,
    stats: PortStats,
    errors: TxErrors,
}

impl PacketTx {
    /// Goes on from the counters of the socket this one replaces.
    pub fn inherit(&mut self, old: PortStats) {
        self.stats.tx_packets += old.tx_packets;
        self.stats.tx_bytes += old.tx_bytes;
        self.stats.tx_dropped += old.tx_dropped;
    }

    pub(crate) fn new(fd: OwnedFd, ring: Mapping, geo: TxGeometry, mtu: u32) -> PacketTx {
        debug_assert_eq!(ring.len(), geo.ring_len());
        PacketTx {
            ring,
            fd,
            geo,
            next: 0,
            unkicked: 0,
            mtu: mtu as usize,
            stats: PortStats::default(),
            errors: TxErrors::default(),
        }
    }

    /// Error counters beyond [`PortStats`].
    pub fn errors(&self) -> TxErrors {
        self.errors
    }

    /// Number of slots in the ring.
    pub fn slots(&self) -> u32 {
        self.geo.frames
    }

    /// Slots still held by the kernel (requested, or being sent).
    pub fn in_flight(&self) -> u32 {
        (0..self.geo.frames)
            .filter(|&i| {
                self.slot_status(i) & (ring::status::SEND_REQUEST | ring::status::SENDING) != 0
            })
            .count() as u32
    }

    fn slot_status(&self, index: u32) -> u32 {
        self.ring.status(self.geo.slot_offset(index) + ring::v2::STATUS).load(Ordering::Acquire)
    }

    /// Takes the next slot if the kernel is done with it (recycling a refused one).
    fn claim(&mut self) -> bool {
        let st = self.slot_status(self.next);
        if st == ring::status::AVAILABLE {
            return true;
        }
        if st == ring::status::WRONG_FORMAT {
            self.errors.wrong_format += 1;
            return true;
        }
        false
    }

    fn kick(&mut self) {
        self.unkicked = 0;
        if let Err(e) = sys::kick(&self.fd) {
            match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {}
                _ if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                _ => self.errors.kick_errors += 1,
            }
        }
    }
}

impl TxPort for PacketTx {
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        let mut kicked_when_full = false;
        for desc in batch.drain() {
            let frame = pool.frame(desc);
            if !ring::tx_len_ok(frame, self.mtu) || frame.len() > self.geo.max_data() {
                self.errors.invalid += 1;
                self.stats.tx_dropped += 1;
                pool.free(desc);
                continue;
            }
            let mut free = self.claim();
            if !free && !kicked_when_full {
                // Ring full: push out what is queued once and look again.
                kicked_when_full = true;
                self.kick();
                free = self.claim();
            }
            if !free {
                self.errors.ring_full += 1;
                self.stats.tx_dropped += 1;
                pool.free(desc);
                continue;
            }
            let slot = self.geo.slot_offset(self.next);
            // SAFETY: `claim` read the slot's status (Acquire) as AVAILABLE or WRONG_FORMAT:
            // the kernel has let go of it and reads it again only after SEND_REQUEST below.
            // No slice of the tx mapping exists. The data fits (`max_data` checked above).
            unsafe {
                self.ring.write(slot + ring::v2::DATA, &ring::vnet_hdr(frame.len()));
                self.ring.write(slot + ring::v2::DATA + ring::VNET_HDR_LEN, frame);
                self.ring.write(
                    slot + ring::v2::LEN,
                    &((ring::VNET_HDR_LEN + frame.len()) as u32).to_ne_bytes(),
                );
            }
            self.ring
                .status(slot + ring::v2::STATUS)
                .store(ring::status::SEND_REQUEST, Ordering::Release);
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += frame.len() as u64;
            self.unkicked += 1;
            self.next = self.geo.next_slot(self.next);
            pool.free(desc);
        }
        if self.unkicked > 0 {
            self.kick();
        }
    }

    fn flush(&mut self, _pool: &mut FramePool) {
        self.kick();
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}
