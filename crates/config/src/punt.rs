//! `[router.punt]`: the limits on what the workers hand to the slow path, per class.
//!
//! Each class of punted frames (see `dataplane::punt`) has a token bucket (rate and burst,
//! all workers together: each worker gets its share) and a queue of its own to the slow path,
//! so a flood of one class (packets to unresolved addresses, traffic to the router) cannot
//! starve another (ARP and neighbour discovery, which forwarding to real neighbours needs).

use serde::Deserialize;
use toml::Spanned;

use crate::ConfigError;
use crate::context::Ctx;

/// One class's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntClassLimits {
    /// Frames per second, all workers together.
    pub rate: u32,
    /// Frames that may pass at once after a quiet moment, all workers together.
    pub burst: u32,
    /// Frames waiting for the slow path, all workers together.
    pub queue: u32,
}

/// The `[router.punt]` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntSettings {
    /// ARP and neighbour discovery (RFC 4861 types 133-137): served first.
    pub arp_nd: PuntClassLimits,
    /// Everything else for the router: pings, the host stack's traffic, broadcast, multicast.
    pub local: PuntClassLimits,
    /// Packets waiting for their next hop's link-layer address.
    pub resolve: PuntClassLimits,
    /// IPv4 packets to fragment (RFC 791).
    pub fragment: PuntClassLimits,
    /// Packets to send an ICMP error about; their rate is `router.icmp_errors_per_second`.
    pub icmp_error_queue: u32,
    /// Packets per unresolved next hop a worker lets through at once.
    pub next_hop_burst: u32,
    /// Packets per second per unresolved next hop a worker lets through after the burst.
    pub next_hop_rate: u32,
}

impl Default for PuntSettings {
    fn default() -> Self {
        let class = |rate, burst, queue| PuntClassLimits { rate, burst, queue };
        PuntSettings {
            arp_nd: class(10_000, 1_000, 1_024),
            local: class(10_000, 1_000, 1_024),
            resolve: class(5_000, 500, 1_024),
            fragment: class(20_000, 2_000, 1_024),
            icmp_error_queue: 256,
            next_hop_burst: 8,
            next_hop_rate: 4,
        }
    }
}

type S<T> = Spanned<T>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPunt {
    arp_nd: Option<RawClass>,
    local: Option<RawClass>,
    resolve: Option<RawClass>,
    fragment: Option<RawClass>,
    icmp_error: Option<RawClass>,
    next_hop_burst: Option<S<i64>>,
    next_hop_rate: Option<S<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    rate: Option<S<i64>>,
    burst: Option<S<i64>>,
    queue: Option<S<i64>>,
}

/// Largest rate, burst and queue accepted (a million frames queued is ~2 GB of copies).
const MAX_RATE: i64 = 10_000_000;
const MAX_QUEUE: i64 = 1 << 20;
/// The slow path keeps at most 8 packets per neighbour being resolved: more would only wait
/// to be dropped there.
const MAX_NEXT_HOP_BURST: i64 = 8;

fn class(
    cx: &Ctx,
    name: &str,
    raw: &Option<RawClass>,
    d: PuntClassLimits,
) -> Result<PuntClassLimits, ConfigError> {
    let Some(raw) = raw else { return Ok(d) };
    let r = raw;
    let ctx = format!("router.punt.{name}: ");
    let rate = cx.int(&r.rate, &ctx, "rate", 1, MAX_RATE, d.rate.into())? as u32;
    let burst = cx.int(&r.burst, &ctx, "burst", 1, MAX_RATE, d.burst.into())? as u32;
    let queue = cx.int(&r.queue, &ctx, "queue", 16, MAX_QUEUE, d.queue.into())? as u32;
    Ok(PuntClassLimits { rate, burst, queue })
}

pub(crate) fn settings(cx: &Ctx, raw: Option<RawPunt>) -> Result<PuntSettings, ConfigError> {
    let d = PuntSettings::default();
    let Some(r) = raw else { return Ok(d) };
    let icmp_error_queue = match &r.icmp_error {
        None => d.icmp_error_queue,
        Some(c) => {
            // One limit per thing: the workers' ICMP rate limit is this class's policer.
            if let Some(v) = c.rate.as_ref().or(c.burst.as_ref()) {
                return Err(cx.err(v.span(), "router.punt.icmp_error: only queue can be set here; the rate of ICMP errors is router.icmp_errors_per_second"));
            }
            cx.int(
                &c.queue,
                "router.punt.icmp_error: ",
                "queue",
                16,
                MAX_QUEUE,
                d.icmp_error_queue.into(),
            )? as u32
        }
    };
    Ok(PuntSettings {
        arp_nd: class(cx, "arp_nd", &r.arp_nd, d.arp_nd)?,
        local: class(cx, "local", &r.local, d.local)?,
        resolve: class(cx, "resolve", &r.resolve, d.resolve)?,
        fragment: class(cx, "fragment", &r.fragment, d.fragment)?,
        icmp_error_queue,
        next_hop_burst: cx.int(
            &r.next_hop_burst,
            "router.punt: ",
            "next_hop_burst",
            1,
            MAX_NEXT_HOP_BURST,
            d.next_hop_burst.into(),
        )? as u32,
        next_hop_rate: cx.int(
            &r.next_hop_rate,
            "router.punt: ",
            "next_hop_rate",
            1,
            1_000,
            d.next_hop_rate.into(),
        )? as u32,
    })
}
