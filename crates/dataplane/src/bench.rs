//! `linerate bench`: the forwarding pipeline on one core over in-memory ports.
//!
//! An in-memory rx port replays the flow set (copying each frame into a pool buffer, as a
//! NIC's DMA would); the worker forwards; counting tx ports stand for the receiver, and the
//! rate is what they count (packets forwarded), divided by wall-clock time. Each run lasts
//! `seconds`; the figure reported is the median of `runs` runs, after a short warm-up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use io::mem::{CountingTx, ReplayRx};
use io::{FramePool, TxPort};
use wire::MacAddr;
use wire::build::{UdpFlow, udp_frame, udp_frame_vlan};

use std::sync::Arc;

use fw::packet::{Af, Dir, PacketKey};

use crate::counters::Counts;
use crate::filter::{CompiledRules, Firewall, RulesSlot};
use crate::fib::{FibControl, FibError, PortInfo};
use crate::synth::{self, Rng};
use crate::worker::{DEFAULT_BATCH, Worker};

/// MAC of the bench's input port; generated frames are addressed to it.
pub const RX_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
/// MAC of the bench's output port.
pub const TX_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);
const SENDER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xaa]);
/// Distinct gateways the synthetic table's routes point to.
const SYNTH_GATEWAYS: usize = 1024;
/// VLAN ids of the `vlan` bench's input and output sub-interfaces.
const IN_VLAN: u16 = 10;
const OUT_VLAN: u16 = 20;

/// Where the routes come from.
#[derive(Debug, Clone)]
pub enum RouteSource {
    /// A synthetic Internet-like table of this many prefixes.
    Synthetic(usize),
    /// A route file (`PREFIX/LEN NEXTHOP` per line).
    File(PathBuf),
}

#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub routes: RouteSource,
    pub flows: usize,
    /// Ethernet frame length without FCS.
    pub frame_size: usize,
    pub ipv6: bool,
    pub pcap: Option<PathBuf>,
    pub runs: usize,
    pub seconds: f64,
    pub batch: usize,
    /// CPU to pin the worker to.
    pub cpu: Option<usize>,
    pub seed: u64,
    /// Unmeasured run before the first measured one (caches, TLB, branch predictors).
    pub warmup: Duration,
    /// Run the firewall stage with a generated rule set.
    pub firewall: Option<BenchFirewall>,
    /// Workers, one thread each pinned to CPUs 0, 1, ...; flows are spread over them by the
    /// Toeplitz RSS hash of each frame, as a NIC's RSS would (1 = the calling thread).
    pub workers: usize,
    /// 802.1Q: frames arrive tagged VLAN 10 (sub-interface of the input port) and leave
    /// tagged VLAN 20 (sub-interface of the output port); `frame_size` is the untagged size.
    pub vlan: bool,
}

/// The generated rule set of a firewall bench (see [`bench_rules`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BenchFirewall {
    /// Rules that never match the bench's traffic, before the final pass.
    pub rules: usize,
    /// A `block in quick from <t>` rule whose table holds this many prefixes, none covering
    /// the bench's sources.
    pub table_size: Option<usize>,
    /// The final rule keeps state, and this many states of other flows are created first.
    pub states: Option<usize>,
    /// The `rules` are a realistic generated set ([`fw::testgen`]) instead of uniform host
    /// rules: its rules that would match the bench's flows are left out, so the traffic is
    /// decided by the final pass after the classifier has looked at all of them.
    pub realistic: bool,
    /// `nat` on the output port (every flow translated to 192.0.2.1, ports 1024:65535), and
    /// this many translations of other flows are created first.
    pub nat: Option<usize>,
    /// The final rule has `log`, at most this many records a second (0: no limit); a thread
    /// drains the log ring every millisecond, as the logger does every 10 ms.
    pub log: Option<u64>,
}

