//! Stage 1, classify (see the module documentation of `forward`): L2 parse, RFC 1812
//! section 5.2.2 validation, martian checks, the destinations to look up; with a firewall, the
//! packets' places in the pool and, for the quick loop, their UDP flows.

use std::net::Ipv4Addr;

use io::batch::MAX_BATCH;
use io::{FrameDesc, FramePool};
use wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet};

use super::{ETH_LEN, Forwarder, Found, Lookups, PREFETCH_AHEAD, TAG_LEN};
use crate::counters::DropReason;
use crate::firewall::RoutedV4;
use crate::next::Next;
use crate::ports::{OwnAddrs, PortMap};

impl Forwarder {
    /// Stage 1: fills `next` for every frame and queues the destinations to look up. With a
    /// firewall it also lists where the IPv4 packets are (and, for the quick loop, their UDP
    /// flows), in an instance of its own.
    #[inline(always)]
    pub(super) fn classify(&mut self, pool: &FramePool, descs: &[FrameDesc]) -> Found {
        let udp_flows = self.firewall.as_ref().is_some_and(|f| f.reads_udp_flows());
        let (n4, n6) = match (&self.firewall, udp_flows) {
            (None, _) => self.classify_batch::<false, false>(pool, descs),
            (Some(_), true) => self.classify_batch::<true, true>(pool, descs),
            (Some(_), false) => self.classify_batch::<true, false>(pool, descs),
        };
        Found { n4, n6, udp_flows }
    }

    /// The classify pass over the batch; returns how many IPv4 and IPv6 lookups it queued.
    /// `FW`: also fills `v4_at` for the firewall, with the UDP flows if `FLOWS`. Out of
    /// line, each instance: the firewall's instances inlined beside the plain one made the
    /// plain pass slower, and the plain one inlined into `process` gained nothing measurable
    /// (docs/performance.md, "The forwarding node in stages").
    #[inline(never)]
    fn classify_batch<const FW: bool, const FLOWS: bool>(
        &mut self,
        pool: &FramePool,
        descs: &[FrameDesc],
    ) -> (usize, usize) {
        let mut lookups = Lookups {
            v4: &mut self.v4_dst,
            n4: 0,
            v6: &mut self.v6_dst,
            n6: 0,
            v4_at: &mut self.v4_at,
        };
        for d in descs.iter().take(PREFETCH_AHEAD) {
            pool.prefetch(*d);
        }
        for (i, (&desc, next)) in descs.iter().zip(self.next.iter_mut()).enumerate() {
            if let Some(&ahead) = descs.get(i + PREFETCH_AHEAD) {
                pool.prefetch(ahead);
            }
            let at = FW.then_some((desc.addr, i as u16));
            *next =
                classify_frame::<FLOWS>(pool.frame(desc), desc.port, &self.ports, &mut lookups, at);
        }
        (lookups.n4, lookups.n6)
    }
}

