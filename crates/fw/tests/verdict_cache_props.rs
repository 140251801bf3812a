//! The verdict cache (`fw::classifier::VerdictCache`) against the reference evaluator and the
//! uncached classifier: random realistic rule sets ([`fw::testgen`]), random packet streams
//! drawn with repeats from a pool of flows (so that the cache hits, and with a small cache
//! evicts), each packet sometimes changed in what rules cannot see (length, ICMP id, IP
//! options, TCP flag bits no rule tests), which must not change the answer; then a reload
//! to another set with the same cache, and back. The cache keys on the classes of addresses
//! and ports (`classifier/classes.rs`): keys near the rules' edges with the other fields
//! alike share entries with other keys of their classes, and must still get their own verdicts.
//!
//! `FW_CACHE_SETS=N` runs N rule sets instead of the default.

use std::path::Path;

use fw::classifier::{BuildOptions, Classifier, Engine, VerdictCache};
use fw::packet::{Af, Dir, PacketKey};
use fw::reference::evaluate;
use fw::rules::RuleSet;
use fw::testgen::Rng;

fn rules(seed: u64, n: usize) -> RuleSet {
    fw::rules::parse(
        &fw::testgen::ruleset(seed, n),
        Path::new("gen.conf"),
        &fw::testgen::iface_index,
    )
    .unwrap()
}

/// Addresses at the ends of the rules' prefixes and table entries (and 0), and the ports at
/// the ends of their ranges (and a few well-known ones): where packets get different verdicts.
fn edges(rs: &RuleSet) -> (Vec<u128>, Vec<u128>, Vec<u16>) {
    let fw::testgen::Boundaries { mut v4, mut v6, mut ports } = fw::testgen::boundaries(rs);
    v4.push(0);
    v6.push(0);
    ports.extend([0, 22, 53, 80, 443, 65535]);
    (v4, v6, ports)
}

/// A pool of flows for `rs`'s addresses and ports, both directions, the generator's
/// interfaces, TCP with several flag combinations, UDP, ICMP, GRE; each with a sibling that
/// differs from it in one keyed field only, which a cache must tell apart.
fn pool(rs: &RuleSet, rng: &mut Rng, n: usize) -> Vec<PacketKey> {
    let (v4, v6, ports) = edges(rs);
    let flows: Vec<PacketKey> = (0..n)
        .map(|_| {
            let af = if rng.index(4) == 0 { Af::Inet6 } else { Af::Inet };
            let addrs = if af == Af::Inet { &v4 } else { &v6 };
            let addr = |rng: &mut Rng| {
                let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
                if rng.index(4) == 0 {
                    if af == Af::Inet { r & u128::from(u32::MAX) } else { r }
                } else {
                    addrs[rng.index(addrs.len())]
                }
            };
            let (src, dst) = (addr(rng), addr(rng));
            let proto = [6u8, 6, 17, 17, 1, 58, 47][rng.index(7)];
            PacketKey {
                af,
                dir: if rng.index(2) == 0 { Dir::In } else { Dir::Out },
                iface: rng.index(6) as u16,
                proto,
                src,
                dst,
                src_port: ports[rng.index(ports.len())],
                dst_port: ports[rng.index(ports.len())],
                tcp_flags: [0x02, 0x12, 0x10, 0x11, 0x04, rng.next_u64() as u8][rng.index(6)],
                len: 60,
                icmp_id: 0,
                ip_opts: false,
                route: 0,
                tag: 0,
            }
        })
        .collect();
    let siblings: Vec<PacketKey> = flows.iter().map(|k| sibling(k, rng, &ports)).collect();
    flows.into_iter().chain(siblings).collect()
}

