//! `linerate run -c FILE`: open the configured interfaces, forward with N workers until
//! SIGINT/SIGTERM, then print per-interface counters and drop reasons.
//!
//! Threads: one worker per CPU queue (pinned; each with its own frame pool and its own socket
//! on every interface: an AF_XDP socket on queue w, or a member of the interface's AF_PACKET
//! fanout group), the slow path (ARP/NDP, ICMP, the host-stack TAPs: [`crate::host`]), the
//! control socket ([`crate::control`]), the metrics server if configured
//! ([`crate::metrics`]) and this thread, which waits and prints.
//!
//! What the kernel still sees of the interfaces:
//! - AF_XDP: linerate's XDP program hands IPv4, IPv6, ARP and VLAN-tagged frames to linerate
//!   and passes the rest (LLDP, STP, ...) to the kernel.
//! - AF_PACKET: the kernel still receives every frame. linerate installs an nftables netdev
//!   ingress table (`linerate_bypass`, removed on exit) that drops the kernel's copy after
//!   linerate's socket has its own: all of it with the host stack on (the kernel gets what is
//!   for it through the TAP), else only IP packets not addressed to the router.
//!
//! With the host stack (the default), the router's addresses belong on the TAPs, which
//! linerate creates and configures: leave them off the kernel's interfaces.
//!
//! The steps, in order: read and check the config and the rule file ([`check`]: nothing
//! touched yet), claim what `run` holds until it exits ([`claim`]), open every worker's ports
//! ([`ports`]), set up the slow path and build the workers ([`workers`]), drop the
//! capabilities, start the threads, then supervise until a signal ([`supervise`]) and print
//! the report ([`report`]).

mod ports;
mod report;
mod workers;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use config::{Backend, Config};
use dataplane::firewall::{Firewall, RulesSlot};
use dataplane::{Counts, FibControl, PortInfo, WorkerCounters};

use crate::router_state::RouterState;
use workers::{Firewalls, RunWorker};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Configuration file (TOML).
    #[arg(short, long)]
    config: PathBuf,
    /// First CPU to pin workers to (worker w on CPU first + w, modulo the CPU count)
    /// [default: the last CPU for one worker, CPU 0 for several].
    #[arg(long)]
    cpu: Option<usize>,
    /// Worker threads [default: the config's router.workers].
    #[arg(long)]
    workers: Option<usize>,
    /// Print counters every N seconds while running (0: only at exit).
    #[arg(long, default_value_t = 0)]
    stats_interval: u64,
}

