//! What the filter stage reads from a packet: the classifier's [`PacketKey`] ([`extract`]),
//! the state table's IPv4 flow straight from the header ([`header_flow_v4`], the fast path), and
//! the TCP fields that state tracking needs.

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{Flow, FlowV4, TcpSegment};
use wire::{Ipv4Packet, Ipv6Packet, UdpPacket};

/// The state-table flow and IP length of an IPv4 UDP or TCP packet, read straight from its
/// header (`ip`: from the IP header on, which the classify pass validated): what a state
/// lookup needs, without building the classifier's [`PacketKey`]. Fills `tcp` for TCP (UDP
/// leaves it alone: nothing reads it unless [`extract`] runs). Only the common case: a
/// header without options, not a fragment (their ports come from [`super::frags`]), a
/// complete UDP or TCP header. `None` for
/// anything else, which then takes [`extract`] and the key-based lookup. For every packet it
/// accepts, the flow, length and TCP fields equal what [`extract`] gives (property test
/// below). It reads the bytes itself, one bounds check for the IP and UDP headers, rather
/// than through `wire`'s views: this is most of the fast path's cost.
#[inline(always)]
pub(crate) fn header_flow_v4(ip: &[u8], tcp: &mut Option<TcpSegment>) -> Option<(FlowV4, u16)> {
    // The IP header and the first 8 bytes of the L4 header (all of UDP's).
    let h: &[u8; 28] = ip.first_chunk()?;
    let total = lean_header(h)?;
    match h[9] {
        proto::UDP if udp_len_fits(h, total) => {}
        proto::TCP => *tcp = Some(tcp_segment(ip.get(20..usize::from(total))?)?),
        _ => return None,
    }
    Some((flow_v4(h), total))
}

/// [`header_flow_v4`] for UDP only (the quick loop's: TCP is left to the general path). `h`: 28
/// bytes from the IP header on, which may run past the end of the frame: they are all in the
/// packet when this accepts it (the classify pass checked that the IP total length fits in
/// the frame, and this checks that it holds 28 bytes).
#[inline(always)]
pub(crate) fn udp_flow_v4(h: &[u8; 28]) -> Option<(FlowV4, u16)> {
    let total = lean_header(h)?;
    if h[9] != proto::UDP || !udp_len_fits(h, total) {
        return None;
    }
    Some((flow_v4(h), total))
}

/// Whether the IPv4 packet at `l3` in `frame` (validated by the classify pass) is UDP,
/// whatever its header: what the quick loop checks of a packet [`udp_flow_v4`] rejects.
#[inline]
pub(crate) fn is_udp_v4(frame: &[u8], l3: usize) -> bool {
    frame.get(l3 + 9) == Some(&proto::UDP)
}

/// [`udp_flow_v4`] for IPv6: a UDP datagram right behind the IPv6 header (no extension
/// header) whose length field fits in the payload. `h`: 48 bytes from the IPv6 header on,
/// with the same guarantee as there (the classify pass checked the payload length against
/// the frame). The flow is [`Flow::v6`]'s; the length, the key's (header and payload).
#[inline(always)]
pub(crate) fn udp_flow_v6(h: &[u8; 48]) -> Option<(Flow, u16)> {
    let payload = u16::from_be_bytes([h[4], h[5]]);
    let udp_len = u16::from_be_bytes([h[44], h[45]]);
    if h[0] >> 4 != 6 || h[6] != proto::UDP || udp_len < 8 || udp_len > payload {
        return None;
    }
    let addr = |at: usize| u128::from_be_bytes(h[at..at + 16].try_into().unwrap_or_default());
    let port = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let flow = Flow::v6(proto::UDP, addr(8), port(40), addr(24), port(42));
    Some((flow, payload.saturating_add(40)))
}

/// Whether the IPv6 packet at `l3` of `frame` may be UDP although [`udp_flow_v6`] rejected
/// it: UDP with an odd length, or behind extension headers (any next header but TCP,
/// ICMPv6 and "no next header" may lead to UDP; the quick loop leaves the rest of the
/// batch behind such a packet).
#[inline]
pub(crate) fn may_be_udp_v6(frame: &[u8], l3: usize) -> bool {
    !matches!(frame.get(l3 + 6), Some(&(proto::TCP | proto::ICMPV6 | 59)))
}

