//! The control plane's side of the kernel fast path (`router.fast_path`): a thread that
//! turns the workers' offers (`dataplane::offload`) into the XDP program's flow entries,
//! and follows which outputs can take redirected frames.
//!
//! An output takes them when its driver has `ndo_xdp_xmit` (for a veth: while its peer has an
//! XDP program or GRO on). That is checked at start and every second after; flows to an
//! output that cannot take them stay in the pipeline, counted as `no_redirect` (the tc
//! program could send them as skbs, but to a veth without NAPI those pile into a backlog that
//! starves under overload: docs/performance.md).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dataplane::offload::{ControlQueues, Offer};
use io::xdp::fastpath::{FastPath, FlowEntry, FlowKey};

mod counts;

/// errno's "no such device" (Linux).
const ENODEV: i32 = 19;

/// How often the outputs' ability to take redirected frames is read again.
const RECHECK: Duration = Duration::from_secs(1);
/// The thread's nap when no worker offered anything: 1 ms after an offer, doubling up to
/// 32 ms while none comes (an idle router's thread wakes 30 times a second; a new flow waits
/// at most that long in the pipeline before it is offloaded).
const NAP_MIN: Duration = Duration::from_millis(1);
const NAP_MAX: Duration = Duration::from_millis(32);

/// One physical port as the fast path sees it.
#[derive(Debug, Clone)]
pub struct PortTarget {
    pub ifindex: u32,
    /// Its slot in the program's maps (an AF_XDP port with the fast path).
    pub slot: Option<u16>,
    /// The IP MTU of its untagged traffic.
    pub mtu: u16,
    /// Its MAC address (what its frames must be sent to).
    pub mac: [u8; 6],
}

/// What the fast path did, for `show interfaces`, the metrics and the exit report.
#[derive(Debug, Default)]
pub struct OffloadStats {
    /// Flow entries written.
    pub installed: AtomicU64,
    /// Offers for an output that takes no redirected frames.
    pub no_redirect: AtomicU64,
    /// Entries the kernel refused to store.
    pub errors: AtomicU64,
    /// Outputs that take redirected frames now, one bit per physical port.
    pub outputs: AtomicU64,
    /// Packets the program forwarded, credited back to their rules' counters.
    pub credited: AtomicU64,
    /// Entries removed once their decision was void or their time up.
    pub retired: AtomicU64,
    /// Entries the table evicted (full) before their last counts were read.
    pub evicted: AtomicU64,
}

/// The fast path of a running router.
pub struct Offload {
    pub fast: Arc<FastPath>,
    /// The data plane's generation of decisions, which entries are installed under.
    decisions: Arc<dataplane::offload::Decisions>,
    /// Each physical port; an entry changes when its interface is created again.
    ports: Mutex<Vec<PortTarget>>,
    pub stats: Arc<OffloadStats>,
    /// A query of the outputs' features failed (warned once).
    query_failed: AtomicBool,
    /// A port was rebuilt: the thread reads every output again ([`Offload::port_rebuilt`]).
    rebuilt: AtomicBool,
}

impl Offload {
    /// The fast path the ports were opened with (none if no port runs it). Mirrors `decisions`
    /// into the program from here on.
    pub fn new(
        ports: Vec<PortTarget>,
        decisions: &Arc<dataplane::offload::Decisions>,
    ) -> Option<Offload> {
        let fast = FastPath::current()?;
        let mirror = Arc::clone(&fast);
        decisions.set_mirror(Box::new(move |g| {
            if let Err(e) = mirror.set_generation(g) {
                crate::log::warn(format_args!("fast path: cannot move its generation on ({e}): offloaded flows keep their old decisions"));
            }
        }));
        let stats = Arc::new(OffloadStats::default());
        let offload = Offload {
            fast,
            decisions: Arc::clone(decisions),
            ports: Mutex::new(ports),
            stats,
            query_failed: AtomicBool::new(false),
            rebuilt: AtomicBool::new(false),
        };
        offload.recheck_outputs(None);
        Some(offload)
    }

    fn ports(&self) -> MutexGuard<'_, Vec<PortTarget>> {
        self.ports.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether frames may come in through physical port `phys` onto the fast path.
    pub fn takes_input(&self, phys: usize) -> bool {
        self.ports().get(phys).is_some_and(|p| p.slot.is_some())
    }

    /// Physical port `phys`'s interface was created again as `ifindex` (its slot moved with
    /// it, `FastPath::move_slot`): every offloaded flow goes back to the pipeline, which
    /// offloads them again through the new interface.
    pub fn port_rebuilt(&self, phys: usize, ifindex: u32) {
        let old = {
            let mut ports = self.ports();
            let Some(p) = ports.get_mut(phys) else { return };
            std::mem::replace(&mut p.ifindex, ifindex)
        };
        if let Err(e) = self.fast.set_output(old, false) {
            crate::log::warn(format_args!("fast path: output {old}: {e}"));
        }
        self.decisions.changed();
        self.rebuilt.store(true, Ordering::Release);
    }

