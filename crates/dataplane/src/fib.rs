//! The forwarding tables the workers read, and the control-plane side that fills them.
//!
//! [`Fib`] is shared by every worker through an `Arc` and never locked on the fast path: the
//! LPM tables are updated in place by a single writer (see the `lpm` crate's docs for why a
//! racing lookup sees the old or the new answer), and adjacencies are single atomic words.
//! [`FibControl`] is the one writer: it allocates next-hop ids and remembers which id stands
//! for which gateway, so that resolving a neighbour later updates one adjacency, not routes.
//!
//! A learnt neighbour's host route and next-hop id live exactly as long as it is known
//! ([`FibControl::set_neighbour`] to [`FibControl::unset_neighbour`]); a freed id is reused
//! only after a grace period over the workers' lookups ([`lpm::Grace`]), so a packet that
//! looked up the old route never takes the new neighbour's adjacency.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use lpm::{Ipv4Lpm, Ipv6Lpm, LpmError, NextHop};
use wire::MacAddr;

use crate::adjacency::{Adjacency, AdjacencyTable, MAX_PORT};
pub use crate::ports::PortInfo;

/// Next-hop id of the router's own addresses.
pub const LOCAL_ID: NextHop = 0;
/// Next-hop id of blackhole routes.
pub const BLACKHOLE_ID: NextHop = 1;
const FIRST_FREE_ID: NextHop = 2;

/// Default adjacency capacity: the issue asks for at least 65,536 next hops.
pub const DEFAULT_NEXT_HOPS: usize = 1 << 17;

/// Adjacency capacity for a config: twice the neighbour limit (freed ids wait out a grace
/// period before reuse), plus configured gateways and connected prefixes.
pub fn next_hops_for(cfg: &config::Config) -> usize {
    let fixed = cfg.routes.len() + cfg.interfaces.iter().map(|i| i.addresses.len()).sum::<usize>();
    DEFAULT_NEXT_HOPS.max(2 * cfg.router.max_neighbours + fixed + cfg.neighbours.len() + 16)
}

/// What workers read.
pub struct Fib {
    pub v4: Ipv4Lpm,
    pub v6: Ipv6Lpm,
    pub adj: AdjacencyTable,
}

/// What a FIB entry is, for `linerate show routes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// One of the router's addresses.
    Local,
    Blackhole,
    /// A directly connected prefix on a logical port.
    Connected { port: u16 },
    /// Via a gateway on a port.
    Via { gateway: IpAddr, port: u16 },
    /// A neighbour's host route.
    Neighbour { port: u16 },
}

#[derive(Debug, thiserror::Error)]
pub enum FibError {
    #[error("route {prefix}/{len}")]
    Lpm { prefix: IpAddr, len: u8, source: LpmError },
    #[error("out of next-hop ids (capacity {0})")]
    NextHopsExhausted(usize),
    #[error("port index {0} is beyond the largest supported ({MAX_PORT})")]
    PortTooLarge(u16),
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
    gateway_of: HashMap<NextHop, IpAddr>,
    /// Every prefix installed, for listing; the LPM itself cannot be enumerated cheaply.
    routes: BTreeMap<(IpAddr, u8), RouteKind>,
    /// Ids of configured routes' gateways: kept (unresolved) when their neighbour goes.
    configured: HashSet<NextHop>,
    /// Freed ids whose grace period is over, and those still waiting for it.
    free: Vec<NextHop>,
    retired: VecDeque<(NextHop, lpm::Grace)>,
    next_id: NextHop,
}

impl FibControl {
    /// Empty tables with room for `next_hops` adjacencies.
    pub fn new(next_hops: usize) -> Self {
        let fib = Fib { v4: Ipv4Lpm::new(), v6: Ipv6Lpm::new(), adj: AdjacencyTable::new(next_hops) };
        fib.adj.set(LOCAL_ID, Adjacency::Local);
        fib.adj.set(BLACKHOLE_ID, Adjacency::Blackhole);
        FibControl {
            fib: Arc::new(fib),
            gateways: HashMap::new(),
            connected: HashMap::new(),
            neighbours: HashMap::new(),
            gateway_of: HashMap::new(),
            routes: BTreeMap::new(),
            configured: HashSet::new(),
            free: Vec::new(),
            retired: VecDeque::new(),
            next_id: FIRST_FREE_ID,
        }
    }

