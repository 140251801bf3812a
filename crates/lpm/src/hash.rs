//! A fast, non-cryptographic hasher for integer keys (multiply + splitmix64 finaliser).
//! Used by the reference tables, whose lookups probe up to 129 maps per address in tests,
//! and by the firewall's build-time maps of rule ranges (`fw`'s `classifier/classes.rs`).

use std::hash::{BuildHasherDefault, Hasher};

/// Hasher for `u32` / `u128` keys.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

/// Builds [`IntHasher`]s (for `HashMap::with_hasher` and friends).
pub type IntBuild = BuildHasherDefault<IntHasher>;

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
    fn write_usize(&mut self, n: usize) {
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
