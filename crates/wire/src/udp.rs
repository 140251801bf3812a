//! UDP (RFC 768), checksums for IPv4 and IPv6 (RFC 8200 section 8.1).

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::bytes::{clamp, clamp_mut, header, header_mut, read16, write16};
use crate::{Error, IpProtocol, checksum};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    pub const PAYLOAD: usize = 8;
}

/// A view of a UDP datagram. The buffer may extend past the length field;
/// `payload()` and the checksums stop at it.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Header length.
    pub const HEADER_LEN: usize = field::PAYLOAD;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wrap, checking the 8-byte header is present (`Truncated`), the length
    /// field covers at least the header (RFC 768 "Length ... minimum value
    /// of the length is eight", `BadLength`) and no more than the buffer
    /// (`Truncated`).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        let Some(h) = b.first_chunk::<{ field::PAYLOAD }>() else {
            return Err(Error::Truncated);
        };
        let len = usize::from(read16(h, field::LENGTH));
        if len < field::PAYLOAD {
            return Err(Error::BadLength);
        }
        if len > b.len() {
            return Err(Error::Truncated);
        }
        Ok(UdpPacket { buffer })
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

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        read16(self.hdr(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        read16(self.hdr(), field::DST_PORT)
    }

    /// Length field (header + data).
    #[inline]
    pub fn len(&self) -> u16 {
        read16(self.hdr(), field::LENGTH)
    }

    /// Whether the length field says there is no data.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() <= field::PAYLOAD as u16
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read16(self.hdr(), field::CHECKSUM)
    }

    /// Data: bytes 8..length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), field::PAYLOAD, usize::from(self.len()))
    }

    fn compute(&self, pseudo: u32) -> u16 {
        let data = clamp(self.buffer.as_ref(), 0, usize::from(self.len()));
        !checksum::fold(u64::from(pseudo) + u64::from(checksum::sum(data)))
    }

    /// Checksum correct, or absent (zero), over the IPv4 pseudo-header (RFC 768).
    #[inline]
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let ph = checksum::pseudo_header_v4(src, dst, IpProtocol::Udp.into(), self.len().into());
        self.compute(ph) == 0
    }

    /// Checksum correct over the IPv6 pseudo-header; zero is invalid for
    /// IPv6 (RFC 8200 section 8.1).
    #[inline]
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::Udp.into(), self.len().into());
        self.compute(ph) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::PAYLOAD] {
        header_mut(self.buffer.as_mut())
    }

    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        write16(self.hdr_mut(), field::SRC_PORT, v);
    }

    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        write16(self.hdr_mut(), field::DST_PORT, v);
    }

    /// Set the length field.
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        write16(self.hdr_mut(), field::LENGTH, v);
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        write16(self.hdr_mut(), field::CHECKSUM, v);
    }

    /// Mutable data (8..length).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        clamp_mut(self.buffer.as_mut(), field::PAYLOAD, len)
    }

    fn fill(&mut self, pseudo: u32) {
        self.set_checksum(0);
        let c = self.compute(pseudo);
        // RFC 768: a computed zero is transmitted as all ones.
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// Compute and store the checksum with the IPv4 pseudo-header.
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let ph = checksum::pseudo_header_v4(src, dst, IpProtocol::Udp.into(), self.len().into());
        self.fill(ph);
    }

    /// Compute and store the checksum with the IPv6 pseudo-header.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::Udp.into(), self.len().into());
        self.fill(ph);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ipv4Packet, Ipv6Packet};

    // UDP part of a DNS query for example.com/A, 192.168.1.10:53124 -> 8.8.8.8:53.
    const DNS_UDP: [u8; 37] = [
        0xcf, 0x84, 0x00, 0x35, 0x00, 0x25, 0xe2, 0xec, 0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63,
        0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];
    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
    const DST: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);

    // IPv6 with Hop-by-Hop + Fragment headers, then UDP 5000 -> 6000 "hello!".
    const IPV6_HBH_FRAG_UDP: [u8; 70] = [
        0x60, 0x00, 0xab, 0xcd, 0x00, 0x1e, 0x00, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x2c, 0x00, 0x01, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, 0x13, 0x88, 0x17, 0x70,
        0x00, 0x0e, 0x35, 0x72, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x21,
    ];

    #[test]
    fn dns_fixture() {
        let u = UdpPacket::new_checked(&DNS_UDP[..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (53124, 53, 37));
        assert_eq!(u.checksum(), 0xe2ec);
        assert_eq!(u.payload().len(), 29);
        assert!(!u.is_empty());
        assert!(u.verify_checksum_v4(&SRC, &DST));
        assert!(!u.verify_checksum_v4(&DST, &DST));
        let mut b = DNS_UDP;
        let mut u = UdpPacket::new_checked(&mut b[..]).unwrap();
        u.set_checksum(0);
        assert!(u.verify_checksum_v4(&DST, &DST)); // zero = no checksum
        u.fill_checksum_v4(&SRC, &DST);
        assert_eq!(u.checksum(), 0xe2ec);
    }

    #[test]
    fn ipv6_fixture() {
        let ip = Ipv6Packet::new_checked(&IPV6_HBH_FRAG_UDP[..]).unwrap();
        let (_, off) = ip.upper_layer().unwrap();
        let u = UdpPacket::new_checked(&IPV6_HBH_FRAG_UDP[off..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (5000, 6000, 14));
        assert_eq!(u.payload(), b"hello!");
        assert!(u.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()));
        let mut b = IPV6_HBH_FRAG_UDP;
        let mut u = UdpPacket::new_checked(&mut b[off..]).unwrap();
        u.set_checksum(0);
        assert!(!u.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()));
        u.fill_checksum_v6(&ip.src_addr(), &ip.dst_addr());
        assert_eq!(u.checksum(), 0x3572);
    }

    #[test]
    fn errors() {
        assert_eq!(UdpPacket::new_checked(&DNS_UDP[..7]).err(), Some(Error::Truncated));
        assert_eq!(UdpPacket::new_checked(&DNS_UDP[..36]).err(), Some(Error::Truncated));
        let mut b = DNS_UDP;
        b[5] = 7;
        assert_eq!(UdpPacket::new_checked(&b[..]).err(), Some(Error::BadLength));
        b[5] = 8;
        let u = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(u.is_empty() && u.payload().is_empty());
    }

    #[test]
    fn zero_checksum_sent_as_ffff() {
        // Find a payload whose checksum computes to zero, then check 0xffff is stored.
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let mut b = [0u8; 10];
        let mut u = UdpPacket::new_unchecked(&mut b[..]);
        u.set_len(10);
        u.set_src_port(1);
        u.set_dst_port(2);
        u.fill_checksum_v4(&src, &dst);
        let c = u.checksum();
        // Put the complement into the data word: the sum becomes 0xffff, checksum 0.
        u.payload_mut().copy_from_slice(&c.to_be_bytes());
        u.fill_checksum_v4(&src, &dst);
        assert_eq!(u.checksum(), 0xffff);
        assert!(u.verify_checksum_v4(&src, &dst));
        let ip = Ipv4Packet::new_checked(
            &[0x45, 0, 0, 20, 0, 0, 0, 0, 1, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2][..],
        );
        assert!(ip.is_ok());
    }
}
