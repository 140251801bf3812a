//! A random per-process value to key hashes an outsider could aim at: the state table's
//! index and ECMP's flow hash.

/// A new random value (std's `RandomState` is seeded by the OS).
pub fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
}