/// The classify pass for one frame: the checks that need only the frame's bytes.
/// `at`: the frame's pool address and index in the batch, to list it in `lookups.v4_at` if it
/// is IPv4 to route (`None`: list nothing), with its UDP flow if `FLOWS`.
#[inline(always)]
pub(super) fn classify_frame<const FLOWS: bool>(
    frame: &[u8],
    phys: u16,
    ports: &PortMap,
    lookups: &mut Lookups,
    at: Option<(u32, u16)>,
) -> Next {
    // Untagged or single-tagged IPv4/IPv6, the common cases, without the general L2 parse.
    let (ethertype, l3, vid) = match frame.get(12..14) {
        Some(&[0x08, 0x00]) => (EtherType::Ipv4, ETH_LEN, 0),
        Some(&[0x86, 0xdd]) => (EtherType::Ipv6, ETH_LEN, 0),
        Some(&[0x81, 0x00]) if matches!(frame.get(16..18), Some(&[0x08, 0x00])) => {
            (EtherType::Ipv4, ETH_LEN + TAG_LEN, u16::from_be_bytes([frame[14], frame[15]]) & 0xfff)
        }
        _ => {
            let l2 = match wire::parse_l2(frame) {
                Ok(l2) => l2,
                Err(_) => return Next::Drop(DropReason::Truncated),
            };
            // One tag selects a sub-interface; stacked tags (QinQ) are not configurable.
            let vid = match l2.vlans {
                [None, _] => 0,
                [Some(vid), None] => vid,
                _ => return Next::Drop(DropReason::UnknownVlan),
            };
            (l2.ethertype, l2.l3_offset, vid)
        }
    };
    let Some(logical) = ports.input(phys, vid) else {
        return Next::Drop(DropReason::UnknownVlan);
    };
    // A router takes unicast frames addressed to its own port only (it is not a bridge).
    let dst_mac = EthernetFrame::new_unchecked(frame).dst_addr();
    let group = dst_mac.is_multicast();
    if !group && dst_mac != ports.phys_mac(phys) {
        return Next::Drop(DropReason::NotForUs);
    }
    match ethertype {
        EtherType::Ipv4 => {
            classify_ipv4::<FLOWS>(&frame[l3..], l3, logical, &ports.own, lookups, at)
        }
        EtherType::Ipv6 => classify_ipv6(&frame[l3..], l3, logical, &ports.own, lookups),
        EtherType::Arp => Next::Local { in_port: logical },
        _ => Next::Drop(DropReason::UnknownEthertype),
    }
}

/// RFC 1812 5.2.2 validation and 5.3.7 martian filtering of an IPv4 header.
#[inline(always)]
fn classify_ipv4<const FLOWS: bool>(
    bytes: &[u8],
    l3: usize,
    in_port: u16,
    own: &OwnAddrs,
    lookups: &mut Lookups,
    at: Option<(u32, u16)>,
) -> Next {
    let ip = match Ipv4Packet::new_checked(bytes) {
        Ok(ip) => ip,
        Err(e) => return Next::Drop(ip_error_reason(e)),
    };
    if !ip.verify_checksum() {
        return Next::Drop(DropReason::BadChecksum);
    }
    let src = u32::from(ip.src_addr());
    let dst = ip.dst_addr_u32();
    // Every address the checks below care about has its first byte in UNUSUAL_V4 or may be
    // one of the router's: one test for them all on the common path, the checks out of line.
    let unusual =
        UNUSUAL_V4[(src >> 24) as usize] | UNUSUAL_V4[(dst >> 24) as usize] | own.maybe_v4(src);
    if unusual && let Some(next) = unusual_v4(src, dst, in_port, own) {
        return next;
    }
    // At most MAX_BATCH frames per batch, so the slot always exists.
    let slot = lookups.n4;
    lookups.v4[slot % MAX_BATCH] = dst;
    if let Some((addr, at)) = at {
        lookups.v4_at[slot % MAX_BATCH] = RoutedV4::new::<FLOWS>(addr + l3 as u32, at, bytes);
    }
    lookups.n4 += 1;
    Next::V4 { l3: l3 as u16, slot: slot as u16, in_port }
}

/// First bytes of the IPv4 addresses [`unusual_v4`] looks at: 0/8, 127/8, 169 (169.254/16),
/// multicast, class E and broadcast.
static UNUSUAL_V4: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 224;
    while b < 256 {
        t[b] = true;
        b += 1;
    }
    t[0] = true;
    t[127] = true;
    t[169] = true;
    t
};

