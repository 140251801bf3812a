//! Deterministic generators shared by the tests and `examples/lpm_bench.rs`.
#![allow(dead_code)]

use std::collections::HashSet;

/// SplitMix64: tiny, fast, good enough for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn u32(&mut self) -> u32 {
        self.next() as u32
    }
    pub fn u128(&mut self) -> u128 {
        ((self.next() as u128) << 64) | self.next() as u128
    }
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
    /// Index drawn with the given relative weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < w as u64 {
                return i;
            }
            x -= w as u64;
        }
        unreachable!()
    }
}

pub fn mask4(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len) }
}

pub fn mask6(len: u8) -> u128 {
    if len == 0 { 0 } else { u128::MAX << (128 - len) }
}

/// An address inside or just around `p/len`: random host bits, first, last, just outside.
pub fn near4(rng: &mut Rng, p: u32, len: u8) -> u32 {
    let host = !mask4(len);
    match rng.below(8) {
        0 => p,
        1 => p | host,
        2 => p.wrapping_sub(1),
        3 => (p | host).wrapping_add(1),
        _ => p | (rng.u32() & host),
    }
}

pub fn near6(rng: &mut Rng, p: u128, len: u8) -> u128 {
    let host = !mask6(len);
    match rng.below(8) {
        0 => p,
        1 => p | host,
        2 => p.wrapping_sub(1),
        3 => (p | host).wrapping_add(1),
        _ => p | (rng.u128() & host),
    }
}

/// Realistic IPv4 length mix for `n` distinct prefixes: ~60% /24, ~39% /8-/23 shaped like
/// the global BGP table (mostly /16-/23), ~1% /25-/32. Next hops up to 2^20.
pub fn realistic_v4(rng: &mut Rng, n: usize) -> Vec<(u32, u8, u32)> {
    // Per-mille-ish weights for /8 ..= /23, after the global table's histogram.
    const SHORT: [u32; 16] = [1, 1, 1, 2, 4, 8, 15, 25, 130, 80, 140, 250, 400, 500, 1200, 1140];
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len = match rng.below(1000) {
            0..600 => 24,
            600..610 => 25 + rng.below(8) as u8,
            _ => 8 + rng.weighted(&SHORT) as u8,
        };
        let p = rng.u32() & mask4(len);
        if seen.insert((p, len)) {
            out.push((p, len, rng.below(1 << 20) as u32));
        }
    }
    out
}

/// Realistic IPv6 mix for `n` distinct prefixes: allocations (/29-/32) in the RIR regions,
/// mostly /32-/48 beneath them, some /64, few /128 and a few short aggregates.
pub fn realistic_v6(rng: &mut Rng, n: usize) -> Vec<(u128, u8, u32)> {
    let mut regions = vec![0x2001u128];
    for base in [0x2400u128, 0x2600, 0x2800, 0x2a00, 0x2c00] {
        regions.extend(base..base + 16);
    }
    let allocs: Vec<u128> = (0..n / 7)
        .map(|_| {
            (regions[rng.below(regions.len() as u64) as usize] << 112)
                | ((rng.below(1 << 16) as u128) << 96)
        })
        .collect();
    // (length range, weight in per mille)
    const MIX: [((u8, u8), u32); 13] = [
        ((12, 28), 10),
        ((29, 31), 30),
        ((32, 32), 170),
        ((33, 39), 40),
        ((40, 40), 50),
        ((41, 43), 20),
        ((44, 44), 60),
        ((45, 47), 40),
        ((48, 48), 470),
        ((49, 63), 20),
        ((64, 64), 80),
        ((65, 127), 5),
        ((128, 128), 5),
    ];
    let weights: Vec<u32> = MIX.iter().map(|m| m.1).collect();
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let (lo, hi) = MIX[rng.weighted(&weights)].0;
        let len = lo + rng.below((hi - lo + 1) as u64) as u8;
        let (base, fixed) = if len <= 32 {
            (regions[rng.below(regions.len() as u64) as usize] << 112, 16)
        } else {
            (allocs[rng.below(allocs.len() as u64) as usize], 32)
        };
        let p = (base | (rng.u128() & !mask6(fixed))) & mask6(len);
        if seen.insert((p, len)) {
            out.push((p, len, rng.below(1 << 20) as u32));
        }
    }
    out
}
