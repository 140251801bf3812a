//! The limits of the punt stage: a token bucket per class, and a small one per unresolved
//! next hop.

use io::ratelimit::TokenBucket;
use lpm::NextHop;

use super::PuntClass;

const CLASSES: usize = PuntClass::ALL.len();

/// What one worker (or, before [`share`](Self::share), all of them) may punt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PuntPolicy {
    /// Per class, in [`PuntClass`] order: its token bucket's rate per second and burst
    /// (`None`: not policed here; ICMP errors are, by the forwarder, before the copy).
    pub police: [Option<(u64, u64)>; CLASSES],
    /// Per class: frames its queue to the slow path holds (all workers together).
    pub queue: [usize; CLASSES],
    /// Packets per unresolved next hop let through at once, and per second after that.
    pub next_hop_burst: u64,
    pub next_hop_rate: u64,
}

impl PuntPolicy {
    /// The config's `[router.punt]`.
    pub fn from_config(p: &config::PuntSettings) -> PuntPolicy {
        let c = |l: config::PuntClassLimits| Some((u64::from(l.rate), u64::from(l.burst)));
        let q = |l: config::PuntClassLimits| l.queue as usize;
        PuntPolicy {
            police: [c(p.arp_nd), c(p.local), c(p.resolve), c(p.fragment), None],
            queue: [q(p.arp_nd), q(p.local), q(p.resolve), q(p.fragment), p.icmp_error_queue as usize],
            next_hop_burst: u64::from(p.next_hop_burst),
            next_hop_rate: u64::from(p.next_hop_rate),
        }
    }

    /// One worker's share of the class rates and bursts, out of `workers` (at least 1 each).
    /// Per-next-hop limits stay as they are: they are per worker already.
    pub fn share(&self, workers: usize) -> PuntPolicy {
        let n = workers.max(1) as u64;
        let mut out = *self;
        for p in out.police.iter_mut().flatten() {
            *p = (p.0.div_ceil(n), p.1.div_ceil(n));
        }
        out
    }
}

impl Default for PuntPolicy {
    fn default() -> Self {
        PuntPolicy::from_config(&config::PuntSettings::default())
    }
}

/// Next hops remembered per worker: a direct-mapped table, so its cost never grows.
const SLOTS: usize = 1024;

/// Per unresolved next hop, a token bucket: at most a few packets of one next hop wait for
/// its resolution, however fast they come. Without it a single flow to a silent host would
/// use the whole `resolve` class. A connected prefix's next hop is each destination (each is
/// resolved by itself); a gateway's is the gateway, whatever the destinations behind it.
///
/// A table slot taken by another next hop starts over full: a flood of distinct addresses
/// evicts its own entries and is bounded by the class's bucket instead.
pub struct NextHopThrottle {
    slots: Box<[Slot]>,
    rate: u64,
    burst: u64,
}

#[derive(Clone)]
struct Slot {
    id: NextHop,
    dst: u128,
    bucket: Option<TokenBucket>,
}

impl NextHopThrottle {
    pub fn new(rate: u64, burst: u64) -> NextHopThrottle {
        let empty = Slot { id: 0, dst: 0, bucket: None };
        NextHopThrottle { slots: vec![empty; SLOTS].into_boxed_slice(), rate, burst }
    }

    /// Whether one more packet for next hop `id` (a connected prefix's: to `dst`, else 0) may
    /// wait for resolution at `now` (ns).
    pub fn allow(&mut self, id: NextHop, dst: u128, now: u64) -> bool {
        let (rate, burst) = (self.rate, self.burst);
        let slot = &mut self.slots[index(id, dst)];
        if slot.id != id || slot.dst != dst {
            *slot = Slot { id, dst, bucket: None };
        }
        slot.bucket.get_or_insert_with(|| TokenBucket::new(rate, burst)).allow(now)
    }
}

fn index(id: NextHop, dst: u128) -> usize {
    let h = (dst as u64) ^ ((dst >> 64) as u64).rotate_left(17) ^ (u64::from(id) << 40);
    (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOTS.trailing_zeros())) as usize
}
