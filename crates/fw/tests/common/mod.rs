//! What the state table's tests share: a small, seedable generator and the seed
//! (`FW_STATE_SEED=<u64>` overrides it, to replay a failure), and one TCP connection's
//! packet keys ([`conn`]).

#![allow(dead_code)] // each test binary uses its own subset

pub mod conn;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `FW_STATE_SEED` if set, else the test's `default`.
pub fn seed(default: u64) -> u64 {
    std::env::var("FW_STATE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
