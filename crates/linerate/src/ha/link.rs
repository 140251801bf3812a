//! The sync thread (`lr-sync`): the workers' state changes out to the peer over UDP, the
//! peer's in to every worker. One datagram per round of changes (more if they do not fit),
//! a round every [`ROUND`]; a replay window per peer creator; at start, a request for every
//! state the peer holds (pfsync's bulk update), asked again until it is answered.
//! The peer answers by setting its workers' bulk flags, and sends a BUS end once every worker
//! has sent its table. Until the peer's BUS end (or [`BULK_WAIT`] without one: no peer), this
//! box's table is not complete, which the track file tells keepalived.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use dataplane::firewall::sync::SyncItem;
use fw::state::StateEnds;
use ha::{Header, Key, Message, ReplayWindow, UpdateRequest};

use super::convert::{self, Names};
use super::owners::Owners;

/// How long the thread waits for the peer's datagrams between two rounds of sending.
const ROUND: Duration = Duration::from_millis(20);
/// Datagrams stay under a 1500-byte MTU with IPv6 and UDP headers (opnsense/core#4540: a
/// bulk update failing over a link with a smaller MTU).
const MAX_DATAGRAM: usize = 1400;
/// Flows remembered for the peer's DEL messages (its counters), at most: when full, those
/// past their expiry are forgotten (the peer sends no DEL for an expired state).
const MAX_FLOWS: usize = 1 << 22;
/// How long a box waits for the peer's bulk update before it takes its table as complete
/// (the peer is down, or is not there yet).
pub const BULK_WAIT: Duration = Duration::from_secs(10);
/// How often a box asks again while the peer has not answered (it may have started later).
const BULK_RETRY: Duration = Duration::from_secs(2);

/// A worker's ends of its sync port.
pub struct WorkerLink {
    pub changes: Receiver<Vec<SyncItem>>,
    pub inbox: Sender<Vec<SyncItem>>,
    pub bulk_wanted: Arc<AtomicBool>,
}

/// What the link did, for `show` and the exit report.
#[derive(Debug, Default)]
pub struct LinkStats {
    pub datagrams_sent: AtomicU64,
    pub messages_sent: AtomicU64,
    pub send_errors: AtomicU64,
    pub datagrams_received: AtomicU64,
    pub messages_received: AtomicU64,
    /// Refused: not from the peer's address, a bad tag or layout, a replayed sequence number.
    pub refused: AtomicU64,
    /// A peer's states this box could not represent (an unknown interface, a tag number).
    pub states_refused: AtomicU64,
    /// The peer's DELs of a flow this box has no record of (never received, or forgotten).
    pub unknown_deletes: AtomicU64,
    /// This box's table is complete: the peer's bulk update ended, or none came in time.
    pub synced: AtomicBool,
    /// Bulk updates this box sent the peer, whole (BUS end sent).
    pub bulk_sent: AtomicU64,
    /// Workers still sending their tables to the peer, in answer to its request.
    pub bulk_answering: AtomicU64,
    /// When the last datagram from the peer was accepted (Unix ms; 0: none yet).
    pub last_received_unix_ms: AtomicU64,
}

/// The sync thread's state.
pub struct Link {
    pub sock: UdpSocket,
    pub peer: SocketAddr,
    pub key: Option<Key>,
    pub creator: u32,
    pub names: Names,
    /// The rule set's digest now: equal on both boxes when their rule sets are.
    pub digest: Box<dyn FnMut() -> u64 + Send>,
    pub workers: Vec<WorkerLink>,
    pub stats: Arc<LinkStats>,
    /// Where `synced` is written for keepalived (`track_file`): 1 until synced, then 0.
    pub track_file: Option<std::path::PathBuf>,
    /// Which worker takes each of the peer's states.
    pub owners: Owners,
    sequence: u64,
    replay: HashMap<u32, ReplayWindow>,
    /// The peer's flows by id counter, with the second (since `started`) they expire at and
    /// the worker that owns them.
    flows: HashMap<u64, (u8, StateEnds, u64, Option<usize>)>,
    started: std::time::Instant,
    /// Workers still sending their table to the peer, in answer to its request.
    answering: Vec<bool>,
    /// The peer's requests for every state so far.
    bulk_asked: u64,
}

