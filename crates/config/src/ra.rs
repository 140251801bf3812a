//! `ra` of an `[[interface]]`: IPv6 router advertisements (RFC 4861 6.2) on that link, so
//! hosts configure addresses (SLAAC, RFC 4862) and a default route from them.
//!
//! ```toml
//! [[interface]]
//! name = "lr-a"
//! addresses = ["2001:db8:a::1/64"]
//! ra = { max_interval = 600, managed = false }   # or an [interface.ra] table
//! ```
//!
//! Every key is optional; the defaults are RFC 4861 6.2.1's, and the prefixes advertised
//! default to the interface's IPv6 /64 prefixes.

use std::net::IpAddr;

use serde::Deserialize;
use toml::Spanned;

use crate::context::Ctx;
use crate::{ConfigError, IfAddr, Prefix};

/// The router advertisements of one interface (RFC 4861 6.2.1's per-interface variables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterAdvertSettings {
    /// MaxRtrAdvInterval, seconds (4..=1800, default 600).
    pub max_interval: u32,
    /// MinRtrAdvInterval, seconds (3..=0.75 * max; default 0.33 * max, or max below 9 s).
    pub min_interval: u32,
    /// AdvDefaultLifetime, seconds: 0 (not a default router) or max_interval..=9000
    /// (default 3 * max_interval).
    pub default_lifetime: u32,
    /// AdvManagedFlag: addresses from DHCPv6 (default false).
    pub managed: bool,
    /// AdvOtherConfigFlag: other configuration from DHCPv6 (default false).
    pub other_config: bool,
    /// AdvLinkMTU: the MTU option's value, if one is sent (1280..=the interface's MTU;
    /// default none).
    pub mtu: Option<u32>,
    /// AdvCurHopLimit: the hop limit hosts should use (0..=255, default 64; 0: unspecified).
    pub hop_limit: u8,
    /// The Prefix Information options (on-link and autonomous), IPv6 only.
    pub prefixes: Vec<Prefix>,
    /// AdvValidLifetime of every prefix, seconds (default 2,592,000: 30 days).
    pub valid_lifetime: u32,
    /// AdvPreferredLifetime of every prefix, seconds, at most the valid lifetime (default
    /// 604,800: 7 days).
    pub preferred_lifetime: u32,
}

type S<T> = Spanned<T>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRa {
    max_interval: Option<S<i64>>,
    min_interval: Option<S<i64>>,
    default_lifetime: Option<S<i64>>,
    managed: Option<bool>,
    other_config: Option<bool>,
    mtu: Option<S<i64>>,
    hop_limit: Option<S<i64>>,
    prefixes: Option<Vec<S<String>>>,
    valid_lifetime: Option<S<i64>>,
    preferred_lifetime: Option<S<i64>>,
}

/// Validates `ra` of the interface `owner` (its `addresses` and `mtu` already checked).
pub(crate) fn settings(
    cx: &Ctx,
    owner: &str,
    raw: &S<RawRa>,
    addresses: &[IfAddr],
    if_mtu: u16,
) -> Result<RouterAdvertSettings, ConfigError> {
    let r = raw.get_ref();
    let ctx = format!("{owner}: ra: ");
    let max_interval = cx.int(&r.max_interval, &ctx, "max_interval", 4, 1800, 600)?;
    let default_min = if max_interval >= 9 { max_interval * 33 / 100 } else { max_interval };
    let min_hi = if r.min_interval.is_none() { max_interval } else { max_interval * 3 / 4 };
    let min_interval = cx.int(&r.min_interval, &ctx, "min_interval", 3, min_hi, default_min)?;
    let default_lifetime = match &r.default_lifetime {
        Some(v) if *v.get_ref() == 0 => 0,
        _ => cx.int(
            &r.default_lifetime,
            &ctx,
            "default_lifetime",
            max_interval,
            9000,
            (3 * max_interval).min(9000),
        )?,
    };
    let mtu = match &r.mtu {
        None => None,
        Some(_) => Some(cx.int(&r.mtu, &ctx, "mtu", 1280, i64::from(if_mtu).max(1280), 0)? as u32),
    };
    let hop_limit = cx.int(&r.hop_limit, &ctx, "hop_limit", 0, 255, 64)? as u8;
    let valid_lifetime =
        cx.int(&r.valid_lifetime, &ctx, "valid_lifetime", 0, i64::from(u32::MAX), 2_592_000)?
            as u32;
    let preferred_lifetime = cx.int(
        &r.preferred_lifetime,
        &ctx,
        "preferred_lifetime",
        0,
        i64::from(u32::MAX),
        604_800.min(i64::from(valid_lifetime)),
    )? as u32;
    if preferred_lifetime > valid_lifetime
        && let Some(p) = &r.preferred_lifetime
    {
        return Err(cx.err(p.span(), format!("{ctx}preferred_lifetime {preferred_lifetime} is longer than valid_lifetime {valid_lifetime} (RFC 4861 4.6.2)")));
    }
    let prefixes = match &r.prefixes {
        None => addresses
            .iter()
            .filter(|a| a.addr.is_ipv6() && a.prefix_len == 64)
            .map(IfAddr::network)
            .filter(|p| !is_link_local(p))
            .collect(),
        Some(list) => {
            let mut out = Vec::with_capacity(list.len());
            for s in list {
                let p: Prefix = s.get_ref().parse().map_err(|e| {
                    cx.err(s.span(), format!("{ctx}prefix {:?} is invalid: {e}", s.get_ref()))
                })?;
                if p.is_ipv4()
                    || is_link_local(&p)
                    || matches!(p.addr, IpAddr::V6(a) if a.is_multicast())
                {
                    return Err(
                        cx.err(s.span(), format!("{ctx}prefix {p} is not an IPv6 unicast prefix"))
                    );
                }
                out.push(p);
            }
            out
        }
    };
    if !addresses.iter().any(|a| a.addr.is_ipv6()) && r.prefixes.is_none() {
        return Err(cx.err(raw.span(), format!("{ctx}the interface has no IPv6 address: set `prefixes` to advertise (or leave ra out)")));
    }
    Ok(RouterAdvertSettings {
        max_interval: max_interval as u32,
        min_interval: min_interval as u32,
        default_lifetime: default_lifetime as u32,
        managed: r.managed.unwrap_or(false),
        other_config: r.other_config.unwrap_or(false),
        mtu,
        hop_limit,
        prefixes,
        valid_lifetime,
        preferred_lifetime,
    })
}