/// Firewall figures of a bench run.
#[derive(Debug, Clone)]
pub struct BenchFirewallResult {
    pub rules: usize,
    pub compile: Duration,
    pub classifier_bytes: usize,
    pub state_limit: usize,
    pub state_table_bytes: usize,
    /// States created before measuring.
    pub prefilled_states: usize,
    pub prefill: Duration,
    /// State-table counters at the end (warm-up and every run included).
    pub state_counters: Vec<(&'static str, u64)>,
    /// Rules (and the default) that counted packets or states, warm-up included.
    pub matched: Vec<crate::filter::RuleStat>,
    /// NAT translations prefilled, in use at the end, and the table's bytes.
    pub nat_prefilled: usize,
    pub nat_sessions: usize,
    pub nat_table_bytes: usize,
    /// With `log`: records logged, refused by the rate limit, dropped for a full ring.
    pub log: Option<Arc<[std::sync::atomic::AtomicU64; 3]>>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            routes: RouteSource::Synthetic(1_000_000),
            flows: 2000,
            frame_size: 60,
            ipv6: false,
            pcap: None,
            runs: 5,
            seconds: 2.0,
            batch: DEFAULT_BATCH,
            cpu: None,
            seed: 1,
            warmup: Duration::from_millis(200),
            firewall: None,
            workers: 1,
            vlan: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct BenchResult {
    /// Forwarded Mpps of each run.
    pub runs_mpps: Vec<f64>,
    /// Median of `runs_mpps`.
    pub mpps: f64,
    /// Median over runs of wall-clock ns per received packet.
    pub ns_per_packet: f64,
    /// Counters summed over the measured runs.
    pub counts: Counts,
    pub routes: usize,
    pub flows: usize,
    pub frame_size: usize,
    pub setup: Duration,
    pub firewall: Option<BenchFirewallResult>,
    /// Workers that ran, and the flows each was given.
    pub flows_per_worker: Vec<usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Pcap(#[from] io::pcap::PcapError),
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Fib(#[from] FibError),
    #[error("{0}")]
    Invalid(String),
}

/// The prepared pipeline of one bench.
struct Setup {
    ctl: FibControl,
    ports: Vec<PortInfo>,
    frames: Vec<Vec<u8>>,
    routes: usize,
}

fn gateway(i: usize, ipv6: bool) -> (IpAddr, MacAddr) {
    let mac = MacAddr([0x02, 0, 0, 0x01, (i >> 8) as u8, i as u8]);
    let ip = if ipv6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0x20, 0, 0, 0, i as u16 + 2))
    } else {
        IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 19, 0, 2)) + i as u32))
    };
    (ip, mac)
}

fn prepare(cfg: &BenchConfig) -> Result<Setup, BenchError> {
    let mut ports = vec![PortInfo::new("mem0", RX_MAC, 0), PortInfo::new("mem1", TX_MAC, 1)];
    if cfg.vlan {
        ports.push(PortInfo { vlan: Some(IN_VLAN), ..PortInfo::new("mem0.10", RX_MAC, 0) });
        ports.push(PortInfo { vlan: Some(OUT_VLAN), ..PortInfo::new("mem1.20", TX_MAC, 1) });
    }
    // Routes leave on mem1, or its sub-interface.
    let out: u16 = if cfg.vlan { 3 } else { 1 };
    let mut ctl = FibControl::new(crate::fib::DEFAULT_NEXT_HOPS);
    let mut rng = Rng::new(cfg.seed ^ 0x5eed);
    // Destinations: one per flow, each inside a randomly chosen installed prefix.
    let mut dsts: Vec<IpAddr> = Vec::new();
    let routes = match &cfg.routes {
        RouteSource::Synthetic(n) => {
            for g in 0..SYNTH_GATEWAYS {
                let (ip, mac) = gateway(g, cfg.ipv6);
                ctl.set_neighbour(ip, out, mac)?;
            }
            if cfg.ipv6 {
                let table = synth::v6_prefixes(*n, cfg.seed);
                for (i, &(p, l)) in table.iter().enumerate() {
                    let (gw, _) = gateway(i % SYNTH_GATEWAYS, true);
                    ctl.add_route(IpAddr::V6(Ipv6Addr::from(p)), l, gw, out)?;
                }
                for _ in 0..cfg.flows {
                    let (p, l) = table[rng.below(table.len() as u64) as usize];
                    dsts.push(IpAddr::V6(Ipv6Addr::from(synth::v6_inside(p, l, &mut rng))));
                }
            } else {
                let table = synth::v4_prefixes(*n, cfg.seed);
                for (i, &(p, l)) in table.iter().enumerate() {
                    let (gw, _) = gateway(i % SYNTH_GATEWAYS, false);
                    ctl.add_route(IpAddr::V4(Ipv4Addr::from(p)), l, gw, out)?;
                }
                for _ in 0..cfg.flows {
                    let (p, l) = table[rng.below(table.len() as u64) as usize];
                    dsts.push(IpAddr::V4(Ipv4Addr::from(synth::v4_inside(p, l, &mut rng))));
                }
            }
            *n
        }
        RouteSource::File(path) => {
            let table = config::routefile::load(path)?;
            let mut gateways = std::collections::HashMap::new();
            for r in &table {
                // The bench has one output port: `dev` names nothing it could use.
                let Some(next_hop) = r.next_hop else {
                    return Err(BenchError::Invalid(format!("{}:{}: directly connected routes (`dev` without a next hop) are not supported by bench", path.display(), r.line)));
                };
                let next = gateways.len();
                let g = *gateways.entry(next_hop).or_insert(next);
                let mac = MacAddr([0x02, 0, 0, 0x01, (g >> 8) as u8, g as u8]);
                ctl.set_neighbour(next_hop, out, mac)?;
                ctl.add_route(r.prefix.addr, r.prefix.len, next_hop, out)?;
            }
            let family: Vec<_> = table.iter().filter(|r| r.prefix.addr.is_ipv6() == cfg.ipv6).collect();
            if family.is_empty() && cfg.pcap.is_none() {
                let fam = if cfg.ipv6 { "IPv6" } else { "IPv4" };
                return Err(BenchError::Invalid(format!("{}: no {fam} routes to send flows to", path.display())));
            }
            for _ in 0..cfg.flows.min(if family.is_empty() { 0 } else { usize::MAX }) {
                let r = family[rng.below(family.len() as u64) as usize];
                dsts.push(match r.prefix.addr {
                    IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(synth::v4_inside(a.into(), r.prefix.len, &mut rng))),
                    IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(synth::v6_inside(a.into(), r.prefix.len, &mut rng))),
                });
            }
            table.len()
        }
    };
    let (frames, ports) = match &cfg.pcap {
        Some(path) => pcap_frames(path, ports)?,
        None => (flow_frames(cfg, &dsts)?, ports),
    };
    Ok(Setup { ctl, ports, frames, routes })
}

