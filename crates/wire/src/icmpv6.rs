//! ICMPv6 (RFC 4443), recognising the Neighbor Discovery types of RFC 4861.

use core::net::Ipv6Addr;

use crate::bytes::{clamp, clamp_mut, header, header_mut, read16, read32, write16, write32};
use crate::{Error, IpProtocol, checksum};

/// ICMPv6 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6Type {
    /// 1
    DestUnreachable,
    /// 2
    PacketTooBig,
    /// 3
    TimeExceeded,
    /// 4
    ParamProblem,
    /// 128
    EchoRequest,
    /// 129
    EchoReply,
    /// 133 (RFC 4861)
    RouterSolicit,
    /// 134 (RFC 4861)
    RouterAdvert,
    /// 135 (RFC 4861)
    NeighborSolicit,
    /// 136 (RFC 4861)
    NeighborAdvert,
    /// 137 (RFC 4861)
    Redirect,
    /// Anything else.
    Unknown(u8),
}

impl Icmpv6Type {
    /// Error messages have types 0..=127 (RFC 4443 section 2.1).
    #[inline]
    pub fn is_error(self) -> bool {
        u8::from(self) < 128
    }

    /// One of the Neighbor Discovery messages (133..=137).
    #[inline]
    pub fn is_ndp(self) -> bool {
        (133..=137).contains(&u8::from(self))
    }
}

impl From<u8> for Icmpv6Type {
    #[inline]
    fn from(v: u8) -> Self {
        match v {
            1 => Icmpv6Type::DestUnreachable,
            2 => Icmpv6Type::PacketTooBig,
            3 => Icmpv6Type::TimeExceeded,
            4 => Icmpv6Type::ParamProblem,
            128 => Icmpv6Type::EchoRequest,
            129 => Icmpv6Type::EchoReply,
            133 => Icmpv6Type::RouterSolicit,
            134 => Icmpv6Type::RouterAdvert,
            135 => Icmpv6Type::NeighborSolicit,
            136 => Icmpv6Type::NeighborAdvert,
            137 => Icmpv6Type::Redirect,
            other => Icmpv6Type::Unknown(other),
        }
    }
}

