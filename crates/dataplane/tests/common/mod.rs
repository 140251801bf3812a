//! What the slow-path tests share: a `SlowIo` that records every frame sent.

use dataplane::slowpath::SlowIo;

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
