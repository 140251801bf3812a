//! A per-worker exact-match verdict cache in front of an expensive classifier (Open vSwitch's
//! exact-match cache in front of its megaflow classifier).
//!
//! The key is every field the stateless classifier reads: family, direction, interface,
//! protocol, addresses, ports (ICMP type and code), the route bits (`no-route`,
//! `urpf-failed`), the packet's tag (`tagged`), and the TCP flags masked to the bits
//! some rule tests ([`Classifier::flags_mask`]; 0 for other protocols, whose flags no rule
//! checks). What rules cannot see (length, ICMP id, IP options, untested flag bits) is left
//! out, so packets differing only there share an entry. The value is the classifier's whole
//! [`Verdict`] (deciding rule, action, state mode: all the later steps use).
//!
//! Bounded: a fixed array of 64-byte entries, four per set, allocated once by [`new`], with
//! a 32-bit signature per entry in a separate array that a lookup reads first; a miss
//! replaces one of the set's entries, the ways taken in turn. While more than a quarter of
//! the lookups miss (a flood of new flows), only one miss in 16 is inserted, at random. Nothing is allocated on the fast path and nothing is
//! shared: each worker owns its cache. Entries are tagged with a generation; a cache sees
//! which classifier it is asked about ([`Classifier::id`], unique per build) and starts a
//! new generation when that changes, so a reload can never be answered from the old set.
//!
//! [`new`]: VerdictCache::new

use super::Classifier;
use crate::packet::{Af, Dir, PacketKey, proto};
use crate::rules::{Action, StateMode};
use crate::verdict::Verdict;

/// Entries of [`VerdictCache::default`]: 32,768 entries of 64 bytes and their 4-byte
/// signatures, 2.1 MiB per worker. With
/// 4,000 keys (2,000 flows, both passes) fewer than 0.2% fall in a set that more than four
/// of them share.
pub const DEFAULT_CACHE_ENTRIES: usize = 1 << 15;

/// Entries per set. With two, a set that three active flows share misses on every packet
/// of the three when they take turns (2,000 flows in 16k entries: 8% of packets missed).
const WAYS: usize = 4;

/// Lookups over which the miss share is measured (see [`VerdictCache::flooded`]).
const WINDOW: u64 = 1024;
/// A window with more misses than this is a flood of new flows.
const FLOOD_MISSES: u64 = WINDOW / 4;
/// In a flood, one miss in this many is inserted (Open vSwitch's EMC inserts one in 100
/// always): each insertion writes a line of the cache at random, which a flood pays for
/// on every packet and never gets back, and it would evict the flows that do repeat.
const FLOOD_INSERT_ONE_IN: u64 = 16;

/// Generations use 19 bits (the low 13 hold the packet's tag, the route bits, the direction
/// and the family: the tag rides in a word compared anyway, so rule sets without tags pay
/// nothing for it); 0 is never current. A wrap clears the cache.
const GEN_BITS: u32 = 19;
/// The bits of `gen_meta` below the generation.
const META_BITS: u32 = 13;

/// No rule decided (pf's default pass) in [`Entry::rule`].
const NO_RULE: u32 = u32::MAX;

/// One cached verdict: the key's fields packed, then the verdict. One cache line.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct Entry {
    src: u128,
    dst: u128,
    /// Source port (or ICMP type) << 48 | destination port (code) << 32 | interface << 16 |
    /// protocol << 8 | masked TCP flags.
    tag: u64,
    /// Generation << 13 | packet tag << 5 | route bits << 2 | direction << 1 | family; 0:
    /// empty.
    gen_meta: u32,
    rule: u32,
    /// Action (bit 0: block) | state mode << 1.
    verdict: u8,
    /// [`Verdict::tag`].
    vtag: u8,
}

const EMPTY: Entry = Entry { src: 0, dst: 0, tag: 0, gen_meta: 0, rule: NO_RULE, verdict: 0, vtag: 0 };

/// The cache's view of a packet: the packed key and where its set is.
#[derive(Clone, Copy)]
struct Probe {
    src: u128,
    dst: u128,
    tag: u64,
    gen_meta: u32,
}

