//! rtnetlink route messages (`RTM_NEWROUTE`, `RTM_DELROUTE`; rtnetlink(7), the kernel's
//! `include/uapi/linux/rtnetlink.h`): a checked parser that never panics, and the socket that
//! dumps a routing table and then follows its changes (the route multicast groups
//! `RTNLGRP_IPV4_ROUTE` and `RTNLGRP_IPV6_ROUTE`).
//!
//! A message is an `nlmsghdr` (16 bytes), an `rtmsg` (12 bytes: family, destination and
//! source prefix lengths, TOS, table, protocol, scope, type, flags) and attributes:
//! `RTA_DST`, `RTA_TABLE` (the table id when it does not fit `rtm_table`), `RTA_PRIORITY`
//! (the metric), `RTA_GATEWAY` and `RTA_OIF` for one next hop, or `RTA_MULTIPATH`: a list of
//! `rtnexthop` (length u16, flags u8, hops u8 = weight - 1, ifindex i32) each followed by its
//! own attributes (`RTA_GATEWAY`, or `RTA_VIA` for a gateway of the other family), or
//! `RTA_NH_ID`: a nexthop object ([`super::nexthop`]), which the socket also follows.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};

use super::{NLMSG_HDRLEN, attr_u32, attrs, u16_at, u32_at};

pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
const RTM_GETROUTE: u16 = 26;
const RTMSG_LEN: usize = 12;

const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTA_ENCAP: u16 = 22;
const RTA_NH_ID: u16 = 30;

/// `nlmsg_flags` of a new route added to an existing one (IPv6 `ip route append`).
pub const NLM_F_APPEND: u16 = 0x800;

/// Route types (`rtm_type`).
pub const RTN_UNICAST: u8 = 1;
pub const RTN_LOCAL: u8 = 2;
pub const RTN_BLACKHOLE: u8 = 6;
pub const RTN_UNREACHABLE: u8 = 7;
pub const RTN_PROHIBIT: u8 = 8;

/// `RTNLGRP_IPV4_ROUTE` and `RTNLGRP_IPV6_ROUTE` as `nl_groups` bits (`RTMGRP_*`).
const RTMGRP_IPV4_ROUTE: u32 = 0x40;
const RTMGRP_IPV6_ROUTE: u32 = 0x400;

/// One next hop of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteNextHop {
    /// `None`: directly connected on the interface.
    pub gateway: Option<IpAddr>,
    /// Output interface index (0: none given).
    pub ifindex: u32,
    /// Relative weight (`rtnh_hops + 1`; 1 for a single next hop).
    pub weight: u16,
}

/// A parsed route message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMessage {
    /// `RTM_NEWROUTE` (true) or `RTM_DELROUTE`.
    pub new: bool,
    /// `nlmsg_flags` (e.g. [`NLM_F_APPEND`]).
    pub flags: u16,
    /// Destination prefix (the family's zero address with length 0 for a default route).
    pub dst: IpAddr,
    pub dst_len: u8,
    /// Source prefix length (source-specific routing; not 0 is not supported).
    pub src_len: u8,
    pub tos: u8,
    pub table: u32,
    pub protocol: u8,
    /// `rtm_type`: [`RTN_UNICAST`], [`RTN_BLACKHOLE`], ...
    pub kind: u8,
    /// The metric (`RTA_PRIORITY`; 0 if absent).
    pub metric: u32,
    /// The next hops the message lists (with a nexthop object, the kernel lists the object's
    /// too unless `net.ipv4.nexthop_compat_mode` is 0; the object is what counts).
    pub next_hops: Vec<RouteNextHop>,
    /// The nexthop object the route forwards by (`RTA_NH_ID`).
    pub nh_id: Option<u32>,
    /// What the parser found but linerate cannot forward by: a gateway of the other family (`RTA_VIA`), an encapsulation (`RTA_ENCAP`), a source
    /// prefix.
    pub unsupported: Option<&'static str>,
}

/// Why a message is not a route message linerate can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouteParseError {
    #[error("message shorter than its headers")]
    Truncated,
    #[error("not a route message (type {0})")]
    NotRoute(u16),
    #[error("address family {0} is neither AF_INET nor AF_INET6")]
    Family(u8),
    #[error("prefix length {0} too long for the family")]
    PrefixLen(u8),
    #[error("attribute {0} has the wrong length")]
    AttrLen(u16),
}

pub(crate) fn addr(family: u8, p: &[u8], ty: u16) -> Result<IpAddr, RouteParseError> {
    match (family as i32, p.len()) {
        (libc::AF_INET, 4) => Ok(IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], p[3]))),
        (libc::AF_INET6, 16) => {
            let mut b = [0u8; 16];
            b.copy_from_slice(p);
            Ok(IpAddr::V6(Ipv6Addr::from(b)))
        }
        _ => Err(RouteParseError::AttrLen(ty)),
    }
}

