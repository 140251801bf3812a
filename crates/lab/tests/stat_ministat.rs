//! `linerate stat` against real ministat outputs (tests/stat_fixtures, see generate.py):
//!
//! * cases/: current FreeBSD ministat.c built on Linux (the target behaviour): stdout,
//!   stderr and exit status must match byte for byte.
//! * debian/: Debian's ministat 20150715 binary, for the cases where it differs from
//!   current FreeBSD only in the relative "+/- %" line; that line is recomputed here with
//!   current FreeBSD's formula and patched in before comparing.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use lab::stat::{self, Confidence, cfmt};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stat_fixtures")
}

struct Case {
    name: String,
    args: Vec<String>,
    stdin: Vec<u8>,
}

fn cases() -> Vec<Case> {
    let dir = fixtures().join("cases");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".args").map(str::to_string)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let args = fs::read_to_string(dir.join(format!("{name}.args")))
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
            let stdin = fs::read(dir.join(format!("{name}.stdin"))).unwrap_or_default();
            Case { name, args, stdin }
        })
        .collect()
}

/// Runs `linerate stat` in the data directory (the fixtures name files relatively, and
/// ministat prints the names as given).
fn run_case(c: &Case) -> (Vec<u8>, Vec<u8>, i32) {
    let args: Vec<OsString> = c.args.iter().map(OsString::from).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let rc = stat::run(&args, &mut &c.stdin[..], &mut out, &mut err);
    (out, err, rc)
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// One test owns the process's working directory; everything else uses absolute paths.
#[test]
fn ministat_fixtures() {
    std::env::set_current_dir(fixtures().join("data")).unwrap();
    let all = cases();
    assert!(all.len() >= 100, "fixtures missing: {}", all.len());
    let mut failures = Vec::new();
    for c in &all {
        let dir = fixtures().join("cases");
        let want_out = fs::read(dir.join(format!("{}.out", c.name))).unwrap();
        let want_err = fs::read(dir.join(format!("{}.err", c.name))).unwrap();
        let want_rc: i32 =
            fs::read_to_string(dir.join(format!("{}.rc", c.name))).unwrap().trim().parse().unwrap();
        let (out, err, rc) = run_case(c);
        if out != want_out || err != want_err || rc != want_rc {
            failures.push(format!(
                "== {} ({:?})\n-- want rc {want_rc}\n{}{}\n-- got rc {rc}\n{}{}",
                c.name,
                c.args,
                show(&want_out),
                show(&want_err),
                show(&out),
                show(&err)
            ));
        }
    }
    eprintln!("FreeBSD-current fixtures: {} of {} match", all.len() - failures.len(), all.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Debian's binary, with the relative line recomputed.
    let ddir = fixtures().join("debian");
    let mut checked = 0;
    let mut patched_lines = 0;
    for c in &all {
        let Ok(dout) = fs::read(ddir.join(format!("{}.out", c.name))) else {
            continue;
        };
        let derr = fs::read(ddir.join(format!("{}.err", c.name))).unwrap();
        let drc: i32 = fs::read_to_string(ddir.join(format!("{}.rc", c.name)))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let (want, n) = patch_relative(&show(&dout), c);
        patched_lines += n;
        let (out, err, rc) = run_case(c);
        assert_eq!(
            (show(&out), show(&err), rc),
            (want, show(&derr), drc),
            "Debian case {} ({:?})",
            c.name,
            c.args
        );
        checked += 1;
    }
    eprintln!("Debian fixtures: {checked} match ({patched_lines} relative lines recomputed)");
    assert!(checked >= 40, "too few Debian references: {checked}");
    assert!(patched_lines >= 25, "{patched_lines}");
}

/// Debian's relative line "\t<d>% +/- <old>%" becomes "\t<d>% +/- <new>%" with
/// new = t·sqrt(((n-1)V + (n0-1)V0·avg²/avg0²)·(n+n0)/(n·n0·df))·100/avg0, computed here
/// from the data files the case names. Returns the patched text and the lines patched.
fn patch_relative(debian: &str, c: &Case) -> (String, usize) {
    if !debian.contains("% +/- ") {
        return (debian.to_string(), 0);
    }
    let inv = Invocation::parse(&c.args);
    let sets: Vec<Vec<f64>> = if inv.files.is_empty() {
        vec![read_values(&c.stdin, inv.column, &inv.delim)]
    } else {
        inv.files
            .iter()
            .map(|f| {
                if f == "-" {
                    read_values(&c.stdin, inv.column, &inv.delim)
                } else {
                    read_values(
                        &fs::read(fixtures().join("data").join(f)).unwrap(),
                        inv.column,
                        &inv.delim,
                    )
                }
            })
            .collect()
    };
    let mut margins = sets[1..].iter().map(|s| new_margin_pct(s, &sets[0], inv.confidence));
    let mut patched = 0;
    let mut out = String::new();
    for line in debian.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let is_rel = body.starts_with('\t') && body.ends_with('%') && body.contains("% +/- ");
        if is_rel {
            let (head, _) = body.split_once(" +/- ").unwrap();
            // The difference lines come in set order, one per significant set; skip the
            // margins of sets with "No difference proven" (they print no such line).
            let m = loop {
                let (m, significant) = margins.next().expect("a margin per relative line");
                if significant {
                    break m;
                }
            };
            out.push_str(&format!("{head} +/- {}%\n", cfmt::fmt_g(m, 6)));
            patched += 1;
        } else {
            out.push_str(line);
        }
    }
    (out, patched)
}

/// (new relative margin in %, whether ministat reports a difference).
fn new_margin_pct(s: &[f64], r: &[f64], conf: Confidence) -> (f64, bool) {
    let stats = |v: &[f64]| {
        let n = v.len() as f64;
        let avg = v.iter().sum::<f64>() / n;
        let mut sorted = v.to_vec();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let var = sorted.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / (n - 1.0);
        (n, avg, var)
    };
    let (n, avg, var) = stats(s);
    let (n0, avg0, var0) = stats(r);
    let df = n + n0 - 2.0;
    let t = stat::student_t(df as usize, conf);
    let rel = t
        * (((n - 1.0) * var + (n0 - 1.0) * var0 * avg * avg / (avg0 * avg0)) * (n + n0)
            / (n * n0 * df))
            .sqrt()
        * 100.0
        / avg0;
    let pooled = (((n - 1.0) * var + (n0 - 1.0) * var0) / df).sqrt();
    let margin = t * pooled * (1.0 / n + 1.0 / n0).sqrt();
    (rel, (avg - avg0).abs() > margin)
}

/// The parts of a ministat command line the Debian check needs.
struct Invocation {
    confidence: Confidence,
    column: usize,
    delim: Vec<u8>,
    files: Vec<String>,
}

impl Invocation {
    fn parse(args: &[String]) -> Invocation {
        let mut inv = Invocation {
            confidence: Confidence::P95,
            column: 1,
            delim: b" \t".to_vec(),
            files: vec![],
        };
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a == "-" {
                break;
            }
            for (k, ch) in a[1..].char_indices() {
                if "Ccdw".contains(ch) {
                    let rest = &a[1 + k + 1..];
                    let val = if rest.is_empty() {
                        i += 1;
                        args[i].clone()
                    } else {
                        rest.to_string()
                    };
                    match ch {
                        // An unsupported level after a supported one is ignored.
                        'c' => {
                            if let Some(c) = Confidence::from_percent(val.trim().parse().unwrap()) {
                                inv.confidence = c;
                            }
                        }
                        'C' => inv.column = val.parse().unwrap(),
                        'd' => inv.delim = val.into_bytes(),
                        _ => {}
                    }
                    break;
                }
            }
            i += 1;
        }
        inv.files = args[i..].to_vec();
        inv
    }
}

