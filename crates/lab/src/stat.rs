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

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{Read, Write};

pub mod cfmt;
mod table;

use cfmt::{fmt_g, fmt_g_width};
use table::{NSTUDENT, STUDENT};

/// The program name in messages, as ministat's err(3)/usage print it.
const PROG: &str = "ministat";
/// Plot symbols: index 1..=7 is the data set, bitwise-or'ed where sets overlap.
const SYMBOL: [u8; 8] = *b" x+*%#@O";
/// Most data sets ministat compares.
pub const MAX_SETS: usize = 7;
/// ministat's `fgets` buffer: FreeBSD's `BUFSIZ`. Longer lines are read in pieces, each
/// counting as a line.
const BUFSIZ: usize = 1024;

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

/// One data set, computed as ministat does: the sum in input order, the points sorted,
/// the variance by a second pass over the sorted points around the mean.
#[derive(Clone, Debug)]
pub struct Sample {
    points: Vec<f64>,
    sum: f64,
    sum_sq_dev: f64,
}

impl Sample {
    pub fn new(mut points: Vec<f64>) -> Sample {
        let sum = points.iter().fold(0.0, |s, &p| s + p);
        points.sort_by(dbl_cmp);
        let mut s = Sample {
            points,
            sum,
            sum_sq_dev: 0.0,
        };
        let a = s.mean();
        s.sum_sq_dev = s.points.iter().fold(0.0, |acc, &p| acc + (p - a) * (p - a));
        s
    }

    /// The points, sorted.
    pub fn points(&self) -> &[f64] {
        &self.points
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Smallest point (NaN for an empty sample).
    pub fn min(&self) -> f64 {
        self.points.first().copied().unwrap_or(f64::NAN)
    }

    /// Largest point (NaN for an empty sample).
    pub fn max(&self) -> f64 {
        self.points.last().copied().unwrap_or(f64::NAN)
    }

    pub fn mean(&self) -> f64 {
        self.sum / self.len() as f64
    }

    /// The middle point, or the mean of the two middle points for an even count.
    pub fn median(&self) -> f64 {
        let n = self.len();
        if n == 0 {
            return f64::NAN;
        }
        let m = n / 2;
        if n.is_multiple_of(2) {
            (self.points[m] + self.points[m - 1]) / 2.0
        } else {
            self.points[m]
        }
    }

    /// Sample variance (divisor n - 1).
    pub fn variance(&self) -> f64 {
        self.sum_sq_dev / (self.len() as f64 - 1.0)
    }

    /// Sample standard deviation, or with `population` (`-P`) the population one.
    pub fn stddev(&self, population: bool) -> f64 {
        let n = self.len() as f64;
        if population {
            self.variance().sqrt() * ((n - 1.0) / n).sqrt()
        } else {
            self.variance().sqrt()
        }
    }

    pub fn summary(&self, population: bool) -> Summary {
        Summary {
            n: self.len(),
            min: self.min(),
            max: self.max(),
            median: self.median(),
            avg: self.mean(),
            stddev: self.stddev(population),
        }
    }
}

impl From<Vec<f64>> for Sample {
    fn from(points: Vec<f64>) -> Sample {
        Sample::new(points)
    }
}

/// ministat's `dbl_cmp`, made a total order for `sort_by` (NaNs last).
fn dbl_cmp(a: &f64, b: &f64) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_nan(), b.is_nan()) {
        (false, false) => a.partial_cmp(b).unwrap_or(Equal),
        (true, true) => Equal,
        (true, false) => Greater,
        (false, true) => Less,
    }
}

/// The statistics of one line of ministat's table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub avg: f64,
    pub stddev: f64,
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
        format!(
            "No difference proven at {}% confidence\n",
            d.confidence.label()
        )
    };
    out.extend_from_slice(text.as_bytes());
}

/// C's `(int)double` as amd64 does it: truncation, and INT_MIN for NaN or out of range.
fn c_int(v: f64) -> i64 {
    if v.is_nan() || v >= 2147483648.0 || v <= -2147483649.0 {
        i32::MIN as i64
    } else {
        v.trunc() as i64
    }
}