/// The `rtnexthop` list of an `RTA_MULTIPATH` attribute.
fn multipath(
    family: u8,
    mut b: &[u8],
    out: &mut Vec<RouteNextHop>,
) -> Result<Option<&'static str>, RouteParseError> {
    let mut unsupported = None;
    while b.len() >= 8 {
        let len = u16_at(b, 0) as usize;
        if len < 8 || len > b.len() {
            return Err(RouteParseError::AttrLen(RTA_MULTIPATH));
        }
        let mut hop =
            RouteNextHop { gateway: None, ifindex: u32_at(b, 4), weight: u16::from(b[3]) + 1 };
        for (ty, p) in attrs(&b[8..len]) {
            match ty {
                RTA_GATEWAY => hop.gateway = Some(addr(family, p, ty)?),
                RTA_VIA => unsupported = Some("a gateway of the other address family (RTA_VIA)"),
                RTA_ENCAP => unsupported = Some("an encapsulation (RTA_ENCAP)"),
                _ => {}
            }
        }
        out.push(hop);
        b = &b[super::align4(len).min(b.len())..];
    }
    Ok(unsupported)
}

impl Default for RouteMessage {
    fn default() -> Self {
        RouteMessage {
            new: false,
            flags: 0,
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst_len: 0,
            src_len: 0,
            tos: 0,
            table: 0,
            protocol: 0,
            kind: 0,
            metric: 0,
            next_hops: Vec::new(),
            nh_id: None,
            unsupported: None,
        }
    }
}

/// Parses one whole netlink message (header included) as a route message.
pub fn parse_route(m: &[u8]) -> Result<RouteMessage, RouteParseError> {
    let mut msg = RouteMessage::default();
    parse_route_into(m, &mut msg)?;
    Ok(msg)
}

/// As [`parse_route`], into `msg`, whose list of next hops is reused (no allocation per
/// message once it has room: a full table's withdrawal is a million messages). On an error
/// `msg` holds part of the message.
pub fn parse_route_into(m: &[u8], msg: &mut RouteMessage) -> Result<(), RouteParseError> {
    if m.len() < NLMSG_HDRLEN + RTMSG_LEN {
        return Err(RouteParseError::Truncated);
    }
    let ty = u16_at(m, 4);
    if ty != RTM_NEWROUTE && ty != RTM_DELROUTE {
        return Err(RouteParseError::NotRoute(ty));
    }
    let len = (u32_at(m, 0) as usize).min(m.len());
    if len < NLMSG_HDRLEN + RTMSG_LEN {
        return Err(RouteParseError::Truncated);
    }
    let r = &m[NLMSG_HDRLEN..len];
    let family = r[0];
    let (dst, max) = match family as i32 {
        libc::AF_INET => (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 32),
        libc::AF_INET6 => (IpAddr::V6(Ipv6Addr::UNSPECIFIED), 128),
        _ => return Err(RouteParseError::Family(family)),
    };
    if r[1] > max {
        return Err(RouteParseError::PrefixLen(r[1]));
    }
    let mut next_hops = std::mem::take(&mut msg.next_hops);
    next_hops.clear();
    *msg = RouteMessage {
        new: ty == RTM_NEWROUTE,
        flags: u16_at(m, 6),
        dst,
        dst_len: r[1],
        src_len: r[2],
        tos: r[3],
        table: u32::from(r[4]),
        protocol: r[5],
        kind: r[7],
        metric: 0,
        next_hops,
        nh_id: None,
        unsupported: (r[2] != 0).then_some("a source prefix (source-specific routing)"),
    };
    let mut single = RouteNextHop { gateway: None, ifindex: 0, weight: 1 };
    let mut has_single = false;
    for (ty, p) in attrs(&r[RTMSG_LEN..]) {
        match ty {
            RTA_DST => msg.dst = addr(family, p, ty)?,
            RTA_TABLE => msg.table = attr_u32(p).ok_or(RouteParseError::AttrLen(ty))?,
            RTA_PRIORITY => msg.metric = attr_u32(p).ok_or(RouteParseError::AttrLen(ty))?,
            RTA_OIF => {
                single.ifindex = attr_u32(p).ok_or(RouteParseError::AttrLen(ty))?;
                has_single = true;
            }
            RTA_GATEWAY => {
                single.gateway = Some(addr(family, p, ty)?);
                has_single = true;
            }
            RTA_MULTIPATH => {
                if let Some(u) = multipath(family, p, &mut msg.next_hops)? {
                    msg.unsupported = Some(u);
                }
            }
            RTA_SRC if msg.src_len != 0 => {}
            RTA_VIA => msg.unsupported = Some("a gateway of the other address family (RTA_VIA)"),
            RTA_ENCAP => msg.unsupported = Some("an encapsulation (RTA_ENCAP)"),
            RTA_NH_ID => msg.nh_id = Some(attr_u32(p).ok_or(RouteParseError::AttrLen(ty))?),
            _ => {}
        }
    }
    if has_single && msg.next_hops.is_empty() {
        msg.next_hops.push(single);
    }
    Ok(())
}