/// Values of one data file: trailing white space dropped, fields split on the delimiters,
/// comment fields ('#...') end the line.
fn read_values(text: &[u8], column: usize, delim: &[u8]) -> Vec<f64> {
    let text = String::from_utf8_lossy(text);
    let mut v = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line
            .trim_end()
            .split(|ch: char| delim.contains(&(ch as u8)))
            .filter(|f| !f.is_empty())
            .collect();
        let Some(f) = fields
            .iter()
            .take(column)
            .position(|f| f.starts_with('#'))
            .map_or(fields.get(column - 1), |_| None)
        else {
            continue;
        };
        v.push(f.parse().unwrap());
    }
    v
}

/// C printf("%*.*g") against reference strings (Python's %-formatting, which formats
/// doubles exactly as C does).
#[test]
fn printf_g_matches_c() {
    let table = fs::read_to_string(fixtures().join("printf_g.txt")).unwrap();
    let mut n = 0;
    for line in table.lines() {
        let mut it = line.splitn(4, ' ');
        let bits = u64::from_str_radix(it.next().unwrap(), 16).unwrap();
        let prec: usize = it.next().unwrap().parse().unwrap();
        let width: usize = it.next().unwrap().parse().unwrap();
        let want = it.next().unwrap().strip_suffix('|').unwrap();
        let x = f64::from_bits(bits);
        assert_eq!(
            cfmt::fmt_g_width(x, width, prec),
            want,
            "%{width}.{prec}g of {x:e} ({bits:#x})"
        );
        n += 1;
    }
    assert!(n > 3000);
}

