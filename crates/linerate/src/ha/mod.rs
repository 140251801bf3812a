//! State synchronisation with a peer box (`[ha]`, issue 43; `docs/ha.md`): each worker's
//! state changes go to the peer over UDP, in `crates/ha`'s datagrams, and the peer's states
//! come into every worker's table, so that either box can carry the other's connections.
//!
//! The workers' side (journal, export, import, `SyncPort`) is `dataplane::firewall::sync`;
//! here are the conversion to the wire's records ([`convert`]) and the thread ([`link`]).

pub mod convert;
pub mod link;
mod owners;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, sync_channel};
use std::thread::JoinHandle;

use anyhow::{Context, Result, bail};
use config::{Config, HaSettings};
use dataplane::firewall::RulesSlot;
use dataplane::firewall::sync::{OUT_BATCHES, SyncPort, SyncStats};

use link::{Link, LinkStats, WorkerLink};

/// Changes a worker's table records between two visits of the worker's sync port.
pub const JOURNAL: usize = 1 << 16;

/// State sync, set up and not yet running.
pub struct Ha {
    link: Link,
    /// What `show ha`, the metrics and the exit report read of it.
    pub view: Arc<HaView>,
}

/// What `show ha` and the metrics read of a running sync.
pub struct HaView {
    pub listen: std::net::SocketAddr,
    pub peer: std::net::SocketAddr,
    pub creator: u32,
    pub authenticated: bool,
    /// Each peer state goes to the worker that owns its flow (else to every worker).
    pub steered: bool,
    pub link: Arc<LinkStats>,
    pub workers: Vec<Arc<SyncStats>>,
}

impl HaView {
    /// The `ha` answer of the control socket.
    pub fn json(&self) -> serde_json::Value {
        use std::sync::atomic::Ordering::Relaxed;
        let l = &self.link;
        let sum = |f: fn(&SyncStats) -> &std::sync::atomic::AtomicU64| {
            self.workers.iter().map(|w| f(w).load(Relaxed)).sum::<u64>()
        };
        serde_json::json!({
            "listen": self.listen.to_string(), "peer": self.peer.to_string(), "creator": self.creator,
            "authenticated": self.authenticated, "synced": l.synced.load(Relaxed),
            "states_to": if self.steered { "the worker of the flow" } else { "every worker" },
            "datagrams_sent": l.datagrams_sent.load(Relaxed), "messages_sent": l.messages_sent.load(Relaxed),
            "send_errors": l.send_errors.load(Relaxed), "datagrams_received": l.datagrams_received.load(Relaxed),
            "messages_received": l.messages_received.load(Relaxed), "refused": l.refused.load(Relaxed),
            "states_refused": l.states_refused.load(Relaxed), "unknown_deletes": l.unknown_deletes.load(Relaxed),
            "bulk_updates_sent": l.bulk_sent.load(Relaxed),
            "inserted": sum(|w| &w.inserted), "updated": sum(|w| &w.updated), "stale": sum(|w| &w.stale),
            "removed": sum(|w| &w.removed), "import_refused": sum(|w| &w.refused),
            "worker_bulk_updates": sum(|w| &w.bulk_updates), "lost": sum(|w| &w.lost),
            "translations": sum(|w| &w.translations), "translations_refused": sum(|w| &w.translations_refused),
            "bulk_workers_answering": l.bulk_answering.load(Relaxed),
            "peer_silent_ms": match l.last_received_unix_ms.load(Relaxed) {
                0 => serde_json::Value::Null,
                t => link::unix_ms().saturating_sub(t).into(),
            },
        })
    }
}

/// Binds the sync socket (before privileges are dropped) and makes a sync port for each of
/// `workers` workers (the caller gives them to the workers with [`JOURNAL`]). `None`
/// without `[ha]`.
/// `steered`: every interface spreads flows by linerate's own hash, so a peer's state goes
/// to the one worker that owns its flow ([`owners`]).
pub fn setup(
    cfg: &Config,
    slot: Option<&Arc<RulesSlot>>,
    workers: usize,
    steered: bool,
) -> Result<Option<(Ha, Vec<SyncPort>)>> {
    let Some(settings) = &cfg.ha else { return Ok(None) };
    let Some(slot) = slot else { bail!("[ha] needs a [firewall]") };
    let key = key(settings)?;
    let sock = std::net::UdpSocket::bind(settings.listen).with_context(|| {
        format!(
            "ha: binding the sync socket to {} (an address of this namespace?)",
            settings.listen
        )
    })?;
    let mut links = Vec::new();
    let mut worker_stats = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..workers {
        let (out_tx, out_rx) = sync_channel(OUT_BATCHES);
        let (in_tx, in_rx) = channel();
        let bulk = Arc::new(AtomicBool::new(false));
        let port = SyncPort::new(out_tx, in_rx, Arc::clone(&bulk));
        worker_stats.push(Arc::clone(&port.stats));
        ports.push(port);
        links.push(WorkerLink { changes: out_rx, inbox: in_tx, bulk_wanted: bulk });
    }
    let ours: Vec<String> = cfg.interfaces.iter().map(|i| i.name.clone()).collect();
    let digest = digest(slot, &ours);
    let names = convert::Names { ours, peer_to_ours: settings.interfaces.clone() };
    let mut link = Link::new(sock, settings.peer, key, settings.creator, names, digest, links);
    link.track_file = settings.track_file.clone();
    link.owners = owners::Owners::new(workers, steered);
    let view = Arc::new(HaView {
        listen: settings.listen,
        peer: settings.peer,
        creator: settings.creator,
        authenticated: link.key.is_some(),
        steered: steered && workers > 1,
        link: Arc::clone(&link.stats),
        workers: worker_stats,
    });
    Ok(Some((Ha { link, view }, ports)))
}

impl Ha {
    /// Starts the sync thread, until `stop`.
    pub fn start(mut self, stop: Arc<AtomicBool>) -> Result<JoinHandle<()>> {
        // Before the router says it forwards: keepalived must not see a complete table first.
        self.link.write_track(false);
        std::thread::Builder::new()
            .name("lr-sync".into())
            .spawn(move || self.link.run(&stop))
            .context("starting the state sync thread")
    }
}

/// The shared secret from `key_file` (a trailing newline dropped).
pub fn key(settings: &HaSettings) -> Result<Option<ha::Key>> {
    let Some(path) = &settings.key_file else {
        crate::log::warn(format_args!(
            "ha: no key_file: sync datagrams go unauthenticated; keep the sync link private"
        ));
        return Ok(None);
    };
    let text = std::fs::read(path).with_context(|| format!("ha: reading {}", path.display()))?;
    let secret = text.strip_suffix(b"\n").unwrap_or(&text);
    let key = ha::Key::new(secret).with_context(|| format!("ha: the key in {}", path.display()))?;
    Ok(Some(key))
}

/// The rule set's digest (FNV-1a over the rules as pf text), computed again only when a
/// reload published another rule set.
fn digest(slot: &Arc<RulesSlot>, names: &[String]) -> Box<dyn FnMut() -> u64 + Send> {
    let slot = Arc::clone(slot);
    let names = names.to_vec();
    let (mut generation, mut digest) = (u64::MAX, 0);
    Box::new(move || {
        if slot.generation() != generation {
            generation = slot.generation();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let text = slot.current().rules.to_pf_text(&refs).unwrap_or_default();
            digest = dataplane::fnv::fnv1a(dataplane::fnv::FNV_OFFSET, text.as_bytes());
        }
        digest
    })
}