impl Link {
    pub fn new(
        sock: UdpSocket,
        peer: SocketAddr,
        key: Option<Key>,
        creator: u32,
        names: Names,
        digest: Box<dyn FnMut() -> u64 + Send>,
        workers: Vec<WorkerLink>,
    ) -> Link {
        Link {
            sock,
            peer,
            key,
            creator,
            names,
            digest,
            workers,
            stats: Arc::default(),
            track_file: None,
            // Every worker takes every state until `setup` says how flows are spread.
            owners: Owners::new(0, false),
            sequence: 1,
            replay: HashMap::new(),
            flows: HashMap::new(),
            started: std::time::Instant::now(),
            answering: Vec::new(),
            bulk_asked: 0,
        }
    }

    /// Runs until `stop`: asks the peer for its states, then sends and receives in rounds.
    pub fn run(&mut self, stop: &AtomicBool) {
        self.answering = vec![false; self.workers.len()];
        let asked = std::time::Instant::now();
        let mut last_ask = asked;
        let _ = self.sock.set_read_timeout(Some(ROUND));
        self.send(&[Message::UpdateRequest(UpdateRequest::All)]);
        let mut buf = vec![0u8; ha::MAX_DATAGRAM_LEN];
        while !stop.load(Ordering::Relaxed) {
            let out = self.changes();
            if !out.is_empty() {
                self.send(&out);
            }
            while let Ok((n, from)) = self.sock.recv_from(&mut buf) {
                self.receive(&buf[..n], from);
                let _ = self.sock.set_read_timeout(Some(Duration::from_millis(1)));
            }
            let _ = self.sock.set_read_timeout(Some(ROUND));
            // Asked again until answered: the peer may have started after the first request
            // (it takes a request only while it is not answering one).
            let synced = self.stats.synced.load(Ordering::Relaxed);
            if !synced && last_ask.elapsed() >= BULK_RETRY {
                self.send(&[Message::UpdateRequest(UpdateRequest::All)]);
                last_ask = std::time::Instant::now();
            }
            if !synced && asked.elapsed() >= BULK_WAIT {
                crate::log::warn(format_args!(
                    "ha: no bulk update from {} within {} s: taking this box's table as complete",
                    self.peer,
                    BULK_WAIT.as_secs()
                ));
                self.set_synced();
            }
        }
    }

    fn set_synced(&mut self) {
        if !self.stats.synced.swap(true, Ordering::Relaxed) {
            self.write_track(true);
        }
    }

