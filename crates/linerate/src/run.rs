//! `linerate run -c FILE`: open the configured interfaces, forward until SIGINT/SIGTERM, then
//! print per-interface counters and drop reasons.
//!
//! What happens to traffic the kernel would have handled, until the host-stack issue lands:
//! - AF_XDP: linerate's XDP program hands IPv4, IPv6 and VLAN-tagged frames to linerate and
//!   passes everything else (ARP above all) to the kernel, which keeps answering ARP for the
//!   interface addresses it owns. IP packets addressed to the router take linerate's local
//!   exit, where they are counted and dropped: ping or ssh to the router's own addresses do
//!   not work while linerate runs with AF_XDP.
//! - AF_PACKET: the kernel still receives every frame. linerate installs an nftables netdev
//!   ingress table (`linerate_bypass`, removed on exit) that drops the kernel's copy of IP
//!   packets not addressed to the router, after linerate's socket has its own; so the kernel
//!   answers ARP and its own pings as usual, and linerate counts those packets on its local
//!   exit and drops its copy. Keep the kernel's forwarding off (net.ipv4.ip_forward=0, the
//!   default in a new namespace), or if the table cannot be installed both would forward.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use config::{Backend, Config};
use dataplane::filter::{CompiledRules, Firewall, FirewallStats, RulesSlot};
use dataplane::{Counts, Worker};
use io::any::{AnyRx, AnyTx, PortKind, PortOpener};
use io::mem::CountingTx;
use io::{PortStats, RxPort, TxPort};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Configuration file (TOML).
    #[arg(short, long)]
    config: PathBuf,
    /// CPU to pin the worker to [default: the last CPU].
    #[arg(long)]
    cpu: Option<usize>,
    /// Print counters every N seconds while running (0: only at exit).
    #[arg(long, default_value_t = 0)]
    stats_interval: u64,
}

/// Frames in the pool: enough to keep every AF_XDP fill ring full plus frames in flight.
const POOL_FRAMES: u32 = 16 * 1024;

pub fn main(args: RunArgs) -> Result<()> {
    let mut cfg = Config::load(&args.config)?;
    let path = args.config.display().to_string();
    if !io::netdev::is_root() {
        bail!("linerate run needs root (CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF) to open packet sockets and load XDP programs");
    }
    for iface in &mut cfg.interfaces {
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
    let (ctl, ports) = dataplane::fib::from_config(&cfg)?;
    let mut pool = io::FramePool::new(POOL_FRAMES);
    let mut opener = PortOpener::new();
    let (mut rx, mut tx, mut kinds) = (Vec::new(), Vec::new(), Vec::new());
    let mut bypass_ifaces = Vec::new();
    for (i, iface) in cfg.interfaces.iter().enumerate() {
        opener.xdp.mode = match iface.xdp_mode {
            config::XdpMode::Auto => io::xdp::XdpMode::Auto,
            config::XdpMode::Native => io::xdp::XdpMode::Native,
            config::XdpMode::Generic => io::xdp::XdpMode::Generic,
        };
        let (r, t, kind) = open(&mut opener, &mut pool, &iface.name, i as u16, iface.backend)
            .with_context(|| format!("{path}: opening interface {:?}", iface.name))?;
        eprintln!("linerate: {} (port {i}): {kind}", iface.name);
        if matches!(r, AnyRx::Packet(_)) {
            bypass_ifaces.push((iface.name.clone(), iface.addresses.iter().map(|a| a.addr).collect::<Vec<_>>()));
        }
        rx.push(r);
        tx.push(t);
        kinds.push(kind.to_string());
    }

    // AF_PACKET leaves the kernel a copy of every frame: drop it early (see kernel_bypass).
    let _bypass = if bypass_ifaces.is_empty() {
        None
    } else {
        match crate::kernel_bypass::KernelBypass::install(&bypass_ifaces) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("linerate: warning: cannot keep the kernel from processing forwarded frames ({e}); it will also route every frame linerate forwards, halving throughput");
                None
            }
        }
    };
    let stop = crate::stop_on_signals()?;
    let cpu = args.cpu.unwrap_or_else(|| io::affinity::available_cpus().saturating_sub(1));
    let batch = cfg.router.batch_size;
    let fib = ctl.fib();
    let mut worker = Worker::new(fib, &ports, rx, tx, CountingTx::new(), pool, batch);
    // Rules are compiled before the worker starts; reloads go through the same slot.
    let slot = match &cfg.firewall {
        Some(f) => {
            let rules = load_rules(&cfg, &f.rules)?;
            eprintln!("linerate: firewall: {} rules from {}", rules.rule_count(), f.rules.display());
            let slot = RulesSlot::new(Arc::new(rules));
            worker.set_firewall(Firewall::new(Arc::clone(&slot), dataplane::filter::random_seed()));
            Some(slot)
        }
        None => None,
    };
    let fw_stats = worker.firewall_stats();
    // Without the socket linerate still forwards; only `linerate reload` is unavailable.
    let _control = match crate::control::Server::start(&cfg, slot.clone()) {
        Ok(server) => Some(server),
        Err(e) => {
            eprintln!("linerate: warning: control socket {}: {e:#}; `linerate reload` will not reach this process", cfg.router.control_socket.display());
            None
        }
    };
    let counters = worker.counters();
    let worker_stop = Arc::clone(&stop);
    let handle = std::thread::Builder::new()
        .name("lr-worker-0".into())
        .spawn(move || {
            if let Err(e) = io::affinity::pin_current_thread(cpu) {
                eprintln!("linerate: warning: cannot pin the worker to cpu {cpu}: {e}");
            }
            worker.run(&worker_stop);
            worker
        })
        .context("starting the worker thread")?;
    eprintln!("linerate: forwarding with 1 worker on cpu {cpu}, batch {batch}; Ctrl-C to stop");

    let started = Instant::now();
    let mut last = (Instant::now(), Counts::default());
    while !stop.load(Ordering::Relaxed) && !handle.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        if args.stats_interval > 0 && last.0.elapsed() >= Duration::from_secs(args.stats_interval) {
            let now = counters.snapshot();
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
    let worker = handle.join().map_err(|_| anyhow::anyhow!("the worker thread panicked"))?;
    print_final(&cfg, &kinds, &worker, started.elapsed());
    if let Some(stats) = fw_stats {
        print_firewall(&stats);
    }
    Ok(())
}

