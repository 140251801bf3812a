//! The forwarding tables the workers read, and the control-plane side that fills them.
//!
//! [`Fib`] is shared by every worker through an `Arc` and never locked on the fast path: the
//! LPM tables are updated in place by a single writer (see the `lpm` crate's docs for why a
//! racing lookup sees the old or the new answer), and adjacencies are single atomic words.
//! [`FibControl`] is the one writer: it allocates next-hop ids and remembers which id stands
//! for which gateway, so that resolving a neighbour later updates one adjacency, not routes.
//!
//! Routes come from several sources ([`RouteSource`]): the interfaces' addresses (local and
//! connected), resolved neighbours (host routes), the config's static routes and the kernel's
//! routing table (`router.kernel_routes`, see `routes.rs`). Every source but the kernel wins
//! over a kernel route for the same prefix; the losing kernel route is kept aside and
//! installed when the prefix is freed.
//!
//! Ids are reference-counted by the routes and multipath groups that use them. A learnt
//! neighbour's host route and next-hop id live exactly as long as it is known
//! ([`FibControl::set_neighbour`] to [`FibControl::unset_neighbour`]) or a route uses the id;
//! a freed id is reused only after a grace period over the workers' lookups ([`lpm::Grace`]),
//! so a packet that looked up the old route never takes the new neighbour's adjacency.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use lpm::{Ipv4Lpm, Ipv6Lpm, LpmError, NextHop};
use wire::MacAddr;

use crate::adjacency::{Adjacency, AdjacencyTable, MAX_PORT};
pub use crate::ports::PortInfo;

mod ports_down;
mod prefix_hash;
mod routes;
#[cfg(test)]
mod tests;

pub use prefix_hash::{PrefixHash, PrefixMap, PrefixSet};
pub use routes::{RouteChanges, StaticRoute, Target};

/// Next-hop id of the router's own addresses.
pub const LOCAL_ID: NextHop = 0;
/// Next-hop id of blackhole routes.
pub const BLACKHOLE_ID: NextHop = 1;
/// Next-hop id of unreachable routes (ICMP destination unreachable).
pub const UNREACHABLE_ID: NextHop = 2;
const FIRST_FREE_ID: NextHop = 3;

/// Default adjacency capacity: the issue asks for at least 65,536 next hops.
pub const DEFAULT_NEXT_HOPS: usize = 1 << 17;
/// Multipath groups (distinct sets of next hops) the FIB has room for.
pub const DEFAULT_GROUPS: usize = 4096;

/// What workers read.
pub struct Fib {
    pub v4: Ipv4Lpm,
    pub v6: Ipv6Lpm,
    pub adj: AdjacencyTable,
    /// Seed of the multipath flow hash ([`crate::ecmp`]), per process.
    pub ecmp_seed: u64,
    /// Moves on with every change of a route or a neighbour: flows offloaded to the kernel's
    /// fast path before it are decided again ([`crate::offload`]).
    pub decisions: Arc<crate::offload::Decisions>,
}

/// What a FIB entry is, for `linerate show routes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// One of the router's addresses.
    Local,
    Blackhole,
    /// Dropped with an ICMP destination unreachable.
    Unreachable,
    /// A directly connected prefix on a logical port.
    Connected {
        port: u16,
    },
    /// Via a gateway on a port.
    Via {
        gateway: IpAddr,
        port: u16,
    },
    /// Via one of several gateways, by flow ([`FibControl::group_members`] lists them).
    Multipath {
        group: NextHop,
        paths: u16,
    },
    /// A neighbour's host route.
    Neighbour {
        port: u16,
    },
    /// The broadcast address of a connected IPv4 prefix on a port: for the router (its host
    /// stack), never forwarded, from whichever port (RFC 1812 5.3.5.2, RFC 2644).
    Broadcast {
        port: u16,
    },
}

