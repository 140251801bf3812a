//! pf's `route-to` and `reply-to` in the forwarder: the packets a state's rule routes leave
//! towards its gateway (`fw::rules::RouteOpt`). Only for rule sets with such a rule: the
//! pass below runs once per batch, between the in pass and the route lookups, and looks
//! every routed packet's state up again (the in pass may have just made it), so the fast
//! path of other rule sets is unchanged. The gateway replaces the destination as the
//! address looked up: the route to the gateway gives the output port, which the out pass
//! filters on, as pf's does for the interface `route-to` sends to.

use std::net::IpAddr;

use super::{Forwarder, MAX_BATCH, Next};
use crate::adjacency::Adjacency;
use crate::counters::DropReason;
use crate::firewall::{frags, keys};
use crate::punt::Punt;
use fw::packet::{Af, PacketKey};
use fw::rules::RouteOpt;
use io::{FrameDesc, FramePool};
use lpm::NextHop;
use wire::MacAddr;

/// Where a packet goes once re-routed: its next hop, logical output port and the link-layer
/// address of its gateway (`None`: to resolve).
pub(super) type Rerouted = (NextHop, u16, Option<MacAddr>);

/// Where a packet of the router's own that a state's option routes leaves: logical port
/// `port`, to the link-layer address `mac` of `gateway` (`None`: not resolved yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostVia {
    pub port: u16,
    pub mac: Option<MacAddr>,
    pub gateway: IpAddr,
}

/// The batch's route options: the scratch of the route options stage.
pub(super) struct RouteOptions {
    /// Each packet's option, by index in the batch (valid while `any`).
    via: Box<[Option<RouteOpt>; MAX_BATCH]>,
    /// Some packet of the batch has an option.
    pub any: bool,
    /// Some `out` rule has `route-to` (this batch's set): the send pass asks after the out
    /// pass whether the state it made routes the packet ([`Forwarder::reroute_after_out`]).
    pub out_rules: bool,
}

impl RouteOptions {
    pub fn new() -> RouteOptions {
        RouteOptions { via: Box::new([None; MAX_BATCH]), any: false, out_rules: false }
    }
}

impl Forwarder {
    /// Stage 4, before the route lookups (with a firewall): each packet whose state's rule
    /// routes it gets the gateway as the address to look up, and its option in `via`.
    #[inline(always)]
    pub(super) fn route_options(&mut self, pool: &FramePool, descs: &[FrameDesc]) {
        let Some(f) = &self.firewall else { return };
        self.route_opts.any = false;
        self.route_opts.out_rules = f.fw.routes_out();
        if f.fw.routes() {
            self.set_gateways(pool, descs);
        }
    }

    /// [`route_options`](Self::route_options) for a rule set with `route-to` or `reply-to`.
    #[cold]
    #[inline(never)]
    fn set_gateways(&mut self, pool: &FramePool, descs: &[FrameDesc]) {
        let Some(f) = &mut self.firewall else { return };
        f.fw.scan_orphans();
        let (mut key, mut tcp) = (PacketKey::ZERO, None);
        self.route_opts.via.fill(None);
        for (i, desc) in descs.iter().enumerate().take(MAX_BATCH) {
            let (l3, slot, v4, in_port) = match self.next[i] {
                Next::V4 { l3, slot, in_port } => (l3, slot, true, in_port),
                Next::V6 { l3, slot, in_port } => (l3, slot, false, in_port),
                _ => continue,
            };
            let frame = pool.frame(*desc);
            // A fragment's key (its datagram's ports, from the fragment table) is the in
            // pass's: fragments never take the quick loop.
            let fragment = v4 && frame.get(usize::from(l3)..).is_some_and(frags::is_fragment_v4);
            let key = if fragment {
                &f.keys[i]
            } else {
                keys::extract(frame, usize::from(l3), v4, in_port, &mut key, &mut tcp);
                &key
            };
            let Some(opt) = f.fw.route_option(key).filter(|o| o.af == key.af) else {
                continue;
            };
            let slot = usize::from(slot) % MAX_BATCH;
            match opt.af {
                Af::Inet => self.v4_dst[slot] = opt.gateway as u32,
                Af::Inet6 => self.v6_dst[slot] = opt.gateway,
            }
            self.route_opts.via[i] = Some(opt);
            self.route_opts.any = true;
        }
    }

    /// After the route lookups: a packet whose gateway the routing table reaches through
    /// another port than its rule names, or not at all, is dropped (`route_to`).
    #[cold]
    #[inline(never)]
    pub(super) fn check_route_options(&mut self) {
        for i in 0..MAX_BATCH {
            let Some(opt) = self.route_opts.via[i] else { continue };
            let nh = match self.next[i] {
                Next::V4 { slot, .. } => self.v4_nh[usize::from(slot) % MAX_BATCH],
                Next::V6 { slot, .. } => self.v6_nh[usize::from(slot) % MAX_BATCH],
                _ => continue,
            };
            let reached = nh.map(|id| self.fib.adj.get(id)).is_some_and(|adj| reaches(adj, opt));
            if !reached {
                self.next[i] = Next::Drop(DropReason::RouteTo);
            }
        }
    }

