//! `linerate stat`: a byte-for-byte compatible clone of FreeBSD's current `ministat(1)`
//! (usr.bin/ministat/ministat.c with `-A`, `-P` and `-q`, the two-pass variance, the
//! averaged median for even `n` and the relative "+/- %" term
//! `t·sqrt(((n-1)V + (n0-1)V0·avg²/avg0²)·(n+n0)/(n·n0·df))·100/avg0`).
//!
//! Two faces:
//!
//! * [`run`] is the command: ministat's argv without the program name, its getopt(3)
//!   parsing (FreeBSD's: no permutation, `--`, clustered flags, `-c99` and `-c 99`), its
//!   output, its messages on stderr and its exit status. Messages keep ministat's own
//!   program name (`ministat: Cannot open x: No such file or directory`, and the usage
//!   text says `Usage: ministat ...`) so stderr is byte-identical too.
//! * [`Sample`], [`Summary`], [`student_t`], [`difference`] and [`compare`] are the library
//!   the lab uses to render the same report from numbers it already has.
//!
//! Deviations, all where FreeBSD's ministat has undefined behaviour:
//!
//! * `-` as a file operand in a position other than the first: FreeBSD's code stores
//!   stdin in slot 0 and reads an uninitialised `FILE *` for the operand's own slot; here
//!   that operand reads standard input (the name printed is `-`, as in FreeBSD).
//! * Plot widths 0 and 1 (`-w 0`, `-w 1`) and non-finite data (`inf`, `nan`): FreeBSD
//!   writes outside its plot buffers or converts NaN to `int` (it crashes with `-w 1`).
//!   Here the same coordinates are computed and writes that would fall outside the buffers
//!   are dropped, so the output is what FreeBSD prints when it does not crash.
//! * NaN prints as `nan` (FreeBSD's printf); the order of equal-comparing values (`-0`
//!   and `0`) and of NaNs after sorting follows a stable sort rather than FreeBSD's qsort.
//! * A width from the terminal: `run` writes to a `dyn Write`, so it behaves as ministat
//!   does when stdout is not a terminal (width 74). The CLI can pass ministat's terminal
//!   default (computed by [`terminal_default_width`]) to [`run_with_default_width`].

pub mod cfmt;
mod cli;
mod plot;
mod sample;
mod table;

use cfmt::{fmt_g, fmt_g_width};
use plot::{Plot, SYMBOL};
use table::{NSTUDENT, STUDENT};

pub use cli::{run, run_with_default_width, terminal_default_width};
pub use sample::{Sample, Summary};

/// The program name in messages, as ministat's err(3)/usage print it.
const PROG: &str = "ministat";
/// Most data sets ministat compares.
pub const MAX_SETS: usize = 7;

/// A confidence level of ministat's Student's t table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Confidence {
    P80,
    P90,
    #[default]
    P95,
    P98,
    P99,
    P99_5,
}

impl Confidence {
    pub const ALL: [Confidence; 6] = [
        Confidence::P80,
        Confidence::P90,
        Confidence::P95,
        Confidence::P98,
        Confidence::P99,
        Confidence::P99_5,
    ];

    /// The level in percent: 80, 90, 95, 98, 99 or 99.5.
    pub fn percent(self) -> f64 {
        [80.0, 90.0, 95.0, 98.0, 99.0, 99.5][self.index()]
    }

    /// The level whose percentage equals `pct` exactly (as ministat's `-c` compares).
    pub fn from_percent(pct: f64) -> Option<Confidence> {
        Self::ALL.into_iter().find(|c| c.percent() == pct)
    }

    fn index(self) -> usize {
        self as usize
    }

    /// `printf("%.1f", percent)`.
    fn label(self) -> &'static str {
        ["80.0", "90.0", "95.0", "98.0", "99.0", "99.5"][self.index()]
    }
}

