//! TCP (RFC 9293 section 3.1 header format).

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops::{BitAnd, BitOr, BitOrAssign};

use crate::bytes::{clamp, clamp_mut, header, header_mut, read16, read32, write16, write32};
use crate::{Error, IpProtocol, checksum};

/// The TCP control bits (byte 13 of the header).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// No flags.
    #[inline]
    pub const fn empty() -> Self {
        TcpFlags(0)
    }

    /// The raw byte.
    #[inline]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// All bits of `other` are set.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Any bit of `other` is set.
    #[inline]
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Set the bits of `other`.
    #[inline]
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clear the bits of `other`.
    #[inline]
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for TcpFlags {
    #[inline]
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        f.write_str("TcpFlags(")?;
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        f.write_str(")")
    }
}

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    pub const DOFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
    pub const OPTIONS: usize = 20;
}

/// A view of a TCP segment. TCP has no length field: the buffer must be
/// exactly the segment (the IP payload), and checksums cover all of it.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Header length without options.
    pub const MIN_HEADER_LEN: usize = field::OPTIONS;

    /// Wrap without checking.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wrap, checking the 20-byte fixed header is present (`Truncated`), the
    /// data offset is at least 5 (RFC 9293 3.1 "Data Offset", `BadLength`),
    /// and the header it describes fits in the buffer (`Truncated`).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        let Some(h) = b.first_chunk::<{ field::OPTIONS }>() else {
            return Err(Error::Truncated);
        };
        let hl = usize::from(h[field::DOFF] >> 4) * 4;
        if hl < field::OPTIONS {
            return Err(Error::BadLength);
        }
        if hl > b.len() {
            return Err(Error::Truncated);
        }
        Ok(TcpPacket { buffer })
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        read32(self.hdr(), field::SEQ)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        read32(self.hdr(), field::ACK)
    }

    /// Header length in bytes (data offset * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.hdr()[field::DOFF] >> 4) * 4
    }

    /// Control bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.hdr()[field::FLAGS])
    }

    /// Window.
    #[inline]
    pub fn window_len(&self) -> u16 {
        read16(self.hdr(), field::WINDOW)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read16(self.hdr(), field::CHECKSUM)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent(&self) -> u16 {
        read16(self.hdr(), field::URGENT)
    }

    /// Options: bytes 20..header_len.
    #[inline]
    pub fn options(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), field::OPTIONS, self.header_len())
    }

    /// The MSS option (kind 2, RFC 9293 3.2), if present and well-formed.
    /// Stops at End of Option List or at the first malformed option.
    pub fn mss(&self) -> Option<u16> {
        find_option(self.options(), 2, 4).map(|o| u16::from_be_bytes([o[2], o[3]]))
    }

    /// The window-scale shift (option kind 3, RFC 7323 2.3), capped at 14 as 2.3 says.
    pub fn window_scale(&self) -> Option<u8> {
        window_scale(self.options())
    }

    /// Data after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        clamp(b, self.header_len(), b.len())
    }

    fn compute(&self, pseudo: u32) -> u16 {
        !checksum::fold(u64::from(pseudo) + u64::from(checksum::sum(self.buffer.as_ref())))
    }

    fn pseudo_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> u32 {
        let len = self.buffer.as_ref().len() as u32;
        checksum::pseudo_header_v4(src, dst, IpProtocol::Tcp.into(), len)
    }

    fn pseudo_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> u32 {
        let len = self.buffer.as_ref().len() as u32;
        checksum::pseudo_header_v6(src, dst, IpProtocol::Tcp.into(), len)
    }

    /// Checksum correct over the IPv4 pseudo-header (RFC 9293 3.1).
    #[inline]
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        self.compute(self.pseudo_v4(src, dst)) == 0
    }

    /// Checksum correct over the IPv6 pseudo-header (RFC 8200 8.1).
    #[inline]
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        self.compute(self.pseudo_v6(src, dst)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    #[inline(always)]
    fn hdr_mut(&mut self) -> &mut [u8; field::OPTIONS] {
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

    /// Set the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, v: u32) {
        write32(self.hdr_mut(), field::SEQ, v);
    }

    /// Set the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, v: u32) {
        write32(self.hdr_mut(), field::ACK, v);
    }

    /// Set the header length in bytes (multiple of 4, 20..=60); the reserved
    /// bits are cleared.
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        self.hdr_mut()[field::DOFF] = (((len / 4) as u8) & 0x0f) << 4;
    }

    /// Set the control bits.
    #[inline]
    pub fn set_flags(&mut self, f: TcpFlags) {
        self.hdr_mut()[field::FLAGS] = f.0;
    }

    /// Set the window.
    #[inline]
    pub fn set_window_len(&mut self, v: u16) {
        write16(self.hdr_mut(), field::WINDOW, v);
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        write16(self.hdr_mut(), field::CHECKSUM, v);
    }

    /// Set the urgent pointer.
    #[inline]
    pub fn set_urgent(&mut self, v: u16) {
        write16(self.hdr_mut(), field::URGENT, v);
    }

    /// Mutable options.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clamp_mut(self.buffer.as_mut(), field::OPTIONS, hl)
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let b = self.buffer.as_mut();
        let len = b.len();
        clamp_mut(b, hl, len)
    }

    /// Compute and store the checksum with the IPv4 pseudo-header.
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        self.set_checksum(0);
        let c = self.compute(self.pseudo_v4(src, dst));
        self.set_checksum(c);
    }

    /// Compute and store the checksum with the IPv6 pseudo-header.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let c = self.compute(self.pseudo_v6(src, dst));
        self.set_checksum(c);
    }
}

