//! What else ran on a bench worker's CPU during a run. A worker pinned to a CPU that other
//! tasks also use (a second bench pinned to the same CPU, a build) or that the hypervisor
//! takes away (steal) forwards less, and nothing in the figure says so. Two clocks tell:
//! - the scheduler's `run_delay` of the worker's thread (`/proc/thread-self/schedstat`,
//!   nanoseconds): time it was ready to run but waited while another task had its CPU;
//! - the CPU's `steal` time (`/proc/stat`, in the kernel's fixed USER_HZ of 100 ticks a
//!   second): time the hypervisor ran something else while this CPU's task was running.
//!
//! Each is reported as a share of the run's wall-clock time: the figure is low by about
//! that much.

use std::time::Duration;

/// `/proc/stat`'s unit: USER_HZ, 100 on every architecture Linux runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// Above this share of a run, waited or stolen, the run's figure is flagged.
pub const NOTABLE: f64 = 0.05;

/// The two clocks at one moment, for the calling thread and CPU `cpu`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuClocks {
    run_delay_ns: Option<u64>,
    steal_ticks: Option<u64>,
}

/// The shares of a run's time lost to other work on its CPU (`None`: that clock could not
/// be read).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Interference {
    /// The worker was ready but another task ran.
    pub waited: Option<f64>,
    /// The hypervisor ran something else.
    pub stolen: Option<f64>,
}

impl CpuClocks {
    /// Reads both clocks now (the calling thread's, and CPU `cpu`'s steal time).
    pub(crate) fn now(cpu: Option<usize>) -> CpuClocks {
        let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok();
        let stat = cpu.and_then(|_| std::fs::read_to_string("/proc/stat").ok());
        CpuClocks {
            run_delay_ns: schedstat.as_deref().and_then(run_delay_ns),
            steal_ticks: cpu.zip(stat.as_deref()).and_then(|(c, s)| steal_ticks(s, c)),
        }
    }

    /// The shares of `elapsed` since `before`.
    pub(crate) fn since(&self, before: &CpuClocks, elapsed: Duration) -> Interference {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let share = |now: Option<u64>, then: Option<u64>, per_second: f64| {
            now.zip(then).map(|(n, t)| (n.saturating_sub(t) as f64 / per_second / secs).min(1.0))
        };
        Interference {
            waited: share(self.run_delay_ns, before.run_delay_ns, 1e9),
            stolen: share(self.steal_ticks, before.steal_ticks, TICKS_PER_SECOND),
        }
    }
}

impl Interference {
    /// The larger of the two shares (0 where neither was read).
    pub fn lost(&self) -> f64 {
        self.waited.unwrap_or(0.0).max(self.stolen.unwrap_or(0.0))
    }

    /// The worse of two workers' (per share).
    pub(crate) fn worst(self, other: Interference) -> Interference {
        let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Interference {
            waited: max(self.waited, other.waited),
            stolen: max(self.stolen, other.stolen),
        }
    }
}

/// `run_delay` from `/proc/<pid>/task/<tid>/schedstat`: "on-CPU ns, run-delay ns, slices".
fn run_delay_ns(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

/// CPU `cpu`'s steal ticks from `/proc/stat`: the eighth number of its `cpuN` line (user,
/// nice, system, idle, iowait, irq, softirq, steal).
fn steal_ticks(stat: &str, cpu: usize) -> Option<u64> {
    let name = format!("cpu{cpu}");
    let line = stat.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  3269917 76295 593205 2859653 9826 0 17526 81401 0 0\n\
                        cpu0 1232185 33279 246700 1887624 2458 0 9372 40741 0 0\n\
                        cpu1 2037732 43016 346505 972029 7367 0 8154 40660 0 0\n\
                        intr 38630292 0 0\n";

    #[test]
    fn the_clocks_are_read_from_procfs_text() {
        assert_eq!(run_delay_ns("563583325 503698427 166\n"), Some(503_698_427));
        assert_eq!(run_delay_ns(""), None);
        assert_eq!(steal_ticks(STAT, 1), Some(40660));
        assert_eq!(steal_ticks(STAT, 0), Some(40741));
        // `cpu` (the total) is not `cpu1`'s prefix match, and a missing CPU gives nothing.
        assert_eq!(steal_ticks(STAT, 2), None);
    }

    #[test]
    fn shares_are_of_the_run_time() {
        let before = CpuClocks { run_delay_ns: Some(1_000), steal_ticks: Some(500) };
        let after = CpuClocks { run_delay_ns: Some(1_000 + 500_000_000), steal_ticks: Some(510) };
        let i = after.since(&before, Duration::from_secs(2));
        assert_eq!(i, Interference { waited: Some(0.25), stolen: Some(0.05) });
        assert_eq!(i.lost(), 0.25);
        let unread = CpuClocks { run_delay_ns: None, steal_ticks: None };
        assert_eq!(unread.since(&before, Duration::from_secs(1)), Interference::default());
        let w = Interference { waited: Some(0.1), stolen: None }
            .worst(Interference { waited: Some(0.3), stolen: Some(0.02) });
        assert_eq!(w, Interference { waited: Some(0.3), stolen: Some(0.02) });
    }

    /// The calling thread's clock can be read on Linux, and a busy thread alone on its CPU
    /// waits little (not asserted: the test machine may be busy).
    #[test]
    fn this_threads_clock_is_readable() {
        let before = CpuClocks::now(Some(0));
        let after = CpuClocks::now(Some(0));
        let i = after.since(&before, Duration::from_millis(1));
        assert!(i.waited.is_some() && i.stolen.is_some(), "{i:?}");
    }
}
