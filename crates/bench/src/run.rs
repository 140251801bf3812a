//! Measuring: one worker on the calling thread ([`run`]), or several on threads of their own
//! (`workers.rs`); every run polls for a fixed time and counts what the tx ports got.

use std::time::{Duration, Instant};

use dataplane::counters::Counts;
use dataplane::worker::Worker;
use io::mem::{CountingTx, ReplayRx};
use io::{FramePool, TxPort};

use crate::firewall::{BenchFirewallResult, setup_firewall};
use crate::prepare::prepare;
use crate::{BenchConfig, BenchError, BenchResult, BenchWorker};

/// The figures of the measured runs so far.
#[derive(Default)]
pub(crate) struct Runs {
    /// Forwarded Mpps of each run.
    mpps: Vec<f64>,
    /// Wall-clock ns per received packet of each run.
    ns_per_packet: Vec<f64>,
    /// Counters summed over the runs.
    counts: Counts,
}

impl Runs {
    /// A run that forwarded `forwarded` packets in `elapsed` and counted `counts`; returns its
    /// rate in Mpps.
    pub fn add(&mut self, forwarded: u64, elapsed: Duration, counts: &Counts) -> f64 {
        self.counts.add(counts);
        let mpps = forwarded as f64 / elapsed.as_secs_f64() / 1e6;
        self.ns_per_packet.push(elapsed.as_nanos() as f64 / counts.rx.max(1) as f64);
        self.mpps.push(mpps);
        mpps
    }
}

/// Runs the bench; `on_run(i, mpps)` is called after each measured run.
pub fn run(cfg: &BenchConfig, on_run: impl FnMut(usize, f64)) -> Result<BenchResult, BenchError> {
    if cfg.runs == 0 || cfg.seconds <= 0.0 || cfg.flows == 0 {
        return Err(BenchError::Invalid("runs, seconds and flows must be positive".into()));
    }
    if cfg.workers > 1 {
        return crate::workers::run_workers(cfg, on_run);
    }
    run_one(cfg, on_run)
}

/// The bench with one worker, pinned to `cfg.cpu`, on the calling thread.
fn run_one(cfg: &BenchConfig, mut on_run: impl FnMut(usize, f64)) -> Result<BenchResult, BenchError> {
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
    let fw_result = match &cfg.firewall {
        Some(f) => Some(setup_firewall(&mut worker, f, &setup.frames)?),
        None => None,
    };
    let flows = setup.frames.len();
    drop(setup.frames);
    let setup_time = started.elapsed();

    if !cfg.warmup.is_zero() {
        measure(&mut worker, cfg.warmup);
    }
    let mut runs = Runs::default();
    for i in 0..cfg.runs {
        let before = worker.counts();
        let (forwarded, elapsed) = measure(&mut worker, Duration::from_secs_f64(cfg.seconds));
        let mpps = runs.add(forwarded, elapsed, &worker.counts().since(&before));
        on_run(i, mpps);
    }
    Ok(BenchResult {
        firewall: fw_result.map(|r| firewall_at_end(r, &mut worker)),
        ..BenchResult::measured(runs, setup.routes, vec![flows], cfg.frame_size, setup_time)
    })
}

/// The firewall's figures completed with its counters at the end of the runs.
fn firewall_at_end(mut r: BenchFirewallResult, worker: &mut BenchWorker) -> BenchFirewallResult {
    if let Some(stats) = worker.firewall_stats() {
        r.state_counters = stats.states().to_vec();
        r.matched = stats.rules().snapshot().into_iter().filter(|s| s.packets > 0 || s.states > 0).collect();
    }
    if let Some(t) = worker.nat_table_mut() {
        r.nat_sessions = t.len();
        r.nat_table_bytes = t.memory_bytes();
    }
    r
}

impl BenchResult {
    /// A result from the measured runs (medians taken here), no firewall.
    pub(crate) fn measured(runs: Runs, routes: usize, flows_per_worker: Vec<usize>, frame_size: usize, setup: Duration) -> Self {
        BenchResult {
            mpps: median(&runs.mpps),
            ns_per_packet: median(&runs.ns_per_packet),
            runs_mpps: runs.mpps,
            counts: runs.counts,
            routes,
            flows: flows_per_worker.iter().sum(),
            frame_size,
            setup,
            firewall: None,
            flows_per_worker,
        }
    }
}

fn tx_packets(w: &BenchWorker) -> u64 {
    w.tx.iter().map(|t| t.stats().tx_packets).sum()
}

/// Polls for `duration`; returns packets counted at the tx ports and the exact time taken.
/// scripts/instructions-per-packet.sh counts the instructions of this function only.
pub(crate) fn measure(worker: &mut BenchWorker, duration: Duration) -> (u64, Duration) {
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
