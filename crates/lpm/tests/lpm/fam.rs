//! One interface over the IPv4 and IPv6 tables so every test is written once.

use std::fmt::Debug;
use std::hash::Hash;

use lpm::reference::{Ipv4Reference, Ipv6Reference};
use lpm::{GroupStats, Ipv4Lpm, Ipv6Lpm, LpmError, NextHop, Reader};

use crate::data::{Rng, mask4, mask6, near4, near6};

type R<T> = Result<T, LpmError>;

pub trait Family: 'static {
    type A: Copy + Eq + Hash + Debug + Send + Sync;
    type Fast: Send + Sync + 'static;
    type Ref: Default;
    const BITS: u8;
    const NAME: &'static str;

    fn fast(groups: u32) -> Self::Fast;
    fn insert(f: &Self::Fast, p: Self::A, len: u8, nh: NextHop) -> R<Option<NextHop>>;
    fn remove(f: &Self::Fast, p: Self::A, len: u8) -> R<Option<NextHop>>;
    fn lookup(f: &Self::Fast, a: Self::A) -> Option<NextHop>;
    fn lookup_batch(f: &Self::Fast, a: &[Self::A], out: &mut [Option<NextHop>]);
    fn len(f: &Self::Fast) -> usize;
    fn stats(f: &Self::Fast) -> GroupStats;
    fn reader(f: &Self::Fast) -> Reader;

    fn r_insert(r: &mut Self::Ref, p: Self::A, len: u8, nh: NextHop) -> R<Option<NextHop>>;
    fn r_remove(r: &mut Self::Ref, p: Self::A, len: u8) -> R<Option<NextHop>>;
    fn r_lookup(r: &Self::Ref, a: Self::A) -> Option<NextHop>;

    fn mask(a: Self::A, len: u8) -> Self::A;
    fn random(rng: &mut Rng) -> Self::A;
    fn near(rng: &mut Rng, p: Self::A, len: u8) -> Self::A;
    /// Truncating conversion from 128 random bits.
    fn from_bits(b: u128) -> Self::A;
    fn xor(a: Self::A, b: Self::A) -> Self::A;
    /// `a >> sh`, 0 when `sh >= BITS`.
    fn shr(a: Self::A, sh: u32) -> Self::A;
}

pub struct V4;
pub struct V6;

macro_rules! family {
    ($fam:ident, $a:ty, $fast:ty, $ref:ty, $bits:expr, $mask:ident, $near:ident, $rand:ident) => {
        impl Family for $fam {
            type A = $a;
            type Fast = $fast;
            type Ref = $ref;
            const BITS: u8 = $bits;
            const NAME: &'static str = stringify!($fam);

            fn fast(groups: u32) -> $fast {
                <$fast>::with_tbl8_groups(groups)
            }
            fn insert(f: &$fast, p: $a, len: u8, nh: NextHop) -> R<Option<NextHop>> {
                f.insert(p, len, nh)
            }
            fn remove(f: &$fast, p: $a, len: u8) -> R<Option<NextHop>> {
                f.remove(p, len)
            }
            fn lookup(f: &$fast, a: $a) -> Option<NextHop> {
                f.lookup(a)
            }
            fn lookup_batch(f: &$fast, a: &[$a], out: &mut [Option<NextHop>]) {
                f.lookup_batch(a, out)
            }
            fn len(f: &$fast) -> usize {
                f.len()
            }
            fn stats(f: &$fast) -> GroupStats {
                f.tbl8_stats()
            }
            fn reader(f: &$fast) -> Reader {
                f.reader()
            }
            fn r_insert(r: &mut $ref, p: $a, len: u8, nh: NextHop) -> R<Option<NextHop>> {
                r.insert(p, len, nh)
            }
            fn r_remove(r: &mut $ref, p: $a, len: u8) -> R<Option<NextHop>> {
                r.remove(p, len)
            }
            fn r_lookup(r: &$ref, a: $a) -> Option<NextHop> {
                r.lookup(a)
            }
            fn mask(a: $a, len: u8) -> $a {
                a & $mask(len)
            }
            fn random(rng: &mut Rng) -> $a {
                rng.$rand()
            }
            fn near(rng: &mut Rng, p: $a, len: u8) -> $a {
                $near(rng, p, len)
            }
            fn from_bits(b: u128) -> $a {
                b as $a
            }
            fn xor(a: $a, b: $a) -> $a {
                a ^ b
            }
            fn shr(a: $a, sh: u32) -> $a {
                a.checked_shr(sh).unwrap_or(0)
            }
        }
    };
}

family!(V4, u32, Ipv4Lpm, Ipv4Reference, 32, mask4, near4, u32);
family!(V6, u128, Ipv6Lpm, Ipv6Reference, 128, mask6, near6, u128);

/// Compares fast single and batched lookups of `addrs` against the reference.
pub fn check_lookups<F: Family>(fast: &F::Fast, r: &F::Ref, addrs: &[F::A]) -> Result<(), String> {
    let mut out = vec![None; addrs.len()];
    F::lookup_batch(fast, addrs, &mut out);
    for (&a, &batched) in addrs.iter().zip(&out) {
        let want = F::r_lookup(r, a);
        let single = F::lookup(fast, a);
        if single != want || batched != want {
            return Err(format!(
                "{}: lookup {a:x?}: single {single:?}, batch {batched:?}, reference {want:?}",
                F::NAME
            ));
        }
    }
    Ok(())
}

/// `n` addresses: 40% uniform, 60% in or around the given prefixes.
pub fn addresses<F: Family>(rng: &mut Rng, prefixes: &[(F::A, u8)], n: usize) -> Vec<F::A> {
    (0..n)
        .map(|_| {
            if prefixes.is_empty() || rng.below(10) < 4 {
                F::random(rng)
            } else {
                let (p, len) = prefixes[rng.below(prefixes.len() as u64) as usize];
                F::near(rng, p, len)
            }
        })
        .collect()
}
