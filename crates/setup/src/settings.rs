//! The config's punt limits and router-advertisement settings as the data plane's types.

use dataplane::punt::{PuntPolicy, RateLimit};
use dataplane::router_adv::AdvertSettings;
use wire::router_advert::{AdvertPrefix, RouterAdvert};

/// The config's `[router.punt]`.
pub fn punt_policy(p: &config::PuntSettings) -> PuntPolicy {
    let c = |l: config::PuntClassLimits| {
        Some(RateLimit { per_second: u64::from(l.rate), burst: u64::from(l.burst) })
    };
    let q = |l: config::PuntClassLimits| l.queue as usize;
    PuntPolicy {
        police: [c(p.arp_nd), c(p.local), c(p.resolve), c(p.fragment), None],
        queue: [q(p.arp_nd), q(p.local), q(p.resolve), q(p.fragment), p.icmp_error_queue as usize],
        next_hop_burst: u64::from(p.next_hop_burst),
        next_hop_rate: u64::from(p.next_hop_rate),
    }
}

/// An interface's `ra`: what its advertisements say (its IPv6 prefixes only) and their
/// intervals.
pub fn advert_settings(cfg: &config::RouterAdvertSettings) -> AdvertSettings {
    let prefixes = cfg
        .prefixes
        .iter()
        .filter_map(|p| match p.addr {
            std::net::IpAddr::V6(a) => Some(AdvertPrefix {
                prefix: a,
                len: p.len,
                valid_lifetime: cfg.valid_lifetime,
                preferred_lifetime: cfg.preferred_lifetime,
            }),
            std::net::IpAddr::V4(_) => None,
        })
        .collect();
    let advert = RouterAdvert {
        hop_limit: cfg.hop_limit,
        managed: cfg.managed,
        other_config: cfg.other_config,
        router_lifetime: cfg.default_lifetime.min(u32::from(u16::MAX)) as u16,
        reachable_time: 0,
        retrans_timer: 0,
        mtu: cfg.mtu,
        prefixes,
    };
    AdvertSettings { advert, min_interval: cfg.min_interval, max_interval: cfg.max_interval }
}
