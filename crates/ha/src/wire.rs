//! Big-endian fields in and out of byte buffers. Reads go through [`Reader`], which returns
//! [`BodyError::Short`] instead of indexing past the end: the decoder's input is untrusted,
//! and every length check lives here rather than before each read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::FieldError;

/// Why a message body could not be read: too short for its fields, or a field out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyError {
    Short,
    Field(FieldError),
}

impl From<FieldError> for BodyError {
    fn from(e: FieldError) -> Self {
        BodyError::Field(e)
    }
}

/// A cursor over untrusted bytes.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], BodyError> {
        if n > self.bytes.len() {
            return Err(BodyError::Short);
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], BodyError> {
        self.take(N)?.try_into().map_err(|_| BodyError::Short)
    }

    pub fn u8(&mut self) -> Result<u8, BodyError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, BodyError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, BodyError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, BodyError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// An address of `v6`'s family: 4 or 16 bytes.
    pub fn addr(&mut self, v6: bool) -> Result<IpAddr, BodyError> {
        Ok(if v6 {
            IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))
        })
    }
}

/// Appending big-endian fields to an output buffer.
pub(crate) trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_addr(&mut self, a: &IpAddr);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }

    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    fn put_addr(&mut self, a: &IpAddr) {
        match a {
            IpAddr::V4(a) => self.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => self.extend_from_slice(&a.octets()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end_instead_of_panicking() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16(), Ok(0x0102));
        assert_eq!(r.u16(), Err(BodyError::Short));
        assert_eq!(r.u8(), Ok(3));
        assert_eq!(r.u64(), Err(BodyError::Short));
        assert_eq!(r.take(usize::MAX), Err(BodyError::Short));
    }
}
