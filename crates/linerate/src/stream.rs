//! `linerate log` and `linerate capture`: packet streams over the control socket.
//!
//! The client sends one line (`log`, or `capture IFACE POINT SNAPLEN COUNT`); the server
//! answers `ok LINKTYPE SNAPLEN` and then sends messages until the client goes away (or, for a
//! capture, COUNT frames have been sent). A message is a tag byte then:
//! - tag 0: a pcap record (16-byte record header, then the bytes): a pflog record for `log`,
//!   an Ethernet frame for `capture`;
//! - tag 1 + reason: the same, for a frame dropped for that `DropReason` (capture at `drop`);
//! - tag 255: 8 bytes, copies lost so far (rings full, slow client), sent every second: it
//!   also tells the server that the client is still there.
//!
//! The client writes the records as a pcap file (`-w FILE`, `-w -` for stdout: `tcpdump -r -`
//! reads it) or prints one line per packet, as `tcpdump -n -e` would.

use std::io::{BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dataplane::DropReason;
use dataplane::tap::{CaptureSpec, Point, arm_all};

use crate::logger::LogHub;
use crate::router_state::RouterState;

const TAG_STATS: u8 = 255;
/// Records each worker's capture ring holds.
const CAPTURE_RING: usize = 1024;
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Whether `command` is one of the streams (served on a thread of its own).
pub fn is_stream(command: &str) -> bool {
    command == "log" || command.starts_with("capture ")
}

/// Serves a stream command on its own thread, so the control socket stays free.
pub fn serve(conn: UnixStream, state: Arc<RouterState>, command: String) {
    let spawned = std::thread::Builder::new().name("lr-stream".into()).spawn(move || {
        let mut conn = conn;
        let _ = conn.set_read_timeout(None);
        let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
        let result = if command == "log" {
            serve_log(&mut conn, &state)
        } else {
            serve_capture(&mut conn, &state, &command)
        };
        if let Err(e) = result {
            let _ = conn.write_all(
                format!("error: {e:#}\n").replace("\n", "; ").trim_end_matches("; ").as_bytes(),
            );
            let _ = conn.write_all(b"\n");
        }
    });
    if let Err(e) = spawned {
        eprintln!("linerate: control socket: cannot start a stream thread: {e}");
    }
}

/// An error before the stream started goes back as `error: ...`; once it runs, a failed write
/// means the client left, which ends it quietly.
struct Gone;

fn send(conn: &mut UnixStream, tag: u8, record: &[u8]) -> Result<(), Gone> {
    conn.write_all(&[tag]).and_then(|()| conn.write_all(record)).map_err(|_| Gone)
}

fn serve_log(conn: &mut UnixStream, state: &RouterState) -> Result<()> {
    let Some(hub) = &state.log else {
        bail!("no [firewall] in the running config: nothing is logged")
    };
    let rx = hub.subscribe();
    let snap = crate::logger::pcap_snaplen(hub.snaplen);
    conn.write_all(format!("ok {} {snap}\n", io::pflog::LINKTYPE_PFLOG).as_bytes())?;
    let base = lost(hub);
    let mut beat = Instant::now();
    loop {
        match rx.recv_timeout(HEARTBEAT) {
            Ok(rec) if send(conn, 0, &rec).is_err() => return Ok(()),
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if beat.elapsed() >= HEARTBEAT {
            beat = Instant::now();
            if send(conn, TAG_STATS, &(lost(hub) - base).to_le_bytes()).is_err() {
                return Ok(());
            }
        }
    }
}

/// Records lost so far: over the rate limit, to full rings, to slow clients.
fn lost(hub: &LogHub) -> u64 {
    let lost = hub.losses();
    lost.rate_limited + lost.rings_full + hub.totals.client_drops.load(Ordering::Relaxed)
}

/// `capture IFACE POINT SNAPLEN COUNT`.
fn serve_capture(conn: &mut UnixStream, state: &RouterState, command: &str) -> Result<()> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let [_, iface, point, snap, count] = words[..] else {
        bail!("usage: capture IFACE rx|tx|drop SNAPLEN COUNT")
    };
    let port = match iface {
        "any" => None,
        name => match state.ports.iter().find(|p| p.name == name) {
            Some(p) if p.vlan.is_none() => Some(p.phys),
            Some(_) => bail!(
                "{name} is a VLAN sub-interface: capture on its parent (frames keep their tags)"
            ),
            None => bail!("no interface {name:?} (linerate's: {})", names(state)),
        },
    };
    let Some(point) = Point::parse(point) else { bail!("capture point {point:?}: rx, tx or drop") };
    let snap: usize = snap.parse().context("snap length")?;
    let count: u64 = count.parse().context("count")?;
    let Some(_busy) = state.captures.try_start() else {
        bail!("a capture is already running (one at a time)")
    };
    let mut cap = arm_all(&state.captures.slots, CaptureSpec { point, port, snap }, CAPTURE_RING);
    let snaplen = snap.clamp(1, dataplane::tap::CAPTURE_SNAP_MAX);
    conn.write_all(format!("ok {} {snaplen}\n", io::pcap::LINKTYPE_ETHERNET).as_bytes())?;
    let (mut sent, mut beat) = (0u64, Instant::now());
    while count == 0 || sent < count {
        let mut got = false;
        for ring in &mut cap.rings {
            let mut failed = false;
            while (count == 0 || sent < count)
                && !failed
                && ring.pop_with(|r| {
                    let (sec, usec) = (
                        (r.ts_ns / 1_000_000_000) as u32,
                        ((r.ts_ns % 1_000_000_000) / 1000) as u32,
                    );
                    let mut rec = io::pcap::record_header(
                        sec,
                        usec,
                        u32::from(r.len),
                        u32::from(r.orig_len).max(u32::from(r.len)),
                    )
                    .to_vec();
                    rec.extend_from_slice(r.frame());
                    failed = send(conn, r.reason.map_or(0, |d| d as u8 + 1), &rec).is_err();
                })
            {
                sent += 1;
                got = true;
            }
            if failed {
                return Ok(());
            }
        }
        if beat.elapsed() >= HEARTBEAT {
            beat = Instant::now();
            if send(conn, TAG_STATS, &cap.ring_drops().to_le_bytes()).is_err() {
                return Ok(());
            }
        }
        if !got {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let _ = send(conn, TAG_STATS, &cap.ring_drops().to_le_bytes());
    Ok(())
}

fn names(state: &RouterState) -> String {
    state
        .ports
        .iter()
        .filter(|p| p.vlan.is_none())
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

// ------------------------------------------------------------------------------- clients

#[derive(clap::Args)]
pub struct LogArgs {
    /// Write the records as a pflog capture file (`-` for stdout: `| tcpdump -n -e -r -`)
    /// instead of printing them.
    #[arg(short = 'w', value_name = "FILE")]
    write: Option<PathBuf>,
    /// Stop after this many packets (0: until interrupted).
    #[arg(short = 'c', long = "count", default_value_t = 0)]
    count: u64,
    /// Configuration file of the running linerate (for `router.control_socket`).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CaptureArgs {
    /// Interface (a physical one: VLAN sub-interfaces' frames are on their parent), or `any`.
    #[arg(short = 'i', value_name = "IFACE")]
    iface: String,
    /// Where in the pipeline: as received, as sent, or dropped (the reason on stderr with
    /// `-w`, on the line otherwise).
    #[arg(long = "at", value_enum, default_value = "rx")]
    at: CapturePoint,
    /// Stop after this many frames (0: until interrupted).
    #[arg(short = 'c', long = "count", default_value_t = 0)]
    count: u64,
    /// Bytes kept of each frame (at most 1536).
    #[arg(short = 's', long = "snaplen", default_value_t = 1536)]
    snaplen: usize,
    /// Write a pcap file (`-` for stdout) instead of printing one line per frame.
    #[arg(short = 'w', value_name = "FILE")]
    write: Option<PathBuf>,
    /// Configuration file of the running linerate (for `router.control_socket`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A capture filter expression is not supported: filter the file with `tcpdump -r FILE EXPR`.
    #[arg(hide = true, trailing_var_arg = true)]
    filter: Vec<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CapturePoint {
    Rx,
    Tx,
    Drop,
}

fn socket(config: &Option<PathBuf>) -> Result<PathBuf> {
    Ok(match config {
        Some(path) => config::Config::load(path)?.router.control_socket,
        None => config::RouterSettings::default().control_socket,
    })
}

pub fn log_main(args: LogArgs) -> Result<()> {
    let out = Output::new(args.write.as_ref())?;
    run_client(&socket(&args.config)?, "log", args.count, out, Kind::Log)
}

pub fn capture_main(args: CaptureArgs) -> Result<()> {
    if !args.filter.is_empty() {
        bail!(
            "a capture filter ({}) is not supported by linerate capture: write a file with -w and filter it with `tcpdump -r FILE EXPR`",
            args.filter.join(" ")
        );
    }
    let at = match args.at {
        CapturePoint::Rx => "rx",
        CapturePoint::Tx => "tx",
        CapturePoint::Drop => "drop",
    };
    let command = format!("capture {} {at} {} {}", args.iface, args.snaplen, args.count);
    let out = Output::new(args.write.as_ref())?;
    run_client(&socket(&args.config)?, &command, args.count, out, Kind::Capture(at))
}

#[derive(Clone, Copy)]
enum Kind {
    Log,
    Capture(&'static str),
}

/// Where the client puts what it gets.
enum Output {
    Text,
    Pcap(Box<dyn Write>),
}

impl Output {
    fn new(write: Option<&PathBuf>) -> Result<Output> {
        Ok(match write {
            None => Output::Text,
            Some(p) if p.as_os_str() == "-" => Output::Pcap(Box::new(std::io::stdout())),
            Some(p) => Output::Pcap(Box::new(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            )),
        })
    }
}

fn run_client(
    socket: &std::path::Path,
    command: &str,
    count: u64,
    mut out: Output,
    kind: Kind,
) -> Result<()> {
    let conn = UnixStream::connect(socket).with_context(|| {
        format!("connecting to {} (is linerate run listening?)", socket.display())
    })?;
    let mut r = BufReader::new(conn);
    let line = crate::client::send_command(&mut r, command)?;
    let line = line.trim_end();
    if let Some(e) = line.strip_prefix("error: ") {
        bail!("{}: {e}", command.split(' ').next().unwrap_or(command));
    }
    let (linktype, snaplen) = match line.split(' ').collect::<Vec<_>>()[..] {
        ["ok", l, s] => {
            (l.parse::<u32>().context("link type")?, s.parse::<u32>().context("snap length")?)
        }
        _ => bail!("unexpected answer {line:?}"),
    };
    if let Output::Pcap(w) = &mut out {
        w.write_all(&io::pcap::file_header(linktype, snaplen))?;
        w.flush()?;
    }
    let (mut n, mut lost) = (0u64, 0u64);
    while count == 0 || n < count {
        let mut tag = [0u8; 1];
        if r.read_exact(&mut tag).is_err() {
            break;
        }
        if tag[0] == TAG_STATS {
            let mut b = [0u8; 8];
            r.read_exact(&mut b).context("reading the stream")?;
            lost = u64::from_le_bytes(b);
            continue;
        }
        let mut hdr = [0u8; 16];
        r.read_exact(&mut hdr).context("reading the stream")?;
        let word = |i: usize| u32::from_le_bytes(hdr[i..i + 4].try_into().expect("4 bytes"));
        let (sec, usec, caplen, orig) = (word(0), word(4), word(8), word(12));
        let mut data = vec![0u8; caplen.min(1 << 16) as usize];
        r.read_exact(&mut data).context("reading the stream")?;
        n += 1;
        let reason =
            tag[0].checked_sub(1).and_then(|i| DropReason::ALL.get(usize::from(i))).copied();
        let alive = match &mut out {
            Output::Pcap(w) => {
                if let (Some(reason), Kind::Capture(_)) = (reason, kind) {
                    eprintln!("linerate: frame {n}: dropped: {}", reason.name());
                }
                w.write_all(&hdr).and_then(|()| w.write_all(&data)).and_then(|()| w.flush()).is_ok()
            }
            Output::Text => {
                let text = match kind {
                    Kind::Log => crate::describe::pflog_line(sec, usec, &data),
                    Kind::Capture(at) => {
                        crate::describe::capture_line(sec, usec, at, &data, orig, reason)
                    }
                };
                crate::output::print(&format!("{text}\n"))?
            }
        };
        if !alive {
            break;
        }
    }
    if lost > 0 {
        eprintln!("linerate: {lost} copies lost (rate limit, full rings or a slow reader)");
    }
    Ok(())
}