fn is_link_local(p: &Prefix) -> bool {
    matches!(p.addr, IpAddr::V6(a) if a.is_unicast_link_local())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::{Config, ConfigError};

    fn parse(ra: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "[[interface]]\nname = \"lr-a\"\nmtu = 1500\naddresses = [\"198.18.0.1/24\", \"2001:db8:a::1/64\", \"2001:db8:f::1/56\"]\n{ra}"
        );
        Config::parse(&text, Path::new("router.toml"))
    }

    #[track_caller]
    fn fails(ra: &str, line: usize, col: usize, frag: &str) {
        let e = parse(ra).expect_err("should be rejected");
        assert_eq!((e.line, e.column), (line, col), "{e}");
        assert!(e.message.contains(frag), "{e} lacks {frag:?}");
    }

    #[test]
    fn defaults_follow_rfc_4861() {
        let c = parse("ra = {}\n").unwrap();
        let ra = c.interfaces[0].ra.as_ref().unwrap();
        assert_eq!((ra.max_interval, ra.min_interval, ra.default_lifetime), (600, 198, 1800));
        assert_eq!((ra.managed, ra.other_config, ra.mtu, ra.hop_limit), (false, false, None, 64));
        assert_eq!((ra.valid_lifetime, ra.preferred_lifetime), (2_592_000, 604_800));
        // Only the /64s: SLAAC needs 64-bit interface identifiers (RFC 4862 5.5.3).
        assert_eq!(
            ra.prefixes.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["2001:db8:a::/64"]
        );
        assert!(parse("").unwrap().interfaces[0].ra.is_none());
        let table = parse("[interface.ra]\nmax_interval = 4\nmanaged = true\nmtu = 1400\nprefixes = [\"2001:db8:b::/64\"]\n").unwrap();
        let ra = table.interfaces[0].ra.as_ref().unwrap();
        assert_eq!(
            (ra.max_interval, ra.min_interval, ra.default_lifetime, ra.managed, ra.mtu),
            (4, 4, 12, true, Some(1400))
        );
        assert_eq!(ra.prefixes[0].to_string(), "2001:db8:b::/64");
    }

    #[test]
    fn errors() {
        fails(
            "ra = { max_interval = 3 }\n",
            5,
            23,
            "lr-a\": ra: max_interval 3 is out of range (4..=1800)",
        );
        fails(
            "ra = { max_interval = 100, min_interval = 80 }\n",
            5,
            43,
            "min_interval 80 is out of range (3..=75)",
        );
        fails(
            "ra = { max_interval = 100, default_lifetime = 50 }\n",
            5,
            47,
            "default_lifetime 50 is out of range (100..=9000)",
        );
        fails("ra = { mtu = 1600 }\n", 5, 14, "mtu 1600 is out of range (1280..=1500)");
        fails(
            "ra = { valid_lifetime = 10, preferred_lifetime = 20 }\n",
            5,
            50,
            "preferred_lifetime 20 is longer than valid_lifetime 10",
        );
        fails(
            "ra = { prefixes = [\"10.0.0.0/8\"] }\n",
            5,
            20,
            "prefix 10.0.0.0/8 is not an IPv6 unicast prefix",
        );
        fails("ra = { prefixes = [\"fe80::/64\"] }\n", 5, 20, "not an IPv6 unicast prefix");
        fails("ra = { bogus = 1 }\n", 5, 8, "unknown field `bogus`");
        assert!(parse("ra = { default_lifetime = 0 }\n").is_ok());
    }
}
