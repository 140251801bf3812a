//! Cutting a GSO frame into the segments a NIC would send (TSO for TCP, USO for UDP_L4), as
//! the kernel's `tcp_gso_segment` and `__udp_gso_segment` do.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use wire::checksum::{checksum, fold, pseudo_header_v4, pseudo_header_v6, sum};

use super::gso_type::{ECN, TCPV4, TCPV6, UDP_L4};
use super::{ETH_IPV4, ETH_IPV6, OffloadError, PROTO_TCP, PROTO_UDP, VnetHdr, l3_start};

/// TCP flags that belong to one segment only (RFC 9293 3.1; `tcp_gso_segment`).
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// How one GSO frame is cut, checked once against the frame and its [`VnetHdr`]; then each
/// segment is written on its own ([`write`](Self::write)), so a port can stop between two
/// (batch full, pool empty) and go on later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsoPlan {
    /// Offsets in the received frame: network header, transport header, end of headers.
    l3: usize,
    l4: usize,
    hdrs: usize,
    ipv6: bool,
    tcp: bool,
    /// Payload bytes per segment (the last one may carry fewer) and in all.
    mss: usize,
    payload: usize,
    /// The 802.1Q tag the kernel stripped (TPID, TCI), put back after the MAC addresses.
    tag: Option<[u8; 4]>,
}

impl GsoPlan {
    /// Plans the segments of `frame` (Ethernet header onwards, as received; `tag`: a VLAN tag
    /// the kernel took off it), none longer than `max_frame` bytes. TCP segments shrink below
    /// `gso_size` if they must to fit (a receiver takes any segment up to its MSS); UDP
    /// datagrams cannot be cut, so a larger `gso_size` is [`OffloadError::Unsupported`].
    pub fn new(
        frame: &[u8],
        hdr: &VnetHdr,
        tag: Option<(u16, u16)>,
        max_frame: usize,
    ) -> Result<GsoPlan, OffloadError> {
        use OffloadError::{Malformed, Unsupported};
        let kind = hdr.gso_type & !ECN;
        let tcp = match kind {
            TCPV4 | TCPV6 => true,
            UDP_L4 => false,
            _ => return Err(Unsupported),
        };
        let (l3, et) = l3_start(frame).ok_or(Malformed)?;
        let IpHeader { ipv6, l4, proto } = match et {
            ETH_IPV4 if kind != TCPV6 => ipv4_l4(frame, l3)?,
            ETH_IPV6 if kind != TCPV4 => ipv6_l4(frame, l3)?,
            _ => return Err(Malformed),
        };
        if proto != if tcp { PROTO_TCP } else { PROTO_UDP } {
            return Err(Malformed);
        }
        let l4_len =
            if tcp { usize::from(frame.get(l4 + 12).ok_or(Malformed)? >> 4) * 4 } else { 8 };
        let hdrs = l4 + l4_len;
        if l4_len < 8 || hdrs >= frame.len() || hdr.gso_size == 0 {
            return Err(Malformed);
        }
        let tag_len = if tag.is_some() { 4 } else { 0 };
        let room = max_frame.saturating_sub(hdrs + tag_len);
        let gso = usize::from(hdr.gso_size);
        let mss = match (tcp, gso <= room) {
            (_, true) => gso,
            (true, false) if room > 0 => room,
            _ => return Err(Unsupported),
        };
        let tag = tag.map(|(tpid, tci)| {
            let (p, c) = (tpid.to_be_bytes(), tci.to_be_bytes());
            [p[0], p[1], c[0], c[1]]
        });
        Ok(GsoPlan { l3, l4, hdrs, ipv6, tcp, mss, payload: frame.len() - hdrs, tag })
    }

    /// Number of segments.
    pub fn segments(&self) -> usize {
        self.payload.div_ceil(self.mss)
    }

    /// Payload bytes of segment `i`, as a range of the frame's payload.
    fn chunk(&self, i: usize) -> Range<usize> {
        let start = (i * self.mss).min(self.payload);
        start..(start + self.mss).min(self.payload)
    }

    fn tag_len(&self) -> usize {
        if self.tag.is_some() { 4 } else { 0 }
    }

    /// Length of segment `i` on the wire.
    pub fn segment_len(&self, i: usize) -> usize {
        self.tag_len() + self.hdrs + self.chunk(i).len()
    }

