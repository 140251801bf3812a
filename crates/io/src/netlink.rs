//! Netlink message plumbing shared by rtnetlink (`xdp::netlink`, [`route`]) and generic
//! netlink ([`crate::napi`]): attributes (RFC 3549 section 2.3.2) and a request/dump exchange.

pub mod addr;
pub mod link;
pub mod nexthop;
pub mod route;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

pub const NLMSG_HDRLEN: usize = 16;
pub const NLA_F_NESTED: u16 = 0x8000;

pub fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Appends one attribute (length, type, payload, padding).
pub fn push_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align4(buf.len()), 0);
}

/// An nlmsghdr of type `ty` followed by `body` (sequence 1, port id 0: the kernel's).
pub fn message(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + body.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&(flags | libc::NLM_F_REQUEST as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m
}

pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// A u32 attribute's value, if the payload holds one.
pub fn attr_u32(p: &[u8]) -> Option<u32> {
    (p.len() >= 4).then(|| u32_at(p, 0))
}

/// Iterates the attributes in `b` as (type without flags, payload); stops at the first
/// malformed one.
pub fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
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

fn send(sock: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: `msg` is a readable buffer of `msg.len()` bytes; a NULL address sends to the
    // kernel on a netlink socket.
    let sent = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if sent < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn recv(sock: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a writable buffer of `buf.len()` bytes.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// The messages of one datagram, each whole (header included).
pub(crate) fn messages(mut b: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if b.len() < NLMSG_HDRLEN {
            return None;
        }
        let len = u32_at(b, 0) as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            return None;
        }
        let m = &b[..len];
        b = &b[align4(len).min(b.len())..];
        Some(m)
    })
}

/// Sends `msg` on a fresh netlink socket of `protocol` and collects every reply message
/// until the kernel's `NLMSG_DONE`, or the first message of a non-dump request. An
/// `NLMSG_ERROR` with a non-zero code becomes an `Err`.
pub fn exchange(protocol: libc::c_int, msg: &[u8]) -> io::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    exchange_each(protocol, msg, &mut |m: &[u8]| out.push(m.to_vec()))?;
    Ok(out)
}

/// As [`exchange`], handing each reply message to `each` instead of keeping it (a dump of a
/// full routing table is a million messages).
pub fn exchange_each(
    protocol: libc::c_int,
    msg: &[u8],
    each: &mut impl FnMut(&[u8]),
) -> io::Result<()> {
    let sock = crate::sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, protocol)?;
    send(&sock, msg)?;
    let dump = u16_at(msg, 6) & libc::NLM_F_DUMP as u16 != 0;
    let mut got = false;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = recv(&sock, &mut buf)?;
        for m in messages(&buf[..n]) {
            match u16_at(m, 4) as libc::c_int {
                libc::NLMSG_DONE => return Ok(()),
                libc::NLMSG_ERROR if m.len() >= NLMSG_HDRLEN + 4 => {
                    let code = u32_at(m, NLMSG_HDRLEN) as i32;
                    if code != 0 {
                        return Err(io::Error::from_raw_os_error(-code));
                    }
                    if !dump {
                        each(m);
                        return Ok(());
                    }
                }
                _ => {
                    each(m);
                    got = true;
                }
            }
        }
        if !dump && got {
            return Ok(());
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "netlink socket closed"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_attrs_round_trip() {
        let mut body = vec![0u8; 4];
        push_attr(&mut body, 1, &7u32.to_ne_bytes());
        push_attr(&mut body, 2, b"abc\0");
        let m = message(16, 0, &body);
        let two: Vec<u8> = [m.clone(), m.clone()].concat();
        let found: Vec<&[u8]> = messages(&two).collect();
        assert_eq!(found.len(), 2);
        let a: Vec<_> = attrs(&found[1][NLMSG_HDRLEN + 4..]).collect();
        assert_eq!(a[0].0, 1);
        assert_eq!(attr_u32(a[0].1), Some(7));
        assert_eq!(a[1], (2, &b"abc\0"[..]));
        // A length past the end stops the walk instead of panicking.
        let mut bad = m.clone();
        bad[NLMSG_HDRLEN + 4] = 200;
        assert_eq!(attrs(&bad[NLMSG_HDRLEN + 4..]).count(), 0);
    }
}
