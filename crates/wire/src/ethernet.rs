//! Ethernet II frames (IEEE 802.3 clause 3, DIX type field), IEEE 802.1Q VLAN
//! tags and IEEE 802.1ad (QinQ) stacked tags.

use core::fmt;
use core::str::FromStr;

use crate::Error;
use crate::bytes::{clamp, clamp_mut, header, header_mut, mac, read16, write16};

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// `00:00:00:00:00:00`.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// The six octets.
    #[inline]
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// All ones.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }

    /// The I/G bit (least significant bit of the first octet) is set; true for
    /// broadcast too.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Not multicast (and not broadcast).
    #[inline]
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The U/L bit is set (locally administered).
    #[inline]
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

impl FromStr for MacAddr {
    type Err = Error;

    /// Parses `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff` (exactly two hex
    /// digits per octet, one separator kind throughout, either case).
    fn from_str(s: &str) -> Result<Self, Error> {
        fn hex(c: u8) -> Result<u8, Error> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                b'A'..=b'F' => Ok(c - b'A' + 10),
                _ => Err(Error::Malformed),
            }
        }
        let b = s.as_bytes();
        if b.len() != 17 {
            return Err(Error::Malformed);
        }
        let sep = b[2];
        if sep != b':' && sep != b'-' {
            return Err(Error::Malformed);
        }
        let mut out = [0u8; 6];
        for (i, o) in out.iter_mut().enumerate() {
            let p = i * 3;
            if i > 0 && b[p - 1] != sep {
                return Err(Error::Malformed);
            }
            *o = (hex(b[p])? << 4) | hex(b[p + 1])?;
        }
        Ok(MacAddr(out))
    }
}

/// An EtherType (IEEE 802 numbers). `Unknown` holds values without a named
/// variant; construct through `From<u16>` to get the canonical variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// 0x0800
    Ipv4,
    /// 0x0806
    Arp,
    /// 0x86dd
    Ipv6,
    /// 0x8100, IEEE 802.1Q customer tag.
    Vlan,
    /// 0x88a8, IEEE 802.1ad service tag.
    QinQ,
    /// Anything else.
    Unknown(u16),
}

impl From<u16> for EtherType {
    #[inline]
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    #[inline]
    fn from(e: EtherType) -> u16 {
        match e {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: usize = 14;

    // VLAN tag (the 4 bytes after a 0x8100 / 0x88a8 EtherType).
    pub const TCI: Range<usize> = 0..2;
    pub const INNER_ETHERTYPE: Range<usize> = 2..4;
    pub const VLAN_PAYLOAD: usize = 4;
}

/// A view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Destination + source + EtherType.
    pub const HEADER_LEN: usize = field::PAYLOAD;

    /// Wrap without checking; getters panic if the buffer is under 14 bytes.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wrap, checking the buffer holds the 14-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(EthernetFrame { buffer })
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

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        mac(self.hdr(), field::DST)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        mac(self.hdr(), field::SRC)
    }

    /// The (outermost) EtherType; `Vlan`/`QinQ` if the frame is tagged.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(read16(self.hdr(), field::ETHERTYPE))
    }

    /// Everything after the 14-byte header (including any padding).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        clamp(b, field::PAYLOAD, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::PAYLOAD] {
        header_mut(self.buffer.as_mut())
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.hdr_mut()[field::DST].copy_from_slice(&a.0);
    }

    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.hdr_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Set the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, e: EtherType) {
        write16(self.hdr_mut(), field::ETHERTYPE, e.into());
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        clamp_mut(b, field::PAYLOAD, len)
    }
}