/// Frames from a capture; the input port takes the first unicast destination MAC found so
/// that the capture's frames are addressed to it.
fn pcap_frames(path: &std::path::Path, mut ports: Vec<PortInfo>) -> Result<(Vec<Vec<u8>>, Vec<PortInfo>), BenchError> {
    let frames: Vec<Vec<u8>> = io::pcap::read_file(path)?.into_iter().map(|r| r.data).collect();
    if frames.is_empty() {
        return Err(BenchError::Invalid(format!("{}: capture holds no frames", path.display())));
    }
    if let Some(mac) = frames.iter().filter(|f| f.len() >= 6).map(|f| MacAddr(f[..6].try_into().unwrap())).find(|m| !m.is_multicast()) {
        ports[0].mac = mac;
    }
    Ok((frames, ports))
}

fn flow_frames(cfg: &BenchConfig, dsts: &[IpAddr]) -> Result<Vec<Vec<u8>>, BenchError> {
    let min = if cfg.ipv6 { 62 } else { 60 };
    if cfg.frame_size < min || cfg.frame_size > 1514 {
        return Err(BenchError::Invalid(format!(
            "frame size {} out of range: {min}..=1514 bytes (Ethernet frame without FCS)",
            cfg.frame_size
        )));
    }
    let mut frames = Vec::with_capacity(dsts.len());
    for (i, &dst) in dsts.iter().enumerate() {
        let (src, src_port) = synth::flow_source(i, cfg.ipv6);
        let flow = UdpFlow { src_mac: SENDER_MAC, dst_mac: RX_MAC, src, dst, src_port, dst_port: 2000, ttl: 64 };
        let mut buf = vec![0u8; 2048];
        let built = if cfg.vlan { udp_frame_vlan(&flow, IN_VLAN, cfg.frame_size + 4, &mut buf) } else { udp_frame(&flow, cfg.frame_size, &mut buf) };
        let len = built.map_err(|e| BenchError::Invalid(format!("building flow {i}: {e}")))?;
        buf.truncate(len);
        frames.push(buf);
    }
    Ok(frames)
}

fn tx_packets(w: &Worker<ReplayRx, CountingTx, CountingTx>) -> u64 {
    w.tx.iter().map(|t| t.stats().tx_packets).sum()
}