/// Hit and miss counts of a [`VerdictCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheCounters {
    pub hits: u64,
    pub misses: u64,
    /// Times the cache started a new generation (a new classifier, or [`VerdictCache::invalidate`]).
    pub invalidations: u64,
}

/// See the module documentation.
pub struct VerdictCache {
    entries: Box<[Entry]>,
    /// Per set, a 32-bit signature of each way's key (bits of its hash): a lookup reads this
    /// small array (16 bytes a set, 128 KiB by default) and only the entry whose signature
    /// matches, so a miss costs one line of it rather than the set's four entries.
    sigs: Box<[[u32; WAYS]]>,
    /// The way the next miss replaces (turning: no line is moved).
    victim: usize,
    /// Chooses the misses inserted in a flood (xorshift).
    rng: u64,
    /// Lookups and misses when the current window started.
    window: (u64, u64),
    /// The last window was a flood.
    flood: bool,
    /// Sets - 1 (a power of two minus one).
    set_mask: usize,
    generation: u32,
    /// [`Classifier::id`] of the classifier the current generation caches (0: none yet).
    owner: u64,
    seed: u64,
    counters: CacheCounters,
}

impl std::fmt::Debug for VerdictCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerdictCache").field("entries", &self.entries.len()).field("counters", &self.counters).finish()
    }
}

impl Default for VerdictCache {
    fn default() -> Self {
        VerdictCache::new(DEFAULT_CACHE_ENTRIES, 0)
    }
}

/// 64 x 64 -> 128-bit multiply, halves folded (wyhash's mixer).
#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

impl VerdictCache {
    /// A cache of `entries` entries (rounded up to a power of two, at least 2) whose set
    /// index is keyed by `seed` (per worker, so that colliding flows cannot be chosen ahead).
    pub fn new(entries: usize, seed: u64) -> VerdictCache {
        let entries = entries.max(WAYS).next_power_of_two();
        VerdictCache {
            entries: vec![EMPTY; entries].into_boxed_slice(),
            sigs: vec![[0; WAYS]; entries / WAYS].into_boxed_slice(),
            victim: 0,
            rng: seed | 1,
            window: (0, 0),
            flood: false,
            set_mask: entries / WAYS - 1,
            generation: 1,
            owner: 0,
            seed: seed | 1,
            counters: CacheCounters::default(),
        }
    }

