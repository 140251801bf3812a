//! The queues from the workers to the slow path: one bounded channel per class, a doorbell,
//! and the slow path's service order.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use io::FramePool;
use io::ratelimit::TokenBucket;

use super::police::{NextHopThrottle, PuntPolicy};
use super::stats::{PuntDrop, PuntStats, SenderCounters};
use super::{Punt, PuntBatch, PuntClass, PuntPort, PuntedFrame};
use crate::fib::Fib;

const CLASSES: usize = PuntClass::ALL.len();

/// Frames of each class after ARP/ND that the slow path takes before it looks at ARP/ND
/// again: ARP/ND never waits behind more than a few hundred other frames.
const QUANTUM: usize = 64;

/// The punt stage's clock: the real one, or one a test moves by hand (ns).
#[derive(Debug, Clone)]
pub enum PuntClock {
    Real(Instant),
    Manual(Arc<AtomicU64>),
}

impl PuntClock {
    fn now(&self) -> u64 {
        match self {
            PuntClock::Real(epoch) => epoch.elapsed().as_nanos() as u64,
            PuntClock::Manual(ns) => ns.load(Ordering::Relaxed),
        }
    }
}

/// A worker's punt stage and its end of the queues (clone it per worker: each clone has its
/// own policers and counters).
pub struct PuntSender {
    queues: [SyncSender<PuntedFrame>; CLASSES],
    /// Rung after a burst queued something: the slow path sleeps on it.
    bell: SyncSender<()>,
    /// To tell a connected prefix's next hop (throttled per destination) from a gateway.
    fib: Arc<Fib>,
    policy: PuntPolicy,
    police: [Option<TokenBucket>; CLASSES],
    next_hop: NextHopThrottle,
    counters: Arc<SenderCounters>,
    stats: PuntStats,
    clock: PuntClock,
}

/// The slow path's end.
pub struct PuntReceiver {
    queues: [Receiver<PuntedFrame>; CLASSES],
    bell: Receiver<()>,
    stats: PuntStats,
}

/// The queues for `workers` workers under `policy` (rates for all workers together; each
/// sender polices its share). `fib` is the one the workers read.
pub fn punt_channel(
    policy: &PuntPolicy,
    workers: usize,
    fib: Arc<Fib>,
) -> (PuntSender, PuntReceiver) {
    let mut pairs: [_; CLASSES] = std::array::from_fn(|c| {
        let (tx, rx) = sync_channel(policy.queue[c].max(1));
        (Some(tx), Some(rx))
    });
    let queues = std::array::from_fn(|c| pairs[c].0.take().expect("each taken once"));
    let receivers = std::array::from_fn(|c| pairs[c].1.take().expect("each taken once"));
    let (bell_tx, bell_rx) = sync_channel(1);
    let stats = PuntStats::default();
    let sender = PuntSender::new(
        queues,
        bell_tx,
        fib,
        policy.share(workers),
        stats.clone(),
        PuntClock::Real(Instant::now()),
    );
    (sender, PuntReceiver { queues: receivers, bell: bell_rx, stats })
}

impl PuntSender {
    fn new(
        queues: [SyncSender<PuntedFrame>; CLASSES],
        bell: SyncSender<()>,
        fib: Arc<Fib>,
        policy: PuntPolicy,
        stats: PuntStats,
        clock: PuntClock,
    ) -> PuntSender {
        PuntSender {
            queues,
            bell,
            fib,
            police: policy.police.map(|p| p.map(|l| TokenBucket::new(l.per_second, l.burst))),
            next_hop: NextHopThrottle::new(policy.next_hop_rate, policy.next_hop_burst),
            policy,
            counters: stats.register(),
            stats,
            clock,
        }
    }

    /// Replaces the clock (tests: a synthetic one, so rates are exact).
    pub fn set_clock(&mut self, clock: PuntClock) {
        self.clock = clock;
    }

