//! `linerate bench`: command-line front of the `bench` crate.

use std::path::PathBuf;

use ::bench::interference::{Interference, NOTABLE};
use ::bench::{BenchConfig, BenchFirewall, BenchFirewallResult, BenchResult, RouteSource};
use anyhow::{Result, bail};

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Synthetic table of N prefixes with an Internet-like length mix
    /// [default: 1000000 for IPv4, 200000 for IPv6].
    #[arg(long, conflicts_with = "routes_file")]
    routes: Option<usize>,
    /// Route file: one `PREFIX/LEN NEXTHOP` per line, `#` comments.
    #[arg(long, value_name = "FILE")]
    routes_file: Option<PathBuf>,
    /// Number of UDP flows, each to a destination in a different random prefix.
    #[arg(long, default_value_t = 2000)]
    flows: usize,
    /// Ethernet frame size without FCS (60 = minimum-size 64-byte frame on the wire).
    #[arg(long, value_name = "BYTES")]
    frame_size: Option<usize>,
    /// IPv6 flows and table instead of IPv4.
    #[arg(long)]
    ipv6: bool,
    /// 802.1Q: frames arrive tagged (VLAN 10) and leave tagged (VLAN 20), through
    /// sub-interfaces of both ports; --frame-size stays the untagged size.
    #[arg(long)]
    vlan: bool,
    /// Replay this capture instead of generated flows.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Measured runs; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seconds per run.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Packets per batch (1-256).
    #[arg(long, default_value_t = dataplane::worker::DEFAULT_BATCH)]
    batch: usize,
    /// CPU to pin the worker to [default: the last CPU].
    #[arg(long)]
    cpu: Option<usize>,
    /// Workers, one per CPU (pinned to CPUs 0..N-1; --cpu is then ignored); flows are spread
    /// over them by the Toeplitz RSS hash of each frame. The figure is their total.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Unmeasured warm-up before the first run, in milliseconds (0 for instruction profiling).
    #[arg(long, default_value_t = 200, hide = true)]
    warmup_ms: u64,
    /// Firewall: N distinct rules the traffic never matches, then `pass all no state`.
    #[arg(long, value_name = "N")]
    rules: Option<usize>,
    /// Firewall: the shape of the --rules: `uniform` (distinct TCP host rules) or
    /// `realistic` (a generated mix of prefixes, negations, lists, tables, port ranges, in
    /// and out, IPv4 and IPv6, quick or not; those that would match the traffic left out).
    #[arg(long, value_enum, default_value_t = RuleShape::Uniform)]
    rule_shape: RuleShape,
    /// Firewall: a `block in quick from <t>` rule whose table holds M prefixes that do not
    /// cover the traffic's sources (before the final pass).
    #[arg(long, value_name = "M")]
    table_size: Option<usize>,
    /// Firewall: the final rule becomes `pass all keep state`, and K states of other flows are
    /// created before measuring.
    #[arg(long, value_name = "K")]
    states: Option<usize>,
    /// Firewall: `nat on` the output port to 192.0.2.1 (ports 1024:65535) before the rules;
    /// with `--nat-sessions K`, K translations of other flows are created before measuring.
    #[arg(long)]
    nat: bool,
    #[arg(long, value_name = "K", requires = "nat")]
    nat_sessions: Option<usize>,
    /// Firewall: the final rule gets `log`, at most RATE records a second (0: no limit;
    /// `[log] rate`'s default is 10000); a thread drains the log ring.
    #[arg(long, value_name = "RATE")]
    log: Option<u64>,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
}

/// `--rule-shape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuleShape {
    Uniform,
    Realistic,
}

pub fn main(args: BenchArgs) -> Result<()> {
    let cfg = bench_config(&args)?;
    announce(&cfg);
    let res = ::bench::run(&cfg, |i, mpps, other| {
        eprintln!("  run {}: {mpps:.2} Mpps{}", i + 1, other_work(&other))
    })?;
    print_figures(&res);
    warn_interference(&cfg, &res);
    let firewall = res.firewall.as_ref().map(|f| print_firewall(&args, &cfg, f));
    if args.json {
        println!("{}", result_json(&cfg, &res, firewall));
    }
    Ok(())
}