    /// Bytes held (the entries and their signatures).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.entries) + std::mem::size_of_val(&*self.sigs)
    }

    pub fn counters(&self) -> CacheCounters {
        self.counters
    }

    /// Forgets every entry (O(1): a new generation).
    pub fn invalidate(&mut self) {
        self.counters.invalidations += 1;
        self.generation += 1;
        if self.generation >= 1 << GEN_BITS {
            // Wrapped: entries of generation 1 could come back to life; clear them.
            self.entries.fill(EMPTY);
            self.sigs.fill([0; WAYS]);
            self.generation = 1;
        }
    }

    /// `cl`'s verdict for `key`, through the cache only where `cl` is expensive
    /// ([`Classifier::wants_cache`]: the tree engine); RFC answers directly.
    #[inline(always)]
    pub fn classify(&mut self, cl: &Classifier, key: &PacketKey) -> Verdict {
        match cl.cache_mode() {
            0 => cl.classify(key),
            1 => self.lookup_as::<false>(cl, key),
            _ => self.lookup_as::<true>(cl, key),
        }
    }

    /// `cl`'s verdict for `key` through the cache, whatever the engine.
    #[inline]
    pub fn lookup(&mut self, cl: &Classifier, key: &PacketKey) -> Verdict {
        self.lookup_as::<true>(cl, key)
    }

    /// [`lookup`](Self::lookup); `TAGS`: whether the rules read packet tags (without, the
    /// key's tag is 0 and the verdict's too: neither is read).
    #[inline(always)]
    fn lookup_as<const TAGS: bool>(&mut self, cl: &Classifier, key: &PacketKey) -> Verdict {
        if cl.id() != self.owner {
            self.invalidate();
            self.owner = cl.id();
        }
        let p = self.probe::<TAGS>(key, cl.flags_mask());
        let (set, sig) = self.set_of(&p);
        for (w, &s) in self.sigs[set].iter().enumerate() {
            if s == sig {
                let e = &self.entries[set * WAYS + w];
                if e.gen_meta == p.gen_meta && e.tag == p.tag && e.src == p.src && e.dst == p.dst {
                    self.counters.hits += 1;
                    return verdict_of::<TAGS>(e);
                }
            }
        }
        self.miss(cl, key, &p, set, sig)
    }

    /// Classifies, and puts the verdict in the set's next way in turn.
    #[inline(never)]
    fn miss(&mut self, cl: &Classifier, key: &PacketKey, p: &Probe, set: usize, sig: u32) -> Verdict {
        self.counters.misses += 1;
        let v = cl.classify(key);
        if self.flooded() {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if self.rng & (FLOOD_INSERT_ONE_IN - 1) != 0 {
                return v;
            }
        }
        let w = self.victim;
        self.victim = (w + 1) % WAYS;
        self.sigs[set][w] = sig;
        self.entries[set * WAYS + w] = Entry { src: p.src, dst: p.dst, tag: p.tag, gen_meta: p.gen_meta, rule: rule_bits(&v), verdict: verdict_bits(&v), vtag: v.tag };
        v
    }

    #[inline(always)]
    fn probe<const TAGS: bool>(&self, key: &PacketKey, flags_mask: u8) -> Probe {
        let flags = if key.proto == proto::TCP { key.tcp_flags & flags_mask } else { 0 };
        let tag = u64::from(key.src_port) << 48 | u64::from(key.dst_port) << 32 | u64::from(key.iface) << 16 | u64::from(key.proto) << 8 | u64::from(flags);
        let ptag = if TAGS { u32::from(key.tag) << 5 } else { 0 };
        let meta = ptag | u32::from(key.route & 7) << 2 | u32::from(key.dir == Dir::Out) << 1 | u32::from(key.af == Af::Inet6);
        Probe { src: key.src, dst: key.dst, tag, gen_meta: self.generation << META_BITS | meta }
    }

    /// Whether the last full window of lookups missed more than [`FLOOD_MISSES`] times
    /// (evaluated on misses only: without misses it does not matter).
    #[inline(always)]
    fn flooded(&mut self) -> bool {
        let c = &self.counters;
        let lookups = c.hits + c.misses;
        if lookups - self.window.0 >= WINDOW {
            self.flood = c.misses - self.window.1 > FLOOD_MISSES;
            self.window = (lookups, c.misses);
        }
        self.flood
    }

    /// The key's set and signature.
    #[inline(always)]
    fn set_of(&self, p: &Probe) -> (usize, u32) {
        let h = mum(p.src as u64 ^ self.seed, p.dst as u64 ^ 0x9e37_79b9_7f4a_7c15)
            ^ mum((p.src >> 64) as u64 ^ p.tag, (p.dst >> 64) as u64 ^ u64::from(p.gen_meta & ((1 << META_BITS) - 1)) ^ 0xbf58_476d_1ce4_e5b9);
        (((h ^ (h >> 32)) as usize) & self.set_mask, (h >> 32) as u32)
    }
}

#[inline(always)]
fn rule_bits(v: &Verdict) -> u32 {
    // Rule indices are below 2^31 (`Classifier::build_with` refuses more).
    v.rule.map_or(NO_RULE, |r| r as u32)
}

#[inline(always)]
fn verdict_bits(v: &Verdict) -> u8 {
    let mode = match v.keep_state {
        StateMode::None => 0,
        StateMode::Keep => 1,
        StateMode::KeepSloppy => 2,
        StateMode::Modulate => 3,
        StateMode::Synproxy => 4,
    };
    u8::from(v.action == Action::Block) | mode << 1
}