/// The total length of an IPv4 header [`header_flow_v4`] takes: version 4, IHL 5, not a fragment
/// (offset 0 and no MF: every fragment goes to [`super::frags`] through the key path).
#[inline(always)]
fn lean_header(h: &[u8; 28]) -> Option<u16> {
    if h[0] != 0x45 || (h[6] & 0x3f) | h[7] != 0 {
        return None;
    }
    Some(u16::from_be_bytes([h[2], h[3]]))
}

/// Whether the UDP header's length field fits in the IP payload (as `UdpPacket::new_checked`
/// on the payload decides); false too when the IP payload cannot hold a UDP header.
#[inline(always)]
fn udp_len_fits(h: &[u8; 28], total: u16) -> bool {
    let len = u32::from(u16::from_be_bytes([h[24], h[25]]));
    len >= 8 && len + 20 <= u32::from(total)
}

/// The flow of a TCP or UDP packet: addresses and ports straight from their wire bytes.
#[inline(always)]
fn flow_v4(h: &[u8; 28]) -> FlowV4 {
    FlowV4::from_wire(
        h[9],
        [h[12], h[13], h[14], h[15]],
        [h[20], h[21]],
        [h[16], h[17], h[18], h[19]],
        [h[22], h[23]],
    )
}

/// The tracking fields of a TCP header (`l4`: from the header to the end of the IP payload),
/// if it is complete (as `TcpPacket::new_checked` decides; read directly for the reason
/// given at [`flow_v4`]).
#[inline(always)]
fn tcp_segment(l4: &[u8]) -> Option<TcpSegment> {
    let t: &[u8; 20] = l4.first_chunk()?;
    let hl = usize::from(t[12] >> 4) * 4;
    if hl < 20 || hl > l4.len() {
        return None;
    }
    let flags = t[13];
    Some(TcpSegment {
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        ack: u32::from_be_bytes([t[8], t[9], t[10], t[11]]),
        win: u16::from_be_bytes([t[14], t[15]]),
        flags,
        payload_len: (l4.len() - hl) as u16,
        wscale: if flags & fw::state::tcp_flags::SYN != 0 {
            wire::tcp::window_scale(&l4[20..hl])
        } else {
            None
        },
    })
}

/// Fills `key` and `tcp` for a packet the classify pass validated (`l3`: offset of its IP
/// header). Ports, ICMP type/code and TCP fields are read only from a first fragment whose L4
/// header is complete; otherwise they stay 0 / `None` (rules with ports then do not match).
/// Always inlined: it has two callers (the fast path's fallback, and the pass without states
/// where it is every packet's work), and the latter should not pay for a call.
#[inline(always)]
pub(crate) fn extract(
    frame: &[u8],
    l3: usize,
    v4: bool,
    port: u16,
    key: &mut PacketKey,
    tcp: &mut Option<TcpSegment>,
) {
    let bytes = frame.get(l3..).unwrap_or(&[]);
    let mut ip_opts = false;
    let (af, proto_, src, dst, len, l4): (Af, u8, u128, u128, u16, &[u8]) = if v4 {
        let ip = Ipv4Packet::new_unchecked(bytes);
        if ip.header_len() > 20 {
            ip_opts =
                v4_options(bytes.get(20..ip.header_len()).unwrap_or(&[]), ip.protocol().into());
        }
        // The view's payload() borrows the view; slice the frame by the validated lengths.
        let end = usize::from(ip.total_len()).min(bytes.len());
        let l4 = if ip.frag_offset() == 0 {
            bytes.get(ip.header_len()..end).unwrap_or(&[])
        } else {
            &[]
        };
        (
            Af::Inet,
            ip.protocol().into(),
            ip.src_addr_u32().into(),
            ip.dst_addr_u32().into(),
            ip.total_len(),
            l4,
        )
    } else {
        let ip = Ipv6Packet::new_unchecked(bytes);
        let total = 40 + usize::from(ip.payload_len());
        if !matches!(u8::from(ip.next_header()), proto::TCP | proto::UDP | proto::ICMPV6) {
            ip_opts = v6_options(bytes.get(..total.min(bytes.len())).unwrap_or(&[]));
        }
        let (p, l4) = match ip.upper_layer() {
            Ok((p, off)) if p != wire::IpProtocol::Ipv6Frag => {
                (u8::from(p), bytes.get(off..total.min(bytes.len())).unwrap_or(&[]))
            }
            _ => (u8::from(ip.next_header()), &[][..]),
        };
        (
            Af::Inet6,
            p,
            u128::from(ip.src_addr()),
            ip.dst_addr_u128(),
            total.min(usize::from(u16::MAX)) as u16,
            l4,
        )
    };
    *key = PacketKey {
        af,
        dir: Dir::In,
        iface: port,
        proto: proto_,
        src,
        dst,
        src_port: 0,
        dst_port: 0,
        tcp_flags: 0,
        len,
        icmp_id: 0,
        ip_opts,
        route: 0,
        tag: 0,
    };
    *tcp = None;
    match proto_ {
        proto::TCP => {
            if let (Some(seg), Some(&[s0, s1, d0, d1])) = (tcp_segment(l4), l4.first_chunk()) {
                key.src_port = u16::from_be_bytes([s0, s1]);
                key.dst_port = u16::from_be_bytes([d0, d1]);
                key.tcp_flags = seg.flags;
                *tcp = Some(seg);
            }
        }
        proto::UDP => {
            if let Ok(u) = UdpPacket::new_checked(l4) {
                key.src_port = u.src_port();
                key.dst_port = u.dst_port();
            }
        }
        proto::ICMP | proto::ICMPV6 => {
            if let [t, c, ..] = *l4 {
                key.src_port = t.into();
                key.dst_port = c.into();
                key.icmp_id = icmp_id(l4);
            }
        }
        _ => {}
    }
}

