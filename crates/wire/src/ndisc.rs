//! Address resolution messages a router sends: ARP requests and replies (RFC 826) and IPv6
//! Neighbor Solicitations and Advertisements (RFC 4861 4.3, 4.4, 7.2).
//!
//! Builders write a complete Ethernet frame into the start of the caller's buffer and return
//! its length (at least 60 bytes, zero-padded). Replies keep the VLAN tags of the request.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::icmp_reply::{out_frame, reply_l2};
use crate::{
    ArpOperation, ArpPacket, Error, EtherType, EthernetFrame, Icmpv6Packet, Icmpv6Type, IpProtocol,
    Ipv6Packet, MacAddr, parse_l2,
};

/// Hop limit of every Neighbor Discovery message; receivers drop any other (RFC 4861 7.1).
pub const ND_HOP_LIMIT: u8 = 255;
/// NDP option type: Source Link-Layer Address (RFC 4861 4.6.1).
pub const OPT_SOURCE_LL_ADDR: u8 = 1;
/// NDP option type: Target Link-Layer Address (RFC 4861 4.6.1).
pub const OPT_TARGET_LL_ADDR: u8 = 2;

/// Neighbor Advertisement flags (RFC 4861 4.4), in the first byte after the checksum.
pub mod na_flags {
    /// R: the sender is a router.
    pub const ROUTER: u32 = 0x8000_0000;
    /// S: sent in response to a Neighbor Solicitation.
    pub const SOLICITED: u32 = 0x4000_0000;
    /// O: override an existing cache entry.
    pub const OVERRIDE: u32 = 0x2000_0000;
}

const ETH: usize = 14;
/// ICMPv6 header + target address.
const ND_BODY: usize = 24;
/// One link-layer address option on Ethernet: type, length 1 (8 bytes), MAC.
const LL_OPT: usize = 8;

/// The solicited-node multicast address of `addr`: ff02::1:ff00:0/104 plus its low 24 bits
/// (RFC 4291 2.7.1).
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address an IPv6 multicast address maps to: 33:33 and its low 32 bits
/// (RFC 2464 7).
pub fn multicast_mac(addr: Ipv6Addr) -> MacAddr {
    let o = addr.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// The MAC of the first link-layer address option of type `opt_type` in NDP `options` (the
/// bytes after the fixed part of the message), if any. An option of length 0 is `Malformed`
/// (RFC 4861 4.6: the message must be discarded), one running past the end `Truncated`.
pub fn ndp_option_mac(options: &[u8], opt_type: u8) -> Result<Option<MacAddr>, Error> {
    let mut rest = options;
    let mut found = None;
    while !rest.is_empty() {
        let [t, units, ..] = *rest else {
            return Err(Error::Truncated);
        };
        let len = usize::from(units) * 8;
        if len == 0 {
            return Err(Error::Malformed);
        }
        let opt = rest.get(..len).ok_or(Error::Truncated)?;
        if t == opt_type && found.is_none() && len >= LL_OPT {
            let mut m = [0u8; 6];
            m.copy_from_slice(&opt[2..8]);
            found = Some(MacAddr(m));
        }
        rest = &rest[len..];
    }
    Ok(found)
}

/// Why a Neighbor Solicitation or Advertisement is discarded (RFC 4861 7.1.1, 7.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdError {
    /// IP hop limit is not 255: the message may come from off the link.
    HopLimit,
    /// The ICMPv6 checksum is wrong.
    Checksum,
    /// ICMP code is not 0.
    Code,
    /// ICMP length is under 24 bytes, or an option runs past the end.
    TooShort,
    /// The target address is a multicast address.
    TargetMulticast,
    /// An option has length 0.
    ZeroLengthOption,
    /// A solicitation from the unspecified address (duplicate address detection) carries a
    /// source link-layer address option.
    DadSourceLlOption,
    /// A solicitation from the unspecified address is not sent to a solicited-node group.
    DadDestination,
    /// An advertisement to a multicast address has the Solicited flag.
    MulticastSolicited,
}

impl NdError {
    /// Every reason, in a fixed order (for counter arrays).
    pub const ALL: [NdError; 9] = [
        NdError::HopLimit,
        NdError::Checksum,
        NdError::Code,
        NdError::TooShort,
        NdError::TargetMulticast,
        NdError::ZeroLengthOption,
        NdError::DadSourceLlOption,
        NdError::DadDestination,
        NdError::MulticastSolicited,
    ];