pub fn main(args: RunArgs) -> Result<()> {
    // Everything that can be wrong with the config or the rule file (state tables included)
    // is found before any interface, TAP, program or nftables table is touched.
    let Checked { cfg, path, privileges, workers, fib, ports, physical, mut firewall } =
        check(&args)?;
    let mut claimed = claim(&cfg, &physical, workers, &firewall)?;
    let fast_path = cfg.router.fast_path.then_some(cfg.router.fast_path_flows);
    let opened = ports::open_all(
        &physical,
        workers,
        firewall.slot.is_some(),
        fast_path,
        &mut claimed.backends,
        &path,
    )?;
    let reload_refusal = crate::steering::reload_refusal(&physical, &claimed.backends, workers);
    let _bypass = ports::bypass_kernel(
        &opened.packet_ifaces,
        cfg.router.host_stack,
        firewall.slot.is_some(),
    )?;
    let nft_table = _bypass
        .as_ref()
        .is_some_and(|b| matches!(b, crate::kernel_bypass::KernelBypass::Nftables(_)));
    // The slow path owns the FIB writer from here on.
    let slow = workers::slow_path(&cfg, fib, &ports, workers)?;
    let cpus = worker_cpus(args.cpu, workers);
    let receive =
        cfg.router.napi_threads.then(|| crate::receive::place(&physical, &claimed.backends, &cpus));
    let log_file = if firewall.slot.is_some() { crate::logger::open_file(&cfg.log)? } else { None };
    let opened_steering = opened.steered_by_toeplitz;
    let (fanout_base, fanout_rss) = (opened.fanout_base, opened.fanout_rss.clone());
    let bypass_tc = _bypass
        .as_ref()
        .is_some_and(|b| matches!(b, crate::kernel_bypass::KernelBypass::Tc { .. }));
    let mut built = workers::build(
        &cfg,
        opened.per_worker,
        std::mem::take(&mut firewall.per_worker),
        &slow,
        &ports,
        receive.as_ref(),
        &opened.kinds,
    )?;
    let offload = fast_path_setup(&cfg, &physical, &claimed.backends, &slow, &firewall, &mut built);
    let ha =
        match crate::ha::setup(&cfg, firewall.slot.as_ref(), built.ready.len(), opened_steering)? {
            Some((ha, ports)) => {
                for (w, port) in built.ready.iter_mut().zip(ports) {
                    w.set_sync(port, crate::ha::JOURNAL);
                }
                Some(ha)
            }
            None => None,
        };
    let rebuild = rebuilder(&cfg, &physical, &claimed.backends, &firewall, &mut built, &offload)
        .map(|mut r| {
            r.napi_cpus = receive.as_ref().map(|_| cpus.clone());
            r.senders = slow.threads.host_io.sender_swaps();
            r.fanout = (fanout_base, fanout_rss.clone());
            r.bypass = bypass_tc.then_some(cfg.router.host_stack);
            Arc::new(r)
        });
    let links = Arc::new(crate::links::Links::new(&port_indexes(&physical), rebuild.is_some()));
    let views = Views {
        reload_refusal,
        ha: ha.as_ref().map(|h| Arc::clone(&h.view)),
        links: Arc::clone(&links),
    };
    let state = router_state(&cfg, &firewall, &mut built, &slow, &ports, &opened.kinds, views);
    let mut control = bind_control(&cfg, &privileges);

    // Set up: from here on, no capability is effective (capabilities are per thread, so
    // this comes before any thread starts).
    let dropped = privileges.drop_privileges(crate::privilege::exit_needs(
        &cfg,
        nft_table,
        rebuild.is_some(),
    ))?;
    eprintln!("linerate: privileges: {dropped}");
    let mut slow_io = slow.threads;
    let tap_handles = slow_io.host_io.tap_handles();
    if let Some(out) = built.host_out.take() {
        slow_io.host_io.set_host_out(out);
    }
    let threads = workers::start(&slow.slow, slow_io, built.ready, &cpus, &claimed.stop)?;
    let (offload, offload_thread) = match offload {
        Some((o, queues)) => {
            (Some(Arc::clone(&o)), Some(o.start(queues, Arc::clone(&claimed.stop))?))
        }
        None => (None, None),
    };
    let ha_view = ha.as_ref().map(|h| Arc::clone(&h.view));
    let ha_thread = match ha {
        Some(h) => Some(h.start(Arc::clone(&claimed.stop))?),
        None => None,
    };
    let link_failure = Arc::new(Mutex::new(None));
    let follow = crate::links::Follow {
        rebuild: rebuild.clone(),
        taps: tap_handles,
        links,
        slow: Arc::clone(&state.slow),
        logical: (0..physical.len())
            .map(|phys| {
                let on = |p: &&PortInfo| usize::from(p.phys) == phys;
                ports.iter().enumerate().filter(|(_, p)| on(p)).map(|(i, _)| i as u16).collect()
            })
            .collect(),
    };
    let links_thread =
        crate::links::start(follow, Arc::clone(&claimed.stop), Arc::clone(&link_failure))?;
    serve(&mut claimed.metrics, control.as_mut(), &state, &privileges);
    let logger = match &state.log {
        Some(hub) => {
            let names = cfg.interfaces.iter().map(|i| i.name.clone()).collect();
            Some(crate::logger::spawn(
                Arc::clone(hub),
                log_file,
                built.log_rings,
                names,
                Arc::clone(&claimed.stop),
            )?)
        }
        None => None,
    };
    drop(slow.punt_tx);
    let cpu_list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    eprintln!(
        "linerate: forwarding with {workers} worker(s) on cpu {}, batch {}; Ctrl-C to stop",
        cpu_list.join(","),
        cfg.router.batch_size
    );
    claimed.notify.ready(&format!("forwarding with {workers} worker(s)"));

    let started = Instant::now();
    supervise(&args, &claimed, &state, &built.counters, &threads.workers);
    let stopped = stop(threads, logger, &claimed)?;
    if let Some(t) = offload_thread {
        let _ = t.join();
    }
    if let Some(t) = ha_thread {
        let _ = t.join();
    }
    let _ = links_thread.join();
    // The workers are stopped: raise what the clean-up needs (NAPI threads, sysfs, nftables).
    crate::privilege::for_clean_up();
    // The NAPI threads of rebuilt interfaces are put back with the capabilities raised.
    drop(rebuild);
    let run = report::Run {
        physical: &physical,
        kinds: &opened.kinds,
        workers: &stopped.workers,
        elapsed: started.elapsed(),
        fw_stats: &built.fw_stats,
        send_errors: stopped.host_io.send_errors,
    };
    report::print(&run, &state);
    if let Some(o) = &offload {
        report::fast_path(o, &physical);
    }
    if let Some(view) = &ha_view {
        report::ha(view);
    }
    if let Some(why) = link_failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
        bail!("{why}");
    }
    Ok(())
}

