//! `linerate lab [FILE]`: the study's method in one command (see `lab::labfile` for the file
//! format, `lab::runner` for the topology and pinning).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use lab::labfile::Lab;
use lab::runner::LabEnv;
use lab::session::{self, Progress, SearchOptions};

#[derive(clap::Args)]
pub struct LabArgs {
    /// Lab file (TOML) [default: the built-in lab: kernel vs linerate vs kernel+nftables
    /// with 1000 rules vs linerate with the same rules, 2000 flows of 60-byte frames, 5 runs
    /// each].
    file: Option<PathBuf>,
    /// Runs per set (overrides the file).
    #[arg(long)]
    runs: Option<usize>,
    /// Seconds per run (overrides the file; at least 3).
    #[arg(long)]
    seconds: Option<u32>,
    /// Also find each set's zero-loss throughput (RFC 2544 section 26.1 binary search).
    #[arg(long)]
    search: bool,
    /// Search: stop when the passing and failing rates are within this share of the start.
    #[arg(long, default_value_t = 0.01)]
    tolerance: f64,
    /// Search: at most this many trials per set.
    #[arg(long, default_value_t = 10)]
    max_trials: usize,
    /// Results folder [default: results/lab-<unix time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
    /// CPU of the generator.
    #[arg(long, default_value_t = 0)]
    gen_cpu: usize,
    /// CPU of the device under test (linerate's worker and its input's NAPI thread; the kernel's forwarding, in its input's NAPI thread).
    #[arg(long, default_value_t = 1)]
    dut_cpu: usize,
    /// CPU of the receiver (its input's NAPI thread, at real-time priority).
    #[arg(long, default_value_t = 0)]
    rcv_cpu: usize,
    /// Workers of every DUT (overrides the file): each veth gets this many queues; linerate
    /// runs this many workers, the kernel's input NAPI this many threads; generator, DUT and
    /// receiver each take this many consecutive CPUs from their first.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: Option<u16>,
}

pub fn main(args: LabArgs) -> Result<()> {
    let mut lab = match &args.file {
        Some(path) => Lab::load(path)?,
        None => Lab::default_lab(),
    };
    if let Some(r) = args.runs {
        lab.runs = r;
    }
    if let Some(s) = args.seconds {
        lab.seconds = s;
    }
    if let Some(w) = args.workers {
        lab.workers = usize::from(w);
    }
    if lab.runs == 0 || lab.seconds < 3 {
        bail!(
            "--runs must be >= 1 and --seconds >= 3 (the first and last seconds of a run are left out)"
        );
    }
    if !io::netdev::is_root() {
        bail!("linerate lab needs root: it creates network namespaces and veth pairs");
    }
    if io::affinity::available_cpus() < 2 {
        eprintln!("lab: warning: one CPU only: generator and DUT will share it");
    }
    let bin = std::env::current_exe().context("locating the linerate binary")?;
    let out = args.out.clone().unwrap_or_else(|| {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        PathBuf::from(format!("results/lab-{t}"))
    });
    let stop = crate::signals::stop_on_signals()?;
    let cpus = lab::runner::Cpus {
        generator: args.gen_cpu,
        dut: args.dut_cpu,
        receiver: args.rcv_cpu,
        workers: lab.workers,
    };
    let ncpu = io::affinity::available_cpus();
    if let Some(c) = cpus.all().into_iter().find(|&c| c >= ncpu) {
        bail!(
            "cpu {c} does not exist here ({ncpu} CPUs; with --workers N each party takes N CPUs from its first)"
        );
    }
    let span = |first: usize| {
        if cpus.workers > 1 {
            format!("cpus {first}-{}", first + cpus.workers - 1)
        } else {
            format!("cpu {first}")
        }
    };
    eprintln!(
        "lab: {} sets and {} TCP entries x {} runs x {} s; {} worker(s); generator on {}, DUT on {}, receiver on {}",
        lab.sets.len(),
        lab.tcp.len(),
        lab.runs,
        lab.seconds,
        cpus.workers,
        span(cpus.generator),
        span(cpus.dut),
        span(cpus.receiver)
    );
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let _ = std::fs::remove_file(out.join("counters.txt"));
    let env = LabEnv::build(&bin, cpus)
        .context("building the lab topology")?
        .keep_counters(out.join("counters.txt"));
    let started = Instant::now();
    let search = args
        .search
        .then_some(SearchOptions { tolerance: args.tolerance, max_trials: args.max_trials });
    let results =
        session::run(&lab, &env, search, &stop, |p: Progress<'_>| progress_bar(&p, started));
    let tcp = match &results {
        Ok(_) => lab::tcp::run(&lab, &env, &stop, |p: Progress<'_>| progress_bar(&p, started)),
        Err(_) => Ok(Vec::new()),
    };
    eprintln!();
    drop(env); // namespaces go before we print, also on error
    let (results, tcp) = (results?, tcp?);
    session::write(&out, &lab, &results, &tcp)
        .with_context(|| format!("writing results to {}", out.display()))?;
    if !results.is_empty() {
        println!("{}", session::summary(&lab, &results));
    }
    print!("{}", lab::tcp::summary(&tcp));
    println!(
        "results: {} (runs.csv, sets.csv, results.json, plot.svg, summary.txt; counters.txt: where each run's frames went{})",
        out.display(),
        if tcp.is_empty() { "" } else { "; tcp.csv" }
    );
    if args.json {
        println!("{}", session::to_json(&lab, &results, &tcp));
    }
    Ok(())
}

fn progress_bar(p: &Progress<'_>, started: Instant) {
    const WIDTH: usize = 30;
    let filled = (p.done * WIDTH).checked_div(p.total).unwrap_or(0);
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r[{}{}] {}/{} {:>4.0}s  {}: {:<40}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        p.done,
        p.total,
        started.elapsed().as_secs_f64(),
        p.set,
        p.what
    );
    let _ = err.flush();
}
