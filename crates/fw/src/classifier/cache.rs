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
//! A key with no entry of its own is looked up again by the classes of its addresses and
//! ports (`classes.rs`: values that the same rules accept), in entries marked [`BY_CLASS`]:
//! a new flow in the classes of a flow seen before is answered without the classifier. The
//! class lookups stop while they do not pay ([`VerdictCache::classes_pay`]).
//!
//! Bounded: a fixed array of 64-byte entries, four per set, allocated once by [`new`], with
//! a 32-bit signature per entry in a separate array that a lookup reads first; a miss
//! replaces one of the set's entries, the ways taken in turn. While more than a quarter of
//! the lookups find no entry of their own (a flood of new flows), only one such key in 16
//! gets one, at random. Nothing is allocated on the fast path and nothing is shared: each
//! worker owns its cache. Entries are tagged with a generation; a cache sees
//! which classifier it is asked about ([`Classifier::id`], unique per build) and starts a
//! new generation when that changes, so a reload can never be answered from the old set.
//!
//! [`new`]: VerdictCache::new

use super::Classifier;
use super::classes::KeyClasses;
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

/// Class lookups over which their use is judged (see [`VerdictCache::classes_pay`]).
const CLASS_WINDOW: u64 = 1024;
/// A window of class lookups with fewer hits than this turns them off: they cost more than
/// an exact probe (tens of ns for addresses deep in the rules' prefixes).
const CLASS_MIN_HITS: u64 = CLASS_WINDOW / 8;
/// While off, one exact miss in this many still looks its classes up, to see whether they
/// pay again.
const CLASS_SAMPLE_ONE_IN: u64 = 16;

/// Generations use 18 bits (the low 14 say whether the key is by classes, and hold the
/// packet's tag, the route bits, the direction and the family: the tag rides in a word
/// compared anyway, so rule sets without tags pay nothing for it); 0 is never current. A
/// wrap clears the cache.
const GEN_BITS: u32 = 18;
/// The bits of `gen_meta` below the generation.
const META_BITS: u32 = 14;
/// In `gen_meta`: the entry is keyed by the classes of addresses and ports.
const BY_CLASS: u32 = 1 << 13;

/// No rule decided (pf's default pass) in [`Entry::rule`].
const NO_RULE: u32 = u32::MAX;

/// One cached verdict: the key's fields packed, then the verdict. One cache line.
/// Addresses and ports are their classes' ids in an entry with [`BY_CLASS`].
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct Entry {
    src: u128,
    dst: u128,
    /// Source port (or ICMP type) << 48 | destination port (code) << 32 | interface << 16 |
    /// protocol << 8 | masked TCP flags.
    tag: u64,
    /// Generation << 14 | [`BY_CLASS`] | packet tag << 5 | route bits << 2 | direction << 1 |
    /// family; 0: empty.
    gen_meta: u32,
    rule: u32,
    /// Action (bit 0: block) | state mode << 1.
    verdict: u8,
    /// [`Verdict::tag`].
    vtag: u8,
}

