//! The engine loop of one worker: rx burst -> forwarding node -> tx bursts, per input port.
//!
//! A worker owns its frame pool, its ports and its counters outright (nothing shared on the
//! fast path but the read-only FIB). It is generic over the port types, so the whole loop is
//! monomorphised: one static call per batch per port.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use io::{Batch, FramePool, RxPort, TxPort};

use crate::counters::{Counts, WorkerCounters};
use crate::fib::{Fib, PortInfo};
use crate::filter::{Firewall, FirewallStats};
use crate::forward::Forwarder;

/// Default packets per batch.
pub const DEFAULT_BATCH: usize = 64;

pub struct Worker<R: RxPort, T: TxPort, L: TxPort> {
    /// Input ports.
    pub rx: Vec<R>,
    /// Output ports, indexed by the port number adjacencies name.
    pub tx: Vec<T>,
    /// Where packets for the router go.
    pub local: L,
    pub pool: FramePool,
    forwarder: Forwarder,
    batch_size: usize,
    input: Batch,
    outputs: Vec<Batch>,
    local_batch: Batch,
    shared: Arc<WorkerCounters>,
}

impl<R: RxPort, T: TxPort, L: TxPort> Worker<R, T, L> {
    /// A worker over `ports` (their MACs), reading `fib`. `batch_size` is clamped to 1..=256.
    pub fn new(fib: Arc<Fib>, ports: &[PortInfo], rx: Vec<R>, tx: Vec<T>, local: L, pool: FramePool, batch_size: usize) -> Self {
        let outputs = (0..tx.len()).map(|_| Batch::new()).collect();
        Worker {
            rx,
            tx,
            local,
            pool,
            forwarder: Forwarder::new(fib, ports),
            batch_size: batch_size.clamp(1, io::batch::MAX_BATCH),
            input: Batch::new(),
            outputs,
            local_batch: Batch::new(),
            shared: Arc::new(WorkerCounters::default()),
        }
    }

    /// The counters this worker publishes after every poll, readable from any thread.
    pub fn counters(&self) -> Arc<WorkerCounters> {
        Arc::clone(&self.shared)
    }

    /// Gives the worker a firewall (before it runs).
    pub fn set_firewall(&mut self, fw: Firewall) {
        self.forwarder.set_firewall(fw);
    }

    pub fn firewall(&self) -> Option<&Firewall> {
        self.forwarder.firewall()
    }

    pub fn firewall_mut(&mut self) -> Option<&mut Firewall> {
        self.forwarder.firewall_mut()
    }

    /// The firewall counters this worker publishes, readable from any thread.
    pub fn firewall_stats(&self) -> Option<Arc<FirewallStats>> {
        self.forwarder.firewall().map(Firewall::stats)
    }

    /// Running totals as the worker sees them now.
    pub fn counts(&self) -> Counts {
        self.forwarder.counts
    }

    /// One round over every input port; returns the number of packets received.
    #[inline]
    pub fn poll(&mut self) -> usize {
        let mut received = 0;
        for i in 0..self.rx.len() {
            let n = self.rx[i].rx_burst(&mut self.pool, &mut self.input, self.batch_size);
            if n == 0 {
                continue;
            }
            received += n;
            self.forwarder.process(&mut self.pool, &mut self.input, &mut self.outputs, &mut self.local_batch);
            for (port, out) in self.outputs.iter_mut().enumerate() {
                if !out.is_empty() {
                    self.tx[port].tx_burst(&mut self.pool, out);
                }
            }
            if !self.local_batch.is_empty() {
                self.local.tx_burst(&mut self.pool, &mut self.local_batch);
            }
        }
        self.forwarder.quiescent();
        self.shared.publish(&self.forwarder.counts);
        received
    }

    /// Polls until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            if self.poll() == 0 {
                std::hint::spin_loop();
            }
        }
        for t in &mut self.tx {
            t.flush(&mut self.pool);
        }
        self.shared.publish(&self.forwarder.counts);
    }
}