#[test]
fn printf_g_spot_checks() {
    use cfmt::fmt_g;
    assert_eq!(fmt_g(240.0, 6), "240");
    assert_eq!(fmt_g(212.2148, 6), "212.215");
    assert_eq!(fmt_g(0.0001, 6), "0.0001");
    assert_eq!(fmt_g(0.00001, 6), "1e-05");
    assert_eq!(fmt_g(123456789.0, 8), "1.2345679e+08");
    assert_eq!(fmt_g(99999995.0, 8), "99999995");
    assert_eq!(fmt_g(999999995.0, 8), "1e+09");
    assert_eq!(fmt_g(-0.0, 6), "-0");
    assert_eq!(fmt_g(2.5, 1), "2");
    assert_eq!(fmt_g(1e300, 6), "1e+300");
    assert_eq!(fmt_g(f64::NAN, 6), "nan");
    assert_eq!(fmt_g(-f64::NAN, 6), "nan");
    assert_eq!(fmt_g(f64::NEG_INFINITY, 6), "-inf");
}

/// The library face renders exactly what the command prints.
#[test]
fn compare_matches_the_command() {
    let data = fixtures().join("data");
    let load = |f: &str| -> Vec<f64> { read_values(&fs::read(data.join(f)).unwrap(), 1, b" \t") };
    let samples =
        vec![("iguana".to_string(), load("iguana")), ("chameleon".to_string(), load("chameleon"))];
    let opts = stat::Options {
        confidence: Confidence::P80,
        width: 60,
        separate_bars: true,
        ..stat::Options::default()
    };
    let want = fs::read_to_string(fixtures().join("cases/man_s_w60_c80.out")).unwrap();
    assert_eq!(stat::compare(&samples, &opts), want);
    assert!(want.contains("\t80% +/- 102.3%\n"));

    let quiet = stat::Options { quiet: true, ..stat::Options::default() };
    let want = fs::read_to_string(fixtures().join("cases/man_q.out")).unwrap();
    assert_eq!(stat::compare(&samples, &quiet), want);

    let too_few = vec![("a".to_string(), vec![1.0, 2.0])];
    assert_eq!(
        stat::try_compare(&too_few, &stat::Options::default()).unwrap_err().to_string(),
        "Dataset a must contain at least 3 data points"
    );
    assert!(stat::try_compare(&[], &stat::Options::default()).is_err());

    let s = stat::Sample::from(load("chameleon"));
    let r = stat::Sample::from(load("iguana"));
    let d = stat::difference(&s, &r, Confidence::P80);
    assert!(d.significant);
    assert_eq!(cfmt::fmt_g(d.margin_pct, 6), "102.3");
    assert_eq!(cfmt::fmt_g(d.margin, 6), "212.215");
    let sum = s.summary(false);
    assert_eq!((sum.n, sum.min, sum.max, sum.median, sum.avg), (5, 150.0, 930.0, 500.0, 540.0));
}

/// `-` and no operands read stdin; an unreadable stdin counts as empty.
#[test]
fn stdin_and_write_errors() {
    struct Failing;
    impl std::io::Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("boom"))
        }
    }
    impl std::io::Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("boom"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut err = Vec::new();
    let rc = stat::run(&[], &mut Failing, &mut Vec::new(), &mut err);
    assert_eq!(
        (rc, show(&err).as_str()),
        (2, "Dataset <stdin> must contain at least 3 data points\n")
    );
    // ministat ignores stdout errors.
    let rc = stat::run(&["-n".into()], &mut &b"1\n2\n3\n"[..], &mut Failing, &mut Vec::new());
    assert_eq!(rc, 0);
}
