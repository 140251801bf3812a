//! A fast, non-cryptographic hasher for integer keys (multiply + splitmix64 finaliser).
//! Used by the reference tables, whose lookups probe up to 129 maps per address in tests.

use std::hash::{BuildHasherDefault, Hasher};

/// Hasher for `u32` / `u128` keys.
#[derive(Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

pub(crate) type IntBuild = BuildHasherDefault<IntHasher>;

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    #[inline]
    fn write_u128(&mut self, n: u128) {
        self.write_u64(n as u64);
        self.write_u64((n >> 64) as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