/// The identifier of an ICMP message (bytes 4-5: echo, timestamp, information and address
/// mask messages and their ICMPv6 counterparts carry it there; for other types it is not
/// part of the state key, see `fw::state::Flow`), 0 if the message is shorter.
fn icmp_id(icmp: &[u8]) -> u16 {
    icmp.get(4..6).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}

/// Whether IPv4 options (`opts`: the header past its first 20 bytes) hold anything but
/// padding, as pf's `pf_walk_option` decides: End of Options List ends them and No Operation
/// is padding (RFC 791); Router Alert (RFC 2113) is tolerated on IGMP, as pf does.
fn v4_options(opts: &[u8], proto_: u8) -> bool {
    const EOL: u8 = 0;
    const NOP: u8 = 1;
    const ROUTER_ALERT: u8 = 148;
    const IGMP: u8 = 2;
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            EOL => return false,
            NOP => i += 1,
            _ => {
                if kind != ROUTER_ALERT || proto_ != IGMP {
                    return true;
                }
                // Length byte counts the kind and itself; a malformed one ends the walk.
                let len = usize::from(*opts.get(i + 1).unwrap_or(&0));
                if len < 2 {
                    return true;
                }
                i += len;
            }
        }
    }
    false
}

/// Whether an IPv6 packet (`ip`: from its header to its end) carries what pf counts as
/// options: a routing header, or hop-by-hop options other than padding (RFC 8200 4.2: Pad1,
/// PadN). Destination options, fragment and AH headers are walked past; at most 8 headers
/// are looked at, as pf limits its walk.
fn v6_options(ip: &[u8]) -> bool {
    const HOP_BY_HOP: u8 = 0;
    const ROUTING: u8 = 43;
    const FRAGMENT: u8 = 44;
    const AH: u8 = 51;
    const DEST_OPTS: u8 = 60;
    let Some(&first) = ip.get(6) else { return false };
    let (mut next, mut off) = (first, 40);
    for _ in 0..8 {
        let Some(h) = ip.get(off..off + 2) else { return false };
        let len = match next {
            HOP_BY_HOP | DEST_OPTS => (usize::from(h[1]) + 1) * 8,
            ROUTING => return true,
            FRAGMENT => 8,
            AH => (usize::from(h[1]) + 2) * 4,
            _ => return false,
        };
        if next == HOP_BY_HOP && hop_by_hop_options(ip.get(off + 2..off + len).unwrap_or(&[])) {
            return true;
        }
        if next == FRAGMENT
            && ip
                .get(off + 2..off + 4)
                .is_some_and(|f| u16::from_be_bytes([f[0], f[1]]) & 0xfff8 != 0)
        {
            // A later fragment: the rest is payload.
            return false;
        }
        (next, off) = (h[0], off + len);
    }
    false
}

/// Whether hop-by-hop options hold anything but Pad1 (0) and PadN (1).
fn hop_by_hop_options(opts: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => i += 1,
            1 => i += 2 + usize::from(*opts.get(i + 1).unwrap_or(&0)),
            _ => return true,
        }
    }
    false
}

