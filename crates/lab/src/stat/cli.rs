//! The `linerate stat` command: ministat's argv, getopt(3), input reading, messages and exit
//! status, byte for byte.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{Read, Write};

use super::cfmt;
use super::sample::Sample;
use super::{Confidence, MAX_SETS, Options, PROG, render};

/// ministat's `fgets` buffer: FreeBSD's `BUFSIZ`. Longer lines are read in pieces, each
/// counting as a line.
const BUFSIZ: usize = 1024;

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
        write!(f, "exit {}: {}", self.code, String::from_utf8_lossy(&self.message))
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
    Exit { code: 2, message: m }
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
    let mut settings = Settings {
        opts: Options { width: default_width, ..Options::default() },
        ci: None,
        column: 1,
        delim: b" \t".to_vec(),
    };
    let mut getopt = Getopt { args: &args, optind: 0, place: 0 };
    while let Some(option) = getopt.next_option()? {
        settings.apply(option)?;
    }
    settings.opts.confidence = settings.ci.unwrap_or(Confidence::P95);
    // Open everything first (ministat does, before entering its sandbox), then read.
    let sources = open_sources(&args[getopt.optind..])?;
    let mut sets = Vec::with_capacity(sources.len());
    for (name, src) in sources {
        let mut buf = Vec::new();
        // fgets stops at a read error as at end of file; keep what was read.
        let _ = match src {
            Source::Stdin => stdin.read_to_end(&mut buf),
            Source::File(mut f) => f.read_to_end(&mut buf),
        };
        let points = read_set(&buf, &name, settings.column, &settings.delim)?;
        sets.push((name, Sample::new(points)));
    }
    Ok(render(&sets, &settings.opts))
}

/// FreeBSD getopt(3) over ministat's arguments with "AC:c:d:nPqsw:".
struct Getopt<'a> {
    args: &'a [Vec<u8>],
    /// The argument being read; after the options, the first operand.
    optind: usize,
    /// Position inside `args[optind]`; 0 = start a new argument.
    place: usize,
}

/// One option as getopt returns it.
struct Opt {
    letter: u8,
    /// Its argument (empty for a flag).
    arg: Vec<u8>,
}

impl Getopt<'_> {
    /// The next option; `None` after the last option.
    fn next_option(&mut self) -> Result<Option<Opt>, Exit> {
        let args = self.args;
        if self.place == 0 {
            let Some(a) = args.get(self.optind) else {
                return Ok(None);
            };
            if a.first() != Some(&b'-') || a.len() == 1 {
                return Ok(None);
            }
            if a == b"--" {
                self.optind += 1;
                return Ok(None);
            }
            self.place = 1;
        }
        let a = &args[self.optind];
        let opt = a[self.place];
        self.place += 1;
        let at_end = self.place == a.len();
        let takes_arg = match opt {
            b'A' | b'n' | b'P' | b'q' | b's' => false,
            b'C' | b'c' | b'd' | b'w' => true,
            _ => return Err(option_error("illegal option", opt)),
        };
        if !takes_arg {
            if at_end {
                self.optind += 1;
                self.place = 0;
            }
            return Ok(Some(Opt { letter: opt, arg: Vec::new() }));
        }
        let optarg = if !at_end {
            a[self.place..].to_vec()
        } else if self.optind + 1 < args.len() {
            self.optind += 1;
            args[self.optind].clone()
        } else {
            return Err(option_error("option requires an argument", opt));
        };
        self.optind += 1;
        self.place = 0;
        Ok(Some(Opt { letter: opt, arg: optarg }))
    }
}

/// getopt's message for a bad option, then ministat's usage.
fn option_error(what: &str, opt: u8) -> Exit {
    let mut m = format!("{PROG}: {what} -- ").into_bytes();
    m.push(opt);
    m.push(b'\n');
    usage(m, "Unknown option")
}