/// A view of an IEEE 802.1Q tag: the TCI and the inner EtherType, i.e. the 4
/// bytes that follow a 0x8100 or 0x88a8 EtherType (IEEE 802.1Q-2018 9.6).
#[derive(Debug, Clone)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// TCI + inner EtherType.
    pub const HEADER_LEN: usize = field::VLAN_PAYLOAD;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        VlanHeader { buffer }
    }

    /// Wrap, checking the buffer holds the 4-byte tag.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(VlanHeader { buffer })
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline(always)]
    fn tci(&self) -> u16 {
        read16(header::<4>(self.buffer.as_ref()), field::TCI)
    }

    /// Priority code point (3 bits).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The EtherType of what follows the tag.
    #[inline]
    pub fn inner_ethertype(&self) -> EtherType {
        EtherType::from(read16(header::<4>(self.buffer.as_ref()), field::INNER_ETHERTYPE))
    }

    /// Everything after the tag.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        clamp(b, field::VLAN_PAYLOAD, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    #[inline(always)]
    fn set_tci(&mut self, mask: u16, bits: u16) {
        let h = header_mut::<4>(self.buffer.as_mut());
        let tci = (read16(h, field::TCI) & !mask) | (bits & mask);
        write16(h, field::TCI, tci);
    }

    /// Set the VLAN identifier (only the low 12 bits are used).
    #[inline]
    pub fn set_vid(&mut self, vid: u16) {
        self.set_tci(0x0fff, vid);
    }

    /// Set the priority code point (only the low 3 bits are used).
    #[inline]
    pub fn set_pcp(&mut self, pcp: u8) {
        self.set_tci(0xe000, u16::from(pcp) << 13);
    }

    /// Set the drop eligible indicator.
    #[inline]
    pub fn set_dei(&mut self, dei: bool) {
        self.set_tci(0x1000, if dei { 0x1000 } else { 0 });
    }

    /// Set the inner EtherType.
    #[inline]
    pub fn set_inner_ethertype(&mut self, e: EtherType) {
        write16(header_mut::<4>(self.buffer.as_mut()), field::INNER_ETHERTYPE, e.into());
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        clamp_mut(b, field::VLAN_PAYLOAD, len)
    }
}

/// Result of [`parse_l2`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2Header {
    /// The innermost EtherType (never `Vlan`/`QinQ`).
    pub ethertype: EtherType,
    /// Offset of the layer-3 header from the start of the frame.
    pub l3_offset: usize,
    /// VIDs of the outer and inner tags, if present.
    pub vlans: [Option<u16>; 2],
}

const TPID_VLAN: u16 = 0x8100;
const TPID_QINQ: u16 = 0x88a8;

/// Parse the Ethernet header and up to two VLAN tags (802.1Q, or 802.1ad
/// S-tag + C-tag; either TPID is accepted at either depth, as Linux does).
/// More than two tags is `Malformed`; a tag cut short is `Truncated`.
#[inline]
pub fn parse_l2(frame: &[u8]) -> Result<L2Header, Error> {
    let Some(h) = frame.first_chunk::<14>() else {
        return Err(Error::Truncated);
    };
    let mut et = u16::from_be_bytes([h[12], h[13]]);
    let mut off = 14;
    let mut vlans = [None; 2];
    for slot in &mut vlans {
        if et != TPID_VLAN && et != TPID_QINQ {
            break;
        }
        let Some(tag) = frame.get(off..off + 4) else {
            return Err(Error::Truncated);
        };
        *slot = Some(u16::from_be_bytes([tag[0], tag[1]]) & 0x0fff);
        et = u16::from_be_bytes([tag[2], tag[3]]);
        off += 4;
    }
    if et == TPID_VLAN || et == TPID_QINQ {
        return Err(Error::Malformed);
    }
    Ok(L2Header { ethertype: EtherType::from(et), l3_offset: off, vlans })
}

#[cfg(test)]
mod tests {
    use super::*;

