//! The sync thread (`lr-sync`): the workers' state changes out to the peer over UDP, the
//! peer's in to every worker. One datagram per round of changes (more if they do not fit),
//! a round every [`ROUND`]; a replay window per peer creator; at start, a request for every
//! state the peer holds (pfsync's bulk update), which the peer answers by setting its
//! workers' bulk flags.

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

/// How long the thread waits for the peer's datagrams between two rounds of sending.
const ROUND: Duration = Duration::from_millis(20);
/// Datagrams stay under a 1500-byte MTU with IPv6 and UDP headers (opnsense/core#4540: a
/// bulk update failing over a link with a smaller MTU).
const MAX_DATAGRAM: usize = 1400;
/// Flows remembered for the peer's DEL messages (its counters), at most.
const MAX_FLOWS: usize = 1 << 22;

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
}

/// The sync thread's state.
pub struct Link {
    pub sock: UdpSocket,
    pub peer: SocketAddr,
    pub key: Option<Key>,
    pub creator: u32,
    pub names: Names,
    /// The rule set's digest now: equal on both boxes when their rule sets are.
    pub digest: Box<dyn Fn() -> u64 + Send>,
    pub workers: Vec<WorkerLink>,
    pub stats: Arc<LinkStats>,
    sequence: u64,
    replay: HashMap<u32, ReplayWindow>,
    flows: HashMap<u64, (u8, StateEnds)>,
}

impl Link {
    pub fn new(
        sock: UdpSocket,
        peer: SocketAddr,
        key: Option<Key>,
        creator: u32,
        names: Names,
        digest: Box<dyn Fn() -> u64 + Send>,
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
            sequence: 1,
            replay: HashMap::new(),
            flows: HashMap::new(),
        }
    }

    /// Runs until `stop`: asks the peer for its states, then sends and receives in rounds.
    pub fn run(&mut self, stop: &AtomicBool) {
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
        }
    }

    /// The workers' changes since the last round, as messages.
    fn changes(&mut self) -> Vec<Message> {
        let digest = (self.digest)();
        let mut out = Vec::new();
        for w in &self.workers {
            while let Ok(items) = w.changes.try_recv() {
                for item in items {
                    match item {
                        SyncItem::State(s) => out.push(Message::Update(convert::record_of(
                            &s,
                            self.creator,
                            digest,
                            &self.names,
                        ))),
                        SyncItem::Removed { proto, ends } => {
                            out.push(Message::Delete(convert::id_of(self.creator, proto, &ends)))
                        }
                        SyncItem::BulkEnd => {}
                    }
                }
            }
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
        s.messages_received.fetch_add(d.messages.len() as u64, Ordering::Relaxed);
        let items = self.items(&d.messages);
        if !items.is_empty() {
            for w in &self.workers {
                let _ = w.inbox.send(items.clone());
            }
        }
    }

    /// The peer's messages as the workers' items; a request for every state sets the
    /// workers' bulk flags.
    fn items(&mut self, messages: &[Message]) -> Vec<SyncItem> {
        let digest = (self.digest)();
        let mut items = Vec::new();
        for m in messages {
            match m {
                Message::Insert(r) | Message::Update(r) => {
                    match convert::snapshot_of(r, digest, &self.names) {
                        Ok(s) => {
                            if self.flows.len() < MAX_FLOWS {
                                self.flows.insert(r.id.counter, (s.proto, s.ends));
                            }
                            items.push(SyncItem::State(s));
                        }
                        Err(_) => {
                            self.stats.states_refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Message::Delete(id) => {
                    if let Some((proto, ends)) = self.flows.remove(&id.counter) {
                        items.push(SyncItem::Removed { proto, ends });
                    }
                }
                Message::UpdateRequest(UpdateRequest::All) => {
                    for w in &self.workers {
                        w.bulk_wanted.store(true, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
        }
        items
    }
}