/// Where an installed route comes from. A kernel route loses to every other source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteSource {
    /// The interfaces' addresses: local host routes and connected prefixes.
    Interface,
    /// A resolved neighbour's host route.
    Neighbour,
    /// A `[[route]]` of the config.
    Static,
    /// Mirrored from the kernel's routing table (`router.kernel_routes`).
    Kernel,
}

#[derive(Debug, Clone, Copy)]
struct Installed {
    kind: RouteKind,
    source: RouteSource,
}

#[derive(Debug, thiserror::Error)]
pub enum FibError {
    #[error("route {prefix}/{len}")]
    Lpm { prefix: IpAddr, len: u8, source: LpmError },
    #[error("out of next-hop ids (capacity {0})")]
    NextHopsExhausted(usize),
    #[error("out of multipath groups (capacity {0} distinct sets of next hops)")]
    GroupsExhausted(usize),
    #[error("port index {0} is beyond the largest supported ({MAX_PORT})")]
    PortTooLarge(u16),
    #[error("a route with {0} next hops (at most {max})", max = crate::adjacency::MAX_PATHS)]
    TooManyPaths(usize),
    /// A static route for exactly an interface's own route: its connected prefix or one of
    /// the router's addresses, which no other source replaces (as Linux's local table and
    /// `proto kernel` routes are never replaced by `ip route add`).
    #[error(
        "route {prefix}/{len}: an interface's own route (its connected prefix or address); a static route cannot replace it"
    )]
    InterfaceRoute { prefix: IpAddr, len: u8 },
}

/// A multipath group: its members (sorted) and its slot in the member array.
struct Group {
    members: Vec<NextHop>,
    slot: usize,
}

/// Something freed, reusable once every worker has passed a quiescent point in both tables.
struct Retired<T> {
    what: T,
    v4: lpm::Grace,
    v6: lpm::Grace,
}

impl<T> Retired<T> {
    fn is_over(&self) -> bool {
        self.v4.is_over() && self.v6.is_over()
    }
}

/// The single writer of a [`Fib`].
pub struct FibControl {
    fib: Arc<Fib>,
    /// Gateway (port, address) -> next-hop id.
    gateways: HashMap<(u16, IpAddr), NextHop>,
    /// Connected-subnet ids: port -> id (one glean adjacency per port).
    connected: HashMap<u16, NextHop>,
    /// Known neighbours: address -> (port, MAC).
    neighbours: HashMap<IpAddr, (u16, MacAddr)>,
    /// Next-hop id -> the gateway it stands for (the reverse of `gateways`).
    gateway_of: HashMap<NextHop, (IpAddr, u16)>,
    /// Every prefix installed, for listing and precedence; the LPM cannot be enumerated. A
    /// hash map (sorted when listed): a full table's churn pays a search per route, and a
    /// `BTreeMap`'s was the largest cost of a withdrawal after the LPM's.
    routes: PrefixMap<(IpAddr, u8), Installed>,
    /// Routes and groups using each gateway or group id; an id at zero is freed (a
    /// gateway's only once its neighbour is gone too). The prefix maps' hasher: every route
    /// added or removed looks its id up here.
    refs: HashMap<NextHop, u32, PrefixHash>,
    /// Multipath groups by id, and by member set (one group per distinct set).
    groups: HashMap<NextHop, Group>,
    group_by_members: HashMap<Vec<NextHop>, NextHop>,
    free_slots: Vec<usize>,
    retired_slots: VecDeque<Retired<usize>>,
    next_slot: usize,
    /// Static and kernel routes as their sources last said (see `routes.rs`).
    statics: HashMap<(IpAddr, u8), (Target, NextHop)>,
    kernel: PrefixMap<(IpAddr, u8), (NextHop, RouteKind)>,
    /// Freed ids whose grace period is over, and those still waiting for it.
    free: Vec<NextHop>,
    retired: VecDeque<Retired<NextHop>>,
    next_id: NextHop,
    /// Logical ports whose link is down, and the interface routes withdrawn for them (see
    /// `ports_down.rs`).
    down: std::collections::HashSet<u16>,
    down_connected: Vec<(IpAddr, u8, u16)>,
}