/// The kernel fast path (`router.fast_path`, on AF_XDP ports): the program mirrors the
/// data plane's decisions, each worker offers the flows it forwards. Returns the offload and
/// the workers' offer queues, for its thread.
fn fast_path_setup(
    cfg: &Config,
    physical: &[config::Interface],
    backends: &[Backend],
    slow: &workers::SlowPathSetup,
    firewall: &FirewallSetup,
    built: &mut workers::Workers,
) -> Option<(Arc<crate::offload::Offload>, Vec<dataplane::offload::ControlQueues>)> {
    if !cfg.router.fast_path {
        return None;
    }
    let targets = ports::fast_path_targets(physical, backends);
    let decisions = &slow.fib.decisions;
    let offload = Arc::new(crate::offload::Offload::new(targets, decisions)?);
    if let Some(s) = &firewall.slot {
        s.set_decisions(Arc::clone(decisions));
    }
    // A port that also carries VLANs: its untagged flows stay in the pipeline too (the
    // program keys flows by interface, not by tag).
    let inputs: Vec<bool> = physical
        .iter()
        .enumerate()
        .map(|(i, p)| {
            offload.takes_input(i)
                && !cfg
                    .interfaces
                    .iter()
                    .any(|v| v.vlan.as_ref().is_some_and(|v| v.parent == p.name))
        })
        .collect();
    let mut queues = Vec::new();
    for w in &mut built.ready {
        let (worker, control) = dataplane::offload::worker_queues(OFFER_QUEUE);
        w.set_flow_learner(dataplane::offload::FlowLearner::new(
            worker,
            Arc::clone(decisions),
            inputs.clone(),
        ));
        queues.push(control);
    }
    eprintln!(
        "linerate: fast path in the kernel on {} of {} interfaces",
        inputs.iter().filter(|&&i| i).count(),
        physical.len()
    );
    Some((offload, queues))
}

/// Offers a worker may queue before the fast path's thread takes them (and credits back).
const OFFER_QUEUE: usize = 4096;

/// The config and what is built from it, checked before anything on the system is touched.
struct Checked {
    cfg: Config,
    /// The config file's name, for errors.
    path: String,
    privileges: crate::privilege::Plan,
    workers: usize,
    fib: FibControl,
    ports: Vec<PortInfo>,
    /// The interfaces that are not VLAN sub-interfaces, in port order.
    physical: Vec<config::Interface>,
    firewall: FirewallSetup,
}

fn check(args: &RunArgs) -> Result<Checked> {
    let mut cfg = Config::load(&args.config)?;
    let path = args.config.display().to_string();
    // Capabilities, not uid 0: each missing one is named before anything is touched.
    let privileges = crate::privilege::check(&cfg, &path)?;
    check_interfaces(&mut cfg, &path)?;
    let workers = args.workers.unwrap_or(cfg.router.workers).clamp(1, 256);
    let (fib, ports) = setup::fib(&cfg)?;
    let physical: Vec<config::Interface> =
        cfg.interfaces.iter().filter(|i| i.vlan.is_none()).cloned().collect();
    let firewall = firewall(&cfg, workers)?;
    Ok(Checked { cfg, path, privileges, workers, fib, ports, physical, firewall })
}

