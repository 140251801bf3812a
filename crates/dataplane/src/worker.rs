//! The engine loop of one worker: rx burst -> forwarding node -> tx bursts, per input port.
//!
//! A worker owns its frame pool, its ports and its counters outright (nothing shared on the
//! fast path but the read-only FIB). It is generic over the port types, so the whole loop is
//! monomorphised: one static call per batch per port.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use io::{Batch, FramePool, RxPort, TxPort};

use crate::counters::{Counts, DropReason, WorkerCounters};
use crate::fib::{Fib, PortInfo};
use crate::firewall::requests::{StateRequest, StateRequests};
use crate::firewall::sync::SyncPort;
use crate::firewall::{Firewall, FirewallStats};
use crate::forward::Forwarder;
use crate::host_out::HostOutReceiver;
use crate::offload::FlowLearner;
use crate::punt::{PuntBatch, PuntPort};
use crate::tap::{CaptureSlot, Point};

/// Work on a worker's ports that must run on its thread, which owns them and their pool:
/// rebuilding a port whose interface was deleted and created again. It gets the ports and
/// the pool, and reports back through whatever it captured.
pub type PortJob<R, T> = Box<dyn FnOnce(&mut Vec<R>, &mut Vec<T>, &mut FramePool) + Send>;

/// Default packets per batch.
pub const DEFAULT_BATCH: usize = 64;

/// What a worker does when its ports have nothing to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Idle {
    /// Poll without pause: the lowest latency, a whole CPU always.
    #[default]
    Spin,
    /// Keep polling for `spin`, then sleep in `poll(2)` until a port has frames. With
    /// `yield_cpu` the kernel's receive thread for the worker's ports runs on its CPU below
    /// it (`io::napi`) and brings frames only while the worker gives the CPU up: after light
    /// traffic the worker yields between empty polls (a reply is caught without a wake-up),
    /// after a loaded poll it sleeps at once ([`Worker::run`]).
    Sleep { spin: Duration, yield_cpu: bool },
}

/// How long a worker keeps polling an idle port before it sleeps, when nothing on its CPU
/// waits for it to sleep: long enough that a reply or the next packet of a burst is still
/// caught spinning, short against a human's second.
pub const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(200);
/// The same when the kernel's receive thread shares the CPU: short, yielding meanwhile, so
/// that thread gets the CPU back soon (docs/performance.md, "Receive livelock and idle
/// workers").
pub const SPIN_WITH_NAPI: Duration = Duration::from_micros(50);
/// Longest sleep: the worker wakes at least this often to see the stop flag and publish.
const SLEEP_MAX: Duration = Duration::from_millis(10);
/// Empty polls between two clock reads while spinning.
const POLLS_PER_CLOCK: u32 = 64;

pub struct Worker<R: RxPort, T: TxPort, L: PuntPort> {
    /// Input ports (physical).
    pub rx: Vec<R>,
    /// Output ports, indexed by physical port number.
    pub tx: Vec<T>,
    /// Where frames for the slow path go (for the router, ICMP errors, unresolved, ...).
    pub local: L,
    pub pool: FramePool,
    forwarder: Forwarder,
    batch_size: usize,
    input: Batch,
    outputs: Vec<Batch>,
    punts: PuntBatch,
    /// The node's counters split by the physical port the frames came in on (a batch comes
    /// from one port, so this costs one difference per batch, not per packet).
    port_counts: Vec<Counts>,
    shared: Arc<WorkerCounters>,
    idle: Idle,
    /// Operators' requests on the state table, served between batches.
    state_requests: Option<StateRequests>,
    /// A request is being served: the worker does not sleep until it is done.
    serving_requests: bool,
    /// Where `linerate capture` arms a capture in this worker, and the arming last seen.
    capture: Arc<CaptureSlot>,
    capture_seen: u64,
    /// The router's own packets to filter and send ([`crate::host_out`]).
    host_out: Option<HostOutReceiver>,
    /// Offers the flows it forwards to the kernel's fast path ([`crate::offload`]).
    learner: Option<FlowLearner>,
    /// State sync with a peer ([`crate::firewall::sync`]); a bulk update keeps it awake.
    sync: Option<SyncPort>,
    sync_busy: bool,
    /// Jobs on the ports ([`PortJob`]), run between polls.
    port_jobs: Option<std::sync::mpsc::Receiver<PortJob<R, T>>>,
}