impl FibControl {
    /// Empty tables with room for `next_hops` adjacencies; panics if their memory cannot be
    /// mapped (tests, benchmarks: a router uses [`try_new`](Self::try_new)).
    pub fn new(next_hops: usize) -> Self {
        Self::try_new(next_hops).expect("cannot map the FIB's tables")
    }

    /// [`new`](Self::new), or the error if the route tables' memory cannot be mapped.
    pub fn try_new(next_hops: usize) -> Result<Self, lpm::LpmError> {
        let fib = Fib {
            v4: Ipv4Lpm::try_new()?,
            v6: Ipv6Lpm::try_new()?,
            adj: AdjacencyTable::with_groups(next_hops, DEFAULT_GROUPS),
            ecmp_seed: crate::seed::random_seed(),
            decisions: Arc::default(),
        };
        fib.adj.set(LOCAL_ID, Adjacency::Local);
        fib.adj.set(BLACKHOLE_ID, Adjacency::Blackhole);
        fib.adj.set(UNREACHABLE_ID, Adjacency::Unreachable);
        Ok(FibControl {
            fib: Arc::new(fib),
            gateways: HashMap::new(),
            connected: HashMap::new(),
            neighbours: HashMap::new(),
            gateway_of: HashMap::new(),
            routes: PrefixMap::default(),
            refs: HashMap::default(),
            groups: HashMap::new(),
            group_by_members: HashMap::new(),
            free_slots: Vec::new(),
            retired_slots: VecDeque::new(),
            next_slot: 0,
            statics: HashMap::new(),
            kernel: PrefixMap::default(),
            free: Vec::new(),
            retired: VecDeque::new(),
            next_id: FIRST_FREE_ID,
            down: std::collections::HashSet::new(),
            down_connected: Vec::new(),
        })
    }

    /// The tables, for workers.
    pub fn fib(&self) -> Arc<Fib> {
        Arc::clone(&self.fib)
    }

    fn alloc_id(&mut self) -> Result<NextHop, FibError> {
        while self.retired.front().is_some_and(Retired::is_over) {
            self.free.extend(self.retired.pop_front().map(|r| r.what));
        }
        if let Some(id) = self.free.pop() {
            return Ok(id);
        }
        if self.next_id as usize >= self.fib.adj.capacity() {
            return Err(FibError::NextHopsExhausted(self.fib.adj.capacity()));
        }
        self.next_id += 1;
        Ok(self.next_id - 1)
    }

    fn retire<T>(&self, what: T) -> Retired<T> {
        Retired { what, v4: self.fib.v4.grace(), v6: self.fib.v6.grace() }
    }

    fn lpm_insert(&self, prefix: IpAddr, len: u8, id: NextHop) -> Result<(), FibError> {
        let res = match prefix {
            IpAddr::V4(a) => self.fib.v4.insert(u32::from(a), len, id),
            IpAddr::V6(a) => self.fib.v6.insert(u128::from(a), len, id),
        };
        // The same next hop again (a neighbour's refresh) changes no decision.
        if !matches!(res, Ok(Some(old)) if old == id) {
            self.fib.decisions.changed();
        }
        res.map(drop).map_err(|source| FibError::Lpm { prefix, len, source })
    }

    fn insert(
        &mut self,
        prefix: IpAddr,
        len: u8,
        id: NextHop,
        kind: RouteKind,
        source: RouteSource,
    ) -> Result<(), FibError> {
        self.lpm_insert(prefix, len, id)?;
        self.routes.insert((prefix, len), Installed { kind, source });
        Ok(())
    }

    /// Removes a prefix whatever installed it; returns whether it was there.
    pub fn remove(&mut self, prefix: IpAddr, len: u8) -> Result<bool, FibError> {
        let res = self.lpm_remove_old(prefix, len);
        self.routes.remove(&(prefix, len));
        res.map(|old| old.is_some()).map_err(|source| FibError::Lpm { prefix, len, source })
    }

