//! The slow path: everything a router does besides forwarding, on one thread of its own.
//!
//! It receives the frames the workers punt ([`crate::punt`]) and the frames the host stack
//! sends on its TAPs, and it owns the control-plane state the fast path only reads: the FIB
//! writer ([`FibControl`]) and the neighbour cache. Its work, per frame:
//!
//! * ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861): answers requests and
//!   solicitations for the router's addresses on the receiving interface, learns senders,
//!   resolves next hops on demand (queueing up to 8 packets per pending neighbour, so the first
//!   packets of a flow are not lost), ages entries and re-probes them, withdraws a neighbour
//!   that stops answering (its adjacency becomes unresolved again, in one atomic store). A
//!   resolved neighbour is installed in the FIB, so later packets never come here.
//! * ICMP: echo replies for the router's addresses; the errors the workers asked for (time
//!   exceeded, net unreachable, packet too big), and host unreachable for packets whose
//!   neighbour never answered, with the never-about-an-error rules of RFC 1812 4.3.2.7 /
//!   RFC 4443 2.4(e) ([`wire::icmp_reply::should_send_error`]); the workers rate-limit their
//!   errors, this thread its own.
//! * IPv4 fragmentation of packets larger than the output MTU without DF (RFC 791).
//! * Host stack: what is addressed to the router and is not answered here (TCP, UDP, other
//!   ICMP), copies of ARP and NDP, broadcast and multicast go up the interface's TAP, untagged;
//!   what the kernel sends on a TAP goes out of the interface (tagged for a sub-interface),
//!   except its ARP replies and solicited advertisements for addresses this thread already
//!   answers (one answer per request).
//!
//! All I/O goes through [`SlowIo`], so this is tested with in-memory frames.

use std::net::{IpAddr, Ipv6Addr};

use crate::neighbour::{self, Action, NeighbourTable, Send, State};
use io::ratelimit::TokenBucket;
use wire::icmp_reply::{self, IcmpError};
use wire::{
    ArpOperation, ArpPacket, EtherType, Icmpv6Packet, Icmpv6Type, IpProtocol, Ipv4Packet,
    Ipv6Packet, MacAddr, parse_l2,
};

use crate::fib::FibControl;
use crate::ports::PortInfo;
use crate::punt::{Punt, PuntedFrame};

#[path = "discovery.rs"]
mod discovery;
use crate::router_adv::{AdvertSettings, Advertiser};
pub use discovery::{Reject, Rejects};

/// Where the slow path's frames go.
pub trait SlowIo {
    /// Sends a complete frame (with its 802.1Q tag if any) on physical port `phys`.
    fn send_wire(&mut self, phys: u16, frame: &[u8]);
    /// Hands an untagged frame to the host stack through logical port `port`'s TAP.
    fn send_host(&mut self, port: u16, frame: &[u8]);
    /// Sends a frame the host stack sent on logical port `port` (`untagged`: as it came,
    /// `frame`: with the port's tag if any) on physical port `phys`: with a firewall, through
    /// the worker of its flow ([`crate::host_out`]).
    fn send_from_host(&mut self, port: u16, phys: u16, untagged: &[u8], frame: &[u8]) {
        let _ = (port, untagged);
        self.send_wire(phys, frame);
    }
}

