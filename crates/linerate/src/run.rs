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

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use config::{Backend, Config};
use dataplane::filter::{CompiledRules, Firewall, FirewallStats, RulesSlot};
use dataplane::punt::{PuntClass, PuntDrop, PuntSender, punt_channel};
use dataplane::slowpath::SlowPath;
use dataplane::{Counts, Worker, WorkerCounters};
use io::any::{AnyRx, AnyTx, PortKind, PortOpener};
use io::{PortStats, RxPort, TxPort};

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

/// Records each worker's log ring holds (a burst of logged packets the logger thread has not
/// drained yet: it drains every 10 ms).
const LOG_RING: usize = 1024;

/// Frames in each worker's pool: enough to keep every AF_XDP fill ring full plus frames in
/// flight.
const POOL_FRAMES: u32 = 16 * 1024;

type RunWorker = Worker<AnyRx, AnyTx, PuntSender>;
/// Each worker's firewall (`None` without a `[firewall]`).
type Firewalls = Vec<Option<Firewall>>;

pub fn main(args: RunArgs) -> Result<()> {
    let mut cfg = Config::load(&args.config)?;
    let path = args.config.display().to_string();
    // Capabilities, not uid 0: each missing one is named before anything is touched.
    let plan = crate::privilege::check(&cfg, &path)?;
    check_interfaces(&mut cfg, &path)?;
    let workers = args.workers.unwrap_or(cfg.router.workers).clamp(1, 256);
    let (ctl, ports) = setup::fib(&cfg)?;
    let physical: Vec<config::Interface> = cfg.interfaces.iter().filter(|i| i.vlan.is_none()).cloned().collect();
    // Everything that can be wrong with the config or the rule file (state tables included)
    // is found before any interface, TAP, program or nftables table is touched.
    let (slot, firewalls, rules_text) = firewall(&cfg, workers)?;
    // Configured, so refused loudly: a busy port is an error before anything is touched.
    let mut metrics = cfg.router.metrics_listen.map(crate::metrics::Server::bind).transpose()?;
    let notify = crate::notify::Notifier::from_env();
    let keep_state = slot.as_ref().is_some_and(|s| crate::steering::keeps_state(&s.current().rules));
    let mut backends = crate::steering::backends(&physical, workers, keep_state).map_err(anyhow::Error::msg)?;
    let stop = crate::stop_on_signals()?;
    let hup = crate::reload_on_sighup()?;
    let names: Vec<&str> = physical.iter().map(|i| i.name.as_str()).collect();
    let _owned = crate::owner::lock_all(Path::new(crate::owner::LOCK_DIR), &names)?;
    if cfg.router.fail_closed {
        crate::fail_closed::apply()?;
    }

    // AF_PACKET fanout groups are per interface; ids from the pid keep two linerates apart.
    let fanout_base = (std::process::id() as u16).wrapping_mul(64);
    let mut opened = Vec::new();
    let mut kinds = Vec::new();
    // AF_PACKET fanout spreads flows with the Toeplitz RSS hash (an eBPF program), or, if the
    // kernel refuses it, with its own flow hash (both symmetric); decided per interface by
    // worker 0.
    let mut fanout_rss: Vec<bool> = vec![workers > 1; physical.len()];
    let mut bypass_ifaces = Vec::new();
    for w in 0..workers {
        let mut pool = io::FramePool::new(POOL_FRAMES);
        let mut opener = PortOpener::new();
        opener.xdp.queue = w as u32;
        // With a firewall, a frame no worker reads must not reach the kernel's forwarding.
        opener.xdp.fail_closed = slot.is_some();
        let (mut rx, mut tx) = (Vec::new(), Vec::new());
        for (phys, iface) in physical.iter().enumerate() {
            opener.fanout = (workers > 1).then_some(fanout_base.wrapping_add(phys as u16));
            opener.fanout_rss = fanout_rss[phys];
            opener.xdp.mode = match iface.xdp_mode {
                config::XdpMode::Auto => io::xdp::XdpMode::Auto,
                config::XdpMode::Native => io::xdp::XdpMode::Native,
                config::XdpMode::Generic => io::xdp::XdpMode::Generic,
            };
            let mut opened_port = open(&mut opener, &mut pool, &iface.name, phys as u16, backends[phys]);
            if w == 0 && opener.fanout_rss && opened_port.is_err() {
                eprintln!("linerate: warning: {}: Toeplitz fanout refused ({:#}); using the kernel's flow hash", iface.name, opened_port.as_ref().err().expect("is_err"));
                fanout_rss[phys] = false;
                opener.fanout_rss = false;
                opened_port = open(&mut opener, &mut pool, &iface.name, phys as u16, backends[phys]);
            }
            let (r, t, kind) = opened_port
                .with_context(|| format!("{path}: opening interface {:?} for worker {w} (AF_XDP: queue {w}; an interface needs as many queues as workers, see `ethtool -l`)", iface.name))?;
            if w == 0 {
                // Every worker uses the backend worker 0 ended up with on an interface.
                backends[phys] = if matches!(r, AnyRx::Packet(_)) { Backend::AfPacket } else { Backend::AfXdp };
                eprintln!("linerate: {} (port {phys}): {kind}", iface.name);
                if let AnyRx::Xdp(x) = &r
                    && x.mode().0 == io::xdp::XdpMode::Generic
                {
                    eprintln!("linerate: note: {}: in generic XDP mode the kernel drops GSO frames (from senders on this host with TSO on) larger than a frame buffer; see docs/router.md, \"Offloads\"", iface.name);
                }
                kinds.push(kind.to_string());
                if matches!(r, AnyRx::Packet(_)) {
                    bypass_ifaces.push((iface.name.clone(), iface.addresses.iter().map(|a| a.addr).collect::<Vec<_>>()));
                }
            }
            rx.push(r);
            tx.push(t);
        }
        opened.push((rx, tx, pool));
    }
    let reload_refusal = crate::steering::reload_refusal(&physical, &backends, workers);

    // AF_PACKET leaves the kernel a copy of every frame: drop it early (see kernel_bypass).
    let _bypass = if bypass_ifaces.is_empty() {
        None
    } else {
        match crate::kernel_bypass::KernelBypass::install(&bypass_ifaces, cfg.router.host_stack) {
            Ok(b) => {
                eprintln!("linerate: the kernel's copies of forwarded frames are dropped by {}", b.describe());
                Some(b)
            }
            Err(e) if slot.is_some() && !crate::fail_closed::forwarding_on().is_empty() => {
                bail!("cannot keep the kernel from processing the frames linerate filters ({e}), and the kernel forwards ({}): it would route them unfiltered; set router.fail_closed = true or turn forwarding off", crate::fail_closed::forwarding_on().join(", "));
            }
            Err(e) => {
                eprintln!("linerate: warning: cannot keep the kernel from processing forwarded frames ({e}); it will also route every frame linerate forwards, halving throughput");
                None
            }
        }
    };
    let nft_table = _bypass.as_ref().is_some_and(|b| matches!(b, crate::kernel_bypass::KernelBypass::Nftables(_)));

    // The slow path owns the FIB writer from here on.
    let host_io = crate::host::open(&cfg, &ports)?;
    if cfg.router.host_stack {
        eprintln!("linerate: host stack on TAPs {}", crate::host::tap_names(&cfg).join(", "));
    }
    let icmp_rate = u64::from(cfg.router.icmp_errors_per_second);
    let mut slow = SlowPath::with_max_neighbours(ctl, ports.clone(), cfg.router.host_stack, icmp_rate, cfg.router.max_neighbours);
    for n in &cfg.neighbours {
        if let Some(port) = cfg.interfaces.iter().position(|i| i.name == n.interface) {
            slow.add_static(n.address, port as u16, wire::MacAddr(n.mac.0));
        }
    }
    for (port, iface) in cfg.interfaces.iter().enumerate() {
        if let Some(ra) = &iface.ra {
            slow.advertise(port as u16, &setup::advert_settings(ra), dataplane::filter::random_seed());
            eprintln!("linerate: {}: router advertisements every {}-{} s from {}", iface.name, ra.min_interval, ra.max_interval, dataplane::slowpath::link_local(ports[port].mac));
        }
    }
    let fib = slow.fib().fib();
    // The route socket's large buffer needs CAP_NET_ADMIN: opened before it is dropped.
    let kernel_routes = crate::route_sync::open(&cfg)?;
    let (punt_tx, punt_rx) = punt_channel(&setup::punt_policy(&cfg.router.punt), workers, Arc::clone(&fib));
    let punt_stats = punt_rx.stats();
    let slow = Arc::new(Mutex::new(slow));

    let ncpu = io::affinity::available_cpus().max(1);
    let first_cpu = args.cpu.unwrap_or(if workers == 1 { ncpu - 1 } else { 0 });
    let worker_cpus: Vec<usize> = (0..workers).map(|w| (first_cpu + w) % ncpu).collect();
    let receive = cfg.router.napi_threads.then(|| crate::receive::place(&physical, &backends, &worker_cpus));
    let batch = cfg.router.batch_size;
    let mut workers_ready = Vec::new();
    let mut counters = Vec::new();
    let mut fw_stats = Vec::new();
    let mut state_desks = Vec::new();
    // Each worker's log ring, drained by the logger thread (with a firewall).
    let mut log_rings = Vec::new();
    let log_file = if slot.is_some() { crate::logger::open_file(&cfg.log)? } else { None };
    for (w, ((rx, tx, pool), firewall)) in opened.into_iter().zip(firewalls).enumerate() {
        let mut worker: RunWorker = Worker::new(Arc::clone(&fib), &ports, rx, tx, punt_tx.clone(), pool, batch);
        // The errors-per-second budget is shared out among the workers.
        worker.set_icmp_rate(icmp_rate.div_ceil(workers as u64));
        worker.set_idle(match (cfg.router.sleep_when_idle, receive.as_ref().is_some_and(|p| p.on_worker[w])) {
            (false, _) => dataplane::Idle::Spin,
            (true, true) => dataplane::Idle::Sleep { spin: dataplane::worker::SPIN_WITH_NAPI, yield_cpu: true },
            (true, false) => dataplane::Idle::Sleep { spin: dataplane::worker::SPIN_BEFORE_SLEEP, yield_cpu: false },
        });
        worker.set_nat_steering(w as u16, workers as u16);
        if let Some(mut firewall) = firewall {
            let rate = u64::from(cfg.log.rate).div_ceil(workers as u64);
            let (sink, ring) = dataplane::filter::log::log_ring(LOG_RING, cfg.log.snaplen as usize, rate);
            firewall.set_log(sink);
            log_rings.push(ring);
            worker.set_firewall(firewall);
            let (desk, requests) = std::sync::mpsc::channel();
            worker.set_state_requests(w, requests);
            state_desks.push(desk);
        }
        fw_stats.extend(worker.firewall_stats());
        counters.push(worker.counters());
        workers_ready.push(worker);
    }
    let state = Arc::new(crate::control::RouterState {
        cfg: cfg.clone(),
        slot: slot.clone(),
        workers: counters.clone(),
        slow: Arc::clone(&slow),
        ports: ports.clone(),
        kinds: kinds.clone(),
        punt: punt_stats.clone(),
        started: Instant::now(),
        reload_refusal,
        fw: slot.is_some().then(|| crate::control_fw::FwControl::new(fw_stats.clone(), state_desks, &rules_text)),
        running: Mutex::new(cfg.clone()),
        log: slot.is_some().then(|| crate::logger::LogHub::new(cfg.log.snaplen, &log_rings)),
        captures: crate::stream::Captures::new(workers_ready.iter().map(|w: &RunWorker| w.capture_slot()).collect()),
        kernel_routes: kernel_routes.as_ref().map(|(sync, _)| Arc::clone(&sync.stats)),
    });
    // Without the socket linerate still forwards; only `reload`, `show` and `top` are missing.
    let socket_path = cfg.router.control_socket.clone();
    let mut control = match crate::control::Server::bind(&socket_path, plan.socket_owner, plan.control_gid.is_some()) {
        Ok(server) => Some(server),
        Err(e) => {
            eprintln!("linerate: warning: control socket {}: {e:#}; `linerate reload`, `show` and `top` will not reach this process", socket_path.display());
            None
        }
    };

    // Set up: from here on, no capability is effective (capabilities are per thread, so
    // this comes before any thread starts).
    let dropped = plan.drop_privileges(crate::privilege::exit_needs(&cfg, nft_table))?;
    eprintln!("linerate: privileges: {dropped}");

    let slow_thread = {
        let (slow, stop) = (Arc::clone(&slow), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("lr-slowpath".into())
            .spawn(move || crate::host::run(slow, host_io, punt_rx, stop))
            .context("starting the slow-path thread")?
    };
    let _routes_thread = match kernel_routes {
        Some((sync, sock)) => {
            let (slow, stop) = (Arc::clone(&slow), Arc::clone(&stop));
            Some(std::thread::Builder::new()
                .name("lr-routes".into())
                .spawn(move || crate::route_sync::run(sync, sock, slow, stop))
                .context("starting the kernel route thread")?)
        }
        None => None,
    };
    let mut handles = Vec::new();
    for (w, mut worker) in workers_ready.into_iter().enumerate() {
        let cpu = worker_cpus[w];
        let worker_stop = Arc::clone(&stop);
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
    if let Some(server) = metrics.as_mut()
        && let Err(e) = server.serve(Arc::clone(&state))
    {
        crate::log::warn(format_args!("metrics: {e:#}"));
    }
    if let Some(server) = control.as_mut() {
        let access = crate::control::Access { admin_uid: plan.admin_uid, read_gid: plan.control_gid };
        if let Err(e) = server.serve(Arc::clone(&state), access) {
            eprintln!("linerate: warning: control socket: {e:#}");
        }
    }

    let logger = match &state.log {
        Some(hub) => {
            let names = cfg.interfaces.iter().map(|i| i.name.clone()).collect();
            Some(crate::logger::spawn(Arc::clone(hub), log_file, log_rings, names, Arc::clone(&stop))?)
        }
        None => None,
    };
    drop(punt_tx);
    let cpus: Vec<String> = (0..workers).map(|w| ((first_cpu + w) % ncpu).to_string()).collect();
    eprintln!("linerate: forwarding with {workers} worker(s) on cpu {}, batch {batch}; Ctrl-C to stop", cpus.join(","));
    notify.ready(&format!("forwarding with {workers} worker(s)"));

    let started = Instant::now();
    let mut last = (Instant::now(), Counts::default());
    while !stop.load(Ordering::Relaxed) && !handles.iter().any(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if hup.swap(false, Ordering::Relaxed) {
            // SIGHUP: as `linerate reload` (its answer is logged by the reload itself).
            notify.reloading();
            let answer = crate::control::reload(&state);
            notify.ready(&format!("forwarding; reload: {answer}"));
        }
        if args.stats_interval > 0 && last.0.elapsed() >= Duration::from_secs(args.stats_interval) {
            let now = total(&counters);
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
    stop.store(true, Ordering::Relaxed);
    notify.stopping();
    let mut finished = Vec::new();
    for h in handles {
        finished.push(h.join().map_err(|_| anyhow::anyhow!("a worker thread panicked"))?);
    }
    let host_io = slow_thread.join().map_err(|_| anyhow::anyhow!("the slow-path thread panicked"))?;
    if let Some(l) = logger {
        l.join().map_err(|_| anyhow::anyhow!("the logger thread panicked"))?;
    }
    // The workers are stopped: raise what the clean-up needs (NAPI threads, sysfs, nftables).
    crate::privilege::for_clean_up();
    // The report is written at once, and a closed stdout does not stop the clean-up.
    let mut report = String::new();
    print_final(&mut report, &physical, &kinds, &finished, started.elapsed());
    let sp = slow.lock().unwrap_or_else(|e| e.into_inner());
    let s = sp.stats;
    let _ = writeln!(
        report,
        "slow path: arp replies {} requests {}, nd adverts {} solicits {}, router adverts {} solicits {}, echo replies {}, icmp errors {} (suppressed {}; block return unreachables {}), block return resets {} (suppressed {}), resolved {} failed {}, to host {} from host {}, dropped: local {} waiting {} invalid {}, send errors {}",
        s.arp_replies, s.arp_requests, s.nd_adverts, s.nd_solicits, s.router_adverts, s.router_solicits, s.echo_replies, s.icmp_errors, s.icmp_suppressed, s.filter_unreachables, s.filter_resets, s.filter_resets_suppressed, s.resolved, s.resolve_failed, s.to_host, s.from_host, s.local_drops, s.neighbour_drops, s.invalid, host_io.send_errors
    );
    // Punts the workers dropped, by class and reason; ICMP errors are policed before the copy.
    let mut punt_drops = punt_stats.drops();
    punt_drops.add(PuntClass::IcmpError, PuntDrop::Policed, finished.iter().map(|w| w.icmp_counts().1).sum());
    for (reason, n) in punt_drops.named().filter(|&(_, n)| n > 0) {
        let _ = writeln!(report, "  drop {reason:<32} {n}");
    }
    println!("neighbours: evicted {}, table full {}, fib full {}", s.neighbour_evictions, s.neighbour_table_full, s.fib_full);
    for (reason, n) in s.rejects.iter().filter(|&(_, n)| n > 0) {
        println!("  arp/ndp ignored {reason:<24} {n}");
    }
    for stats in &fw_stats {
        print_firewall(&mut report, stats);
    }
    if let Some(hub) = state.log.as_ref().filter(|h| h.totals.written.load(Ordering::Relaxed) > 0 || slot.as_ref().is_some_and(|s| s.current().log.any)) {
        let t = &hub.totals;
        let (limited, full) = hub.losses();
        let _ = writeln!(
            report,
            "log: {} records, lost: rate limit {limited}, rings full {full}, slow clients {}; file write errors {}",
            t.written.load(Ordering::Relaxed),
            t.client_drops.load(Ordering::Relaxed),
            t.file_errors.load(Ordering::Relaxed)
        );
    }
    for iface in &physical {
        if let Some(n) = io::xdp::unsteered_drops(&iface.name) {
            let _ = writeln!(report, "{}: dropped in the kernel for want of a socket (fail-closed) {n}", iface.name);
        }
    }
    if let Err(e) = crate::output::print(&report) {
        eprintln!("linerate: {e:#}");
    }
    Ok(())
}

/// Checks that every physical interface exists and is up (read-only), fills in MACs, and
/// warns about router addresses the kernel also has.
fn check_interfaces(cfg: &mut Config, path: &str) -> Result<()> {
    for iface in cfg.interfaces.iter_mut().filter(|i| i.vlan.is_none()) {
        if !io::netdev::exists(&iface.name) {
            bail!("{path}: interface {:?} does not exist in this network namespace (check `ip link`)", iface.name);
        }
        if !io::netdev::is_up(&iface.name).unwrap_or(false) {
            bail!("{path}: interface {:?} is down (`ip link set {} up`)", iface.name, iface.name);
        }
        if iface.mac.is_none() {
            let mac = io::netdev::mac_address(&iface.name).with_context(|| format!("reading the MAC address of {}", iface.name))?;
            iface.mac = Some(config::MacAddr(mac));
        }
    }
    if cfg.router.host_stack {
        for (i, iface) in cfg.interfaces.iter().enumerate().filter(|(_, i)| i.vlan.is_none()) {
            let in_kernel = crate::host::kernel_addresses(&iface.name);
            for a in iface.addresses.iter().filter(|a| in_kernel.contains(&a.addr)) {
                eprintln!("linerate: warning: {} also has {} in the kernel: with the host stack on, the address lives on linerate's TAP {}; remove it from {} (`ip addr del`)", iface.name, a.addr, iface.tap_name(i), iface.name);
            }
        }
    }
    Ok(())
}

/// The compiled rules (reloads go through the same slot) and each worker's firewall, its
/// state table allocated: all `None` without a `[firewall]`.
fn firewall(cfg: &Config, workers: usize) -> Result<(Option<Arc<RulesSlot>>, Firewalls, String)> {
    let Some(f) = &cfg.firewall else { return Ok((None, (0..workers).map(|_| None).collect(), String::new())) };
    let (rules, text) = load_rules_with_text(cfg, &f.rules)?;
    eprintln!("linerate: firewall: {} rules from {}", rules.rule_count(), f.rules.display());
    let slot = RulesSlot::new(Arc::new(rules));
    let firewalls = (0..workers)
        .map(|w| Firewall::try_new(Arc::clone(&slot), dataplane::filter::random_seed()).map(Some).with_context(|| format!("{}: worker {w}'s state table", f.rules.display())))
        .collect::<Result<_>>()?;
    Ok((Some(slot), firewalls, text))
}

/// The sum of every worker's published counters.
pub fn total(workers: &[Arc<WorkerCounters>]) -> Counts {
    let mut t = Counts::default();
    for w in workers {
        t.add(&w.snapshot());
    }
    t
}

/// Parses and compiles the config's rule file, interface names resolving to port indices in
/// the config's interface order (the worker's port numbering), with the interfaces'
/// addresses for `self`, interface hosts and `antispoof`.
pub fn load_rules(cfg: &Config, rules: &Path) -> Result<CompiledRules> {
    load_rules_with_text(cfg, rules).map(|(r, _)| r)
}

/// [`load_rules`], and the text the rules were compiled from (`linerate show rules`).
pub fn load_rules_with_text(cfg: &Config, rules: &Path) -> Result<(CompiledRules, String)> {
    let ifaces = |name: &str| cfg.interfaces.iter().position(|i| i.name == name).map(|i| i as u16);
    let text = std::fs::read_to_string(rules).with_context(|| format!("{}:0:0: cannot read rule file", rules.display()))?;
    let addresses: Vec<(String, Vec<(std::net::IpAddr, u8)>)> =
        cfg.interfaces.iter().map(|i| (i.name.clone(), i.addresses.iter().map(|a| (a.addr, a.prefix_len)).collect())).collect();
    let compiled = CompiledRules::parse_with_addresses(&text, rules, &ifaces, &addresses).map_err(anyhow::Error::msg)?;
    let has_v4 = |i: u16| cfg.interfaces.get(usize::from(i)).is_some_and(|i| i.addresses.iter().any(|a| a.addr.is_ipv4()));
    if let Some((r, i)) = fw::nat::iface_without_address(&compiled.rules, &has_v4) {
        let name = &cfg.interfaces[usize::from(i)].name;
        anyhow::bail!("{}:{}:{}: `{}` translates to ({name}), which has no IPv4 address in the config", rules.display(), r.line, r.column, r.kind.name());
    }
    Ok((compiled, text))
}

/// Per-rule counters (rules that saw no packet are listed too: it shows dead rules), then the
/// state table's. (Writing to a String cannot fail.)
fn print_firewall(out: &mut String, stats: &FirewallStats) {
    let rules = stats.rules();
    let _ = writeln!(out, "{:<6} {:<16} {:<6} {:>12} {:>14} {:>10}", "line", "label", "action", "packets", "bytes", "states");
    for r in rules.snapshot() {
        let line = if r.rule.is_some() { r.line.to_string() } else { "-".into() };
        let label = r.label.as_deref().unwrap_or(if r.rule.is_some() { "" } else { "(default pass)" });
        let action = match r.action {
            fw::rules::Action::Pass => "pass",
            fw::rules::Action::Block => "block",
        };
        let _ = writeln!(out, "{line:<6} {label:<16} {action:<6} {:>12} {:>14} {:>10}", r.packets, r.bytes, r.states);
    }
    let states: Vec<String> = stats.states().iter().map(|(n, v)| format!("{n} {v}")).collect();
    let _ = writeln!(out, "states: {}", states.join(", "));
}

fn open(opener: &mut PortOpener, pool: &mut io::FramePool, ifname: &str, port: u16, backend: Backend) -> Result<(AnyRx, AnyTx, PortKind)> {
    match backend {
        Backend::AfXdp => Ok(opener.open_xdp(pool, ifname, port)?),
        Backend::AfPacket => Ok(opener.open_packet(ifname, port)?),
        Backend::Auto => match opener.open_xdp(pool, ifname, port) {
            Ok(p) => Ok(p),
            Err(e) => {
                eprintln!("linerate: warning: {ifname}: AF_XDP unavailable ({e}); falling back to AF_PACKET");
                Ok(opener.open_packet(ifname, port)?)
            }
        },
        Backend::Memory => bail!("backend \"memory\" is for benchmarks and tests, not for `linerate run`"),
    }
}

fn print_final(out: &mut String, physical: &[config::Interface], kinds: &[String], workers: &[RunWorker], elapsed: Duration) {
    let _ = writeln!(out, "linerate ran {:.1} s with {} worker(s)", elapsed.as_secs_f64(), workers.len());
    let _ = writeln!(out, "{:<16} {:>12} {:>10} {:>12} {:>10}  backend", "interface", "rx_packets", "rx_drops", "tx_packets", "tx_drops");
    for (i, iface) in physical.iter().enumerate() {
        let (mut r, mut t) = (PortStats::default(), PortStats::default());
        for w in workers {
            let (wr, wt) = (w.rx[i].stats(), w.tx[i].stats());
            r.rx_packets += wr.rx_packets;
            r.rx_dropped += wr.rx_dropped;
            t.tx_packets += wt.tx_packets;
            t.tx_dropped += wt.tx_dropped;
        }
        let _ = writeln!(out, "{:<16} {:>12} {:>10} {:>12} {:>10}  {}", iface.name, r.rx_packets, r.rx_dropped, t.tx_packets, t.tx_dropped, kinds[i]);
    }
    let mut c = Counts::default();
    for w in workers {
        c.add(&w.counts());
    }
    let _ = writeln!(out, "packets: rx {} forwarded {} local {} slow_path {} dropped {}", c.rx, c.forwarded, c.local, c.slow_path, c.dropped());
    for (reason, n) in c.drops_by_reason().filter(|&(_, n)| n > 0) {
        let _ = writeln!(out, "  drop {:<20} {n}", reason.name());
    }
}