/// Checks that every physical interface exists and is up (read-only), fills in MACs, and
/// warns about router addresses the kernel also has.
fn check_interfaces(cfg: &mut Config, path: &str) -> Result<()> {
    for iface in cfg.interfaces.iter_mut().filter(|i| i.vlan.is_none()) {
        if !io::netdev::exists(&iface.name) {
            bail!(
                "{path}: interface {:?} does not exist in this network namespace (check `ip link`)",
                iface.name
            );
        }
        if !io::netdev::is_up(&iface.name).unwrap_or(false) {
            bail!("{path}: interface {:?} is down (`ip link set {} up`)", iface.name, iface.name);
        }
        if iface.mac.is_none() {
            let mac = io::netdev::mac_address(&iface.name)
                .with_context(|| format!("reading the MAC address of {}", iface.name))?;
            iface.mac = Some(config::MacAddr(mac));
        }
    }
    if cfg.router.host_stack {
        for (i, iface) in cfg.interfaces.iter().enumerate().filter(|(_, i)| i.vlan.is_none()) {
            let in_kernel = crate::host::kernel_addresses(&iface.name);
            for a in iface.addresses.iter().filter(|a| in_kernel.contains(&a.addr)) {
                eprintln!(
                    "linerate: warning: {} also has {} in the kernel: with the host stack on, the address lives on linerate's TAP {}; remove it from {} (`ip addr del`)",
                    iface.name,
                    a.addr,
                    iface.tap_name(i),
                    iface.name
                );
            }
        }
    }
    Ok(())
}

/// The compiled rules (reloads go through the same slot) and each worker's firewall, its
/// state table allocated: all `None` without a `[firewall]`.
struct FirewallSetup {
    slot: Option<Arc<RulesSlot>>,
    per_worker: Firewalls,
    /// The rule file's text (`linerate show rules`).
    rules_text: String,
}

fn firewall(cfg: &Config, workers: usize) -> Result<FirewallSetup> {
    let Some(f) = &cfg.firewall else {
        return Ok(FirewallSetup {
            slot: None,
            per_worker: (0..workers).map(|_| None).collect(),
            rules_text: String::new(),
        });
    };
    let loaded = crate::rule_file::load(cfg, &f.rules)?;
    eprintln!("linerate: firewall: {} rules from {}", loaded.rules.rule_count(), f.rules.display());
    let slot = RulesSlot::new(Arc::new(loaded.rules));
    let firewalls = (0..workers)
        .map(|w| {
            Firewall::try_new(Arc::clone(&slot), dataplane::firewall::random_seed())
                .map(Some)
                .with_context(|| format!("{}: worker {w}'s state table", f.rules.display()))
        })
        .collect::<Result<_>>()?;
    Ok(FirewallSetup { slot: Some(slot), per_worker: firewalls, rules_text: loaded.text })
}

/// What `run` holds from the start until it exits, and the backend chosen for each physical
/// interface.
struct Claimed {
    metrics: Option<crate::metrics::Server>,
    notify: crate::notify::Notifier,
    backends: Vec<Backend>,
    /// Set by SIGINT and SIGTERM.
    stop: Arc<AtomicBool>,
    /// Set by SIGHUP.
    hup: Arc<AtomicBool>,
    _owned: Vec<crate::owner::InterfaceLock>,
}