#[inline(always)]
fn verdict_of<const TAGS: bool>(e: &Entry) -> Verdict {
    Verdict {
        action: if e.verdict & 1 != 0 { Action::Block } else { Action::Pass },
        rule: (e.rule != NO_RULE).then_some(e.rule as usize),
        keep_state: match e.verdict >> 1 {
            0 => StateMode::None,
            1 => StateMode::Keep,
            2 => StateMode::KeepSloppy,
            3 => StateMode::Modulate,
            _ => StateMode::Synproxy,
        },
        tag: if TAGS { e.vtag } else { 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse;
    use std::path::Path;

    fn classifier(text: &str, engine: super::super::Engine) -> Classifier {
        let rs = parse(text, Path::new("t.conf"), &|n| n.strip_prefix("em").and_then(|i| i.parse().ok())).unwrap();
        Classifier::build_with(&rs, &super::super::BuildOptions { engine, ..Default::default() }).unwrap()
    }

    const SYN: PacketKey = PacketKey { proto: proto::TCP, src: 0x0a00_0001, dst: 0xc000_0201, src_port: 40000, dst_port: 22, tcp_flags: 0x02, ..PacketKey::ZERO };

    #[test]
    fn entry_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Entry>(), 64);
    }

    #[test]
    fn a_repeated_key_hits_and_answers_as_the_classifier() {
        let cl = classifier("block all\npass in proto tcp to port 22 flags S/SA keep state\n", super::super::Engine::Tree);
        let mut c = VerdictCache::new(64, 7);
        let first = c.classify(&cl, &SYN);
        assert_eq!(first, cl.classify(&SYN));
        assert_eq!(first.rule, Some(1));
        assert_eq!(first.keep_state, StateMode::Keep);
        assert_eq!(c.classify(&cl, &SYN), first);
        assert_eq!(c.counters(), CacheCounters { hits: 1, misses: 1, invalidations: 1 });
    }

    /// Every state mode comes back from the cache as it went in.
    #[test]
    fn state_modes_survive_the_cache() {
        for (opt, mode) in [("no state", StateMode::None), ("keep state", StateMode::Keep), ("keep state (sloppy)", StateMode::KeepSloppy), ("modulate state", StateMode::Modulate), ("synproxy state", StateMode::Synproxy)] {
            let cl = classifier(&format!("block all\npass in proto tcp to port 22 flags S/SA {opt}\n"), super::super::Engine::Tree);
            let mut c = VerdictCache::new(64, 7);
            c.classify(&cl, &SYN);
            let hit = c.classify(&cl, &SYN);
            assert_eq!((hit.keep_state, c.counters().hits), (mode, 1), "{opt}");
        }
    }

    /// `no-route` / `urpf-failed` sets: the route bits are part of the key, and a set whose
    /// variants are trees is cached.
    #[test]
    fn route_bits_are_keyed() {
        let cl = classifier("block in quick from urpf-failed\npass in quick proto tcp to port 22 no state\nblock in all\n", super::super::Engine::Tree);
        assert!(cl.wants_cache());
        let mut c = VerdictCache::new(64, 7);
        let spoofed = PacketKey { route: crate::packet::route::SRC_URPF_FAILED, ..SYN };
        for _ in 0..2 {
            assert_eq!(c.classify(&cl, &SYN).rule, Some(1));
            assert_eq!(c.classify(&cl, &spoofed).rule, Some(0));
        }
        assert_eq!(c.counters().hits, 2);
        let rfc = classifier("block in quick from urpf-failed\npass all\n", super::super::Engine::Auto);
        assert!(!rfc.wants_cache());
    }

    #[test]
    fn fields_rules_cannot_see_share_an_entry_and_tested_flags_do_not() {
        let cl = classifier("block all\npass in proto tcp to port 22 flags S/SA keep state\n", super::super::Engine::Tree);
        let mut c = VerdictCache::new(64, 7);
        c.classify(&cl, &SYN);
        // Length, ICMP id, IP options, and flag bits outside S/A: the same entry.
        let same = PacketKey { len: 1500, icmp_id: 9, ip_opts: true, tcp_flags: 0x02 | 0x08 | 0x80, ..SYN };
        assert_eq!(c.classify(&cl, &same), cl.classify(&same));
        assert_eq!(c.counters().hits, 1);
        // ACK is tested (mask SA): another entry, and another verdict.
        let ack = PacketKey { tcp_flags: 0x10, ..SYN };
        assert_eq!(c.classify(&cl, &ack), cl.classify(&ack));
        assert_eq!(c.classify(&cl, &ack).rule, Some(0));
        assert_eq!(c.counters().misses, 2);
        // Every keyed field makes a different entry.
        let others = [
            PacketKey { dir: Dir::Out, ..SYN },
            PacketKey { iface: 1, ..SYN },
            PacketKey { src: SYN.src + 1, ..SYN },
            PacketKey { dst: SYN.dst + 1, ..SYN },
            PacketKey { src_port: 40001, ..SYN },
            PacketKey { dst_port: 23, ..SYN },
            PacketKey { proto: proto::UDP, ..SYN },
            PacketKey { af: Af::Inet6, ..SYN },
        ];
        for k in others {
            assert_eq!(c.classify(&cl, &k), cl.classify(&k), "{k:?}");
        }
        assert_eq!(c.counters().misses, 2 + others.len() as u64);
    }

    #[test]
    fn a_new_classifier_is_never_answered_from_the_old_one() {
        let old = classifier("block all\n", super::super::Engine::Tree);
        let new = classifier("pass all no state\n", super::super::Engine::Tree);
        let mut c = VerdictCache::new(64, 7);
        assert_eq!(c.classify(&old, &SYN).action, Action::Block);
        assert_eq!(c.classify(&new, &SYN).action, Action::Pass);
        assert_eq!(c.classify(&new, &SYN).action, Action::Pass);
        assert_eq!(c.counters(), CacheCounters { hits: 1, misses: 2, invalidations: 2 });
    }

    #[test]
    fn rfc_answers_without_the_cache() {
        let cl = classifier("block all\npass in proto tcp to port 22\n", super::super::Engine::Rfc);
        assert!(!cl.wants_cache());
        let mut c = VerdictCache::new(64, 7);
        assert_eq!(c.classify(&cl, &SYN), cl.classify(&SYN));
        assert_eq!(c.counters(), CacheCounters::default());
    }

    #[test]
    fn a_full_set_evicts_its_older_entry_and_stays_right() {
        let cl = classifier("block in proto tcp to port 22\n", super::super::Engine::Tree);
        // One set: every key collides.
        let mut c = VerdictCache::new(WAYS, 7);
        let keys: Vec<PacketKey> = (0..6).map(|i| PacketKey { src_port: 1000 + i, ..SYN }).collect();
        for k in keys.iter().chain(&keys).chain(keys.iter().rev()) {
            assert_eq!(c.classify(&cl, k), cl.classify(k));
        }
        assert!(c.counters().misses >= 12);
        assert_eq!(c.memory_bytes(), (64 + 4) * WAYS);
    }

    #[test]
    fn a_flood_inserts_few_and_the_cache_recovers_after_it() {
        let cl = classifier("block in proto tcp to port 22\n", super::super::Engine::Tree);
        let mut c = VerdictCache::new(1 << 12, 7);
        let flood: Vec<PacketKey> = (0..20_000u32).map(|i| PacketKey { src: u128::from(i), ..SYN }).collect();
        for k in &flood {
            assert_eq!(c.classify(&cl, k), cl.classify(k));
        }
        // The flood's last keys again: few were inserted.
        let again = flood[19_000..].iter().filter(|k| {
            let before = c.counters().hits;
            c.classify(&cl, k);
            c.counters().hits > before
        });
        assert!(again.count() < 200);
        // A few flows repeating: past a window the cache inserts every miss again.
        let hot: Vec<PacketKey> = (0..10u16).map(|i| PacketKey { src_port: i, ..SYN }).collect();
        for _ in 0..300 {
            for k in &hot {
                assert_eq!(c.classify(&cl, k), cl.classify(k));
            }
        }
        let before = c.counters().misses;
        for k in &hot {
            c.classify(&cl, k);
        }
        assert_eq!(c.counters().misses, before);
    }
}
