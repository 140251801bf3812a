//! A whole lab session: every run of every set (interleaved, so that the machine's slow
//! drifts spread over all sets rather than biasing one), the optional zero-loss search, the
//! results files and the one-screen summary with its ministat comparison.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde_json::json;

use crate::counters::Losses;
use crate::labfile::{Lab, Set};
use crate::plot;
pub use crate::runner::Progress;
use crate::runner::{LabEnv, LabError, RunResult};
use crate::search::{self, SearchParams, SearchResult, Trial};
use crate::stat::{self, median};
use crate::tcp::{self, TcpResult};

/// A set whose median rate reaches this share of the generator's capacity (measured alone,
/// see `LabEnv::calibrate`) measured the generator, not the DUT.
pub const GENERATOR_BOUND: f64 = 0.95;
/// A set whose generator offered less than this share of its capacity was held back by the
/// DUT.
pub const GENERATOR_HELD_BACK: f64 = 0.5;

#[derive(Debug, Clone)]
pub struct SetResult {
    pub set: Set,
    pub runs: Vec<RunResult>,
    pub search: Option<SearchResult>,
    /// The generator's capacity for this set's traffic, measured alone.
    pub generator_pps: f64,
    /// The overload sweep, if the set asks for one.
    pub overload: Vec<OverloadPoint>,
    /// Median ping round-trip time across the idle DUT, microseconds.
    pub ping_us: Option<f64>,
}

/// One run of the overload sweep: what was offered and what arrived.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverloadPoint {
    /// The multiple of the set's rate asked for (for the flood, the multiple it came to).
    pub multiple: f64,
    /// The generator's median rate in that run.
    pub offered_pps: f64,
    pub delivered_pps: f64,
    /// The set's own runs, offered as fast as the generator goes (medians of the runs): the
    /// sweep's heaviest load, beyond what the paced generator reaches on a small machine.
    pub flood: bool,
    /// Where the frames were lost, and the frames offered (the flood: its runs' sums).
    pub lost: Option<(Losses, u64)>,
}

impl OverloadPoint {
    /// "1.5x" for a paced point, "flood (14.2x)" for the runs.
    pub fn label(&self) -> String {
        if self.flood {
            format!("flood ({:.1}x)", self.multiple)
        } else {
            format!("{}x", self.multiple)
        }
    }
}

impl SetResult {
    pub fn values(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.pps).collect()
    }

    /// Median of the runs' values.
    pub fn median(&self) -> f64 {
        median(&self.values())
    }

    /// Lowest and highest run values (0, 0 for no runs).
    pub fn min_max(&self) -> (f64, f64) {
        stat::min_max(&self.values())
    }

    /// Median share of the frames the generator offered that reached the receiver.
    pub fn delivered(&self) -> f64 {
        median(
            &self
                .runs
                .iter()
                .map(|r| if r.offered == 0 { 0.0 } else { r.received as f64 / r.offered as f64 })
                .collect::<Vec<_>>(),
        )
    }

    pub fn generator_bound(&self) -> bool {
        self.generator_pps > 0.0 && self.median() >= GENERATOR_BOUND * self.generator_pps
    }

    /// Median rate the generator offered in this set's runs.
    pub fn offered(&self) -> f64 {
        median(&self.runs.iter().map(|r| r.offered_pps).collect::<Vec<_>>())
    }

    /// The generator offered far less than it can with nothing downstream: the DUT held it
    /// back (with the in-kernel generator, a DUT that returns its pages slowly does), so the
    /// set measured the generator as much as the DUT.
    pub fn generator_held_back(&self) -> bool {
        self.generator_pps > 0.0
            && !self.runs.is_empty()
            && self.offered() < GENERATOR_HELD_BACK * self.generator_pps
    }

    /// The rate the overload sweep multiplies: the zero-loss rate if searched, else the median.
    pub fn overload_base(&self) -> f64 {
        self.search
            .as_ref()
            .map(|s| s.rate_pps)
            .filter(|&r| r > 0.0)
            .unwrap_or_else(|| self.median())
    }

    /// The highest delivered rate of the sweep (its flood point is the runs' median), and
    /// what the sweep's highest offered load delivered as a share of it.
    pub fn overload_verdict(&self) -> Option<(f64, f64)> {
        let last = self.overload.iter().max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))?;
        let peak = self.overload.iter().map(|p| p.delivered_pps).fold(0.0, f64::max);
        (peak > 0.0).then(|| (peak, last.delivered_pps / peak))
    }

    /// The sweep's last point: the set's own runs, when they offered as fast as the generator
    /// goes (no `rate`) and more than the paced points did.
    fn flood_point(&self) -> Option<OverloadPoint> {
        let (base, offered) = (self.overload_base(), self.offered());
        let paced_max = self.overload.iter().map(|p| p.offered_pps).fold(0.0, f64::max);
        let unpaced = self.set.traffic.rate <= 0.0 && !self.runs.is_empty() && base > 0.0;
        (unpaced && offered > paced_max).then(|| OverloadPoint {
            multiple: offered / base,
            offered_pps: offered,
            delivered_pps: self.median(),
            flood: true,
            lost: self.lost(),
        })
    }

    /// Where the frames the set's runs offered were lost, summed over the runs whose
    /// counters say, and the frames those runs offered.
    pub fn lost(&self) -> Option<(Losses, u64)> {
        let mut sum: Option<(Losses, u64)> = None;
        for r in &self.runs {
            if let Some(l) = &r.losses {
                let (total, offered) = sum.get_or_insert((Losses::default(), 0));
                total.add(l);
                *offered += r.offered;
            }
        }
        sum
    }
}

