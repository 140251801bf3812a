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
//! The program is a few compares per frame, generated for each interface's addresses: far
//! cheaper than the same rules as an nftables netdev-ingress table (linerate's fallback on
//! kernels without tcx, before 6.6), whose set lookups cost a share of the DUT's CPU
//! (docs/performance.md, "Measurements behind the code").

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use super::bpf::{self, Fixups, Insn, R0, R1, R2, R3, R4, R5, R6, R7};
use crate::sys;

/// BPF object name of the program.
pub const PROG_NAME: &str = "lr_kernel_copy";
const TC_ACT_OK: i32 = 0;
const TC_ACT_SHOT: i32 = 2;
/// `struct __sk_buff` fields: the frame from its Ethernet header (tc ingress pushes it back).
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;
/// Offsets in the frame: EtherType, IPv4 and IPv6 destination addresses.
const ETHERTYPE: i16 = 12;
const V4_DST: i16 = 14 + 16;
const V6_DST: i16 = 14 + 24;

/// The program for an interface whose router addresses are `addrs`:
///
/// ```text
///      r2 = skb->data; r3 = skb->data_end
///      if r2 + 14 > r3 goto pass
///      r4 = be16 *(u16 *)(r2 + 12)                  ; EtherType
///      if r4 == 0x86dd goto v6
///      if r4 != 0x0800 goto pass
///      if r2 + 34 > r3 goto pass
///      if (*(u8 *)(r2 + 30) & 0xf0) == 0xe0 goto pass ; 224.0.0.0/4
///      r4 = *(u32 *)(r2 + 30)                       ; destination, as stored
///      if w4 == 255.255.255.255 goto pass
///      if w4 == ADDR goto pass                      ; one per IPv4 address
///      goto drop
/// v6:  if r2 + 54 > r3 goto pass
///      r4 = *(u8 *)(r2 + 38)
///      if r4 == 0xff goto pass                      ; ff00::/8
///      if r4 != 0xfe goto own
///      if (*(u8 *)(r2 + 39) & 0xc0) == 0x80 goto pass ; fe80::/10
/// own: r4, r5, r6, r7 = the destination's four words
///      if w4 != A0 goto next; ... if w7 != A3 goto next; goto pass  ; one per IPv6 address
/// drop: r0 = TC_ACT_SHOT; exit
/// pass: r0 = TC_ACT_OK; exit
/// ```
pub fn program(addrs: &[IpAddr], everything: bool) -> Vec<Insn> {
    if everything {
        return vec![Insn::mov_imm(R0, TC_ACT_SHOT), Insn::exit()];
    }
    let (mut pass, mut drop, mut v6, mut own) = (Fixups::default(), Fixups::default(), Fixups::default(), Fixups::default());
    let mut p = vec![Insn::ldx_w(R2, R1, SKB_DATA), Insn::ldx_w(R3, R1, SKB_DATA_END)];
    let room = |p: &mut Vec<Insn>, pass: &mut Fixups, bytes: i32| {
        p.extend([Insn::mov_reg(R4, R2), Insn::add_imm(R4, bytes)]);
        pass.jump(p, Insn::jgt_reg(R4, R3, 0));
    };
    room(&mut p, &mut pass, 14);
    p.extend([Insn::ldx_h(R4, R2, ETHERTYPE), Insn::be16(R4)]);
    v6.jump(&mut p, Insn::jeq_imm(R4, 0x86dd, 0));
    pass.jump(&mut p, Insn::jne_imm(R4, 0x0800, 0));

    room(&mut p, &mut pass, i32::from(V4_DST) + 4);
    p.extend([Insn::ldx_b(R4, R2, V4_DST), Insn::and32_imm(R4, 0xf0)]);
    pass.jump(&mut p, Insn::jeq_imm(R4, 0xe0, 0));
    p.push(Insn::ldx_w(R4, R2, V4_DST));
    pass.jump(&mut p, Insn::jeq32_imm(R4, u32::MAX, 0));
    for addr in addrs {
        if let IpAddr::V4(v4) = addr {
            pass.jump(&mut p, Insn::jeq32_imm(R4, u32::from_ne_bytes(v4.octets()), 0));
        }
    }
    drop.jump(&mut p, Insn::ja(0));

    v6.land(&mut p);
    room(&mut p, &mut pass, i32::from(V6_DST) + 16);
    p.push(Insn::ldx_b(R4, R2, V6_DST));
    pass.jump(&mut p, Insn::jeq_imm(R4, 0xff, 0));
    own.jump(&mut p, Insn::jne_imm(R4, 0xfe, 0));
    p.extend([Insn::ldx_b(R4, R2, V6_DST + 1), Insn::and32_imm(R4, 0xc0)]);
    pass.jump(&mut p, Insn::jeq_imm(R4, 0x80, 0));
    own.land(&mut p);
    let regs = [R4, R5, R6, R7];
    for (k, r) in regs.iter().enumerate() {
        p.push(Insn::ldx_w(*r, R2, V6_DST + 4 * k as i16));
    }
    for addr in addrs {
        if let IpAddr::V6(v6) = addr {
            let mut next = Fixups::default();
            for (r, word) in regs.iter().zip(v6.octets().chunks(4)) {
                next.jump(&mut p, Insn::jne32_imm(*r, u32::from_ne_bytes(word.try_into().expect("4 bytes")), 0));
            }
            pass.jump(&mut p, Insn::ja(0));
            next.land(&mut p);
        }
    }
    drop.land(&mut p);
    p.extend([Insn::mov_imm(R0, TC_ACT_SHOT), Insn::exit()]);
    pass.land(&mut p);
    p.extend([Insn::mov_imm(R0, TC_ACT_OK), Insn::exit()]);
    p
}

