//! IPv6 (RFC 8200) and its extension-header chain.

use core::net::Ipv6Addr;

use crate::bytes::{clamp, clamp_mut, header, header_mut, ipv6, read16, read32, write16};
use crate::{Error, IpProtocol};

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
    pub const PAYLOAD: usize = 40;
}

/// Most extension headers [`Ipv6Packet::upper_layer`] will walk.
pub const MAX_EXT_HEADERS: usize = 8;

/// A view of an IPv6 packet. The buffer may extend past 40 + payload_len
/// (Ethernet padding); `payload()` stops there.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Fixed header length.
    pub const HEADER_LEN: usize = field::PAYLOAD;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wrap, checking (RFC 8200 section 3) the 40-byte header is present,
    /// version is 6, and the buffer holds the `payload_len` bytes it claims.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        let Some(h) = b.first_chunk::<{ field::PAYLOAD }>() else {
            return Err(Error::Truncated);
        };
        if h[0] >> 4 != 6 {
            return Err(Error::BadVersion);
        }
        if field::PAYLOAD + usize::from(read16(h, field::PAYLOAD_LEN)) > b.len() {
            return Err(Error::Truncated);
        }
        Ok(Ipv6Packet { buffer })
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline(always)]
    fn hdr(&self) -> &[u8; field::PAYLOAD] {
        header(self.buffer.as_ref())
    }

    /// Version field (6 after `new_checked`).
    #[inline]
    pub fn version(&self) -> u8 {
        self.hdr()[0] >> 4
    }

    /// Traffic class (DSCP + ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (read32(self.hdr(), field::VER_TC_FLOW) >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        read32(self.hdr(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        read16(self.hdr(), field::PAYLOAD_LEN)
    }

    /// Next header of the fixed header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.hdr()[field::NEXT_HEADER])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.hdr()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        ipv6(self.hdr(), field::SRC)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        ipv6(self.hdr(), field::DST)
    }

    /// Destination address as a `u128` (for FIB lookups).
    #[inline]
    pub fn dst_addr_u128(&self) -> u128 {
        let h = self.hdr();
        let hi = u64::from(read32(h, 24..28)) << 32 | u64::from(read32(h, 28..32));
        let lo = u64::from(read32(h, 32..36)) << 32 | u64::from(read32(h, 36..40));
        u128::from(hi) << 64 | u128::from(lo)
    }

    /// Bytes 40..40 + payload_len.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let end = field::PAYLOAD + usize::from(self.payload_len());
        clamp(self.buffer.as_ref(), field::PAYLOAD, end)
    }

    /// Walk the extension-header chain (RFC 8200 section 4) and return the
    /// upper-layer protocol and its offset from the start of the IPv6 header.
    ///
    /// Hop-by-Hop, Routing, Destination Options (length in 8-byte units, not
    /// counting the first 8; section 4.3-4.6), Fragment (8 bytes, section
    /// 4.5) and AH (length in 4-byte units minus 2, RFC 4302 section 2.2) are
    /// skipped. Anything else (including ESP and No Next Header) stops the
    /// walk and is returned. A non-first fragment (offset != 0) has no
    /// upper-layer header: the walk returns `(Ipv6Frag, offset of the
    /// fragment header)`. Hop-by-Hop anywhere but first is `Malformed`
    /// (section 4.3), as is a chain of more than [`MAX_EXT_HEADERS`];
    /// a header running past the payload is `Truncated`.
    pub fn upper_layer(&self) -> Result<(IpProtocol, usize), Error> {
        let b = self.buffer.as_ref();
        let end = (field::PAYLOAD + usize::from(self.payload_len())).min(b.len());
        let mut nh = self.next_header();
        let mut off = field::PAYLOAD;
        for i in 0..=MAX_EXT_HEADERS {
            let len = match nh {
                IpProtocol::HopByHop if i > 0 => return Err(Error::Malformed),
                IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                    let h = b.get(off..off + 2).filter(|_| off + 2 <= end);
                    let Some(h) = h else {
                        return Err(Error::Truncated);
                    };
                    (usize::from(h[1]) + 1) * 8
                }
                IpProtocol::Ipv6Frag => {
                    let h = b.get(off..off + 8).filter(|_| off + 8 <= end);
                    let Some(h) = h else {
                        return Err(Error::Truncated);
                    };
                    if u16::from_be_bytes([h[2], h[3]]) & 0xfff8 != 0 {
                        return Ok((IpProtocol::Ipv6Frag, off));
                    }
                    8
                }
                IpProtocol::Ah => {
                    let h = b.get(off..off + 2).filter(|_| off + 2 <= end);
                    let Some(h) = h else {
                        return Err(Error::Truncated);
                    };
                    (usize::from(h[1]) + 2) * 4
                }
                other => return Ok((other, off)),
            };
            if i == MAX_EXT_HEADERS {
                break;
            }
            if off + len > end {
                return Err(Error::Truncated);
            }
            nh = IpProtocol::from(b[off]);
            off += len;
        }
        Err(Error::Malformed)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::PAYLOAD] {
        header_mut(self.buffer.as_mut())
    }

    #[inline(always)]
    fn set_vtf(&mut self, mask: u32, bits: u32) {
        let h = self.hdr_mut();
        let v = (read32(h, field::VER_TC_FLOW) & !mask) | (bits & mask);
        h[field::VER_TC_FLOW].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the version nibble.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        self.set_vtf(0xf000_0000, u32::from(v) << 28);
    }

    /// Set the traffic class.
    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        self.set_vtf(0x0ff0_0000, u32::from(tc) << 20);
    }

    /// Set the flow label (low 20 bits used).
    #[inline]
    pub fn set_flow_label(&mut self, fl: u32) {
        self.set_vtf(0x000f_ffff, fl);
    }

    /// Set the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, len: u16) {
        write16(self.hdr_mut(), field::PAYLOAD_LEN, len);
    }

    /// Set the next header.
    #[inline]
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.hdr_mut()[field::NEXT_HEADER] = p.into();
    }

    /// Set the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, h: u8) {
        self.hdr_mut()[field::HOP_LIMIT] = h;
    }

    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.hdr_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.hdr_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Mutable payload (40..40 + payload_len).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = field::PAYLOAD + usize::from(self.payload_len());
        clamp_mut(self.buffer.as_mut(), field::PAYLOAD, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv6 ICMPv6 echo request 2001:db8::1 -> 2001:db8::2, hop limit 64,
    // ident 0x1234 seq 1, data "abcdefgh".
    const ICMPV6_ECHO: [u8; 56] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x10, 0x3a, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x80, 0x75, 0x12,
        0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    ];

    // IPv6 (flow label 0xabcd) with a Hop-by-Hop header (PadN), a Fragment
    // header (offset 0, M=1, id 0xdeadbeef), then UDP 5000 -> 6000 "hello!".
    const IPV6_HBH_FRAG_UDP: [u8; 70] = [
        0x60, 0x00, 0xab, 0xcd, 0x00, 0x1e, 0x00, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x2c, 0x00, 0x01, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, 0x13, 0x88, 0x17, 0x70,
        0x00, 0x0e, 0x35, 0x72, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x21,
    ];

    #[test]
    fn echo_fixture() {
        let ip = Ipv6Packet::new_checked(&ICMPV6_ECHO[..]).unwrap();
        assert_eq!(ip.version(), 6);
        assert_eq!((ip.traffic_class(), ip.flow_label()), (0, 0));
        assert_eq!(ip.payload_len(), 16);
        assert_eq!(ip.next_header(), IpProtocol::Icmpv6);
        assert_eq!(ip.hop_limit(), 64);
        assert_eq!(ip.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(ip.dst_addr_u128(), u128::from(ip.dst_addr()));
        assert_eq!(ip.payload(), &ICMPV6_ECHO[40..]);
        assert_eq!(ip.upper_layer(), Ok((IpProtocol::Icmpv6, 40)));
    }

    #[test]
    fn ext_header_fixture() {
        let ip = Ipv6Packet::new_checked(&IPV6_HBH_FRAG_UDP[..]).unwrap();
        assert_eq!(ip.flow_label(), 0xabcd);
        assert_eq!(ip.next_header(), IpProtocol::HopByHop);
        assert_eq!(ip.upper_layer(), Ok((IpProtocol::Udp, 56)));
        // Non-first fragment: stop at the fragment header.
        let mut b = IPV6_HBH_FRAG_UDP;
        b[50..52].copy_from_slice(&[0x00, 0x08]);
        let ip = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(ip.upper_layer(), Ok((IpProtocol::Ipv6Frag, 48)));
    }

    #[test]
    fn upper_layer_errors() {
        // Payload length cut so the fragment header does not fit.
        let mut b = IPV6_HBH_FRAG_UDP;
        b[5] = 12;
        let ip = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(ip.upper_layer(), Err(Error::Truncated));
        b[5] = 1;
        assert_eq!(Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(), Err(Error::Truncated));
        b[5] = 4; // HBH claims 8 bytes, only 4 present.
        assert_eq!(Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(), Err(Error::Truncated));
        // Hop-by-Hop not first.
        let mut b = IPV6_HBH_FRAG_UDP;
        b[48] = 0;
        assert_eq!(Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(), Err(Error::Malformed));
        // A long chain of destination options headers: 8 is fine, 9 is not.
        let chain = |n: usize| {
            let mut v = vec![0u8; 40 + 8 * n + 8];
            v[0] = 0x60;
            v[4..6].copy_from_slice(&((8 * n + 8) as u16).to_be_bytes());
            v[6] = 60;
            for i in 0..n {
                v[40 + 8 * i] = if i + 1 == n { 17 } else { 60 };
            }
            Ipv6Packet::new_checked(v).unwrap().upper_layer()
        };
        assert_eq!(chain(8), Ok((IpProtocol::Udp, 40 + 64)));
        assert_eq!(chain(9), Err(Error::Malformed));
        // AH: length 4 => (4 + 2) * 4 = 24 bytes.
        let mut v = vec![0u8; 40 + 24 + 8];
        v[0] = 0x60;
        v[5] = 32;
        v[6] = 51;
        v[40] = 6;
        v[41] = 4;
        assert_eq!(Ipv6Packet::new_checked(v).unwrap().upper_layer(), Ok((IpProtocol::Tcp, 64)));
    }

    #[test]
    fn new_checked_errors() {
        assert_eq!(Ipv6Packet::new_checked(&ICMPV6_ECHO[..39]).err(), Some(Error::Truncated));
        assert_eq!(Ipv6Packet::new_checked(&ICMPV6_ECHO[..55]).err(), Some(Error::Truncated));
        let mut b = ICMPV6_ECHO;
        b[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&b[..]).err(), Some(Error::BadVersion));
        // Padding after the payload is fine and excluded.
        let mut v = ICMPV6_ECHO.to_vec();
        v.extend_from_slice(&[0; 6]);
        assert_eq!(Ipv6Packet::new_checked(&v[..]).unwrap().payload().len(), 16);
    }

    #[test]
    fn setters() {
        let mut b = ICMPV6_ECHO;
        let mut ip = Ipv6Packet::new_checked(&mut b[..]).unwrap();
        ip.set_traffic_class(0xb8);
        ip.set_flow_label(0x12345);
        ip.set_hop_limit(1);
        ip.set_next_header(IpProtocol::Udp);
        ip.set_src_addr(Ipv6Addr::LOCALHOST);
        ip.set_dst_addr(Ipv6Addr::UNSPECIFIED);
        ip.set_payload_len(8);
        assert_eq!((ip.version(), ip.traffic_class(), ip.flow_label()), (6, 0xb8, 0x12345));
        assert_eq!((ip.hop_limit(), ip.next_header()), (1, IpProtocol::Udp));
        assert_eq!(ip.src_addr(), Ipv6Addr::LOCALHOST);
        assert_eq!(ip.dst_addr_u128(), 0);
        assert_eq!(ip.payload_mut().len(), 8);
        ip.set_version(4);
        assert_eq!(ip.version(), 4);
        ip.set_payload_len(1000);
        assert!(ip.payload().is_empty());
    }
}
