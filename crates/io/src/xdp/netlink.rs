//! Minimal rtnetlink: which XDP program is attached to an interface, attach one (tests) and
//! detach a stale one left by a crashed linerate (programs attached through netlink, unlike a
//! bpf_link, survive their loader).

use std::io;

use crate::netlink::{NLA_F_NESTED, NLMSG_HDRLEN, attrs, push_attr, u16_at, u32_at};
use crate::sys;

const IFINFOMSG_LEN: usize = 16;

/// An XDP program attached to an interface, as netlink reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    pub prog_id: u32,
    /// `XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE` (hardware offload is reported as DRV).
    pub mode_flags: u32,
}

/// A request: nlmsghdr + ifinfomsg for `ifindex` + `attrs`.
fn message(ty: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(IFINFOMSG_LEN + attrs.len());
    body.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]); // family, pad, type
    body.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    body.extend_from_slice(&[0; 8]); // flags, change
    body.extend_from_slice(attrs);
    crate::netlink::message(ty, flags, &body)
}

/// Sends one request on a fresh rtnetlink socket and returns the first reply message.
fn request(msg: &[u8]) -> io::Result<Vec<u8>> {
    let mut replies = crate::netlink::exchange(libc::NETLINK_ROUTE, msg)?;
    if replies.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "no netlink reply"));
    }
    Ok(replies.swap_remove(0))
}

/// The XDP program attached to `ifindex` through netlink or a bpf_link, if any.
pub fn query(ifindex: u32) -> io::Result<Option<Attached>> {
    let reply = request(&message(libc::RTM_GETLINK, 0, ifindex, &[]))?;
    if u16_at(&reply, 4) != libc::RTM_NEWLINK {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "unexpected netlink reply"));
    }
    let Some(xdp) = attrs(&reply[NLMSG_HDRLEN + IFINFOMSG_LEN..])
        .find(|(t, _)| *t == sys::IFLA_XDP)
        .map(|(_, p)| p)
    else {
        return Ok(None);
    };
    let (mut attached, mut prog, mut drv, mut skb) = (0u8, 0, 0, 0);
    for (ty, p) in attrs(xdp) {
        match ty {
            sys::IFLA_XDP_ATTACHED if !p.is_empty() => attached = p[0],
            sys::IFLA_XDP_PROG_ID if p.len() >= 4 => prog = u32_at(p, 0),
            sys::IFLA_XDP_DRV_PROG_ID if p.len() >= 4 => drv = u32_at(p, 0),
            sys::IFLA_XDP_SKB_PROG_ID if p.len() >= 4 => skb = u32_at(p, 0),
            _ => {}
        }
    }
    Ok(match attached {
        sys::XDP_ATTACHED_SKB => {
            Some(Attached { prog_id: prog, mode_flags: sys::XDP_FLAGS_SKB_MODE })
        }
        sys::XDP_ATTACHED_MULTI if skb != 0 && drv == 0 => {
            Some(Attached { prog_id: skb, mode_flags: sys::XDP_FLAGS_SKB_MODE })
        }
        sys::XDP_ATTACHED_MULTI => {
            Some(Attached { prog_id: drv, mode_flags: sys::XDP_FLAGS_DRV_MODE })
        }
        0 => None,
        _ => Some(Attached { prog_id: prog, mode_flags: sys::XDP_FLAGS_DRV_MODE }),
    })
}

/// Attaches program `prog_fd` (or detaches, with -1) through netlink in mode `flags`.
pub fn set_xdp(ifindex: u32, prog_fd: i32, flags: u32) -> io::Result<()> {
    let mut inner = Vec::new();
    push_attr(&mut inner, sys::IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    push_attr(&mut inner, sys::IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut outer = Vec::new();
    push_attr(&mut outer, sys::IFLA_XDP | NLA_F_NESTED, &inner);
    request(&message(libc::RTM_SETLINK, libc::NLM_F_ACK as u16, ifindex, &outer)).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_parses_nested_attrs() {
        let mut inner = Vec::new();
        push_attr(&mut inner, sys::IFLA_XDP_ATTACHED, &[2]);
        push_attr(&mut inner, sys::IFLA_XDP_PROG_ID, &77u32.to_ne_bytes());
        let mut outer = Vec::new();
        push_attr(&mut outer, 3, b"lo\0");
        push_attr(&mut outer, sys::IFLA_XDP | NLA_F_NESTED, &inner);
        let m = message(libc::RTM_SETLINK, 0, 5, &outer);
        assert_eq!(u32_at(&m, 0) as usize, m.len());
        assert_eq!(u32_at(&m, NLMSG_HDRLEN + 4), 5);
        let found: Vec<_> = attrs(&m[NLMSG_HDRLEN + IFINFOMSG_LEN..]).map(|(t, _)| t).collect();
        assert_eq!(found, [3, sys::IFLA_XDP]);
        let xdp = attrs(&outer).nth(1).unwrap().1;
        let inner: Vec<_> = attrs(xdp).collect();
        assert_eq!(inner[0], (sys::IFLA_XDP_ATTACHED, &[2u8][..]));
        assert_eq!(u32_at(inner[1].1, 0), 77);
    }
}