/// The programs attached to each interface's tc ingress; detached when dropped.
pub struct KernelCopyDrop {
    _attached: Vec<(OwnedFd, OwnedFd)>,
}

impl KernelCopyDrop {
    /// Attaches a program to each of `ifaces` (name, the router's addresses on it), in this
    /// thread's network namespace. Needs tcx (Linux 6.6).
    pub fn attach(ifaces: &[(String, Vec<IpAddr>)], everything: bool) -> io::Result<KernelCopyDrop> {
        let mut attached = Vec::new();
        for (name, addrs) in ifaces {
            let ifindex = sys::ifindex(name).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no interface {name}")))?;
            let prog = load(addrs, everything)?;
            let link = bpf::link_tcx_ingress(prog.as_raw_fd(), ifindex)
                .map_err(|e| io::Error::new(e.kind(), format!("attaching to the tc ingress (tcx) of {name}: {e}")))?;
            attached.push((prog, link));
        }
        Ok(KernelCopyDrop { _attached: attached })
    }
}

fn load(addrs: &[IpAddr], everything: bool) -> io::Result<OwnedFd> {
    bpf::load_sched_cls(&program(addrs, everything), PROG_NAME)
        .map_err(|e| io::Error::new(e.source.kind(), format!("loading {PROG_NAME}: {}: {}", e.source, e.log.trim())))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn jumps_land_inside_the_program() {
        let addrs: Vec<IpAddr> = vec!["198.18.0.1".parse().unwrap(), "2001:db8::1".parse().unwrap(), "10.0.0.1".parse().unwrap()];
        let p = program(&addrs, false);
        crate::xdp::bpf::assert_jumps_land_inside(&p);
        assert_eq!(program(&addrs, true).len(), 2);
    }

    /// Each kind of frame against the verdict it must get (BPF_PROG_TEST_RUN; needs root).
    /// Truncated IP headers cannot be tested here (the test runner refuses them); the
    /// verifier proves every read is within the frame.
    #[test]
    fn verdicts() {
        if !crate::netdev::is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let addrs: Vec<IpAddr> = vec!["198.18.0.1".parse().unwrap(), "2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap()];
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
            assert_eq!(bpf::test_run(all.as_raw_fd(), frame).unwrap(), TC_ACT_SHOT as u32, "{what}, drop all");
        }
    }
}
