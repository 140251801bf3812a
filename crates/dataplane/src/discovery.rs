//! ARP and Neighbor Discovery reception for the slow path: which messages may change the
//! neighbour cache, and the named reason for each one that may not.
//!
//! * NDP messages are validated first (RFC 4861 7.1.1, 7.1.2: [`wire::ndisc::parse_nd`]);
//!   an invalid one is dropped, not even copied to the host stack.
//! * Only on-link addresses are learnt: inside a connected prefix of the port the frame came
//!   in on, or already in the cache on that port (a next hop the router is resolving, such as
//!   a link-local gateway). Link-local addresses are per interface while the FIB is not, so
//!   they are never learnt from announcements.
//! * A Neighbor Solicitation teaches its source only when it targets the router (RFC 4861
//!   7.2.3); a Neighbor Advertisement never creates an entry and changes one only as 7.2.5
//!   allows ([`NeighbourTable::advert`](crate::neighbour::NeighbourTable::advert)).
//! * ARP (RFC 826 merge): a request for the router creates or updates its sender's entry,
//!   any other request or reply only updates an existing one.

use std::net::IpAddr;

use wire::ndisc::{NdError, NdMessage};
use wire::{ArpOperation, ArpPacket, Icmpv6Type, MacAddr};

use super::{SlowIo, SlowPath, owns_v6};
use crate::neighbour::{Advert, State};
use crate::ports::PortInfo;
use crate::punt::PuntedFrame;

/// Why an ARP or NDP message changed nothing in the neighbour cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reject {
    /// NDP that fails RFC 4861 7.1 validation (dropped).
    Nd(NdError),
    /// ARP that is not Ethernet/IPv4 or is truncated (dropped).
    ArpMalformed,
    /// Sender (ARP) or link-layer address option (NDP) not a unicast MAC, or ARP sender
    /// address unspecified (an RFC 5227 probe), multicast or broadcast.
    BadSender,
    /// The address to learn is outside every connected prefix of the receiving port.
    OffLink,
    /// The address to learn is link-local.
    LinkLocal,
    /// A solicitation for another node's address, or an ARP request for another address
    /// from a sender the cache does not hold.
    NotForUs,
    /// An advertisement or ARP reply for an address without an entry (RFC 4861 7.2.5).
    NoEntry,
    /// An advertisement that may not change its entry (static; no target link-layer address
    /// for an incomplete entry; a different one without the Override flag).
    NotOverriding,
    /// An advertisement or ARP packet claiming one of the router's own addresses.
    OwnAddress,
}

const OTHER: [Reject; 8] = [
    Reject::ArpMalformed,
    Reject::BadSender,
    Reject::OffLink,
    Reject::LinkLocal,
    Reject::NotForUs,
    Reject::NoEntry,
    Reject::NotOverriding,
    Reject::OwnAddress,
];

impl Reject {
    fn index(self) -> usize {
        match self {
            Reject::Nd(e) => NdError::ALL.iter().position(|&x| x == e).unwrap_or(0),
            other => NdError::ALL.len() + OTHER.iter().position(|&x| x == other).unwrap_or(0),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Reject::Nd(e) => e.name(),
            Reject::ArpMalformed => "arp_malformed",
            Reject::BadSender => "bad_sender",
            Reject::OffLink => "off_link",
            Reject::LinkLocal => "link_local",
            Reject::NotForUs => "not_for_us",
            Reject::NoEntry => "no_entry",
            Reject::NotOverriding => "not_overriding",
            Reject::OwnAddress => "own_address",
        }
    }
}

const REASONS: usize = NdError::ALL.len() + OTHER.len();

/// Counts of [`Reject`] reasons.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rejects([u64; REASONS]);

impl Rejects {
    pub fn add(&mut self, r: Reject) {
        self.0[r.index()] += 1;
    }

    pub fn get(&self, r: Reject) -> u64 {
        self.0[r.index()]
    }

    /// Every reason with its count, in a fixed order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let all = NdError::ALL.iter().map(|&e| Reject::Nd(e)).chain(OTHER);
        all.map(|r| (r.name(), self.get(r)))
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Whether `ip` is inside one of the port's prefixes.
fn on_link(p: &PortInfo, ip: IpAddr) -> bool {
    p.addresses.iter().any(|&(a, len)| match (a, ip) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            len == 0 || (u32::from(a) ^ u32::from(b)) >> (32 - u32::from(len)) == 0
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            len == 0 || (u128::from(a) ^ u128::from(b)) >> (128 - u32::from(len)) == 0
        }
        _ => false,
    })
}

impl SlowPath {
    fn reject(&mut self, r: Reject) {
        self.stats.rejects.add(r);
    }

    /// Whether announcements about `ip` received on port `port` may be learnt.
    fn learnable(&self, p: &PortInfo, port: u16, ip: IpAddr) -> Result<(), Reject> {
        if on_link(p, ip) || self.neigh.port(ip) == Some(port) {
            return Ok(());
        }
        match ip {
            IpAddr::V6(a) if a.is_unicast_link_local() => Err(Reject::LinkLocal),
            _ => Err(Reject::OffLink),
        }
    }

