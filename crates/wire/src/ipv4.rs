//! IPv4 (RFC 791) with the router validation of RFC 1812 section 5.2.2.

use core::net::Ipv4Addr;

use crate::bytes::{clamp, clamp_mut, header, header_mut, ipv4, read16, read32, write16};
use crate::checksum;
use crate::{Error, IpProtocol};

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
    pub const OPTIONS: usize = 20;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet. The buffer may extend past `total_len`
/// (Ethernet padding); `payload()` stops at `total_len`.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = field::OPTIONS;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wrap, validating per RFC 1812 section 5.2.2 except the checksum
    /// (call [`verify_checksum`](Self::verify_checksum) for that).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        // 5.2.2 (1): the link layer length must hold the minimum datagram.
        let Some(h) = b.first_chunk::<{ field::OPTIONS }>() else {
            return Err(Error::Truncated);
        };
        // 5.2.2 (3): version number must be 4.
        if h[field::VER_IHL] >> 4 != 4 {
            return Err(Error::BadVersion);
        }
        // 5.2.2 (4): header length at least 20 bytes (IHL >= 5) ...
        let ihl = usize::from(h[field::VER_IHL] & 0x0f) * 4;
        if ihl < field::OPTIONS {
            return Err(Error::BadLength);
        }
        // ... and the header must actually be there (RFC 791 3.1, IHL).
        if ihl > b.len() {
            return Err(Error::Truncated);
        }
        // 5.2.2 (5): total length must be large enough to hold the header ...
        let total = usize::from(read16(h, field::LENGTH));
        if total < ihl {
            return Err(Error::BadLength);
        }
        // ... and the link layer must have delivered all of it (5.2.2 (1)).
        if total > b.len() {
            return Err(Error::Truncated);
        }
        Ok(Ipv4Packet { buffer })
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline(always)]
    fn hdr(&self) -> &[u8; field::OPTIONS] {
        header(self.buffer.as_ref())
    }

    /// Version field (4 after `new_checked`).
    #[inline]
    pub fn version(&self) -> u8 {
        self.hdr()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.hdr()[field::VER_IHL] & 0x0f) * 4
    }

    /// The whole DSCP/ECN (former TOS) byte.
    #[inline]
    pub fn dscp_ecn(&self) -> u8 {
        self.hdr()[field::DSCP_ECN]
    }

    /// DSCP (RFC 2474), 6 bits.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.dscp_ecn() >> 2
    }

    /// ECN (RFC 3168), 2 bits.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & 0x03
    }

    /// Total length (header + data), bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        read16(self.hdr(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        read16(self.hdr(), field::IDENT)
    }

    /// Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        read16(self.hdr(), field::FLG_OFF) & FLAG_DF != 0
    }

    /// More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        read16(self.hdr(), field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in **bytes** (the 13-bit field times 8).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (read16(self.hdr(), field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// MF set or a non-zero fragment offset.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        read16(self.hdr(), field::FLG_OFF) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.hdr()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.hdr()[field::PROTOCOL])
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read16(self.hdr(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        ipv4(self.hdr(), field::SRC)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        ipv4(self.hdr(), field::DST)
    }

    /// Destination address as a host-order `u32` (for FIB lookups).
    #[inline]
    pub fn dst_addr_u32(&self) -> u32 {
        read32(self.hdr(), field::DST)
    }

    /// Source address as a host-order `u32`.
    #[inline]
    pub fn src_addr_u32(&self) -> u32 {
        read32(self.hdr(), field::SRC)
    }

    /// Options: bytes 20..header_len.
    #[inline]
    pub fn options(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), field::OPTIONS, self.header_len())
    }

    /// The header, bytes 0..header_len.
    #[inline]
    pub fn header_bytes(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), 0, self.header_len())
    }

    /// Data: bytes header_len..total_len (Ethernet padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let h = header::<{ field::OPTIONS }>(b);
        let hl = usize::from(h[field::VER_IHL] & 0x0f) * 4;
        clamp(b, hl, usize::from(read16(h, field::LENGTH)))
    }

    /// Whether the header checksum is correct (RFC 1812 5.2.2 (2)). Always inlined: the
    /// forwarding path's classify pass has two instances (with and without a firewall), and
    /// a call per packet costs more than the check.
    #[inline(always)]
    pub fn verify_checksum(&self) -> bool {
        let header = self.header_bytes();
        match header.first_chunk::<20>() {
            // The common case (no options) without the general loop.
            Some(h) if header.len() == 20 => checksum::sum20(h) == 0xffff,
            _ => checksum::checksum(header) == 0,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::OPTIONS] {
        header_mut(self.buffer.as_mut())
    }

    #[inline(always)]
    fn set_flg_off(&mut self, mask: u16, bits: u16) {
        let h = self.hdr_mut();
        let v = (read16(h, field::FLG_OFF) & !mask) | (bits & mask);
        write16(h, field::FLG_OFF, v);
    }

    /// Set the version nibble.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let h = self.hdr_mut();
        h[field::VER_IHL] = (h[field::VER_IHL] & 0x0f) | (v << 4);
    }

    /// Set the header length in bytes (must be a multiple of 4, 20..=60).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let h = self.hdr_mut();
        h[field::VER_IHL] = (h[field::VER_IHL] & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Set the DSCP/ECN byte.
    #[inline]
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.hdr_mut()[field::DSCP_ECN] = v;
    }

    /// Set the total length.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        write16(self.hdr_mut(), field::LENGTH, len);
    }

    /// Set the identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        write16(self.hdr_mut(), field::IDENT, v);
    }

    /// Clear DF, MF, the reserved bit and the fragment offset.
    #[inline]
    pub fn clear_flags(&mut self) {
        write16(self.hdr_mut(), field::FLG_OFF, 0);
    }

    /// Set or clear Don't Fragment.
    #[inline]
    pub fn set_dont_frag(&mut self, v: bool) {
        self.set_flg_off(FLAG_DF, if v { FLAG_DF } else { 0 });
    }

    /// Set or clear More Fragments.
    #[inline]
    pub fn set_more_frags(&mut self, v: bool) {
        self.set_flg_off(FLAG_MF, if v { FLAG_MF } else { 0 });
    }

    /// Set the fragment offset in bytes (should be a multiple of 8).
    #[inline]
    pub fn set_frag_offset(&mut self, bytes: u16) {
        self.set_flg_off(OFFSET_MASK, bytes >> 3);
    }

    /// Set the TTL (checksum not updated).
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.hdr_mut()[field::TTL] = ttl;
    }

    /// Set the protocol.
    #[inline]
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.hdr_mut()[field::PROTOCOL] = p.into();
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write16(self.hdr_mut(), field::CHECKSUM, c);
    }

    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.hdr_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.hdr_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Recompute the header checksum over header_len bytes.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header_bytes());
        self.set_checksum(c);
    }

    /// Decrement the TTL by one (wrapping 0 to 255; the caller checks
    /// `ttl() > 1` first, RFC 1812 5.3.1) and update the checksum
    /// incrementally per RFC 1624 eqn. 3 on the TTL/protocol word. The result
    /// equals a full recompute whenever the old checksum was valid.
    #[inline]
    pub fn decrement_ttl(&mut self) {
        let h = self.hdr_mut();
        let old = u16::from_be_bytes([h[field::TTL], h[field::PROTOCOL]]);
        let ttl = h[field::TTL].wrapping_sub(1);
        h[field::TTL] = ttl;
        let new = u16::from_be_bytes([ttl, h[field::PROTOCOL]]);
        let c = checksum::update16(read16(h, field::CHECKSUM), old, new);
        write16(h, field::CHECKSUM, c);
    }

    /// Mutable options (20..header_len).
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clamp_mut(self.buffer.as_mut(), field::OPTIONS, hl)
    }

    /// Mutable payload (header_len..total_len).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        clamp_mut(self.buffer.as_mut(), hl, tl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EtherType, EthernetFrame};
    use proptest::prelude::*;

    // A DNS query for example.com/A from 192.168.1.10:53124 to 8.8.8.8:53,
    // as captured on Ethernet (TTL 64, DF, ident 0x1c46).
    const DNS_QUERY: [u8; 71] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x3c, 0x22, 0xfb, 0x12, 0x34, 0x56, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x39, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x4c, 0xac, 0xc0, 0xa8, 0x01, 0x0a,
        0x08, 0x08, 0x08, 0x08, 0xcf, 0x84, 0x00, 0x35, 0x00, 0x25, 0xe2, 0xec, 0xab, 0xcd, 0x01,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70,
        0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];

    // An IGMPv2 membership report for 224.0.0.251 carrying the Router Alert
    // option (RFC 2113: 94 04 00 00), TOS 0xc0, TTL 1: IHL 6.
    const IGMP_RA: [u8; 32] = [
        0x46, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x41, 0x72, 0xc0, 0xa8, 0x01,
        0x02, 0xe0, 0x00, 0x00, 0xfb, 0x94, 0x04, 0x00, 0x00, 0x16, 0x00, 0x09, 0x04, 0xe0, 0x00,
        0x00, 0xfb,
    ];

    #[test]
    fn dns_query_fixture() {
        let eth = EthernetFrame::new_checked(&DNS_QUERY[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::Ipv4);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.version(), 4);
        assert_eq!(ip.header_len(), 20);
        assert_eq!(ip.dscp_ecn(), 0);
        assert_eq!(ip.total_len(), 57);
        assert_eq!(ip.ident(), 0x1c46);
        assert!(ip.dont_frag() && !ip.more_frags() && !ip.is_fragment());
        assert_eq!(ip.frag_offset(), 0);
        assert_eq!(ip.ttl(), 64);
        assert_eq!(ip.protocol(), IpProtocol::Udp);
        assert_eq!(ip.checksum(), 0x4cac);
        assert_eq!(ip.src_addr(), Ipv4Addr::new(192, 168, 1, 10));
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(8, 8, 8, 8));
        assert_eq!(ip.dst_addr_u32(), 0x0808_0808);
        assert!(ip.options().is_empty());
        assert_eq!(ip.payload().len(), 37);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn router_alert_fixture() {
        let ip = Ipv4Packet::new_checked(&IGMP_RA[..]).unwrap();
        assert_eq!(ip.header_len(), 24);
        assert_eq!(ip.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!((ip.dscp(), ip.ecn()), (0x30, 0));
        assert_eq!(ip.protocol(), IpProtocol::Unknown(2));
        assert_eq!(ip.payload(), &IGMP_RA[24..]);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn ethernet_padding_excluded() {
        let mut b = [0u8; 46];
        b[..32].copy_from_slice(&IGMP_RA);
        let ip = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(ip.payload().len(), 8);
    }

    #[test]
    fn new_checked_errors() {
        let p = &DNS_QUERY[14..];
        assert_eq!(Ipv4Packet::new_checked(&p[..19]).err(), Some(Error::Truncated));
        assert_eq!(Ipv4Packet::new_checked(&[][..]).err(), Some(Error::Truncated));
        let with = |i: usize, v: u8| {
            let mut b = p.to_vec();
            b[i] = v;
            Ipv4Packet::new_checked(b).err()
        };
        assert_eq!(with(0, 0x65), Some(Error::BadVersion));
        assert_eq!(with(0, 0x44), Some(Error::BadLength)); // IHL 4
        assert_eq!(with(0, 0x4f), Some(Error::Truncated)); // IHL 15: 60-byte header > 57-byte buffer
        assert_eq!(with(3, 19), Some(Error::BadLength)); // total < header
        assert_eq!(with(3, 58), Some(Error::Truncated)); // total > buffer
        assert!(with(3, 20).is_none()); // empty payload is fine
        // IHL*4 > buffer even though total length is small.
        let mut b = IGMP_RA;
        b[0] = 0x47;
        assert_eq!(Ipv4Packet::new_checked(&b[..27]).err(), Some(Error::Truncated));
    }

    #[test]
    fn setters_and_fill() {
        let mut b = DNS_QUERY[14..].to_vec();
        let mut ip = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        ip.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        ip.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        ip.set_dont_frag(false);
        ip.set_more_frags(true);
        ip.set_frag_offset(1480);
        ip.set_ident(7);
        ip.set_dscp_ecn(0xb8);
        ip.set_ttl(3);
        ip.set_protocol(IpProtocol::Tcp);
        assert!(!ip.verify_checksum());
        ip.fill_checksum();
        assert!(ip.verify_checksum());
        assert_eq!(ip.frag_offset(), 1480);
        assert!(ip.more_frags() && !ip.dont_frag() && ip.is_fragment());
        assert_eq!((ip.ident(), ip.dscp_ecn(), ip.ttl()), (7, 0xb8, 3));
        assert_eq!(ip.protocol(), IpProtocol::Tcp);
        assert_eq!(ip.src_addr_u32(), 0x0102_0304);
        ip.clear_flags();
        assert!(!ip.is_fragment());
        ip.set_total_len(30);
        assert_eq!(ip.payload_mut().len(), 10);
        ip.set_header_len(24);
        assert_eq!(ip.options_mut().len(), 4);
        ip.set_version(6);
        assert_eq!(ip.version(), 6);
        // Setting lengths beyond the buffer never makes payload() panic.
        ip.set_total_len(9000);
        assert!(ip.payload().is_empty());
    }

    fn recomputed(b: &[u8]) -> u16 {
        let mut c = b.to_vec();
        let mut ip = Ipv4Packet::new_unchecked(&mut c[..]);
        ip.fill_checksum();
        ip.checksum()
    }

    #[test]
    fn decrement_ttl_exhaustive() {
        // Every TTL and every protocol value on two real headers.
        for base in [&DNS_QUERY[14..34], &IGMP_RA[..]] {
            let mut b = base.to_vec();
            for proto in 0..=255u8 {
                for ttl in 0..=255u8 {
                    let mut ip = Ipv4Packet::new_unchecked(&mut b[..]);
                    ip.set_protocol(IpProtocol::from(proto));
                    ip.set_ttl(ttl);
                    ip.fill_checksum();
                    ip.decrement_ttl();
                    assert_eq!(ip.ttl(), ttl.wrapping_sub(1));
                    assert!(ip.verify_checksum());
                    let c = ip.checksum();
                    assert_eq!(c, recomputed(&b), "ttl {ttl} proto {proto}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        #[test]
        fn decrement_ttl_random_headers(mut h in proptest::collection::vec(any::<u8>(), 60),
                                        ihl in 5u8..=15, ttl in any::<u8>()) {
            h[0] = 0x40 | ihl;
            h[8] = ttl;
            let hl = usize::from(ihl) * 4;
            let mut ip = Ipv4Packet::new_unchecked(&mut h[..hl]);
            ip.fill_checksum();
            for _ in 0..3 {
                ip.decrement_ttl();
                prop_assert!(ip.verify_checksum());
                let c = ip.checksum();
                let mut copy = ip.header_bytes().to_vec();
                let mut full = Ipv4Packet::new_unchecked(&mut copy[..]);
                full.fill_checksum();
                prop_assert_eq!(c, full.checksum());
            }
        }
    }
}