/// ministat's ASCII-art plot.
struct Plot {
    min: f64,
    max: f64,
    span: f64,
    width: i32,
    x0: f64,
    dx: f64,
    height: usize,
    data: Vec<u8>,
    bars: Vec<Option<Vec<u8>>>,
    separate: bool,
}

impl Plot {
    fn new(width: i32, separate: bool, num_sets: usize) -> Plot {
        Plot {
            min: 999e99,
            max: -999e99,
            span: 0.0,
            width,
            x0: 0.0,
            dx: 0.0,
            height: 0,
            data: Vec::new(),
            bars: vec![None; num_sets],
            separate,
        }
    }

    fn w(&self) -> usize {
        self.width.max(0) as usize
    }

    fn adj(&mut self, a: f64) {
        if a < self.min {
            self.min = a;
        }
        if a > self.max {
            self.max = a;
        }
        self.span = self.max - self.min;
        self.dx = self.span / (self.width as f64 - 1.0);
        self.x0 = self.min - 0.5 * self.dx;
    }

    fn dim(&mut self, s: &Sample, population: bool) {
        let (a, sd) = (s.mean(), s.stddev(population));
        self.adj(s.min());
        self.adj(s.max());
        self.adj(a - sd);
        self.adj(a + sd);
    }

    fn col(&self, v: f64) -> i64 {
        c_int((v - self.x0) / self.dx)
    }

    fn add(&mut self, s: &Sample, val: u8, population: bool) {
        if self.span == 0.0 {
            return;
        }
        let w = self.w();
        let bar = if self.separate { val as usize - 1 } else { 0 };
        if self.bars[bar].is_none() {
            self.bars[bar] = Some(vec![0; w]);
        }
        // Height needed: the longest run of points falling in the same column, plus one.
        let mut m: usize = 1;
        let mut i: i64 = -1;
        let mut j: usize = 0;
        for &p in s.points() {
            let x = self.col(p);
            if x == i {
                j += 1;
                if j > m {
                    m = j;
                }
            } else {
                j = 1;
                i = x;
            }
        }
        m += 1;
        if m > self.height {
            // realloc to m rows; rows from the current height on are cleared.
            self.data.resize(w * m, 0);
            self.data[self.height * w..].fill(0);
        }
        self.height = m;
        i = -1;
        for &p in s.points() {
            let x = self.col(p);
            if x == i {
                j += 1;
            } else {
                j = 1;
                i = x;
            }
            let idx = j as i128 * w as i128 + x as i128;
            if idx >= 0 && (idx as usize) < self.data.len() {
                self.data[idx as usize] |= val;
            }
        }
        let (av, sd) = (s.mean(), s.stddev(population));
        let med = self.col(s.median());
        let avx = self.col(av);
        let (lo, hi) = (self.col(av - sd), self.col(av + sd));
        let b = self.bars[bar].as_mut().expect("allocated above");
        let mut set = |k: i64, c: u8| {
            if k >= 0 && (k as usize) < b.len() {
                b[k as usize] = c;
            }
        };
        if !sd.is_nan() {
            set(hi, b'|');
            set(lo, b'|');
            let start = lo + 1;
            if start >= 0 {
                for z in start..hi.min(w as i64) {
                    if b[z as usize] == 0 {
                        b[z as usize] = b'_';
                    }
                }
            }
        }
        let b = self.bars[bar].as_mut().expect("allocated above");
        for (k, c) in [(med, b'M'), (avx, b'A')] {
            if k >= 0 && (k as usize) < b.len() {
                b[k as usize] = c;
            }
        }
    }

    fn dump(&self, out: &mut Vec<u8>) {
        if self.span == 0.0 {
            out.extend_from_slice(b"[no plot, span is zero width]\n");
            return;
        }
        let w = self.w();
        let border = |out: &mut Vec<u8>| {
            out.push(b'+');
            out.extend(std::iter::repeat_n(b'-', w));
            out.extend_from_slice(b"+\n");
        };
        border(out);
        for z in 1..self.height {
            out.push(b'|');
            let row = (self.height - z) * w;
            for &k in &self.data[row..row + w] {
                let k = k as i8;
                if (0..8).contains(&k) {
                    out.push(SYMBOL[k as usize]);
                } else {
                    out.extend_from_slice(format!("[{:02x}]", k as i32 as u32).as_bytes());
                }
            }
            out.extend_from_slice(b"|\n");
        }
        for b in self.bars.iter().flatten() {
            out.push(b'|');
            out.extend(b.iter().map(|&k| if k == 0 { b' ' } else { k }));
            out.extend_from_slice(b"|\n");
        }
        border(out);
    }
}