    /// A short snake_case name for counters.
    pub fn name(self) -> &'static str {
        match self {
            NdError::HopLimit => "nd_hop_limit",
            NdError::Checksum => "nd_checksum",
            NdError::Code => "nd_code",
            NdError::TooShort => "nd_too_short",
            NdError::TargetMulticast => "nd_target_multicast",
            NdError::ZeroLengthOption => "nd_zero_length_option",
            NdError::DadSourceLlOption => "nd_dad_source_ll_option",
            NdError::DadDestination => "nd_dad_destination",
            NdError::MulticastSolicited => "nd_multicast_solicited",
        }
    }
}

/// A Neighbor Solicitation or Advertisement that passed RFC 4861 7.1's validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdMessage {
    /// `NeighborSolicit` or `NeighborAdvert`.
    pub kind: Icmpv6Type,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub target: Ipv6Addr,
    /// The NA flags word ([`na_flags`]); 0 in a solicitation.
    pub flags: u32,
    /// The Source Link-Layer Address option, if any.
    pub source_ll: Option<MacAddr>,
    /// The Target Link-Layer Address option, if any.
    pub target_ll: Option<MacAddr>,
}

impl NdMessage {
    /// An advertisement's Solicited flag.
    pub fn solicited(&self) -> bool {
        self.flags & na_flags::SOLICITED != 0
    }

    /// An advertisement's Override flag.
    pub fn override_flag(&self) -> bool {
        self.flags & na_flags::OVERRIDE != 0
    }
}

/// Validates the IPv6 packet `l3` as a Neighbor Solicitation or Advertisement, as RFC 4861
/// 7.1.1 and 7.1.2 require before a node may act on one: `Ok(None)` when it is neither
/// (another next header or ICMPv6 type), `Err` naming the first failed check otherwise.
/// Extension headers are not walked: NDP messages carry none on a router's links.
pub fn parse_nd(l3: &[u8]) -> Result<Option<NdMessage>, NdError> {
    let Ok(ip) = Ipv6Packet::new_checked(l3) else { return Ok(None) };
    let Ok(icmp) = Icmpv6Packet::new_checked(ip.payload()) else { return Ok(None) };
    let kind = icmp.msg_type();
    if ip.next_header() != IpProtocol::Icmpv6
        || !matches!(kind, Icmpv6Type::NeighborSolicit | Icmpv6Type::NeighborAdvert)
    {
        return Ok(None);
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if ip.hop_limit() != ND_HOP_LIMIT {
        return Err(NdError::HopLimit);
    }
    if !icmp.verify_checksum(&src, &dst) {
        return Err(NdError::Checksum);
    }
    if icmp.code() != 0 {
        return Err(NdError::Code);
    }
    let target = icmp.ndp_target_addr().ok_or(NdError::TooShort)?;
    if target.is_multicast() {
        return Err(NdError::TargetMulticast);
    }
    let opts = ip.payload().get(ND_BODY..).unwrap_or(&[]);
    let option = |t| match ndp_option_mac(opts, t) {
        Ok(m) => Ok(m),
        Err(Error::Malformed) => Err(NdError::ZeroLengthOption),
        Err(_) => Err(NdError::TooShort),
    };
    let (source_ll, target_ll) = (option(OPT_SOURCE_LL_ADDR)?, option(OPT_TARGET_LL_ADDR)?);
    let flags = if kind == Icmpv6Type::NeighborAdvert { icmp.rest_of_header() } else { 0 };
    if kind == Icmpv6Type::NeighborSolicit && src.is_unspecified() {
        if source_ll.is_some() {
            return Err(NdError::DadSourceLlOption);
        }
        if dst != solicited_node(target) {
            return Err(NdError::DadDestination);
        }
    }
    if kind == Icmpv6Type::NeighborAdvert && dst.is_multicast() && flags & na_flags::SOLICITED != 0
    {
        return Err(NdError::MulticastSolicited);
    }
    Ok(Some(NdMessage { kind, src, dst, target, flags, source_ll, target_ll }))
}

/// Builds the ARP reply (RFC 826, "Packet Reception") to the ARP request in `frame` for
/// `router_ip`: "`router_ip` is at `router_mac`", sent to the requester's hardware address.
///
/// Errors: `Malformed` if the frame is not an Ethernet/IPv4 ARP request for `router_ip`; the
/// parse errors; `BufferTooSmall`.
pub fn arp_reply(
    frame: &[u8],
    router_mac: MacAddr,
    router_ip: Ipv4Addr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let l2 = parse_l2(frame)?;
    if l2.ethertype != EtherType::Arp {
        return Err(Error::Malformed);
    }
    let req = ArpPacket::new_checked(&frame[l2.l3_offset..])?;
    if req.operation() != ArpOperation::Request || req.target_proto_addr() != router_ip {
        return Err(Error::Malformed);
    }
    let len = l2.l3_offset + ArpPacket::<&[u8]>::LEN;
    let out = out_frame(buf, len)?;
    let off = reply_l2(out, frame, &l2, router_mac, EtherType::Arp);
    EthernetFrame::new_unchecked(&mut *out).set_dst_addr(req.sender_hw_addr());
    let mut arp = ArpPacket::new_unchecked(&mut out[off..]);
    arp.init_ethernet_ipv4();
    arp.set_operation(ArpOperation::Reply);
    arp.set_sender_hw_addr(router_mac);
    arp.set_sender_proto_addr(router_ip);
    arp.set_target_hw_addr(req.sender_hw_addr());
    arp.set_target_proto_addr(req.sender_proto_addr());
    Ok(len.max(crate::build::MIN_FRAME_LEN))
}

/// Builds an ARP request "who has `target_ip`? tell `router_ip`" from `router_mac`: broadcast
/// when `dst_mac` is `None`, unicast to `dst_mac` otherwise (to re-check a cached entry,
/// as RFC 4861 7.3.3's PROBE does for IPv6). The target hardware address is zero.
pub fn arp_request(
    router_mac: MacAddr,
    router_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
    dst_mac: Option<MacAddr>,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let len = ETH + ArpPacket::<&[u8]>::LEN;
    let out = out_frame(buf, len)?;
    let mut eth = EthernetFrame::new_unchecked(&mut *out);
    eth.set_dst_addr(dst_mac.unwrap_or(MacAddr::BROADCAST));
    eth.set_src_addr(router_mac);
    eth.set_ethertype(EtherType::Arp);
    let mut arp = ArpPacket::new_unchecked(&mut out[ETH..]);
    arp.init_ethernet_ipv4();
    arp.set_operation(ArpOperation::Request);
    arp.set_sender_hw_addr(router_mac);
    arp.set_sender_proto_addr(router_ip);
    arp.set_target_hw_addr(MacAddr::ZERO);
    arp.set_target_proto_addr(target_ip);
    Ok(len.max(crate::build::MIN_FRAME_LEN))
}

/// Writes an NS/NA (type, flags word, target, one link-layer option) into `icmp` and fills
/// its checksum.
fn write_nd(
    icmp: &mut [u8],
    t: Icmpv6Type,
    flags: u32,
    target: Ipv6Addr,
    opt: Option<(u8, MacAddr)>,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
) {
    icmp[8..24].copy_from_slice(&target.octets());
    if let Some((opt_type, mac)) = opt {
        icmp[24] = opt_type;
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&mac.0);
    }
    let mut p = Icmpv6Packet::new_unchecked(icmp);
    p.set_msg_type(t);
    p.set_code(0);
    p.set_rest_of_header(flags);
    p.fill_checksum(src, dst);
}