impl From<Icmpv6Type> for u8 {
    #[inline]
    fn from(t: Icmpv6Type) -> u8 {
        match t {
            Icmpv6Type::DestUnreachable => 1,
            Icmpv6Type::PacketTooBig => 2,
            Icmpv6Type::TimeExceeded => 3,
            Icmpv6Type::ParamProblem => 4,
            Icmpv6Type::EchoRequest => 128,
            Icmpv6Type::EchoReply => 129,
            Icmpv6Type::RouterSolicit => 133,
            Icmpv6Type::RouterAdvert => 134,
            Icmpv6Type::NeighborSolicit => 135,
            Icmpv6Type::NeighborAdvert => 136,
            Icmpv6Type::Redirect => 137,
            Icmpv6Type::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQ: Range<usize> = 6..8;
    pub const DATA: usize = 8;
    /// NS/NA/Redirect target address (RFC 4861 4.3, 4.4, 4.5).
    pub const NDP_TARGET: Range<usize> = 8..24;
}

/// A view of an ICMPv6 message (the buffer is exactly the upper-layer
/// payload; the checksum covers all of it plus the pseudo-header).
#[derive(Debug, Clone)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Type, code, checksum and the 4-byte message body start.
    pub const HEADER_LEN: usize = field::DATA;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wrap, checking the 8 bytes every message defined in RFC 4443 section
    /// 3-4 and RFC 4861 section 4 starts with are present.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < field::DATA {
            return Err(Error::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline(always)]
    fn hdr(&self) -> &[u8; field::DATA] {
        header(self.buffer.as_ref())
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> Icmpv6Type {
        Icmpv6Type::from(self.hdr()[field::TYPE])
    }

    /// Code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.hdr()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read16(self.hdr(), field::CHECKSUM)
    }

    /// Bytes 4..8 (MTU, pointer, echo id/seq, NA flags ...).
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        read32(self.hdr(), field::REST)
    }

    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        read16(self.hdr(), field::ECHO_IDENT)
    }

    /// Echo sequence number.
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        read16(self.hdr(), field::ECHO_SEQ)
    }

    /// MTU of a Packet Too Big message (RFC 4443 section 3.2).
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }

    /// Parameter problem pointer (RFC 4443 section 3.4).
    #[inline]
    pub fn pointer(&self) -> u32 {
        self.rest_of_header()
    }

    /// Everything after the 8-byte header.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        clamp(b, field::DATA, b.len())
    }

    /// Target address of a Neighbor Solicitation/Advertisement or Redirect
    /// (RFC 4861 4.3-4.5), if the message is one and is long enough.
    #[inline]
    pub fn ndp_target_addr(&self) -> Option<Ipv6Addr> {
        match self.msg_type() {
            Icmpv6Type::NeighborSolicit | Icmpv6Type::NeighborAdvert | Icmpv6Type::Redirect => {
                let t = self.buffer.as_ref().get(field::NDP_TARGET)?;
                let mut a = [0u8; 16];
                a.copy_from_slice(t);
                Some(Ipv6Addr::from(a))
            }
            _ => None,
        }
    }

    fn sum_with_pseudo(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> u16 {
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::Icmpv6.into(), b.len() as u32);
        !checksum::fold(u64::from(ph) + u64::from(checksum::sum(b)))
    }

    /// Whether the checksum (RFC 4443 section 2.3, with the RFC 8200 8.1
    /// pseudo-header) is correct.
    #[inline]
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        self.sum_with_pseudo(src, dst) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::DATA] {
        header_mut(self.buffer.as_mut())
    }

    /// Set the message type.
    #[inline]
    pub fn set_msg_type(&mut self, t: Icmpv6Type) {
        self.hdr_mut()[field::TYPE] = t.into();
    }

    /// Set the code.
    #[inline]
    pub fn set_code(&mut self, c: u8) {
        self.hdr_mut()[field::CODE] = c;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write16(self.hdr_mut(), field::CHECKSUM, c);
    }

    /// Set bytes 4..8.
    #[inline]
    pub fn set_rest_of_header(&mut self, v: u32) {
        write32(self.hdr_mut(), field::REST, v);
    }

    /// Set the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, v: u16) {
        write16(self.hdr_mut(), field::ECHO_IDENT, v);
    }

    /// Set the echo sequence number.
    #[inline]
    pub fn set_echo_seq(&mut self, v: u16) {
        write16(self.hdr_mut(), field::ECHO_SEQ, v);
    }

    /// Set the Packet Too Big MTU.
    #[inline]
    pub fn set_mtu(&mut self, mtu: u32) {
        self.set_rest_of_header(mtu);
    }

    /// Set the parameter problem pointer.
    #[inline]
    pub fn set_pointer(&mut self, p: u32) {
        self.set_rest_of_header(p);
    }

    /// Mutable data after the header.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        clamp_mut(b, field::DATA, len)
    }

    /// Compute and store the checksum, pseudo-header included.
    #[inline]
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let c = self.sum_with_pseudo(src, dst);
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ipv6Packet;

    // IPv6 ICMPv6 echo request 2001:db8::1 -> 2001:db8::2, id 0x1234 seq 1,
    // data "abcdefgh".
    const ICMPV6_ECHO: [u8; 56] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x10, 0x3a, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x80, 0x75, 0x12,
        0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    ];

    #[test]
    fn echo_fixture() {
        let ip = Ipv6Packet::new_checked(&ICMPV6_ECHO[..]).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(icmp.msg_type(), Icmpv6Type::EchoRequest);
        assert!(!icmp.msg_type().is_error() && !icmp.msg_type().is_ndp());
        assert_eq!(icmp.code(), 0);
        assert_eq!(icmp.checksum(), 0x8075);
        assert_eq!((icmp.echo_ident(), icmp.echo_seq()), (0x1234, 1));
        assert_eq!(icmp.data(), b"abcdefgh");
        assert!(icmp.verify_checksum(&src, &dst));
        assert!(!icmp.verify_checksum(&dst, &Ipv6Addr::LOCALHOST));
        assert_eq!(icmp.ndp_target_addr(), None);
    }

    #[test]
    fn errors_round_trip_and_build() {
        assert_eq!(Icmpv6Packet::new_checked(&[0u8; 7][..]).err(), Some(Error::Truncated));
        for v in 0..=255u8 {
            assert_eq!(u8::from(Icmpv6Type::from(v)), v);
        }
        assert!(Icmpv6Type::from(135).is_ndp());
        assert!(Icmpv6Type::PacketTooBig.is_error());

        let (src, dst): (Ipv6Addr, Ipv6Addr) =
            ("fe80::1".parse().unwrap(), "ff02::1:ff00:2".parse().unwrap());
        let mut b = [0u8; 24];
        let mut p = Icmpv6Packet::new_checked(&mut b[..]).unwrap();
        p.set_msg_type(Icmpv6Type::NeighborSolicit);
        p.data_mut()[..16].copy_from_slice(&"fe80::2".parse::<Ipv6Addr>().unwrap().octets());
        p.fill_checksum(&src, &dst);
        assert!(p.verify_checksum(&src, &dst));
        assert_eq!(p.ndp_target_addr(), Some("fe80::2".parse().unwrap()));
        p.set_msg_type(Icmpv6Type::PacketTooBig);
        p.set_code(0);
        p.set_mtu(1280);
        assert_eq!((p.mtu(), p.pointer()), (1280, 1280));
        p.set_echo_ident(3);
        p.set_echo_seq(4);
        assert_eq!(p.rest_of_header(), 0x0003_0004);
        p.set_pointer(6);
        assert_eq!(p.mtu(), 6);
        // A truncated NS has no target.
        let mut s = [0u8; 12];
        s[0] = 135;
        assert_eq!(Icmpv6Packet::new_checked(&s[..]).unwrap().ndp_target_addr(), None);
    }
}
