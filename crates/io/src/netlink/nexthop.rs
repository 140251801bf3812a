//! rtnetlink nexthop objects (`RTM_NEWNEXTHOP`, `RTM_DELNEXTHOP`; Linux 5.3 and later, the
//! kernel's `include/uapi/linux/nexthop.h`): a checked parser that never panics, and the dump.
//! A route that names an object (`RTA_NH_ID`, what FRR's zebra installs by default) forwards
//! by it: changing the object moves every route that uses it at once.
//!
//! A message is an `nlmsghdr`, an `nhmsg` (8 bytes: family, scope, protocol, reserved,
//! flags) and attributes: `NHA_ID`; then one of `NHA_GATEWAY` + `NHA_OIF` (or `NHA_OIF`
//! alone: on-link), `NHA_BLACKHOLE` (a flag), or `NHA_GROUP`: an array of
//! `struct nexthop_grp` (id u32, weight u8 = weight - 1, weight_high u8, reserved u16), each
//! member a single next hop (groups do not nest).

use std::net::IpAddr;

use super::{NLMSG_HDRLEN, attr_u32, attrs, u16_at, u32_at};
use crate::netlink::route::{RouteNextHop, addr};

pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;
const RTM_GETNEXTHOP: u16 = 106;
const NHMSG_LEN: usize = 8;

const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
const NHA_ENCAP: u16 = 8;
const NHA_FDB: u16 = 11;
/// The size of one `struct nexthop_grp`.
const GROUP_ENTRY: usize = 8;

/// The multicast group of nexthop changes (a number past 31: joined with
/// `NETLINK_ADD_MEMBERSHIP`, not through `nl_groups`).
pub const RTNLGRP_NEXTHOP: u32 = 32;

/// What a nexthop object forwards to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NexthopKind {
    /// One next hop: a gateway on an interface, or on-link (no gateway).
    One(RouteNextHop),
    Blackhole,
    /// A multipath group: member ids and their weights (1-256; up to 65,536 since Linux 6.12,
    /// which is why a weight is not a `u16`).
    Group(Vec<(u32, u32)>),
    /// Something linerate cannot forward by (an encapsulation, a bridge FDB next hop).
    Unsupported(&'static str),
}

/// A parsed nexthop message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NexthopMessage {
    /// `RTM_NEWNEXTHOP` (true) or `RTM_DELNEXTHOP`.
    pub new: bool,
    pub id: u32,
    pub protocol: u8,
    pub kind: NexthopKind,
}

/// Why a message is not a nexthop message linerate can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NexthopParseError {
    #[error("message shorter than its headers")]
    Truncated,
    #[error("not a nexthop message (type {0})")]
    NotNexthop(u16),
    #[error("nexthop message without an id (NHA_ID)")]
    NoId,
    #[error("attribute {0} has the wrong length")]
    AttrLen(u16),
}

/// Whether a netlink message type is a nexthop message.
pub fn is_nexthop(ty: u16) -> bool {
    ty == RTM_NEWNEXTHOP || ty == RTM_DELNEXTHOP
}

fn group(p: &[u8]) -> Result<Vec<(u32, u32)>, NexthopParseError> {
    if !p.len().is_multiple_of(GROUP_ENTRY) {
        return Err(NexthopParseError::AttrLen(NHA_GROUP));
    }
    // The weight is one less than the weight, its high byte in what was reserved before
    // Linux 6.12 (zero there).
    Ok(p.chunks_exact(GROUP_ENTRY)
        .map(|e| (u32_at(e, 0), (u32::from(e[5]) << 8 | u32::from(e[4])) + 1))
        .collect())
}

/// Parses one whole netlink message (header included) as a nexthop message.
pub fn parse_nexthop(m: &[u8]) -> Result<NexthopMessage, NexthopParseError> {
    if m.len() < NLMSG_HDRLEN + NHMSG_LEN {
        return Err(NexthopParseError::Truncated);
    }
    let ty = u16_at(m, 4);
    if !is_nexthop(ty) {
        return Err(NexthopParseError::NotNexthop(ty));
    }
    let len = (u32_at(m, 0) as usize).min(m.len());
    if len < NLMSG_HDRLEN + NHMSG_LEN {
        return Err(NexthopParseError::Truncated);
    }
    let n = &m[NLMSG_HDRLEN..len];
    let family = n[0];
    let mut id = None;
    let mut hop = RouteNextHop { gateway: None, ifindex: 0, weight: 1 };
    let mut kind = None;
    for (ty, p) in attrs(&n[NHMSG_LEN..]) {
        match ty {
            NHA_ID => id = Some(attr_u32(p).ok_or(NexthopParseError::AttrLen(ty))?),
            NHA_OIF => hop.ifindex = attr_u32(p).ok_or(NexthopParseError::AttrLen(ty))?,
            NHA_GATEWAY => hop.gateway = Some(gateway(family, p)?),
            NHA_BLACKHOLE => kind = Some(NexthopKind::Blackhole),
            NHA_GROUP => kind = Some(NexthopKind::Group(group(p)?)),
            NHA_ENCAP => kind = Some(NexthopKind::Unsupported("an encapsulation (NHA_ENCAP)")),
            NHA_FDB => kind = Some(NexthopKind::Unsupported("a bridge FDB next hop (NHA_FDB)")),
            _ => {}
        }
    }
    Ok(NexthopMessage {
        new: ty == RTM_NEWNEXTHOP,
        id: id.ok_or(NexthopParseError::NoId)?,
        protocol: n[2],
        kind: kind.unwrap_or(NexthopKind::One(hop)),
    })
}

fn gateway(family: u8, p: &[u8]) -> Result<IpAddr, NexthopParseError> {
    addr(family, p, NHA_GATEWAY).map_err(|_| NexthopParseError::AttrLen(NHA_GATEWAY))
}

/// Dumps every nexthop object of the namespace, calling `each` with every message. A kernel
/// without nexthop objects (before 5.3) answers with an error, which is returned.
pub fn dump_nexthops(mut each: impl FnMut(&[u8])) -> std::io::Result<()> {
    let req = super::message(RTM_GETNEXTHOP, libc::NLM_F_DUMP as u16, &[0u8; NHMSG_LEN]);
    super::exchange_each(libc::NETLINK_ROUTE, &req, &mut each)
}

#[cfg(test)]
mod tests;
