//! pf's `no-route` and `urpf-failed` hosts: what the FIB says of a packet's addresses, as the
//! [`route`] bits of its key. As pf.c's `pf_routable`: an address is routable if some route
//! covers it (a blackhole or unreachable route too), and it passes the reverse-path check if
//! its route, or one of a multipath route's paths, leaves by the interface of the pass.
//! IPv6 link-local addresses (fe80::/10) and multicast (ff00::/8) are on every link, as the
//! kernel's per-interface routes (`fe80::%em0/64`, `ff02::%em0/16`) make them for pf: routed,
//! by the interface of the pass. Neighbour discovery thus survives `block in quick from
//! urpf-failed`.

use fw::packet::{Af, PacketKey, route};
use lpm::NextHop;

use crate::adjacency::Adjacency;
use crate::fib::Fib;

/// The bits of `used` that hold for `key` (its `iface` is the interface of the pass).
pub(crate) fn route_bits(fib: &Fib, key: &PacketKey, used: u8) -> u8 {
    let mut bits = 0;
    if used & (route::SRC_NO_ROUTE | route::SRC_URPF_FAILED) != 0 && !on_every_link(key.af, key.src)
    {
        bits |= match lookup(fib, key.af, key.src) {
            None => route::SRC_NO_ROUTE | route::SRC_URPF_FAILED,
            Some(nh) if !leaves_by(fib, nh, key.iface) => route::SRC_URPF_FAILED,
            Some(_) => 0,
        };
    }
    if used & route::DST_NO_ROUTE != 0
        && !on_every_link(key.af, key.dst)
        && lookup(fib, key.af, key.dst).is_none()
    {
        bits |= route::DST_NO_ROUTE;
    }
    bits & used
}

/// IPv6 link-local unicast (fe80::/10) or multicast (ff00::/8).
fn on_every_link(af: Af, addr: u128) -> bool {
    af == Af::Inet6 && (addr >> 118 == 0x3fa || addr >> 120 == 0xff)
}

fn lookup(fib: &Fib, af: Af, addr: u128) -> Option<NextHop> {
    match af {
        Af::Inet => fib.v4.lookup(addr as u32),
        Af::Inet6 => fib.v6.lookup(addr),
    }
}

/// The interface the route toward `addr` leaves by (a multipath route's first path); none
/// for no route, a blackhole or one of the router's own addresses.
pub(crate) fn port_toward(fib: &Fib, addr: std::net::IpAddr) -> Option<u16> {
    let nh = match addr {
        std::net::IpAddr::V4(a) => fib.v4.lookup(a.to_bits()),
        std::net::IpAddr::V6(a) => fib.v6.lookup(a.to_bits()),
    }?;
    let port = |adj: Adjacency| match adj {
        Adjacency::Forward { port, .. } | Adjacency::Unresolved { port } => Some(port),
        _ => None,
    };
    match fib.adj.get(nh) {
        Adjacency::Multipath { members, .. } => port(fib.adj.get(fib.adj.member(members, 0))),
        adj => port(adj),
    }
}

