//! TCP through the DUTs of a lab's [[tcp]] entries: iperf3 from the generator's namespace to
//! the receiver's with every veth offload on, as a container's traffic crosses a router
//! (`LabEnv::tcp`). Entries alternate within each of `runs` rounds, so that a noisy moment
//! of the machine falls on all of them; each is compared with the first (the kernel, in the
//! default lab) by medians.

use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;

use serde_json::json;

use crate::error::LabError;
use crate::labfile::{Lab, Set};
use crate::runner::{LabEnv, Progress};
use crate::stat::median;

/// One entry's tests.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpResult {
    pub set: Set,
    /// Gbit/s the server received, one per round.
    pub gbits: Vec<f64>,
}

impl TcpResult {
    pub fn median(&self) -> f64 {
        median(&self.gbits)
    }

    fn min_max(&self) -> (f64, f64) {
        crate::stat::min_max(&self.gbits)
    }
}

/// Runs every [[tcp]] entry of `lab`, `lab.runs` rounds of `lab.seconds` each.
pub fn run(
    lab: &Lab,
    env: &LabEnv,
    stop: &AtomicBool,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<TcpResult>, LabError> {
    let mut results: Vec<TcpResult> =
        lab.tcp.iter().map(|s| TcpResult { set: s.clone(), gbits: Vec::new() }).collect();
    let total = lab.runs * results.len();
    for round in 0..lab.runs {
        for (i, r) in results.iter_mut().enumerate() {
            let what = format!("TCP {}/{}", round + 1, lab.runs);
            progress(Progress { done: round * lab.tcp.len() + i, total, set: &r.set.name, what });
            r.gbits.push(env.tcp(&r.set, lab.seconds, stop)?);
        }
    }
    Ok(results)
}

/// The table of the summary: median, range and ratio to the first entry.
pub fn summary(results: &[TcpResult]) -> String {
    let Some(first) = results.first() else { return String::new() };
    let mut s = String::from(
        "TCP, iperf3 through the DUT, every veth offload on (Gbit/s received; rounds alternated):\n",
    );
    let _ = writeln!(
        s,
        "{:<24} {:<20} {:>8} {:>8} {:>8} {:>7}",
        "", "", "median", "min", "max", "ratio"
    );
    for r in results {
        let (min, max) = r.min_max();
        let ratio = if first.median() > 0.0 { r.median() / first.median() } else { 0.0 };
        let dut = match r.set.dut {
            crate::labfile::Dut::Linerate => format!("linerate/{}", r.set.backend),
            other => other.name().to_owned(),
        };
        let _ = writeln!(
            s,
            "{:<24} {:<20} {:>8.2} {:>8.2} {:>8.2} {:>6.2}x",
            r.set.name,
            dut,
            r.median(),
            min,
            max,
            ratio
        );
    }
    s
}

/// `tcp.csv`: one line per test.
pub fn csv(results: &[TcpResult]) -> String {
    let mut s = String::from("set,dut,backend,fast_path,round,gbits\n");
    for r in results {
        for (i, g) in r.gbits.iter().enumerate() {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{g:.3}",
                r.set.name,
                r.set.dut.name(),
                r.set.backend,
                r.set.fast_path,
                i + 1
            );
        }
    }
    s
}

/// The entries for `results.json`.
pub fn to_json(results: &[TcpResult]) -> serde_json::Value {
    results
        .iter()
        .map(|r| {
            json!({"name": r.set.name, "dut": r.set.dut.name(), "backend": r.set.backend,
                   "fast_path": r.set.fast_path, "gbits": r.gbits, "median_gbits": r.median()})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_compares_with_the_first_entry() {
        let lab = Lab::parse(
            "[[tcp]]\nname = \"k\"\ndut = \"kernel\"\n[[tcp]]\nname = \"l\"\ndut = \"linerate\"\nbackend = \"af_packet\"\n",
            "t",
        )
        .unwrap();
        let results = vec![
            TcpResult { set: lab.tcp[0].clone(), gbits: vec![10.0, 12.0, 11.0] },
            TcpResult { set: lab.tcp[1].clone(), gbits: vec![11.0, 9.0, 10.0] },
        ];
        let s = summary(&results);
        assert!(s.contains("11.00") && s.contains("1.00x"), "{s}");
        assert!(
            s.lines().any(|l| l.starts_with('l')
                && l.contains("linerate/af_packet")
                && l.ends_with("0.91x")),
            "{s}"
        );
        assert_eq!(csv(&results).lines().count(), 7);
        assert_eq!(to_json(&results)[1]["median_gbits"], 10.0);
    }

    #[test]
    fn tcp_entries_refuse_what_only_frames_mean() {
        let err =
            Lab::parse("[[tcp]]\nname = \"k\"\ndut = \"kernel\"\nping = 3\n", "t").unwrap_err();
        assert!(err.to_string().contains("`ping` applies to [[set]] only"), "{err}");
        assert!(Lab::parse("runs = 3\n", "t").is_err());
    }
}