/// The bench's settings from the command line (defaults filled in, ranges checked).
fn bench_config(args: &BenchArgs) -> Result<BenchConfig> {
    let routes = match (&args.routes_file, args.routes) {
        (Some(path), _) => RouteSource::File(path.clone()),
        (None, Some(n)) => RouteSource::Synthetic(n),
        (None, None) => RouteSource::Synthetic(if args.ipv6 { 200_000 } else { 1_000_000 }),
    };
    if args.workers == 0 || args.workers > 256 {
        bail!("--workers {} out of range 1-256", args.workers);
    }
    if args.batch == 0 || args.batch > 256 {
        bail!("--batch {} out of range 1-256", args.batch);
    }
    let cpu = args.cpu.unwrap_or_else(|| io::affinity::available_cpus().saturating_sub(1));
    Ok(BenchConfig {
        routes,
        flows: args.flows,
        frame_size: args.frame_size.unwrap_or(if args.ipv6 { 62 } else { 60 }),
        ipv6: args.ipv6,
        vlan: args.vlan,
        pcap: args.pcap.clone(),
        runs: args.runs,
        seconds: args.seconds,
        batch: args.batch,
        cpu: Some(cpu),
        workers: args.workers,
        warmup: std::time::Duration::from_millis(args.warmup_ms),
        firewall: bench_firewall(args),
        ..BenchConfig::default()
    })
}

/// The firewall's rule set, if any of the firewall options is given.
fn bench_firewall(args: &BenchArgs) -> Option<BenchFirewall> {
    (args.rules.is_some()
        || args.table_size.is_some()
        || args.states.is_some()
        || args.nat
        || args.log.is_some())
    .then(|| BenchFirewall {
        rules: args.rules.unwrap_or(0),
        table_size: args.table_size,
        states: args.states,
        realistic: args.rule_shape == RuleShape::Realistic,
        nat: args.nat.then_some(args.nat_sessions.unwrap_or(0)),
        log: args.log,
    })
}

/// What is about to be measured, on stderr.
fn announce(cfg: &BenchConfig) {
    let family = if cfg.ipv6 { "IPv6" } else { "IPv4" };
    let source = match (&cfg.pcap, &cfg.routes) {
        (Some(p), _) => format!("capture {}", p.display()),
        (None, RouteSource::Synthetic(n)) => {
            format!("{} flows, synthetic {n}-route table", cfg.flows)
        }
        (None, RouteSource::File(p)) => format!("{} flows, routes from {}", cfg.flows, p.display()),
    };
    let cpu = cfg.cpu.unwrap_or(0);
    eprintln!(
        "bench: {family}, {source}, {}-byte frames, batch {}, {}, {} runs x {} s",
        cfg.frame_size,
        cfg.batch,
        if cfg.workers > 1 {
            format!("{} workers pinned to cpus 0-{}", cfg.workers, cfg.workers - 1)
        } else {
            format!("worker pinned to cpu {cpu}")
        },
        cfg.runs,
        cfg.seconds
    );
}

/// The rate, the runs and the packet counters.
fn print_figures(res: &BenchResult) {
    println!(
        "forwarded: {:.2} Mpps (median of {} runs), {:.1} ns/packet",
        res.mpps,
        res.runs_mpps.len(),
        res.ns_per_packet
    );
    println!(
        "runs (Mpps): {}",
        res.runs_mpps.iter().map(|m| format!("{m:.2}")).collect::<Vec<_>>().join(" ")
    );
    println!(
        "setup: {:.2} s for {} routes, {} flows",
        res.setup.as_secs_f64(),
        res.routes,
        res.flows
    );
    let c = &res.counts;
    println!(
        "packets: rx {} forwarded {} local {} dropped {}",
        c.rx,
        c.forwarded,
        c.local,
        c.dropped()
    );
    for (reason, n) in c.drops_by_reason().filter(|&(_, n)| n > 0) {
        println!("  drop {:<20} {n}", reason.name());
    }
}

/// What else ran on the run's CPU, as a run's line ends: empty where neither clock was read.
fn other_work(i: &Interference) -> String {
    let pct = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.1}%", v * 100.0));
    if i.waited.is_none() && i.stolen.is_none() {
        return String::new();
    }
    format!(" (of its CPU: other tasks {}, steal {})", pct(i.waited), pct(i.stolen))
}