/// Search settings for `--search`.
#[derive(Debug, Clone, Copy)]
pub struct SearchOptions {
    /// Tolerance as a share of the starting (highest) rate.
    pub tolerance: f64,
    pub max_trials: usize,
}

/// Runs every set `lab.runs` times (interleaved), then the zero-loss search if asked.
pub fn run(
    lab: &Lab,
    env: &LabEnv,
    search_opts: Option<SearchOptions>,
    stop: &AtomicBool,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<SetResult>, LabError> {
    let mut results: Vec<SetResult> = lab
        .sets
        .iter()
        .map(|s| SetResult {
            set: s.clone(),
            runs: Vec::new(),
            search: None,
            generator_pps: 0.0,
            overload: Vec::new(),
            ping_us: None,
        })
        .collect();
    // One calibration per distinct traffic mix.
    let mut mixes: Vec<crate::labfile::Traffic> = Vec::new();
    for r in &results {
        if !mixes.contains(&r.set.traffic) {
            mixes.push(r.set.traffic.clone());
        }
    }
    let sweeps: usize = lab.sets.iter().map(|s| s.overload.len()).sum();
    let pings = lab.sets.iter().filter(|s| s.ping > 0).count();
    let total = mixes.len()
        + lab.runs * lab.sets.len()
        + search_opts.map_or(0, |s| s.max_trials * lab.sets.len())
        + sweeps
        + pings;
    let mut done = 0;
    for mix in &mixes {
        let r = results.iter().find(|r| r.set.traffic == *mix).expect("mix from a set");
        progress(Progress {
            done,
            total,
            set: "generator",
            what: "calibration (DUT drops all)".into(),
        });
        let capacity = env.calibrate(&r.set, lab.seconds, stop)?;
        done += 1;
        for r in results.iter_mut().filter(|r| r.set.traffic == *mix) {
            r.generator_pps = capacity;
        }
    }
    for run in 0..lab.runs {
        for r in results.iter_mut() {
            progress(Progress {
                done,
                total,
                set: &r.set.name,
                what: format!("run {}/{}", run + 1, lab.runs),
            });
            let res = env.run(&r.set, lab.seconds, None, stop)?;
            r.runs.push(res);
            done += 1;
        }
    }
    if let Some(opts) = search_opts {
        for r in results.iter_mut() {
            let max = median(&r.runs.iter().map(|x| x.gen_pps).collect::<Vec<_>>()).max(1000.0);
            let params = SearchParams {
                max_pps: max,
                tolerance_pps: (max * opts.tolerance).max(1000.0),
                max_trials: opts.max_trials,
                acceptable_loss: 0.0,
            };
            let name = r.set.name.clone();
            let set = r.set.clone();
            let found = search::search(&params, |rate| {
                progress(Progress {
                    done,
                    total,
                    set: &name,
                    what: format!("zero-loss trial at {:.0} pps", rate),
                });
                done += 1;
                let res = env.run(&set, lab.seconds, Some(rate), stop)?;
                Ok::<_, LabError>(Trial {
                    rate_pps: rate,
                    sent: res.offered,
                    received: res.received,
                })
            })?;
            r.search = Some(found);
        }
    }
    for r in results.iter_mut().filter(|r| !r.set.overload.is_empty()) {
        let base = r.overload_base();
        for &multiple in &r.set.overload.clone() {
            let rate = (multiple * base).max(1000.0);
            progress(Progress {
                done,
                total,
                set: &r.set.name,
                what: format!("overload {multiple}x: {rate:.0} pps offered"),
            });
            let res = env.run(&r.set, lab.seconds, Some(rate), stop)?;
            r.overload.push(OverloadPoint {
                multiple,
                offered_pps: res.offered_pps,
                delivered_pps: res.pps,
                flood: false,
                lost: res.losses.map(|l| (l, res.offered)),
            });
            done += 1;
        }
        r.overload.extend(r.flood_point());
    }
    for r in results.iter_mut().filter(|r| r.set.ping > 0) {
        progress(Progress {
            done,
            total,
            set: &r.set.name,
            what: format!("{} pings, 1/s", r.set.ping),
        });
        r.ping_us = Some(env.ping(&r.set, r.set.ping, stop)?);
        done += 1;
    }
    Ok(results)
}

/// The ministat comparison of the sets (the first set is the reference), as ministat prints it.
pub fn ministat(results: &[SetResult]) -> String {
    let samples: Vec<(String, Vec<f64>)> =
        results.iter().take(7).map(|r| (r.set.name.clone(), r.values())).collect();
    match stat::try_compare(&samples, &stat::Options::default()) {
        Ok(s) => s,
        Err(e) => format!("(no ministat comparison: {e})\n"),
    }
}

/// The one-screen summary.
pub fn summary(lab: &Lab, results: &[SetResult]) -> String {
    let mut s = String::new();
    let base = results.first().map(|r| r.median()).unwrap_or(0.0);
    let _ = writeln!(
        s,
        "{} runs x {} s per set; value of a run = median of the receiver's per-second rates, first and last seconds left out",
        lab.runs, lab.seconds
    );
    if lab.workers > 1 {
        let _ = writeln!(
            s,
            "{} workers: {} queues per veth, {} generators, linerate's workers and the kernel's input NAPI threads on as many CPUs",
            lab.workers, lab.workers, lab.workers
        );
    }
    if let Some(r) = results.first() {
        let _ =
            writeln!(s, "generator alone (DUT dropping everything): {:.0} pps", r.generator_pps);
    }
    let _ = writeln!(
        s,
        "{:<22} {:<11} {:>12} {:>12} {:>12} {:>9} {:>10}",
        "set", "dut", "median pps", "min", "max", "vs first", "delivered"
    );
    for r in results {
        let (min, max) = r.min_max();
        let ratio = if base > 0.0 { r.median() / base } else { 0.0 };
        let dut = match r.set.dut {
            crate::labfile::Dut::Linerate => format!("linerate/{}", r.set.backend),
            d => d.name().to_owned(),
        };
        let _ = writeln!(
            s,
            "{:<22} {:<11} {:>12.0} {:>12.0} {:>12.0} {:>8.2}x {:>9.1}%",
            r.set.name,
            dut,
            r.median(),
            min,
            max,
            ratio,
            r.delivered() * 100.0
        );
    }
    for r in results {
        if r.generator_bound() {
            let _ = writeln!(
                s,
                "note: {}: {:.0} pps is {:.0}% of what the generator sends with nothing downstream ({:.0} pps): the generator, not the DUT, was the bottleneck",
                r.set.name,
                r.median(),
                r.median() / r.generator_pps * 100.0,
                r.generator_pps
            );
        }
        if r.generator_held_back() {
            let _ = writeln!(
                s,
                "note: {}: the generator offered only {:.0} pps, {:.0}% of what it sends with nothing downstream: the DUT held it back, so this set measured the generator too",
                r.set.name,
                r.offered(),
                r.offered() / r.generator_pps * 100.0
            );
        }
        if let Some(found) = &r.search {
            let _ = writeln!(
                s,
                "zero-loss throughput of {}: {:.0} pps ({} trials, RFC 2544 26.1 binary search)",
                r.set.name,
                found.rate_pps,
                found.trials.len()
            );
        }
        if let Some((peak, share)) = r.overload_verdict() {
            let points: Vec<String> = r
                .overload
                .iter()
                .map(|p| format!("{}: {:.0} -> {:.0}", p.label(), p.offered_pps, p.delivered_pps))
                .collect();
            let _ = writeln!(
                s,
                "overload of {} (offered -> delivered pps): {}",
                r.set.name,
                points.join(", ")
            );
            let _ = writeln!(
                s,
                "  at the highest load it delivered {:.0}% of its peak ({peak:.0} pps)",
                share * 100.0
            );
            let lost: Vec<String> = r
                .overload
                .iter()
                .filter_map(|p| {
                    p.lost.map(|(l, offered)| format!("{}: {}", p.label(), l.shares(offered)))
                })
                .collect();
            if !lost.is_empty() {
                let _ = writeln!(
                    s,
                    "  where its lost frames were dropped, share of offered: {}",
                    lost.join("; ")
                );
            }
        }
    }
    let lost: Vec<(&str, Losses, u64)> =
        results.iter().filter_map(|r| r.lost().map(|(l, n)| (r.set.name.as_str(), l, n))).collect();
    if !lost.is_empty() {
        let _ = writeln!(
            s,
            "where the lost frames were dropped, share of offered in the runs (input: the DUT's input ring was full; inside: the DUT dropped them; output: the receiver's ring was full; counters.txt):"
        );
        for (name, l, offered) in lost {
            let _ = writeln!(s, "  {name}: {}", l.shares(offered));
        }
    }
    let base_rtt = results.iter().find_map(|r| r.ping_us);
    for r in results {
        if let (Some(us), Some(base)) = (r.ping_us, base_rtt) {
            let _ = writeln!(
                s,
                "ping across {} (1/s, median): {us:.0} us, {:.2}x the first",
                r.set.name,
                us / base
            );
        }
    }
    let _ = write!(s, "{}", ratios(results));
    s.push('\n');
    s.push_str(&ministat(results));
    s
}

/// linerate with rules against the kernel with the same rules, linear and as a set: the
/// study's question, and the fair answer to it.
fn ratios(results: &[SetResult]) -> String {
    let find = |f: &dyn Fn(&SetResult) -> bool| {
        results.iter().find(|r| f(r)).map(|r| (r.set.name.as_str(), r.median()))
    };
    let mut s = String::new();
    for lr in results.iter().filter(|r| r.set.dut == crate::labfile::Dut::Linerate) {
        let same = |nft_set: bool| {
            find(&|r: &SetResult| {
                r.set.dut == crate::labfile::Dut::KernelNft
                    && r.set.rules == lr.set.rules
                    && r.set.nft_set == nft_set
                    && r.set.conntrack == lr.set.conntrack
                    && r.set.nat == lr.set.nat
            })
        };
        for (name, pps) in [same(false), same(true)].into_iter().flatten().filter(|(_, p)| *p > 0.0)
        {
            let _ = writeln!(s, "{} / {}: {:.2}x", lr.set.name, name, lr.median() / pps);
        }
    }
    s
}

/// Writes runs.csv, sets.csv, results.json, plot.svg and summary.txt into `dir`, and
/// tcp.csv for the [[tcp]] entries' `tcp` results if there are any.
pub fn write(
    dir: &Path,
    lab: &Lab,
    results: &[SetResult],
    tcp: &[TcpResult],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut runs = String::from("set,dut,run,pps,gen_pps,offered_pps,sent,received\n");
    let mut sets = String::from(
        "set,dut,backend,rules,flows,frame_size,imix,ipv6,runs,median_pps,min_pps,max_pps,delivered,zero_loss_pps\n",
    );
    for r in results {
        for (i, x) in r.runs.iter().enumerate() {
            let _ = writeln!(
                runs,
                "{},{},{},{:.0},{:.0},{:.0},{},{}",
                r.set.name,
                r.set.dut.name(),
                i + 1,
                x.pps,
                x.gen_pps,
                x.offered_pps,
                x.sent,
                x.received
            );
        }
        let (min, max) = r.min_max();
        let t = &r.set.traffic;
        let _ = writeln!(
            sets,
            "{},{},{},{},{},{},{},{},{},{:.0},{:.0},{:.0},{:.4},{}",
            r.set.name,
            r.set.dut.name(),
            r.set.backend,
            r.set.rules,
            t.flows,
            t.frame_size,
            t.imix,
            t.ipv6,
            r.runs.len(),
            r.median(),
            min,
            max,
            r.delivered(),
            r.search.as_ref().map(|s| format!("{:.0}", s.rate_pps)).unwrap_or_default()
        );
    }
    std::fs::write(dir.join("runs.csv"), runs)?;
    std::fs::write(dir.join("sets.csv"), sets)?;
    std::fs::write(dir.join("results.json"), format!("{}\n", to_json(lab, results, tcp)))?;
    if !tcp.is_empty() {
        std::fs::write(dir.join("tcp.csv"), tcp::csv(tcp))?;
    }
    std::fs::write(dir.join("plot.svg"), svg(results))?;
    if results.iter().any(|r| !r.overload.is_empty()) {
        // Frames offered, and where those lost were dropped (empty without the counters).
        let mut csv = String::from(
            "set,multiple,flood,offered_pps,delivered_pps,offered_frames,lost_input,lost_inside,lost_socket,lost_output\n",
        );
        for r in results {
            for p in &r.overload {
                let lost = p.lost.map_or(",,,,".to_owned(), |(l, n)| {
                    format!("{n},{},{},{},{}", l.input, l.inside, l.socket, l.output)
                });
                let _ = writeln!(
                    csv,
                    "{},{:.2},{},{:.0},{:.0},{lost}",
                    r.set.name, p.multiple, p.flood, p.offered_pps, p.delivered_pps
                );
            }
        }
        std::fs::write(dir.join("overload.csv"), csv)?;
        std::fs::write(dir.join("overload.svg"), overload_svg(results))?;
    }
    std::fs::write(
        dir.join("summary.txt"),
        format!("{}{}", summary(lab, results), tcp::summary(tcp)),
    )?;
    Ok(())
}

/// The plot: a line per swept family when the lab sweeps a parameter, else bars per set.
pub fn svg(results: &[SetResult]) -> String {
    let swept: Vec<&SetResult> = results.iter().filter(|r| r.set.sweep.is_some()).collect();
    if swept.len() >= 2 {
        let mut families: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        let mut param = String::new();
        for r in swept {
            let (base, p, v) = r.set.sweep.clone().expect("filtered");
            param = p;
            match families.iter_mut().find(|(b, _)| *b == base) {
                Some((_, pts)) => pts.push((v as f64, r.median())),
                None => families.push((base, vec![(v as f64, r.median())])),
            }
        }
        let series: Vec<(&str, Vec<(f64, f64)>)> =
            families.iter().map(|(n, p)| (n.as_str(), p.clone())).collect();
        return plot::lines(&format!("forwarding rate vs {param}"), &param, &series);
    }
    let bars: Vec<plot::Bar<'_>> = results
        .iter()
        .map(|r| {
            let (min, max) = r.min_max();
            plot::Bar { label: &r.set.name, median: r.median(), min, max }
        })
        .collect();
    plot::bars("forwarding rate at the receiver", &bars)
}

/// Delivered against offered rate, a line per set with an overload sweep.
pub fn overload_svg(results: &[SetResult]) -> String {
    let series: Vec<(&str, Vec<(f64, f64)>)> = results
        .iter()
        .filter(|r| !r.overload.is_empty())
        .map(|r| {
            (
                r.set.name.as_str(),
                r.overload.iter().map(|p| (p.offered_pps, p.delivered_pps)).collect(),
            )
        })
        .collect();
    plot::lines("delivered vs offered (overload sweep)", "offered pps", &series)
}

/// `{"sets":[{"name":..., "dut":..., "runs_pps":[...], "median_pps":...}, ...], "tcp":[...]}`
pub fn to_json(lab: &Lab, results: &[SetResult], tcp: &[TcpResult]) -> serde_json::Value {
    let sets: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            json!({
                "name": r.set.name,
                "dut": r.set.dut.name(),
                "backend": r.set.backend,
                "rules": r.set.rules,
                "nat": r.set.nat,
                "flows": r.set.traffic.flows,
                "frame_size": r.set.traffic.frame_size,
                "imix": r.set.traffic.imix,
                "ipv6": r.set.traffic.ipv6,
                "runs_pps": r.values(),
                "median_pps": r.median(),
                "gen_pps": r.runs.iter().map(|x| x.gen_pps).collect::<Vec<_>>(),
                "delivered": r.delivered(),
                "generator_capacity_pps": r.generator_pps,
                "generator_bound": r.generator_bound(),
                "offered_pps": r.offered(),
                "generator_held_back": r.generator_held_back(),
                "zero_loss_pps": r.search.as_ref().map(|s| s.rate_pps),
                "ping_rtt_us": r.ping_us,
                "overload": r.overload.iter().map(|p| json!({"multiple": p.multiple, "flood": p.flood, "offered_pps": p.offered_pps, "delivered_pps": p.delivered_pps})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "runs": lab.runs, "seconds": lab.seconds, "workers": lab.workers, "sets": sets, "tcp": tcp::to_json(tcp) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pps: f64, offered_pps: f64) -> RunResult {
        RunResult {
            pps,
            rx_per_second: vec![pps],
            sent: 0,
            gen_pps: offered_pps,
            offered: 0,
            offered_pps,
            received: 0,
            losses: None,
        }
    }

    /// The runs (offered as fast as the generator goes) close the sweep as its flood point,
    /// and the verdict compares that with the sweep's best, not with the best single run.
    #[test]
    fn flood_point_closes_the_sweep() {
        let set = Lab::default_lab().sets[1].clone();
        let runs = vec![run(300e3, 4e6), run(345e3, 5e6), run(394e3, 4.5e6)];
        let mut r = SetResult {
            set,
            runs,
            search: None,
            generator_pps: 7e6,
            overload: Vec::new(),
            ping_us: None,
        };
        for (multiple, offered, delivered) in
            [(0.5, 170e3, 170e3), (1.0, 340e3, 330e3), (3.0, 600e3, 360e3)]
        {
            r.overload.push(OverloadPoint {
                multiple,
                offered_pps: offered,
                delivered_pps: delivered,
                flood: false,
                lost: None,
            });
        }
        let flood = r.flood_point().expect("the runs offered more than the paced points");
        assert!(flood.flood && flood.offered_pps == 4.5e6 && flood.delivered_pps == 345e3);
        assert_eq!(flood.label(), format!("flood ({:.1}x)", 4.5e6 / 345e3));
        r.overload.push(flood);
        let (peak, share) = r.overload_verdict().unwrap();
        assert_eq!(peak, 360e3);
        assert!((share - 345.0 / 360.0).abs() < 1e-9);
        // A set with a fixed rate has no flood.
        r.set.traffic.rate = 1e5;
        assert!(r.flood_point().is_none());
    }

    /// The runs' losses are summed into the flood point and the summary, as shares of what
    /// the runs offered; runs without counters are left out.
    #[test]
    fn losses_are_summed_over_the_runs() {
        let lab = Lab::default_lab();
        let mut runs = vec![run(300e3, 4e6), run(345e3, 5e6), run(394e3, 4.5e6)];
        for (r, input) in runs.iter_mut().zip([600, 400]) {
            r.offered = 1000;
            r.losses = Some(Losses { input, inside: 50, socket: 40, output: 10 });
        }
        let r = SetResult {
            set: lab.sets[1].clone(),
            runs,
            search: None,
            generator_pps: 7e6,
            overload: Vec::new(),
            ping_us: None,
        };
        let want = Losses { input: 1000, inside: 100, socket: 80, output: 20 };
        assert_eq!(r.lost(), Some((want, 2000)));
        let text = summary(&lab, std::slice::from_ref(&r));
        assert!(
            text.contains(&format!(
                "\n  {}: input 50.0% / inside 5.0% (socket 4.0%) / output 1.0%\n",
                r.set.name
            )),
            "{text}"
        );
    }
}
