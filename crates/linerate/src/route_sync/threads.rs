//! The mirror's two threads. `lr-routes` only reads: the dump, then the route socket, many
//! datagrams per system call, handing the raw messages over in batches. `lr-routes-fib` owns
//! the [`RouteSync`]: it takes the messages (coalescing them per prefix) and writes the changed
//! prefixes to the FIB. The kernel charges about 1 KiB of the socket's buffer per queued
//! notification, so a reader that also applied (up to seconds for a burst of a million
//! changes) let the buffer overflow during a full-table churn, and paid a new dump each time.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dataplane::slowpath::SlowPath;
use io::netlink::route::{self, Datagrams, RouteSocket};

use super::{RouteSync, SLICE, SyncStats};

/// Datagrams read per system call, and the room for each (a notification fits in a page; a
/// larger one counts as lost).
const DATAGRAMS: usize = 64;
const DATAGRAM_SIZE: usize = 16 << 10;
/// Bytes of messages handed over at once, about (one wake-up of the applier per batch).
const BATCH_BYTES: usize = 64 << 10;
/// Batches the reader may be ahead of the applier (256 MiB of messages, about 2M routes);
/// past that it stops reading and the socket's own buffer fills.
const BACKLOG: usize = 4096;
/// Batches taken between two slices applied, at most.
const TAKE_BETWEEN_SLICES: usize = 16;

/// What the reader hands the applier, in the kernel's order.
enum Batch {
    /// Whole netlink messages back to back (each padded to 4 bytes), and how many.
    Messages(Vec<u8>, u64),
    /// A dump of the table starts: what follows up to [`Batch::DumpEnd`] is the whole table.
    DumpStart(Instant),
    DumpEnd,
}

/// Collects messages into batches and sends them.
struct Sender {
    tx: SyncSender<Batch>,
    stats: Arc<SyncStats>,
    bytes: Vec<u8>,
    count: u64,
}

impl Sender {
    fn push(&mut self, datagram: &[u8]) {
        self.count += route::messages(datagram).count() as u64;
        self.bytes.extend_from_slice(datagram);
        self.bytes.resize(io::netlink::align4(self.bytes.len()), 0);
    }

    fn is_full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES
    }

    /// Sends what was collected; `false` once the applier has stopped.
    fn flush(&mut self) -> bool {
        if self.count == 0 {
            self.bytes.clear();
            return true;
        }
        self.stats.queued.fetch_add(self.count, Relaxed);
        let batch = Batch::Messages(
            std::mem::replace(&mut self.bytes, Vec::with_capacity(BATCH_BYTES)),
            std::mem::take(&mut self.count),
        );
        self.send(batch)
    }

    fn send(&self, batch: Batch) -> bool {
        self.tx.send(batch).is_ok()
    }

    /// Throws away what was collected and not sent (older than the dump that follows).
    fn discard(&mut self) {
        self.bytes.clear();
        self.count = 0;
    }
}

/// Starts the reader and the applier; they run until `stop`.
pub fn start(
    sync: RouteSync,
    sock: RouteSocket,
    slow: Arc<Mutex<SlowPath>>,
    stop: &Arc<AtomicBool>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let (tx, rx) = sync_channel(BACKLOG);
    let mut sender = Sender {
        tx,
        stats: Arc::clone(&sync.stats),
        bytes: Vec::with_capacity(BATCH_BYTES),
        count: 0,
    };
    let reader = {
        let stop = Arc::clone(stop);
        std::thread::Builder::new()
            .name("lr-routes".into())
            .spawn(move || read(&mut sender, &sock, &stop))?
    };
    let stop = Arc::clone(stop);
    let applier = std::thread::Builder::new()
        .name("lr-routes-fib".into())
        .spawn(move || apply(sync, &rx, &slow, &stop))?;
    Ok(vec![reader, applier])
}

/// Dumps the table (after throwing away whatever the socket had queued: the dump is newer).
fn dump(out: &mut Sender, sock: &RouteSocket, dgrams: &mut Datagrams) -> bool {
    drain(sock, dgrams);
    if !out.send(Batch::DumpStart(Instant::now())) {
        return false;
    }
    let res = route::dump_routes(|m| {
        out.push(m);
        if out.is_full() {
            out.flush();
        }
    });
    if let Err(e) = res {
        eprintln!("linerate: kernel routes: dumping the routing table: {e}");
    }
    out.flush() && out.send(Batch::DumpEnd)
}

/// Discards every queued datagram.
fn drain(sock: &RouteSocket, dgrams: &mut Datagrams) {
    loop {
        match sock.recv_many(dgrams) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if route::is_overrun(&e) => {}
            Err(_) => return,
        }
    }
}

