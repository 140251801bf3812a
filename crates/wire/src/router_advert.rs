//! Router discovery (RFC 4861 4.1, 4.2, 6): the Router Advertisements a router sends and the
//! validation of the Router Solicitations it answers.

use core::net::Ipv6Addr;

use crate::icmp_reply::out_frame;
use crate::ndisc::{ND_HOP_LIMIT, NdError, OPT_SOURCE_LL_ADDR, multicast_mac, ndp_option_mac};
use crate::{
    Error, EtherType, EthernetFrame, Icmpv6Packet, Icmpv6Type, IpProtocol, Ipv6Packet, MacAddr,
};

/// NDP option type: Prefix Information (RFC 4861 4.6.2).
pub const OPT_PREFIX_INFO: u8 = 3;
/// NDP option type: MTU (RFC 4861 4.6.4).
pub const OPT_MTU: u8 = 5;
/// All-nodes multicast (RFC 4291 2.7.1): where advertisements go.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

const ETH: usize = 14;
/// ICMPv6 header + hop limit, flags, router lifetime, reachable time, retrans timer.
const RA_BODY: usize = 16;
/// An RS's fixed part: ICMPv6 header + reserved.
const RS_BODY: usize = 8;
const LL_OPT: usize = 8;
const MTU_OPT: usize = 8;
const PREFIX_OPT: usize = 32;

/// Flags of an advertisement (RFC 4861 4.2), in the byte after the hop limit.
pub mod ra_flags {
    /// M: addresses are available from DHCPv6.
    pub const MANAGED: u8 = 0x80;
    /// O: other configuration is available from DHCPv6.
    pub const OTHER_CONFIG: u8 = 0x40;
}

/// Flags of a Prefix Information option (RFC 4861 4.6.2).
pub mod prefix_flags {
    /// L: the prefix is on-link.
    pub const ON_LINK: u8 = 0x80;
    /// A: hosts may form addresses in it (SLAAC, RFC 4862).
    pub const AUTONOMOUS: u8 = 0x40;
}

/// One Prefix Information option: on-link and autonomous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdvertPrefix {
    pub prefix: Ipv6Addr,
    pub len: u8,
    /// Seconds; `u32::MAX` is infinity.
    pub valid_lifetime: u32,
    pub preferred_lifetime: u32,
}

/// What an advertisement says (RFC 4861 4.2 and 6.2.1's variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterAdvert {
    /// Cur Hop Limit (0: unspecified).
    pub hop_limit: u8,
    pub managed: bool,
    pub other_config: bool,
    /// Router Lifetime, seconds (0: not a default router).
    pub router_lifetime: u16,
    /// Reachable Time and Retrans Timer, milliseconds (0: unspecified).
    pub reachable_time: u32,
    pub retrans_timer: u32,
    /// The MTU option, if sent.
    pub mtu: Option<u32>,
    pub prefixes: Vec<AdvertPrefix>,
}

impl RouterAdvert {
    /// The length of the frame [`router_advert`] builds (before padding to 60 bytes).
    pub fn frame_len(&self) -> usize {
        ETH + 40
            + RA_BODY
            + LL_OPT
            + self.mtu.map_or(0, |_| MTU_OPT)
            + PREFIX_OPT * self.prefixes.len()
    }
}

