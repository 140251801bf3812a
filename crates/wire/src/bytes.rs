//! Crate-private helpers for reading fixed fields out of headers.
//!
//! Getters first take `header::<N>()`, a `&[u8; N]` (one length check, which
//! `new_checked` guarantees passes), then read constant offsets from it; with
//! the length known at compile time, the per-field bounds checks disappear.

use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops::Range;

use crate::MacAddr;

#[cold]
#[inline(never)]
#[track_caller]
fn short(len: usize, need: usize) -> ! {
    panic!("wire: {len}-byte buffer is shorter than the {need}-byte header (use new_checked)")
}

#[inline(always)]
#[track_caller]
pub(crate) fn header<const N: usize>(b: &[u8]) -> &[u8; N] {
    match b.first_chunk::<N>() {
        Some(h) => h,
        None => short(b.len(), N),
    }
}

#[inline(always)]
#[track_caller]
pub(crate) fn header_mut<const N: usize>(b: &mut [u8]) -> &mut [u8; N] {
    let len = b.len();
    match b.first_chunk_mut::<N>() {
        Some(h) => h,
        None => short(len, N),
    }
}

/// `b[start..end]`, or an empty slice if the range does not fit.
#[inline(always)]
pub(crate) fn clamp(b: &[u8], start: usize, end: usize) -> &[u8] {
    b.get(start..end).unwrap_or(&[])
}

#[inline(always)]
pub(crate) fn clamp_mut(b: &mut [u8], start: usize, end: usize) -> &mut [u8] {
    b.get_mut(start..end).unwrap_or(&mut [])
}

#[inline(always)]
pub(crate) fn read16(b: &[u8], f: Range<usize>) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

#[inline(always)]
pub(crate) fn read32(b: &[u8], f: Range<usize>) -> u32 {
    let s = f.start;
    u32::from_be_bytes([b[s], b[s + 1], b[s + 2], b[s + 3]])
}

#[inline(always)]
pub(crate) fn write16(b: &mut [u8], f: Range<usize>, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn write32(b: &mut [u8], f: Range<usize>, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn mac(b: &[u8], f: Range<usize>) -> MacAddr {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[f]);
    MacAddr(a)
}

#[inline(always)]
pub(crate) fn ipv4(b: &[u8], f: Range<usize>) -> Ipv4Addr {
    Ipv4Addr::from(read32(b, f))
}

#[inline(always)]
pub(crate) fn ipv6(b: &[u8], f: Range<usize>) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[f]);
    Ipv6Addr::from(a)
}
