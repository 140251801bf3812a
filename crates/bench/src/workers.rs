//! The multi-worker bench: each worker thread builds its own ports, pool and firewall over
//! its share of the flows, all read the one FIB; a barrier starts every run on all workers
//! at once and the run's rate is everything the workers forwarded over the longest of their
//! measured intervals.

use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use dataplane::Fib;
use dataplane::counters::Counts;
use dataplane::fib::PortInfo;
use dataplane::worker::Worker;
use io::FramePool;
use io::mem::{CountingTx, ReplayRx};

use crate::firewall::setup_firewall;
use crate::interference::{CpuClocks, Interference};
use crate::measure::{Runs, measure};
use crate::prepare::prepare;
use crate::{BenchConfig, BenchError, BenchResult};

/// What one worker measured in one run.
struct WorkerRun {
    forwarded: u64,
    elapsed: Duration,
    counts: Counts,
    interference: Interference,
}

/// Each worker's reports: its index and its run, or why it could not set up.
type Report = (usize, Result<WorkerRun, String>);

pub(crate) fn run_workers(
    cfg: &BenchConfig,
    mut on_run: impl FnMut(usize, f64, Interference),
) -> Result<BenchResult, BenchError> {
    let started = Instant::now();
    let setup = prepare(cfg)?;
    let n = cfg.workers;
    let shares = spread(setup.frames, n);
    if shares.iter().any(|s| s.is_empty()) {
        return Err(BenchError::Invalid(format!(
            "{} flows do not spread over {n} workers: give more --flows",
            cfg.flows
        )));
    }
    let flows_per_worker: Vec<usize> = shares.iter().map(|s| s.len()).collect();
    let fib = setup.ctl.fib();
    let barrier = Arc::new(Barrier::new(n + 1));
    let (tx_res, rx_res) = mpsc::channel::<Report>();
    let mut handles = Vec::new();
    for (i, frames) in shares.into_iter().enumerate() {
        let (fib, ports, barrier, tx_res, cfg) = (
            Arc::clone(&fib),
            setup.ports.clone(),
            Arc::clone(&barrier),
            tx_res.clone(),
            cfg.clone(),
        );
        handles.push(std::thread::spawn(move || {
            worker_thread(i, &cfg, fib, &ports, frames, &barrier, &tx_res)
        }));
    }
    drop(tx_res);
    let setup_time = started.elapsed();
    let mut runs = Runs::default();
    for r in 0..cfg.runs {
        barrier.wait();
        let (mpps, interference) = collect_run(n, &rx_res, &mut runs)?;
        on_run(r, mpps, interference);
    }
    for h in handles {
        let _ = h.join();
    }
    Ok(BenchResult::measured(runs, setup.routes, flows_per_worker, cfg.frame_size, setup_time))
}

/// The frames of each of `n` workers, by the Toeplitz RSS hash of each frame, as a NIC's RSS
/// would spread them.
fn spread(frames: Vec<Vec<u8>>, n: usize) -> Vec<Vec<Vec<u8>>> {
    let rss = io::rss::Toeplitz::new(&io::rss::MICROSOFT_KEY);
    let mut shares: Vec<Vec<Vec<u8>>> = vec![Vec::new(); n];
    for frame in frames {
        let q = rss.hash_frame(&frame).map_or(0, |h| io::rss::queue_for(h, n as u16) as usize);
        shares[q].push(frame);
    }
    shares
}

/// Worker `i`: sets up over its frames, warms up, then measures one run each time the
/// barrier opens and reports it.
fn worker_thread(
    i: usize,
    cfg: &BenchConfig,
    fib: Arc<Fib>,
    ports: &[PortInfo],
    frames: Vec<Vec<u8>>,
    barrier: &Barrier,
    tx_res: &Sender<Report>,
) {
    let cpus = io::affinity::available_cpus().max(1);
    let cpu = io::affinity::pin_current_thread(i % cpus).ok().map(|()| i % cpus);
    let rx = ReplayRx::new(0, &frames);
    let tx = vec![CountingTx::new(), CountingTx::new()];
    let mut worker =
        Worker::new(fib, ports, vec![rx], tx, CountingTx::new(), FramePool::new(1024), cfg.batch);
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
        let (before, clocks) = (worker.counts(), CpuClocks::now(cpu));
        let (forwarded, elapsed) = measure(&mut worker, Duration::from_secs_f64(cfg.seconds));
        let interference = CpuClocks::now(cpu).since(&clocks, elapsed);
        let counts = worker.counts().since(&before);
        let _ = tx_res.send((i, Ok(WorkerRun { forwarded, elapsed, counts, interference })));
    }
}

/// One run's reports of all `n` workers, added to `runs` as one run over the longest of
/// their intervals; returns its rate in Mpps and the worst worker's interference.
fn collect_run(
    n: usize,
    rx_res: &Receiver<Report>,
    runs: &mut Runs,
) -> Result<(f64, Interference), BenchError> {
    let (mut forwarded, mut longest, mut counts) = (0u64, Duration::ZERO, Counts::default());
    let mut interference = Interference::default();
    for _ in 0..n {
        let (i, res) =
            rx_res.recv().map_err(|_| BenchError::Invalid("a bench worker stopped".into()))?;
        let run = res.map_err(|e| BenchError::Invalid(format!("worker {i}: {e}")))?;
        forwarded += run.forwarded;
        longest = longest.max(run.elapsed);
        counts.add(&run.counts);
        interference = interference.worst(run.interference);
    }
    Ok((runs.add(forwarded, longest, &counts, interference), interference))
}