impl<R: RxPort, T: TxPort, L: PuntPort> Worker<R, T, L> {
    /// A worker over `ports` (their MACs), reading `fib`. `batch_size` is clamped to 1..=256.
    pub fn new(
        fib: Arc<Fib>,
        ports: &[PortInfo],
        rx: Vec<R>,
        tx: Vec<T>,
        local: L,
        pool: FramePool,
        batch_size: usize,
    ) -> Self {
        let outputs = (0..tx.len()).map(|_| Batch::new()).collect();
        let shared = Arc::new(WorkerCounters::new(tx.len()));
        let port_counts = vec![Counts::default(); rx.len()];
        Worker {
            rx,
            tx,
            local,
            pool,
            forwarder: Forwarder::new(fib, ports),
            batch_size: batch_size.clamp(1, io::batch::MAX_BATCH),
            input: Batch::new(),
            outputs,
            punts: PuntBatch::default(),
            port_counts,
            shared,
            idle: Idle::Spin,
            state_requests: None,
            serving_requests: false,
            capture: CaptureSlot::new(),
            capture_seen: 0,
            host_out: None,
            learner: None,
            sync: None,
            sync_busy: false,
            port_jobs: None,
        }
    }

    /// Has the worker run the jobs sent on `jobs` between its polls.
    pub fn set_port_jobs(&mut self, jobs: std::sync::mpsc::Receiver<PortJob<R, T>>) {
        self.port_jobs = Some(jobs);
    }

    /// Runs the port jobs waiting; whether any ran (the ports' file descriptors may have
    /// changed). Frames batched for output are sent first, on the ports they were meant for.
    #[cold]
    fn run_port_jobs(&mut self) -> bool {
        let Some(jobs) = &self.port_jobs else { return false };
        let mut ran = false;
        while let Ok(job) = jobs.try_recv() {
            for t in &mut self.tx {
                t.flush(&mut self.pool);
            }
            job(&mut self.rx, &mut self.tx, &mut self.pool);
            ran = true;
        }
        ran
    }

    /// The file descriptors a sleeping worker waits on, if every input has one.
    fn wait_fds(&self) -> Option<Vec<RawFd>> {
        self.rx
            .iter()
            .map(RxPort::wait_fd)
            .chain(self.host_out.as_ref().map(|h| Some(h.fd())))
            .collect::<Option<Vec<RawFd>>>()
            .filter(|f| !f.is_empty())
    }

    /// Has the worker offer the flows it forwards to the kernel's fast path.
    pub fn set_flow_learner(&mut self, learner: FlowLearner) {
        self.learner = Some(learner);
    }

    /// Chooses what the worker does while its ports are idle (before it runs).
    pub fn set_idle(&mut self, idle: Idle) {
        self.idle = idle;
    }

    /// Where the router's own packets of this worker's flows come from (with a firewall).
    pub fn set_host_out(&mut self, host_out: HostOutReceiver) {
        self.host_out = Some(host_out);
    }

    /// Where a capture is armed in this worker ([`crate::tap`]).
    pub fn capture_slot(&self) -> Arc<CaptureSlot> {
        Arc::clone(&self.capture)
    }

    /// The counters this worker publishes after every poll, readable from any thread.
    pub fn counters(&self) -> Arc<WorkerCounters> {
        Arc::clone(&self.shared)
    }

    /// Lets this worker send up to `per_second` ICMP errors (0: none, the default).
    pub fn set_icmp_rate(&mut self, per_second: u64) {
        self.forwarder.set_icmp_rate(per_second);
    }

    /// ICMP errors handed to the slow path and suppressed by the rate limit so far.
    pub fn icmp_counts(&self) -> (u64, u64) {
        self.forwarder.icmp_counts()
    }

    /// Has the worker serve state-table requests (`show`/`kill`/`flush states`) arriving on
    /// `requests`, `worker` naming it in its replies (before it runs).
    pub fn set_state_requests(
        &mut self,
        worker: usize,
        requests: std::sync::mpsc::Receiver<StateRequest>,
    ) {
        self.state_requests = Some(StateRequests::new(worker, requests));
    }