const EMPTY: Entry =
    Entry { src: 0, dst: 0, tag: 0, gen_meta: 0, rule: NO_RULE, verdict: 0, vtag: 0 };

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
    /// Lookups answered from an entry (`class_hits` included).
    pub hits: u64,
    /// Lookups the classifier answered.
    pub misses: u64,
    /// Of the hits, those answered by the classes of addresses and ports, from an entry
    /// another key of the same classes made.
    pub class_hits: u64,
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
    /// Probes of keys' own entries, and their misses, when the current window started.
    window: (u64, u64),
    /// The last window was a flood.
    flood: bool,
    /// Lookups that probed the entry of the key itself, and those that found none (answered
    /// by class or not): what tells a flood of new flows ([`flooded`](Self::flooded)).
    exact_probes: u64,
    exact_misses: u64,
    /// Class lookups made, and (lookups, class hits) when the current window started.
    class_lookups: u64,
    class_window: (u64, u64),
    /// The last window of class lookups hit too little: they are sampled only.
    classes_off: bool,
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
        f.debug_struct("VerdictCache")
            .field("entries", &self.entries.len())
            .field("counters", &self.counters)
            .finish()
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
            exact_probes: 0,
            exact_misses: 0,
            class_lookups: 0,
            class_window: (0, 0),
            classes_off: false,
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
        let p = self.probe::<TAGS>(key, cl);
        // In a flood of new flows that classes answer, the key's own entry is rarely there:
        // its probe is skipped but for one lookup in 16, which keeps the flood measured.
        let skip_own = self.flood && !self.classes_off && !self.one_in(FLOOD_INSERT_ONE_IN);
        if let Some(c) = cl.key_classes().filter(|_| skip_own) {
            return self.by_class::<TAGS>(cl, c, key, &p);
        }
        self.exact_probes += 1;
        let (set, sig) = self.set_of(&p);
        if let Some(v) = self.find(&p, set, sig).map(verdict_of::<TAGS>) {
            self.counters.hits += 1;
            return v;
        }
        self.miss::<TAGS>(cl, key, &p, set, sig)
    }

    /// The entry of `p` in `set`, if there is one.
    #[inline(always)]
    fn find(&self, p: &Probe, set: usize, sig: u32) -> Option<&Entry> {
        let ways = self.sigs[set].iter().enumerate().filter(|&(_, &s)| s == sig);
        ways.map(|(w, _)| &self.entries[set * WAYS + w]).find(|e| {
            e.gen_meta == p.gen_meta && e.tag == p.tag && e.src == p.src && e.dst == p.dst
        })
    }

    /// No entry for the key itself: the entry of its classes if the classifier has them
    /// and they pay, else the classifier's verdict. The exact entry is made either way
    /// (one miss in 16 in a flood), so that the flow's next packets take one probe.
    #[inline(never)]
    fn miss<const TAGS: bool>(
        &mut self,
        cl: &Classifier,
        key: &PacketKey,
        p: &Probe,
        set: usize,
        sig: u32,
    ) -> Verdict {
        self.exact_misses += 1;
        let v = match cl.key_classes() {
            Some(c) if self.classes_pay() => self.by_class::<TAGS>(cl, c, key, p),
            _ => {
                self.counters.misses += 1;
                cl.classify(key)
            }
        };
        if !self.flooded() || self.one_in(FLOOD_INSERT_ONE_IN) {
            self.insert(p, set, sig, &v);
        }
        v
    }

    /// The verdict from the entry of `key`'s classes, or the classifier's, which then
    /// makes that entry.
    fn by_class<const TAGS: bool>(
        &mut self,
        cl: &Classifier,
        c: &KeyClasses,
        key: &PacketKey,
        p: &Probe,
    ) -> Verdict {
        self.class_lookups += 1;
        let (s, d, sp, dp) = c.of(key);
        let tag = p.tag & 0xffff_ffff | u64::from(sp) << 48 | u64::from(dp) << 32;
        let q =
            Probe { src: u128::from(s), dst: u128::from(d), tag, gen_meta: p.gen_meta | BY_CLASS };
        let (set, sig) = self.set_of(&q);
        if let Some(v) = self.find(&q, set, sig).map(verdict_of::<TAGS>) {
            self.counters.hits += 1;
            self.counters.class_hits += 1;
            return v;
        }
        self.counters.misses += 1;
        let v = cl.classify(key);
        self.insert(&q, set, sig, &v);
        v
    }

    /// Puts `v` for `p` in its set's next way in turn.
    fn insert(&mut self, p: &Probe, set: usize, sig: u32, v: &Verdict) {
        let w = self.victim;
        self.victim = (w + 1) % WAYS;
        self.sigs[set][w] = sig;
        self.entries[set * WAYS + w] = Entry {
            src: p.src,
            dst: p.dst,
            tag: p.tag,
            gen_meta: p.gen_meta,
            rule: rule_bits(v),
            verdict: verdict_bits(v),
            vtag: v.tag,
        };
    }

    /// True once in `n` calls, at random (`n` a power of two).
    fn one_in(&mut self, n: u64) -> bool {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng & (n - 1) == 0
    }

    /// Whether to look the classes up: yes, unless the last window of [`CLASS_WINDOW`]
    /// class lookups hit fewer than [`CLASS_MIN_HITS`] times (traffic whose flows are each
    /// in classes of their own, where a lookup only adds to the classifier's walk); then
    /// for one miss in [`CLASS_SAMPLE_ONE_IN`].
    #[inline(always)]
    fn classes_pay(&mut self) -> bool {
        if self.class_lookups - self.class_window.0 >= CLASS_WINDOW {
            self.classes_off = self.counters.class_hits - self.class_window.1 < CLASS_MIN_HITS;
            self.class_window = (self.class_lookups, self.counters.class_hits);
        }
        !self.classes_off || self.one_in(CLASS_SAMPLE_ONE_IN)
    }

    #[inline(always)]
    fn probe<const TAGS: bool>(&self, key: &PacketKey, cl: &Classifier) -> Probe {
        let flags = if key.proto == proto::TCP { key.tcp_flags & cl.flags_mask() } else { 0 };
        let tag = u64::from(key.src_port) << 48
            | u64::from(key.dst_port) << 32
            | u64::from(key.iface) << 16
            | u64::from(key.proto) << 8
            | u64::from(flags);
        let ptag = if TAGS { u32::from(key.tag) << 5 } else { 0 };
        let meta = ptag
            | u32::from(key.route & 7) << 2
            | u32::from(key.dir == Dir::Out) << 1
            | u32::from(key.af == Af::Inet6);
        Probe { src: key.src, dst: key.dst, tag, gen_meta: self.generation << META_BITS | meta }
    }

    /// Whether the last full window of probes for keys' own entries found none more than
    /// [`FLOOD_MISSES`] times (evaluated on such misses only: without them it does not
    /// matter). Misses that the key's classes answer count: a flood of new flows in known
    /// classes would otherwise insert every flow and evict the class entries that answer it.
    #[inline(always)]
    fn flooded(&mut self) -> bool {
        if self.exact_probes - self.window.0 >= WINDOW {
            self.flood = self.exact_misses - self.window.1 > FLOOD_MISSES;
            self.window = (self.exact_probes, self.exact_misses);
        }
        self.flood
    }

    /// The key's set and signature.
    #[inline(always)]
    fn set_of(&self, p: &Probe) -> (usize, u32) {
        let h = mum(p.src as u64 ^ self.seed, p.dst as u64 ^ 0x9e37_79b9_7f4a_7c15)
            ^ mum(
                (p.src >> 64) as u64 ^ p.tag,
                (p.dst >> 64) as u64
                    ^ u64::from(p.gen_meta & ((1 << META_BITS) - 1))
                    ^ 0xbf58_476d_1ce4_e5b9,
            );
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
        let rs = parse(text, Path::new("t.conf"), &|n| {
            n.strip_prefix("em").and_then(|i| i.parse().ok())
        })
        .unwrap();
        Classifier::build_with(&rs, &super::super::BuildOptions { engine, ..Default::default() })
            .unwrap()
    }

    const SYN: PacketKey = PacketKey {
        proto: proto::TCP,
        src: 0x0a00_0001,
        dst: 0xc000_0201,
        src_port: 40000,
        dst_port: 22,
        tcp_flags: 0x02,
        ..PacketKey::ZERO
    };

    #[test]
    fn entry_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Entry>(), 64);
    }

    #[test]
    fn a_repeated_key_hits_and_answers_as_the_classifier() {
        let cl = classifier(
            "block all\npass in proto tcp to port 22 flags S/SA keep state\n",
            super::super::Engine::Tree,
        );
        let mut c = VerdictCache::new(64, 7);
        let first = c.classify(&cl, &SYN);
        assert_eq!(first, cl.classify(&SYN));
        assert_eq!(first.rule, Some(1));
        assert_eq!(first.keep_state, StateMode::Keep);
        assert_eq!(c.classify(&cl, &SYN), first);
        assert_eq!(
            c.counters(),
            CacheCounters { hits: 1, misses: 1, class_hits: 0, invalidations: 1 }
        );
    }

    /// Every state mode comes back from the cache as it went in.
    #[test]
    fn state_modes_survive_the_cache() {
        for (opt, mode) in [
            ("no state", StateMode::None),
            ("keep state", StateMode::Keep),
            ("keep state (sloppy)", StateMode::KeepSloppy),
            ("modulate state", StateMode::Modulate),
            ("synproxy state", StateMode::Synproxy),
        ] {
            let cl = classifier(
                &format!("block all\npass in proto tcp to port 22 flags S/SA {opt}\n"),
                super::super::Engine::Tree,
            );
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
        let cl = classifier(
            "block in quick from urpf-failed\npass in quick proto tcp to port 22 no state\nblock in all\n",
            super::super::Engine::Tree,
        );
        assert!(cl.wants_cache());
        let mut c = VerdictCache::new(64, 7);
        let spoofed = PacketKey { route: crate::packet::route::SRC_URPF_FAILED, ..SYN };
        for _ in 0..2 {
            assert_eq!(c.classify(&cl, &SYN).rule, Some(1));
            assert_eq!(c.classify(&cl, &spoofed).rule, Some(0));
        }
        assert_eq!(c.counters().hits, 2);
        let rfc =
            classifier("block in quick from urpf-failed\npass all\n", super::super::Engine::Auto);
        assert!(!rfc.wants_cache());
    }

    #[test]
    fn fields_rules_cannot_see_share_an_entry_and_tested_flags_do_not() {
        // The last rules make SYN's addresses and ports classes of their own.
        let rules = "block all\npass in proto tcp to port 22 flags S/SA keep state\n\
                     block proto tcp from 10.0.0.1 to 192.0.2.1 port 23:25\nblock proto tcp from port 40000 to 192.0.2.2/31\n";
        let cl = classifier(rules, super::super::Engine::Tree);
        let mut c = VerdictCache::new(64, 7);
        c.classify(&cl, &SYN);
        // Length, ICMP id, IP options, and flag bits outside S/A: the same entry.
        let same = PacketKey {
            len: 1500,
            icmp_id: 9,
            ip_opts: true,
            tcp_flags: 0x02 | 0x08 | 0x80,
            ..SYN
        };
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
        // Addresses and ports the rules do not tell apart from those of `others`: their
        // entries (keyed by the fields' classes, `classes.rs`).
        let alike = [
            PacketKey { src: SYN.src + 2, ..SYN },
            PacketKey { dst: SYN.dst + 2, ..SYN },
            PacketKey { src_port: 50000, ..SYN },
            PacketKey { dst_port: 24, ..SYN },
        ];
        for k in alike {
            assert_eq!(c.classify(&cl, &k), cl.classify(&k), "{k:?}");
        }
        assert_eq!(c.counters().misses, 2 + others.len() as u64);
    }

    #[test]
    fn class_lookups_stop_while_they_do_not_hit_and_resume_when_they_do() {
        // A class per destination port 1-2000 and per source 10.0.0.1-10.
        let ports = (1..=2000).map(|p| format!("block in proto tcp to port {p}\n"));
        let text: String = ports
            .chain((1..=10).map(|h| format!("block in proto tcp from 10.0.0.{h}\n")))
            .collect();
        let cl = classifier(&text, super::super::Engine::Tree);
        let mut c = VerdictCache::new(1 << 15, 7);
        // 20,000 new flows, each in classes of its own: after a window of class lookups
        // that never hit, only one exact miss in 16 looks its classes up.
        for i in 0..20_000u32 {
            let k = PacketKey {
                src: u128::from(0x0a00_0001 + i / 2000),
                dst_port: 1 + (i % 2000) as u16,
                ..SYN
            };
            assert_eq!(c.classify(&cl, &k), cl.classify(&k));
        }
        assert!(c.classes_off);
        assert_eq!(c.counters().class_hits, 0);
        let (lookups, misses) = (c.class_lookups, c.counters().misses);
        assert!((1024..1024 + 19_000 / 8).contains(&lookups), "{lookups} class lookups");
        // New flows in ten classes: the sampled lookups hit, and within a window of them
        // (16k misses at most) every miss looks its classes up again.
        for i in 0..40_000u32 {
            let k = PacketKey {
                src: u128::from(0x0b00_0000 + i),
                dst_port: 1 + (i % 10) as u16,
                ..SYN
            };
            assert_eq!(c.classify(&cl, &k), cl.classify(&k));
        }
        assert!(!c.classes_off);
        let c2 = c.counters();
        assert!(c2.misses - misses < 17_000 && c2.class_hits > 20_000, "{c2:?}");
    }

    #[test]
    fn a_new_flow_in_the_classes_of_another_hits() {
        let cl = classifier(
            "block all\npass in proto tcp from 10.0.0.0/8 to 192.0.2.0/24 port 1000:2000\n",
            super::super::Engine::Tree,
        );
        let mut c = VerdictCache::new(4096, 7);
        let first = PacketKey { dst_port: 1000, ..SYN };
        assert_eq!(c.classify(&cl, &first).rule, Some(1));
        for i in 1..100u16 {
            let k = PacketKey {
                src: SYN.src + u128::from(i) * 65537,
                dst: SYN.dst + u128::from(i),
                src_port: 30000 + i,
                dst_port: 1000 + 9 * i,
                ..SYN
            };
            assert_eq!(c.classify(&cl, &k).rule, Some(1), "{k:?}");
        }
        assert_eq!((c.counters().misses, c.counters().class_hits), (1, 99));
        // Each of them has its own entry now: the next packets take one probe.
        let k = PacketKey {
            src: SYN.src + 65537,
            dst: SYN.dst + 1,
            src_port: 30001,
            dst_port: 1009,
            ..SYN
        };
        assert_eq!(c.classify(&cl, &k).rule, Some(1));
        assert_eq!((c.counters().hits, c.counters().class_hits), (100, 99));
        let outside = PacketKey { dst: SYN.dst + 256, ..first };
        assert_eq!(c.classify(&cl, &outside).rule, Some(0));
        assert_eq!(c.counters().misses, 2);
    }

    #[test]
    fn a_new_classifier_is_never_answered_from_the_old_one() {
        let old = classifier("block all\n", super::super::Engine::Tree);
        let new = classifier("pass all no state\n", super::super::Engine::Tree);
        let mut c = VerdictCache::new(64, 7);
        assert_eq!(c.classify(&old, &SYN).action, Action::Block);
        assert_eq!(c.classify(&new, &SYN).action, Action::Pass);
        assert_eq!(c.classify(&new, &SYN).action, Action::Pass);
        assert_eq!(
            c.counters(),
            CacheCounters { hits: 1, misses: 2, class_hits: 0, invalidations: 2 }
        );
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
        // Keys that differ in the interface (keyed as it is, not by class).
        let keys: Vec<PacketKey> = (0..6).map(|i| PacketKey { iface: 1000 + i, ..SYN }).collect();
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
        // Keys that differ in the interface (keyed as it is, not by class).
        let flood: Vec<PacketKey> = (0..20_000u16).map(|i| PacketKey { iface: i, ..SYN }).collect();
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
        let hot: Vec<PacketKey> =
            (0..10u16).map(|i| PacketKey { iface: 30_000 + i, ..SYN }).collect();
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
