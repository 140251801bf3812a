//! Drops the kernel's copy of the frames linerate forwards over AF_PACKET, with a tc program.
//!
//! An AF_PACKET socket receives a copy of each frame; the kernel then goes on with the
//! original (IP input, a route lookup, an ICMP error since its forwarding is off) on the same
//! CPU as linerate's worker. `__netif_receive_skb_core` delivers a frame to the packet taps
//! first, then runs tc ingress (tcx), then netfilter's ingress hook: a program at tc ingress
//! sees every frame after linerate's socket has its copy, and drops the kernel's.
//!
//! It passes what is for the router itself: IPv4 to one of its addresses, multicast
//! (224.0.0.0/4) and broadcast; IPv6 to one of its addresses, link-local (fe80::/10) and
//! multicast (ff00::/8); every frame that is neither IPv4 nor IPv6 (ARP, LLDP...), and
//! frames too short to hold the header it would read. With `everything` (linerate's host
//! stack on TAPs gives the kernel its traffic), it drops every frame.
//!
//! The program (`bpf/kernel_copy.bpf.c`, one object per interface, its addresses in the
//! object's maps) is a few compares and a hash lookup per frame: far cheaper than the same
//! rules as an nftables netdev-ingress table (linerate's fallback on kernels without tcx,
//! before 6.6), whose set lookups cost a share of the DUT's CPU (docs/performance.md,
//! "Measurements behind the code").

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use super::bpf;
use crate::sys;

/// BPF object name of the program (`bpf/kernel_copy.bpf.c`).
pub const PROG_NAME: &str = "lr_kernel_copy";

/// The programs attached to each interface's tc ingress; detached when dropped.
pub struct KernelCopyDrop {
    _attached: Vec<(OwnedFd, OwnedFd)>,
}

impl KernelCopyDrop {
    /// Attaches a program to each of `ifaces` (name, the router's addresses on it), in this
    /// thread's network namespace. Needs tcx (Linux 6.6).
    pub fn attach(
        ifaces: &[(String, Vec<IpAddr>)],
        everything: bool,
    ) -> io::Result<KernelCopyDrop> {
        let mut attached = Vec::new();
        for (name, addrs) in ifaces {
            let ifindex = sys::ifindex(name).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no interface {name}"))
            })?;
            let prog = load(addrs, everything)?;
            let link = bpf::link_tcx_ingress(prog.as_raw_fd(), ifindex).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("attaching to the tc ingress (tcx) of {name}: {e}"),
                )
            })?;
            attached.push((prog, link));
        }
        Ok(KernelCopyDrop { _attached: attached })
    }
}

/// The program for an interface whose router addresses are `addrs` (with `everything`, one
/// that drops every frame), loaded, its maps filled.
fn load(addrs: &[IpAddr], everything: bool) -> io::Result<OwnedFd> {
    let mut obj = super::object::load_tc_only(super::object::KERNEL_COPY, PROG_NAME)?;
    let (own4, own6, settings) =
        (obj.take_map("own4")?, obj.take_map("own6")?, obj.take_map("settings")?);
    for addr in addrs {
        match addr {
            IpAddr::V4(a) => bpf::map_update(own4.as_raw_fd(), &a.octets(), &1u8)?,
            IpAddr::V6(a) => bpf::map_update(own6.as_raw_fd(), &a.octets(), &1u8)?,
        }
    }
    bpf::map_update(settings.as_raw_fd(), &0u32, &u32::from(everything))?;
    Ok(obj.prog)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TC_ACT_OK: i32 = 0;
    const TC_ACT_SHOT: i32 = 2;

    fn ipv4_frame(dst: [u8; 4], len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        if len >= 34 {
            f[14] = 0x45;
            f[30..34].copy_from_slice(&dst);
        }
        f
    }

    fn ipv6_frame(dst: &str) -> Vec<u8> {
        let mut f = vec![0u8; 74];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[38..54].copy_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
        f
    }

    /// Each kind of frame against the verdict it must get (BPF_PROG_TEST_RUN; needs root).
    /// Truncated IP headers cannot be tested here (the test runner refuses them); the
    /// verifier proves every read is within the frame.
    #[test]
    fn verdicts() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let addrs: Vec<IpAddr> = vec![
            "198.18.0.1".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        ];
        let prog = load(&addrs, false).expect("program loads");
        let all = load(&addrs, true).expect("drop-all program loads");
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let cases: Vec<(&str, Vec<u8>, i32)> = vec![
            ("IPv4 to the router", ipv4_frame([198, 18, 0, 1], 60), TC_ACT_OK),
            ("IPv4 forwarded", ipv4_frame([198, 19, 0, 2], 60), TC_ACT_SHOT),
            ("IPv4 to a near address", ipv4_frame([198, 18, 0, 2], 60), TC_ACT_SHOT),
            ("IPv4 multicast", ipv4_frame([224, 0, 0, 5], 60), TC_ACT_OK),
            ("IPv4 multicast, top of range", ipv4_frame([239, 255, 0, 1], 60), TC_ACT_OK),
            ("IPv4 240/4", ipv4_frame([240, 0, 0, 1], 60), TC_ACT_SHOT),
            ("IPv4 broadcast", ipv4_frame([255, 255, 255, 255], 60), TC_ACT_OK),
            ("ARP", arp, TC_ACT_OK),
            ("IPv6 to the router", ipv6_frame("2001:db8::1"), TC_ACT_OK),
            ("IPv6 to its second address", ipv6_frame("2001:db8::2"), TC_ACT_OK),
            ("IPv6 forwarded", ipv6_frame("2001:db8::3"), TC_ACT_SHOT),
            ("IPv6 differing in the first word", ipv6_frame("2001:db9::1"), TC_ACT_SHOT),
            ("IPv6 link-local", ipv6_frame("fe80::1"), TC_ACT_OK),
            ("IPv6 fec0::/10 (not link-local)", ipv6_frame("fec0::1"), TC_ACT_SHOT),
            ("IPv6 multicast", ipv6_frame("ff02::1:ff00:1"), TC_ACT_OK),
        ];
        for (what, frame, want) in &cases {
            assert_eq!(bpf::test_run(prog.as_raw_fd(), frame).unwrap(), *want as u32, "{what}");
            assert_eq!(
                bpf::test_run(all.as_raw_fd(), frame).unwrap(),
                TC_ACT_SHOT as u32,
                "{what}, drop all"
            );
        }
    }
}