/// What the slow path did, for `linerate show` and `top`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlowStats {
    pub arp_replies: u64,
    pub arp_requests: u64,
    pub nd_adverts: u64,
    pub nd_solicits: u64,
    /// Router Advertisements sent (RFC 4861 6.2) and valid Router Solicitations received.
    pub router_adverts: u64,
    pub router_solicits: u64,
    pub echo_replies: u64,
    pub icmp_errors: u64,
    /// Errors not sent: rate limit, or the RFC rules (no error about an error, ...).
    pub icmp_suppressed: u64,
    /// Of `icmp_errors`: the destination unreachables of `block return` / `return-icmp`.
    pub filter_unreachables: u64,
    /// TCP resets sent for `block return` / `return-rst`.
    pub filter_resets: u64,
    /// Resets not sent: the segment gets none (a reset, a fragment, to a group address).
    pub filter_resets_suppressed: u64,
    pub resolved: u64,
    pub resolve_failed: u64,
    /// Packets sent after waiting for resolution.
    pub sent_after_resolution: u64,
    /// Packets dropped while waiting (queue full, table full, resolution failed, evicted).
    pub neighbour_drops: u64,
    /// Neighbour entries removed to make room for new ones (`router.max_neighbours`).
    pub neighbour_evictions: u64,
    /// Neighbours forgotten because their port's link went down (static ones stay).
    pub neighbours_flushed: u64,
    /// New neighbours refused: the cache was full of entries that may not be evicted.
    pub neighbour_table_full: u64,
    /// Resolved neighbours the FIB could not take (next-hop ids or LPM groups exhausted):
    /// their packets keep taking the slow path.
    pub fib_full: u64,
    /// ARP and NDP messages that changed nothing, by reason.
    pub rejects: Rejects,
    pub fragments: u64,
    pub to_host: u64,
    pub from_host: u64,
    /// Frames for the router nobody takes (no host stack, unparsable, ...).
    pub local_drops: u64,
    /// ICMP and ICMPv6 redirects to the router, kept from its host stack: a router does not
    /// take routes from redirects (RFC 1812 4.3.3.2, RFC 4861 8), and a host stack that did
    /// would send the router's own traffic (BGP, ssh) wherever a neighbour on the link said.
    pub redirects_ignored: u64,
    /// Router Advertisements from other routers, kept from the host stack for the same
    /// reason: the kernel behind a TAP (`accept_ra` on, as a host) would take a default
    /// route and addresses from any neighbour's, and `[router.kernel_routes]` mirror it.
    pub router_adverts_ignored: u64,
    /// Punted or host frames naming a port that does not exist, or whose L2 header does not
    /// parse: dropped.
    pub invalid: u64,
}

/// A packet waiting for its next hop's address: TTL already decremented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    frame: Vec<u8>,
    /// Output logical port.
    port: u16,
    /// Where it came from, for a host unreachable error.
    in_port: u16,
}

/// How often REACHABLE-turned-STALE entries are re-probed, ns (RFC 4861 REACHABLE_TIME).
const PROBE_EVERY_NS: u64 = 30_000_000_000;

pub struct SlowPath {
    ctl: FibControl,
    ports: Vec<PortInfo>,
    neigh: NeighbourTable<Pending>,
    host_stack: bool,
    icmp_limit: TokenBucket,
    pub stats: SlowStats,
    actions: Vec<Action<Pending>>,
    buf: Vec<u8>,
    next_probe: u64,
    /// The time of the call being handled (`handle`, `tick`): the rate limiter's clock.
    now: u64,
    /// Router advertisements, per logical port (`None`: the port sends none).
    adverts: Vec<Option<Advertiser>>,
}

impl SlowPath {
    /// `icmp_per_second` bounds the errors this thread originates (host unreachable).
    pub fn new(
        ctl: FibControl,
        ports: Vec<PortInfo>,
        host_stack: bool,
        icmp_per_second: u64,
    ) -> SlowPath {
        Self::with_max_neighbours(
            ctl,
            ports,
            host_stack,
            icmp_per_second,
            neighbour::Config::default().max_entries,
        )
    }

    /// [`new`](Self::new) with room for `max_neighbours` neighbour entries
    /// (`router.max_neighbours`).
    pub fn with_max_neighbours(
        ctl: FibControl,
        ports: Vec<PortInfo>,
        host_stack: bool,
        icmp_per_second: u64,
        max_neighbours: usize,
    ) -> SlowPath {
        let neigh = NeighbourTable::new(neighbour::Config {
            max_entries: max_neighbours,
            ..neighbour::Config::default()
        });
        let actions = Vec::new();
        SlowPath {
            ctl,
            ports,
            neigh,
            host_stack,
            icmp_limit: TokenBucket::new(icmp_per_second, (icmp_per_second / 10).max(1)),
            stats: SlowStats::default(),
            actions,
            buf: vec![0; 2048],
            next_probe: PROBE_EVERY_NS,
            now: 0,
            adverts: Vec::new(),
        }
    }

    /// Records a static neighbour (from the config): permanent in the cache, already in the
    /// FIB.
    pub fn add_static(&mut self, ip: IpAddr, port: u16, mac: MacAddr) {
        self.neigh.add_static(ip, port, mac, &mut self.actions);
        self.actions.clear();
    }