    /// Reads again which outputs take redirected frames, and tells the program.
    fn recheck_outputs(&self, previous: Option<u64>) -> u64 {
        let mut now = 0u64;
        let ports = self.ports().clone();
        for (i, p) in ports.iter().enumerate() {
            let was = previous.is_some_and(|prev| (prev >> i) & 1 == 1);
            // Unknown (the query failed): as it was, said once.
            let takes = io::xdp::features::takes_redirects(p.ifindex).unwrap_or_else(|e| {
                // Deleted, to be rebuilt (`crate::rebuild`): no output until then.
                if e.raw_os_error() == Some(ENODEV) {
                    return false;
                }
                if !self.query_failed.swap(true, Ordering::Relaxed) {
                    crate::log::warn(format_args!("fast path: cannot read interface {}'s XDP features ({e}); its outputs stay as they were", p.ifindex));
                }
                was
            });
            if takes {
                now |= 1 << i;
            }
            if previous.is_none_or(|prev| (prev >> i) & 1 != u64::from(takes))
                && let Err(e) = self.fast.set_output(p.ifindex, takes)
            {
                crate::log::warn(format_args!("fast path: output {}: {e}", p.ifindex));
            }
        }
        // An output that stopped taking redirects: the tc program, which would still send the
        // flows' partial-checksum frames there as skbs, must not (see the module's header),
        // so every decision is voided and those flows go back to the pipeline.
        if previous.is_some_and(|prev| prev & !now != 0) {
            self.decisions.changed();
        }
        self.stats.outputs.store(now, Ordering::Relaxed);
        now
    }

    /// The program's entry for `offer`, if its ports can carry it.
    fn entry(&self, offer: &Offer, outputs: u64) -> Option<(FlowKey, FlowEntry)> {
        let ports = self.ports();
        let input = ports.get(usize::from(offer.in_port))?;
        let output = ports.get(usize::from(offer.out_port))?;
        let (in_slot, out_slot) = (input.slot?, output.slot.unwrap_or(u16::MAX));
        if (outputs >> offer.out_port) & 1 == 0 {
            self.stats.no_redirect.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let key = FlowKey {
            ifindex: input.ifindex,
            proto: offer.proto,
            family: offer.family,
            sport: offer.flow.sport,
            dport: offer.flow.dport,
            pad: 0,
            src: offer.flow.src,
            dst: offer.flow.dst,
        };
        let mut entry = FlowEntry {
            dst_mac: offer.dst_mac,
            src_mac: offer.src_mac,
            out_ifindex: output.ifindex,
            generation: offer.generation,
            mtu: output.mtu,
            in_slot,
            out_slot,
            in_mac: input.mac,
            expires: offer.expires_ns,
            ..FlowEntry::default()
        };
        if offer.expires_ns != 0 {
            entry.flags |= FlowEntry::EXPIRES;
        }
        if offer.sent != offer.flow {
            // The program translates IPv4 only (the learner offers no other).
            if offer.family != 4 {
                return None;
            }
            entry.flags |= FlowEntry::NAT;
            entry.nat_src.copy_from_slice(&offer.sent.src[..4]);
            entry.nat_dst.copy_from_slice(&offer.sent.dst[..4]);
            (entry.nat_sport, entry.nat_dport) = (offer.sent.sport, offer.sent.dport);
        }
        Some((key, entry))
    }

    /// Starts the thread that installs the workers' offers until `stop`.
    pub fn start(
        self: Arc<Self>,
        mut queues: Vec<ControlQueues>,
        stop: Arc<AtomicBool>,
    ) -> Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("lr-offload".into())
            .spawn(move || self.run(&mut queues, &stop))
            .context("starting the fast path's thread")
    }

    fn run(&self, queues: &mut [ControlQueues], stop: &AtomicBool) {
        let mut outputs = self.stats.outputs.load(Ordering::Relaxed);
        let mut checked = Instant::now();
        let mut nap = NAP_MIN;
        let mut counts = counts::Counts::default();
        while !stop.load(Ordering::Relaxed) {
            let mut got = 0;
            for (worker, q) in queues.iter_mut().enumerate() {
                while q.offers.pop_with(|offer| self.install(offer, outputs, worker, &mut counts)) {
                    got += 1;
                }
            }
            if self.rebuilt.swap(false, Ordering::Acquire) {
                outputs = self.recheck_outputs(None);
            }
            if checked.elapsed() >= RECHECK {
                outputs = self.recheck_outputs(Some(outputs));
                let now = io::clock::monotonic_ns();
                counts.harvest(&self.fast, self.decisions.current(), now, &self.stats);
                checked = Instant::now();
            }
            counts.send(queues, &self.stats);
            nap = if got == 0 { (nap * 2).min(NAP_MAX) } else { NAP_MIN };
            std::thread::sleep(nap);
        }
    }

    /// Installs an offer's entry, unless a change voided its decision meanwhile.
    fn install(&self, offer: &Offer, outputs: u64, worker: usize, counts: &mut counts::Counts) {
        let Some((key, entry)) = self.entry(offer, outputs) else { return };
        counts.replacing(&self.fast, &key);
        let mut failed = false;
        let installed = self.decisions.install(offer.generation, || {
            failed = self.fast.insert(&key, &entry).is_err();
            !failed
        });
        if installed {
            counts.installed(key, worker, offer.counted, offer.generation);
            self.stats.installed.fetch_add(1, Ordering::Relaxed);
        } else if failed {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Everything the program counted on physical port `phys` (none if it has no slot).
    pub fn port_counts(&self, phys: usize) -> Option<io::xdp::fastpath::PortCounts> {
        let slot = self.ports().get(phys)?.slot?;
        self.fast.port_counts(slot).ok()
    }
}
