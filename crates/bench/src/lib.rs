//! `linerate bench`: the forwarding pipeline on one core over in-memory ports.
//!
//! An in-memory rx port replays the flow set (copying each frame into a pool buffer, as a
//! NIC's DMA would); the worker forwards; counting tx ports stand for the receiver, and the
//! rate is what they count (packets forwarded), divided by wall-clock time. Each run lasts
//! `seconds`; the figure reported is the median of `runs` runs, after a short warm-up.
//!
//! [`prepare`] builds the FIB and the frames, [`firewall`] the generated rule set and its
//! prefilled states, [`run`](mod@run) runs it; [`synth`] generates the tables and flows.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use dataplane::counters::Counts;
use dataplane::fib::FibError;
use dataplane::worker::{DEFAULT_BATCH, Worker};
use io::mem::{CountingTx, ReplayRx};
use wire::MacAddr;

pub mod firewall;
pub mod interference;
mod measure;
pub mod prepare;
pub mod run;
pub mod synth;
#[cfg(test)]
mod tests;
mod workers;

pub use firewall::{BenchFirewall, BenchFirewallResult, bench_rules};
pub use measure::median;
pub use run::run;

/// The bench's worker: in-memory ports, the punt port counting what it is given.
pub(crate) type BenchWorker = Worker<ReplayRx, CountingTx, CountingTx>;

/// MAC of the bench's input port; generated frames are addressed to it.
pub const RX_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
/// MAC of the bench's output port.
pub const TX_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);

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
    /// What else ran on the workers' CPUs during each run (the worst worker's).
    pub runs_interference: Vec<interference::Interference>,
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