/// `k` with one keyed field changed (to a value near or at a rule's edge).
fn sibling(k: &PacketKey, rng: &mut Rng, ports: &[u16]) -> PacketKey {
    let max = if k.af == Af::Inet { u128::from(u32::MAX) } else { u128::MAX };
    match rng.index(9) {
        0 => PacketKey { src: k.src.wrapping_add(1) & max, ..*k },
        1 => PacketKey { dst: k.dst.wrapping_sub(1) & max, ..*k },
        2 => PacketKey { src_port: ports[rng.index(ports.len())], ..*k },
        3 => PacketKey { dst_port: ports[rng.index(ports.len())], ..*k },
        4 | 5 => PacketKey {
            proto: 6,
            tcp_flags: k.tcp_flags ^ [0x02, 0x10, 0x01, 0x04][rng.index(4)],
            ..*k
        },
        6 => PacketKey { dir: if k.dir == Dir::In { Dir::Out } else { Dir::In }, ..*k },
        7 => PacketKey { iface: (k.iface + 1) % 6, ..*k },
        _ => PacketKey { proto: [6u8, 17, 1, 58][rng.index(4)], ..*k },
    }
}

/// `k` changed only where no rule of `cl` can see: the verdict must stay.
fn unseen_variant(k: &PacketKey, cl: &Classifier, rng: &mut Rng) -> PacketKey {
    let noise = rng.next_u64() as u8 & !cl.flags_mask();
    PacketKey {
        len: rng.next_u64() as u16,
        icmp_id: rng.next_u64() as u16,
        ip_opts: rng.index(2) == 0,
        tcp_flags: k.tcp_flags ^ noise,
        ..*k
    }
}

/// `packets` packets drawn from `flows` (a flow and its sibling often in a row), each through `cache` and compared with the reference
/// and the uncached classifier. Returns the cache's hits over this stream.
fn stream(
    rs: &RuleSet,
    cl: &Classifier,
    cache: &mut VerdictCache,
    flows: &[PacketKey],
    rng: &mut Rng,
    packets: usize,
    what: &str,
) -> u64 {
    let before = cache.counters().hits;
    let half = flows.len() / 2;
    let mut prev = 0;
    for n in 0..packets {
        // Half the time the sibling of the flow just seen (both then in the cache).
        let i = if rng.index(2) == 0 {
            if prev < half { prev + half } else { prev - half }
        } else {
            rng.index(flows.len())
        };
        prev = i;
        let base = flows[i];
        let k = if rng.index(3) == 0 { unseen_variant(&base, cl, rng) } else { base };
        let want = evaluate(rs, &k);
        assert_eq!(cl.classify(&k), want, "{what}: classifier, packet {n}: {k:?}");
        assert_eq!(cache.lookup(cl, &k), want, "{what}: cache, packet {n}: {k:?}");
        assert_eq!(
            cache.classify(cl, &k),
            want,
            "{what}: cache (engine's choice), packet {n}: {k:?}"
        );
    }
    cache.counters().hits - before
}

fn check(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let sizes = [1 + rng.index(40), 1 + rng.index(400)];
    let (a, b) = (rules(seed, sizes[0]), rules(seed + 1_000_003, sizes[1]));
    let engine = if seed.is_multiple_of(3) { Engine::Auto } else { Engine::Tree };
    let build = |rs: &RuleSet| {
        Classifier::build_with(rs, &BuildOptions { engine, ..BuildOptions::default() }).unwrap()
    };
    // Small caches evict all the time; larger ones hold the pool.
    let mut cache = VerdictCache::new([4, 4, 64, 4096][rng.index(4)], rng.next_u64());
    let (ca, cb) = (build(&a), build(&b));
    let (na, nb) = (1 + rng.index(150), 1 + rng.index(150));
    let fa = pool(&a, &mut rng, na);
    let fb = pool(&b, &mut rng, nb);
    let hits = stream(&a, &ca, &mut cache, &fa, &mut rng, 2000, &format!("seed {seed}, set A"));
    assert!(hits > 0, "seed {seed}: a stream with repeats never hit");
    // A reload: the same cache, another set; the old set's flows too, which it holds.
    stream(&b, &cb, &mut cache, &fa, &mut rng, 1000, &format!("seed {seed}, set B on A's flows"));
    stream(&b, &cb, &mut cache, &fb, &mut rng, 1000, &format!("seed {seed}, set B"));
    // And back to A rebuilt (another classifier, the same rules).
    let ca2 = build(&a);
    stream(&a, &ca2, &mut cache, &fb, &mut rng, 1000, &format!("seed {seed}, set A again"));
    assert!(cache.counters().invalidations >= 3);
}