/// The two-sided Student's t critical value ministat uses for `df` degrees of freedom:
/// its table row `df` for 1..=100 and the infinite row above 100. `df == 0` has no value
/// (NaN); ministat never asks for it (it needs three points per set).
pub fn student_t(df: usize, confidence: Confidence) -> f64 {
    match df {
        0 => f64::NAN,
        d if d > NSTUDENT => STUDENT[0][confidence.index()],
        d => STUDENT[d][confidence.index()],
    }
}

/// Student's t comparison of a sample against the reference (first) sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Difference {
    pub confidence: Confidence,
    /// The t value used.
    pub t: f64,
    /// mean - reference mean.
    pub diff: f64,
    /// The confidence interval half-width for `diff`.
    pub margin: f64,
    /// `diff` in percent of the reference mean.
    pub diff_pct: f64,
    /// The half-width of the relative difference, in percent of the reference mean.
    pub margin_pct: f64,
    /// The pooled standard deviation.
    pub pooled_sd: f64,
    /// Whether |diff| > margin: "Difference at .. confidence".
    pub significant: bool,
}

/// ministat's `Relative()`: `sample` compared against `reference`.
pub fn difference(sample: &Sample, reference: &Sample, confidence: Confidence) -> Difference {
    let (n, n0) = (sample.len(), reference.len());
    let t = student_t((n + n0).wrapping_sub(2), confidence);
    let (v, v0) = (sample.variance(), reference.variance());
    let (a, a0) = (sample.mean(), reference.mean());
    let mut spool = (n - 1) as f64 * v + (n0 - 1) as f64 * v0;
    spool /= (n + n0 - 2) as f64;
    let spool = spool.sqrt();
    let s = spool * (1.0 / n as f64 + 1.0 / n0 as f64).sqrt();
    let d = a - a0;
    let e = t * s;
    let mut re = (n - 1) as f64 * v + (n0 - 1) as f64 * v0 * (a * a) / (a0 * a0);
    re *= (n + n0) as f64 / ((n * n0) as f64 * ((n + n0) as f64 - 2.0));
    let re = t * re.sqrt();
    Difference {
        confidence,
        t,
        diff: d,
        margin: e,
        diff_pct: d * 100.0 / a0,
        margin_pct: re * 100.0 / a0,
        pooled_sd: spool,
        significant: d.abs() > e,
    }
}

/// What ministat prints, set by its flags.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// `-c`: confidence level of the t test (default 95 %).
    pub confidence: Confidence,
    /// `-w`: plot width in characters between the frame's corners (default 74). Widths
    /// below 2 are degenerate (see the module notes).
    pub width: i32,
    /// `-s`: each set's avg/median/stddev bar on its own line.
    pub separate_bars: bool,
    /// `-A`: no plot, but still the relative comparisons.
    pub suppress_plot: bool,
    /// `-n`: summary statistics only: no plot, no comparisons.
    pub summary_only: bool,
    /// `-q`: no legend lines ("x file") and no table header.
    pub quiet: bool,
    /// `-P`: population standard deviation; suppresses the comparisons.
    pub population: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            confidence: Confidence::P95,
            width: 74,
            separate_bars: false,
            suppress_plot: false,
            summary_only: false,
            quiet: false,
            population: false,
        }
    }
}

/// Why [`try_compare`] cannot render.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    #[error("no data sets")]
    NoSets,
    #[error("too many data sets ({0}); ministat compares at most 7")]
    TooManySets(usize),
    #[error("Dataset {0} must contain at least 3 data points")]
    TooFewPoints(String),
}

/// ministat's report (stdout) for named data sets, the first being the reference.
/// Panics where [`try_compare`] returns an error.
pub fn compare(samples: &[(String, Vec<f64>)], opts: &Options) -> String {
    match try_compare(samples, opts) {
        Ok(s) => s,
        Err(e) => panic!("stat::compare: {e}"),
    }
}

