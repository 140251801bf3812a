//! Address events (rtnetlink's RTNLGRP_IPV4_IFADDR and RTNLGRP_IPV6_IFADDR,
//! `linux/if_addr.h`): an address added to or removed from an interface, as RTM_NEWADDR /
//! RTM_DELADDR messages with a `struct ifaddrmsg` (family, prefix length, flags, scope,
//! index) and attributes (IFA_ADDRESS, IFA_LOCAL). linerate follows the addresses a VRRP
//! daemon (keepalived) adds to its host-stack TAPs with them (`crates/linerate/src/links.rs`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{NLMSG_HDRLEN, attrs, u16_at, u32_at};

const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
/// `RTMGRP_IPV4_IFADDR` and `RTMGRP_IPV6_IFADDR` as `nl_groups` bits.
pub const RTMGRP_IFADDR: u32 = 0x10 | 0x100;
/// `struct ifaddrmsg`: 8 bytes after the netlink header.
const IFADDRMSG_LEN: usize = 8;

/// One address's news.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrEvent {
    /// RTM_DELADDR: the address is gone.
    pub deleted: bool,
    pub ifindex: u32,
    pub addr: IpAddr,
    pub prefix_len: u8,
}

/// The event in message `m` (netlink header included), if it is an address message. The
/// address is IFA_LOCAL where there is one (on a point-to-point link IFA_ADDRESS is the
/// peer's), else IFA_ADDRESS.
pub fn parse_addr(m: &[u8]) -> Option<AddrEvent> {
    if m.len() < NLMSG_HDRLEN + IFADDRMSG_LEN {
        return None;
    }
    let deleted = match u16_at(m, 4) {
        RTM_NEWADDR => false,
        RTM_DELADDR => true,
        _ => return None,
    };
    let info = &m[NLMSG_HDRLEN..];
    let (family, prefix_len, ifindex) = (info[0], info[1], u32_at(info, 4));
    let end = (u32_at(m, 0) as usize).min(m.len());
    let (mut local, mut address) = (None, None);
    for (ty, p) in attrs(m.get(NLMSG_HDRLEN + IFADDRMSG_LEN..end)?) {
        let a = match (i32::from(family), p.len()) {
            (libc::AF_INET, 4) => IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], p[3])),
            (libc::AF_INET6, 16) => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(p).ok()?)),
            _ => continue,
        };
        match ty {
            IFA_LOCAL => local = Some(a),
            IFA_ADDRESS => address = Some(a),
            _ => {}
        }
    }
    let addr = local.or(address)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (prefix_len <= max).then_some(AddrEvent { deleted, ifindex, addr, prefix_len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newaddr(ty: u16, family: u8, len: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![family, len, 0, 0];
        body.extend_from_slice(&9u32.to_ne_bytes());
        for (t, p) in attrs {
            super::super::push_attr(&mut body, *t, p);
        }
        super::super::message(ty, 0, &body)
    }

    #[test]
    fn address_messages_give_index_address_and_length() {
        let v4 = newaddr(
            RTM_NEWADDR,
            libc::AF_INET as u8,
            24,
            &[(IFA_ADDRESS, &[192, 0, 2, 9]), (IFA_LOCAL, &[198, 18, 0, 254])],
        );
        let e = parse_addr(&v4).unwrap();
        assert_eq!(
            e,
            AddrEvent {
                deleted: false,
                ifindex: 9,
                addr: "198.18.0.254".parse().unwrap(),
                prefix_len: 24
            }
        );
        let six = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let v6 = newaddr(RTM_DELADDR, libc::AF_INET6 as u8, 64, &[(IFA_ADDRESS, &six)]);
        let e = parse_addr(&v6).unwrap();
        assert!(e.deleted && e.addr == "2001:db8::1".parse::<IpAddr>().unwrap());
        // Too long a prefix, another message type, truncations: nothing, no panic.
        assert_eq!(parse_addr(&newaddr(RTM_NEWADDR, 2, 33, &[(IFA_LOCAL, &[1, 2, 3, 4])])), None);
        assert_eq!(parse_addr(&newaddr(16, 2, 24, &[(IFA_LOCAL, &[1, 2, 3, 4])])), None);
        for n in 0..v4.len() {
            let _ = parse_addr(&v4[..n]);
        }
    }
}