/// The RFC 1812 5.3.7 and RFC 3927 2.7 checks of a packet whose addresses look unusual:
/// its next, or `None` if it is routed after all.
#[cold]
#[inline(never)]
fn unusual_v4(src: u32, dst: u32, in_port: u16, own: &OwnAddrs) -> Option<Next> {
    let (src_hi, dst_hi) = ((src >> 24) as u8, (dst >> 24) as u8);
    // Sources 0/8, 127/8, multicast and class E / broadcast are never forwarded.
    let martian = src_hi == 0 || src_hi == 127 || src_hi >= 224;
    // Multicast and limited broadcast are for the host stack (no multicast routing), also
    // from 0.0.0.0: a host without an address yet (a DHCP client's DISCOVER, RFC 2131 4.1;
    // an IGMPv3 report, RFC 3376 4.2.13). RFC 1812 5.3.7 forbids forwarding such a source,
    // not receiving it.
    if (224..240).contains(&dst_hi) || dst == u32::from(Ipv4Addr::BROADCAST) {
        return Some(if martian && src != 0 {
            Next::Drop(DropReason::MartianSource)
        } else {
            Next::Local { in_port }
        });
    }
    if martian {
        return Some(Next::Drop(DropReason::MartianSource));
    }
    if dst_hi == 0 || dst_hi == 127 || dst_hi >= 240 {
        return Some(Next::Drop(DropReason::MartianDestination));
    }
    // RFC 3927 2.7: a link-local source or destination is never forwarded; only a packet for
    // one of the router's addresses is taken.
    if ((src >> 16) == 0xa9fe || (dst >> 16) == 0xa9fe) && !own.has_v4(dst) {
        return Some(Next::Drop(DropReason::LinkLocal));
    }
    // One of the router's own addresses as the source of a packet from outside: spoofed, or
    // looped back (Linux drops it as a martian source).
    own.has_v4(src).then_some(Next::Drop(DropReason::MartianSource))
}

/// IPv6 header checks (RFC 8200 section 3; RFC 4291 address scopes).
#[inline(always)]
fn classify_ipv6(
    bytes: &[u8],
    l3: usize,
    in_port: u16,
    own: &OwnAddrs,
    lookups: &mut Lookups,
) -> Next {
    let ip = match Ipv6Packet::new_checked(bytes) {
        Ok(ip) => ip,
        Err(e) => return Next::Drop(ip_error_reason(e)),
    };
    let src = u128::from(ip.src_addr());
    let dst = ip.dst_addr_u128();
    // As for IPv4: one test on the common path, the checks out of line.
    let unusual = unusual_top_v6(src) | unusual_top_v6(dst) | own.maybe_v6(src);
    if unusual && let Some(next) = unusual_v6(src, dst, in_port, own) {
        return next;
    }
    let slot = lookups.n6;
    lookups.v6[slot % MAX_BATCH] = dst;
    lookups.n6 += 1;
    Next::V6 { l3: l3 as u16, slot: slot as u16, in_port }
}

/// Whether `a` is in ::/64 (::, ::1 among them) or fe80::/10 and above (link-local, site-local,
/// multicast): the addresses [`unusual_v6`] looks at.
#[inline(always)]
fn unusual_top_v6(a: u128) -> bool {
    (a >> 64) == 0 || (a >> 118) >= 0x3fa
}

/// The RFC 4291 checks of a packet whose addresses look unusual: its next, or `None` if it is
/// routed after all.
#[cold]
#[inline(never)]
fn unusual_v6(src: u128, dst: u128, in_port: u16, own: &OwnAddrs) -> Option<Next> {
    // Multicast and loopback sources are never forwarded.
    if (src >> 120) == 0xff || src == 1 {
        return Some(Next::Drop(DropReason::MartianSource));
    }
    // Multicast (NDP among it) and link-local destinations are never forwarded.
    if (dst >> 120) == 0xff || (dst >> 118) == 0x3fa {
        return Some(Next::Local { in_port });
    }
    if dst == 0 || dst == 1 {
        return Some(Next::Drop(DropReason::MartianDestination));
    }
    // RFC 4291 2.5.6: a link-local source (fe80::/10) is never forwarded to another link.
    if (src >> 118) == 0x3fa && !own.has_v6(dst) {
        return Some(Next::Drop(DropReason::LinkLocal));
    }
    own.has_v6(src).then_some(Next::Drop(DropReason::MartianSource))
}

fn ip_error_reason(e: wire::Error) -> DropReason {
    match e {
        wire::Error::Truncated => DropReason::Truncated,
        wire::Error::BadVersion => DropReason::BadVersion,
        _ => DropReason::BadLength,
    }
}