    /// The tables, for workers.
    pub fn fib(&self) -> Arc<Fib> {
        Arc::clone(&self.fib)
    }

    fn alloc_id(&mut self) -> Result<NextHop, FibError> {
        while self.retired.front().is_some_and(|(_, g)| g.is_over()) {
            self.free.extend(self.retired.pop_front().map(|(id, _)| id));
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

    fn insert(&mut self, prefix: IpAddr, len: u8, id: NextHop, kind: RouteKind) -> Result<(), FibError> {
        let res = match prefix {
            IpAddr::V4(a) => self.fib.v4.insert(u32::from(a), len, id),
            IpAddr::V6(a) => self.fib.v6.insert(u128::from(a), len, id),
        };
        res.map_err(|source| FibError::Lpm { prefix, len, source })?;
        self.routes.insert((prefix, len), kind);
        Ok(())
    }

    /// Removes a prefix; returns whether it was there.
    pub fn remove(&mut self, prefix: IpAddr, len: u8) -> Result<bool, FibError> {
        let res = match prefix {
            IpAddr::V4(a) => self.fib.v4.remove(u32::from(a), len),
            IpAddr::V6(a) => self.fib.v6.remove(u128::from(a), len),
        };
        self.routes.remove(&(prefix, len));
        res.map(|old| old.is_some()).map_err(|source| FibError::Lpm { prefix, len, source })
    }

    /// Every installed prefix and what it is, in address order.
    pub fn routes(&self) -> impl Iterator<Item = (IpAddr, u8, RouteKind)> + '_ {
        self.routes.iter().map(|(&(p, l), &k)| (p, l, k))
    }

    /// The gateway a next-hop id stands for (`None` for connected, local, blackhole ids).
    pub fn gateway_of(&self, id: NextHop) -> Option<IpAddr> {
        self.gateway_of.get(&id).copied()
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
        let len = if addr.is_ipv4() { 32 } else { 128 };
        self.insert(addr, len, LOCAL_ID, RouteKind::Local)
    }

    /// A blackhole route.
    pub fn add_blackhole(&mut self, prefix: IpAddr, len: u8) -> Result<(), FibError> {
        self.insert(prefix, len, BLACKHOLE_ID, RouteKind::Blackhole)
    }

    /// A directly connected subnet on `port`: hosts in it are reached by their own MAC, known
    /// once they are neighbours (host routes); the rest of the subnet is unresolved.
    pub fn add_connected(&mut self, prefix: IpAddr, len: u8, port: u16) -> Result<(), FibError> {
        check_port(port)?;
        let id = match self.connected.get(&port) {
            Some(&id) => id,
            None => {
                let id = self.alloc_id()?;
                self.fib.adj.set_glean(id, port);
                self.connected.insert(port, id);
                id
            }
        };
        self.insert(prefix, len, id, RouteKind::Connected { port })
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
        self.gateway_of.insert(id, gateway);
        Ok(id)
    }

    /// A route to `prefix/len` via `gateway` out of `port`.
    pub fn add_route(&mut self, prefix: IpAddr, len: u8, gateway: IpAddr, port: u16) -> Result<NextHop, FibError> {
        let id = self.gateway_id(gateway, port)?;
        self.configured.insert(id);
        self.insert(prefix, len, id, RouteKind::Via { gateway, port })?;
        Ok(id)
    }

    /// A neighbour's MAC is known (static entry, or later ARP/NDP): its host route forwards
    /// to it directly, and every gateway id standing for it is resolved in one store each.
    /// On failure nothing of it is left installed.
    pub fn set_neighbour(&mut self, addr: IpAddr, port: u16, mac: MacAddr) -> Result<(), FibError> {
        check_port(port)?;
        if self.neighbours.get(&addr).is_some_and(|&(p, _)| p != port) {
            self.unset_neighbour(addr);
        }
        let id = self.gateway_id(addr, port)?;
        self.neighbours.insert(addr, (port, mac));
        self.fib.adj.set(id, Adjacency::Forward { port, mac });
        let len = host_len(addr);
        // A configured route to exactly this address keeps its listing; the LPM entry is the
        // same id either way.
        let kind = match self.routes.get(&(addr, len)) {
            Some(&k @ RouteKind::Via { .. }) => k,
            _ => RouteKind::Neighbour { port },
        };
        let res = self.insert(addr, len, id, kind);
        if res.is_err() {
            self.unset_neighbour(addr);
        }
        res
    }

    /// A neighbour stopped answering, or was forgotten: its host route goes, and every next
    /// hop through it becomes unresolved again (the next packet goes to the slow path and
    /// starts a new resolution). Its id is freed unless a configured route uses it.
    pub fn unset_neighbour(&mut self, addr: IpAddr) {
        let Some((port, _)) = self.neighbours.remove(&addr) else { return };
        let len = host_len(addr);
        if matches!(self.routes.get(&(addr, len)), Some(RouteKind::Neighbour { .. })) {
            // Removing a host route cannot fail: it needs no new tbl8 group.
            let _ = self.remove(addr, len);
        }
        let Some(&id) = self.gateways.get(&(port, addr)) else { return };
        self.fib.adj.set(id, Adjacency::Unresolved { port });
        if !self.configured.contains(&id) {
            self.gateways.remove(&(port, addr));
            self.gateway_of.remove(&id);
            let grace = match addr {
                IpAddr::V4(_) => self.fib.v4.grace(),
                IpAddr::V6(_) => self.fib.v6.grace(),
            };
            self.retired.push_back((id, grace));
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
}

fn host_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 32 } else { 128 }
}

fn check_port(port: u16) -> Result<(), FibError> {
    if port > MAX_PORT { Err(FibError::PortTooLarge(port)) } else { Ok(()) }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}: interface {1:?} has no MAC address in the config")]
    NoMac(String, String),
    #[error("{path}")]
    Fib { path: String, source: FibError },
    #[error("{0}: route uses interface {1:?}, which is not configured")]
    UnknownInterface(String, String),
}

