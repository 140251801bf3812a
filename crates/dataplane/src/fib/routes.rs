//! Static and kernel routes: what each source last said, and which of them is installed.
//!
//! The config's static routes (`[[route]]`) are replaced as a set on reload
//! ([`FibControl::set_static_routes`]): a changed route is overwritten in place (one store per
//! LPM entry, so packets see the old or the new next hop, never no route), a removed one
//! gives its prefix back to the kernel's route for it, if any, and unchanged routes are not
//! touched. Kernel routes ([`FibControl::set_kernel`], [`FibControl::remove_kernel`]) are
//! installed unless another source holds the prefix; they are remembered either way.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lpm::NextHop;

use super::{BLACKHOLE_ID, FibControl, FibError, RouteKind, RouteSource, UNREACHABLE_ID, host_len};
use crate::adjacency::MAX_PATHS;

/// Where a static or kernel route sends its packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Via one gateway, or several (equal-cost multipath): (gateway, logical port).
    Via(Vec<(IpAddr, u16)>),
    /// Directly connected on a logical port: each destination is resolved by ARP/NDP.
    Connected(u16),
    /// Discarded, counted as `blackhole`.
    Blackhole,
    /// Dropped with an ICMP destination unreachable, counted as `no_route`.
    Unreachable,
}

/// A static route: `prefix/len` to `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticRoute {
    pub prefix: IpAddr,
    pub len: u8,
    pub target: Target,
}

/// What a set of static routes changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RouteChanges {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    pub unchanged: usize,
}