/// Runs the bench; `on_run(i, mpps)` is called after each measured run.
pub fn run(cfg: &BenchConfig, mut on_run: impl FnMut(usize, f64)) -> Result<BenchResult, BenchError> {
    if cfg.runs == 0 || cfg.seconds <= 0.0 || cfg.flows == 0 {
        return Err(BenchError::Invalid("runs, seconds and flows must be positive".into()));
    }
    if cfg.workers > 1 {
        return run_workers(cfg, on_run);
    }
    let started = Instant::now();
    let setup = prepare(cfg)?;
    if let Some(cpu) = cfg.cpu {
        io::affinity::pin_current_thread(cpu)
            .map_err(|e| BenchError::Invalid(format!("cannot pin to cpu {cpu}: {e}")))?;
    }
    let rx = ReplayRx::new(0, &setup.frames);
    let tx = vec![CountingTx::new(), CountingTx::new()];
    let pool = FramePool::new(1024);
    let mut worker = Worker::new(setup.ctl.fib(), &setup.ports, vec![rx], tx, CountingTx::new(), pool, cfg.batch);
    let mut fw_result = match &cfg.firewall {
        Some(f) => Some(setup_firewall(&mut worker, f, &setup.frames)?),
        None => None,
    };
    let flows = setup.frames.len();
    drop(setup.frames);
    let setup_time = started.elapsed();

    if !cfg.warmup.is_zero() {
        measure(&mut worker, cfg.warmup);
    }
    let mut runs_mpps = Vec::with_capacity(cfg.runs);
    let mut ns = Vec::with_capacity(cfg.runs);
    let mut total = Counts::default();
    for i in 0..cfg.runs {
        let before = worker.counts();
        let (forwarded, elapsed) = measure(&mut worker, Duration::from_secs_f64(cfg.seconds));
        let delta = worker.counts().since(&before);
        total.add(&delta);
        let mpps = forwarded as f64 / elapsed.as_secs_f64() / 1e6;
        ns.push(elapsed.as_nanos() as f64 / delta.rx.max(1) as f64);
        runs_mpps.push(mpps);
        on_run(i, mpps);
    }
    Ok(BenchResult {
        firewall: fw_result.take().map(|mut r| {
            if let Some(stats) = worker.firewall_stats() {
                r.state_counters = stats.states().to_vec();
                r.matched = stats.rules().snapshot().into_iter().filter(|s| s.packets > 0 || s.states > 0).collect();
            }
            if let Some(t) = worker.nat_table_mut() {
                r.nat_sessions = t.len();
                r.nat_table_bytes = t.memory_bytes();
            }
            r
        }),
        ..BenchResult::measured(runs_mpps, &ns, total, setup.routes, vec![flows], cfg.frame_size, setup_time)
    })
}

impl BenchResult {
    /// A result from per-run rates and ns/packet figures (medians taken here), no firewall.
    fn measured(runs_mpps: Vec<f64>, ns: &[f64], counts: Counts, routes: usize, flows_per_worker: Vec<usize>, frame_size: usize, setup: Duration) -> Self {
        BenchResult {
            mpps: median(&runs_mpps),
            ns_per_packet: median(ns),
            runs_mpps,
            counts,
            routes,
            flows: flows_per_worker.iter().sum(),
            frame_size,
            setup,
            firewall: None,
            flows_per_worker,
        }
    }
}

/// What one worker measured in one run.
struct WorkerRun {
    forwarded: u64,
    elapsed: Duration,
    counts: Counts,
}