/// The packet an ICMP error quotes, as the key of the flow it belongs to (the quoted header's
/// addresses, protocol, ports or ICMP type and code), with its TCP sequence number; `key` is
/// the error's own key ([`extract`] of the same frame). `None` unless the error is addressed
/// to the quoted packet's source (as it is when it reports on that packet) and quotes enough
/// of it: the IP header and the first 8 bytes of TCP, 4 of UDP, 2 of ICMP (RFC 792 and 4443
/// guarantee 8). The quoted IPv6 header's extension headers are walked.
pub(crate) fn quoted(frame: &[u8], l3: usize, key: &PacketKey) -> Option<(PacketKey, Option<u32>)> {
    let ip = frame.get(l3..)?;
    let (af, icmp) = match key.af {
        Af::Inet => {
            let v = Ipv4Packet::new_checked(ip).ok()?;
            (Af::Inet, ip.get(v.header_len()..usize::from(v.total_len()))?)
        }
        Af::Inet6 => {
            let v = Ipv6Packet::new_checked(ip).ok()?;
            let (_, off) = v.upper_layer().ok()?;
            (Af::Inet6, ip.get(off..40 + usize::from(v.payload_len()))?)
        }
    };
    // The ICMP header (type, code, checksum, 4 more bytes), then the quoted packet.
    let q = icmp.get(8..)?;
    let (proto_, src, dst, l4): (u8, u128, u128, &[u8]) = match af {
        Af::Inet => {
            let h: &[u8; 20] = q.first_chunk()?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            if h[0] >> 4 != 4 || ihl < 20 {
                return None;
            }
            // A later fragment quotes no L4 header: its flow is unknown.
            let l4 =
                if u16::from_be_bytes([h[6], h[7]]) & 0x1fff == 0 { q.get(ihl..)? } else { &[] };
            let addr =
                |i: usize| u128::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
            (h[9], addr(12), addr(16), l4)
        }
        Af::Inet6 => {
            let v = Ipv6Packet::new_unchecked(q);
            if q.len() < 40 || v.version() != 6 {
                return None;
            }
            let (p, off) = v.upper_layer().ok()?;
            (u8::from(p), u128::from(v.src_addr()), v.dst_addr_u128(), q.get(off..)?)
        }
    };
    if src != key.dst {
        return None;
    }
    let (src_port, dst_port, seq) = match proto_ {
        proto::TCP => {
            let t: &[u8; 8] = l4.first_chunk()?;
            let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
            (u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]]), Some(seq))
        }
        proto::UDP => {
            let u: &[u8; 4] = l4.first_chunk()?;
            (u16::from_be_bytes([u[0], u[1]]), u16::from_be_bytes([u[2], u[3]]), None)
        }
        proto::ICMP | proto::ICMPV6 => {
            let [t, c, ..] = *l4 else { return None };
            (t.into(), c.into(), None)
        }
        _ => (0, 0, None),
    };
    let id = if matches!(proto_, proto::ICMP | proto::ICMPV6) { icmp_id(l4) } else { 0 };
    let k = PacketKey {
        af,
        dir: Dir::In,
        iface: key.iface,
        proto: proto_,
        src,
        dst,
        src_port,
        dst_port,
        tcp_flags: 0,
        len: 0,
        icmp_id: id,
        ip_opts: false,
        route: 0,
        tag: 0,
    };
    Some((k, seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::TcpPacket;

    /// An IPv4 packet as the classify pass lets through (`new_checked` holds; the checksum is
    /// irrelevant here): any protocol (mostly TCP and UDP), header with or without options,
    /// fragment bits, L4 bytes with plausible or random lengths and data offsets, and
    /// sometimes Ethernet padding after the datagram.
    fn packet() -> impl Strategy<Value = Vec<u8>> {
        let proto_ = prop_oneof![3 => Just(proto::UDP), 3 => Just(proto::TCP), 1 => Just(proto::ICMP), 1 => any::<u8>()];
        let frag = prop_oneof![3 => Just(0u16), 1 => Just(0x2000u16), 1 => any::<u16>()];
        let ihl = prop_oneof![4 => Just(5u8), 1 => 5u8..=15];
        let l4 = proptest::collection::vec(any::<u8>(), 0..80);
        let fix = prop_oneof![Just(0u8), Just(1), Just(2)];
        (proto_, frag, ihl, l4, fix, 0usize..8, any::<[u8; 8]>()).prop_map(
            |(p, frag, ihl, mut l4, fix, pad, addrs)| {
                // fix 1: a consistent UDP length or TCP data offset; 2: options / length off by one.
                if fix > 0 && l4.len() >= 20 {
                    let len = l4.len() as u16 - u16::from(fix == 2);
                    if p == proto::UDP {
                        l4[4..6].copy_from_slice(&len.to_be_bytes());
                    } else {
                        l4[12] =
                            if fix == 1 { 5 << 4 } else { (((l4.len() / 4) as u8).min(15)) << 4 };
                        l4[13] |= 0x02 * u8::from(fix == 2);
                    }
                }
                let hl = usize::from(ihl) * 4;
                let mut b = vec![0u8; hl];
                b[0] = 0x40 | ihl;
                b[2..4].copy_from_slice(&((hl + l4.len()) as u16).to_be_bytes());
                b[6..8].copy_from_slice(&frag.to_be_bytes());
                b[8] = 64;
                b[9] = p;
                b[12..20].copy_from_slice(&addrs);
                b.extend_from_slice(&l4);
                b.extend(std::iter::repeat_n(0xee, pad));
                b
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        /// The fast path's flow is the full key's flow identity, for every packet it accepts,
        /// with the same length and TCP fields; and it accepts every TCP/UDP packet it
        /// should (a header without options, not a fragment, a complete L4 header).
        #[test]
        fn lean_flow_is_the_key_flow(ip in packet()) {
            let v = Ipv4Packet::new_checked(&ip[..]);
            prop_assume!(v.is_ok());
            let v = v.unwrap();
            let mut frame = vec![0u8; 14];
            frame.extend_from_slice(&ip);
            let (mut key, mut tcp) = (PacketKey {
                af: Af::Inet6, dir: Dir::Out, iface: 0, proto: 0, src: 1, dst: 2, src_port: 3, dst_port: 4, tcp_flags: 5, len: 6,
                icmp_id: 0,
                ip_opts: false, route: 9, tag: 0,
            }, None);
            extract(&frame, 14, true, 7, &mut key, &mut tcp);
            let mut lean_tcp = None;
            let lean = header_flow_v4(&ip, &mut lean_tcp);
            let udp = ip.first_chunk().and_then(udp_flow_v4);
            prop_assert_eq!(udp, lean.filter(|(f, _)| f.proto() == proto::UDP));
            if let Some((flow, len)) = lean {
                prop_assert_eq!(flow.flow(), Flow::of(&key));
                prop_assert_eq!(len, key.len);
                if key.proto == proto::TCP {
                    prop_assert_eq!(lean_tcp, tcp);
                }
            }
            let l4 = v.payload();
            let complete = match u8::from(v.protocol()) {
                proto::UDP => wire::UdpPacket::new_checked(l4).is_ok(),
                proto::TCP => TcpPacket::new_checked(l4).is_ok(),
                _ => false,
            };
            prop_assert_eq!(lean.is_some(), v.header_len() == 20 && v.frag_offset() == 0 && !v.more_frags() && complete);
        }
    }

    /// An IPv6 packet as the classify pass lets it through: a header with random next header
    /// (UDP most often) and addresses, then up to 60 random bytes, the payload length at
    /// most that (the rest: Ethernet padding).
    fn packet_v6() -> impl Strategy<Value = Vec<u8>> {
        let next = prop_oneof![4 => Just(proto::UDP), 1 => Just(proto::TCP), 1 => Just(0u8), 1 => Just(44u8), 1 => any::<u8>()];
        (
            next,
            any::<u16>(),
            any::<[u8; 32]>(),
            proptest::collection::vec(any::<u8>(), 0..60),
            0u16..70,
        )
            .prop_map(|(next, payload, addrs, rest, udp_len)| {
                let payload = payload % (rest.len() as u16 + 1);
                let mut b = vec![0x60, 0, 0, 0];
                b.extend_from_slice(&payload.to_be_bytes());
                b.extend_from_slice(&[next, 64]);
                b.extend_from_slice(&addrs);
                b.extend_from_slice(&rest);
                if b.len() >= 46 {
                    b[44..46].copy_from_slice(&udp_len.to_be_bytes());
                }
                b
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        /// [`udp_flow_v6`] gives the full key's flow and length for every packet it accepts,
        /// accepts every UDP datagram right behind the header whose length fits (packets the
        /// classify pass accepts: the payload within the frame), and rejects no packet
        /// [`may_be_udp_v6`] then calls anything but UDP.
        #[test]
        fn lean_v6_flow_is_the_key_flow(ip in packet_v6()) {
            let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            let mut frame = vec![0u8; 14];
            frame.extend_from_slice(&ip);
            let mut key = PacketKey { af: Af::Inet, dir: Dir::Out, iface: 0, proto: 0, src: 1, dst: 2, src_port: 3, dst_port: 4, tcp_flags: 5, len: 6, icmp_id: 0, ip_opts: false, route: 9, tag: 0 };
            extract(&frame, 14, false, 7, &mut key, &mut None);
            let lean = ip.first_chunk().and_then(udp_flow_v6);
            if let Some((flow, len)) = lean {
                prop_assert_eq!(flow, Flow::of(&key));
                prop_assert_eq!(len, key.len);
                prop_assert!(!key.ip_opts);
            }
            let complete = ip[6] == proto::UDP && wire::UdpPacket::new_checked(&ip[40..40 + payload]).is_ok();
            prop_assert_eq!(lean.is_some(), complete);
            if lean.is_none() && key.proto == proto::UDP {
                prop_assert!(may_be_udp_v6(&frame, 14), "a UDP packet the quick loop cannot read stops it");
            }
        }
    }

    /// The quoted packet of ICMPv4 and ICMPv6 errors built by `wire::icmp_reply`, and errors
    /// not addressed to the quoted packet's source.
    #[test]
    fn quoted_packet_of_icmp_errors() {
        use std::net::IpAddr;
        use wire::MacAddr;
        use wire::build::{UdpFlow, udp_frame};
        use wire::icmp_reply::{IcmpError, icmp_error};
        let cases: [(IpAddr, IpAddr, IpAddr); 2] = [
            (
                "198.18.0.2".parse().unwrap(),
                "10.1.1.1".parse().unwrap(),
                "198.19.0.2".parse().unwrap(),
            ),
            (
                "2001:db8::2".parse().unwrap(),
                "2001:db8:1::1".parse().unwrap(),
                "2001:db8:2::1".parse().unwrap(),
            ),
        ];
        for (src, dst, router) in cases {
            let mac = MacAddr([2, 0, 0, 0, 0, 1]);
            let flow = UdpFlow {
                src_mac: mac,
                dst_mac: mac,
                src,
                dst,
                src_port: 1000,
                dst_port: 53,
                ttl: 64,
            };
            let mut orig = vec![0u8; 200];
            let n = udp_frame(&flow, 100, &mut orig).unwrap();
            let mut err = vec![0u8; 1500];
            let n = icmp_error(&orig[..n], IcmpError::TimeExceeded, router, mac, &mut err).unwrap();
            let err = &err[..n];
            let v4 = src.is_ipv4();
            let mut key = PacketKey {
                af: Af::Inet,
                dir: Dir::In,
                iface: 0,
                proto: 0,
                src: 0,
                dst: 0,
                src_port: 0,
                dst_port: 0,
                tcp_flags: 0,
                len: 0,
                icmp_id: 0,
                ip_opts: false,
                route: 0,
                tag: 0,
            };
            extract(err, 14, v4, 1, &mut key, &mut None);
            assert!(fw::state::is_icmp_error(key.proto, key.src_port), "{key:?}");
            let addr = |a: IpAddr| match a {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            };
            let (q, seq) = quoted(err, 14, &key).unwrap();
            assert_eq!((q.af, q.src, q.dst), (key.af, addr(src), addr(dst)));
            assert_eq!((q.proto, q.src_port, q.dst_port, seq), (proto::UDP, 1000, 53, None));
            assert_eq!(
                quoted(err, 14, &PacketKey { dst: addr(router), ..key }),
                None,
                "not to the quoted source"
            );
            // An error that quotes the IP header only: the flow is unknown.
            let mut short = err[..14 + if v4 { 20 + 8 + 20 } else { 40 + 8 + 40 }].to_vec();
            if v4 {
                Ipv4Packet::new_unchecked(&mut short[14..]).set_total_len(48);
            } else {
                Ipv6Packet::new_unchecked(&mut short[14..]).set_payload_len(48);
            }
            assert_eq!(quoted(&short, 14, &key), None, "no ports quoted");
            assert!(quoted(&err[..err.len() - 1], 14, &key).is_none(), "truncated frame");
        }
    }
}
