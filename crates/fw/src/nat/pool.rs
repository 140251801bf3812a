//! Picking a translation address from a pool (pf.conf(5), "POOL OPTIONS").

use std::collections::HashMap;

use super::PoolMethod;
use crate::rules::Prefix;

pub use crate::rules::MAX_POOL_ADDRS;

/// An IPv4 pool, expanded: its addresses in order, and the prefix when it is a single one
/// (`bitmask` maps the source's host part into it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub addrs: Vec<u32>,
    /// The pool's single prefix, for `bitmask`.
    pub prefix: Option<(u32, u8)>,
}

impl Pool {
    /// Expands IPv4 prefixes (at most [`MAX_POOL_ADDRS`] addresses in all; the caller checked).
    pub fn new(prefixes: &[Prefix]) -> Pool {
        let mut addrs = Vec::new();
        for p in prefixes {
            let mut a = p.first();
            while a <= p.last() && (addrs.len() as u128) < MAX_POOL_ADDRS {
                addrs.push(a as u32);
                a += 1;
            }
        }
        let prefix = match prefixes {
            [p] => Some((p.addr as u32, p.len)),
            _ => None,
        };
        Pool { addrs, prefix }
    }

    /// A pool of one address (an interface's).
    pub fn single(addr: u32) -> Pool {
        Pool { addrs: vec![addr], prefix: Some((addr, 32)) }
    }
}

/// What a worker keeps between picks: the round-robin cursor, a random generator's state,
/// and the `sticky-address` choices.
#[derive(Debug, Default)]
pub struct PoolCursor {
    next: usize,
    rng: u64,
    sticky: HashMap<(usize, u32), u32>,
}

/// A 32-bit mix of the source address (source-hash; the key is the worker's seed).
fn mix(x: u32, seed: u64) -> u64 {
    let mut h = (u64::from(x) ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 29;
    h.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 32)
}

impl PoolCursor {
    pub fn new(seed: u64) -> PoolCursor {
        PoolCursor { next: 0, rng: seed | 1, sticky: HashMap::new() }
    }

    /// The pool address for source `src` under rule `rule` (the sticky key), remembered for
    /// `src` with `sticky`.
    pub fn pick(
        &mut self,
        pool: &Pool,
        method: PoolMethod,
        sticky: bool,
        rule: usize,
        src: u32,
    ) -> Option<u32> {
        let a = self.choose(pool, method, sticky, rule, src)?;
        if sticky {
            self.stick(rule, src, a);
        }
        Some(a)
    }

    /// [`pick`](Self::pick) without remembering the choice: for a translation that may not be
    /// made (the out rules may block its packet); [`stick`](Self::stick) once it is.
    pub fn choose(
        &mut self,
        pool: &Pool,
        method: PoolMethod,
        sticky: bool,
        rule: usize,
        src: u32,
    ) -> Option<u32> {
        if pool.addrs.is_empty() {
            return None;
        }
        if sticky && let Some(&a) = self.sticky.get(&(rule, src)) {
            return Some(a);
        }
        let n = pool.addrs.len();
        let a = match method {
            PoolMethod::RoundRobin => {
                let a = pool.addrs[self.next % n];
                self.next = self.next.wrapping_add(1);
                a
            }
            PoolMethod::Random => {
                // xorshift64*: statistical quality is all that is needed here.
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                pool.addrs[(self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as usize % n]
            }
            // The same for every worker: a host keeps its address whichever worker sees it.
            PoolMethod::SourceHash => pool.addrs[(mix(src, 0) % n as u64) as usize],
            PoolMethod::Bitmask => bitmask(pool, src),
        };
        Some(a)
    }

    /// `src` keeps `addr` under rule `rule` (`sticky-address`).
    pub fn stick(&mut self, rule: usize, src: u32, addr: u32) {
        self.sticky.insert((rule, src), addr);
    }

    /// How many sources a `sticky-address` choice is kept for.
    pub fn sticky_sources(&self) -> usize {
        self.sticky.len()
    }
}

/// `bitmask`: the pool prefix's network bits, the source's host bits (a list of addresses
/// uses its first).
pub fn bitmask(pool: &Pool, src: u32) -> u32 {
    match pool.prefix {
        Some((net, len)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
            (net & mask) | (src & !mask)
        }
        None => pool.addrs[0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Af;

    fn pool(p: &[(u32, u8)]) -> Pool {
        Pool::new(
            &p.iter().map(|&(a, l)| Prefix::new(Af::Inet, u128::from(a), l)).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn round_robin_cycles_and_sticky_keeps() {
        let p = pool(&[(0xc000_0200, 31)]);
        assert_eq!(p.addrs, vec![0xc000_0200, 0xc000_0201]);
        let mut c = PoolCursor::new(1);
        let a: Vec<u32> =
            (0..4).map(|i| c.pick(&p, PoolMethod::RoundRobin, false, 0, i).unwrap()).collect();
        assert_eq!(a, vec![0xc000_0200, 0xc000_0201, 0xc000_0200, 0xc000_0201]);
        let first = c.pick(&p, PoolMethod::RoundRobin, true, 0, 7).unwrap();
        for _ in 0..5 {
            assert_eq!(c.pick(&p, PoolMethod::RoundRobin, true, 0, 7), Some(first));
        }
    }

    #[test]
    fn bitmask_keeps_host_bits() {
        let p = pool(&[(0xc000_0200, 24)]);
        assert_eq!(bitmask(&p, 0x0a00_0007), 0xc000_0207);
        let mut c = PoolCursor::new(1);
        assert_eq!(c.pick(&p, PoolMethod::Bitmask, false, 0, 0x0a01_02fe), Some(0xc000_02fe));
    }

    #[test]
    fn source_hash_is_stable_and_random_stays_in_pool() {
        let p = pool(&[(0xc000_0200, 28)]);
        let (mut c1, mut c2) = (PoolCursor::new(1), PoolCursor::new(99));
        for src in 0..100u32 {
            assert_eq!(
                c1.pick(&p, PoolMethod::SourceHash, false, 0, src),
                c2.pick(&p, PoolMethod::SourceHash, false, 0, src)
            );
            assert!(p.addrs.contains(&c1.pick(&p, PoolMethod::Random, false, 0, src).unwrap()));
        }
    }
}