    /// Writes segment `i` of `frame` (the frame given to [`new`](Self::new)) into `out`,
    /// which must be [`segment_len`](Self::segment_len) bytes: headers copied, then IP
    /// length, IPv4 id (+i, as the kernel counts) and header checksum, TCP sequence number
    /// and per-segment flags or UDP length, and a full TCP/UDP checksum.
    pub fn write(&self, frame: &[u8], i: usize, out: &mut [u8]) -> Result<(), OffloadError> {
        let chunk = self.chunk(i);
        let t = self.tag_len();
        let payload = frame
            .get(self.hdrs + chunk.start..self.hdrs + chunk.end)
            .ok_or(OffloadError::Malformed)?;
        if out.len() != self.segment_len(i)
            || frame.len() != self.hdrs + self.payload
            || chunk.is_empty()
        {
            return Err(OffloadError::Malformed);
        }
        out[..12].copy_from_slice(&frame[..12]);
        if let Some(tag) = self.tag {
            out[12..16].copy_from_slice(&tag);
        }
        out[t + 12..t + self.hdrs].copy_from_slice(&frame[12..self.hdrs]);
        out[t + self.hdrs..].copy_from_slice(payload);
        let pseudo = self.fix_ip(&mut out[t + self.l3..], i);
        let l4 = &mut out[t + self.l4..];
        let field = if self.tcp {
            let seq = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]])
                .wrapping_add((i * self.mss) as u32);
            l4[4..8].copy_from_slice(&seq.to_be_bytes());
            if i > 0 {
                l4[13] &= !CWR;
            }
            if i + 1 < self.segments() {
                l4[13] &= !(FIN | PSH);
            }
            16
        } else {
            let len = l4.len() as u16;
            l4[4..6].copy_from_slice(&len.to_be_bytes());
            6
        };
        l4[field..field + 2].copy_from_slice(&[0, 0]);
        let c = !fold(u64::from(pseudo) + u64::from(sum(l4)));
        let c = if c == 0 && !self.tcp { 0xffff } else { c };
        l4[field..field + 2].copy_from_slice(&c.to_be_bytes());
        Ok(())
    }

    /// Sets the IP header of a segment (`ip`: from the IP header to the segment's end) and
    /// returns the TCP/UDP pseudo-header sum for it.
    fn fix_ip(&self, ip: &mut [u8], i: usize) -> u32 {
        let ihl = self.l4 - self.l3;
        let l4_len = (ip.len() - ihl) as u32;
        let proto = if self.tcp { PROTO_TCP } else { PROTO_UDP };
        if self.ipv6 {
            ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap_or_default());
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap_or_default());
            return pseudo_header_v6(&src, &dst, proto, l4_len);
        }
        let total = ip.len() as u16;
        let id = u16::from_be_bytes([ip[4], ip[5]]).wrapping_add(i as u16);
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[10..12].copy_from_slice(&[0, 0]);
        let c = checksum(&ip[..ihl]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        pseudo_header_v4(&src, &dst, proto, l4_len)
    }
}

/// What a GSO frame's IP header says.
struct IpHeader {
    ipv6: bool,
    /// The offset of the transport header in the frame.
    l4: usize,
    /// The transport protocol.
    proto: u8,
}

/// A GSO frame's IPv4 header: its total length must cover the frame exactly, and it must
/// not be a fragment.
fn ipv4_l4(frame: &[u8], l3: usize) -> Result<IpHeader, OffloadError> {
    let h: &[u8; 20] =
        frame.get(l3..).and_then(|b| b.first_chunk()).ok_or(OffloadError::Malformed)?;
    let ihl = usize::from(h[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
    if h[0] >> 4 != 4 || ihl < 20 || total != frame.len() - l3 || fragment || l3 + ihl > frame.len()
    {
        return Err(OffloadError::Malformed);
    }
    Ok(IpHeader { ipv6: false, l4: l3 + ihl, proto: h[9] })
}

/// The same for IPv6; extension headers are not cut (the kernel's senders put none on
/// TSO/USO frames).
fn ipv6_l4(frame: &[u8], l3: usize) -> Result<IpHeader, OffloadError> {
    let h: &[u8; 40] =
        frame.get(l3..).and_then(|b| b.first_chunk()).ok_or(OffloadError::Malformed)?;
    let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
    if h[0] >> 4 != 6 || len != frame.len() - l3 - 40 {
        return Err(OffloadError::Malformed);
    }
    match h[6] {
        PROTO_TCP | PROTO_UDP => Ok(IpHeader { ipv6: true, l4: l3 + 40, proto: h[6] }),
        _ => Err(OffloadError::Unsupported),
    }
}