/// The logical ports of a config, in its order. Physical ports (interfaces without a VLAN)
/// are numbered in config order among themselves; a sub-interface uses its parent's number
/// and MAC.
pub fn ports_from_config(cfg: &config::Config) -> Result<Vec<PortInfo>, BuildError> {
    let path = cfg.path.display().to_string();
    let physical: Vec<&config::Interface> = cfg.interfaces.iter().filter(|i| i.vlan.is_none()).collect();
    let mut ports = Vec::new();
    for iface in &cfg.interfaces {
        let parent_name = iface.vlan.as_ref().map_or(&iface.name, |v| &v.parent);
        let phys = physical.iter().position(|p| &p.name == parent_name)
            .ok_or_else(|| BuildError::UnknownInterface(path.clone(), parent_name.clone()))?;
        let mac = physical[phys].mac.ok_or_else(|| BuildError::NoMac(path.clone(), physical[phys].name.clone()))?;
        ports.push(PortInfo {
            name: iface.name.clone(),
            mac: MacAddr(mac.0),
            phys: phys as u16,
            vlan: iface.vlan.as_ref().map(|v| v.tag),
            mtu: iface.mtu,
            addresses: iface.addresses.iter().map(|a| (a.addr, a.prefix_len)).collect(),
        });
    }
    Ok(ports)
}