#[test]
fn cached_verdicts_match_the_reference_across_reloads() {
    let sets = std::env::var("FW_CACHE_SETS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    for seed in 0..sets {
        check(seed);
    }
}

/// Keys that differ from a base key in one address or port, the new value near one of a few
/// edges of the rules (at it, or one or two past it), through one cache: most are answered
/// from an entry that another key of the same classes made, and each must get the
/// reference's verdict. Every third set gets no class nodes and every third one node per
/// address table, so that crowded spans are searched by halves.
#[test]
fn keys_near_the_edges_share_entries_only_within_their_classes() {
    for seed in 0..12u64 {
        let rs = rules(seed, 100 + 50 * seed as usize);
        let class_nodes = [fw::classifier::DEFAULT_CLASS_NODES, 0, 1][seed as usize % 3];
        let cl = Classifier::build_with(
            &rs,
            &BuildOptions { engine: Engine::Tree, class_nodes, ..BuildOptions::default() },
        )
        .unwrap();
        let (v4, v6, ports) = edges(&rs);
        let mut rng = Rng(seed | 1);
        let mut cache = VerdictCache::new(4096, seed);
        for _ in 0..400 {
            let af = if rng.index(4) == 0 { Af::Inet6 } else { Af::Inet };
            let (all, max) =
                if af == Af::Inet { (&v4, u128::from(u32::MAX)) } else { (&v6, u128::MAX) };
            let addrs: Vec<u128> = (0..4).map(|_| all[rng.index(all.len())]).collect();
            let few_ports: Vec<u16> = (0..4).map(|_| ports[rng.index(ports.len())]).collect();
            let addr = |rng: &mut Rng| {
                addrs[rng.index(4)].wrapping_add(u128::from(rng.next_u64() % 3)) & max
            };
            let port =
                |rng: &mut Rng| few_ports[rng.index(4)].wrapping_add(rng.next_u64() as u16 % 3);
            let proto = [6u8, 17][rng.index(2)];
            let base = PacketKey {
                af,
                dir: Dir::In,
                proto,
                src: addr(&mut rng),
                dst: addr(&mut rng),
                src_port: port(&mut rng),
                dst_port: port(&mut rng),
                tcp_flags: 0x02,
                len: 60,
                ..PacketKey::ZERO
            };
            for n in 0..50 {
                let k = match rng.index(4) {
                    0 => PacketKey { src: addr(&mut rng), ..base },
                    1 => PacketKey { dst: addr(&mut rng), ..base },
                    2 => PacketKey { src_port: port(&mut rng), ..base },
                    _ => PacketKey { dst_port: port(&mut rng), ..base },
                };
                assert_eq!(
                    cache.lookup(&cl, &k),
                    evaluate(&rs, &k),
                    "seed {seed}, variant {n} of {base:?}: {k:?}"
                );
            }
        }
        let c = cache.counters();
        // Each edge makes classes of its own; still, many keys are answered from the entry
        // of another (5,910 of 20,000 for seed 0).
        assert!(c.hits > 2000, "seed {seed}: {c:?}");
    }
}

/// An explicit invalidation forgets everything: the next lookups all miss.
#[test]
fn invalidate_forgets_every_entry() {
    let rs = rules(5, 100);
    let cl = Classifier::build_with(
        &rs,
        &BuildOptions { engine: Engine::Tree, ..BuildOptions::default() },
    )
    .unwrap();
    let mut rng = Rng(11);
    let flows = pool(&rs, &mut rng, 50);
    let mut cache = VerdictCache::new(4096, 1);
    for k in &flows {
        cache.lookup(&cl, k);
    }
    let misses = cache.counters().misses;
    cache.invalidate();
    for k in &flows {
        assert_eq!(cache.lookup(&cl, k), evaluate(&rs, k));
    }
    assert_eq!(cache.counters().misses, 2 * misses);
}
