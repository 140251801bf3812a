//! The logger thread of `linerate run`: drains the workers' log rings (`dataplane::firewall::log`)
//! into a pflog capture file, rotated by size, and to the `linerate log` clients connected
//! to the control socket ([`crate::stream`]).
//!
//! A record becomes one pcap record: the pflog header (`io::pflog`: rule number, stable id,
//! action, reason, direction, interface) then the first bytes of the IP packet. The file is
//! what pflogd writes (`tcpdump -n -e -r FILE` reads it); each client gets the same records.
//! A client that does not keep up loses records (counted), never slows the logger.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use config::LogSettings;
use dataplane::firewall::log::{LogRecord, LogRing};
use io::pflog::{HDR_LEN, LINKTYPE_PFLOG};

/// How often the logger drains the rings.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// Records waiting for one slow client before it loses some.
const CLIENT_QUEUE: usize = 4096;

/// The pcap snap length of a pflog capture whose packets are cut to `snaplen` bytes.
pub fn pcap_snaplen(snaplen: u32) -> u32 {
    snaplen + HDR_LEN as u32
}

/// One pcap record (header included) of a logged packet on interface `ifname`.
pub fn pcap_record(r: &LogRecord, ifname: &str) -> Vec<u8> {
    let hdr = r.pflog_header(ifname).encode();
    let packet = r.packet();
    let (sec, usec) = ((r.ts_ns / 1_000_000_000) as u32, ((r.ts_ns % 1_000_000_000) / 1000) as u32);
    let caplen = (HDR_LEN + packet.len()) as u32;
    let orig = HDR_LEN as u32 + u32::from(r.orig_len);
    let mut out = Vec::with_capacity(16 + caplen as usize);
    out.extend_from_slice(&io::pcap::record_header(sec, usec, caplen, orig.max(caplen)));
    out.extend_from_slice(&hdr);
    out.extend_from_slice(packet);
    out
}

/// A pcap file that moves aside when it grows past `max_size`: FILE -> FILE.1 -> ... ->
/// FILE.keep (the oldest removed), as newsyslog does with pflogd's file.
pub struct RotatingPcap {
    path: PathBuf,
    max_size: u64,
    keep: u32,
    header: [u8; 24],
    out: BufWriter<File>,
    size: u64,
}

impl RotatingPcap {
    /// Opens `path`, appending if it already holds a capture with the same header (a restart),
    /// else moving what is there aside first. Creates the directory if needed.
    pub fn open(
        path: &Path,
        max_size: u64,
        keep: u32,
        snaplen: u32,
    ) -> std::io::Result<RotatingPcap> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let header = io::pcap::file_header(LINKTYPE_PFLOG, pcap_snaplen(snaplen));
        let mut existing = [0u8; 24];
        let same = File::open(path).and_then(|mut f| f.read_exact(&mut existing)).is_ok()
            && existing == header;
        if !same && path.exists() {
            rotate_files(path, keep)?;
        }
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        let mut size = file.metadata()?.len();
        if size == 0 {
            file.write_all(&header)?;
            size = 24;
        }
        Ok(RotatingPcap {
            path: path.to_owned(),
            max_size,
            keep,
            header,
            out: BufWriter::new(file),
            size,
        })
    }

    pub fn write(&mut self, record: &[u8]) -> std::io::Result<()> {
        if self.size + record.len() as u64 > self.max_size && self.size > 24 {
            self.rotate()?;
        }
        self.out.write_all(record)?;
        self.size += record.len() as u64;
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        rotate_files(&self.path, self.keep)?;
        let mut file =
            OpenOptions::new().create(true).write(true).truncate(true).open(&self.path)?;
        file.write_all(&self.header)?;
        self.out = BufWriter::new(file);
        self.size = 24;
        Ok(())
    }
}

fn numbered(path: &Path, i: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

/// FILE.(keep-1) -> FILE.keep, ..., FILE -> FILE.1 (FILE removed when keep is 0).
fn rotate_files(path: &Path, keep: u32) -> std::io::Result<()> {
    if keep == 0 {
        return std::fs::remove_file(path);
    }
    for i in (1..keep).rev() {
        let from = numbered(path, i);
        if from.exists() {
            std::fs::rename(&from, numbered(path, i + 1))?;
        }
    }
    std::fs::rename(path, numbered(path, 1))
}

/// Counters of the log, for the exit report and `linerate log`.
#[derive(Default)]
pub struct LogTotals {
    pub written: AtomicU64,
    pub file_errors: AtomicU64,
    /// Records a slow `linerate log` client lost.
    pub client_drops: AtomicU64,
}

/// Where the logger's records go besides the file: the connected clients.
pub struct LogHub {
    clients: Mutex<Vec<SyncSender<Arc<[u8]>>>>,
    pub totals: LogTotals,
    /// The snap length of the records (for the clients' pcap header).
    pub snaplen: u32,
    rings: Mutex<Vec<Arc<dataplane::firewall::log::LogStats>>>,
    ring_drops: AtomicU64,
}

impl LogHub {
    /// A new client: the records logged from now on.
    pub fn subscribe(&self) -> Receiver<Arc<[u8]>> {
        let (tx, rx) = std::sync::mpsc::sync_channel(CLIENT_QUEUE);
        self.clients.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
        rx
    }

    /// Records lost before the logger.
    pub fn losses(&self) -> LogLosses {
        let rate_limited = self
            .rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|s| s.rate_limited.load(Ordering::Relaxed))
            .sum();
        LogLosses { rate_limited, rings_full: self.ring_drops.load(Ordering::Relaxed) }
    }

    fn publish(&self, record: &[u8]) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.is_empty() {
            return;
        }
        let shared: Arc<[u8]> = Arc::from(record);
        clients.retain(|c| match c.try_send(Arc::clone(&shared)) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.totals.client_drops.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
    }
}

