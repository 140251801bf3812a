//! Property tests: random tables with add / replace / delete churn (including /0, host
//! routes and nested prefixes), checked against the reference at several points with
//! uniform and near-prefix addresses. `LPM_PROPTEST_ADDRS` sets the lookups per test run
//! (default 2^20, spread over the cases), `LPM_PROPTEST_CASES` the number of tables.

use proptest::prelude::*;

use crate::data::Rng;
use crate::fam::{Family, V4, V6, addresses, check_lookups};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn cases() -> u32 {
    env("LPM_PROPTEST_CASES", 8) as u32
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

#[derive(Debug, Clone)]
enum Op {
    /// Insert `base[b] ^ (bits >> sh)` / len (often nested in other prefixes of the base).
    Add { b: usize, sh: u32, bits: u128, len: u8, nh: u32 },
    /// Change the next hop of a present prefix.
    Replace { pick: usize, nh: u32 },
    /// Delete a present prefix.
    Del { pick: usize },
    /// Delete a probably-absent prefix.
    DelMissing { b: usize, sh: u32, bits: u128, len: u8 },
}

fn ops(len: BoxedStrategy<u8>) -> impl Strategy<Value = Vec<Op>> {
    let nh = 0..=lpm::MAX_NEXT_HOP;
    let op = prop_oneof![
        6 => (0..8usize, 0..=128u32, any::<u128>(), len.clone(), nh.clone())
            .prop_map(|(b, sh, bits, len, nh)| Op::Add { b, sh, bits, len, nh }),
        2 => (any::<usize>(), nh).prop_map(|(pick, nh)| Op::Replace { pick, nh }),
        3 => any::<usize>().prop_map(|pick| Op::Del { pick }),
        1 => (0..8usize, 0..=128u32, any::<u128>(), len)
            .prop_map(|(b, sh, bits, len)| Op::DelMissing { b, sh, bits, len }),
    ];
    proptest::collection::vec(op, 50..400)
}

/// Lengths /1-/7 and /0 rewrite millions of tbl24 entries: rare but present.
fn len4() -> BoxedStrategy<u8> {
    prop_oneof![1 => Just(0u8), 1 => 1..=7u8, 12 => 8..=24u8, 12 => 25..=31u8, 4 => Just(32u8)]
        .boxed()
}

fn len6() -> BoxedStrategy<u8> {
    prop_oneof![1 => Just(0u8), 1 => 1..=23u8, 10 => 24..=64u8, 8 => 65..=127u8, 3 => Just(128u8)]
        .boxed()
}

/// Eight bases: four share the top half, two share the top quarter, two are unrelated.
fn bases<F: Family>(rng: &mut Rng) -> Vec<F::A> {
    let root = F::random(rng);
    (0..8)
        .map(|k| {
            let keep = [
                F::BITS / 2,
                F::BITS / 2,
                F::BITS / 2,
                F::BITS / 2,
                F::BITS / 4,
                F::BITS / 4,
                0,
                0,
            ][k];
            let r = F::random(rng);
            F::xor(root, F::shr(r, keep as u32))
        })
        .collect()
}

/// The table under test beside the reference, and the prefixes present in both.
struct Tables<F: Family> {
    fast: F::Fast,
    reference: F::Ref,
    present: Vec<(F::A, u8)>,
}

impl<F: Family> Tables<F> {
    /// Applies `op` to both tables; they must answer alike.
    fn apply(&mut self, op: &Op, bases: &[F::A]) -> Result<(), TestCaseError> {
        let (fast, reference, present) = (&self.fast, &mut self.reference, &mut self.present);
        match *op {
            Op::Add { b, sh, bits, len, nh } => {
                let p = F::mask(F::xor(bases[b], F::shr(F::from_bits(bits), sh)), len);
                let got = F::insert(fast, p, len, nh);
                prop_assert_eq!(got, F::r_insert(reference, p, len, nh), "insert {:x?}/{}", p, len);
                if got == Ok(None) {
                    present.push((p, len));
                }
            }
            Op::Replace { pick, nh } if !present.is_empty() => {
                let (p, len) = present[pick % present.len()];
                let got = F::insert(fast, p, len, nh);
                prop_assert_eq!(got, F::r_insert(reference, p, len, nh));
                prop_assert!(matches!(got, Ok(Some(_))));
            }
            Op::Del { pick } if !present.is_empty() => {
                let (p, len) = present.swap_remove(pick % present.len());
                let got = F::remove(fast, p, len);
                prop_assert_eq!(got, F::r_remove(reference, p, len), "remove {:x?}/{}", p, len);
                prop_assert!(matches!(got, Ok(Some(_))));
            }
            Op::DelMissing { b, sh, bits, len } => {
                let p = F::xor(bases[b], F::shr(F::from_bits(bits), sh));
                let got = F::remove(fast, p, len);
                prop_assert_eq!(got, F::r_remove(reference, p, len));
                if let Ok(Some(_)) = got {
                    let m = F::mask(p, len);
                    present.retain(|&e| e != (m, len));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Deleting everything must leave an empty table and every group back in the pool.
    fn delete_all(&mut self, rng: &mut Rng) -> Result<(), TestCaseError> {
        for (p, len) in self.present.drain(..) {
            prop_assert!(matches!(F::remove(&self.fast, p, len), Ok(Some(_))));
            F::r_remove(&mut self.reference, p, len).unwrap();
        }
        prop_assert_eq!(F::len(&self.fast), 0);
        prop_assert_eq!(F::stats(&self.fast).in_use, 0);
        let addrs = addresses::<F>(rng, &[], 1000);
        prop_assert!(addrs.iter().all(|&a| F::lookup(&self.fast, a).is_none()));
        Ok(())
    }
}

fn run<F: Family>(seed: u64, ops: &[Op], groups: u32) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed);
    let bases = bases::<F>(&mut rng);
    let mut tables =
        Tables::<F> { fast: F::fast(groups), reference: F::Ref::default(), present: Vec::new() };
    let per_case = env("LPM_PROPTEST_ADDRS", 1 << 20).div_ceil(cases() as usize);
    let checkpoints = 4;
    for (k, chunk) in ops.chunks(ops.len().div_ceil(checkpoints)).enumerate() {
        for op in chunk {
            tables.apply(op, &bases)?;
        }
        prop_assert_eq!(F::len(&tables.fast), tables.present.len());
        let addrs = addresses::<F>(&mut rng, &tables.present, per_case / checkpoints);
        check_lookups::<F>(&tables.fast, &tables.reference, &addrs)
            .map_err(|e| TestCaseError::fail(format!("checkpoint {k}: {e}")))?;
    }
    tables.delete_all(&mut rng)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ipv4_matches_reference(seed in any::<u64>(), ops in ops(len4())) {
        run::<V4>(seed, &ops, 4096)?;
    }

    #[test]
    fn ipv6_matches_reference(seed in any::<u64>(), ops in ops(len6())) {
        run::<V6>(seed, &ops, 16384)?;
    }
}