fn write_ipv6(ip: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
    crate::icmp_reply::write_ipv6_header(ip, src, dst, ND_HOP_LIMIT);
}

/// Builds the Neighbor Advertisement answering the Neighbor Solicitation in `frame` for
/// `target` (an address of the router), per RFC 4861 7.2.4: from `target`, with the Router
/// and Override flags (4.4; the router answers for its own unicast addresses, not anycast) and
/// a Target Link-Layer Address option carrying `router_mac`. If the solicitation came from a
/// node (unicast source) the advertisement is Solicited and goes to it, at the MAC of its
/// Source Link-Layer Address option or else the frame's source; if it came from the
/// unspecified address (duplicate address detection) it goes to all-nodes ff02::1, not
/// Solicited.
///
/// The solicitation is validated by [`parse_nd`] (RFC 4861 7.1.1). Any failure, or a target
/// other than `target`, is `Malformed`.
pub fn neighbor_advert(
    frame: &[u8],
    router_mac: MacAddr,
    target: Ipv6Addr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    advert_for(frame, router_mac, target, na_flags::OVERRIDE, buf)
}

/// [`neighbor_advert`] for an anycast `target` (the router's Subnet-Router anycast address,
/// RFC 4291 2.6.1): without the Override flag (RFC 4861 7.2.4), so that a neighbour keeps the
/// link-layer address it has for it. (The RFC's random delay of up to a second is left out:
/// the router answers at once.)
pub fn anycast_neighbor_advert(
    frame: &[u8],
    router_mac: MacAddr,
    target: Ipv6Addr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    advert_for(frame, router_mac, target, 0, buf)
}

