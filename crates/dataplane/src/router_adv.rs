//! Router advertisements (RFC 4861 6.2) on the interfaces configured with `ra`: when to send
//! them, as a pure schedule over a monotonic clock (ns), so it is tested without waiting.
//!
//! * Unsolicited (6.2.4): one at once when advertising starts, then at intervals drawn
//!   uniformly from [MinRtrAdvInterval, MaxRtrAdvInterval]; the first
//!   MAX_INITIAL_RTR_ADVERTISEMENTS intervals are at most MAX_INITIAL_RTR_ADVERT_INTERVAL.
//! * Solicited (6.2.6): a valid Router Solicitation brings the next advertisement forward to
//!   a random delay in [0, MAX_RA_DELAY_TIME], but never sooner than MIN_DELAY_BETWEEN_RAS
//!   after the last one (plus that delay); every advertisement goes to all nodes, so this
//!   also bounds how many a flood of solicitations can draw: one per 3 s.
//! * Final (6.2.5): when the router stops, one with a Router Lifetime of 0, so hosts drop it
//!   as a default router at once.

use wire::router_advert::RouterAdvert;

const SECOND: u64 = 1_000_000_000;
/// RFC 4861 10: router constants.
const MAX_INITIAL_RTR_ADVERT_INTERVAL: u64 = 16 * SECOND;
const MAX_INITIAL_RTR_ADVERTISEMENTS: u32 = 3;
const MAX_RA_DELAY_TIME: u64 = SECOND / 2;
const MIN_DELAY_BETWEEN_RAS: u64 = 3 * SECOND;

/// What an interface advertises, and how often (RFC 4861 6.2.1's per-interface variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertSettings {
    /// What every advertisement says.
    pub advert: RouterAdvert,
    /// MinRtrAdvInterval and MaxRtrAdvInterval, seconds.
    pub min_interval: u32,
    pub max_interval: u32,
}

/// The advertisements of one interface and when the next one is due.
#[derive(Debug, Clone)]
pub struct Advertiser {
    /// What every advertisement says.
    pub advert: RouterAdvert,
    min_interval: u64,
    max_interval: u64,
    next: u64,
    initial_left: u32,
    last_sent: Option<u64>,
    rng: u64,
}

impl Advertiser {
    /// An interface's advertisements as `settings` says; the first is due at `now`. `seed`
    /// makes each interface's random intervals its own.
    pub fn new(settings: &AdvertSettings, seed: u64, now: u64) -> Advertiser {
        Advertiser {
            advert: settings.advert.clone(),
            min_interval: u64::from(settings.min_interval) * SECOND,
            max_interval: u64::from(settings.max_interval) * SECOND,
            next: now,
            initial_left: MAX_INITIAL_RTR_ADVERTISEMENTS,
            last_sent: None,
            rng: seed | 1,
        }
    }

    /// Whether an advertisement is due at `now`.
    pub fn due(&self, now: u64) -> bool {
        now >= self.next
    }

    /// When the next one is due.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// One was sent at `now`: schedules the next unsolicited one.
    pub fn sent(&mut self, now: u64) {
        self.last_sent = Some(now);
        let mut interval = self.min_interval + self.random(self.max_interval - self.min_interval);
        if self.initial_left > 0 {
            self.initial_left -= 1;
            interval = interval.min(MAX_INITIAL_RTR_ADVERT_INTERVAL);
        }
        self.next = now + interval;
    }

    /// A valid Router Solicitation arrived at `now`.
    pub fn solicited(&mut self, now: u64) {
        let delay = self.random(MAX_RA_DELAY_TIME);
        let at = match self.last_sent {
            Some(last) if now < last + MIN_DELAY_BETWEEN_RAS => {
                last + MIN_DELAY_BETWEEN_RAS + delay
            }
            _ => now + delay,
        };
        self.next = self.next.min(at);
    }

    /// A uniform value in [0, bound] (xorshift64*: the intervals need spread, not secrecy).
    fn random(&mut self, bound: u64) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        if bound == 0 { 0 } else { r % (bound + 1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(min: u32, max: u32) -> AdvertSettings {
        let advert = RouterAdvert {
            hop_limit: 64,
            managed: false,
            other_config: true,
            router_lifetime: 1800,
            reachable_time: 0,
            retrans_timer: 0,
            mtu: Some(1400),
            prefixes: Vec::new(),
        };
        AdvertSettings { advert, min_interval: min, max_interval: max }
    }

    #[test]
    fn unsolicited_intervals_stay_within_the_bounds() {
        let mut a = Advertiser::new(&settings(200, 600), 7, 5 * SECOND);
        assert!(!a.due(5 * SECOND - 1) && a.due(5 * SECOND), "the first is sent at once");
        let mut now = 5 * SECOND;
        let mut gaps = Vec::new();
        for _ in 0..200 {
            a.sent(now);
            gaps.push(a.next() - now);
            now = a.next();
        }
        // The first three are capped at 16 s; the rest spread over [200 s, 600 s].
        assert!(gaps[..3].iter().all(|&g| (16 * SECOND..=16 * SECOND).contains(&g)), "{gaps:?}");
        let rest = &gaps[3..];
        assert!(rest.iter().all(|&g| (200 * SECOND..=600 * SECOND).contains(&g)));
        let (lo, hi) = (rest.iter().min().unwrap(), rest.iter().max().unwrap());
        assert!(*lo < 260 * SECOND && *hi > 540 * SECOND, "not spread: {lo} {hi}");
    }

    #[test]
    fn solicitations_bring_the_next_forward_but_not_closer_than_3_s() {
        let mut a = Advertiser::new(&settings(3, 4), 1, 0);
        a.sent(0);
        let scheduled = a.next();
        // Right after one was sent: MIN_DELAY_BETWEEN_RAS after it, plus at most 0.5 s, and
        // never later than the unsolicited one already due.
        a.solicited(SECOND);
        assert!(a.next() <= scheduled && a.next() >= 3 * SECOND, "{}", a.next());
        let mut b = Advertiser::new(&settings(200, 600), 2, 0);
        b.sent(0);
        b.sent(10 * SECOND);
        let far = b.next();
        assert!(far >= 26 * SECOND);
        b.solicited(20 * SECOND);
        assert!(
            (20 * SECOND..=20 * SECOND + MAX_RA_DELAY_TIME).contains(&b.next()),
            "{}",
            b.next()
        );
        // A flood draws one advertisement: the schedule only moves earlier.
        let once = b.next();
        for t in 0..1000 {
            b.solicited(20 * SECOND + t);
        }
        assert!(b.next() <= once && b.next() >= 20 * SECOND);
    }
}
