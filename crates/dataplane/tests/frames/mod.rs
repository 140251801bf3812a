//! Frames the firewall and NAT tests send through a worker: UDP and TCP over IPv4, received
//! on port 0 or 1 (addressed to that port's MAC).
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};

use wire::build::{UdpFlow, udp_frame};
use wire::{IpProtocol, Ipv4Packet, MacAddr, TcpFlags, TcpPacket};

pub const RX_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
pub const TX_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);

/// The flow of a frame received on `port` from a host behind it.
pub fn flow(port: u16, src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> UdpFlow {
    let dst_mac = if port == 0 { RX_MAC } else { TX_MAC };
    UdpFlow {
        src_mac: MacAddr([2, 0, 0, 0, 0, 0x99]),
        dst_mac,
        src,
        dst,
        src_port: sport,
        dst_port: dport,
        ttl: 64,
    }
}

/// A UDP frame received on `port`.
pub fn udp(port: u16, src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Vec<u8> {
    let mut buf = vec![0u8; 128];
    let n = udp_frame(&flow(port, src.into(), sport, dst.into(), dport), 60, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// The same addresses as [`udp`] carrying a TCP segment, with a correct checksum.
#[allow(clippy::too_many_arguments)]
pub fn tcp(
    port: u16,
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    flags: u8,
    seq: u32,
    ack: u32,
) -> Vec<u8> {
    let mut f = udp(port, src, sport, dst, dport);
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
    ip.set_protocol(IpProtocol::Tcp);
    ip.fill_checksum();
    let mut t = TcpPacket::new_unchecked(&mut f[34..]);
    t.set_src_port(sport);
    t.set_dst_port(dport);
    t.set_seq_number(seq);
    t.set_ack_number(ack);
    t.set_header_len(20);
    t.set_flags(TcpFlags(flags));
    t.set_window_len(65535);
    t.set_checksum(0);
    let ck = tcp_checksum(&f[14..]);
    f[34 + 16..34 + 18].copy_from_slice(&ck.to_be_bytes());
    f
}

/// The TCP checksum of the IPv4 packet `ip` (RFC 9293 3.1: over the pseudo-header).
pub fn tcp_checksum(ip: &[u8]) -> u16 {
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let (src, dst) = (
        Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
    );
    let ps = wire::checksum::pseudo_header_v4(&src, &dst, ip[9], (total - 20) as u32);
    !wire::checksum::fold(u64::from(ps) + u64::from(wire::checksum::sum(&ip[20..total])))
}

/// The two-port world of the scrub, modulate and router's-own-packets tests: host A behind
/// port 0 ("if0"); 10/8 and 2001:db8:f::/48 behind B's gateway on port 1 ("if1").
pub mod world {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::sync::{Arc, OnceLock};

    use dataplane::fib::{Fib, FibControl};
    use wire::MacAddr;

    pub const A_HOST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    pub const A_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa2]);
    pub const B_GW: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
    pub const B_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb2]);
    pub const FAR: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 1);
    pub const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xa, 0, 0, 0, 0, 2);
    pub const FAR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xf, 0, 0, 0, 0, 1);
    pub const B_GW6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 2);

    pub fn fib() -> Arc<Fib> {
        static FIB: OnceLock<Arc<Fib>> = OnceLock::new();
        FIB.get_or_init(|| {
            let mut ctl = FibControl::new(64);
            ctl.set_neighbour(IpAddr::V4(A_HOST), 0, A_MAC).unwrap();
            ctl.set_neighbour(IpAddr::V4(B_GW), 1, B_MAC).unwrap();
            ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, IpAddr::V4(B_GW), 1).unwrap();
            ctl.set_neighbour(IpAddr::V6(A6), 0, A_MAC).unwrap();
            ctl.set_neighbour(IpAddr::V6(B_GW6), 1, B_MAC).unwrap();
            ctl.add_route(IpAddr::V6(FAR6), 48, IpAddr::V6(B_GW6), 1).unwrap();
            ctl.fib()
        })
        .clone()
    }

    pub fn ifaces(name: &str) -> Option<u16> {
        ["if0", "if1"].iter().position(|n| *n == name).map(|i| i as u16)
    }
}

/// An output port that keeps a copy of every frame it sends (not every test binary uses it).
#[allow(unused_imports)]
pub use io::mem::CaptureTx as Capture;

/// Recomputes the IPv4 header and TCP checksums of an untagged IPv4 TCP frame `f` (a
/// 20-byte IP header).
pub fn fix_tcp_v4(f: &mut [u8]) {
    f[24..26].fill(0);
    let c = wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[50..52].fill(0);
    let c = tcp_checksum(&f[14..]);
    f[50..52].copy_from_slice(&c.to_be_bytes());
}

/// Whether both checksums of such a frame hold, recomputed from scratch.
pub fn tcp_v4_checksums_hold(f: &[u8]) -> bool {
    let mut g = f.to_vec();
    fix_tcp_v4(&mut g);
    g[24..26] == f[24..26] && g[50..52] == f[50..52]
}
