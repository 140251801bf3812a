//! A token bucket, for limiting how many ICMP errors per second the router generates (as
//! FreeBSD's `net.inet.icmp.errppslimit`, default 200/s, and Linux's `net.ipv4.icmp_ratelimit`;
//! RFC 1812 4.3.2.8 and RFC 4443 2.4(f) require routers to limit the rate of ICMP errors).
//!
//! Time is passed in by the caller (`now_ns`, any monotonic nanosecond clock), so the bucket is
//! a pure state machine: no syscall per packet, and tests use a synthetic clock. The arithmetic
//! is in integers: the bucket holds "token-nanoseconds" (one token = 10^9 units) and gains
//! `rate_per_sec` units per elapsed nanosecond, so no rounding drift accumulates.

const NANOS: u64 = 1_000_000_000;

/// A token bucket: `rate_per_sec` tokens per second, at most `burst` stored; each allowed
/// event takes one token. It starts full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBucket {
    rate_per_sec: u64,
    /// Capacity in token-nanoseconds (`burst * 10^9`).
    capacity: u64,
    /// Current fill in token-nanoseconds.
    level: u64,
    /// When `level` was last brought up to date; `None` before the first call.
    last_ns: Option<u64>,
    allowed: u64,
    suppressed: u64,
}

impl TokenBucket {
    /// A bucket refilling at `rate_per_sec` tokens per second and holding at most `burst`
    /// (a burst of 0 is raised to 1, so a positive rate lets something through). A rate of 0
    /// allows the initial burst and then nothing.
    pub fn new(rate_per_sec: u64, burst: u64) -> TokenBucket {
        let capacity = burst.max(1).saturating_mul(NANOS);
        TokenBucket {
            rate_per_sec,
            capacity,
            level: capacity,
            last_ns: None,
            allowed: 0,
            suppressed: 0,
        }
    }

    /// Whether one more event may happen at `now_ns`; if so its token is taken. A clock that
    /// goes backwards adds nothing (and the bucket then counts from the earlier time).
    #[inline]
    pub fn allow(&mut self, now_ns: u64) -> bool {
        self.refill(now_ns);
        if self.level >= NANOS {
            self.level -= NANOS;
            self.allowed += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    fn refill(&mut self, now_ns: u64) {
        let elapsed = match self.last_ns {
            Some(last) => now_ns.saturating_sub(last),
            None => 0,
        };
        self.last_ns = Some(now_ns);
        let gained = u128::from(elapsed) * u128::from(self.rate_per_sec);
        let room = u128::from(self.capacity - self.level);
        self.level += gained.min(room) as u64;
    }

    /// Whole tokens available at `now_ns` (brings the bucket up to date, takes nothing).
    pub fn tokens(&mut self, now_ns: u64) -> u64 {
        self.refill(now_ns);
        self.level / NANOS
    }

    /// Events allowed so far.
    pub fn allowed(&self) -> u64 {
        self.allowed
    }

    /// Events refused so far (what an `icmp_ratelimit` counter would show).
    pub fn suppressed(&self) -> u64 {
        self.suppressed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn burst_then_rate() {
        // 200/s (FreeBSD's errppslimit default) with a burst of 10.
        let mut b = TokenBucket::new(200, 10);
        let t0 = 5 * NANOS;
        assert!((0..10).all(|_| b.allow(t0)));
        assert!(!b.allow(t0));
        // One token every 5 ms.
        assert!(!b.allow(t0 + 4 * MS));
        assert!(b.allow(t0 + 5 * MS));
        assert!(!b.allow(t0 + 5 * MS));
        assert!(b.allow(t0 + 10 * MS));
        assert_eq!((b.allowed(), b.suppressed()), (12, 3));
    }

    #[test]
    fn sustained_rate_over_a_simulated_second() {
        // Offer one event every 100 us (10k/s) for 10 s: 200/s + the initial burst of 20 pass.
        let mut b = TokenBucket::new(200, 20);
        let passed = (0..100_000u64).filter(|i| b.allow(i * 100_000)).count() as u64;
        // The last event is at 9.9999 s: 20 + floor(9.9999 * 200) = 2019.
        assert_eq!(passed, 2019);
        assert_eq!(b.allowed() + b.suppressed(), 100_000);
    }

    #[test]
    fn refill_caps_at_burst_and_fractions_are_kept() {
        let mut b = TokenBucket::new(3, 2);
        assert!(b.allow(0) && b.allow(0) && !b.allow(0));
        // An hour idle refills to the burst, no more.
        assert_eq!(b.tokens(3600 * NANOS), 2);
        assert!(b.allow(3600 * NANOS) && b.allow(3600 * NANOS) && !b.allow(3600 * NANOS));
        // 3/s: a token every 333.33 ms; three thirds-of-a-second make exactly one second.
        let t = 3600 * NANOS;
        assert!(!b.allow(t + 333_333_333));
        assert!(b.allow(t + 333_333_334));
        assert_eq!(b.tokens(t + NANOS), 2); // 3 tokens gained in 1 s, one spent
    }

    #[test]
    fn clock_backwards_and_edge_rates() {
        let mut b = TokenBucket::new(1, 1);
        assert!(b.allow(10 * NANOS));
        assert!(!b.allow(NANOS)); // backwards: nothing gained
        assert!(!b.allow(NANOS + NANOS / 2));
        assert!(b.allow(2 * NANOS));
        let mut z = TokenBucket::new(0, 3);
        assert_eq!((0..10).filter(|i| z.allow(i * 100 * NANOS)).count(), 3);
        let mut one = TokenBucket::new(5, 0); // burst 0 is raised to 1
        assert!(one.allow(0) && !one.allow(0));
        // Huge rate and elapsed time do not overflow.
        let mut big = TokenBucket::new(u64::MAX, u64::MAX);
        assert!(big.allow(0));
        assert!(big.allow(u64::MAX));
    }
}