    /// After the out pass of packet `i` (its IP header at `l3`): when the state an `out`
    /// rule with `route-to` has just made routes it, where it goes instead (pf's pf_route
    /// from the out pass; pf's second out pass on the new interface finds the same floating
    /// state, so none is run here). Later packets of the flow are routed before the lookups.
    /// `None`: it stays where the routing table sent it.
    #[cold]
    #[inline(never)]
    pub(super) fn reroute_after_out(
        &mut self,
        pool: &FramePool,
        desc: FrameDesc,
        i: usize,
        l3: usize,
        v4: bool,
    ) -> Option<Result<Rerouted, DropReason>> {
        let i = i % MAX_BATCH;
        if self.route_opts.via[i].is_some() {
            return None;
        }
        let f = self.firewall.as_ref()?;
        let key = &f.keys[i];
        let opt = f.fw.route_option(key).filter(|o| o.af == key.af && !o.reply)?;
        let Some((id, adj)) = self.gateway_adjacency(opt) else {
            return Some(Err(DropReason::RouteTo));
        };
        let (id, adj) = match adj {
            Adjacency::Multipath { members, paths } => {
                self.path(pool, desc, l3, v4, members, paths)
            }
            adj => (id, adj),
        };
        self.route_opts.via[i] = Some(opt);
        self.route_opts.any = true;
        Some(match adj {
            Adjacency::Forward { port, mac } => Ok((id, port, Some(mac))),
            Adjacency::Unresolved { port } => Ok((id, port, None)),
            _ => Err(DropReason::RouteTo),
        })
    }

    /// The route to `opt`'s gateway, if the routing table reaches it where `opt` says.
    fn gateway_adjacency(&self, opt: RouteOpt) -> Option<(NextHop, Adjacency)> {
        let id = match opt.af {
            Af::Inet => self.fib.v4.lookup(opt.gateway as u32),
            Af::Inet6 => self.fib.v6.lookup(opt.gateway),
        }?;
        let adj = self.fib.adj.get(id);
        reaches(adj, opt).then_some((id, adj))
    }

    /// Where the router's own packet that `opt` routes leaves. A gateway reached through a
    /// group of paths is refused: the host stack's packets carry no flow hash here.
    pub(super) fn host_via(&self, opt: RouteOpt) -> Result<HostVia, DropReason> {
        let gateway = match opt.af {
            Af::Inet => std::net::Ipv4Addr::from(opt.gateway as u32).into(),
            Af::Inet6 => std::net::Ipv6Addr::from(opt.gateway).into(),
        };
        match self.gateway_adjacency(opt).map(|(_, adj)| adj) {
            Some(Adjacency::Forward { port, mac }) => Ok(HostVia { port, mac: Some(mac), gateway }),
            Some(Adjacency::Unresolved { port }) => Ok(HostVia { port, mac: None, gateway }),
            _ => Err(DropReason::RouteTo),
        }
    }

    /// The router's own frame in `desc`, which `via` routes: its link-layer header made for
    /// `via.port` (the gateway's address, the port's, its VLAN tag), and the physical port
    /// to send it by. `Err`: for the slow path, which resolves the gateway, or fragments a
    /// packet longer than the port's MTU.
    pub fn host_frame_via(
        &self,
        pool: &mut FramePool,
        desc: &mut FrameDesc,
        via: &HostVia,
    ) -> Result<u16, Punt> {
        let punt = Punt::Via { gateway: via.gateway, port: via.port };
        let (Some(mac), Some(&out)) = (via.mac, self.ports.output(via.port)) else {
            return Err(punt);
        };
        let Ok(l2) = wire::parse_l2(pool.frame(*desc)) else {
            return Err(punt);
        };
        let l3 = l2.l3_offset;
        if usize::from(desc.len).saturating_sub(l3) > usize::from(out.mtu) {
            return Err(punt);
        }
        if l3 == usize::from(out.hdr) {
            super::send::rewrite_l2_in_place(pool.frame_mut(*desc), &out, mac);
        } else if !super::send::write_l2(pool, desc, l3, &out, mac) {
            return Err(punt);
        }
        Ok(out.phys)
    }

    /// Why packet `i` goes to the slow path when the link-layer address of its next hop `id`
    /// on `port` is unknown: to resolve its option's gateway, if it has one, else the next
    /// hop. Out of line: the send pass's code stays as without `route-to`.
    #[inline(never)]
    pub(super) fn unresolved(&self, i: usize, id: NextHop, port: u16) -> Punt {
        let Some(opt) = self.route_opts.via[i % MAX_BATCH].filter(|_| self.route_opts.any) else {
            return Punt::Unresolved { next_hop: id, port };
        };
        let gateway = match opt.af {
            Af::Inet => std::net::Ipv4Addr::from(opt.gateway as u32).into(),
            Af::Inet6 => std::net::Ipv6Addr::from(opt.gateway).into(),
        };
        Punt::Via { gateway, port }
    }
}

/// Whether adjacency `adj` (the route to `opt`'s gateway) sends packets out where `opt`
/// says: on its port if it names one (a group of paths only if it names none).
fn reaches(adj: Adjacency, opt: RouteOpt) -> bool {
    match adj {
        Adjacency::Forward { port, .. } | Adjacency::Unresolved { port } => {
            opt.port.is_none_or(|p| p == port)
        }
        Adjacency::Multipath { .. } => opt.port.is_none(),
        Adjacency::Local | Adjacency::Blackhole | Adjacency::Unreachable => false,
    }
}