    /// keepalived's `track_file`: a non-zero value puts the VRRP instance in FAULT (it does
    /// not become master); 0 once this box's table is complete.
    pub fn write_track(&self, synced: bool) {
        let Some(path) = &self.track_file else { return };
        let tmp = path.with_extension("tmp");
        let written = std::fs::write(&tmp, if synced { "0\n" } else { "1\n" })
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            crate::log::warn(format_args!("ha: writing {}: {e}", path.display()));
        }
    }

    /// The workers' changes since the last round, as messages; a BUS end once every worker
    /// answering the peer's request has sent its table.
    fn changes(&mut self) -> Vec<Message> {
        let digest = (self.digest)();
        let mut out = Vec::new();
        for (i, w) in self.workers.iter().enumerate() {
            while let Ok(items) = w.changes.try_recv() {
                for item in items {
                    match item {
                        SyncItem::State(s, nat) => out.push(Message::Update(convert::record_of(
                            &s,
                            nat.as_ref(),
                            self.creator,
                            digest,
                            &self.names,
                        ))),
                        SyncItem::Removed { proto, ends } => {
                            out.push(Message::Delete(convert::id_of(self.creator, proto, &ends)))
                        }
                        SyncItem::BulkEnd => {
                            self.answering[i] = false;
                            let left = self.answering.iter().filter(|&&a| a).count() as u64;
                            self.stats.bulk_answering.store(left, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
        if self.stats.bulk_sent.load(Ordering::Relaxed) < self.bulk_asked
            && !self.answering.iter().any(|&a| a)
        {
            out.push(Message::Bulk(ha::BulkStatus::End));
            self.stats.bulk_sent.fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    fn send(&mut self, messages: &[Message]) {
        let header = Header { creator: self.creator, sequence: self.sequence };
        let datagrams = match ha::encode_all(messages, &header, self.key.as_ref(), MAX_DATAGRAM) {
            Ok(d) => d,
            Err(e) => {
                crate::log::warn(format_args!(
                    "ha: cannot encode {} messages: {e}",
                    messages.len()
                ));
                return;
            }
        };
        self.sequence = self.sequence.wrapping_add(datagrams.len() as u64);
        for d in &datagrams {
            let ok = self.sock.send_to(d, self.peer).is_ok();
            let s = &self.stats;
            (if ok { &s.datagrams_sent } else { &s.send_errors }).fetch_add(1, Ordering::Relaxed);
        }
        self.stats.messages_sent.fetch_add(messages.len() as u64, Ordering::Relaxed);
    }

    /// A datagram from `from`: checked (source, tag, layout, sequence), its states to every
    /// worker (any of them may see the flow next).
    fn receive(&mut self, bytes: &[u8], from: SocketAddr) {
        let s = Arc::clone(&self.stats);
        let refuse = || s.refused.fetch_add(1, Ordering::Relaxed);
        if from.ip() != self.peer.ip() {
            refuse();
            return;
        }
        let Ok(d) = ha::decode(bytes, self.key.as_ref()) else {
            refuse();
            return;
        };
        let window = self.replay.entry(d.header.creator).or_default();
        if d.header.creator == self.creator || window.accept(d.header.sequence).is_err() {
            refuse();
            return;
        }
        s.datagrams_received.fetch_add(1, Ordering::Relaxed);
        s.last_received_unix_ms.store(unix_ms(), Ordering::Relaxed);
        s.messages_received.fetch_add(d.messages.len() as u64, Ordering::Relaxed);
        let items = self.items(&d.messages);
        self.deliver(items);
    }

    /// Each item to the worker that owns its flow, or to every worker.
    fn deliver(&self, items: Vec<(SyncItem, Option<usize>)>) {
        let mut per: Vec<Vec<SyncItem>> = vec![Vec::new(); self.workers.len()];
        for (item, owner) in items {
            match owner.and_then(|w| per.get_mut(w)) {
                Some(one) => one.push(item),
                None => per.iter_mut().for_each(|v| v.push(item)),
            }
        }
        for (w, items) in self.workers.iter().zip(per) {
            if !items.is_empty() {
                let _ = w.inbox.send(items);
            }
        }
    }

    /// The peer's messages as the workers' items, each with the worker that owns its flow
    /// (`None`: every worker, [`Owners`]); a request for every state sets the workers' bulk
    /// flags.
    fn items(&mut self, messages: &[Message]) -> Vec<(SyncItem, Option<usize>)> {
        let digest = (self.digest)();
        let mut items = Vec::new();
        for m in messages {
            match m {
                Message::Insert(r) | Message::Update(r) => {
                    match convert::snapshot_of(r, digest, &self.names) {
                        Ok(s) => {
                            let nat = convert::nat_of(r);
                            let owner = self.owners.of(s.proto, &s.ends, nat.as_ref());
                            self.remember(r.id.counter, &s, owner);
                            items.push((SyncItem::State(s, nat), owner));
                        }
                        Err(_) => {
                            self.stats.states_refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Message::Delete(id) => match self.flows.remove(&id.counter) {
                    Some((proto, ends, _, owner)) => {
                        items.push((SyncItem::Removed { proto, ends }, owner))
                    }
                    None => {
                        self.stats.unknown_deletes.fetch_add(1, Ordering::Relaxed);
                    }
                },
                // A request while the workers still answer the last one: the same answer
                // (setting their flags again would start their walks over).
                Message::UpdateRequest(UpdateRequest::All) if !self.answering.contains(&true) => {
                    for (w, answering) in self.workers.iter().zip(&mut self.answering) {
                        w.bulk_wanted.store(true, Ordering::Relaxed);
                        *answering = true;
                        self.stats.bulk_answering.fetch_add(1, Ordering::Relaxed);
                    }
                    self.bulk_asked += 1;
                }
                Message::Bulk(ha::BulkStatus::End) => self.set_synced(),
                _ => {}
            }
        }
        items
    }

    /// Remembers the flow of the peer's state `counter` (for its DEL), until it expires.
    fn remember(&mut self, counter: u64, s: &fw::state::StateSnapshot, owner: Option<usize>) {
        let now = self.started.elapsed().as_secs();
        if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&counter) {
            self.flows.retain(|_, f| f.2 > now);
        }
        if self.flows.len() < MAX_FLOWS || self.flows.contains_key(&counter) {
            let expires = now + u64::from(s.expires_in);
            self.flows.insert(counter, (s.proto, s.ends, expires, owner));
        }
    }
}

/// Milliseconds since the Unix epoch (the wall clock: `show ha` compares it with its own).
pub fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_millis() as u64)
}