    /// Makes `ip` a static neighbour on `port` at `mac` now (a reload): permanent in the
    /// cache, its host route and every gateway through it resolved in the FIB. Packets that
    /// waited for it leave on the next [`tick`](Self::tick). On a FIB error nothing changed.
    pub fn set_static(
        &mut self,
        ip: IpAddr,
        port: u16,
        mac: MacAddr,
    ) -> Result<(), crate::fib::FibError> {
        self.ctl.set_neighbour(ip, port, mac)?;
        self.neigh.add_static(ip, port, mac, &mut self.actions);
        Ok(())
    }

    /// Forgets the static neighbour `ip` (a reload): its host route goes and the next packet
    /// for it resolves it by ARP/NDP like any other.
    pub fn remove_static(&mut self, ip: IpAddr) {
        self.neigh.remove(ip, &mut self.actions);
        self.ctl.unset_neighbour(ip);
    }

    /// An address the host stack added to logical port `port`'s TAP (a VRRP daemon's virtual
    /// address, keepalived's): from now on the router answers ARP and NDP for it on the port
    /// and takes the packets to it, until it is removed. Returns whether it is new.
    pub fn add_address(
        &mut self,
        port: u16,
        addr: IpAddr,
        prefix_len: u8,
    ) -> Result<bool, crate::fib::FibError> {
        let Some(p) = self.ports.get_mut(usize::from(port)) else { return Ok(false) };
        if p.owns(addr) {
            return Ok(false);
        }
        self.ctl.add_local(addr)?;
        p.addresses.push((addr, prefix_len));
        Ok(true)
    }

    /// An address [`add_address`](Self::add_address) added, gone from the TAP: the router no
    /// longer answers for it, and packets to it are forwarded (to the box that holds it now).
    pub fn remove_address(
        &mut self,
        port: u16,
        addr: IpAddr,
    ) -> Result<bool, crate::fib::FibError> {
        let Some(p) = self.ports.get_mut(usize::from(port)) else { return Ok(false) };
        let before = p.addresses.len();
        p.addresses.retain(|(a, _)| *a != addr);
        if p.addresses.len() == before {
            return Ok(false);
        }
        if !self.ports.iter().any(|p| p.owns(addr)) {
            self.ctl.remove_local(addr)?;
        }
        Ok(true)
    }

    /// Logical port `port`'s link went down: the neighbours learned on it are forgotten (as
    /// the kernel flushes a device's neighbours when its carrier goes; static ones stay), so
    /// that they are resolved again when the link returns, perhaps behind another MAC.
    /// Returns how many.
    pub fn flush_port(&mut self, port: u16) -> usize {
        let gone: Vec<IpAddr> = self
            .neigh
            .entries()
            .filter(|&(_, st, _, p, _)| p == port && st != crate::neighbour::State::Permanent)
            .map(|(ip, ..)| ip)
            .collect();
        for &ip in &gone {
            self.neigh.remove(ip, &mut self.actions);
            self.ctl.unset_neighbour(ip);
        }
        self.actions.clear();
        self.stats.neighbours_flushed += gone.len() as u64;
        gone.len()
    }

    /// Sends router advertisements on logical port `port` as `ra` says, the first on the
    /// next [`tick`](Self::tick), and answers its Router Solicitations.
    pub fn advertise(&mut self, port: u16, ra: &AdvertSettings, seed: u64) {
        if self.adverts.len() <= port as usize {
            self.adverts.resize(port as usize + 1, None);
        }
        self.adverts[port as usize] = Some(Advertiser::new(ra, seed, self.now));
    }

    /// The router stops: a final advertisement with a Router Lifetime of 0 on every port that
    /// advertises (RFC 4861 6.2.5), so hosts stop using it as a default router at once.
    pub fn stop(&mut self, io: &mut impl SlowIo) {
        for port in 0..self.adverts.len() {
            if let Some(mut ra) = self.adverts[port].as_ref().map(|a| a.advert.clone()) {
                ra.router_lifetime = 0;
                self.send_advert(io, port, &ra);
            }
        }
    }

    fn send_adverts(&mut self, io: &mut impl SlowIo, now: u64) {
        for port in 0..self.adverts.len() {
            let Some(a) = self.adverts[port].as_mut().filter(|a| a.due(now)) else { continue };
            a.sent(now);
            let ra = a.advert.clone();
            self.send_advert(io, port, &ra);
        }
    }