fn claim(
    cfg: &Config,
    physical: &[config::Interface],
    workers: usize,
    firewall: &FirewallSetup,
) -> Result<Claimed> {
    // Configured, so refused loudly: a busy port is an error before anything is touched.
    let metrics = cfg.router.metrics_listen.map(crate::metrics::Server::bind).transpose()?;
    let notify = crate::notify::Notifier::from_env();
    let keep_state =
        firewall.slot.as_ref().is_some_and(|s| crate::steering::keeps_state(&s.current().rules));
    let backends =
        crate::steering::backends(physical, workers, keep_state).map_err(anyhow::Error::msg)?;
    let stop = crate::signals::stop_on_signals()?;
    let hup = crate::signals::reload_on_sighup()?;
    let names: Vec<&str> = physical.iter().map(|i| i.name.as_str()).collect();
    let _owned = crate::owner::lock_all(Path::new(crate::owner::LOCK_DIR), &names)?;
    if cfg.router.fail_closed {
        crate::fail_closed::apply()?;
    }
    Ok(Claimed { metrics, notify, backends, stop, hup, _owned })
}

/// Worker w's CPU: `first` + w modulo the CPU count.
fn worker_cpus(first: Option<usize>, workers: usize) -> Vec<usize> {
    let ncpu = io::affinity::available_cpus().max(1);
    let first_cpu = first.unwrap_or(if workers == 1 { ncpu - 1 } else { 0 });
    (0..workers).map(|w| (first_cpu + w) % ncpu).collect()
}

/// Each physical port's name and kernel ifindex (0 if it has none now).
/// What rebuilds a port on its interface created again (`router.rebuild_ports`), taking the
/// workers' job queues.
fn rebuilder(
    cfg: &Config,
    physical: &[config::Interface],
    backends: &[Backend],
    firewall: &FirewallSetup,
    built: &mut workers::Workers,
    offload: &Option<(Arc<crate::offload::Offload>, Vec<dataplane::offload::ControlQueues>)>,
) -> Option<crate::rebuild::Rebuilder> {
    cfg.router.rebuild_ports.then(|| crate::rebuild::Rebuilder {
        jobs: std::mem::take(&mut built.port_jobs),
        physical: physical.to_vec(),
        backends: backends.to_vec(),
        fail_closed: firewall.slot.is_some(),
        fast_path: cfg.router.fast_path.then_some(cfg.router.fast_path_flows),
        napi_cpus: None,
        offload: offload.as_ref().map(|(o, _)| Arc::clone(o)),
        placed: Mutex::new(Vec::new()),
        senders: Arc::default(),
        fanout: (0, Vec::new()),
        rebuilt: Default::default(),
        bypass: None,
        bypassed: Mutex::new(Vec::new()),
    })
}

fn port_indexes(physical: &[config::Interface]) -> Vec<(String, u32)> {
    physical.iter().map(|p| (p.name.clone(), io::netdev::ifindex(&p.name).unwrap_or(0))).collect()
}

/// What the router's state shows besides what the workers and the slow path built.
struct Views {
    reload_refusal: Option<String>,
    ha: Option<Arc<crate::ha::HaView>>,
    links: Arc<crate::links::Links>,
}

/// What the control socket, reloads and the metrics server see of this run.
fn router_state(
    cfg: &Config,
    firewall: &FirewallSetup,
    built: &mut workers::Workers,
    slow: &workers::SlowPathSetup,
    ports: &[PortInfo],
    kinds: &[String],
    views: Views,
) -> Arc<RouterState> {
    let fw_on = firewall.slot.is_some();
    let state_requests = std::mem::take(&mut built.state_requests);
    Arc::new(RouterState {
        cfg: cfg.clone(),
        slot: firewall.slot.clone(),
        workers: built.counters.clone(),
        slow: Arc::clone(&slow.slow),
        ports: ports.to_vec(),
        kinds: kinds.to_vec(),
        punt: slow.punt_stats.clone(),
        started: Instant::now(),
        reload_refusal: views.reload_refusal,
        fw: fw_on.then(|| {
            crate::control_fw::FwControl::new(
                built.fw_stats.clone(),
                state_requests,
                &firewall.rules_text,
            )
        }),
        running: Mutex::new(cfg.clone()),
        log: fw_on.then(|| crate::logger::LogHub::new(cfg.log.snaplen, &built.log_rings)),
        captures: crate::router_state::Captures::new(
            built.ready.iter().map(|w: &RunWorker| w.capture_slot()).collect(),
        ),
        kernel_routes: slow.threads.kernel_routes.as_ref().map(|(sync, _)| Arc::clone(&sync.stats)),
        ha: views.ha,
        links: views.links,
    })
}

