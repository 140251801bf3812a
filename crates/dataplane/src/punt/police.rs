//! The limits of the punt stage: a token bucket per class, and a small one per unresolved
//! next hop.

use io::ratelimit::TokenBucket;
use lpm::NextHop;

use super::PuntClass;

const CLASSES: usize = PuntClass::ALL.len();

/// A token bucket's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub per_second: u64,
    pub burst: u64,
}

/// What one worker (or, before [`share`](Self::share), all of them) may punt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PuntPolicy {
    /// Per class, in [`PuntClass`] order: its token bucket (`None`: not policed here; ICMP
    /// errors are, by the forwarder, before the copy).
    pub police: [Option<RateLimit>; CLASSES],
    /// Per class: frames its queue to the slow path holds (all workers together).
    pub queue: [usize; CLASSES],
    /// Packets per unresolved next hop let through at once, and per second after that.
    pub next_hop_burst: u64,
    pub next_hop_rate: u64,
}

impl PuntPolicy {
    /// One worker's share of the class rates and bursts, out of `workers` (at least 1 each).
    /// Per-next-hop limits stay as they are: they are per worker already.
    pub fn share(&self, workers: usize) -> PuntPolicy {
        let n = workers.max(1) as u64;
        let mut out = *self;
        for p in out.police.iter_mut().flatten() {
            *p = RateLimit { per_second: p.per_second.div_ceil(n), burst: p.burst.div_ceil(n) };
        }
        out
    }
}

/// The defaults of the config's `[router.punt]` (linerate's `setup` crate checks that they
/// agree).
impl Default for PuntPolicy {
    fn default() -> Self {
        let limit = |per_second, burst| Some(RateLimit { per_second, burst });
        PuntPolicy {
            police: [
                limit(10_000, 1_000),
                limit(10_000, 1_000),
                limit(5_000, 500),
                limit(20_000, 2_000),
                None,
            ],
            queue: [1_024, 1_024, 1_024, 1_024, 256],
            next_hop_burst: 8,
            next_hop_rate: 4,
        }
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