    /// ARP (RFC 826 "Packet Reception"): learn the sender as the merge rule allows, answer
    /// requests for the port's addresses, complete resolutions with replies.
    pub(super) fn arp(
        &mut self,
        io: &mut impl SlowIo,
        p: &PortInfo,
        msg: &PuntedFrame,
        l3: &[u8],
        now: u64,
    ) {
        let Ok(arp) = ArpPacket::new_checked(l3) else { return self.reject(Reject::ArpMalformed) };
        let (sip, smac) = (arp.sender_proto_addr(), arp.sender_hw_addr());
        let sender = IpAddr::V4(sip);
        let for_us = p.owns(IpAddr::V4(arp.target_proto_addr()));
        let verdict = if p.owns(sender) {
            Err(Reject::OwnAddress)
        } else if !smac.is_unicast()
            || sip.is_unspecified()
            || sip.is_broadcast()
            || sip.is_multicast()
        {
            Err(Reject::BadSender)
        } else {
            self.learnable(p, msg.in_port, sender)
        };
        let verdict = verdict.and_then(|()| match arp.operation() {
            ArpOperation::Reply => self
                .neigh
                .confirm(sender, smac, now, &mut self.actions)
                .then_some(())
                .ok_or(Reject::NoEntry),
            // The requester will talk to us next: worth an entry (RFC 826's merge).
            _ if for_us => {
                self.neigh.learn(sender, msg.in_port, smac, &mut self.actions);
                Ok(())
            }
            _ => self
                .neigh
                .update(sender, msg.in_port, smac, &mut self.actions)
                .then_some(())
                .ok_or(Reject::NotForUs),
        });
        match verdict {
            Ok(()) => self.sync(sender),
            Err(r) => self.reject(r),
        }
        if arp.operation() == ArpOperation::Request
            && for_us
            && let Ok(n) =
                wire::ndisc::arp_reply(&msg.frame, p.mac, arp.target_proto_addr(), &mut self.buf)
        {
            self.stats.arp_replies += 1;
            io.send_wire(msg.phys, &self.buf[..n]);
        }
        self.run_actions(io);
    }

    /// A Neighbor Solicitation or Advertisement (valid per RFC 4861 7.1) for the router.
    /// Returns whether the host stack should see it too.
    pub(super) fn ndp(
        &mut self,
        io: &mut impl SlowIo,
        p: &PortInfo,
        msg: &PuntedFrame,
        nd: &NdMessage,
        now: u64,
    ) -> bool {
        let res = if nd.kind == Icmpv6Type::NeighborSolicit {
            self.solicit(io, p, msg, nd)
        } else {
            self.advert(p, msg.in_port, nd, now)
        };
        if let Err(r) = res {
            self.reject(r);
        }
        self.run_actions(io);
        true
    }

    /// RFC 4861 7.2.3: answer a solicitation for one of the port's addresses, learning its
    /// source from the source link-layer address option (none in duplicate address detection
    /// from ::, and a unicast solicitation may leave it out).
    fn solicit(
        &mut self,
        io: &mut impl SlowIo,
        p: &PortInfo,
        msg: &PuntedFrame,
        nd: &NdMessage,
    ) -> Result<(), Reject> {
        if !owns_v6(p, nd.target) {
            return Err(Reject::NotForUs);
        }
        let advert = if p.owns(IpAddr::V6(nd.target)) || nd.target == super::link_local(p.mac) {
            wire::ndisc::neighbor_advert
        } else {
            wire::ndisc::anycast_neighbor_advert
        };
        if let Ok(n) = advert(&msg.frame, p.mac, nd.target, &mut self.buf) {
            self.stats.nd_adverts += 1;
            io.send_wire(msg.phys, &self.buf[..n]);
        }
        let (Some(mac), false) = (nd.source_ll, nd.src.is_unspecified()) else { return Ok(()) };
        let src = IpAddr::V6(nd.src);
        self.check_sender(p, msg.in_port, src, mac)?;
        self.neigh.learn(src, msg.in_port, mac, &mut self.actions);
        self.sync(src);
        Ok(())
    }

    /// RFC 4861 7.2.5: an advertisement updates an existing entry only.
    fn advert(&mut self, p: &PortInfo, port: u16, nd: &NdMessage, now: u64) -> Result<(), Reject> {
        let target = IpAddr::V6(nd.target);
        if let Some(mac) = nd.target_ll {
            self.check_sender(p, port, target, mac)?;
        } else if owns_v6(p, nd.target) {
            return Err(Reject::OwnAddress);
        } else {
            self.learnable(p, port, target)?;
        }
        match self.neigh.advert(
            target,
            nd.target_ll,
            nd.solicited(),
            nd.override_flag(),
            now,
            &mut self.actions,
        ) {
            Advert::NoEntry => Err(Reject::NoEntry),
            Advert::Ignored => Err(Reject::NotOverriding),
            Advert::Updated => {
                self.sync(target);
                Ok(())
            }
        }
    }

    /// The checks on an IPv6 address and link-layer address to learn.
    fn check_sender(
        &self,
        p: &PortInfo,
        port: u16,
        ip: IpAddr,
        mac: MacAddr,
    ) -> Result<(), Reject> {
        match ip {
            IpAddr::V6(a) if owns_v6(p, a) => Err(Reject::OwnAddress),
            _ if !mac.is_unicast() => Err(Reject::BadSender),
            _ => self.learnable(p, port, ip),
        }
    }

    /// Installs (or refreshes) the FIB entry of a neighbour whose cache entry has a MAC.
    pub(super) fn sync(&mut self, ip: IpAddr) {
        if let (Some((state, Some(mac))), Some(port)) = (self.neigh.get(ip), self.neigh.port(ip))
            && !matches!(state, State::Incomplete | State::Failed)
        {
            self.install(ip, port, mac);
        }
    }
}
