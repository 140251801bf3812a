//! Link events (rtnetlink's RTNLGRP_LINK, `linux/rtnetlink.h`): an interface going down or
//! up, losing or gaining its carrier, deleted or created, as RTM_NEWLINK / RTM_DELLINK
//! messages with a `struct ifinfomsg` (family, type, index, flags, change) and attributes
//! (IFLA_IFNAME). linerate follows its ports with them (`crates/linerate/src/links.rs`).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::{NLMSG_HDRLEN, attrs, u16_at, u32_at};

const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const IFLA_IFNAME: u16 = 3;
/// `RTMGRP_LINK` as an `nl_groups` bit.
const RTMGRP_LINK: u32 = 1;
/// `struct ifinfomsg`: 16 bytes after the netlink header.
const IFINFOMSG_LEN: usize = 16;
/// `IFF_LOWER_UP`: the carrier (RFC 2863's operational state below the interface).
const IFF_LOWER_UP: u32 = 1 << 16;

/// One interface's news.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEvent {
    /// RTM_DELLINK: the interface is gone.
    pub deleted: bool,
    pub ifindex: u32,
    pub name: String,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Carrier present (`IFF_LOWER_UP`).
    pub carrier: bool,
}

impl LinkEvent {
    /// Up with a carrier: what forwarding needs.
    pub fn running(&self) -> bool {
        self.up && self.carrier
    }
}

/// The event in message `m` (netlink header included), if it is a link message with a name.
pub fn parse_link(m: &[u8]) -> Option<LinkEvent> {
    if m.len() < NLMSG_HDRLEN + IFINFOMSG_LEN {
        return None;
    }
    let deleted = match u16_at(m, 4) {
        RTM_NEWLINK => false,
        RTM_DELLINK => true,
        _ => return None,
    };
    let info = &m[NLMSG_HDRLEN..];
    let ifindex = u32_at(info, 4);
    let flags = u32_at(info, 8);
    let end = (u32_at(m, 0) as usize).min(m.len());
    let name = attrs(m.get(NLMSG_HDRLEN + IFINFOMSG_LEN..end)?)
        .find(|(ty, _)| *ty == IFLA_IFNAME)
        .map(|(_, p)| {
            String::from_utf8_lossy(p.split(|&b| b == 0).next().unwrap_or(&[])).into_owned()
        })?;
    Some(LinkEvent {
        deleted,
        ifindex,
        name,
        up: flags & libc::IFF_UP as u32 != 0,
        carrier: flags & IFF_LOWER_UP != 0,
    })
}

/// A netlink socket subscribed to link and address events ([`super::addr`]), in the
/// calling thread's namespace.
pub struct LinkSocket {
    fd: OwnedFd,
}

impl LinkSocket {
    pub fn open() -> io::Result<LinkSocket> {
        let fd = crate::sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)?;
        // SAFETY: sockaddr_nl is plain data; all-zero is valid.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = RTMGRP_LINK | super::addr::RTMGRP_IFADDR;
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
        Ok(LinkSocket { fd })
    }

    /// Waits up to `timeout_ms` for a datagram of messages; `Ok(None)` if none came. An
    /// `ENOBUFS` error means events were lost.
    pub fn recv(&self, buf: &mut [u8], timeout_ms: i32) -> io::Result<Option<usize>> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if ready <= 0 {
            return if ready < 0 { Err(io::Error::last_os_error()) } else { Ok(None) };
        }
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe {
            libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT)
        };
        if n >= 0 { Ok(Some(n as usize)) } else { Err(io::Error::last_os_error()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTM_NEWLINK of ifindex 7, "lrd1", with `flags`, as the kernel sends it (here with
    /// only the name attribute).
    fn newlink(ty: u16, flags: u32) -> Vec<u8> {
        let mut body = vec![0u8; IFINFOMSG_LEN];
        body[4..8].copy_from_slice(&7u32.to_ne_bytes());
        body[8..12].copy_from_slice(&flags.to_ne_bytes());
        super::super::push_attr(&mut body, IFLA_IFNAME, b"lrd1\0");
        super::super::message(ty, 0, &body)
    }

    #[test]
    fn link_messages_give_name_index_and_state() {
        let up = libc::IFF_UP as u32 | IFF_LOWER_UP;
        let e = parse_link(&newlink(RTM_NEWLINK, up)).unwrap();
        assert_eq!((e.deleted, e.ifindex, e.name.as_str(), e.running()), (false, 7, "lrd1", true));
        let e = parse_link(&newlink(RTM_NEWLINK, libc::IFF_UP as u32)).unwrap();
        assert!(e.up && !e.carrier && !e.running());
        assert!(parse_link(&newlink(RTM_DELLINK, 0)).unwrap().deleted);
        // Another message type, a short one, truncated attributes: nothing, no panic.
        assert_eq!(parse_link(&newlink(24, up)), None);
        let m = newlink(RTM_NEWLINK, up);
        for n in 0..m.len() {
            let _ = parse_link(&m[..n]);
        }
    }
}
