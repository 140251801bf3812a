//! ARP (RFC 826), restricted to Ethernet hardware / IPv4 protocol addresses.

use core::net::Ipv4Addr;

use crate::bytes::{header, header_mut, ipv4, mac, read16, write16};
use crate::{Error, MacAddr};

/// The ARP opcode (RFC 826 "ar$op"; IANA ARP parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1
    Request,
    /// 2
    Reply,
    /// Anything else.
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    #[inline]
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    #[inline]
    fn from(op: ArpOperation) -> u16 {
        match op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
    pub const END: usize = 28;
}

const HTYPE_ETHERNET: u16 = 1;
const PTYPE_IPV4: u16 = 0x0800;

/// A view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Length of an Ethernet/IPv4 ARP packet.
    pub const LEN: usize = field::END;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wrap, checking length (`Truncated`) and that hardware type is Ethernet
    /// (1), protocol type IPv4 (0x0800), hlen 6 and plen 4 (`Malformed`
    /// otherwise). Extra trailing bytes (Ethernet padding) are allowed.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let Some(h) = buffer.as_ref().first_chunk::<{ field::END }>() else {
            return Err(Error::Truncated);
        };
        if read16(h, field::HTYPE) != HTYPE_ETHERNET
            || read16(h, field::PTYPE) != PTYPE_IPV4
            || h[field::HLEN] != 6
            || h[field::PLEN] != 4
        {
            return Err(Error::Malformed);
        }
        Ok(ArpPacket { buffer })
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline(always)]
    fn hdr(&self) -> &[u8; field::END] {
        header(self.buffer.as_ref())
    }

    /// Hardware type (1 = Ethernet).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        read16(self.hdr(), field::HTYPE)
    }

    /// Protocol type (0x0800 = IPv4).
    #[inline]
    pub fn protocol_type(&self) -> u16 {
        read16(self.hdr(), field::PTYPE)
    }

    /// Hardware address length.
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.hdr()[field::HLEN]
    }

    /// Protocol address length.
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.hdr()[field::PLEN]
    }

    /// Opcode.
    #[inline]
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(read16(self.hdr(), field::OPER))
    }

    /// Sender hardware address.
    #[inline]
    pub fn sender_hw_addr(&self) -> MacAddr {
        mac(self.hdr(), field::SHA)
    }

    /// Sender protocol address.
    #[inline]
    pub fn sender_proto_addr(&self) -> Ipv4Addr {
        ipv4(self.hdr(), field::SPA)
    }

    /// Target hardware address.
    #[inline]
    pub fn target_hw_addr(&self) -> MacAddr {
        mac(self.hdr(), field::THA)
    }

    /// Target protocol address.
    #[inline]
    pub fn target_proto_addr(&self) -> Ipv4Addr {
        ipv4(self.hdr(), field::TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::END] {
        header_mut(self.buffer.as_mut())
    }

    /// Write the fixed Ethernet/IPv4 fields (htype 1, ptype 0x0800, 6, 4).
    #[inline]
    pub fn init_ethernet_ipv4(&mut self) {
        let h = self.hdr_mut();
        write16(h, field::HTYPE, HTYPE_ETHERNET);
        write16(h, field::PTYPE, PTYPE_IPV4);
        h[field::HLEN] = 6;
        h[field::PLEN] = 4;
    }

    /// Set the opcode.
    #[inline]
    pub fn set_operation(&mut self, op: ArpOperation) {
        write16(self.hdr_mut(), field::OPER, op.into());
    }

    /// Set the sender hardware address.
    #[inline]
    pub fn set_sender_hw_addr(&mut self, a: MacAddr) {
        self.hdr_mut()[field::SHA].copy_from_slice(&a.0);
    }

    /// Set the sender protocol address.
    #[inline]
    pub fn set_sender_proto_addr(&mut self, a: Ipv4Addr) {
        self.hdr_mut()[field::SPA].copy_from_slice(&a.octets());
    }

    /// Set the target hardware address.
    #[inline]
    pub fn set_target_hw_addr(&mut self, a: MacAddr) {
        self.hdr_mut()[field::THA].copy_from_slice(&a.0);
    }

    /// Set the target protocol address.
    #[inline]
    pub fn set_target_proto_addr(&mut self, a: Ipv4Addr) {
        self.hdr_mut()[field::TPA].copy_from_slice(&a.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EtherType, EthernetFrame};

    // A real ARP request on Ethernet ("who has 24.166.173.159? tell 24.166.172.1"
    // from 00:07:0d:af:f4:54), padded to the 60-byte minimum frame.
    const ARP_REQUEST: [u8; 60] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54, 0x18, 0xa6,
        0xac, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0xa6, 0xad, 0x9f, 0x06, 0x01, 0x04,
        0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x00, 0x03, 0x02, 0x00, 0x00, 0x05, 0x01, 0x03, 0x01,
    ];

    #[test]
    fn parse_request() {
        let eth = EthernetFrame::new_checked(&ARP_REQUEST[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::Arp);
        let arp = ArpPacket::new_checked(eth.payload()).unwrap();
        assert_eq!(arp.operation(), ArpOperation::Request);
        assert_eq!((arp.hardware_type(), arp.protocol_type()), (1, 0x0800));
        assert_eq!((arp.hardware_len(), arp.protocol_len()), (6, 4));
        assert_eq!(arp.sender_hw_addr(), MacAddr([0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54]));
        assert_eq!(arp.sender_proto_addr(), Ipv4Addr::new(24, 166, 172, 1));
        assert_eq!(arp.target_hw_addr(), MacAddr::ZERO);
        assert_eq!(arp.target_proto_addr(), Ipv4Addr::new(24, 166, 173, 159));
    }

    #[test]
    fn errors() {
        let p = &ARP_REQUEST[14..];
        assert_eq!(ArpPacket::new_checked(&p[..27]).err(), Some(Error::Truncated));
        assert!(ArpPacket::new_checked(&p[..28]).is_ok());
        for (i, v) in [(1, 6u8), (3, 0xdd), (4, 16), (5, 16)] {
            let mut b = [0u8; 28];
            b.copy_from_slice(&p[..28]);
            b[i] = v;
            assert_eq!(ArpPacket::new_checked(&b[..]).err(), Some(Error::Malformed));
        }
    }

    #[test]
    fn build_reply() {
        let mut b = [0u8; ArpPacket::<&[u8]>::LEN];
        let mut a = ArpPacket::new_unchecked(&mut b[..]);
        a.init_ethernet_ipv4();
        a.set_operation(ArpOperation::Reply);
        a.set_sender_hw_addr(MacAddr([1, 2, 3, 4, 5, 6]));
        a.set_sender_proto_addr(Ipv4Addr::new(10, 0, 0, 1));
        a.set_target_hw_addr(MacAddr([7, 8, 9, 10, 11, 12]));
        a.set_target_proto_addr(Ipv4Addr::new(10, 0, 0, 2));
        let a = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(a.operation(), ArpOperation::Reply);
        assert_eq!(a.target_hw_addr(), MacAddr([7, 8, 9, 10, 11, 12]));
        assert_eq!(a.target_proto_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(u16::from(ArpOperation::from(9)), 9);
    }
}