/// ministat's report, or why ministat would refuse the data sets: none, more than 7, or
/// one with fewer than 3 points.
pub fn try_compare(samples: &[(String, Vec<f64>)], opts: &Options) -> Result<String, CompareError> {
    if samples.is_empty() {
        return Err(CompareError::NoSets);
    }
    if samples.len() > MAX_SETS {
        return Err(CompareError::TooManySets(samples.len()));
    }
    let mut sets = Vec::with_capacity(samples.len());
    for (name, points) in samples {
        if points.len() < 3 {
            return Err(CompareError::TooFewPoints(name.clone()));
        }
        sets.push((name.as_bytes().to_vec(), Sample::new(points.clone())));
    }
    let out = render(&sets, opts);
    Ok(String::from_utf8(out).expect("names are UTF-8 and the rest is ASCII"))
}

/// The report for already-read data sets (each with at least one point).
fn render(sets: &[(Vec<u8>, Sample)], opts: &Options) -> Vec<u8> {
    let mut out = Vec::new();
    if !opts.quiet {
        for (i, (name, _)) in sets.iter().enumerate() {
            out.push(SYMBOL[i + 1]);
            out.push(b' ');
            out.extend_from_slice(name);
            out.push(b'\n');
        }
    }
    if !opts.summary_only && !opts.suppress_plot {
        let mut plot = Plot::new(opts.width, opts.separate_bars, sets.len());
        for (_, s) in sets {
            plot.dim(s, opts.population);
        }
        for (i, (_, s)) in sets.iter().enumerate() {
            plot.add(s, i as u8 + 1, opts.population);
        }
        plot.dump(&mut out);
    }
    if !opts.quiet {
        out.extend_from_slice(
            b"    N           Min           Max        Median           Avg        Stddev\n",
        );
    }
    for (i, (_, s)) in sets.iter().enumerate() {
        vitals(&mut out, s, i + 1, opts.population);
        if i > 0 && !opts.summary_only && !opts.population {
            relative(&mut out, &difference(s, &sets[0].1, opts.confidence));
        }
    }
    out
}

fn vitals(out: &mut Vec<u8>, s: &Sample, flag: usize, population: bool) {
    let line = format!(
        "{} {:>3} {} {} {} {} {}\n",
        SYMBOL[flag] as char,
        s.len(),
        fmt_g_width(s.min(), 13, 8),
        fmt_g_width(s.max(), 13, 8),
        fmt_g_width(s.median(), 13, 8),
        fmt_g_width(s.mean(), 13, 8),
        fmt_g_width(s.stddev(population), 13, 8),
    );
    out.extend_from_slice(line.as_bytes());
}

fn relative(out: &mut Vec<u8>, d: &Difference) {
    let text = if d.significant {
        format!(
            "Difference at {}% confidence\n\t{} +/- {}\n\t{}% +/- {}%\n\t(Student's t, pooled s = {})\n",
            d.confidence.label(),
            fmt_g(d.diff, 6),
            fmt_g(d.margin, 6),
            fmt_g(d.diff_pct, 6),
            fmt_g(d.margin_pct, 6),
            fmt_g(d.pooled_sd, 6),
        )
    } else {
        format!("No difference proven at {}% confidence\n", d.confidence.label())
    };
    out.extend_from_slice(text.as_bytes());
}

/// The smallest and largest of `v`; (0, 0) for none.
pub fn min_max(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// Median (mean of the middle two for an even count); 0 for none.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn student_rows() {
        assert_eq!(student_t(1, Confidence::P95), 12.706);
        assert_eq!(student_t(10, Confidence::P80), 1.372);
        assert_eq!(student_t(100, Confidence::P99_5), 3.174);
        assert_eq!(student_t(101, Confidence::P95), 1.960);
        assert!(student_t(0, Confidence::P95).is_nan());
        assert_eq!(Confidence::from_percent(99.5), Some(Confidence::P99_5));
        assert_eq!(Confidence::from_percent(97.0), None);
    }

    #[test]
    fn sample_stats() {
        let s = Sample::from(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(s.points(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.median(), 2.5);
        assert_eq!(s.mean(), 2.5);
        let sum = s.summary(false);
        assert_eq!((sum.n, sum.min, sum.max), (4, 1.0, 4.0));
        assert!((sum.stddev - 1.2909944487358056).abs() < 1e-15);
    }
}
