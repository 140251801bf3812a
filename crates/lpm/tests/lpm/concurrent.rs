//! One thread looks up continuously while another inserts, replaces and deletes prefixes
//! covering the looked-up addresses, with a pool small enough that retired groups are
//! reused. Every answer must come from a prefix that covers the address: next hops encode
//! (prefix id, generation), so a stale read of a reused group (another site's prefix) or a
//! garbage value is detected.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use lpm::{LpmError, NextHop};

use crate::data::Rng;
use crate::fam::{Family, V4, V6, check_lookups};

const GEN_BITS: u32 = 20;

/// The prefixes the writer churns (id 0: a permanent cover) and the addresses the reader
/// looks up, with the ids of the prefixes that cover each address.
struct Workload<F: Family> {
    prefixes: Vec<(F::A, u8)>,
    addrs: Vec<F::A>,
    allowed: Vec<Vec<usize>>,
}

fn workload<F: Family>(rng: &mut Rng, nsites: usize, lens: &[u8]) -> Workload<F> {
    let base = F::random(rng);
    // Sites share the top 16 bits and differ below, so they live in different tbl24 slots.
    let sites: Vec<F::A> = (0..nsites).map(|_| F::xor(base, F::shr(F::random(rng), 16))).collect();
    let mut prefixes = vec![(F::mask(base, 8), 8u8)]; // id 0: permanent cover
    let mut seen: HashSet<_> = prefixes.iter().copied().collect();
    for &s in &sites {
        for &len in lens {
            let p = (F::mask(s, len), len);
            if seen.insert(p) {
                prefixes.push(p);
            }
        }
    }
    let covers = |a: F::A, (p, len): (F::A, u8)| F::mask(a, len) == p;
    let addrs: Vec<F::A> = (0..512)
        .map(|i| {
            let (p, len) = prefixes[1 + i % (prefixes.len() - 1)];
            F::near(rng, p, len)
        })
        .collect();
    let allowed: Vec<Vec<usize>> = addrs
        .iter()
        .map(|&a| (0..prefixes.len()).filter(|&i| covers(a, prefixes[i])).collect())
        .collect();
    Workload { prefixes, addrs, allowed }
}

/// A thread that looks up `addrs` (batched and single, alternately) until `done`, storing
/// its count in `lookups`; it returns up to 10 answers from prefixes not in `allowed`.
fn spawn_reader<F: Family>(
    fast: &Arc<F::Fast>,
    done: &Arc<AtomicBool>,
    lookups: &Arc<AtomicU64>,
    addrs: Vec<F::A>,
    allowed: Vec<Vec<usize>>,
) -> std::thread::JoinHandle<Vec<(F::A, Option<NextHop>)>> {
    let (fast, done, lookups) = (fast.clone(), done.clone(), lookups.clone());
    let reader = F::reader(&fast);
    std::thread::spawn(move || {
        let mut out = vec![None; 32];
        let mut n = 0u64;
        let mut bad = Vec::new();
        while !done.load(Relaxed) {
            for (k, chunk) in addrs.chunks(32).enumerate() {
                if k % 2 == 0 {
                    F::lookup_batch(&fast, chunk, &mut out);
                } else {
                    for (o, &a) in out.iter_mut().zip(chunk) {
                        *o = F::lookup(&fast, a);
                    }
                }
                for (j, o) in out[..chunk.len()].iter().enumerate() {
                    let i = k * 32 + j;
                    let ok = match *o {
                        None => !allowed[i].contains(&0),
                        Some(nh) => allowed[i].contains(&((nh >> GEN_BITS) as usize)),
                    };
                    if !ok && bad.len() < 10 {
                        bad.push((addrs[i], *o));
                    }
                }
                n += chunk.len() as u64;
                reader.quiescent();
            }
            lookups.store(n, Relaxed);
        }
        bad
    })
}

/// What the writer did: the prefixes left in the table (id -> next hop), the updates made
/// and the inserts refused for lack of groups.
struct Churn {
    present: HashMap<usize, NextHop>,
    ops: u64,
    exhausted: u64,
}

/// Inserts, replaces and deletes random prefixes (all but id 0) until at least `min_ops`
/// updates and `min_lookups` lookups are done.
fn churn<F: Family>(
    rng: &mut Rng,
    fast: &F::Fast,
    prefixes: &[(F::A, u8)],
    lookups: &AtomicU64,
    min_ops: u64,
    min_lookups: u64,
) -> Churn {
    let mut present: HashMap<usize, u32> = HashMap::new();
    let (mut ops, mut generation, mut exhausted) = (0u64, 0u32, 0u64);
    while ops < min_ops || lookups.load(Relaxed) < min_lookups {
        let id = 1 + rng.below(prefixes.len() as u64 - 1) as usize;
        let (p, len) = prefixes[id];
        if present.contains_key(&id) && rng.below(2) == 0 {
            assert!(F::remove(fast, p, len).unwrap().is_some());
            present.remove(&id);
        } else {
            generation = (generation + 1) & ((1 << GEN_BITS) - 1);
            let nh = (id as u32) << GEN_BITS | generation;
            match F::insert(fast, p, len, nh) {
                Ok(_) => {
                    present.insert(id, nh);
                }
                Err(LpmError::Tbl8Exhausted) => exhausted += 1,
                Err(e) => panic!("{e}"),
            }
        }
        ops += 1;
    }
    Churn { present, ops, exhausted }
}

/// The final table against a reference holding the cover and the `present` prefixes.
fn check_final<F: Family>(
    fast: &F::Fast,
    prefixes: &[(F::A, u8)],
    present: &HashMap<usize, NextHop>,
    addrs: &[F::A],
) {
    let mut reference = F::Ref::default();
    F::r_insert(&mut reference, prefixes[0].0, prefixes[0].1, 0).unwrap();
    for (&id, &nh) in present {
        F::r_insert(&mut reference, prefixes[id].0, prefixes[id].1, nh).unwrap();
    }
    check_lookups::<F>(fast, &reference, addrs).unwrap();
}

fn run<F: Family>(nsites: usize, lens: &[u8], groups: u32, min_lookups: u64, min_ops: u64) {
    let mut rng = Rng(0xc0ffee ^ F::BITS as u64);
    let Workload { prefixes, addrs, allowed } = workload::<F>(&mut rng, nsites, lens);

    let fast = Arc::new(F::fast(groups));
    F::insert(&fast, prefixes[0].0, prefixes[0].1, 0).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(AtomicU64::new(0));
    let reader = spawn_reader::<F>(&fast, &done, &lookups, addrs.clone(), allowed);

    let Churn { present, ops, exhausted } =
        churn::<F>(&mut rng, &fast, &prefixes, &lookups, min_ops, min_lookups);
    done.store(true, Relaxed);
    let bad = reader.join().unwrap();
    let stats = F::stats(&fast);
    eprintln!(
        "{} concurrent: {ops} updates, {} lookups, {exhausted} exhausted, {stats:?}",
        F::NAME,
        lookups.load(Relaxed)
    );
    assert!(bad.is_empty(), "answers from non-covering prefixes: {bad:x?}");
    assert!(stats.reused > 0, "test must reuse retired groups");
    check_final::<F>(&fast, &prefixes, &present, &addrs);
}

#[test]
fn ipv4_lookups_during_updates() {
    run::<V4>(24, &[16, 24, 25, 28, 32], 28, 30_000_000, 100_000);
}

#[test]
fn ipv6_lookups_during_updates() {
    run::<V6>(6, &[16, 24, 28, 32, 40, 48, 64, 128], 100, 20_000_000, 20_000);
}
