//! Minimal rtnetlink: which XDP program is attached to an interface, attach one (tests) and
//! detach a stale one left by a crashed linerate (programs attached through netlink, unlike a
//! bpf_link, survive their loader).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::sys;

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const NLA_F_NESTED: u16 = 0x8000;

/// An XDP program attached to an interface, as netlink reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    pub prog_id: u32,
    /// `XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE` (hardware offload is reported as DRV).
    pub mode_flags: u32,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn push_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align4(buf.len()), 0);
}

/// A request: nlmsghdr + ifinfomsg for `ifindex` + `attrs`.
fn message(ty: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + IFINFOMSG_LEN + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&(flags | libc::NLM_F_REQUEST as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: kernel fills in
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]); // family, pad, type
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&[0; 8]); // flags, change
    m.extend_from_slice(attrs);
    m
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Iterates the attributes in `b` as (type without flags, payload).
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = u16_at(b, 0) as usize;
        if len < 4 || len > b.len() {
            return None;
        }
        let item = (u16_at(b, 2) & !NLA_F_NESTED, &b[4..len]);
        b = &b[align4(len).min(b.len())..];
        Some(item)
    })
}

/// Sends one request on a fresh rtnetlink socket and returns the first reply message
/// (an `NLMSG_ERROR` with a non-zero code becomes an `Err`).
fn request(msg: &[u8]) -> io::Result<Vec<u8>> {
    let sock: OwnedFd = sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)?;
    // SAFETY: `msg` is a readable buffer of `msg.len()` bytes; a NULL address sends to the
    // kernel on a netlink socket.
    let sent = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 32 * 1024];
    // SAFETY: `buf` is a writable buffer of `buf.len()` bytes.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    if n < NLMSG_HDRLEN || (u32_at(&buf, 0) as usize) > n {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "short netlink reply"));
    }
    buf.truncate(u32_at(&buf, 0) as usize);
    if u16_at(&buf, 4) == libc::NLMSG_ERROR as u16 {
        let code = u32_at(&buf, NLMSG_HDRLEN) as i32;
        if code != 0 {
            return Err(io::Error::from_raw_os_error(-code));
        }
    }
    Ok(buf)
}

/// The XDP program attached to `ifindex` through netlink or a bpf_link, if any.
pub fn query(ifindex: u32) -> io::Result<Option<Attached>> {
    let reply = request(&message(libc::RTM_GETLINK, 0, ifindex, &[]))?;
    if u16_at(&reply, 4) != libc::RTM_NEWLINK {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "unexpected netlink reply"));
    }
    let Some(xdp) = attrs(&reply[NLMSG_HDRLEN + IFINFOMSG_LEN..]).find(|(t, _)| *t == sys::IFLA_XDP).map(|(_, p)| p)
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
        sys::XDP_ATTACHED_SKB => Some(Attached { prog_id: prog, mode_flags: sys::XDP_FLAGS_SKB_MODE }),
        sys::XDP_ATTACHED_MULTI if skb != 0 && drv == 0 => {
            Some(Attached { prog_id: skb, mode_flags: sys::XDP_FLAGS_SKB_MODE })
        }
        sys::XDP_ATTACHED_MULTI => Some(Attached { prog_id: drv, mode_flags: sys::XDP_FLAGS_DRV_MODE }),
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
