//! The slow path and the workers: built once the ports are open, started once the
//! capabilities are dropped (each worker pinned to its CPU, with its own firewall and log
//! ring), the slow path and the kernel route mirror on threads of their own.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use config::Config;
use dataplane::firewall::FirewallStats;
use dataplane::firewall::log::LogRing;
use dataplane::firewall::requests::StateRequest;
use dataplane::punt::{PuntReceiver, PuntSender, PuntStats, punt_channel};
use dataplane::slowpath::SlowPath;
use dataplane::{Fib, FibControl, Firewall, PortInfo, Worker, WorkerCounters};
use io::any::{AnyRx, AnyTx};

use super::ports::WorkerPorts;
use crate::host::HostIo;
use crate::receive::ReceivePlacement;

pub(super) type RunWorker = Worker<AnyRx, AnyTx, PuntSender>;
/// Each worker's firewall (`None` without a `[firewall]`).
pub(super) type Firewalls = Vec<Option<Firewall>>;

/// Records each worker's log ring holds (a burst of logged packets the logger thread has not
/// drained yet: it drains every 10 ms).
const LOG_RING: usize = 1024;

/// The slow path, shared by its thread, the control socket and reloads, and the channel
/// the workers punt to it on.
pub(super) struct SlowPathSetup {
    pub slow: Arc<Mutex<SlowPath>>,
    /// The tables the workers read (the slow path holds their writer).
    pub fib: Arc<Fib>,
    pub punt_tx: PuntSender,
    pub punt_stats: PuntStats,
    /// What the slow path's threads take when they start.
    pub threads: SlowPathThreads,
}

/// What the slow-path thread and the kernel route thread take.
pub(super) struct SlowPathThreads {
    pub host_io: HostIo,
    pub punt_rx: PuntReceiver,
    pub kernel_routes: Option<(crate::route_sync::RouteSync, io::netlink::route::RouteSocket)>,
}

/// Opens the host stack's TAPs and raw senders, and builds the slow path around the FIB
/// writer: static neighbours, router advertisements, the punt channel.
pub(super) fn slow_path(
    cfg: &Config,
    fib: FibControl,
    ports: &[PortInfo],
    workers: usize,
) -> Result<SlowPathSetup> {
    let host_io = crate::host::open(cfg, ports)?;
    if cfg.router.host_stack {
        eprintln!("linerate: host stack on TAPs {}", crate::host::tap_names(cfg).join(", "));
    }
    let icmp_rate = u64::from(cfg.router.icmp_errors_per_second);
    let mut slow = SlowPath::with_max_neighbours(
        fib,
        ports.to_vec(),
        cfg.router.host_stack,
        icmp_rate,
        cfg.router.max_neighbours,
    );
    for n in &cfg.neighbours {
        if let Some(port) = cfg.interfaces.iter().position(|i| i.name == n.interface) {
            slow.add_static(n.address, port as u16, wire::MacAddr(n.mac.0));
        }
    }
    for (port, iface) in cfg.interfaces.iter().enumerate() {
        if let Some(ra) = &iface.ra {
            slow.advertise(
                port as u16,
                &setup::advert_settings(ra),
                dataplane::firewall::random_seed(),
            );
            eprintln!(
                "linerate: {}: router advertisements every {}-{} s from {}",
                iface.name,
                ra.min_interval,
                ra.max_interval,
                dataplane::slowpath::link_local(ports[port].mac)
            );
        }
    }
    let fib = slow.fib().fib();
    // The route socket's large buffer needs CAP_NET_ADMIN: opened before it is dropped.
    let kernel_routes = crate::route_sync::open(cfg)?;
    let (punt_tx, punt_rx) =
        punt_channel(&setup::punt_policy(&cfg.router.punt), workers, Arc::clone(&fib));
    let punt_stats = punt_rx.stats();
    Ok(SlowPathSetup {
        slow: Arc::new(Mutex::new(slow)),
        fib,
        punt_tx,
        punt_stats,
        threads: SlowPathThreads { host_io, punt_rx, kernel_routes },
    })
}

/// The workers, built and not started, and what the rest of `run` keeps of them.
pub(super) struct Workers {
    pub ready: Vec<RunWorker>,
    pub counters: Vec<Arc<WorkerCounters>>,
    pub fw_stats: Vec<Arc<FirewallStats>>,
    /// Where the control socket sends state requests, one per worker with a firewall.
    pub state_requests: Vec<Sender<StateRequest>>,
    /// Each worker's log ring, drained by the logger thread (with a firewall).
    pub log_rings: Vec<LogRing>,
    /// With a firewall: where the slow path sends the host stack's IP packets, to be
    /// filtered by the worker of their flow.
    pub host_out: Option<dataplane::host_out::HostOutSender>,
    /// Each worker's queue of jobs on its ports (`router.rebuild_ports`).
    pub port_jobs: Vec<Sender<dataplane::worker::PortJob<AnyRx, AnyTx>>>,
}