/// Whether next hop `nh` (any of its paths) sends on `port`. The router's own addresses,
/// blackholes and unreachable routes leave by no interface.
fn leaves_by(fib: &Fib, nh: NextHop, port: u16) -> bool {
    let on = |adj: Adjacency| matches!(adj, Adjacency::Forward { port: p, .. } | Adjacency::Unresolved { port: p } if p == port);
    match fib.adj.get(nh) {
        Adjacency::Multipath { members, paths } => {
            (0..usize::from(paths)).any(|i| on(fib.adj.get(fib.adj.member(members, i))))
        }
        adj => on(adj),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fib::FibControl;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    const ALL: u8 = route::SRC_NO_ROUTE | route::DST_NO_ROUTE | route::SRC_URPF_FAILED;

    /// 10/8 via a gateway on port 1, 192.0.2.0/24 connected on port 0, a blackhole, a
    /// multipath route over both ports, 2001:db8:b::/48 via port 1.
    fn fib() -> std::sync::Arc<Fib> {
        let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        let mut ctl = FibControl::new(64);
        ctl.add_connected(v4(192, 0, 2, 0), 24, 0).unwrap();
        ctl.add_connected(v4(198, 19, 0, 0), 24, 1).unwrap();
        ctl.add_route(v4(10, 0, 0, 0), 8, v4(198, 19, 0, 2), 1).unwrap();
        ctl.add_blackhole(v4(203, 0, 113, 0), 24).unwrap();
        let paths = vec![(v4(192, 0, 2, 1), 0), (v4(198, 19, 0, 2), 1)];
        ctl.set_static(v4(100, 100, 0, 0), 16, crate::fib::Target::Via(paths)).unwrap();
        ctl.add_route(
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 0)),
            48,
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 2)),
            1,
        )
        .unwrap();
        ctl.fib()
    }

    fn key(af: Af, src: u128, dst: u128, iface: u16) -> PacketKey {
        PacketKey { af, src, dst, iface, ..PacketKey::ZERO }
    }

    fn v4(s: &str) -> u128 {
        u128::from(u32::from(s.parse::<Ipv4Addr>().unwrap()))
    }

    fn v6(s: &str) -> u128 {
        u128::from(s.parse::<Ipv6Addr>().unwrap())
    }

    #[test]
    fn bits_follow_the_routes_and_the_interface() {
        let fib = fib();
        let bits = |k: PacketKey| route_bits(&fib, &k, ALL);
        // A source on its own interface's network; the destination routed.
        assert_eq!(bits(key(Af::Inet, v4("192.0.2.7"), v4("10.1.1.1"), 0)), 0);
        // The same source on the other interface fails the check only.
        assert_eq!(bits(key(Af::Inet, v4("192.0.2.7"), v4("10.1.1.1"), 1)), route::SRC_URPF_FAILED);
        // Via a gateway: the route's port counts.
        assert_eq!(bits(key(Af::Inet, v4("10.9.9.9"), v4("192.0.2.7"), 1)), 0);
        // No route at all, either end.
        assert_eq!(bits(key(Af::Inet, v4("100.64.0.1"), v4("100.64.0.2"), 0)), ALL);
        // Multipath: either path's interface passes.
        assert_eq!(bits(key(Af::Inet, v4("100.100.1.1"), v4("10.1.1.1"), 0)), 0);
        assert_eq!(bits(key(Af::Inet, v4("100.100.1.1"), v4("10.1.1.1"), 1)), 0);
        assert_eq!(
            bits(key(Af::Inet, v4("100.100.1.1"), v4("10.1.1.1"), 2)),
            route::SRC_URPF_FAILED
        );
        // A blackhole covers the address (routable), but leaves by no interface.
        assert_eq!(
            bits(key(Af::Inet, v4("203.0.113.5"), v4("203.0.113.6"), 0)),
            route::SRC_URPF_FAILED
        );
        // Only the bits asked for.
        assert_eq!(
            route_bits(
                &fib,
                &key(Af::Inet, v4("100.64.0.1"), v4("100.64.0.2"), 0),
                route::DST_NO_ROUTE
            ),
            route::DST_NO_ROUTE
        );
        // IPv6: routed via port 1; link-local and multicast are on every link.
        assert_eq!(
            bits(key(Af::Inet6, v6("2001:db8:b::9"), v6("2001:db8:c::1"), 1)),
            route::DST_NO_ROUTE
        );
        assert_eq!(bits(key(Af::Inet6, v6("fe80::1"), v6("ff02::1:ff00:1"), 0)), 0);
        assert_eq!(
            bits(key(Af::Inet6, v6("2001:db8:c::1"), v6("fe80::2"), 0)),
            route::SRC_NO_ROUTE | route::SRC_URPF_FAILED
        );
    }
}