    /// Sends `ra` on logical port `port` from its link-local address.
    fn send_advert(
        &mut self,
        io: &mut impl SlowIo,
        port: usize,
        ra: &wire::router_advert::RouterAdvert,
    ) {
        let Some(p) = self.ports.get(port) else { return };
        let mut buf = vec![0u8; ra.frame_len().max(64)];
        if let Ok(n) = wire::router_advert::router_advert(p.mac, link_local(p.mac), ra, &mut buf) {
            self.stats.router_adverts += 1;
            io.send_wire(p.phys, &tag(p, &buf[..n]));
        }
    }

    pub fn fib(&self) -> &FibControl {
        &self.ctl
    }

    /// The FIB writer, for the other sources of routes: the kernel's table, a reload of
    /// the static routes.
    pub fn fib_mut(&mut self) -> &mut FibControl {
        &mut self.ctl
    }

    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    /// Neighbour entries: address, state, MAC, logical port.
    pub fn neighbours(&self) -> Vec<(IpAddr, State, Option<MacAddr>, Option<u16>)> {
        let mut v: Vec<_> = self
            .neigh
            .entries()
            .map(|(ip, state, mac, port, _)| (ip, state, mac, Some(port)))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Announces the router, so neighbours update stale caches at once: a gratuitous ARP
    /// (RFC 5227 3: an ARP request for its own address) for every IPv4 address, an
    /// unsolicited Neighbor Advertisement (RFC 4861 7.2.6) for every IPv6 address.
    pub fn start(&mut self, io: &mut impl SlowIo) {
        for p in &self.ports {
            for &(a, _) in &p.addresses {
                let built = match a {
                    IpAddr::V4(a) => {
                        self.stats.arp_requests += 1;
                        wire::ndisc::arp_request(p.mac, a, a, None, &mut self.buf)
                    }
                    IpAddr::V6(a) => {
                        self.stats.nd_adverts += 1;
                        wire::ndisc::unsolicited_advert(p.mac, a, &mut self.buf)
                    }
                };
                if let Ok(n) = built {
                    io.send_wire(p.phys, &tag(p, &self.buf[..n]));
                }
            }
        }
    }

    /// Handles one punted frame at `now` (ns, monotonic).
    pub fn handle(&mut self, io: &mut impl SlowIo, msg: PuntedFrame, now: u64) {
        self.now = now;
        match msg.punt {
            Punt::Local => self.local(io, &msg, now),
            Punt::Error(err) => self.error(io, &msg.frame, msg.phys, msg.in_port, err, false),
            Punt::Reset { ttl } => self.reset(io, &msg.frame, msg.phys, msg.in_port, ttl),
            Punt::Unresolved { next_hop, port } => {
                let Some(ip) = self.next_hop_address(next_hop, port, &msg.frame) else {
                    self.stats.neighbour_drops += 1;
                    return;
                };
                self.resolve_and_send(io, msg, ip, port, now);
            }
            Punt::Via { gateway, port } => self.resolve_and_send(io, msg, gateway, port, now),
            Punt::Fragment { port, mac } => {
                self.transmit(io, Pending { frame: msg.frame, port, in_port: msg.in_port }, mac);
            }
        }
    }

    /// Sends a punted frame to neighbour `ip` on `port` once its link-layer address is
    /// known: now, or queued while it is resolved.
    fn resolve_and_send(
        &mut self,
        io: &mut impl SlowIo,
        msg: PuntedFrame,
        ip: IpAddr,
        port: u16,
        now: u64,
    ) {
        let pkt = Pending { frame: msg.frame, port, in_port: msg.in_port };
        match self.neigh.send(ip, port, pkt, now, &mut self.actions) {
            Send::Now(mac, pkt) => {
                // Known here but not (or no longer) in the FIB: install it again.
                self.install(ip, port, mac);
                self.transmit(io, pkt, mac);
            }
            Send::Queued => {}
            Send::Dropped(_) => self.stats.neighbour_drops += 1,
        }
        self.run_actions(io);
    }

    /// Timers: request retransmissions, failures, and the periodic re-probe of entries.
    pub fn tick(&mut self, io: &mut impl SlowIo, now: u64) {
        self.now = now;
        self.neigh.tick(now, &mut self.actions);
        if now >= self.next_probe {
            self.neigh.probe_stale(now, &mut self.actions);
            self.next_probe = now + PROBE_EVERY_NS;
        }
        self.run_actions(io);
        self.send_adverts(io, now);
    }

    /// A frame the host stack sent on logical port `port`'s TAP.
    pub fn from_host(&mut self, io: &mut impl SlowIo, port: u16, frame: &[u8]) {
        let Some(p) = self.ports.get(port as usize) else {
            self.stats.invalid += 1;
            return;
        };
        if self.answered_here(p, frame) {
            return;
        }
        self.stats.from_host += 1;
        let tagged = tag(p, frame);
        io.send_from_host(port, p.phys, frame, &tagged);
    }

    /// Whether `frame` (from the host) is an ARP reply or a solicited neighbour advertisement
    /// for one of the port's addresses: this thread answered the request already.
    fn answered_here(&self, p: &PortInfo, frame: &[u8]) -> bool {
        let Ok(l2) = parse_l2(frame) else { return false };
        let l3 = &frame[l2.l3_offset..];
        match l2.ethertype {
            // A gratuitous reply (a VRRP daemon's announcement of its address) is no answer.
            EtherType::Arp => ArpPacket::new_checked(l3).is_ok_and(|a| {
                a.operation() == ArpOperation::Reply
                    && p.owns(IpAddr::V4(a.sender_proto_addr()))
                    && a.target_proto_addr() != a.sender_proto_addr()
            }),
            EtherType::Ipv6 => {
                let Ok(ip) = Ipv6Packet::new_checked(l3) else { return false };
                if ip.next_header() != IpProtocol::Icmpv6 {
                    return false;
                }
                let Ok(icmp) = Icmpv6Packet::new_checked(&l3[40..]) else { return false };
                icmp.msg_type() == Icmpv6Type::NeighborAdvert
                    && icmp.rest_of_header() & wire::ndisc::na_flags::SOLICITED != 0
                    && icmp.ndp_target_addr().is_some_and(|t| owns_v6(p, t))
            }
            _ => false,
        }
    }

    /// The address to resolve for a packet punted as unresolved: the gateway its next-hop id
    /// stands for, or, on a connected prefix, its own destination.
    fn next_hop_address(&self, id: lpm::NextHop, port: u16, frame: &[u8]) -> Option<IpAddr> {
        if let Some(gw) = self.ctl.gateway_of(id) {
            return Some(gw);
        }
        if self.ctl.connected_port(id) != Some(port) {
            return None;
        }
        let l2 = parse_l2(frame).ok()?;
        let l3 = &frame[l2.l3_offset..];
        match l2.ethertype {
            EtherType::Ipv4 => Ipv4Packet::new_checked(l3).ok().map(|ip| IpAddr::V4(ip.dst_addr())),
            EtherType::Ipv6 => Ipv6Packet::new_checked(l3).ok().map(|ip| IpAddr::V6(ip.dst_addr())),
            _ => None,
        }
    }

    fn install(&mut self, ip: IpAddr, port: u16, mac: MacAddr) {
        if self.ctl.neighbour(ip) != Some((port, mac))
            && self.ctl.set_neighbour(ip, port, mac).is_err()
        {
            // The packets keep taking the slow path.
            self.stats.fib_full += 1;
        }
    }

    fn run_actions(&mut self, io: &mut impl SlowIo) {
        self.stats.neighbour_evictions = self.neigh.evictions();
        self.stats.neighbour_table_full = self.neigh.table_full();
        while let Some(action) = self.actions.pop() {
            match action {
                Action::SendRequest(ip, unicast) => self.request(io, ip, unicast),
                Action::Resolved(ip, mac, pkts) => {
                    self.stats.resolved += 1;
                    if let Some(port) = self.neigh.port(ip) {
                        self.install(ip, port, mac);
                    }
                    for p in pkts {
                        self.stats.sent_after_resolution += 1;
                        self.transmit(io, p, mac);
                    }
                }
                Action::Failed(ip, pkts) => {
                    self.stats.resolve_failed += 1;
                    self.ctl.unset_neighbour(ip);
                    for p in pkts {
                        self.stats.neighbour_drops += 1;
                        let phys = self.ports.get(p.in_port as usize).map_or(0, |x| x.phys);
                        self.error(
                            io,
                            &p.frame,
                            phys,
                            p.in_port,
                            IcmpError::AddressUnreachable,
                            true,
                        );
                    }
                }
                Action::Evicted(ip, pkts) => {
                    self.ctl.unset_neighbour(ip);
                    self.stats.neighbour_drops += pkts.len() as u64;
                }
            }
        }
    }

    /// Sends an ARP request or a neighbour solicitation for `ip` (broadcast / multicast, or
    /// unicast to re-check a cached MAC).
    fn request(&mut self, io: &mut impl SlowIo, ip: IpAddr, unicast: Option<MacAddr>) {
        let Some(p) = self.neigh.port(ip).and_then(|port| self.ports.get(port as usize)) else {
            return;
        };
        let n = match ip {
            IpAddr::V4(target) => {
                let Some(src) = p.ipv4() else { return };
                self.stats.arp_requests += 1;
                wire::ndisc::arp_request(p.mac, src, target, unicast, &mut self.buf)
            }
            IpAddr::V6(target) => {
                let src = p.ipv6().unwrap_or_else(|| link_local(p.mac));
                self.stats.nd_solicits += 1;
                wire::ndisc::neighbor_solicit(p.mac, src, target, unicast, &mut self.buf)
            }
        };
        if let Ok(n) = n {
            let frame = tag(p, &self.buf[..n]);
            io.send_wire(p.phys, &frame);
        }
    }

    /// Sends a routed packet to `mac` on its output port: new L2 header (with the port's tag),
    /// fragmented if larger than the port's MTU and allowed to be.
    fn transmit(&mut self, io: &mut impl SlowIo, pkt: Pending, mac: MacAddr) {
        let (Some(p), Ok(l2)) = (self.ports.get(pkt.port as usize), parse_l2(&pkt.frame)) else {
            self.stats.invalid += 1;
            return;
        };
        let frame = with_l2(p, mac, &pkt.frame, l2.l3_offset);
        let hdr = frame.len() - (pkt.frame.len() - l2.l3_offset);
        let ip_len = ip_total_len(&frame[hdr..]).unwrap_or(frame.len() - hdr);
        if ip_len <= usize::from(p.mtu) {
            return io.send_wire(p.phys, &frame);
        }
        let mut pieces = Vec::new();
        match wire::fragment::fragment_ipv4(&frame, hdr, usize::from(p.mtu), &mut pieces) {
            Ok(_) => {
                for f in &pieces {
                    self.stats.fragments += 1;
                    io.send_wire(p.phys, f);
                }
            }
            Err(_) => {
                let err = IcmpError::PacketTooBig { mtu: u32::from(p.mtu) };
                let phys = self.ports.get(pkt.in_port as usize).map_or(0, |x| x.phys);
                self.stats.neighbour_drops += 1;
                self.error(io, &pkt.frame, phys, pkt.in_port, err, true);
            }
        }
    }

    /// Sends ICMP error `err` about `frame` (received on logical port `in_port`) back to its
    /// sender, from the router's address on that port. `limit`: this thread's own errors go
    /// through its rate limit (the workers' are limited already).
    fn error(
        &mut self,
        io: &mut impl SlowIo,
        frame: &[u8],
        phys: u16,
        in_port: u16,
        err: IcmpError,
        limit: bool,
    ) {
        if !icmp_reply::should_send_error(frame, err) || (limit && !self.icmp_limit.allow(self.now))
        {
            self.stats.icmp_suppressed += 1;
            return;
        }
        let Some(p) = self.ports.get(in_port as usize) else {
            self.stats.invalid += 1;
            return;
        };
        let v4 = parse_l2(frame).is_ok_and(|l2| l2.ethertype == EtherType::Ipv4);
        let src = if v4 {
            p.ipv4().or_else(|| self.ports.iter().find_map(PortInfo::ipv4)).map(IpAddr::V4)
        } else {
            Some(IpAddr::V6(p.ipv6().unwrap_or_else(|| link_local(p.mac))))
        };
        let Some(src) = src else {
            self.stats.icmp_suppressed += 1;
            return;
        };
        if let Ok(n) = icmp_reply::icmp_error(frame, err, src, p.mac, &mut self.buf) {
            self.stats.icmp_errors += 1;
            self.stats.filter_unreachables += u64::from(matches!(err, IcmpError::Refused { .. }));
            io.send_wire(phys, &self.buf[..n]);
        }
    }

    /// Answers the TCP segment in `frame` (received on logical port `in_port`), which a
    /// `block return` rule refused, with a reset from its destination, back to its sender
    /// ([`wire::tcp_reset`]; the worker applied the rate limit).
    fn reset(&mut self, io: &mut impl SlowIo, frame: &[u8], phys: u16, in_port: u16, ttl: u8) {
        let Some(p) = self.ports.get(in_port as usize) else {
            self.stats.invalid += 1;
            return;
        };
        match wire::tcp_reset::tcp_reset(frame, ttl, p.mac, &mut self.buf) {
            Ok(n) => {
                self.stats.filter_resets += 1;
                io.send_wire(phys, &self.buf[..n]);
            }
            Err(_) => self.stats.filter_resets_suppressed += 1,
        }
    }

    /// A frame for the router itself.
    fn local(&mut self, io: &mut impl SlowIo, msg: &PuntedFrame, now: u64) {
        let frame = &msg.frame[..];
        let (Some(p), Ok(l2)) = (self.ports.get(msg.in_port as usize).cloned(), parse_l2(frame))
        else {
            self.stats.invalid += 1;
            return;
        };
        let l3 = &frame[l2.l3_offset..];
        match host_config_message(l2.ethertype, l3) {
            Some(HostConfig::Redirect) => return self.stats.redirects_ignored += 1,
            Some(HostConfig::RouterAdvert) => return self.stats.router_adverts_ignored += 1,
            None => {}
        }
        let mut to_host = true;
        match l2.ethertype {
            EtherType::Arp => self.arp(io, &p, msg, l3, now),
            EtherType::Ipv4 => {
                if let Ok(ip) = Ipv4Packet::new_checked(l3)
                    && p.owns(IpAddr::V4(ip.dst_addr()))
                    && ip.protocol() == IpProtocol::Icmp
                    && let Ok(n) = icmp_reply::echo_reply(frame, p.mac, &mut self.buf)
                {
                    self.stats.echo_replies += 1;
                    io.send_wire(msg.phys, &self.buf[..n]);
                    to_host = false;
                }
            }
            EtherType::Ipv6 => to_host = self.ipv6_local(io, &p, msg, l3, now),
            _ => {}
        }
        if !to_host {
            return;
        }
        if self.host_stack {
            self.stats.to_host += 1;
            io.send_host(msg.in_port, &untag(frame, l2.l3_offset));
        } else if l2.ethertype != EtherType::Arp {
            self.stats.local_drops += 1;
        }
    }

    /// IPv6 for the router: neighbour discovery and echo. Returns whether the host stack
    /// should see the frame too (not when it is an invalid NDP message).
    fn ipv6_local(
        &mut self,
        io: &mut impl SlowIo,
        p: &PortInfo,
        msg: &PuntedFrame,
        l3: &[u8],
        now: u64,
    ) -> bool {
        match wire::router_advert::parse_router_solicit(l3) {
            // RFC 4861 6.2.6: answered by bringing the port's next advertisement forward.
            Ok(Some(_)) => {
                self.stats.router_solicits += 1;
                if let Some(a) = self.adverts.get_mut(msg.in_port as usize).and_then(Option::as_mut)
                {
                    a.solicited(now);
                }
                return self.host_stack;
            }
            Err(e) => {
                self.stats.rejects.add(Reject::Nd(e));
                return false;
            }
            Ok(None) => {}
        }
        match wire::ndisc::parse_nd(l3) {
            // Handled here: a copy goes up only when there is a host stack (not a local drop).
            Ok(Some(nd)) => return self.ndp(io, p, msg, &nd, now) && self.host_stack,
            Err(e) => {
                self.stats.rejects.add(Reject::Nd(e));
                return false;
            }
            Ok(None) => {}
        }
        let Ok(ip) = Ipv6Packet::new_checked(l3) else { return true };
        if ip.next_header() != IpProtocol::Icmpv6 {
            return true;
        }
        let Ok(icmp) = Icmpv6Packet::new_checked(ip.payload()) else { return true };
        let anycast = || {
            self.ports.iter().any(|q| {
                q.addresses.iter().any(|&(a, len)| is_subnet_router_anycast(a, len, ip.dst_addr()))
            })
        };
        if icmp.msg_type() != Icmpv6Type::EchoRequest || !(owns_v6(p, ip.dst_addr()) || anycast()) {
            return true;
        }
        if let Ok(n) = icmp_reply::echo_reply(&msg.frame, p.mac, &mut self.buf) {
            self.stats.echo_replies += 1;
            io.send_wire(msg.phys, &self.buf[..n]);
        }
        false
    }
}

/// Whether `dst` is the Subnet-Router anycast address of the prefix of `a/len` (RFC 4291
/// 2.6.1): the router answers pings to it (the kernel behind the TAP, a host, would not).
fn is_subnet_router_anycast(a: IpAddr, len: u8, dst: Ipv6Addr) -> bool {
    let IpAddr::V6(a) = a else { return false };
    crate::ports::subnet_router_anycast(u128::from(a), len) == Some(u128::from(dst))
}

/// The port's addresses plus its EUI-64 link-local address (RFC 4291 2.5.6, appendix A),
/// which the kernel also gives the port's TAP, and its prefixes' Subnet-Router anycast
/// addresses (solicitations for them are answered too).
fn owns_v6(p: &PortInfo, a: Ipv6Addr) -> bool {
    p.owns(IpAddr::V6(a))
        || a == link_local(p.mac)
        || p.addresses.iter().any(|&(b, len)| is_subnet_router_anycast(b, len, a))
}

/// fe80::/64 with the modified EUI-64 interface identifier of `mac`.
pub fn link_local(mac: MacAddr) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 0x02,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

fn ip_total_len(l3: &[u8]) -> Option<usize> {
    match l3.first()? >> 4 {
        4 => Ipv4Packet::new_checked(l3).ok().map(|ip| usize::from(ip.total_len())),
        6 => Ipv6Packet::new_checked(l3).ok().map(|ip| 40 + usize::from(ip.payload_len())),
        _ => None,
    }
}

/// `frame` (L3 at `l3`) with a new L2 header: to `dst` from the port's MAC, with the port's
/// tag if it is a sub-interface.
fn with_l2(p: &PortInfo, dst: MacAddr, frame: &[u8], l3: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len() + 4);
    out.extend_from_slice(&dst.0);
    out.extend_from_slice(&p.mac.0);
    if let Some(vid) = p.vlan {
        out.extend_from_slice(&[0x81, 0x00]);
        out.extend_from_slice(&(vid & 0xfff).to_be_bytes());
    }
    out.extend_from_slice(&frame[l3 - 2..]);
    out
}