/// Records lost before the logger thread wrote them.
pub struct LogLosses {
    /// Over the `[log]` rate limit.
    pub rate_limited: u64,
    /// To full worker rings.
    pub rings_full: u64,
}

/// Opens the `[log]` file, if any (before privileges are dropped: the directory may be
/// root's).
pub fn open_file(settings: &LogSettings) -> Result<Option<RotatingPcap>> {
    settings
        .file
        .as_ref()
        .map(|p| {
            RotatingPcap::open(p, settings.max_size, settings.keep, settings.snaplen)
                .with_context(|| format!("[log] file {}", p.display()))
        })
        .transpose()
}

impl LogHub {
    /// The hub of the workers' `rings` (their counters), records cut to `snaplen`.
    pub fn new(snaplen: u32, rings: &[LogRing]) -> Arc<LogHub> {
        Arc::new(LogHub {
            clients: Mutex::new(Vec::new()),
            totals: LogTotals::default(),
            snaplen,
            rings: Mutex::new(rings.iter().map(|r| Arc::clone(&r.stats)).collect()),
            ring_drops: AtomicU64::new(0),
        })
    }
}

/// Starts the logger thread: `rings` to `file` and `hub`'s clients; `names[port]` names the
/// logical ports. After `stop` it drains the rings once more and ends.
pub fn spawn(
    hub: Arc<LogHub>,
    mut file: Option<RotatingPcap>,
    mut rings: Vec<LogRing>,
    names: Vec<String>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("lr-logger".into())
        .spawn(move || {
            loop {
                let last = stop.load(Ordering::Relaxed);
                drain(&mut rings, &names, file.as_mut(), &hub);
                if last {
                    break;
                }
                std::thread::sleep(DRAIN_EVERY);
            }
        })
        .context("starting the logger thread")
}

/// One round: every record of every ring to the file and the clients.
fn drain(
    rings: &mut [LogRing],
    names: &[String],
    mut file: Option<&mut RotatingPcap>,
    hub: &LogHub,
) {
    let mut wrote = false;
    for ring in rings.iter_mut() {
        while ring.consumer.pop_with(|r| {
            let name = names.get(usize::from(r.iface)).map_or("?", String::as_str);
            let rec = pcap_record(r, name);
            if let Some(f) = file.as_deref_mut() {
                if f.write(&rec).is_err() {
                    hub.totals.file_errors.fetch_add(1, Ordering::Relaxed);
                }
                wrote = true;
            }
            hub.totals.written.fetch_add(1, Ordering::Relaxed);
            hub.publish(&rec);
        }) {}
    }
    hub.ring_drops.store(rings.iter().map(|r| r.consumer.dropped()).sum(), Ordering::Relaxed);
    if wrote
        && let Some(f) = file
        && f.flush().is_err()
    {
        hub.totals.file_errors.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lr-logger-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d.join("pflog.pcap")
    }

    #[test]
    fn rotates_past_max_size_keeping_n_files() {
        let path = tmp("rotate");
        let rec = vec![0xabu8; 100];
        let mut f = RotatingPcap::open(&path, 24 + 250, 2, 128).unwrap();
        for _ in 0..7 {
            f.write(&rec).unwrap();
        }
        f.flush().unwrap();
        let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
        // 2 records per file: 7 records = 3 full files and one with 1; only 2 old ones kept.
        assert_eq!(
            (len(&path), len(&numbered(&path, 1)), len(&numbered(&path, 2))),
            (Some(124), Some(224), Some(224))
        );
        assert_eq!(len(&numbered(&path, 3)), None);
        let head = std::fs::read(numbered(&path, 1)).unwrap();
        assert_eq!(&head[20..24], &117u32.to_le_bytes(), "each file is a pflog capture");
        // Reopened with the same header: appended; with another snap length: moved aside.
        drop(f);
        RotatingPcap::open(&path, 1 << 20, 2, 128).unwrap().write(&rec).unwrap();
        assert_eq!(len(&path), Some(224));
        drop(RotatingPcap::open(&path, 1 << 20, 2, 96).unwrap());
        assert_eq!((len(&path), len(&numbered(&path, 1))), (Some(24), Some(224)));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn records_carry_the_pflog_header_and_the_packet() {
        let mut r = LogRecord {
            ts_ns: 5_000_123_000,
            rule: 2,
            orig_len: 300,
            len: 4,
            ..LogRecord::default()
        };
        r.id[..3].copy_from_slice(b"web");
        r.data[..4].copy_from_slice(&[0x45, 0, 1, 44]);
        let rec = pcap_record(&r, "lrlog-a");
        assert_eq!(&rec[..16], &io::pcap::record_header(5, 123, 68, 364));
        let (h, at) = io::pflog::Header::decode(&rec[16..]).unwrap();
        assert_eq!(
            (h.rulenr, h.ruleset.as_str(), h.ifname.as_str(), h.action_name()),
            (2, "web", "lrlog-a", "pass")
        );
        assert_eq!(&rec[16 + at..], &[0x45, 0, 1, 44]);
    }
}
