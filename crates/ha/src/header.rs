//! The datagram header, 24 bytes, big-endian:
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 4    | magic `LRHA` (0x4c524841)                                    |
//! | 4      | 1    | version (1)                                                  |
//! | 5      | 1    | flags: 0x01 an authentication tag ends the datagram          |
//! | 6      | 2    | message count                                                |
//! | 8      | 2    | datagram length in bytes, header and tag included            |
//! | 10     | 2    | reserved (0)                                                 |
//! | 12     | 4    | sender's creator id                                          |
//! | 16     | 8    | sequence number (one per datagram, for the replay window)    |
//!
//! Reserved bits and bytes are sent as zero and ignored; a change an older receiver could
//! not ignore takes a new version, which that receiver refuses whole.

use crate::DecodeError;
use crate::auth::TAG_LEN;
use crate::wire::{Put, Reader};

/// The first four bytes of every datagram: "LRHA".
pub const MAGIC: u32 = 0x4c52_4841;
/// The version this crate writes and reads.
pub const VERSION: u8 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 24;
/// The largest datagram: the length field's range.
pub const MAX_DATAGRAM_LEN: usize = u16::MAX as usize;

/// Header flag: the last [`TAG_LEN`] bytes are an HMAC-SHA256 tag.
const FLAG_TAG: u8 = 0x01;

/// What the sender sets in each datagram's header; the rest is derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// The sending box's creator id (non-zero), which its replay window is kept by.
    pub creator: u32,
    /// One more than the previous datagram's. A sender that restarts must not start again
    /// below the numbers it used before (`docs/ha.md`: it starts from its clock).
    pub sequence: u64,
}

/// The header as read, with what the rest of decoding needs.
pub(crate) struct Parsed {
    pub header: Header,
    pub tagged: bool,
    pub count: u16,
}

impl Header {
    /// Writes the header with count and length 0, filled in by [`finish`].
    pub(crate) fn write(&self, out: &mut Vec<u8>, tagged: bool) {
        out.put_u32(MAGIC);
        out.put_u8(VERSION);
        out.put_u8(if tagged { FLAG_TAG } else { 0 });
        out.put_u16(0);
        out.put_u16(0);
        out.put_u16(0);
        out.put_u32(self.creator);
        out.put_u64(self.sequence);
    }
}

/// Sets the message count and the total length (`len`, the tag included) of a datagram whose
/// header `out` starts with.
pub(crate) fn finish(out: &mut [u8], count: u16, len: u16) {
    out[6..8].copy_from_slice(&count.to_be_bytes());
    out[8..10].copy_from_slice(&len.to_be_bytes());
}

/// Reads and checks the header of `bytes`, the whole datagram: magic, version, and that its
/// length is the datagram's.
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, DecodeError> {
    let too_short = DecodeError::TooShort { len: bytes.len() };
    let r = &mut Reader::new(bytes);
    let magic = r.u32().map_err(|_| too_short)?;
    if magic != MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    let version = r.u8().map_err(|_| too_short)?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    let fields = (r.u8(), r.u16(), r.u16(), r.u16(), r.u32(), r.u64());
    let (Ok(flags), Ok(count), Ok(len), Ok(_), Ok(creator), Ok(sequence)) = fields else {
        return Err(too_short);
    };
    let tagged = flags & FLAG_TAG != 0;
    if tagged && bytes.len() < HEADER_LEN + TAG_LEN {
        return Err(too_short);
    }
    if usize::from(len) != bytes.len() {
        return Err(DecodeError::LengthMismatch { declared: len.into(), actual: bytes.len() });
    }
    if creator == 0 {
        return Err(DecodeError::ZeroCreator);
    }
    Ok(Parsed { header: Header { creator, sequence }, tagged, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(len: u16) -> Vec<u8> {
        let mut out = vec![];
        Header { creator: 9, sequence: 1 }.write(&mut out, false);
        finish(&mut out, 0, len);
        out
    }

    #[test]
    fn checks_come_in_order_magic_version_length() {
        let ok = datagram(HEADER_LEN as u16);
        assert!(parse(&ok).is_ok());
        assert_eq!(parse(&ok[..3]).err(), Some(DecodeError::TooShort { len: 3 }));
        assert_eq!(parse(&ok[..23]).err(), Some(DecodeError::TooShort { len: 23 }));
        let mut bad = ok.clone();
        bad[0] = b'X';
        assert_eq!(parse(&bad).err(), Some(DecodeError::BadMagic(0x5852_4841)));
        let mut v2 = ok.clone();
        v2[4] = 2;
        assert_eq!(parse(&v2).err(), Some(DecodeError::UnknownVersion(2)));
        let long = datagram(25);
        let mismatch = DecodeError::LengthMismatch { declared: 25, actual: 24 };
        assert_eq!(parse(&long).err(), Some(mismatch));
    }
}