    /// Removes a prefix from the LPM only (the caller has taken it out of `routes`).
    fn lpm_remove(&mut self, prefix: IpAddr, len: u8) -> Result<(), FibError> {
        self.lpm_remove_old(prefix, len).map(drop).map_err(|source| FibError::Lpm {
            prefix,
            len,
            source,
        })
    }

    fn lpm_remove_old(&mut self, prefix: IpAddr, len: u8) -> Result<Option<NextHop>, LpmError> {
        let res = match prefix {
            IpAddr::V4(a) => self.fib.v4.remove(u32::from(a), len),
            IpAddr::V6(a) => self.fib.v6.remove(u128::from(a), len),
        };
        if matches!(res, Ok(Some(_))) {
            self.fib.decisions.changed();
        }
        res
    }

    /// Every installed prefix and what it is, in address order.
    pub fn routes(&self) -> impl Iterator<Item = (IpAddr, u8, RouteKind)> + '_ {
        self.routes_by_source().map(|(p, l, kind, _)| (p, l, kind))
    }

    /// Every installed prefix, what it is and where it comes from, in address order.
    pub fn routes_by_source(
        &self,
    ) -> impl Iterator<Item = (IpAddr, u8, RouteKind, RouteSource)> + '_ {
        let mut all: Vec<_> =
            self.routes.iter().map(|(&(p, l), i)| (p, l, i.kind, i.source)).collect();
        all.sort_unstable_by_key(|r| (r.0, r.1));
        all.into_iter()
    }

    /// Number of installed prefixes.
    pub fn route_count(&self) -> usize {
        self.routes.len()
    }

    /// The gateway a next-hop id stands for (`None` for connected, local, blackhole, group
    /// ids).
    pub fn gateway_of(&self, id: NextHop) -> Option<IpAddr> {
        self.gateway_of.get(&id).map(|&(gw, _)| gw)
    }

    /// The gateways (address, port) of a multipath group, for listing.
    pub fn group_members(&self, group: NextHop) -> Vec<(IpAddr, u16)> {
        let Some(g) = self.groups.get(&group) else { return Vec::new() };
        g.members.iter().filter_map(|m| self.gateway_of.get(m).copied()).collect()
    }

    /// The port whose connected prefixes use next-hop id `id` (their hosts are resolved by
    /// the packet's own destination).
    pub fn connected_port(&self, id: NextHop) -> Option<u16> {
        self.connected.iter().find(|&(_, &i)| i == id).map(|(&p, _)| p)
    }

    /// Known neighbours (static, or resolved by ARP/NDP).
    pub fn neighbour(&self, addr: IpAddr) -> Option<(u16, MacAddr)> {
        self.neighbours.get(&addr).copied()
    }

    /// One of the router's own addresses: packets to it take the local exit.
    pub fn add_local(&mut self, addr: IpAddr) -> Result<(), FibError> {
        self.insert(addr, host_len(addr), LOCAL_ID, RouteKind::Local, RouteSource::Interface)
    }

    /// Removes one of the router's own addresses that [`add_local`](Self::add_local) added
    /// (a VRRP daemon's address gone); returns whether it was one.
    pub fn remove_local(&mut self, addr: IpAddr) -> Result<bool, FibError> {
        let key = (addr, host_len(addr));
        if !self.routes.get(&key).is_some_and(|r| matches!(r.kind, RouteKind::Local)) {
            return Ok(false);
        }
        self.remove(addr, host_len(addr))
    }

    /// The broadcast address `addr` of a connected IPv4 prefix on `port`: packets to it take
    /// the local exit, as to the router's own addresses.
    pub fn add_broadcast(&mut self, addr: IpAddr, port: u16) -> Result<(), FibError> {
        self.insert(
            addr,
            host_len(addr),
            LOCAL_ID,
            RouteKind::Broadcast { port },
            RouteSource::Interface,
        )
    }

    /// A blackhole route (static).
    pub fn add_blackhole(&mut self, prefix: IpAddr, len: u8) -> Result<(), FibError> {
        self.set_static(prefix, len, Target::Blackhole)
    }

    /// The id of connected prefixes on `port` (one glean adjacency per port).
    fn connected_id(&mut self, port: u16) -> Result<NextHop, FibError> {
        check_port(port)?;
        if let Some(&id) = self.connected.get(&port) {
            return Ok(id);
        }
        let id = self.alloc_id()?;
        self.fib.adj.set_glean(id, port);
        self.connected.insert(port, id);
        Ok(id)
    }

    /// A directly connected subnet on `port`: hosts in it are reached by their own MAC, known
    /// once they are neighbours (host routes); the rest of the subnet is unresolved.
    pub fn add_connected(&mut self, prefix: IpAddr, len: u8, port: u16) -> Result<(), FibError> {
        let id = self.connected_id(port)?;
        self.insert(prefix, len, id, RouteKind::Connected { port }, RouteSource::Interface)
    }

    /// The next-hop id standing for `gateway` on `port`, created unresolved (or resolved if
    /// the neighbour is already known).
    pub fn gateway_id(&mut self, gateway: IpAddr, port: u16) -> Result<NextHop, FibError> {
        check_port(port)?;
        if let Some(&id) = self.gateways.get(&(port, gateway)) {
            return Ok(id);
        }
        let id = self.alloc_id()?;
        let adj = match self.neighbours.get(&gateway) {
            Some(&(p, mac)) if p == port => Adjacency::Forward { port, mac },
            _ => Adjacency::Unresolved { port },
        };
        self.fib.adj.set(id, adj);
        self.gateways.insert((port, gateway), id);
        self.gateway_of.insert(id, (gateway, port));
        Ok(id)
    }

    /// A static route to `prefix/len` via `gateway` out of `port`; returns its next-hop id.
    pub fn add_route(
        &mut self,
        prefix: IpAddr,
        len: u8,
        gateway: IpAddr,
        port: u16,
    ) -> Result<NextHop, FibError> {
        self.set_static(prefix, len, Target::Via(vec![(gateway, port)]))?;
        Ok(self.gateways[&(port, gateway)])
    }

    fn acquire(&mut self, id: NextHop) {
        if self.gateway_of.contains_key(&id) || self.groups.contains_key(&id) {
            *self.refs.entry(id).or_insert(0) += 1;
        }
    }

    /// Drops one use of `id`; at zero a group is dissolved and a gateway id whose neighbour
    /// is unknown is freed (after a grace period).
    fn release(&mut self, id: NextHop) {
        let Some(n) = self.refs.get_mut(&id) else { return };
        *n -= 1;
        if *n > 0 {
            return;
        }
        self.refs.remove(&id);
        if let Some(group) = self.groups.remove(&id) {
            self.group_by_members.remove(&group.members);
            let slot = self.retire(group.slot);
            self.retired_slots.push_back(slot);
            for m in group.members {
                self.release(m);
            }
            self.free_gateway_or_group(id);
        } else if let Some(&(gw, port)) = self.gateway_of.get(&id)
            && self.neighbours.get(&gw).is_none_or(|&(p, _)| p != port)
        {
            self.gateways.remove(&(port, gw));
            self.free_gateway_or_group(id);
        }
    }

    fn free_gateway_or_group(&mut self, id: NextHop) {
        self.gateway_of.remove(&id);
        let r = self.retire(id);
        self.retired.push_back(r);
    }

    fn alloc_slot(&mut self) -> Result<usize, FibError> {
        while self.retired_slots.front().is_some_and(Retired::is_over) {
            self.free_slots.extend(self.retired_slots.pop_front().map(|r| r.what));
        }
        if let Some(s) = self.free_slots.pop() {
            return Ok(s);
        }
        if self.next_slot >= self.fib.adj.group_capacity() {
            return Err(FibError::GroupsExhausted(self.fib.adj.group_capacity()));
        }
        self.next_slot += 1;
        Ok(self.next_slot - 1)
    }

    /// The group id for a set of member ids (sorted, distinct, at least 2): an existing group
    /// with the same members, or a new one (its members written before its adjacency).
    fn group_id(&mut self, members: Vec<NextHop>) -> Result<NextHop, FibError> {
        if let Some(&g) = self.group_by_members.get(&members) {
            return Ok(g);
        }
        let slot = self.alloc_slot()?;
        let id = match self.alloc_id() {
            Ok(id) => id,
            Err(e) => {
                self.free_slots.push(slot);
                return Err(e);
            }
        };
        let start = self.fib.adj.set_members(slot, &members);
        self.fib.adj.set(id, Adjacency::Multipath { members: start, paths: members.len() as u16 });
        for &m in &members {
            self.acquire(m);
        }
        self.group_by_members.insert(members.clone(), id);
        self.groups.insert(id, Group { members, slot });
        Ok(id)
    }

    /// A neighbour's MAC is known (static entry, or later ARP/NDP): its host route forwards
    /// to it directly (unless a static or interface route holds that prefix), and every
    /// gateway id standing for it is resolved in one store each. On failure nothing of it is
    /// left installed.
    pub fn set_neighbour(&mut self, addr: IpAddr, port: u16, mac: MacAddr) -> Result<(), FibError> {
        check_port(port)?;
        if self.neighbours.get(&addr).is_some_and(|&(p, _)| p != port) {
            self.unset_neighbour(addr);
        }
        let id = self.gateway_id(addr, port)?;
        if self.neighbours.insert(addr, (port, mac)).is_some_and(|old| old != (port, mac)) {
            self.fib.decisions.changed();
        }
        self.fib.adj.set(id, Adjacency::Forward { port, mac });
        let len = host_len(addr);
        let res = match self.routes.get(&(addr, len)).map(|i| i.source) {
            Some(RouteSource::Static | RouteSource::Interface) => Ok(()),
            _ => self.insert(addr, len, id, RouteKind::Neighbour { port }, RouteSource::Neighbour),
        };
        if res.is_err() {
            self.unset_neighbour(addr);
        }
        res
    }

    /// A neighbour stopped answering, or was forgotten: its host route goes (a kernel route
    /// for that address takes its place), and every next hop through it becomes unresolved
    /// again (the next packet goes to the slow path and starts a new resolution). Its id is
    /// freed unless a route uses it.
    pub fn unset_neighbour(&mut self, addr: IpAddr) {
        let Some((port, _)) = self.neighbours.remove(&addr) else { return };
        let len = host_len(addr);
        if self.routes.get(&(addr, len)).is_some_and(|i| i.source == RouteSource::Neighbour) {
            // Removing or replacing a host route cannot fail: it needs no new tbl8 group.
            let _ = self.withdraw(addr, len);
        }
        let Some(&id) = self.gateways.get(&(port, addr)) else { return };
        self.fib.adj.set(id, Adjacency::Unresolved { port });
        self.fib.decisions.changed();
        if !self.refs.contains_key(&id) {
            self.gateways.remove(&(port, addr));
            self.free_gateway_or_group(id);
        }
    }

    /// Number of known neighbours (static and learnt), each with one host route.
    pub fn neighbour_count(&self) -> usize {
        self.neighbours.len()
    }

    /// Number of next-hop ids in use (freed ones waiting for their grace period excluded).
    pub fn next_hops(&self) -> usize {
        self.next_id as usize - self.free.len() - self.retired.len()
    }

    /// Number of multipath groups in use.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }
}

fn host_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 32 } else { 128 }
}

fn check_port(port: u16) -> Result<(), FibError> {
    if port > MAX_PORT { Err(FibError::PortTooLarge(port)) } else { Ok(()) }
}