/// The multi-worker bench: each worker thread builds its own ports, pool and firewall over
/// its share of the flows, all read the one FIB; a barrier starts every run on all workers
/// at once and the run's rate is everything the workers forwarded over the longest of their
/// measured intervals.
fn run_workers(cfg: &BenchConfig, mut on_run: impl FnMut(usize, f64)) -> Result<BenchResult, BenchError> {
    use std::sync::{Arc, Barrier, mpsc};
    let started = Instant::now();
    let setup = prepare(cfg)?;
    let n = cfg.workers;
    let rss = io::rss::Toeplitz::new(&io::rss::MICROSOFT_KEY);
    let mut shares: Vec<Vec<Vec<u8>>> = vec![Vec::new(); n];
    for frame in setup.frames {
        let q = rss.hash_frame(&frame).map_or(0, |h| io::rss::queue_for(h, n as u16) as usize);
        shares[q].push(frame);
    }
    if shares.iter().any(|s| s.is_empty()) {
        return Err(BenchError::Invalid(format!("{} flows do not spread over {n} workers: give more --flows", cfg.flows)));
    }
    let flows_per_worker: Vec<usize> = shares.iter().map(|s| s.len()).collect();
    let fib = setup.ctl.fib();
    let barrier = Arc::new(Barrier::new(n + 1));
    let (tx_res, rx_res) = mpsc::channel::<(usize, Result<WorkerRun, String>)>();
    let mut handles = Vec::new();
    for (i, frames) in shares.into_iter().enumerate() {
        let (fib, ports, barrier, tx_res, cfg) = (Arc::clone(&fib), setup.ports.clone(), Arc::clone(&barrier), tx_res.clone(), cfg.clone());
        handles.push(std::thread::spawn(move || {
            let cpus = io::affinity::available_cpus().max(1);
            let _ = io::affinity::pin_current_thread(i % cpus);
            let rx = ReplayRx::new(0, &frames);
            let tx = vec![CountingTx::new(), CountingTx::new()];
            let mut worker = Worker::new(fib, &ports, vec![rx], tx, CountingTx::new(), FramePool::new(1024), cfg.batch);
            // A worker that cannot set up still meets every barrier, reporting its error there,
            // so the coordinator never waits for it forever.
            let failed = match &cfg.firewall {
                Some(f) => setup_firewall(&mut worker, f, &frames).err().map(|e| e.to_string()),
                None => None,
            };
            drop(frames);
            if failed.is_none() && !cfg.warmup.is_zero() {
                measure(&mut worker, cfg.warmup);
            }
            for _ in 0..cfg.runs {
                barrier.wait();
                if let Some(e) = &failed {
                    let _ = tx_res.send((i, Err(e.clone())));
                    continue;
                }
                let before = worker.counts();
                let (forwarded, elapsed) = measure(&mut worker, Duration::from_secs_f64(cfg.seconds));
                let counts = worker.counts().since(&before);
                let _ = tx_res.send((i, Ok(WorkerRun { forwarded, elapsed, counts })));
            }
        }));
    }
    drop(tx_res);
    let setup_time = started.elapsed();
    let (mut runs_mpps, mut ns, mut total) = (Vec::new(), Vec::new(), Counts::default());
    for r in 0..cfg.runs {
        barrier.wait();
        let (mut forwarded, mut rx, mut longest) = (0u64, 0u64, Duration::ZERO);
        for _ in 0..n {
            let (i, res) = rx_res.recv().map_err(|_| BenchError::Invalid("a bench worker stopped".into()))?;
            let run = res.map_err(|e| BenchError::Invalid(format!("worker {i}: {e}")))?;
            forwarded += run.forwarded;
            rx += run.counts.rx;
            longest = longest.max(run.elapsed);
            total.add(&run.counts);
        }
        let mpps = forwarded as f64 / longest.as_secs_f64() / 1e6;
        ns.push(longest.as_nanos() as f64 / rx.max(1) as f64);
        runs_mpps.push(mpps);
        on_run(r, mpps);
    }
    for h in handles {
        let _ = h.join();
    }
    Ok(BenchResult::measured(runs_mpps, &ns, total, setup.routes, flows_per_worker, cfg.frame_size, setup_time))
}