/// Builds the Router Advertisement `ra` from `router_mac` and its link-local address `src` to
/// all nodes (RFC 4861 6.2.4, 6.2.6: solicited ones are multicast too), hop limit 255, with a
/// Source Link-Layer Address option (so hosts need not resolve the router), the MTU option
/// and a Prefix Information option per prefix. Untagged.
///
/// Errors: `Malformed` if `src` is not link-local (6.1.2: hosts drop any other);
/// `BufferTooSmall`.
pub fn router_advert(
    router_mac: MacAddr,
    src: Ipv6Addr,
    ra: &RouterAdvert,
    buf: &mut [u8],
) -> Result<usize, Error> {
    if !src.is_unicast_link_local() {
        return Err(Error::Malformed);
    }
    let len = ra.frame_len();
    let out = out_frame(buf, len)?;
    let mut eth = EthernetFrame::new_unchecked(&mut *out);
    eth.set_dst_addr(multicast_mac(ALL_NODES));
    eth.set_src_addr(router_mac);
    eth.set_ethertype(EtherType::Ipv6);
    let ip = &mut out[ETH..len];
    let icmp = &mut ip[40..];
    icmp[4] = ra.hop_limit;
    icmp[5] = if ra.managed { ra_flags::MANAGED } else { 0 }
        | if ra.other_config { ra_flags::OTHER_CONFIG } else { 0 };
    icmp[6..8].copy_from_slice(&ra.router_lifetime.to_be_bytes());
    icmp[8..12].copy_from_slice(&ra.reachable_time.to_be_bytes());
    icmp[12..16].copy_from_slice(&ra.retrans_timer.to_be_bytes());
    let mut at = RA_BODY;
    icmp[at..at + LL_OPT].copy_from_slice(&[
        OPT_SOURCE_LL_ADDR,
        1,
        router_mac.0[0],
        router_mac.0[1],
        router_mac.0[2],
        router_mac.0[3],
        router_mac.0[4],
        router_mac.0[5],
    ]);
    at += LL_OPT;
    if let Some(mtu) = ra.mtu {
        icmp[at] = OPT_MTU;
        icmp[at + 1] = 1;
        icmp[at + 4..at + 8].copy_from_slice(&mtu.to_be_bytes());
        at += MTU_OPT;
    }
    for p in &ra.prefixes {
        let o = &mut icmp[at..at + PREFIX_OPT];
        o[0] = OPT_PREFIX_INFO;
        o[1] = 4;
        o[2] = p.len;
        o[3] = prefix_flags::ON_LINK | prefix_flags::AUTONOMOUS;
        o[4..8].copy_from_slice(&p.valid_lifetime.to_be_bytes());
        o[8..12].copy_from_slice(&p.preferred_lifetime.to_be_bytes());
        o[16..32].copy_from_slice(&p.prefix.octets());
        at += PREFIX_OPT;
    }
    let mut p = Icmpv6Packet::new_unchecked(&mut *icmp);
    p.set_msg_type(Icmpv6Type::RouterAdvert);
    p.set_code(0);
    p.fill_checksum(&src, &ALL_NODES);
    crate::icmp_reply::write_ipv6_header(ip, src, ALL_NODES, ND_HOP_LIMIT);
    Ok(len.max(crate::build::MIN_FRAME_LEN))
}

/// A Router Solicitation that passed RFC 4861 6.1.1's validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterSolicit {
    /// The unspecified address when the host has no address yet.
    pub src: Ipv6Addr,
    pub source_ll: Option<MacAddr>,
}

/// Validates the IPv6 packet `l3` as a Router Solicitation (RFC 4861 6.1.1): `Ok(None)` when
/// it is not one, `Err` naming the first failed check. Extension headers are not walked.
pub fn parse_router_solicit(l3: &[u8]) -> Result<Option<RouterSolicit>, NdError> {
    let Ok(ip) = Ipv6Packet::new_checked(l3) else { return Ok(None) };
    let Ok(icmp) = Icmpv6Packet::new_checked(ip.payload()) else { return Ok(None) };
    if ip.next_header() != IpProtocol::Icmpv6 || icmp.msg_type() != Icmpv6Type::RouterSolicit {
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
    let opts = ip.payload().get(RS_BODY..).ok_or(NdError::TooShort)?;
    let source_ll = match ndp_option_mac(opts, OPT_SOURCE_LL_ADDR) {
        Ok(m) => m,
        Err(Error::Malformed) => return Err(NdError::ZeroLengthOption),
        Err(_) => return Err(NdError::TooShort),
    };
    if src.is_unspecified() && source_ll.is_some() {
        return Err(NdError::DadSourceLlOption);
    }
    Ok(Some(RouterSolicit { src, source_ll }))
}

#[cfg(test)]
#[path = "router_advert_tests.rs"]
mod tests;
