//! Logical ports: the interfaces of the config, each carried by a physical port (an rx/tx
//! socket pair of a worker), untagged or as an 802.1Q sub-interface of it.
//!
//! The FIB, adjacencies, firewall rules and counters name logical ports; the worker's rx and
//! tx vectors are indexed by physical port. [`PortMap`] translates both ways in one indexed
//! load each: (physical port, VLAN id) -> logical port on input, logical port -> (physical
//! port, tag, MAC, MTU) on output. The kernel here has no 802.1Q module, and a router on a
//! userspace fast path does not need one: tags are read and written in software (IEEE
//! 802.1Q-2018 9.6, the 4-byte tag after the source MAC).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::MacAddr;

mod own;

pub use own::{OwnAddrs, subnet_router_anycast};

/// A port as the dataplane knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub name: String,
    pub mac: MacAddr,
    /// The physical port carrying it (index into the worker's rx/tx vectors).
    pub phys: u16,
    /// 802.1Q VLAN id of a sub-interface; `None` for the untagged traffic of `phys`.
    pub vlan: Option<u16>,
    /// IP MTU of the link (bytes of IP packet, L2 header not included).
    pub mtu: u16,
    /// The router's addresses on it, with their prefix lengths.
    pub addresses: Vec<(IpAddr, u8)>,
}

impl PortInfo {
    /// An untagged physical port with MTU 1500 and no addresses.
    pub fn new(name: &str, mac: MacAddr, phys: u16) -> PortInfo {
        PortInfo { name: name.to_owned(), mac, phys, vlan: None, mtu: 1500, addresses: Vec::new() }
    }

    /// The first IPv4 address of the port.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.addresses.iter().find_map(|(a, _)| match a {
            IpAddr::V4(a) => Some(*a),
            IpAddr::V6(_) => None,
        })
    }

    /// The first IPv6 address of the port.
    pub fn ipv6(&self) -> Option<Ipv6Addr> {
        self.addresses.iter().find_map(|(a, _)| match a {
            IpAddr::V6(a) => Some(*a),
            IpAddr::V4(_) => None,
        })
    }

    /// Whether `ip` is one of the port's own addresses.
    pub fn owns(&self, ip: IpAddr) -> bool {
        self.addresses.iter().any(|(a, _)| *a == ip)
    }
}

/// Marks a (physical port, VLAN id) with no logical port.
const NONE: u16 = u16::MAX;

/// What the output side needs of a logical port, packed for the apply pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutPort {
    pub phys: u16,
    /// Tag control information to write (VLAN id; priority 0), or 0 for untagged.
    pub tci: u16,
    /// Length of the L2 header it sends: 14, or 18 with a tag.
    pub hdr: u16,
    pub mac: MacAddr,
    pub mtu: u16,
}

/// Translation between physical ports with VLAN ids and logical ports.
#[derive(Debug, Clone)]
pub struct PortMap {
    /// Per physical port: 4096 entries indexed by VLAN id, 0 standing for untagged (and for
    /// priority-tagged frames, VID 0, which 802.1Q says belong to the untagged VLAN).
    input: Vec<Box<[u16; 4096]>>,
    out: Vec<OutPort>,
    /// MAC of each physical port (the unicast address it accepts).
    phys_macs: Vec<MacAddr>,
    /// The router's addresses (for martian sources and link-local packets).
    pub own: OwnAddrs,
}

impl PortMap {
    /// Builds the map. Physical ports are those without a VLAN; a port's `phys` must name one
    /// of them (ports with an unknown `phys` are ignored on input).
    pub fn new(ports: &[PortInfo]) -> PortMap {
        let phys_count = ports.iter().map(|p| p.phys as usize + 1).max().unwrap_or(0);
        let mut input: Vec<Box<[u16; 4096]>> =
            (0..phys_count).map(|_| Box::new([NONE; 4096])).collect();
        let mut phys_macs = vec![MacAddr([0; 6]); phys_count];
        for (logical, p) in ports.iter().enumerate() {
            let table = &mut input[p.phys as usize];
            match p.vlan {
                None => {
                    table[0] = logical as u16;
                    phys_macs[p.phys as usize] = p.mac;
                }
                Some(vid) => table[usize::from(vid) & 0xfff] = logical as u16,
            }
        }
        let out = ports
            .iter()
            .map(|p| OutPort {
                phys: p.phys,
                tci: p.vlan.unwrap_or(0) & 0xfff,
                hdr: if p.vlan.is_some() { 18 } else { 14 },
                mac: p.mac,
                mtu: p.mtu,
            })
            .collect();
        PortMap { input, out, phys_macs, own: OwnAddrs::of(ports) }
    }

    /// The logical port of a frame received on `phys` with VLAN id `vid` (0: untagged).
    #[inline(always)]
    pub fn input(&self, phys: u16, vid: u16) -> Option<u16> {
        let l = *self.input.get(phys as usize)?.get(usize::from(vid) & 0xfff)?;
        (l != NONE).then_some(l)
    }

    #[inline(always)]
    pub fn output(&self, logical: u16) -> Option<&OutPort> {
        self.out.get(logical as usize)
    }

    /// The MAC address physical port `phys` accepts unicast frames for.
    #[inline(always)]
    pub fn phys_mac(&self, phys: u16) -> MacAddr {
        self.phys_macs.get(phys as usize).copied().unwrap_or(MacAddr([0; 6]))
    }

    /// Number of physical ports.
    pub fn phys_count(&self) -> usize {
        self.phys_macs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untagged_and_tagged_on_one_parent() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let mut sub = PortInfo::new("a.10", mac, 0);
        sub.vlan = Some(10);
        let ports =
            [PortInfo::new("a", mac, 0), PortInfo::new("b", MacAddr([2, 0, 0, 0, 0, 2]), 1), sub];
        let m = PortMap::new(&ports);
        assert_eq!(m.input(0, 0), Some(0));
        assert_eq!(m.input(0, 10), Some(2));
        assert_eq!(m.input(0, 11), None);
        assert_eq!(m.input(1, 10), None);
        assert_eq!(m.input(7, 0), None);
        assert_eq!(m.output(2).unwrap().tci, 10);
        assert_eq!(m.output(2).unwrap().phys, 0);
        assert_eq!(m.output(1).unwrap().tci, 0);
        assert_eq!(m.phys_mac(1), MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(m.phys_count(), 2);
    }
}
