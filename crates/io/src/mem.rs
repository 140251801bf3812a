//! In-memory ports: replay a frame set forever, count and discard, or write a pcap.
//!
//! These stand in for a NIC in benchmarks and golden tests. The replay port copies every frame
//! into a pool buffer on receive, so the pipeline pays for touching fresh packet memory the way
//! it would behind a real port (netmap-fwd and DPDK's pcap PMD benchmarks do the same).

use std::io::{self, Write};

use crate::batch::Batch;
use crate::pcap::PcapWriter;
use crate::pool::{FramePool, MAX_FRAME_LEN};
use crate::port::{PortStats, RxPort, TxPort};

/// Receives a fixed list of frames in order, looping (or once, for golden tests).
pub struct ReplayRx {
    /// All frames back to back; `bounds[i]..bounds[i+1]` is frame i.
    bytes: Vec<u8>,
    bounds: Vec<usize>,
    next: usize,
    looping: bool,
    port: u16,
    stats: PortStats,
}

impl ReplayRx {
    /// A port replaying `frames` forever, stamping them as received on `port`.
    /// Frames longer than a pool chunk holds are left out (a NIC would drop them).
    pub fn new<I, F>(port: u16, frames: I) -> Self
    where
        I: IntoIterator<Item = F>,
        F: AsRef<[u8]>,
    {
        let mut bytes = Vec::new();
        let mut bounds = vec![0];
        for frame in frames {
            let frame = frame.as_ref();
            if frame.len() <= MAX_FRAME_LEN {
                bytes.extend_from_slice(frame);
                bounds.push(bytes.len());
            }
        }
        ReplayRx { bytes, bounds, next: 0, looping: true, port, stats: PortStats::default() }
    }

    /// Stops after one pass over the frames instead of looping.
    pub fn once(mut self) -> Self {
        self.looping = false;
        self
    }

    /// Number of distinct frames replayed.
    pub fn frames(&self) -> usize {
        self.bounds.len() - 1
    }

    /// True once a non-looping port has delivered every frame.
    pub fn finished(&self) -> bool {
        !self.looping && self.next >= self.frames()
    }
}