/// The plot width ministat picks when its stdout is a terminal: `$COLUMNS` (through
/// `atoi`) when set and non-empty, else the terminal's column count minus 2 when known and
/// positive, else 74. (When stdout is not a terminal ministat uses 74.)
pub fn terminal_default_width(columns: Option<&OsStr>, terminal_cols: Option<u16>) -> i32 {
    if let Some(c) = columns {
        let b = os_bytes(c);
        if !b.is_empty() {
            return cfmt::long_to_int(cfmt::strtol(&b).0);
        }
    }
    match terminal_cols {
        Some(c) if c > 0 => c as i32 - 2,
        _ => 74,
    }
}

/// `ministat` with `args` (without the program name): reads the files named (or stdin),
/// writes the report to `stdout` and messages to `stderr`, and returns the exit status
/// (0, or 2 for usage and data errors and unopenable files). Behaves as ministat does when
/// its stdout is not a terminal (default width 74).
pub fn run(
    args: &[OsString],
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    run_with_default_width(args, stdin, stdout, stderr, 74)
}

/// [`run`] with the plot width used when `-w` is not given (see
/// [`terminal_default_width`] for ministat's rule on a terminal).
pub fn run_with_default_width(
    args: &[OsString],
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    default_width: i32,
) -> i32 {
    match main(args, stdin, default_width) {
        Ok(out) => {
            // ministat ignores write errors (stdio) and exits 0.
            let _ = stdout.write_all(&out);
            let _ = stdout.flush();
            0
        }
        Err(Exit { code, message }) => {
            let _ = stderr.write_all(&message);
            let _ = stderr.flush();
            code
        }
    }
}

/// An exit with a status and what was written to stderr.
struct Exit {
    code: i32,
    message: Vec<u8>,
}

impl fmt::Debug for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit {}: {}",
            self.code,
            String::from_utf8_lossy(&self.message)
        )
    }
}

fn usage(prefix: Vec<u8>, whine: &str) -> Exit {
    let mut m = prefix;
    m.extend_from_slice(whine.as_bytes());
    m.extend_from_slice(
        concat!(
            "\n",
            "Usage: ministat [-C column] [-c confidence] [-d delimiter(s)] [-AnPqs] [-w width] [file [file ...]]\n",
            "\tconfidence = {80%, 90%, 95%, 98%, 99%, 99.5%}\n",
            "\t-A : print statistics only. suppress the graph.\n",
            "\t-C : column number to extract (starts and defaults to 1)\n",
            "\t-d : delimiter(s) string, default to \" \\t\"\n",
            "\t-n : print summary statistics only, no graph/test\n",
            "\t-P : calculate the standard deviation from an entire population\n",
            "\t-q : suppress printing summary-statistics headers and data-set names\n",
            "\t-s : print avg/median/stddev bars on separate lines\n",
            "\t-w : width of graph/test output (default 74 or terminal width)\n",
        )
        .as_bytes(),
    );
    Exit {
        code: 2,
        message: m,
    }
}

fn os_bytes(s: &OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        s.as_bytes().to_vec()
    }
    #[cfg(not(unix))]
    {
        s.to_string_lossy().into_owned().into_bytes()
    }
}