/// The control socket, bound before the capabilities are dropped. Without it linerate still
/// forwards; only `reload`, `show` and `top` are missing.
fn bind_control(
    cfg: &Config,
    privileges: &crate::privilege::Plan,
) -> Option<crate::control::Server> {
    let socket_path = &cfg.router.control_socket;
    match crate::control::Server::bind(
        socket_path,
        privileges.socket_owner,
        privileges.control_gid.is_some(),
    ) {
        Ok(server) => Some(server),
        Err(e) => {
            eprintln!(
                "linerate: warning: control socket {}: {e:#}; `linerate reload`, `show` and `top` will not reach this process",
                socket_path.display()
            );
            None
        }
    }
}

/// Starts serving the metrics port and the control socket, each on a thread of its own.
fn serve(
    metrics: &mut Option<crate::metrics::Server>,
    control: Option<&mut crate::control::Server>,
    state: &Arc<RouterState>,
    privileges: &crate::privilege::Plan,
) {
    if let Some(server) = metrics.as_mut()
        && let Err(e) = server.serve(Arc::clone(state))
    {
        crate::log::warn(format_args!("metrics: {e:#}"));
    }
    if let Some(server) = control {
        let access = crate::control::Access {
            admin_uid: privileges.admin_uid,
            read_gid: privileges.control_gid,
        };
        if let Err(e) = server.serve(Arc::clone(state), access) {
            eprintln!("linerate: warning: control socket: {e:#}");
        }
    }
}

/// Waits for SIGINT/SIGTERM or a worker's end, reloading on SIGHUP and printing rates every
/// `--stats-interval` seconds.
fn supervise(
    args: &RunArgs,
    claimed: &Claimed,
    state: &RouterState,
    counters: &[Arc<WorkerCounters>],
    workers: &[JoinHandle<RunWorker>],
) {
    let mut last = (Instant::now(), Counts::default());
    while !claimed.stop.load(Ordering::Relaxed) && !workers.iter().any(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if claimed.hup.swap(false, Ordering::Relaxed) {
            // SIGHUP: as `linerate reload` (its answer is logged by the reload itself).
            claimed.notify.reloading();
            let answer = crate::reload::reload(state);
            claimed.notify.ready(&format!("forwarding; reload: {answer}"));
        }
        if args.stats_interval > 0 && last.0.elapsed() >= Duration::from_secs(args.stats_interval) {
            let now = total(counters);
            let d = now.since(&last.1);
            let secs = last.0.elapsed().as_secs_f64();
            eprintln!(
                "linerate: {:.0} pps in, {:.0} pps forwarded, {:.0} pps dropped",
                d.rx as f64 / secs,
                d.forwarded as f64 / secs,
                d.dropped() as f64 / secs
            );
            last = (Instant::now(), now);
        }
    }
}

/// What the threads hand back when they end.
struct Stopped {
    workers: Vec<RunWorker>,
    host_io: crate::host::HostIo,
}

/// Stops every thread and waits for it.
fn stop(
    threads: workers::Threads,
    logger: Option<JoinHandle<()>>,
    claimed: &Claimed,
) -> Result<Stopped> {
    claimed.stop.store(true, Ordering::Relaxed);
    claimed.notify.stopping();
    let mut finished = Vec::new();
    for h in threads.workers {
        finished.push(h.join().map_err(|_| anyhow::anyhow!("a worker thread panicked"))?);
    }
    let host_io =
        threads.slow.join().map_err(|_| anyhow::anyhow!("the slow-path thread panicked"))?;
    if let Some(l) = logger {
        l.join().map_err(|_| anyhow::anyhow!("the logger thread panicked"))?;
    }
    Ok(Stopped { workers: finished, host_io })
}

/// The sum of every worker's published counters.
fn total(workers: &[Arc<WorkerCounters>]) -> Counts {
    let mut t = Counts::default();
    for w in workers {
        t.add(&w.snapshot());
    }
    t
}