    /// Whether a frame of `class` may be queued at `now`: its next hop's share first (so a
    /// single flow to a silent host does not use up the class), then the class's bucket.
    fn admit(
        &mut self,
        class: PuntClass,
        punt: Punt,
        frame: &[u8],
        now: u64,
    ) -> Result<(), PuntDrop> {
        let share = match punt {
            Punt::Unresolved { next_hop, .. } => Some((
                next_hop,
                if self.fib.adj.is_glean(next_hop) { destination(frame) } else { 0 },
            )),
            // `route-to`'s gateway: a share of its own, whatever the packets' destinations.
            Punt::Via { gateway, .. } => Some((VIA_NEXT_HOP, address(gateway))),
            _ => None,
        };
        if let Some((next_hop, dst)) = share
            && !self.next_hop.allow(next_hop, dst, now)
        {
            return Err(PuntDrop::NextHopLimit);
        }
        let allowed = self.police[class as usize].as_mut().is_none_or(|bucket| bucket.allow(now));
        if allowed { Ok(()) } else { Err(PuntDrop::Policed) }
    }
}

impl Clone for PuntSender {
    fn clone(&self) -> Self {
        let queues = self.queues.clone();
        PuntSender::new(
            queues,
            self.bell.clone(),
            Arc::clone(&self.fib),
            self.policy,
            self.stats.clone(),
            self.clock.clone(),
        )
    }
}

impl PuntPort for PuntSender {
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch) {
        // One clock read per burst: punts are rare next to forwarded packets.
        let now = self.clock.now();
        let mut queued = false;
        for (desc, punt, in_port) in punts.drain() {
            let frame = pool.frame(desc);
            let class = PuntClass::of(punt, frame);
            let result = self.admit(class, punt, frame, now).and_then(|()| {
                let msg = PuntedFrame { punt, phys: desc.port, in_port, frame: frame.to_vec() };
                // Full: the slow path is behind. Disconnected: it is gone (shutting down).
                self.queues[class as usize].try_send(msg).map_err(|_| PuntDrop::QueueFull)
            });
            pool.free(desc);
            match result {
                Ok(()) => queued = true,
                Err(why) => self.counters.count(class, why),
            }
        }
        if queued {
            // Full: a wake-up is pending already.
            let _ = self.bell.try_send(());
        }
    }
}

/// The destination address of an IPv4 (as IPv4-mapped) or IPv6 packet; 0 if it has none.
/// The next-hop id [`Punt::Via`]'s gateways are throttled under (with their address), which
/// no adjacency has.
const VIA_NEXT_HOP: lpm::NextHop = lpm::NextHop::MAX;

/// An address as [`destination`] gives it (IPv4 mapped into IPv6).
fn address(ip: std::net::IpAddr) -> u128 {
    match ip {
        std::net::IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        std::net::IpAddr::V6(a) => u128::from(a),
    }
}

fn destination(frame: &[u8]) -> u128 {
    let Ok(l2) = wire::parse_l2(frame) else { return 0 };
    let l3 = &frame[l2.l3_offset..];
    match l2.ethertype {
        wire::EtherType::Ipv4 => wire::Ipv4Packet::new_checked(l3)
            .map_or(0, |ip| u128::from(ip.dst_addr().to_ipv6_mapped())),
        wire::EtherType::Ipv6 => {
            wire::Ipv6Packet::new_checked(l3).map_or(0, |ip| ip.dst_addr_u128())
        }
        _ => 0,
    }
}

impl PuntReceiver {
    /// Sleeps until a worker has queued something since the last wake-up, at most `timeout`.
    pub fn wait(&self, timeout: Duration) {
        if let Err(RecvTimeoutError::Disconnected) = self.bell.recv_timeout(timeout) {
            // Every worker is gone: nothing will ring; sleep instead of spinning.
            std::thread::sleep(timeout);
        }
    }

    /// Hands up to `budget` queued frames to `handle`, ARP and neighbour discovery first:
    /// all of them, then up to [`QUANTUM`] of each other class in turn, then ARP/ND again.
    /// Returns how many it handed over (`budget`: there may be more).
    pub fn serve(&self, budget: usize, mut handle: impl FnMut(PuntedFrame)) -> usize {
        let mut done = 0;
        loop {
            let before = done;
            for (c, q) in self.queues.iter().enumerate() {
                let quantum = if c == PuntClass::ArpNd as usize { budget } else { QUANTUM };
                for msg in q.try_iter().take(quantum.min(budget - done)) {
                    handle(msg);
                    done += 1;
                }
            }
            if done == before || done >= budget {
                return done;
            }
        }
    }

    /// Every worker's punt drops.
    pub fn stats(&self) -> PuntStats {
        self.stats.clone()
    }
}