/// err(3)'s text for an I/O error: strerror's message without Rust's " (os error N)".
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// ministat's `main`: the report, or the exit.
fn main(args: &[OsString], stdin: &mut dyn Read, default_width: i32) -> Result<Vec<u8>, Exit> {
    let args: Vec<Vec<u8>> = args.iter().map(|a| os_bytes(a)).collect();
    let mut opts = Options {
        width: default_width,
        ..Options::default()
    };
    let mut ci: Option<Confidence> = None;
    let mut column: i32 = 1;
    let mut delim: Vec<u8> = b" \t".to_vec();

    // FreeBSD getopt(3) with "AC:c:d:nPqsw:".
    let mut optind = 0;
    let mut place = 0; // position inside args[optind]; 0 = start a new argument
    loop {
        if place == 0 {
            let Some(a) = args.get(optind) else { break };
            if a.first() != Some(&b'-') || a.len() == 1 {
                break;
            }
            if a == b"--" {
                optind += 1;
                break;
            }
            place = 1;
        }
        let a = &args[optind];
        let opt = a[place];
        place += 1;
        let at_end = place == a.len();
        let takes_arg = match opt {
            b'A' | b'n' | b'P' | b'q' | b's' => false,
            b'C' | b'c' | b'd' | b'w' => true,
            _ => {
                let mut m = format!("{PROG}: illegal option -- ").into_bytes();
                m.push(opt);
                m.push(b'\n');
                return Err(usage(m, "Unknown option"));
            }
        };
        let optarg: Vec<u8> = if !takes_arg {
            if at_end {
                optind += 1;
                place = 0;
            }
            Vec::new()
        } else {
            let v = if !at_end {
                a[place..].to_vec()
            } else if optind + 1 < args.len() {
                optind += 1;
                args[optind].clone()
            } else {
                let mut m = format!("{PROG}: option requires an argument -- ").into_bytes();
                m.push(opt);
                m.push(b'\n');
                return Err(usage(m, "Unknown option"));
            };
            optind += 1;
            place = 0;
            v
        };
        match opt {
            b'A' => opts.suppress_plot = true,
            b'C' => {
                let (v, n) = cfmt::strtol(&optarg);
                if n < optarg.len() {
                    return Err(usage(Vec::new(), "Invalid column number."));
                }
                column = cfmt::long_to_int(v);
                if column <= 0 {
                    return Err(usage(Vec::new(), "Column number should be positive."));
                }
            }
            b'c' => {
                let (v, n) = cfmt::strtod(&optarg);
                if n < optarg.len() {
                    return Err(usage(Vec::new(), "Not a floating point number"));
                }
                if let Some(c) = Confidence::from_percent(v) {
                    ci = Some(c);
                }
                if ci.is_none() {
                    return Err(usage(Vec::new(), "No support for confidence level"));
                }
            }
            b'd' => {
                if optarg.is_empty() {
                    return Err(usage(Vec::new(), "Can't use empty delimiter string"));
                }
                delim = optarg;
            }
            b'n' => opts.summary_only = true,
            b'P' => opts.population = true,
            b'q' => opts.quiet = true,
            b's' => opts.separate_bars = true,
            b'w' => {
                let (v, n) = cfmt::strtol(&optarg);
                if n < optarg.len() {
                    return Err(usage(Vec::new(), "Invalid width, not a number."));
                }
                opts.width = cfmt::long_to_int(v);
                if opts.width < 0 {
                    return Err(usage(Vec::new(), "Unable to move beyond left margin."));
                }
            }
            _ => unreachable!(),
        }
    }
    opts.confidence = ci.unwrap_or(Confidence::P95);
    let operands = &args[optind..];

    // Open everything first (ministat does, before entering its sandbox), then read.
    enum Src {
        Stdin,
        File(std::fs::File),
    }
    let mut sources: Vec<(Vec<u8>, Src)> = Vec::new();
    if operands.is_empty() {
        sources.push((b"<stdin>".to_vec(), Src::Stdin));
    } else {
        if operands.len() > MAX_SETS {
            return Err(usage(Vec::new(), "Too many datasets."));
        }
        for name in operands {
            if name == b"-" {
                sources.push((name.clone(), Src::Stdin));
                continue;
            }
            match std::fs::File::open(os_path(name)) {
                Ok(f) => sources.push((name.clone(), Src::File(f))),
                Err(e) => {
                    let mut m = format!("{PROG}: Cannot open ").into_bytes();
                    m.extend_from_slice(name);
                    m.extend_from_slice(format!(": {}\n", strerror(&e)).as_bytes());
                    return Err(Exit {
                        code: 2,
                        message: m,
                    });
                }
            }
        }
    }
    let mut sets = Vec::with_capacity(sources.len());
    for (name, src) in sources {
        let mut buf = Vec::new();
        // fgets stops at a read error as at end of file; keep what was read.
        let _ = match src {
            Src::Stdin => stdin.read_to_end(&mut buf),
            Src::File(mut f) => f.read_to_end(&mut buf),
        };
        let points = read_set(&buf, &name, column, &delim)?;
        sets.push((name, Sample::new(points)));
    }
    Ok(render(&sets, &opts))
}