/// The rule text of a firewall bench: `rules` distinct TCP rules the bench's UDP traffic never
/// matches (or, with `realistic`, that many generated rules none of `keys` matches),
/// optionally a table rule whose prefixes (in 11.0.0.0/8) do not cover the bench's sources
/// (198.18.10.0/24, 2001:2:0:10::/64), then a final `pass all`, keeping state when `states`
/// is given (with a state limit holding the prefilled states and the bench's flows).
pub fn bench_rules(f: &BenchFirewall, keys: &[PacketKey]) -> String {
    use std::fmt::Write;
    let flows = keys.len();
    let mut t = String::new();
    if f.states.is_some() || f.nat.is_some() {
        let k = f.states.unwrap_or(0).max(f.nat.unwrap_or(0));
        let _ = writeln!(t, "set limit states {}", (k + flows + 1024).min(fw::state::MAX_LIMIT));
    }
    if f.nat.is_some() {
        t.push_str("nat on mem1 from any to any -> 192.0.2.1 port 1024:65535\n");
    }
    if let Some(m) = f.table_size {
        t.push_str("table <t> const {");
        for i in 0..m.min(1 << 20) {
            let _ = write!(t, " {}/28", Ipv4Addr::from(0x0b00_0000u32 + (i as u32) * 16));
        }
        t.push_str(" }\nblock in quick from <t>\n");
    }
    if f.realistic {
        t.push_str(&realistic_rules(f.rules, keys));
    } else {
        for i in 0..f.rules {
            let _ = writeln!(t, "block in quick proto tcp from 10.{}.{}.{} to 10.200.0.1 port 22", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        }
    }
    let log = if f.log.is_some() { "log " } else { "" };
    let _ = writeln!(t, "pass {log}all {}", if f.states.is_some() { "keep state" } else { "no state" });
    t
}

/// `n` rules of a generated realistic set (tables included) that match none of `keys`, in
/// on port 0 or out on port 1 (the bench's interfaces are the generator's first two).
fn realistic_rules(n: usize, keys: &[PacketKey]) -> String {
    let passes: Vec<PacketKey> = keys
        .iter()
        .flat_map(|k| [PacketKey { dir: Dir::In, iface: 0, ..*k }, PacketKey { dir: Dir::Out, iface: 1, ..*k }])
        .collect();
    let mut generated = 2 * n + 16;
    loop {
        let text = fw::testgen::ruleset(1, generated);
        let rs = fw::rules::parse(&text, std::path::Path::new("gen.conf"), &fw::testgen::iface_index).expect("generated rules parse");
        let keep: std::collections::HashSet<usize> = rs
            .rules
            .iter()
            .filter(|r| !passes.iter().any(|k| fw::reference::rule_matches(&rs, r, k)))
            .map(|r| r.line)
            .take(n)
            .collect();
        if keep.len() == n {
            let mut out = String::new();
            for (i, line) in text.lines().enumerate() {
                if line.starts_with("table") || keep.contains(&(i + 1)) {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            return out;
        }
        generated *= 2;
    }
}

/// The firewall's view of the bench's frames (Ethernet, optionally 802.1Q, IPv4 or IPv6, UDP).
fn frame_keys(frames: &[Vec<u8>]) -> Vec<PacketKey> {
    frames
        .iter()
        .filter_map(|f| {
            let mut at = 12;
            if f.get(at..at + 2)? == [0x81, 0x00] {
                at += 4;
            }
            let ethertype = f.get(at..at + 2)?;
            let ip = at + 2;
            let (af, src, dst, l4) = if ethertype == [0x08, 0x00] {
                let a = |o: usize| f.get(ip + o..ip + o + 4).map(|b| u128::from(u32::from_be_bytes(b.try_into().expect("4 bytes"))));
                (Af::Inet, a(12)?, a(16)?, ip + usize::from(f.get(ip)? & 0x0f) * 4)
            } else {
                let a = |o: usize| f.get(ip + o..ip + o + 16).map(|b| u128::from_be_bytes(b.try_into().expect("16 bytes")));
                (Af::Inet6, a(8)?, a(24)?, ip + 40)
            };
            let port = |o: usize| f.get(l4 + o..l4 + o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
            Some(PacketKey { af, src, dst, proto: fw::packet::proto::UDP, src_port: port(0)?, dst_port: port(2)?, len: 46, ..PacketKey::ZERO })
        })
        .collect()
}

/// Compiles the bench's rules, gives the worker its firewall and prefills the state table.
fn setup_firewall(worker: &mut Worker<ReplayRx, CountingTx, CountingTx>, f: &BenchFirewall, frames: &[Vec<u8>]) -> Result<BenchFirewallResult, BenchError> {
    if f.table_size.is_some_and(|m| m > 1 << 20) || f.rules > 1 << 24 {
        return Err(BenchError::Invalid("at most 2^24 rules and 2^20 table entries".into()));
    }
    let text = bench_rules(f, &frame_keys(frames));
    let t0 = Instant::now();
    // The bench's ports (mem0, mem1) and the generated sets' interfaces (lr-g0.., the same indices).
    let iface = |n: &str| if n == "mem1" { Some(1) } else { fw::testgen::iface_index(n) };
    let rules = CompiledRules::parse(&text, std::path::Path::new("bench.conf"), &iface).map_err(BenchError::Invalid)?;
    let compile = t0.elapsed();
    let (n, classifier_bytes) = (rules.rule_count(), rules.classifier_bytes());
    let mut firewall = Firewall::new(RulesSlot::new(Arc::new(rules)), 1);
    let log = f.log.map(|rate| drain_log(&mut firewall, rate));
    worker.set_firewall(firewall);
    let fw = worker.firewall_mut().expect("just set");
    let t1 = Instant::now();
    let k = f.states.unwrap_or(0);
    for i in 0..k {
        // UDP flows 172.16.0.0/12 port i -> 203.0.113.1:9, distinct for i < 2^36.
        let key = PacketKey {
            af: Af::Inet,
            dir: Dir::In,
            iface: 0,
            proto: fw::packet::proto::UDP,
            src: u128::from(0xac10_0000u32 + (i >> 16) as u32),
            dst: u128::from(u32::from(Ipv4Addr::new(203, 0, 113, 1))),
            src_port: i as u16,
            dst_port: 9,
            tcp_flags: 0,
            len: 46,
            icmp_id: 0,
            ip_opts: false,
        };
        fw.insert_state(&key, n - 1).map_err(|e| BenchError::Invalid(format!("prefilling state {i}: {e}")))?;
    }
    let nat_prefilled = f.nat.unwrap_or(0);
    prefill_nat(worker, nat_prefilled)?;
    let fw = worker.firewall_mut().expect("just set");
    Ok(BenchFirewallResult {
        rules: n,
        compile,
        classifier_bytes,
        state_limit: fw.state_table().limit(),
        state_table_bytes: fw.state_table().memory_bytes(),
        prefilled_states: k,
        prefill: t1.elapsed(),
        state_counters: Vec::new(),
        matched: Vec::new(),
        nat_prefilled,
        nat_sessions: 0,
        nat_table_bytes: 0,
        log,
    })
}

/// Creates `k` translations of other flows (UDP 172.16.0.0/12 -> 100.64.0.0/10 port 9, each
/// to 192.0.2.1 and a port of its own towards its destination), as `nat` would have.
fn prefill_nat(worker: &mut Worker<ReplayRx, CountingTx, CountingTx>, k: usize) -> Result<(), BenchError> {
    use fw::nat::table::{NatKey, Session};
    let Some(table) = worker.nat_table_mut() else { return Ok(()) };
    table.set_limit(usize::MAX);
    table.reserve(k);
    let ext = u32::from(Ipv4Addr::new(192, 0, 2, 1));
    for i in 0..k {
        let (src, dst) = (0xac10_0000u32 + (i >> 16) as u32, 0x6440_0000u32 + (i >> 16) as u32);
        let (sport, port) = (i as u16, 1024 + (i % 64000) as u16);
        let out_key = NatKey { src, dst, sport, dport: 9, proto: fw::packet::proto::UDP };
        let in_key = NatKey { src: dst, dst: ext, sport: 9, dport: port, proto: fw::packet::proto::UDP };
        let s = Session { iface: 1, kind: fw::nat::NatKind::Nat, rule: 0, out_key, out_to: (ext, port), in_key, in_to: (src, sport), last: 0, phase: Default::default() };
        table.insert(s).map_err(|e| BenchError::Invalid(format!("prefilling translation {i}: {e:?}")))?;
    }
    Ok(())
}

/// Gives `fw` a log ring of `rate` records a second (0: no limit) and a thread that drains
/// it every millisecond until the firewall is gone; the counters it keeps: logged, refused
/// by the rate limit, dropped for a full ring.
fn drain_log(fw: &mut Firewall, rate: u64) -> Arc<[std::sync::atomic::AtomicU64; 3]> {
    use std::sync::atomic::Ordering::Relaxed;
    let (sink, mut ring) = crate::filter::log::log_ring(1024, crate::filter::log::DEFAULT_LOG_SNAP, if rate == 0 { u64::MAX / 4 } else { rate });
    fw.set_log(sink);
    let counts: Arc<[std::sync::atomic::AtomicU64; 3]> = Arc::new(Default::default());
    let c = Arc::clone(&counts);
    std::thread::spawn(move || {
        loop {
            while ring.consumer.pop_with(|r| {
                std::hint::black_box(r.len);
            }) {}
            c[0].store(ring.stats.logged.load(Relaxed), Relaxed);
            c[1].store(ring.stats.rate_limited.load(Relaxed), Relaxed);
            c[2].store(ring.consumer.dropped(), Relaxed);
            if !ring.consumer.has_producer() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    counts
}

/// Polls for `duration`; returns packets counted at the tx ports and the exact time taken.
fn measure(worker: &mut Worker<ReplayRx, CountingTx, CountingTx>, duration: Duration) -> (u64, Duration) {
    let before = tx_packets(worker);
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            worker.poll();
        }
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return (tx_packets(worker) - before, elapsed);
        }
    }
}

/// Median of a non-empty list (mean of the two middle values for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 { f64::NAN } else if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn small_bench_forwards_every_flow() {
        let cfg = BenchConfig { routes: RouteSource::Synthetic(5000), flows: 100, runs: 2, seconds: 0.05, ..Default::default() };
        let res = run(&cfg, |_, _| {}).unwrap();
        assert_eq!(res.runs_mpps.len(), 2);
        assert!(res.mpps > 0.0);
        assert!(res.counts.rx > 0);
        assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
    }

    #[test]
    fn small_bench_ipv6_forwards_every_flow() {
        let cfg = BenchConfig { routes: RouteSource::Synthetic(5000), flows: 100, runs: 1, seconds: 0.05, ipv6: true, frame_size: 62, ..Default::default() };
        let res = run(&cfg, |_, _| {}).unwrap();
        assert!(res.counts.rx > 0);
        assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
    }

    #[test]
    fn nat_bench_translates_every_flow() {
        let fw = BenchFirewall { states: Some(0), nat: Some(500), ..Default::default() };
        let cfg = BenchConfig { routes: RouteSource::Synthetic(5000), flows: 100, runs: 1, seconds: 0.05, firewall: Some(fw), ..Default::default() };
        let res = run(&cfg, |_, _| {}).unwrap();
        assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
        let f = res.firewall.unwrap();
        assert_eq!((f.nat_prefilled, f.nat_sessions), (500, 600), "prefilled plus one per flow");
        assert!(f.nat_table_bytes > 600 * 64);
    }

    #[test]
    fn firewall_bench_passes_every_flow_and_counts() {
        let fw = BenchFirewall { rules: 50, table_size: Some(100), states: Some(300), realistic: false, nat: None, log: None };
        let cfg = BenchConfig { routes: RouteSource::Synthetic(5000), flows: 100, runs: 1, seconds: 0.05, firewall: Some(fw), ..Default::default() };
        let res = run(&cfg, |_, _| {}).unwrap();
        assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
        let f = res.firewall.unwrap();
        assert_eq!((f.rules, f.prefilled_states), (52, 300));
        let states: std::collections::HashMap<_, _> = f.state_counters.into_iter().collect();
        assert_eq!(states["inserts"], 400, "prefilled plus one per flow");
        assert_eq!(states["in_use"], 400);
        // Only the final `pass all keep state` (index 51) matched; it created every state:
        // two of pf's per forwarded flow (its in and out states), prefilled ones included.
        assert_eq!(f.matched.len(), 1, "{:?}", f.matched);
        assert_eq!((f.matched[0].rule, f.matched[0].states), (Some(51), 800));
        assert!(f.matched[0].packets >= res.counts.rx, "warm-up included: {:?}", f.matched[0]);
        assert_eq!(f.matched[0].bytes, 46 * f.matched[0].packets);
    }

    #[test]
    fn bench_rules_text() {
        let t = bench_rules(&BenchFirewall { rules: 2, table_size: Some(2), states: None, realistic: false, nat: None, log: None }, &[PacketKey::ZERO; 10]);
        assert_eq!(
            t,
            "table <t> const { 11.0.0.0/28 11.0.0.16/28 }\nblock in quick from <t>\n\
             block in quick proto tcp from 10.0.0.0 to 10.200.0.1 port 22\n\
             block in quick proto tcp from 10.0.0.1 to 10.200.0.1 port 22\npass all no state\n"
        );
    }

    #[test]
    fn two_workers_share_the_flows_and_forward_everything() {
        let cfg = BenchConfig { routes: RouteSource::Synthetic(5000), flows: 400, runs: 2, seconds: 0.05, workers: 2, ..Default::default() };
        let res = run(&cfg, |_, _| {}).unwrap();
        assert_eq!(res.flows_per_worker.len(), 2);
        assert!(res.flows_per_worker.iter().all(|&f| f > 50), "{:?}", res.flows_per_worker);
        assert_eq!(res.flows_per_worker.iter().sum::<usize>(), 400);
        assert!(res.counts.rx > 0);
        assert_eq!(res.counts.forwarded, res.counts.rx, "drops: {:?}", res.counts);
    }

    #[test]
    fn bad_frame_size_is_rejected() {
        let cfg = BenchConfig { routes: RouteSource::Synthetic(10), frame_size: 59, ..Default::default() };
        let err = run(&cfg, |_, _| {}).unwrap_err().to_string();
        assert!(err.contains("frame size 59"), "{err}");
    }
}
