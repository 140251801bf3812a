//! What a running `linerate run` shares with the threads that look at it or change it: the
//! control socket ([`crate::control`]), reloads ([`crate::reload`]), the packet streams
//! ([`crate::stream`]) and the metrics server ([`crate::metrics`]).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use config::Config;
use dataplane::WorkerCounters;
use dataplane::firewall::RulesSlot;
use dataplane::slowpath::SlowPath;
use dataplane::tap::CaptureSlot;

/// What the control socket can see of a running router.
pub struct RouterState {
    pub cfg: Config,
    pub slot: Option<Arc<RulesSlot>>,
    pub workers: Vec<Arc<WorkerCounters>>,
    pub slow: Arc<Mutex<SlowPath>>,
    pub ports: Vec<dataplane::PortInfo>,
    /// Backend of each physical interface.
    pub kinds: Vec<String>,
    /// What the workers' punt stages dropped, by class and reason.
    pub punt: dataplane::punt::PuntStats,
    pub started: Instant,
    /// Why rules that keep state must not be loaded into this run (see
    /// [`crate::steering::reload_refusal`]).
    pub reload_refusal: Option<String>,
    /// The workers' firewalls (rules, state tables): `None` without a `[firewall]`.
    pub fw: Option<crate::control_fw::FwControl>,
    /// The config in effect: the one `run` started with, as reloads changed it.
    pub running: Mutex<Config>,
    /// The firewall's log (`linerate log`), with a `[firewall]`.
    pub log: Option<Arc<crate::logger::LogHub>>,
    /// The workers' capture slots (`linerate capture`).
    pub captures: Captures,
    /// The kernel route mirror's counters (`router.kernel_routes`).
    pub kernel_routes: Option<Arc<crate::route_sync::SyncStats>>,
    /// State sync with the peer box (`[ha]`).
    pub ha: Option<Arc<crate::ha::HaView>>,
    /// The physical ports' links, as the link events thread last heard of them.
    pub links: Arc<crate::links::Links>,
}

/// The capture side of a running router: each worker's slot, and whether a capture runs.
pub struct Captures {
    pub slots: Vec<Arc<CaptureSlot>>,
    busy: Mutex<()>,
}

impl Captures {
    pub fn new(slots: Vec<Arc<CaptureSlot>>) -> Captures {
        Captures { slots, busy: Mutex::new(()) }
    }

    /// Held while a capture runs (one at a time); `None` while another one does.
    pub fn try_start(&self) -> Option<MutexGuard<'_, ()>> {
        self.busy.try_lock().ok()
    }
}
