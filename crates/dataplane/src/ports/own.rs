//! The router's own addresses, as the classify pass tests packets against them: a source that
//! is one of them on a packet from outside is a martian (as Linux's `martian source`), and a
//! link-local packet is taken only when it is for one of them.
//!
//! Most packets are from and to other hosts: a 64-bit filter (a bit per address, by a
//! multiplicative hash) answers "not ours" in a few instructions; only a packet whose address
//! sets a filter bit is compared with the list.

use std::net::IpAddr;

use super::PortInfo;

#[derive(Debug, Clone, Default)]
pub struct OwnAddrs {
    filter: u64,
    v4: Box<[u32]>,
    v6: Box<[u128]>,
}

#[inline(always)]
fn bit(h: u64) -> u64 {
    1 << (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

#[inline(always)]
fn fold_v6(a: u128) -> u64 {
    (a as u64) ^ ((a >> 64) as u64)
}

impl OwnAddrs {
    /// Every address of `ports`, and for each IPv6 prefix shorter than /127 its
    /// Subnet-Router anycast address (RFC 4291 2.6.1: the prefix with an all-zero interface
    /// identifier; RFC 6164: none on /127 links).
    pub fn of(ports: &[PortInfo]) -> OwnAddrs {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for (a, len) in ports.iter().flat_map(|p| p.addresses.iter()) {
            match a {
                IpAddr::V4(a) => v4.push(u32::from(*a)),
                IpAddr::V6(a) => {
                    v6.push(u128::from(*a));
                    if let Some(anycast) = subnet_router_anycast(u128::from(*a), *len) {
                        v6.push(anycast);
                    }
                }
            }
        }
        let filter = v4
            .iter()
            .map(|&a| bit(u64::from(a)))
            .chain(v6.iter().map(|&a| bit(fold_v6(a))))
            .fold(0, |f, b| f | b);
        OwnAddrs { filter, v4: v4.into(), v6: v6.into() }
    }

    /// Whether `a` may be one of the router's IPv4 addresses (never false for one of them;
    /// true for about one other address in 64 per address the router has).
    #[inline(always)]
    pub fn maybe_v4(&self, a: u32) -> bool {
        self.filter & bit(u64::from(a)) != 0
    }

    #[inline(always)]
    pub fn has_v4(&self, a: u32) -> bool {
        self.maybe_v4(a) && self.v4.contains(&a)
    }

    /// As [`maybe_v4`](Self::maybe_v4), for IPv6.
    #[inline(always)]
    pub fn maybe_v6(&self, a: u128) -> bool {
        self.filter & bit(fold_v6(a)) != 0
    }

    #[inline(always)]
    pub fn has_v6(&self, a: u128) -> bool {
        self.maybe_v6(a) && self.v6.contains(&a)
    }
}

/// The Subnet-Router anycast address of `addr/len`, if the prefix has one.
pub fn subnet_router_anycast(addr: u128, len: u8) -> Option<u128> {
    (len < 127).then(|| if len == 0 { 0 } else { addr & (u128::MAX << (128 - u32::from(len))) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::MacAddr;

    fn port(addrs: &[(&str, u8)]) -> PortInfo {
        let mut p = PortInfo::new("lr-a", MacAddr([2, 0, 0, 0, 0, 1]), 0);
        p.addresses = addrs.iter().map(|(a, l)| (a.parse().unwrap(), *l)).collect();
        p
    }

    #[test]
    fn own_addresses_and_anycast_are_found_and_others_are_not() {
        let own = OwnAddrs::of(&[
            port(&[("198.18.0.1", 24), ("2001:db8:a::1", 64)]),
            port(&[("2001:db8:c::1", 127)]),
        ]);
        let v6 = |s: &str| u128::from(s.parse::<std::net::Ipv6Addr>().unwrap());
        assert!(
            own.has_v6(v6("2001:db8:a::1")) && own.has_v6(v6("2001:db8:a::")),
            "address and its Subnet-Router anycast"
        );
        assert!(!own.has_v6(v6("2001:db8:c::")), "no anycast on a /127 (RFC 6164)");
        // Every other address of a /16 around them: none is taken for the router's.
        for i in 0..65536u32 {
            let a = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0)) | i;
            assert_eq!(own.has_v4(a), i == 1, "{a:#x}");
            assert_eq!(own.has_v6(v6("2001:db8:a::") | u128::from(i)), i <= 1);
        }
    }
}