/// Builds a worker on each worker's ports, with its firewall (if any).
/// `kinds`: each physical interface's backend (AF_PACKET spreads flows over the workers by
/// its fanout program, AF_XDP by the NIC's RSS).
pub(super) fn build(
    cfg: &Config,
    ports_by_worker: Vec<WorkerPorts>,
    firewalls: Firewalls,
    slow: &SlowPathSetup,
    ports: &[PortInfo],
    receive: Option<&ReceivePlacement>,
    kinds: &[String],
) -> Result<Workers> {
    let workers = ports_by_worker.len();
    let mut built = Workers {
        ready: Vec::new(),
        counters: Vec::new(),
        fw_stats: Vec::new(),
        state_requests: Vec::new(),
        log_rings: Vec::new(),
        host_out: None,
        port_jobs: Vec::new(),
    };
    let mut host_out = Vec::new();
    if firewalls.iter().any(Option::is_some) {
        let (sender, receivers) = dataplane::host_out::host_out_channels(
            workers,
            kinds.iter().map(|k| k.starts_with("af_packet")).collect(),
        )
        .context("opening the queues of the router's own packets")?;
        built.host_out = Some(sender);
        host_out = receivers;
    }
    let mut host_out = host_out.into_iter();
    for (w, (WorkerPorts { rx, tx, pool }, firewall)) in
        ports_by_worker.into_iter().zip(firewalls).enumerate()
    {
        let mut worker: RunWorker = Worker::new(
            Arc::clone(&slow.fib),
            ports,
            rx,
            tx,
            slow.punt_tx.clone(),
            pool,
            cfg.router.batch_size,
        );
        // The errors-per-second budget is shared out among the workers.
        worker.set_icmp_rate(u64::from(cfg.router.icmp_errors_per_second).div_ceil(workers as u64));
        worker.set_idle(
            match (cfg.router.sleep_when_idle, receive.is_some_and(|p| p.on_worker[w])) {
                (false, _) => dataplane::Idle::Spin,
                (true, true) => dataplane::Idle::Sleep {
                    spin: dataplane::worker::SPIN_WITH_NAPI,
                    yield_cpu: true,
                },
                (true, false) => dataplane::Idle::Sleep {
                    spin: dataplane::worker::SPIN_BEFORE_SLEEP,
                    yield_cpu: false,
                },
            },
        );
        worker.set_nat_steering(w as u16, workers as u16);
        if let Some(firewall) = firewall {
            built.add_firewall(&mut worker, w, workers, firewall, cfg);
        }
        if let Some(queue) = host_out.next() {
            worker.set_host_out(queue);
        }
        if cfg.router.rebuild_ports {
            let (jobs, queue) = std::sync::mpsc::channel();
            worker.set_port_jobs(queue);
            built.port_jobs.push(jobs);
        }
        built.fw_stats.extend(worker.firewall_stats());
        built.counters.push(worker.counters());
        built.ready.push(worker);
    }
    Ok(built)
}

impl Workers {
    /// Gives worker `w` its firewall, with a log ring and a state_requests for state requests.
    fn add_firewall(
        &mut self,
        worker: &mut RunWorker,
        w: usize,
        workers: usize,
        mut firewall: Firewall,
        cfg: &Config,
    ) {
        let rate = u64::from(cfg.log.rate).div_ceil(workers as u64);
        let (sink, ring) =
            dataplane::firewall::log::log_ring(LOG_RING, cfg.log.snaplen as usize, rate);
        firewall.set_log(sink);
        self.log_rings.push(ring);
        worker.set_firewall(firewall);
        let (state_requests, requests) = std::sync::mpsc::channel();
        worker.set_state_requests(w, requests);
        self.state_requests.push(state_requests);
    }
}

/// The running threads: the workers, the slow path, the kernel route mirror.
pub(super) struct Threads {
    pub workers: Vec<JoinHandle<RunWorker>>,
    /// Hands the host I/O back (its error count) when it ends.
    pub slow: JoinHandle<HostIo>,
    pub _routes: Vec<JoinHandle<()>>,
}

/// Starts the slow-path thread, the kernel route threads (with `router.kernel_routes`) and
/// each worker pinned to its CPU.
pub(super) fn start(
    slow: &Arc<Mutex<SlowPath>>,
    io: SlowPathThreads,
    ready: Vec<RunWorker>,
    cpus: &[usize],
    stop: &Arc<AtomicBool>,
) -> Result<Threads> {
    let slow_thread = {
        let (slow, stop) = (Arc::clone(slow), Arc::clone(stop));
        let (host_io, punt_rx) = (io.host_io, io.punt_rx);
        std::thread::Builder::new()
            .name("lr-slowpath".into())
            .spawn(move || crate::host::run(slow, host_io, punt_rx, stop))
            .context("starting the slow-path thread")?
    };
    let routes_thread = match io.kernel_routes {
        Some((sync, sock)) => crate::route_sync::start(sync, sock, Arc::clone(slow), stop)
            .context("starting the kernel route threads")?,
        None => Vec::new(),
    };
    let mut handles = Vec::new();
    for (w, mut worker) in ready.into_iter().enumerate() {
        let cpu = cpus[w];
        let worker_stop = Arc::clone(stop);
        let handle = std::thread::Builder::new()
            .name(format!("lr-worker-{w}"))
            .spawn(move || {
                if let Err(e) = io::affinity::pin_current_thread(cpu) {
                    eprintln!("linerate: warning: cannot pin worker {w} to cpu {cpu}: {e}");
                }
                worker.run(&worker_stop);
                worker
            })
            .context("starting a worker thread")?;
        handles.push(handle);
    }
    Ok(Threads { workers: handles, slow: slow_thread, _routes: routes_thread })
}
