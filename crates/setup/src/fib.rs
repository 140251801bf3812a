//! Ports and FIB from a config.

use std::net::IpAddr;

use dataplane::fib::{DEFAULT_NEXT_HOPS, FibControl, FibError, PortInfo, StaticRoute, Target};
use wire::MacAddr;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}: interface {1:?} has no MAC address in the config")]
    NoMac(String, String),
    #[error("{path}")]
    Fib { path: String, source: FibError },
    #[error("{0}: route uses interface {1:?}, which is not configured")]
    UnknownInterface(String, String),
    #[error("{0}: the route tables: {1}")]
    Tables(String, lpm::LpmError),
}

/// The logical ports of a config, in its order. Physical ports (interfaces without a VLAN)
/// are numbered in config order among themselves; a sub-interface uses its parent's number
/// and MAC.
pub fn ports(cfg: &config::Config) -> Result<Vec<PortInfo>, BuildError> {
    let path = cfg.path.display().to_string();
    let physical: Vec<&config::Interface> =
        cfg.interfaces.iter().filter(|i| i.vlan.is_none()).collect();
    let mut ports = Vec::new();
    for iface in &cfg.interfaces {
        let parent_name = iface.vlan.as_ref().map_or(&iface.name, |v| &v.parent);
        let phys = physical
            .iter()
            .position(|p| &p.name == parent_name)
            .ok_or_else(|| BuildError::UnknownInterface(path.clone(), parent_name.clone()))?;
        let mac = physical[phys]
            .mac
            .ok_or_else(|| BuildError::NoMac(path.clone(), physical[phys].name.clone()))?;
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

/// The logical port called `name` (`path`: the config's, for the error).
fn port_named(ports: &[PortInfo], name: &str, path: &str) -> Result<u16, BuildError> {
    ports
        .iter()
        .position(|p| p.name == name)
        .map(|i| i as u16)
        .ok_or_else(|| BuildError::UnknownInterface(path.to_owned(), name.to_owned()))
}

/// The config's static routes as the FIB takes them (interfaces resolved to logical ports).
pub fn static_routes(
    cfg: &config::Config,
    ports: &[PortInfo],
) -> Result<Vec<StaticRoute>, BuildError> {
    let path = cfg.path.display().to_string();
    let port_of = |name: &str| port_named(ports, name, &path);
    let mut out = Vec::with_capacity(cfg.routes.len());
    for r in &cfg.routes {
        let hops = r.next_hops();
        let target = if hops.is_empty() {
            Target::Connected(port_of(&r.interface)?)
        } else {
            Target::Via(
                hops.into_iter()
                    .map(|(gw, i)| Ok((gw, port_of(i)?)))
                    .collect::<Result<_, BuildError>>()?,
            )
        };
        out.push(StaticRoute { prefix: r.prefix.addr, len: r.prefix.len, target });
    }
    Ok(out)
}

/// Builds ports and tables from a validated config: ports in the config's order, the
/// interfaces' addresses as local host routes, their subnets as connected routes (and an
/// IPv4 subnet's broadcast address as a local one: RFC 2644, no directed broadcasts; an IPv6
/// prefix's Subnet-Router anycast address too, RFC 4291 2.6.1), static
/// neighbours as resolved host routes, then static routes.
pub fn fib(cfg: &config::Config) -> Result<(FibControl, Vec<PortInfo>), BuildError> {
    let path = cfg.path.display().to_string();
    let ports = ports(cfg)?;
    let port_of = |name: &str| port_named(&ports, name, &path);
    let fib_err = |source| BuildError::Fib { path: path.clone(), source };
    let mut ctl =
        FibControl::try_new(next_hops_for(cfg)).map_err(|e| BuildError::Tables(path.clone(), e))?;
    for (port, iface) in cfg.interfaces.iter().enumerate() {
        for a in &iface.addresses {
            let net = a.network();
            ctl.add_connected(net.addr, net.len, port as u16).map_err(fib_err)?;
            ctl.add_local(a.addr).map_err(fib_err)?;
            if let Some(b) = a.broadcast() {
                ctl.add_broadcast(b, port as u16).map_err(fib_err)?;
            }
            // The prefix's Subnet-Router anycast address is the router's (RFC 4291 2.6.1).
            if let IpAddr::V6(v6) = a.addr
                && let Some(anycast) =
                    dataplane::ports::subnet_router_anycast(u128::from(v6), a.prefix_len)
            {
                ctl.add_local(IpAddr::V6(anycast.into())).map_err(fib_err)?;
            }
        }
    }
    for n in &cfg.neighbours {
        let port = port_of(&n.interface)?;
        ctl.set_neighbour(n.address, port, MacAddr(n.mac.0)).map_err(fib_err)?;
    }
    let routes = static_routes(cfg, &ports)?;
    ctl.set_static_routes(&routes).map_err(fib_err)?;
    Ok((ctl, ports))
}

/// Adjacency capacity for a config: twice the neighbour limit (freed ids wait out a grace
/// period before reuse), plus configured gateways and connected prefixes.
pub fn next_hops_for(cfg: &config::Config) -> usize {
    let fixed = cfg.routes.len() + cfg.interfaces.iter().map(|i| i.addresses.len()).sum::<usize>();
    DEFAULT_NEXT_HOPS.max(2 * cfg.router.max_neighbours + fixed + cfg.neighbours.len() + 16)
}
