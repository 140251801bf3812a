//! The bench: one worker on the calling thread ([`run`]), or several on threads of their own
//! (`workers.rs`); every run polls for a fixed time and counts what the tx ports got.

use std::time::{Duration, Instant};

use dataplane::worker::Worker;
use io::FramePool;
use io::mem::{CountingTx, ReplayRx};

use crate::firewall::{BenchFirewallResult, setup_firewall};
use crate::interference::{CpuClocks, Interference};
use crate::measure::{Runs, measure};
use crate::prepare::prepare;
use crate::{BenchConfig, BenchError, BenchResult, BenchWorker};

/// Runs the bench; `on_run(i, mpps, interference)` is called after each measured run.
pub fn run(
    cfg: &BenchConfig,
    on_run: impl FnMut(usize, f64, Interference),
) -> Result<BenchResult, BenchError> {
    if cfg.runs == 0 || cfg.seconds <= 0.0 || cfg.flows == 0 {
        return Err(BenchError::Invalid("runs, seconds and flows must be positive".into()));
    }
    if cfg.workers > 1 {
        return crate::workers::run_workers(cfg, on_run);
    }
    run_one(cfg, on_run)
}

/// The bench with one worker, pinned to `cfg.cpu`, on the calling thread.
fn run_one(
    cfg: &BenchConfig,
    mut on_run: impl FnMut(usize, f64, Interference),
) -> Result<BenchResult, BenchError> {
    let started = Instant::now();
    let setup = prepare(cfg)?;
    if let Some(cpu) = cfg.cpu {
        io::affinity::pin_current_thread(cpu)
            .map_err(|e| BenchError::Invalid(format!("cannot pin to cpu {cpu}: {e}")))?;
    }
    let rx = ReplayRx::new(0, &setup.frames);
    let tx = vec![CountingTx::new(), CountingTx::new()];
    let pool = FramePool::new(1024);
    let mut worker = Worker::new(
        setup.ctl.fib(),
        &setup.ports,
        vec![rx],
        tx,
        CountingTx::new(),
        pool,
        cfg.batch,
    );
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
        let (before, clocks) = (worker.counts(), CpuClocks::now(cfg.cpu));
        let (forwarded, elapsed) = measure(&mut worker, Duration::from_secs_f64(cfg.seconds));
        let interference = CpuClocks::now(cfg.cpu).since(&clocks, elapsed);
        let mpps = runs.add(forwarded, elapsed, &worker.counts().since(&before), interference);
        on_run(i, mpps, interference);
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
        r.verdict_cache = stats.verdict_cache();
        r.matched = stats
            .rules()
            .snapshot()
            .into_iter()
            .filter(|s| s.packets > 0 || s.states > 0)
            .collect();
    }
    if let Some(t) = worker.nat_table_mut() {
        r.nat_sessions = t.len();
        r.nat_table_bytes = t.memory_bytes();
    }
    r
}
