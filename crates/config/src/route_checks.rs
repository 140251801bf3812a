//! Checks that routes from the config and from the route file share: duplicates, gateways,
//! and which interface a gateway is on.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::context::Origin;
use crate::{Interface, Prefix};

/// The prefixes defined so far and where. A full table makes a million lookups here, so the
/// hash is a multiplicative one instead of SipHash: the keys are the operator's own routes,
/// there is no flooding to defend against.
pub(crate) type Seen = HashMap<Prefix, Origin, std::hash::BuildHasherDefault<PrefixHasher>>;

#[derive(Default)]
pub(crate) struct PrefixHasher(u64);

impl std::hash::Hasher for PrefixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
}

/// The interface whose address prefix contains `ip`, longest prefix first.
pub(crate) fn on_link<'a>(ifaces: &'a [Interface], ip: &IpAddr) -> Option<&'a Interface> {
    let mut best: Option<(&Interface, u8)> = None;
    for i in ifaces {
        for a in &i.addresses {
            if a.contains(ip) && best.is_none_or(|(_, l)| a.prefix_len > l) {
                best = Some((i, a.prefix_len));
            }
        }
    }
    best.map(|b| b.0)
}

pub(crate) fn own_address<'a>(ifaces: &'a [Interface], ip: &IpAddr) -> Option<&'a Interface> {
    ifaces.iter().find(|i| i.addresses.iter().any(|a| a.addr == *ip))
}

/// What is wrong with `via` as the gateway of a route to `prefix`, if anything.
pub(crate) fn via_problem(ifaces: &[Interface], prefix: &Prefix, via: &IpAddr) -> Option<String> {
    if via.is_ipv4() != prefix.is_ipv4() {
        let family = if via.is_ipv4() { "IPv4" } else { "IPv6" };
        return Some(format!("via {via} is {family} but the prefix is {}", prefix.family()));
    }
    if via.is_unspecified() || via.is_multicast() {
        return Some(format!("via {via} is not a unicast address"));
    }
    if let Some(i) = own_address(ifaces, via) {
        return Some(format!("via {via} is this router's own address on interface {:?}", i.name));
    }
    broadcast_of(ifaces, via).map(|(i, net)| {
        format!("via {via} is the broadcast address of {net} on interface {:?}", i.name)
    })
}

/// The interface and network whose IPv4 broadcast address `ip` is ([`crate::IfAddr::broadcast`]).
pub(crate) fn broadcast_of<'a>(
    ifaces: &'a [Interface],
    ip: &IpAddr,
) -> Option<(&'a Interface, crate::Prefix)> {
    ifaces
        .iter()
        .find_map(|i| Some((i, i.addresses.iter().find(|a| a.broadcast() == Some(*ip))?.network())))
}

/// What is wrong with a static route to exactly `prefix`: an interface's own route (its
/// connected prefix, or one of the router's addresses), which the FIB never lets another
/// source replace (as Linux keeps `proto kernel` and local routes).
pub(crate) fn interface_route_problem(ifaces: &[Interface], prefix: &Prefix) -> Option<String> {
    let host_len = if prefix.is_ipv4() { 32 } else { 128 };
    for i in ifaces {
        for a in &i.addresses {
            if prefix.len == host_len && a.addr == prefix.addr {
                return Some(format!(
                    "is this router's own address on interface {:?}: a static route cannot replace it",
                    i.name
                ));
            }
            if prefix.len == host_len && a.broadcast() == Some(prefix.addr) {
                return Some(format!(
                    "is the broadcast address of {} on interface {:?}: a static route cannot replace it",
                    a.network(),
                    i.name
                ));
            }
            if a.network() == *prefix {
                return Some(format!(
                    "is the connected prefix of interface {:?} ({a}): a static route cannot replace it (a more specific one can)",
                    i.name
                ));
            }
        }
    }
    None
}