impl RxPort for ReplayRx {
    #[inline]
    fn rx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        let frames = self.frames();
        let want = max.min(batch.room());
        let mut got = 0;
        let mut bytes = 0;
        while got < want && frames > 0 {
            if self.next >= frames {
                if !self.looping {
                    break;
                }
                self.next = 0;
            }
            let Some(mut desc) = pool.alloc() else {
                self.stats.rx_dropped += 1;
                break;
            };
            let (start, end) = (self.bounds[self.next], self.bounds[self.next + 1]);
            let frame = &self.bytes[start..end];
            pool.write(&mut desc, frame);
            desc.port = self.port;
            bytes += frame.len();
            batch.push(desc);
            self.next += 1;
            got += 1;
        }
        self.stats.rx_packets += got as u64;
        self.stats.rx_bytes += bytes as u64;
        got
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Counts what it is given and frees it: the receiver of an in-memory benchmark.
#[derive(Default)]
pub struct CountingTx {
    stats: PortStats,
}

impl CountingTx {
    pub fn new() -> Self {
        Self::default()
    }
}

impl TxPort for CountingTx {
    #[inline]
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        self.stats.tx_packets += batch.len() as u64;
        for desc in batch.drain() {
            self.stats.tx_bytes += desc.len as u64;
            pool.free(desc);
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Keeps a copy of every frame it is given, in order, and frees it: what the tests and the
/// data plane's fuzz target read back.
#[derive(Default)]
pub struct CaptureTx {
    pub frames: Vec<Vec<u8>>,
    stats: PortStats,
}

impl TxPort for CaptureTx {
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        for desc in batch.drain() {
            self.frames.push(pool.frame(desc).to_vec());
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += desc.len as u64;
            pool.free(desc);
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Writes every frame it is given to a pcap stream, in order, with timestamps 0.000001,
/// 0.000002, ... so that the same input always gives byte-identical output (golden tests).
pub struct PcapTx<W: Write> {
    writer: PcapWriter<W>,
    stats: PortStats,
    error: Option<io::Error>,
}

impl<W: Write> PcapTx<W> {
    pub fn new(out: W) -> io::Result<Self> {
        Ok(PcapTx { writer: PcapWriter::new(out)?, stats: PortStats::default(), error: None })
    }

    /// Flushes and returns the stream, or the first write error met.
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        self.writer.flush()?;
        Ok(self.writer.into_inner())
    }
}

impl<W: Write> TxPort for PcapTx<W> {
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        for desc in batch.drain() {
            let n = self.stats.tx_packets + 1;
            let written = if self.error.is_none() {
                let ts = (n / 1_000_000) as u32;
                let us = (n % 1_000_000) as u32;
                self.writer.write(ts, us, pool.frame(desc))
            } else {
                Ok(())
            };
            match written {
                Ok(()) if self.error.is_none() => {
                    self.stats.tx_packets = n;
                    self.stats.tx_bytes += desc.len as u64;
                }
                Ok(()) => self.stats.tx_dropped += 1,
                Err(err) => {
                    self.error = Some(err);
                    self.stats.tx_dropped += 1;
                }
            }
            pool.free(desc);
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap;
    use std::path::Path;

    #[test]
    fn replay_loops_and_copies_frames() {
        let mut pool = FramePool::new(16);
        let mut rx = ReplayRx::new(3, [vec![1u8; 60], vec![2u8; 70]]);
        let mut batch = Batch::new();
        assert_eq!(rx.rx_burst(&mut pool, &mut batch, 5), 5);
        let lens: Vec<u16> = batch.as_slice().iter().map(|d| d.len).collect();
        assert_eq!(lens, [60, 70, 60, 70, 60]);
        assert!(batch.as_slice().iter().all(|d| d.port == 3));
        assert_eq!(pool.frame(batch.as_slice()[1]), &[2u8; 70][..]);
        assert_eq!(rx.stats().rx_packets, 5);
        let mut tx = CountingTx::new();
        tx.tx_burst(&mut pool, &mut batch);
        assert!(batch.is_empty());
        assert_eq!(tx.stats().tx_packets, 5);
        assert_eq!(tx.stats().tx_bytes, 320);
        assert_eq!(pool.available(), 16);
    }

    #[test]
    fn replay_once_stops_and_pool_exhaustion_is_counted() {
        let mut pool = FramePool::new(2);
        let mut rx = ReplayRx::new(0, [[0u8; 60]; 3]).once();
        let mut batch = Batch::new();
        assert_eq!(rx.rx_burst(&mut pool, &mut batch, 8), 2);
        assert_eq!(rx.stats().rx_dropped, 1);
        CountingTx::new().tx_burst(&mut pool, &mut batch);
        assert_eq!(rx.rx_burst(&mut pool, &mut batch, 8), 1);
        assert!(rx.finished());
        assert_eq!(rx.rx_burst(&mut pool, &mut batch, 8), 0);
    }

    #[test]
    fn capture_tx_keeps_the_frames_in_order() {
        let mut pool = FramePool::new(4);
        let mut rx = ReplayRx::new(0, [vec![7u8; 60], vec![8u8; 64]]).once();
        let mut batch = Batch::new();
        rx.rx_burst(&mut pool, &mut batch, 8);
        let mut tx = CaptureTx::default();
        tx.tx_burst(&mut pool, &mut batch);
        assert_eq!(tx.frames, [vec![7u8; 60], vec![8u8; 64]]);
        assert_eq!((tx.stats().tx_packets, tx.stats().tx_bytes), (2, 124));
        assert_eq!(pool.available(), 4);
    }

    #[test]
    fn pcap_tx_writes_readable_capture() {
        let mut pool = FramePool::new(4);
        let mut rx = ReplayRx::new(0, [vec![7u8; 60], vec![8u8; 64]]).once();
        let mut batch = Batch::new();
        rx.rx_burst(&mut pool, &mut batch, 8);
        let mut tx = PcapTx::new(Vec::new()).unwrap();
        tx.tx_burst(&mut pool, &mut batch);
        let bytes = tx.finish().unwrap();
        let recs = pcap::parse(&bytes, Path::new("out")).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].data, vec![8u8; 64]);
        assert_eq!((recs[1].ts_sec, recs[1].ts_nsec), (0, 2000));
    }
}