/// The operand as a path (bytes back to an OS string).
fn os_path(name: &[u8]) -> OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(name.to_vec())
    }
    #[cfg(not(unix))]
    {
        OsString::from(String::from_utf8_lossy(name).into_owned())
    }
}

/// ministat's `ReadSet`: one value per line from `column` of the `delim`-separated
/// fields; lines whose first fields up to `column` include one starting with `#`, and
/// lines with fewer fields, are skipped.
fn read_set(input: &[u8], name: &[u8], column: i32, delim: &[u8]) -> Result<Vec<f64>, Exit> {
    let mut points = Vec::new();
    let mut line: i32 = 0;
    let mut rest = input;
    while !rest.is_empty() {
        // fgets(buf, BUFSIZ, f)
        let max = BUFSIZ - 1;
        let len = match rest.iter().take(max).position(|&b| b == b'\n') {
            Some(p) => p + 1,
            None => rest.len().min(max),
        };
        let mut buf = &rest[..len];
        rest = &rest[len..];
        line = line.wrapping_add(1);
        // strlen, then strip trailing white space.
        if let Some(nul) = buf.iter().position(|&b| b == 0) {
            buf = &buf[..nul];
        }
        while let Some((&last, init)) = buf.split_last() {
            if !cfmt::is_c_space(last) {
                break;
            }
            buf = init;
        }
        let mut tokens = buf.split(|b| delim.contains(b)).filter(|t| !t.is_empty());
        let mut i: i32 = 1;
        let mut t = tokens.next();
        while let Some(tok) = t {
            if tok[0] == b'#' || i == column {
                break;
            }
            i = i.wrapping_add(1);
            t = tokens.next();
        }
        let Some(tok) = t else { continue };
        if tok[0] == b'#' {
            continue;
        }
        let (d, n) = cfmt::strtod(tok);
        if n < tok.len() {
            let mut m = format!("{PROG}: Invalid data on line {line} in ").into_bytes();
            m.extend_from_slice(name);
            m.push(b'\n');
            return Err(Exit {
                code: 2,
                message: m,
            });
        }
        points.push(d);
    }
    if points.len() < 3 {
        let mut m = b"Dataset ".to_vec();
        m.extend_from_slice(name);
        m.extend_from_slice(b" must contain at least 3 data points\n");
        return Err(Exit {
            code: 2,
            message: m,
        });
    }
    Ok(points)
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

    #[test]
    fn terminal_width_rule() {
        assert_eq!(terminal_default_width(None, None), 74);
        assert_eq!(terminal_default_width(Some(OsStr::new("")), Some(100)), 98);
        assert_eq!(
            terminal_default_width(Some(OsStr::new("120x")), Some(100)),
            120
        );
        assert_eq!(terminal_default_width(Some(OsStr::new("abc")), None), 0);
        assert_eq!(terminal_default_width(None, Some(0)), 74);
    }

    #[test]
    fn strtok_skips_and_comments() {
        let v = read_set(b"1 2\n# c\n  3\t4 # x\n\n5 #\n", b"f", 1, b" \t").unwrap();
        assert_eq!(v, vec![1.0, 3.0, 5.0]);
        let v = read_set(b"1 2\n3 #4\n5 6\n7\n8 9", b"f", 2, b" \t").unwrap();
        assert_eq!(v, vec![2.0, 6.0, 9.0]);
        let e = read_set(b"1\n2\n3x\n", b"f", 1, b" \t").unwrap_err();
        assert_eq!(e.code, 2);
        assert_eq!(e.message, b"ministat: Invalid data on line 3 in f\n");
    }
}