/// `prefix` with the bits beyond `len` cleared (as the LPM stores it).
pub(super) fn masked(prefix: IpAddr, len: u8) -> IpAddr {
    match prefix {
        IpAddr::V4(a) => {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

impl FibControl {
    /// The id and listing of a target, with one reference taken for the caller.
    pub(super) fn resolve(&mut self, target: &Target) -> Result<(NextHop, RouteKind), FibError> {
        let paths = match target {
            Target::Blackhole => return Ok((BLACKHOLE_ID, RouteKind::Blackhole)),
            Target::Unreachable => return Ok((UNREACHABLE_ID, RouteKind::Unreachable)),
            Target::Connected(port) => {
                return Ok((self.connected_id(*port)?, RouteKind::Connected { port: *port }));
            }
            Target::Via(paths) => paths,
        };
        if paths.is_empty() || paths.len() > MAX_PATHS {
            return Err(FibError::TooManyPaths(paths.len()));
        }
        let mut ids = Vec::with_capacity(paths.len());
        for &(gw, port) in paths {
            match self.gateway_id(gw, port) {
                Ok(id) if ids.contains(&id) => {}
                Ok(id) => {
                    self.acquire(id);
                    ids.push(id);
                }
                Err(e) => {
                    for id in ids {
                        self.release(id);
                    }
                    return Err(e);
                }
            }
        }
        if let [id] = ids[..] {
            let (gateway, port) = self.gateway_of[&id];
            return Ok((id, RouteKind::Via { gateway, port }));
        }
        ids.sort_unstable();
        let group = self.group_id(ids.clone());
        // The group holds its own references to its members.
        for &id in &ids {
            self.release(id);
        }
        let group = group?;
        self.acquire(group);
        Ok((group, RouteKind::Multipath { group, paths: ids.len() as u16 }))
    }

    /// Removes what is installed at `prefix/len`, or puts the kernel's route for it (or a
    /// known neighbour's host route) in its place in one store.
    pub(super) fn withdraw(&mut self, prefix: IpAddr, len: u8) -> Result<(), FibError> {
        if let Some(&(id, kind)) = self.kernel.get(&(prefix, len)) {
            return self.insert(prefix, len, id, kind, RouteSource::Kernel);
        }
        if len == host_len(prefix)
            && let Some(&(port, _)) = self.neighbours.get(&prefix)
            && let Some(&id) = self.gateways.get(&(port, prefix))
        {
            return self.insert(
                prefix,
                len,
                id,
                RouteKind::Neighbour { port },
                RouteSource::Neighbour,
            );
        }
        self.remove(prefix, len).map(drop)
    }

    /// Adds or replaces a static route (it wins over every other source of that prefix but
    /// the interfaces': [`FibError::InterfaceRoute`]).
    pub fn set_static(&mut self, prefix: IpAddr, len: u8, target: Target) -> Result<(), FibError> {
        let prefix = masked(prefix, len);
        if self.statics.get(&(prefix, len)).is_some_and(|(t, _)| *t == target) {
            return Ok(());
        }
        if self.routes.get(&(prefix, len)).is_some_and(|r| r.source == RouteSource::Interface)
            || self.withdrawn_interface_route(prefix, len)
        {
            return Err(FibError::InterfaceRoute { prefix, len });
        }
        let id = self.install_static(prefix, len, &target)?;
        if let Some((_, old)) = self.statics.insert((prefix, len), (target, id)) {
            self.release(old);
        }
        Ok(())
    }

    /// Installs a static route's target as the ports' links allow (the paths through ports
    /// that are down left out; none left: the prefix withdrawn). Returns the id it holds a
    /// reference to ([`UNREACHABLE_ID`], held by nobody, when withdrawn).
    pub(super) fn install_static(
        &mut self,
        prefix: IpAddr,
        len: u8,
        target: &Target,
    ) -> Result<NextHop, FibError> {
        let Some(live) = self.live_target(target) else {
            self.withdraw(prefix, len)?;
            return Ok(UNREACHABLE_ID);
        };
        let (id, kind) = self.resolve(&live)?;
        if let Err(e) = self.insert(prefix, len, id, kind, RouteSource::Static) {
            self.release(id);
            return Err(e);
        }
        Ok(id)
    }

    /// Removes a static route; returns whether there was one.
    pub fn remove_static(&mut self, prefix: IpAddr, len: u8) -> Result<bool, FibError> {
        let prefix = masked(prefix, len);
        let Some((_, id)) = self.statics.remove(&(prefix, len)) else { return Ok(false) };
        let res = self.withdraw(prefix, len);
        self.release(id);
        res.map(|()| true)
    }

    /// Makes the static routes exactly `routes`: new and changed ones are installed first
    /// (in place), then the ones no longer listed are removed; unchanged ones are not
    /// touched. Stops at the first error (the FIB full), leaving what was done so far.
    pub fn set_static_routes(&mut self, routes: &[StaticRoute]) -> Result<RouteChanges, FibError> {
        let mut c = RouteChanges::default();
        let mut listed = HashMap::with_capacity(routes.len());
        for StaticRoute { prefix, len, target } in routes {
            let key = (masked(*prefix, *len), *len);
            listed.insert(key, ());
            match self.statics.get(&key) {
                Some((t, _)) if t == target => c.unchanged += 1,
                Some(_) => {
                    self.set_static(key.0, key.1, target.clone())?;
                    c.changed += 1;
                }
                None => {
                    self.set_static(key.0, key.1, target.clone())?;
                    c.added += 1;
                }
            }
        }
        let gone: Vec<(IpAddr, u8)> =
            self.statics.keys().filter(|k| !listed.contains_key(k)).copied().collect();
        for (prefix, len) in gone {
            self.remove_static(prefix, len)?;
            c.removed += 1;
        }
        Ok(c)
    }

    /// Number of static routes.
    pub fn static_count(&self) -> usize {
        self.statics.len()
    }

    /// Adds or replaces the kernel's route for `prefix/len`: installed unless another source
    /// holds the prefix, remembered either way.
    pub fn set_kernel(&mut self, prefix: IpAddr, len: u8, target: &Target) -> Result<(), FibError> {
        let key = (masked(prefix, len), len);
        let (id, kind) = self.resolve(target)?;
        let shadowed = self.routes.get(&key).is_some_and(|i| i.source != RouteSource::Kernel);
        if !shadowed && let Err(e) = self.insert(key.0, len, id, kind, RouteSource::Kernel) {
            self.release(id);
            return Err(e);
        }
        if let Some((old, _)) = self.kernel.insert(key, (id, kind)) {
            self.release(old);
        }
        Ok(())
    }

    /// Removes the kernel's route for `prefix/len`; returns whether there was one.
    pub fn remove_kernel(&mut self, prefix: IpAddr, len: u8) -> Result<bool, FibError> {
        let key = (masked(prefix, len), len);
        let Some((id, _)) = self.kernel.remove(&key) else { return Ok(false) };
        // One search of the installed routes (a full table's withdrawal pays it per route).
        let res = match self.routes.entry(key) {
            Entry::Occupied(e) if e.get().source == RouteSource::Kernel => {
                e.remove();
                self.lpm_remove(key.0, len)
            }
            _ => Ok(()),
        };
        self.release(id);
        res.map(|()| true)
    }

    /// The kernel routes remembered (installed or not), for a full resynchronisation.
    pub fn kernel_prefixes(&self) -> Vec<(IpAddr, u8)> {
        self.kernel.keys().copied().collect()
    }

    /// Number of kernel routes remembered, and how many of them are installed.
    pub fn kernel_counts(&self) -> (usize, usize) {
        let installed = self
            .kernel
            .keys()
            .filter(|k| self.routes.get(k).is_some_and(|i| i.source == RouteSource::Kernel))
            .count();
        (self.kernel.len(), installed)
    }
}