/// Builds ports and tables from a validated config: ports in the config's order, the
/// interfaces' addresses as local host routes, their subnets as connected routes, static
/// neighbours as resolved host routes, then static routes.
pub fn from_config(cfg: &config::Config) -> Result<(FibControl, Vec<PortInfo>), BuildError> {
    let path = cfg.path.display().to_string();
    let ports = ports_from_config(cfg)?;
    let port_of = |name: &str| {
        ports
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u16)
            .ok_or_else(|| BuildError::UnknownInterface(path.clone(), name.to_owned()))
    };
    let fib_err = |source| BuildError::Fib { path: path.clone(), source };
    let mut ctl = FibControl::new(next_hops_for(cfg));
    for (port, iface) in cfg.interfaces.iter().enumerate() {
        for a in &iface.addresses {
            let net = a.network();
            ctl.add_connected(net.addr, net.len, port as u16).map_err(fib_err)?;
            ctl.add_local(a.addr).map_err(fib_err)?;
        }
    }
    for n in &cfg.neighbours {
        let port = port_of(&n.interface)?;
        ctl.set_neighbour(n.address, port, MacAddr(n.mac.0)).map_err(fib_err)?;
    }
    for r in &cfg.routes {
        let port = port_of(&r.interface)?;
        match r.via {
            Some(gw) => ctl.add_route(r.prefix.addr, r.prefix.len, gw, port).map(|_| ()),
            None => ctl.add_connected(r.prefix.addr, r.prefix.len, port),
        }
        .map_err(fib_err)?;
    }
    Ok((ctl, ports))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn neighbour_resolves_existing_gateway_in_place() {
        let mut ctl = FibControl::new(16);
        let gw = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 2));
        let id = ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, gw, 1).unwrap();
        let fib = ctl.fib();
        assert_eq!(fib.v4.lookup(0x0a01_0203), Some(id));
        assert_eq!(fib.adj.get(id), Adjacency::Unresolved { port: 1 });
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        ctl.set_neighbour(gw, 1, mac).unwrap();
        assert_eq!(fib.adj.get(id), Adjacency::Forward { port: 1, mac });
        assert_eq!(fib.v4.lookup(u32::from(Ipv4Addr::new(198, 19, 0, 2))), Some(id));
    }

    #[test]
    fn local_and_connected() {
        let mut ctl = FibControl::new(16);
        let me = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
        ctl.add_connected(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)), 24, 0).unwrap();
        ctl.add_local(me).unwrap();
        let fib = ctl.fib();
        assert_eq!(fib.v4.lookup(u32::from(Ipv4Addr::new(198, 18, 0, 1))), Some(LOCAL_ID));
        let other = fib.v4.lookup(u32::from(Ipv4Addr::new(198, 18, 0, 7))).unwrap();
        assert_eq!(fib.adj.get(other), Adjacency::Unresolved { port: 0 });
    }

    #[test]
    fn neighbours_free_their_host_route_and_id_configured_gateways_keep_theirs() {
        let mut ctl = FibControl::new(8);
        let fib = ctl.fib();
        let gw = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 2));
        let gw_id = ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, gw, 1).unwrap();
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        let base = ctl.next_hops();
        for i in 0..100u32 {
            // Far more neighbours than ids, one at a time: ids come back.
            let a = IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i));
            ctl.set_neighbour(a, 0, mac).unwrap();
            assert_eq!(ctl.next_hops(), base + 1);
            ctl.unset_neighbour(a);
            assert_eq!(fib.v4.lookup(0xc612_0000 + i), None, "host route withdrawn");
        }
        assert_eq!(ctl.next_hops(), base);
        ctl.set_neighbour(gw, 1, mac).unwrap();
        assert_eq!(fib.adj.get(gw_id), Adjacency::Forward { port: 1, mac });
        ctl.unset_neighbour(gw);
        assert_eq!(fib.adj.get(gw_id), Adjacency::Unresolved { port: 1 });
        assert_eq!(fib.v4.lookup(0x0a01_0101), Some(gw_id), "the configured route stays");
        assert_eq!(ctl.gateway_of(gw_id), Some(gw));
        assert_eq!((ctl.next_hops(), ctl.routes().count()), (base, 1));
    }

    #[test]
    fn freed_ids_wait_for_the_readers() {
        let mut ctl = FibControl::new(4);
        let fib = ctl.fib();
        let reader = fib.v4.reader();
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        let (a, b) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        ctl.set_neighbour(a, 0, mac).unwrap();
        let id_a = fib.v4.lookup(0x0a00_0001).unwrap();
        ctl.unset_neighbour(a);
        // The reader may still hold id_a: b gets a fresh id, and then there are none left.
        ctl.set_neighbour(b, 0, mac).unwrap();
        assert_ne!(fib.v4.lookup(0x0a00_0002), Some(id_a));
        assert!(matches!(ctl.set_neighbour(a, 0, mac), Err(FibError::NextHopsExhausted(4))));
        assert_eq!(ctl.neighbour(a), None, "nothing of a failed install is left");
        reader.quiescent();
        ctl.set_neighbour(a, 0, mac).unwrap();
        assert_eq!(fib.v4.lookup(0x0a00_0001), Some(id_a));
    }

    #[test]
    fn exhausting_next_hops_is_an_error() {
        let mut ctl = FibControl::new(3);
        let p = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0));
        ctl.add_route(p, 8, IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1)), 0).unwrap();
        let err = ctl.add_route(p, 8, IpAddr::V4(Ipv4Addr::new(1, 1, 1, 2)), 0).unwrap_err();
        assert!(matches!(err, FibError::NextHopsExhausted(3)));
    }
}
