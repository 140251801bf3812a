//! pf's `no-route` and `urpf-failed` hosts: what the FIB says of a packet's addresses, as the
//! [`route`] bits of its key. As pf.c's `pf_routable`: an address is routable if some route
//! covers it (a blackhole or unreachable route too), and it passes the reverse-path check if
//! its route, or one of a multipath route's paths, leaves by the interface of the pass.

use fw::packet::{Af, PacketKey, route};
use lpm::NextHop;

use crate::adjacency::Adjacency;
use crate::fib::Fib;

/// The bits of `used` that hold for `key` (its `iface` is the interface of the pass).
pub(crate) fn route_bits(fib: &Fib, key: &PacketKey, used: u8) -> u8 {
    let mut bits = 0;
    if used & (route::SRC_NO_ROUTE | route::SRC_URPF_FAILED) != 0 {
        bits |= match lookup(fib, key.af, key.src) {
            None => route::SRC_NO_ROUTE | route::SRC_URPF_FAILED,
            Some(nh) if !leaves_by(fib, nh, key.iface) => route::SRC_URPF_FAILED,
            Some(_) => 0,
        };
    }
    if used & route::DST_NO_ROUTE != 0 && lookup(fib, key.af, key.dst).is_none() {
        bits |= route::DST_NO_ROUTE;
    }
    bits & used
}

fn lookup(fib: &Fib, af: Af, addr: u128) -> Option<NextHop> {
    match af {
        Af::Inet => fib.v4.lookup(addr as u32),
        Af::Inet6 => fib.v6.lookup(addr),
    }
}

/// Whether next hop `nh` (any of its paths) sends on `port`. The router's own addresses,
/// blackholes and unreachable routes leave by no interface.
fn leaves_by(fib: &Fib, nh: NextHop, port: u16) -> bool {
    let on = |adj: Adjacency| matches!(adj, Adjacency::Forward { port: p, .. } | Adjacency::Unresolved { port: p } if p == port);
    match fib.adj.get(nh) {
        Adjacency::Multipath { members, paths } => (0..usize::from(paths)).any(|i| on(fib.adj.get(fib.adj.member(members, i)))),
        adj => on(adj),
    }
}