/// An untagged frame with the port's tag inserted if it is a sub-interface.
fn tag(p: &PortInfo, frame: &[u8]) -> Vec<u8> {
    match p.vlan {
        Some(_) if frame.len() >= 14 => {
            let dst = MacAddr(frame[0..6].try_into().unwrap_or([0; 6]));
            with_l2(p, dst, frame, 14)
        }
        _ => frame.to_vec(),
    }
}

/// A message that configures a host, which the router's host stack must not take.
enum HostConfig {
    /// An ICMP redirect (type 5, a first fragment or whole) or an ICMPv6 one (type 137).
    Redirect,
    /// An ICMPv6 Router Advertisement (type 134).
    RouterAdvert,
}

/// Whether `l3` is a [`HostConfig`] message (ICMPv6 behind any extension headers).
fn host_config_message(ethertype: EtherType, l3: &[u8]) -> Option<HostConfig> {
    match ethertype {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(l3).ok()?;
            let redirect = ip.protocol() == IpProtocol::Icmp
                && ip.frag_offset() == 0
                && ip.payload().first() == Some(&5);
            redirect.then_some(HostConfig::Redirect)
        }
        EtherType::Ipv6 => match Ipv6Packet::new_checked(l3).ok()?.upper_layer() {
            Ok((IpProtocol::Icmpv6, at)) => match l3.get(at) {
                Some(137) => Some(HostConfig::Redirect),
                Some(134) => Some(HostConfig::RouterAdvert),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// The frame with its VLAN tags removed (what a TAP, an untagged interface, carries).
fn untag(frame: &[u8], l3: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len());
    out.extend_from_slice(&frame[..12]);
    out.extend_from_slice(&frame[l3 - 2..]);
    out
}