    /// Has the worker send its state changes and take a peer's through `port` (after
    /// [`set_firewall`](Self::set_firewall), before it runs); `journal`: the changes its
    /// state table records between two polls before it sends the whole table instead.
    pub fn set_sync(&mut self, port: SyncPort, journal: usize) {
        if let Some(fw) = self.forwarder.firewall_mut() {
            fw.enable_sync(journal);
        }
        self.sync = Some(port);
    }

    /// Gives the worker a firewall (before it runs).
    pub fn set_firewall(&mut self, fw: Firewall) {
        self.forwarder.set_firewall(fw);
    }

    /// This is worker `worker` of `workers` (NAT picks ports whose replies steer here).
    pub fn set_nat_steering(&mut self, worker: u16, workers: u16) {
        self.forwarder.set_nat_steering(worker, workers);
    }

    /// The NAT stage's table (`None` without a firewall): for the bench's prefilled
    /// translations.
    pub fn nat_table_mut(&mut self) -> Option<&mut fw::nat::table::NatTable> {
        self.forwarder.nat_table_mut()
    }

    /// The NAT stage's counters (`None` without a firewall).
    pub fn nat_counts(&self) -> Option<crate::firewall::nat::NatCounts> {
        self.forwarder.nat_counts()
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
    /// Later fragments waiting for their first: received, neither forwarded nor dropped yet.
    pub fn fragments_held(&self) -> usize {
        self.forwarder.fragments_held()
    }

    pub fn counts(&self) -> Counts {
        self.forwarder.counts
    }

    /// One round over every input port; returns the number of packets received.
    #[inline]
    pub fn poll(&mut self) -> usize {
        let mut received = 0;
        // The one cost of captures while none runs: a relaxed load per round.
        if let Some(tap) = self.capture.changed(&mut self.capture_seen) {
            // A capture sees every frame: the fast path's flows come back to the pipeline.
            if tap.is_some()
                && let Some(l) = &self.learner
            {
                l.void_all();
            }
            self.forwarder.set_tap(tap);
        }
        // The fast path's counts of this worker's offloaded flows, into its rule counters.
        if let (Some(l), Some(fw)) = (&mut self.learner, self.forwarder.firewall_mut()) {
            l.take_credits(|c| {
                fw.credit_offloaded(c.counted.rules, c.counted.generation, c.packets, c.bytes)
            });
        }
        // A peer's states before this round's frames, which may be replies of its flows.
        if let Some(sync) = &mut self.sync {
            self.sync_busy = sync.serve(self.forwarder.firewall_and_nat());
        }
        for i in 0..self.rx.len() {
            let n = self.rx[i].rx_burst(&mut self.pool, &mut self.input, self.batch_size);
            let dropped = self.rx[i].take_drops();
            if !dropped.is_empty() {
                self.count_rx_drops(i, &dropped);
            }
            if n == 0 {
                continue;
            }
            received += n;
            if let Some(t) = self.forwarder.tap_at(Point::Rx) {
                t.copy_batch(&self.pool, &self.input, None);
            }
            let before = self.forwarder.counts;
            // Without a learner (no fast path) the batch reads no policy.
            let policy = match &mut self.learner {
                Some(l) => {
                    let p = self.forwarder.offload_policy();
                    l.begin_batch(&p, &self.pool, &self.input);
                    p
                }
                None => crate::offload::OffloadPolicy::NONE,
            };
            self.forwarder.process(
                &mut self.pool,
                &mut self.input,
                &mut self.outputs,
                &mut self.punts,
            );
            // The rules the batch was processed under (a new set is adopted as it begins);
            // a translating set's flows only if their inputs were noted.
            if let Some(l) = &mut self.learner {
                let after = self.forwarder.offload_policy();
                if after.any() && (policy.translates || !after.translates) {
                    let fw = self.forwarder.firewall();
                    l.learn(&self.pool, &self.outputs, &after, |frame, o| {
                        counted_under(fw, frame, o)
                    });
                }
            }
            if let Some(t) = self.forwarder.tap_at(Point::Tx) {
                for (port, out) in self.outputs.iter().enumerate() {
                    t.copy_batch(&self.pool, out, Some(port as u16));
                }
            }
            if let Some(c) = self.port_counts.get_mut(i) {
                c.add(&self.forwarder.counts.since(&before));
            }
            for (port, out) in self.outputs.iter_mut().enumerate() {
                if !out.is_empty() {
                    self.tx[port].tx_burst(&mut self.pool, out);
                }
            }
            if !self.punts.is_empty() {
                self.local.punt_burst(&mut self.pool, &mut self.punts);
            }
        }
        if self.forwarder.holds_fragments() {
            self.forward_held_fragments();
        }
        if self.host_out.as_ref().is_some_and(HostOutReceiver::pending) {
            self.send_host_out();
        }
        self.forwarder.quiescent();
        if let Some(state_requests) = &mut self.state_requests {
            self.serving_requests = state_requests.serve(self.forwarder.firewall_mut());
        }
        self.shared.publish(&self.forwarder.counts);
        // Port statistics may cost a syscall (kernel ring drops): only when someone asks.
        if self.shared.port_stats_wanted() {
            self.publish_ports();
        }
        received
    }

    /// Forwards the fragments whose first fragment has come since they were held (after the
    /// received ones), and frees those that waited too long.
    #[cold]
    #[inline(never)]
    fn forward_held_fragments(&mut self) {
        let n = self.forwarder.held_fragments(&mut self.pool, &mut self.input, self.batch_size);
        if n == 0 {
            return;
        }
        self.forwarder.process(&mut self.pool, &mut self.input, &mut self.outputs, &mut self.punts);
        for (port, out) in self.outputs.iter_mut().enumerate() {
            if !out.is_empty() {
                self.tx[port].tx_burst(&mut self.pool, out);
            }
        }
        if !self.punts.is_empty() {
            self.local.punt_burst(&mut self.pool, &mut self.punts);
        }
    }

    /// Filters and sends up to a batch of the router's own packets (after the received ones:
    /// the host stack's traffic is the control plane's, light, and must not starve the ports).
    #[cold]
    #[inline(never)]
    fn send_host_out(&mut self) {
        let Some(mut queue) = self.host_out.take() else {
            return;
        };
        for _ in 0..self.batch_size {
            let Some(f) = queue.recv() else { break };
            let via = match self.forwarder.local_out(f.frame, f.port) {
                Ok(via) => via,
                Err(reason) => {
                    self.forwarder.counts.drop(reason);
                    continue;
                }
            };
            let Some(mut desc) = self.pool.alloc() else {
                self.forwarder.counts.drop(DropReason::TxError);
                continue;
            };
            self.pool.write(&mut desc, f.frame);
            self.forwarder.modulate_frame(self.pool.frame_mut(desc));
            // A state's `route-to` / `reply-to`: out by its gateway's port, or by the slow
            // path while the gateway is unresolved.
            let phys =
                match via.map(|v| self.forwarder.host_frame_via(&mut self.pool, &mut desc, &v)) {
                    None => f.phys,
                    Some(Ok(phys)) => phys,
                    Some(Err(punt)) => {
                        self.punts.push(desc, punt, f.port);
                        continue;
                    }
                };
            let Some(out) = self.outputs.get_mut(usize::from(phys)) else {
                self.pool.free(desc);
                self.forwarder.counts.drop(DropReason::TxError);
                continue;
            };
            out.push(desc);
            if out.is_full() {
                self.tx[usize::from(phys)].tx_burst(&mut self.pool, out);
            }
        }
        if !self.punts.is_empty() {
            self.local.punt_burst(&mut self.pool, &mut self.punts);
        }
        for (port, out) in self.outputs.iter_mut().enumerate() {
            if !out.is_empty() {
                self.tx[port].tx_burst(&mut self.pool, out);
            }
        }
        self.host_out = Some(queue);
    }

    /// Sleeps until a port is readable (or [`SLEEP_MAX`]), off the FIB's grace periods.
    fn sleep(&mut self, fds: &[RawFd]) {
        for t in &mut self.tx {
            t.flush(&mut self.pool);
        }
        self.forwarder.offline();
        // An error (none is expected from poll on open sockets) only ends this sleep early.
        let _ = io::idle::wait_readable(fds, SLEEP_MAX);
        self.forwarder.online();
    }

    /// Counts what port `i` dropped itself (offloads it could not finish).
    #[cold]
    fn count_rx_drops(&mut self, i: usize, dropped: &io::RxDrops) {
        let c = Counts::from_rx_drops(dropped);
        self.forwarder.counts.add(&c);
        if let Some(p) = self.port_counts.get_mut(i) {
            p.add(&c);
        }
    }

    fn publish_ports(&self) {
        let stats = self.rx.iter().zip(&self.tx).map(|(r, t)| {
            let (r, t) = (r.stats(), t.stats());
            io::PortStats {
                tx_packets: t.tx_packets,
                tx_bytes: t.tx_bytes,
                tx_dropped: t.tx_dropped,
                ..r
            }
        });
        self.shared.publish_ports(stats, &self.port_counts, self.forwarder.icmp_counts());
    }

    /// Polls until `stop` is set, sleeping while idle if so configured and every input port
    /// can wake it.
    pub fn run(&mut self, stop: &AtomicBool) {
        let Idle::Sleep { spin, yield_cpu } = self.idle else {
            return self.spin(stop);
        };
        let Some(mut fds) = self.wait_fds() else {
            return self.spin(stop);
        };
        let (mut empty, mut idle_since, mut loaded) = (0u32, None, false);
        while !stop.load(Ordering::Relaxed) {
            if self.port_jobs.is_some() && self.run_port_jobs() {
                match self.wait_fds() {
                    Some(f) => fds = f,
                    None => return self.spin(stop),
                }
            }
            let received = self.poll();
            if received > 0 || self.serving_requests || self.sync_busy {
                (empty, idle_since, loaded) = (0, None, received >= self.batch_size / 2);
                continue;
            }
            if yield_cpu && loaded {
                // Drained faster than the receive thread fills: sleeping hands it the CPU
                // until its next batch wakes this worker; a yield would hand a flooded thread
                // the CPU until the scheduler's next tick, to fill the socket's ring and drop
                // the rest after paying for them.
                self.sleep(&fds);
                loaded = false;
                continue;
            }
            if yield_cpu {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            empty += 1;
            if empty % POLLS_PER_CLOCK != 0 {
                continue;
            }
            let now = Instant::now();
            if now.duration_since(*idle_since.get_or_insert(now)) >= spin {
                self.sleep(&fds);
                idle_since = None;
            }
        }
        self.finish();
    }

    /// Polls without pause until `stop` is set.
    fn spin(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            if self.port_jobs.is_some() {
                self.run_port_jobs();
            }
            if self.poll() == 0 {
                std::hint::spin_loop();
            }
        }
        self.finish();
    }

    /// After the last poll: sends what is buffered and publishes the final counters.
    fn finish(&mut self) {
        for t in &mut self.tx {
            t.flush(&mut self.pool);
        }
        self.shared.publish(&self.forwarder.counts);
        self.publish_ports();
    }
}

/// What the packets of `offer`'s flow (sent as `frame`) are counted under: nothing without a
/// firewall, else what `fw` says (`None`: the flow stays in the pipeline).
fn counted_under(
    fw: Option<&Firewall>,
    frame: &[u8],
    offer: &crate::offload::Offer,
) -> Option<crate::offload::CountedUnder> {
    let Some(fw) = fw else { return Some(crate::offload::CountedUnder::NOTHING) };
    let v4 = offer.family == 4;
    let addr = |a: &[u8; 16]| {
        if v4 {
            u128::from(u32::from_be_bytes([a[0], a[1], a[2], a[3]]))
        } else {
            u128::from_be_bytes(*a)
        }
    };
    let flow = crate::firewall::offloaded::OfferedFlow {
        frame,
        v4,
        in_port: offer.in_port,
        out_port: offer.out_port,
        src: addr(&offer.flow.src),
        dst: addr(&offer.flow.dst),
        sport: u16::from_be_bytes(offer.flow.sport),
        dport: u16::from_be_bytes(offer.flow.dport),
    };
    let (rules, generation) = fw.counted_under(&flow)?;
    Some(crate::offload::CountedUnder { rules, generation })
}