/// What the options set.
struct Settings {
    opts: Options,
    /// The last `-c` level ministat supports (a later unsupported one is still an error).
    ci: Option<Confidence>,
    /// `-C`: the column to read, from 1.
    column: i32,
    /// `-d`: the field delimiters.
    delim: Vec<u8>,
}

impl Settings {
    /// Applies one option, checking its argument as ministat does.
    fn apply(&mut self, option: Opt) -> Result<(), Exit> {
        let optarg = option.arg;
        match option.letter {
            b'A' => self.opts.suppress_plot = true,
            b'C' => {
                let (v, n) = cfmt::strtol(&optarg);
                if n < optarg.len() {
                    return Err(usage(Vec::new(), "Invalid column number."));
                }
                self.column = cfmt::long_to_int(v);
                if self.column <= 0 {
                    return Err(usage(Vec::new(), "Column number should be positive."));
                }
            }
            b'c' => {
                let (v, n) = cfmt::strtod(&optarg);
                if n < optarg.len() {
                    return Err(usage(Vec::new(), "Not a floating point number"));
                }
                if let Some(c) = Confidence::from_percent(v) {
                    self.ci = Some(c);
                }
                if self.ci.is_none() {
                    return Err(usage(Vec::new(), "No support for confidence level"));
                }
            }
            b'd' => {
                if optarg.is_empty() {
                    return Err(usage(Vec::new(), "Can't use empty delimiter string"));
                }
                self.delim = optarg;
            }
            b'n' => self.opts.summary_only = true,
            b'P' => self.opts.population = true,
            b'q' => self.opts.quiet = true,
            b's' => self.opts.separate_bars = true,
            b'w' => {
                let (v, n) = cfmt::strtol(&optarg);
                if n < optarg.len() {
                    return Err(usage(Vec::new(), "Invalid width, not a number."));
                }
                self.opts.width = cfmt::long_to_int(v);
                if self.opts.width < 0 {
                    return Err(usage(Vec::new(), "Unable to move beyond left margin."));
                }
            }
            _ => unreachable!(),
        }
        Ok(())
    }
}

/// Where a data set is read from.
enum Source {
    Stdin,
    File(std::fs::File),
}

/// Opens every operand (`-` and no operand at all: stdin), named as ministat names them.
fn open_sources(operands: &[Vec<u8>]) -> Result<Vec<(Vec<u8>, Source)>, Exit> {
    let mut sources: Vec<(Vec<u8>, Source)> = Vec::new();
    if operands.is_empty() {
        sources.push((b"<stdin>".to_vec(), Source::Stdin));
        return Ok(sources);
    }
    if operands.len() > MAX_SETS {
        return Err(usage(Vec::new(), "Too many datasets."));
    }
    for name in operands {
        if name == b"-" {
            sources.push((name.clone(), Source::Stdin));
            continue;
        }
        match std::fs::File::open(os_path(name)) {
            Ok(f) => sources.push((name.clone(), Source::File(f))),
            Err(e) => {
                let mut m = format!("{PROG}: Cannot open ").into_bytes();
                m.extend_from_slice(name);
                m.extend_from_slice(format!(": {}\n", strerror(&e)).as_bytes());
                return Err(Exit { code: 2, message: m });
            }
        }
    }
    Ok(sources)
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
            return Err(Exit { code: 2, message: m });
        }
        points.push(d);
    }
    if points.len() < 3 {
        let mut m = b"Dataset ".to_vec();
        m.extend_from_slice(name);
        m.extend_from_slice(b" must contain at least 3 data points\n");
        return Err(Exit { code: 2, message: m });
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn terminal_width_rule() {
        assert_eq!(terminal_default_width(None, None), 74);
        assert_eq!(terminal_default_width(Some(OsStr::new("")), Some(100)), 98);
        assert_eq!(terminal_default_width(Some(OsStr::new("120x")), Some(100)), 120);
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
