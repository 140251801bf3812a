//! One measured interval of a worker, and the figures of several.

use std::time::{Duration, Instant};

use dataplane::counters::Counts;
use io::TxPort;

use crate::interference::Interference;
use crate::{BenchResult, BenchWorker};

/// The figures of the measured runs so far.
#[derive(Default)]
pub(crate) struct Runs {
    /// Forwarded Mpps of each run.
    mpps: Vec<f64>,
    /// Wall-clock ns per received packet of each run.
    ns_per_packet: Vec<f64>,
    /// Counters summed over the runs.
    counts: Counts,
    /// What else ran on the workers' CPUs during each run.
    interference: Vec<Interference>,
}

impl Runs {
    /// A run that forwarded `forwarded` packets in `elapsed` and counted `counts`, while
    /// other work took `interference` of its CPU; returns its rate in Mpps.
    pub fn add(
        &mut self,
        forwarded: u64,
        elapsed: Duration,
        counts: &Counts,
        interference: Interference,
    ) -> f64 {
        self.counts.add(counts);
        self.interference.push(interference);
        let mpps = forwarded as f64 / elapsed.as_secs_f64() / 1e6;
        self.ns_per_packet.push(elapsed.as_nanos() as f64 / counts.rx.max(1) as f64);
        self.mpps.push(mpps);
        mpps
    }
}

impl BenchResult {
    /// A result from the measured runs (medians taken here), no firewall.
    pub(crate) fn measured(
        runs: Runs,
        routes: usize,
        flows_per_worker: Vec<usize>,
        frame_size: usize,
        setup: Duration,
    ) -> Self {
        BenchResult {
            mpps: median(&runs.mpps),
            ns_per_packet: median(&runs.ns_per_packet),
            runs_mpps: runs.mpps,
            runs_interference: runs.interference,
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
/// scripts/instructions-per-packet.sh counts the instructions of this function only
/// (`bench::measure::measure`).
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
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