/// The reader: dump, then follow the socket, until `stop` or the applier ends.
fn read(out: &mut Sender, sock: &RouteSocket, stop: &AtomicBool) {
    let mut dgrams = Datagrams::new(DATAGRAMS, DATAGRAM_SIZE);
    let mut need_dump = true;
    while !stop.load(Relaxed) {
        if need_dump {
            if !dump(out, sock, &mut dgrams) {
                return;
            }
            need_dump = false;
        }
        match sock.recv_many(&mut dgrams) {
            Ok(0) => {
                if !out.flush() {
                    return;
                }
                let _ = sock.wait(100);
            }
            Ok(_) => {
                for d in dgrams.iter() {
                    out.push(d);
                }
                if out.is_full() && !out.flush() {
                    return;
                }
            }
            Err(e) if route::is_overrun(&e) => {
                out.stats.overruns.fetch_add(1, Relaxed);
                eprintln!(
                    "linerate: kernel routes: route messages lost (socket buffer full); dumping the table again"
                );
                out.discard();
                need_dump = true;
            }
            Err(e) => {
                eprintln!("linerate: kernel routes: reading the route socket: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Takes one batch into the mirror.
fn take(sync: &mut RouteSync, batch: Batch) {
    match batch {
        Batch::Messages(bytes, count) => {
            for m in route::messages(&bytes) {
                sync.handle(m);
            }
            sync.stats.queued.fetch_sub(count, Relaxed);
            sync.publish();
        }
        Batch::DumpStart(at) => sync.start_dump(at),
        Batch::DumpEnd => sync.finish_dump(),
    }
}

/// The applier: takes what the reader sent, a few batches at a time, and applies a slice of
/// the changed prefixes under the slow path's lock between them, until `stop` or the reader
/// ends.
fn apply(mut sync: RouteSync, rx: &Receiver<Batch>, slow: &Mutex<SlowPath>, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        for taken in 0..TAKE_BETWEEN_SLICES {
            let batch = if taken == 0 && !sync.is_dirty() {
                rx.recv_timeout(Duration::from_millis(100))
                    .map_err(|e| e == RecvTimeoutError::Disconnected)
            } else {
                rx.try_recv().map_err(|e| e == TryRecvError::Disconnected)
            };
            match batch {
                Ok(b) => take(&mut sync, b),
                Err(true) => return,
                Err(false) => break,
            }
        }
        if sync.is_dirty() {
            let mut sp = slow.lock().unwrap_or_else(|e| e.into_inner());
            sync.apply(sp.fib_mut(), SLICE);
        }
        if let Some(line) = sync.dump_report() {
            eprintln!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route_sync::tests::{Msg, TAP_A, fib, gateways, ip, lookup, sync};

    /// What the reader sends, taken by the applier: messages padded to 4 bytes back to back,
    /// a dump that keeps what it has not reached yet, then removes what it did not name.
    #[test]
    fn batches_carry_messages_and_dumps_in_order() {
        let (tx, rx) = sync_channel(16);
        let (mut s, mut ctl) = (sync(), fib());
        let mut out = Sender { tx, stats: Arc::clone(&s.stats), bytes: Vec::new(), count: 0 };
        let mut odd = Msg::new("10.20.0.0", 16, &[("198.18.0.2", TAP_A)]).bytes();
        // A message (and datagram) whose length is not a multiple of 4.
        odd.push(0);
        let len = odd.len() as u32;
        odd[..4].copy_from_slice(&len.to_ne_bytes());
        out.push(&odd);
        out.push(&Msg::new("10.21.0.0", 16, &[("198.18.0.2", TAP_A)]).bytes());
        assert!(out.flush());
        assert_eq!(s.stats.pending(), 2, "queued, not taken");
        assert!(out.send(Batch::DumpStart(Instant::now())));
        out.push(&Msg::new("10.21.0.0", 16, &[("198.18.0.3", TAP_A)]).bytes());
        assert!(out.flush());
        assert!(out.flush(), "an empty batch is not sent");
        assert!(out.send(Batch::DumpEnd));
        let mut batches = 0;
        while let Ok(b) = rx.try_recv() {
            take(&mut s, b);
            batches += 1;
            s.apply(&mut ctl, 100);
        }
        assert_eq!(batches, 4);
        assert_eq!(lookup(&ctl, "10.20.0.1"), None, "not in the dump");
        assert_eq!(gateways(&ctl, "10.21.0.1"), vec![(ip("198.18.0.3"), 0)]);
        assert_eq!(s.stats.pending(), 0);
        assert_eq!(s.stats.messages.load(Relaxed), 3);
        drop(rx);
        out.push(&Msg::new("10.22.0.0", 16, &[("198.18.0.2", TAP_A)]).bytes());
        assert!(!out.flush(), "the applier has gone");
    }
}
