//! What an interface's driver can do with XDP, as the kernel's "netdev" generic netlink family
//! reports it (`xdp-features`, Linux 6.3): whether frames can be redirected to it
//! (`ndo_xdp_xmit`) and whether it has zero-copy AF_XDP.
//!
//! A veth takes redirected frames only while its peer has an XDP program or GRO on (the
//! kernel then sets NDO_XMIT on it): otherwise each redirected frame would be dropped, with
//! nothing but a tracepoint to say so.

use std::io;

use crate::napi::{GENL_HDRLEN, genl_family, genl_request};
use crate::netlink::{self, NLMSG_HDRLEN, attrs, push_attr};

const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;

/// `NETDEV_XDP_ACT_NDO_XMIT`: XDP_REDIRECT to this device works.
pub const NDO_XMIT: u64 = 1 << 2;
/// `NETDEV_XDP_ACT_XSK_ZEROCOPY`.
pub const XSK_ZEROCOPY: u64 = 1 << 3;

/// The `xdp-features` bits of `ifindex` (in the calling thread's namespace).
pub fn xdp_features(ifindex: u32) -> io::Result<u64> {
    let family = genl_family("netdev")?;
    let mut a = Vec::new();
    push_attr(&mut a, NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes());
    let replies =
        netlink::exchange(libc::NETLINK_GENERIC, &genl_request(family, NETDEV_CMD_DEV_GET, 0, &a))?;
    replies
        .iter()
        .filter(|m| m.len() >= NLMSG_HDRLEN + GENL_HDRLEN)
        .flat_map(|m| attrs(&m[NLMSG_HDRLEN + GENL_HDRLEN..]))
        .find(|(t, p)| *t == NETDEV_A_DEV_XDP_FEATURES && p.len() >= 8)
        .map(|(_, p)| u64::from_ne_bytes(p[..8].try_into().expect("8 bytes")))
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no xdp-features in the netdev reply")
        })
}

/// Whether frames redirected by XDP to `ifindex` reach it.
pub fn takes_redirects(ifindex: u32) -> io::Result<bool> {
    xdp_features(ifindex).map(|f| f & NDO_XMIT != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_takes_no_redirects_and_a_missing_device_is_an_error() {
        // lo has no ndo_xdp_xmit; every supported kernel has the netdev family.
        let lo = xdp_features(1).expect("netdev family answers for lo");
        assert_eq!(lo & NDO_XMIT, 0);
        assert!(!takes_redirects(1).unwrap());
        assert!(xdp_features(0x7fff_fff0).is_err());
    }
}