/// A warning for each run whose CPU other work took a notable share of: its figure is low by
/// about that share, and nothing else in the output says so.
fn warn_interference(cfg: &BenchConfig, res: &BenchResult) {
    let cpus = if cfg.workers > 1 {
        format!("cpus 0-{}", cfg.workers - 1)
    } else {
        format!("cpu {}", cfg.cpu.unwrap_or(0))
    };
    for (k, i) in res.runs_interference.iter().enumerate().filter(|(_, i)| i.lost() >= NOTABLE) {
        eprintln!(
            "bench: warning: run {}: other work took {:.0}% of {cpus} (waited {:.0}%, stolen {:.0}%): its figure is low by about that much (another benchmark pinned there? a busy host?)",
            k + 1,
            i.lost() * 100.0,
            i.waited.unwrap_or(0.0) * 100.0,
            i.stolen.unwrap_or(0.0) * 100.0
        );
    }
}

/// Prints the firewall's figures; returns them as the JSON output's `firewall` object.
fn print_firewall(
    args: &BenchArgs,
    cfg: &BenchConfig,
    f: &BenchFirewallResult,
) -> serde_json::Value {
    println!(
        "firewall: {} rules compiled in {:.2} s ({:.1} MiB), {} states prefilled in {:.2} s (limit {}, table {:.1} MiB)",
        f.rules,
        f.compile.as_secs_f64(),
        f.classifier_bytes as f64 / (1 << 20) as f64,
        f.prefilled_states,
        f.prefill.as_secs_f64(),
        f.state_limit,
        f.state_table_bytes as f64 / (1 << 20) as f64
    );
    if cfg.firewall.as_ref().is_some_and(|f| f.nat.is_some()) {
        println!(
            "nat: {} translations prefilled, {} in use at the end, table {:.1} MiB ({:.0} bytes per translation)",
            f.nat_prefilled,
            f.nat_sessions,
            f.nat_table_bytes as f64 / (1 << 20) as f64,
            f.nat_table_bytes as f64 / f.nat_sessions.max(1) as f64
        );
    }
    if let Some(l) = &f.log {
        let v = |i: usize| l[i].load(std::sync::atomic::Ordering::Relaxed);
        println!("log: {} records, rate limit refused {}, ring full {}", v(0), v(1), v(2));
    }
    let vc = &f.verdict_cache;
    if vc.hits + vc.misses > 0 {
        println!(
            "verdict cache: {} hits ({} by class), {} misses ({:.1}% hits)",
            vc.hits,
            vc.class_hits,
            vc.misses,
            100.0 * vc.hits as f64 / (vc.hits + vc.misses) as f64
        );
    }
    let states: serde_json::Map<String, serde_json::Value> =
        f.state_counters.iter().map(|&(n, v)| (n.to_owned(), v.into())).collect();
    let matched: Vec<serde_json::Value> = f
        .matched
        .iter()
        .map(|r| serde_json::json!({"rule": r.rule, "line": r.line, "packets": r.packets, "bytes": r.bytes, "states": r.states}))
        .collect();
    serde_json::json!({
        "rules": f.rules,
        "rule_shape": format!("{:?}", args.rule_shape).to_lowercase(),
        "table_size": args.table_size,
        "compile_s": f.compile.as_secs_f64(),
        "classifier_bytes": f.classifier_bytes,
        "state_limit": f.state_limit,
        "state_table_bytes": f.state_table_bytes,
        "prefilled_states": f.prefilled_states,
        "prefill_s": f.prefill.as_secs_f64(),
        "states": states,
        "verdict_cache": {"hits": vc.hits, "class_hits": vc.class_hits, "misses": vc.misses, "invalidations": vc.invalidations},
        "matched_rules": matched,
    })
}

/// The `--json` line.
fn result_json(
    cfg: &BenchConfig,
    res: &BenchResult,
    firewall: Option<serde_json::Value>,
) -> serde_json::Value {
    let c = &res.counts;
    let drops: serde_json::Map<String, serde_json::Value> =
        c.drops_by_reason().map(|(r, n)| (r.name().to_owned(), n.into())).collect();
    serde_json::json!({
        "mpps": res.mpps,
        "ns_per_packet": res.ns_per_packet,
        "runs": res.runs_mpps,
        "runs_interference": res.runs_interference.iter().map(|i| serde_json::json!({"waited": i.waited, "stolen": i.stolen})).collect::<Vec<_>>(),
        "drops": drops,
        "rx": c.rx,
        "forwarded": c.forwarded,
        "local": c.local,
        "routes": res.routes,
        "flows": res.flows,
        "frame_size": res.frame_size,
        "ipv6": cfg.ipv6,
        "vlan": cfg.vlan,
        "batch": cfg.batch,
        "cpu": cfg.cpu,
        "workers": cfg.workers,
        "flows_per_worker": res.flows_per_worker,
        "firewall": firewall,
    })
}
