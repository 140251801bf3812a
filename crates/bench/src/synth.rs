//! Synthetic routing tables and flow sets for benchmarks and tests.
//!
//! The IPv4 table mimics the prefix-length mix of an Internet table (about 60% /24, most
//! of the rest /16-/23, some /8-/15, a few longer than /24), so that the share of lookups
//! that take DIR-24-8's second read is realistic. Everything is seeded: the same arguments
//! give the same table and flows.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A small, fast, seedable generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Picks an IPv4 prefix length with an Internet-like mix.
fn v4_len(rng: &mut Rng) -> u8 {
    match rng.below(1000) {
        0..600 => 24,
        600..900 => 16 + rng.below(8) as u8, // /16-/23
        900..980 => 8 + rng.below(8) as u8,  // /8-/15
        _ => 25 + rng.below(8) as u8,        // /25-/32
    }
}

/// Picks an IPv6 prefix length: mostly /32-/48, some /64, a few /128.
fn v6_len(rng: &mut Rng) -> u8 {
    match rng.below(1000) {
        0..450 => 48,
        450..850 => 32 + rng.below(16) as u8,
        850..980 => 64,
        _ => 128,
    }
}

fn mask_v4(addr: u32, len: u8) -> u32 {
    if len == 0 { 0 } else { addr & (u32::MAX << (32 - len)) }
}

fn mask_v6(addr: u128, len: u8) -> u128 {
    if len == 0 { 0 } else { addr & (u128::MAX << (128 - len)) }
}

/// `n` distinct IPv4 unicast prefixes (in 1.0.0.0-223.255.255.255, avoiding 127/8 and the
/// 198.18.0.0/15 benchmarking range the lab's own addresses live in).
pub fn v4_prefixes(n: usize, seed: u64) -> Vec<(u32, u8)> {
    let mut rng = Rng::new(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len = v4_len(&mut rng);
        let addr = mask_v4(rng.next_u64() as u32, len);
        let top = addr >> 24;
        if top == 0 || top == 127 || top >= 224 || (addr >> 17) == (0xc612_0000 >> 17) {
            continue;
        }
        if seen.insert((addr, len)) {
            out.push((addr, len));
        }
    }
    out
}

/// RIR allocation blocks real IPv6 tables are concentrated in (2001::/16 and the /12s of
/// APNIC, ARIN, LACNIC, RIPE NCC and AFRINIC), with their lengths.
const V6_BLOCKS: [(u128, u8); 6] = [
    (0x2001 << 112, 16),
    (0x2400 << 112, 12),
    (0x2600 << 112, 12),
    (0x2800 << 112, 12),
    (0x2a00 << 112, 12),
    (0x2c00 << 112, 12),
];

/// `n` distinct IPv6 prefixes shaped like a global table: /32-/48 allocations inside the RIR
/// blocks, /64s and /128s as more-specifics of /48s already in the table.
pub fn v6_prefixes(n: usize, seed: u64) -> Vec<(u128, u8)> {
    let mut rng = Rng::new(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let mut sites: Vec<u128> = Vec::new(); // /48s, parents of the longer prefixes
    while out.len() < n {
        let len = v6_len(&mut rng);
        let random = u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
        let addr = if len > 48 && !sites.is_empty() {
            let site = sites[rng.below(sites.len() as u64) as usize];
            mask_v6(site | (random & (u128::MAX >> 48)), len)
        } else {
            let (block, block_len) = V6_BLOCKS[rng.below(V6_BLOCKS.len() as u64) as usize];
            mask_v6(block | (random & (u128::MAX >> block_len)), len.max(block_len))
        };
        let len = if len > 48 && sites.is_empty() { 48 } else { len.max(16) };
        if seen.insert((addr, len)) {
            if len == 48 {
                sites.push(addr);
            }
            out.push((addr, len));
        }
    }
    out
}

/// A random address inside `prefix/len`.
pub fn v4_inside(prefix: u32, len: u8, rng: &mut Rng) -> u32 {
    let host = if len >= 32 { 0 } else { (rng.next_u64() as u32) & (u32::MAX >> len) };
    mask_v4(prefix, len) | host
}

/// A random address inside `prefix/len`.
pub fn v6_inside(prefix: u128, len: u8, rng: &mut Rng) -> u128 {
    let r = u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
    let host = if len >= 128 { 0 } else { r & (u128::MAX >> len) };
    mask_v6(prefix, len) | host
}

/// One UDP flow of a benchmark: the study's source range 198.18.10.1-20 with ports from 2000
/// (IPv6: 2001:2:0:10::1-20), and a destination inside one of the table's prefixes.
pub fn flow_source(i: usize, ipv6: bool) -> (IpAddr, u16) {
    let host = (i % 20) as u8 + 1;
    let port = 2000 + (i / 20 % 60000) as u16;
    let ip = if ipv6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, host.into()))
    } else {
        IpAddr::V4(Ipv4Addr::new(198, 18, 10, host))
    };
    (ip, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_mix_is_internet_like_and_distinct() {
        let p = v4_prefixes(100_000, 1);
        let n24 = p.iter().filter(|&&(_, l)| l == 24).count();
        let long = p.iter().filter(|&&(_, l)| l > 24).count();
        assert!((55_000..65_000).contains(&n24), "{n24}");
        assert!((1_000..3_000).contains(&long), "{long}");
        let set: HashSet<_> = p.iter().collect();
        assert_eq!(set.len(), p.len());
        assert!(p.iter().all(|&(a, l)| mask_v4(a, l) == a && a >> 24 != 127));
        assert_eq!(v4_prefixes(10, 1), p[..10]);
    }

    #[test]
    fn inside_stays_inside() {
        let mut rng = Rng::new(3);
        for &(a, l) in &v4_prefixes(1000, 2) {
            assert_eq!(mask_v4(v4_inside(a, l, &mut rng), l), a);
        }
        for &(a, l) in &v6_prefixes(1000, 2) {
            assert_eq!(mask_v6(v6_inside(a, l, &mut rng), l), a);
            assert_eq!(a >> 125, 1, "{a:x}");
        }
    }
}