    // A QinQ frame: broadcast from 02:00:00:00:00:01, S-tag 0x88a8 PCP 3 VID 100,
    // C-tag 0x8100 VID 200, then an IPv4 ICMP echo request 10.0.0.1 -> 10.0.0.2.
    const QINQ: [u8; 66] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0xa8, 0x60,
        0x64, 0x81, 0x00, 0x00, 0xc8, 0x08, 0x00, 0x45, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x40, 0x00,
        0x40, 0x01, 0x26, 0xcf, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0xbf,
        0x76, 0x00, 0x42, 0x00, 0x07, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
        0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    ];

    #[test]
    fn mac_parse_display() {
        let m: MacAddr = "AA:bb:0c:dd:ee:ff".parse().unwrap();
        assert_eq!(m, MacAddr([0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0xff]));
        assert_eq!(m.to_string(), "aa:bb:0c:dd:ee:ff");
        assert_eq!("aa-bb-0c-dd-ee-ff".parse::<MacAddr>(), Ok(m));
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:",
            "aa:bb-cc:dd:ee:ff",
            "aa.bb.cc.dd.ee.ff",
            "aa:bb:cc:dd:ee:fg",
            "a:bb:cc:dd:ee:fff",
            "aabbccddeeff",
            "aa:bb:cc:dd:ee:ff ",
            "ää:bb:cc:dd:ee:f",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(Error::Malformed), "{bad:?}");
        }
        assert!(MacAddr::BROADCAST.is_broadcast() && MacAddr::BROADCAST.is_multicast());
        assert!("01:00:5e:00:00:fb".parse::<MacAddr>().unwrap().is_multicast());
        assert!(!m.is_broadcast() && m.is_unicast());
        assert_eq!(format!("{:?}", MacAddr::ZERO), "MacAddr(00:00:00:00:00:00)");
    }

    #[test]
    fn ethertype_round_trip() {
        for v in [0x0800u16, 0x0806, 0x86dd, 0x8100, 0x88a8, 0x1234] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
        assert_eq!(EtherType::from(0x88a8), EtherType::QinQ);
        assert_eq!(EtherType::from(0x88cc), EtherType::Unknown(0x88cc));
    }

    #[test]
    fn qinq_fixture() {
        let f = EthernetFrame::new_checked(&QINQ[..]).unwrap();
        assert_eq!(f.dst_addr(), MacAddr::BROADCAST);
        assert_eq!(f.src_addr(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.ethertype(), EtherType::QinQ);
        let s = VlanHeader::new_checked(f.payload()).unwrap();
        assert_eq!((s.pcp(), s.dei(), s.vid()), (3, false, 100));
        assert_eq!(s.inner_ethertype(), EtherType::Vlan);
        let c = VlanHeader::new_checked(s.payload()).unwrap();
        assert_eq!((c.pcp(), c.dei(), c.vid()), (0, false, 200));
        assert_eq!(c.inner_ethertype(), EtherType::Ipv4);
        assert_eq!(c.payload()[0], 0x45);

        let l2 = parse_l2(&QINQ).unwrap();
        assert_eq!(
            l2,
            L2Header { ethertype: EtherType::Ipv4, l3_offset: 22, vlans: [Some(100), Some(200)] }
        );
    }

    #[test]
    fn parse_l2_untagged_and_single() {
        let mut f = [0u8; 60];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(
            parse_l2(&f).unwrap(),
            L2Header { ethertype: EtherType::Ipv6, l3_offset: 14, vlans: [None, None] }
        );
        f[12..18].copy_from_slice(&[0x81, 0x00, 0xef, 0xff, 0x08, 0x06]);
        assert_eq!(
            parse_l2(&f).unwrap(),
            L2Header { ethertype: EtherType::Arp, l3_offset: 18, vlans: [Some(0xfff), None] }
        );
    }

    #[test]
    fn parse_l2_errors() {
        assert_eq!(parse_l2(&QINQ[..13]), Err(Error::Truncated));
        assert_eq!(parse_l2(&QINQ[..17]), Err(Error::Truncated));
        assert_eq!(parse_l2(&QINQ[..21]), Err(Error::Truncated));
        assert!(parse_l2(&QINQ[..22]).is_ok());
        // Three tags.
        let mut f = QINQ;
        f[20..22].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse_l2(&f), Err(Error::Malformed));
    }

    #[test]
    fn new_checked_errors() {
        assert_eq!(EthernetFrame::new_checked(&QINQ[..13]).err(), Some(Error::Truncated));
        assert!(EthernetFrame::new_checked(&QINQ[..14]).unwrap().payload().is_empty());
        assert_eq!(VlanHeader::new_checked(&QINQ[..3]).err(), Some(Error::Truncated));
    }

    #[test]
    fn setters() {
        let mut buf = [0u8; 18];
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(MacAddr::BROADCAST);
        f.set_src_addr(MacAddr([1, 2, 3, 4, 5, 6]));
        f.set_ethertype(EtherType::Vlan);
        let mut v = VlanHeader::new_checked(f.payload_mut()).unwrap();
        v.set_vid(0x1abc); // high bits masked off
        v.set_pcp(7);
        v.set_dei(true);
        v.set_inner_ethertype(EtherType::Ipv6);
        assert_eq!((v.vid(), v.pcp(), v.dei()), (0xabc, 7, true));
        v.set_dei(false);
        v.set_pcp(2);
        assert_eq!((v.vid(), v.pcp(), v.dei()), (0xabc, 2, false));
        assert_eq!(buf[..14], [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 0x81, 0x00]);
        assert_eq!(buf[14..], [0x4a, 0xbc, 0x86, 0xdd]);
    }
}