/// A netlink socket subscribed to the IPv4 and IPv6 route groups and to nexthop objects,
/// non-blocking.
pub struct RouteSocket {
    fd: OwnedFd,
}

impl RouteSocket {
    /// Opens and subscribes; asks for a receive buffer of `rcvbuf` bytes (SO_RCVBUFFORCE,
    /// which needs CAP_NET_ADMIN, else SO_RCVBUF up to `net.core.rmem_max`).
    pub fn open(rcvbuf: usize) -> io::Result<RouteSocket> {
        let fd = crate::sys::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK,
            libc::NETLINK_ROUTE,
        )?;
        let size = rcvbuf.min(i32::MAX as usize) as libc::c_int;
        if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, size).is_err() {
            setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, size)?;
        }
        // SAFETY: sockaddr_nl is plain data; all-zero is valid.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
        // SAFETY: `sa` is a valid sockaddr_nl of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // A kernel without nexthop objects (before 5.3) refuses the group; it has none to send.
        let _ = setsockopt(
            &fd,
            libc::SOL_NETLINK,
            libc::NETLINK_ADD_MEMBERSHIP,
            super::nexthop::RTNLGRP_NEXTHOP as libc::c_int,
        );
        Ok(RouteSocket { fd })
    }

    /// Reads one datagram of messages into `buf`; `Ok(None)` if none is waiting. An
    /// `ENOBUFS` error means messages were lost: the table must be dumped again.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) }
    }

    /// Reads as many datagrams as are waiting, up to `into`'s number of slots, in one
    /// `recvmmsg(2)`; returns how many (0 if none is waiting). The kernel sends one route
    /// notification per datagram, so this saves a system call per route in a burst. An
    /// `ENOBUFS` error means messages were lost (the buffer overflowed, or a datagram did not
    /// fit its slot): the table must be dumped again.
    pub fn recv_many(&self, into: &mut Datagrams) -> io::Result<usize> {
        let slot = into.slot;
        let mut iovs: Vec<libc::iovec> = into
            .buf
            .chunks_exact_mut(slot)
            .map(|c| libc::iovec { iov_base: c.as_mut_ptr().cast(), iov_len: slot })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: mmsghdr is plain data; all-zero is valid (no name, no control data).
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        // SAFETY: `hdrs` holds `hdrs.len()` headers, each pointing at one iovec of `iovs` that
        // covers its own `slot` bytes of `into.buf`; all outlive the call, which writes only
        // there and into the headers. A null timeout: the socket is non-blocking.
        let n = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                hdrs.len() as u32,
                0,
                std::ptr::null_mut(),
            )
        };
        into.lens.clear();
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(0) } else { Err(e) };
        }
        let got = &hdrs[..n as usize];
        if got.iter().any(|h| h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0) {
            return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
        }
        into.lens.extend(got.iter().map(|h| (h.msg_len as usize).min(slot)));
        Ok(into.lens.len())
    }

    /// Waits up to `timeout_ms` for a datagram.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, count 1.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n > 0) }
    }
}

/// Room for the datagrams of one [`RouteSocket::recv_many`], and the ones it read.
pub struct Datagrams {
    buf: Vec<u8>,
    slot: usize,
    lens: Vec<usize>,
}

impl Datagrams {
    /// `count` datagrams of up to `slot` bytes each (a route notification is at most a page).
    pub fn new(count: usize, slot: usize) -> Datagrams {
        Datagrams {
            buf: vec![0; count.max(1) * slot.max(1)],
            slot: slot.max(1),
            lens: Vec::with_capacity(count),
        }
    }

    /// The datagrams the last read returned, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.lens.iter().enumerate().map(|(i, &len)| &self.buf[i * self.slot..i * self.slot + len])
    }
}

/// Whether a receive error says messages were lost (`ENOBUFS`: the buffer overflowed).
pub fn is_overrun(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
}

fn setsockopt(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a c_int that outlives the call, its size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as u32,
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// The messages of one datagram, each whole (header included); stops at a malformed one.
pub fn messages(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    super::messages(b)
}

/// Dumps every nexthop object, then every IPv4 and IPv6 route of the namespace (all tables:
/// the caller filters), calling `each` with every message (the objects first, so that the
/// routes that name them find them).
pub fn dump_routes(mut each: impl FnMut(&[u8])) -> io::Result<()> {
    match super::nexthop::dump_nexthops(&mut each) {
        // A kernel without nexthop objects.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EINVAL | libc::EAFNOSUPPORT)
            ) => {}
        res => res?,
    }
    for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
        let mut body = vec![0u8; RTMSG_LEN];
        body[0] = family;
        let req = super::message(RTM_GETROUTE, libc::NLM_F_DUMP as u16, &body);
        super::exchange_each(libc::NETLINK_ROUTE, &req, &mut each)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