fn advert_for(
    frame: &[u8],
    router_mac: MacAddr,
    target: Ipv6Addr,
    override_flag: u32,
    buf: &mut [u8],
) -> Result<usize, Error> {
    let l2 = parse_l2(frame)?;
    if l2.ethertype != EtherType::Ipv6 {
        return Err(Error::Malformed);
    }
    let l3 = &frame[l2.l3_offset..];
    Ipv6Packet::new_checked(l3)?;
    let ns = match parse_nd(l3) {
        Ok(Some(ns)) if ns.kind == Icmpv6Type::NeighborSolicit && ns.target == target => ns,
        _ => return Err(Error::Malformed),
    };
    let dad = ns.src.is_unspecified();
    let (dst, dst_mac, flags) = if dad {
        let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        (all_nodes, multicast_mac(all_nodes), na_flags::ROUTER | override_flag)
    } else {
        let mac = ns.source_ll.unwrap_or_else(|| EthernetFrame::new_unchecked(frame).src_addr());
        let f = na_flags::ROUTER | na_flags::SOLICITED | override_flag;
        (ns.src, mac, f)
    };
    let ip_len = 40 + ND_BODY + LL_OPT;
    let len = l2.l3_offset + ip_len;
    let out = out_frame(buf, len)?;
    let off = reply_l2(out, frame, &l2, router_mac, EtherType::Ipv6);
    EthernetFrame::new_unchecked(&mut *out).set_dst_addr(dst_mac);
    let ip = &mut out[off..off + ip_len];
    let opt = Some((OPT_TARGET_LL_ADDR, router_mac));
    write_nd(&mut ip[40..], Icmpv6Type::NeighborAdvert, flags, target, opt, &target, &dst);
    write_ipv6(ip, target, dst);
    Ok(len.max(crate::build::MIN_FRAME_LEN))
}

/// Builds an unsolicited Neighbor Advertisement of `target` at `router_mac` to all nodes
/// (RFC 4861 7.2.6: sent when a link-layer address becomes known or changes, here when the
/// router starts), with the Router and Override flags and a Target Link-Layer Address
/// option, so neighbours update their caches at once. Untagged.
pub fn unsolicited_advert(
    router_mac: MacAddr,
    target: Ipv6Addr,
    buf: &mut [u8],
) -> Result<usize, Error> {
    if target.is_multicast() || target.is_unspecified() {
        return Err(Error::Malformed);
    }
    let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    let ip_len = 40 + ND_BODY + LL_OPT;
    let len = ETH + ip_len;
    let out = out_frame(buf, len)?;
    let mut eth = EthernetFrame::new_unchecked(&mut *out);
    eth.set_dst_addr(multicast_mac(all_nodes));
    eth.set_src_addr(router_mac);
    eth.set_ethertype(EtherType::Ipv6);
    let ip = &mut out[ETH..ETH + ip_len];
    let flags = na_flags::ROUTER | na_flags::OVERRIDE;
    write_nd(
        &mut ip[40..],
        Icmpv6Type::NeighborAdvert,
        flags,
        target,
        Some((OPT_TARGET_LL_ADDR, router_mac)),
        &target,
        &all_nodes,
    );
    write_ipv6(ip, target, all_nodes);
    Ok(len.max(crate::build::MIN_FRAME_LEN))
}

/// Builds a Neighbor Solicitation for `target` from `src` (an address of the router on the
/// link) and `router_mac`, with a Source Link-Layer Address option (RFC 4861 4.3, 7.2.2).
/// With `dst_mac` `None` it goes to the target's solicited-node multicast address (address
/// resolution); with `Some(mac)` it is unicast to the target at `mac` (reachability
/// confirmation, 7.3.3 PROBE). If `src` is unspecified (duplicate address detection) the
/// option is left out, as 4.3 requires.
pub fn neighbor_solicit(
    router_mac: MacAddr,
    src: Ipv6Addr,
    target: Ipv6Addr,
    dst_mac: Option<MacAddr>,
    buf: &mut [u8],
) -> Result<usize, Error> {
    if target.is_multicast() {
        return Err(Error::Malformed);
    }
    let (dst, mac) = match dst_mac {
        Some(mac) => (target, mac),
        None => {
            let group = solicited_node(target);
            (group, multicast_mac(group))
        }
    };
    let opt = (!src.is_unspecified()).then_some((OPT_SOURCE_LL_ADDR, router_mac));
    let ip_len = 40 + ND_BODY + if opt.is_some() { LL_OPT } else { 0 };
    let len = ETH + ip_len;
    let out = out_frame(buf, len)?;
    let mut eth = EthernetFrame::new_unchecked(&mut *out);
    eth.set_dst_addr(mac);
    eth.set_src_addr(router_mac);
    eth.set_ethertype(EtherType::Ipv6);
    let ip = &mut out[ETH..ETH + ip_len];
    write_nd(&mut ip[40..], Icmpv6Type::NeighborSolicit, 0, target, opt, &src, &dst);
    write_ipv6(ip, src, dst);
    Ok(len.max(crate::build::MIN_FRAME_LEN))
}