/// Parses and compiles the config's rule file, interface names resolving to port indices in
/// the config's interface order (the worker's port numbering).
pub fn load_rules(cfg: &Config, rules: &Path) -> Result<CompiledRules> {
    let ifaces = |name: &str| cfg.interfaces.iter().position(|i| i.name == name).map(|i| i as u16);
    CompiledRules::load(rules, &ifaces).map_err(anyhow::Error::msg)
}

/// Per-rule counters (rules that saw no packet are listed too: it shows dead rules), then the
/// state table's.
fn print_firewall(stats: &FirewallStats) {
    let rules = stats.rules();
    println!("{:<6} {:<16} {:<6} {:>12} {:>14} {:>10}", "line", "label", "action", "packets", "bytes", "states");
    for r in rules.snapshot() {
        let line = if r.rule.is_some() { r.line.to_string() } else { "-".into() };
        let label = r.label.as_deref().unwrap_or(if r.rule.is_some() { "" } else { "(default pass)" });
        let action = match r.action {
            fw::rules::Action::Pass => "pass",
            fw::rules::Action::Block => "block",
        };
        println!("{line:<6} {label:<16} {action:<6} {:>12} {:>14} {:>10}", r.packets, r.bytes, r.states);
    }
    let states: Vec<String> = stats.states().iter().map(|(n, v)| format!("{n} {v}")).collect();
    println!("states: {}", states.join(", "));
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

fn print_final(cfg: &Config, kinds: &[String], worker: &Worker<AnyRx, AnyTx, CountingTx>, elapsed: Duration) {
    println!("linerate ran {:.1} s", elapsed.as_secs_f64());
    println!("{:<16} {:>12} {:>10} {:>12} {:>10}  backend", "interface", "rx_packets", "rx_drops", "tx_packets", "tx_drops");
    for (i, iface) in cfg.interfaces.iter().enumerate() {
        let r: PortStats = worker.rx[i].stats();
        let t: PortStats = worker.tx[i].stats();
        println!("{:<16} {:>12} {:>10} {:>12} {:>10}  {}", iface.name, r.rx_packets, r.rx_dropped, t.tx_packets, t.tx_dropped, kinds[i]);
    }
    let c = worker.counts();
    println!("packets: rx {} forwarded {} local {} dropped {}", c.rx, c.forwarded, c.local, c.dropped());
    for (reason, n) in c.drops_by_reason().filter(|&(_, n)| n > 0) {
        println!("  drop {:<20} {n}", reason.name());
    }
}
