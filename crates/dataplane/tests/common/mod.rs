//! What the slow-path tests share: a `SlowIo` that records every frame sent, and a worker's
//! punt port that keeps what it is given.
#![allow(dead_code)] // each test binary uses its own subset

use dataplane::punt::{PuntBatch, PuntPort, PuntedFrame};
use dataplane::slowpath::SlowIo;
use io::pool::FramePool;

/// Every frame the slow path sent: to the wire (physical port) and to the host stack (port).
#[derive(Default)]
pub struct Recorder {
    pub wire: Vec<(u16, Vec<u8>)>,
    pub host: Vec<(u16, Vec<u8>)>,
}

impl SlowIo for Recorder {
    fn send_wire(&mut self, phys: u16, frame: &[u8]) {
        self.wire.push((phys, frame.to_vec()));
    }
    fn send_host(&mut self, port: u16, frame: &[u8]) {
        self.host.push((port, frame.to_vec()));
    }
}

/// The punts of a worker, kept with their reasons.
#[derive(Default)]
pub struct PuntLog(pub Vec<PuntedFrame>);

impl PuntPort for PuntLog {
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch) {
        for (desc, punt, in_port) in punts.drain() {
            self.0.push(PuntedFrame {
                punt,
                phys: desc.port,
                in_port,
                frame: pool.frame(desc).to_vec(),
            });
            pool.free(desc);
        }
    }
}