/// The option of `kind` and total length `len` in a TCP option list (kind, length, data;
/// kinds 0 and 1 are single bytes), whole; `None` if absent, or if the list ends (kind 0) or
/// is malformed before it.
pub fn find_option(mut opts: &[u8], kind: u8, len: usize) -> Option<&[u8]> {
    while let [k, rest @ ..] = opts {
        match *k {
            0 => return None,
            1 => opts = rest,
            _ => {
                let l = usize::from(*rest.first()?);
                if l < 2 || l > opts.len() {
                    return None;
                }
                if *k == kind && l == len {
                    return Some(&opts[..l]);
                }
                opts = &opts[l..];
            }
        }
    }
    None
}

/// The window-scale shift in the option list `opts` (RFC 7323 2.3: at most 14).
pub fn window_scale(opts: &[u8]) -> Option<u8> {
    find_option(opts, 3, 3).map(|o| o[2].min(14))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ipv4Packet;

    // A Linux-style TCP SYN 10.0.0.1:43210 -> 93.184.216.34:80 with options
    // MSS 1460, SACK permitted, timestamps, NOP, window scale 7 (doff 10).
    const TCP_SYN: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x3a, 0x2f, 0x40, 0x00, 0x40, 0x06, 0xc0, 0xb1, 0x0a, 0x00, 0x00,
        0x01, 0x5d, 0xb8, 0xd8, 0x22, 0xa8, 0xca, 0x00, 0x50, 0x5e, 0xed, 0x12, 0x34, 0x00, 0x00,
        0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0xbc, 0x9f, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04,
        0x02, 0x08, 0x0a, 0x0a, 0x1b, 0x2c, 0x3d, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn syn_fixture() {
        let ip = Ipv4Packet::new_checked(&TCP_SYN[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.protocol(), IpProtocol::Tcp);
        let t = TcpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (43210, 80));
        assert_eq!((t.seq_number(), t.ack_number()), (0x5eed1234, 0));
        assert_eq!(t.header_len(), 40);
        assert_eq!(t.flags(), TcpFlags::SYN);
        assert!(
            t.flags().contains(TcpFlags::SYN) && !t.flags().contains(TcpFlags::SYN | TcpFlags::ACK)
        );
        assert_eq!(t.window_len(), 64240);
        assert_eq!((t.checksum(), t.urgent()), (0xbc9f, 0));
        assert_eq!(t.options().len(), 20);
        assert_eq!(t.mss(), Some(1460));
        assert!(t.payload().is_empty());
        assert!(t.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()));
        assert!(!t.verify_checksum_v4(&ip.dst_addr(), &Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn errors() {
        let seg = &TCP_SYN[20..];
        assert_eq!(TcpPacket::new_checked(&seg[..19]).err(), Some(Error::Truncated));
        assert_eq!(TcpPacket::new_checked(&seg[..39]).err(), Some(Error::Truncated));
        let mut b = [0u8; 40];
        b.copy_from_slice(seg);
        b[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&b[..]).err(), Some(Error::BadLength));
        b[12] = 0x50;
        let t = TcpPacket::new_checked(&b[..]).unwrap();
        assert!(t.options().is_empty());
        assert_eq!(t.payload().len(), 20);
        assert_eq!(t.mss(), None);
        b[12] = 0xf0;
        assert_eq!(TcpPacket::new_checked(&b[..]).err(), Some(Error::Truncated));
    }

    #[test]
    fn setters_and_checksums() {
        let src6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst6: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let mut b = [0u8; 24];
        let mut t = TcpPacket::new_unchecked(&mut b[..]);
        t.set_header_len(20);
        t.set_src_port(1);
        t.set_dst_port(2);
        t.set_seq_number(3);
        t.set_ack_number(4);
        let mut f = TcpFlags::ACK | TcpFlags::PSH;
        f |= TcpFlags::FIN;
        f.remove(TcpFlags::PSH);
        f.insert(TcpFlags::ECE);
        t.set_flags(f);
        t.set_window_len(5);
        t.set_urgent(6);
        t.payload_mut().copy_from_slice(b"data");
        t.fill_checksum_v6(&src6, &dst6);
        assert!(t.verify_checksum_v6(&src6, &dst6));
        let a = Ipv4Addr::new(1, 1, 1, 1);
        t.fill_checksum_v4(&a, &a);
        assert!(t.verify_checksum_v4(&a, &a));
        assert_eq!((t.src_port(), t.dst_port(), t.seq_number(), t.ack_number()), (1, 2, 3, 4));
        assert_eq!((t.window_len(), t.urgent()), (5, 6));
        assert_eq!(t.flags().bits(), 0x51);
        assert!(t.flags().intersects(TcpFlags::FIN | TcpFlags::RST));
        assert_eq!(format!("{:?}", t.flags()), "TcpFlags(FIN|ACK|ECE)");
        assert_eq!((t.flags() & TcpFlags::ACK), TcpFlags::ACK);
        assert!(t.options_mut().is_empty());
        assert_eq!(TcpFlags::empty(), TcpFlags::default());
    }

    #[test]
    fn window_scale_option() {
        assert_eq!(window_scale(&[1, 1, 3, 3, 7, 0]), Some(7));
        assert_eq!(window_scale(&[2, 4, 5, 0xb4, 3, 3, 20]), Some(14));
        assert_eq!(window_scale(&[2, 4, 5]), None);
        assert_eq!(window_scale(&[0, 3, 3, 7]), None);
        assert_eq!(window_scale(&[]), None);
    }
}
