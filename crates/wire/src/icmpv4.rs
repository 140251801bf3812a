//! ICMP for IPv4 (RFC 792; next-hop MTU from RFC 1191 section 4).

use crate::bytes::{clamp, clamp_mut, header, header_mut, read16, read32, write16};
use crate::{Error, checksum};

/// ICMPv4 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Type {
    /// 0
    EchoReply,
    /// 3
    DestUnreachable,
    /// 5
    Redirect,
    /// 8
    EchoRequest,
    /// 11
    TimeExceeded,
    /// 12
    ParamProblem,
    /// Anything else.
    Unknown(u8),
}

impl Icmpv4Type {
    /// An error message (RFC 1812 4.3.2.7: never sent in reply to one).
    /// Source quench (4) counts too.
    #[inline]
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Icmpv4Type::DestUnreachable
                | Icmpv4Type::Redirect
                | Icmpv4Type::TimeExceeded
                | Icmpv4Type::ParamProblem
                | Icmpv4Type::Unknown(4)
        )
    }
}

impl From<u8> for Icmpv4Type {
    #[inline]
    fn from(v: u8) -> Self {
        match v {
            0 => Icmpv4Type::EchoReply,
            3 => Icmpv4Type::DestUnreachable,
            5 => Icmpv4Type::Redirect,
            8 => Icmpv4Type::EchoRequest,
            11 => Icmpv4Type::TimeExceeded,
            12 => Icmpv4Type::ParamProblem,
            other => Icmpv4Type::Unknown(other),
        }
    }
}

impl From<Icmpv4Type> for u8 {
    #[inline]
    fn from(t: Icmpv4Type) -> u8 {
        match t {
            Icmpv4Type::EchoReply => 0,
            Icmpv4Type::DestUnreachable => 3,
            Icmpv4Type::Redirect => 5,
            Icmpv4Type::EchoRequest => 8,
            Icmpv4Type::TimeExceeded => 11,
            Icmpv4Type::ParamProblem => 12,
            Icmpv4Type::Unknown(v) => v,
        }
    }
}

/// Codes for [`Icmpv4Type::DestUnreachable`] (RFC 792, RFC 1812 5.2.7.1).
pub mod unreachable {
    /// Network unreachable.
    pub const NET: u8 = 0;
    /// Host unreachable.
    pub const HOST: u8 = 1;
    /// Protocol unreachable.
    pub const PROTOCOL: u8 = 2;
    /// Port unreachable.
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set (RFC 1191).
    pub const FRAG_NEEDED: u8 = 4;
    /// Communication administratively prohibited (RFC 1812).
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Codes for [`Icmpv4Type::TimeExceeded`].
pub mod time_exceeded {
    /// TTL exceeded in transit.
    pub const TTL: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQ: Range<usize> = 6..8;
    pub const MTU: Range<usize> = 6..8;
    pub const DATA: usize = 8;
}

/// A view of an ICMPv4 message (the buffer is exactly the IP payload; the
/// checksum covers all of it).
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Type, code, checksum and the 4-byte rest-of-header.
    pub const HEADER_LEN: usize = field::DATA;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wrap, checking the 8-byte header (RFC 792: every message has type,
    /// code, checksum and a 32-bit type-specific word) is present.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < field::DATA {
            return Err(Error::Truncated);
        }
        Ok(Icmpv4Packet { buffer })
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
    pub fn msg_type(&self) -> Icmpv4Type {
        Icmpv4Type::from(self.hdr()[field::TYPE])
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

    /// The type-specific second word (bytes 4..8).
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

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191 section 4).
    #[inline]
    pub fn mtu(&self) -> u16 {
        read16(self.hdr(), field::MTU)
    }

    /// Parameter problem pointer (RFC 792).
    #[inline]
    pub fn pointer(&self) -> u8 {
        self.hdr()[4]
    }

    /// Everything after the 8-byte header.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        clamp(b, field::DATA, b.len())
    }

    /// Whether the checksum over the whole message is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::DATA] {
        header_mut(self.buffer.as_mut())
    }

    /// Set the message type.
    #[inline]
    pub fn set_msg_type(&mut self, t: Icmpv4Type) {
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
        self.hdr_mut()[field::REST].copy_from_slice(&v.to_be_bytes());
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

    /// Set the next-hop MTU (bytes 6..8; bytes 4..6 are left alone).
    #[inline]
    pub fn set_mtu(&mut self, v: u16) {
        write16(self.hdr_mut(), field::MTU, v);
    }

    /// Set the parameter problem pointer.
    #[inline]
    pub fn set_pointer(&mut self, p: u8) {
        self.hdr_mut()[4] = p;
    }

    /// Mutable data after the header.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        clamp_mut(b, field::DATA, len)
    }

    /// Compute and store the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IpProtocol, Ipv4Packet};

    // IPv4 ICMP echo request 10.0.0.1 -> 10.0.0.2, id 0x42 seq 7, 16 data
    // bytes 00..0f.
    const ICMPV4_ECHO: [u8; 44] = [
        0x45, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0x26, 0xcf, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0xbf, 0x76, 0x00, 0x42, 0x00, 0x07, 0x00, 0x01,
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    ];

    #[test]
    fn echo_fixture() {
        let ip = Ipv4Packet::new_checked(&ICMPV4_ECHO[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.protocol(), IpProtocol::Icmp);
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(icmp.msg_type(), Icmpv4Type::EchoRequest);
        assert!(!icmp.msg_type().is_error());
        assert_eq!(icmp.code(), 0);
        assert_eq!(icmp.checksum(), 0xbf76);
        assert_eq!((icmp.echo_ident(), icmp.echo_seq()), (0x42, 7));
        assert_eq!(icmp.rest_of_header(), 0x0042_0007);
        assert_eq!(icmp.data(), &ICMPV4_ECHO[28..]);
        assert!(icmp.verify_checksum());
    }

    #[test]
    fn errors_and_round_trip() {
        assert_eq!(Icmpv4Packet::new_checked(&ICMPV4_ECHO[20..27]).err(), Some(Error::Truncated));
        assert!(Icmpv4Packet::new_checked(&ICMPV4_ECHO[20..28]).unwrap().data().is_empty());
        for v in 0..=255u8 {
            assert_eq!(u8::from(Icmpv4Type::from(v)), v);
        }
    }

    #[test]
    fn build_frag_needed() {
        let mut b = [0u8; 8 + 28];
        let mut p = Icmpv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_msg_type(Icmpv4Type::DestUnreachable);
        p.set_code(unreachable::FRAG_NEEDED);
        p.set_mtu(1400);
        p.data_mut().copy_from_slice(&ICMPV4_ECHO[..28]);
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert!(p.msg_type().is_error());
        assert_eq!((p.code(), p.mtu()), (4, 1400));
        p.set_msg_type(Icmpv4Type::ParamProblem);
        p.set_pointer(9);
        p.set_echo_ident(1);
        p.set_echo_seq(2);
        assert_eq!(p.rest_of_header(), 0x0001_0002);
        p.set_rest_of_header(0x0900_0000);
        assert_eq!(p.pointer(), 9);
        assert!(!p.verify_checksum());
    }
}
