//! A fast hasher for prefix keys (`(IpAddr, u8)`) in the control plane's large maps: a full
//! table makes millions of lookups there, where SipHash's rounds cost more than the map. One
//! folded multiply per word (the 128-bit product's halves xored), keyed with a random seed per
//! map, so that a BGP peer choosing the prefixes cannot aim them at one bucket.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

const MULTIPLIER: u64 = 0x5851_f42d_4c95_7f2d;

fn fold(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

/// Makes [`PrefixHasher`]s with this map's seed.
#[derive(Clone, Debug)]
pub struct PrefixHash {
    seed: u64,
}

impl Default for PrefixHash {
    fn default() -> Self {
        PrefixHash { seed: RandomState::new().hash_one(0x6c72_u64) | 1 }
    }
}

impl BuildHasher for PrefixHash {
    type Hasher = PrefixHasher;

    fn build_hasher(&self) -> PrefixHasher {
        PrefixHasher { state: self.seed, seed: self.seed }
    }
}

pub struct PrefixHasher {
    state: u64,
    seed: u64,
}

impl Hasher for PrefixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.state = fold(self.state ^ n, MULTIPLIER);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        fold(self.state, self.seed).rotate_left((self.seed & 63) as u32)
    }
}

/// A `HashMap` keyed by prefix with [`PrefixHash`].
pub type PrefixMap<K, V> = std::collections::HashMap<K, V, PrefixHash>;
/// A `HashSet` of prefixes with [`PrefixHash`].
pub type PrefixSet<K> = std::collections::HashSet<K, PrefixHash>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn equal_keys_hash_alike_and_neighbours_spread() {
        let h = PrefixHash::default();
        let key = |i: u32, len: u8| (IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (i << 8))), len);
        assert_eq!(h.hash_one(key(7, 24)), h.hash_one(key(7, 24)));
        assert_ne!(h.hash_one(key(7, 24)), h.hash_one(key(7, 25)));
        // 65,536 consecutive /24s over 1024 buckets (the low bits hashbrown uses): none gets
        // more than twice its share.
        let mut buckets = vec![0u32; 1024];
        for i in 0..65_536 {
            buckets[(h.hash_one(key(i, 24)) & 1023) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| n < 128), "max {}", buckets.iter().max().unwrap());
        // Another map's seed: other hashes.
        assert_ne!(PrefixHash::default().hash_one(key(7, 24)), h.hash_one(key(7, 24)));
    }
}
