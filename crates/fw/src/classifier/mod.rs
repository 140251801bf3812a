//! The compiled classifier: what the fast path asks for a verdict. Built off the fast path
//! from a [`RuleSet`]; immutable, `Send + Sync`. Every rule set compiles: no rule set a user
//! can write is refused.
//!
//! Two engines, one chosen per rule set:
//!
//! * [`rfc`] (Recursive Flow Classification with sparse cross-products): 6 field lookups, 5
//!   table combinations and a verdict read per packet, whatever the number of rules. It is
//!   tried first, within [`BuildOptions::memory_budget`] and [`BuildOptions::max_pairs`]:
//!   sets of rules that each constrain one or two fields with distinct values (100k host
//!   pairs, 1M-entry tables) fit easily.
//! * [`tree`] (a HyperSplit decision tree per address family): what mixed rule sets get when
//!   RFC's cross products would not fit, as they soon do when every rule constrains
//!   addresses, protocol and ports with overlapping values, negations and lists (a few
//!   hundred such rules can need gigabytes). Its build time and memory are bounded (rules
//!   stored at most [`tree::STORED_PER_RULE`] times each), and the cost per packet grows with
//!   the tree's depth, i.e. the logarithm of the rule count, not with the count.
//!
//! RFC gives up as soon as a budget is crossed (the exception pairs of a combination are
//! counted before they are enumerated), so a rule set that needs the tree costs little more
//! than the tree's own build. [`ClassifierStats::engine`] says which engine was used and
//! [`ClassifierStats::rfc_gave_up`] why RFC was not.
//!
//! In front of the tree, each worker keeps a [`VerdictCache`] ([`cache`]): exact-match on
//! every field the rules can read, so that the packets of a flow after its first take one
//! hashed probe instead of the walk; and, for a key without an entry, on the classes of its
//! addresses and ports (`classes.rs`), so that a new flow in the classes of one seen before
//! takes a second probe instead of the walk.

pub mod cache;
mod classes;
mod rfc;
mod tags;
pub mod tree;

use crate::packet::PacketKey;
use crate::rules::RuleSet;
use crate::verdict::Verdict;

pub use cache::{CacheCounters, VerdictCache};
pub use tree::TreeStats;

/// Source of [`Classifier::id`].
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Default memory budget of the RFC engine: 1 GiB (a 1M-entry table takes about 300 MiB of
/// it; see also [`rfc_budget`]).
pub const DEFAULT_MEMORY_BUDGET: usize = 1 << 30;

/// Default of [`BuildOptions::max_pairs`].
pub const DEFAULT_MAX_PAIRS: usize = 1 << 20;

/// Default number of (class-changing) prefixes of one family in one address field above
/// which an LPM table replaces the sorted-interval binary search.
pub const DEFAULT_LPM_THRESHOLD: usize = 256;

/// Which engine compiles a rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// RFC if it fits the budgets, else the tree.
    #[default]
    Auto,
    /// Only RFC: a rule set over the budgets is an error (for tests and measurements).
    Rfc,
    /// Only the tree.
    Tree,
}

/// Build parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOptions {
    /// Bytes the RFC engine may use (accounted: rule sets, tables, LPM arrays).
    pub memory_budget: usize,
    /// Class pairs sharing a rule that one RFC combination may enumerate (the work and the
    /// exceptions of that combination).
    pub max_pairs: usize,
    /// See [`DEFAULT_LPM_THRESHOLD`]. 0 = always LPM.
    pub lpm_threshold: usize,
    /// With an LPM table, host routes (/32, /128) go to an exact-match hash map in front of it
    /// when there are at least this many (default [`DEFAULT_HOST_MAP_THRESHOLD`]): each host
    /// in its own /24 would otherwise cost a 1 KiB tbl8 group (1M random hosts: 1.2 GiB).
    pub host_map_threshold: usize,
    pub engine: Engine,
    /// Tree leaves get a second filter in rule sets of at least this many rules (default
    /// [`DEFAULT_LEAF_PAIRS_FROM`]; 0: in every set, as the property tests build them).
    pub leaf_pairs_from: usize,
    /// 256-entry nodes each address table of the cache's classes may use (default
    /// [`DEFAULT_CLASS_NODES`]); past them, crowded spans are searched by halves. Tests and
    /// the fuzz target set 0 or a few to reach that path.
    pub class_nodes: usize,
}

/// Default of [`BuildOptions::class_nodes`].
pub const DEFAULT_CLASS_NODES: usize = classes::NODE_BUDGET;

/// Default of [`BuildOptions::leaf_pairs_from`].
pub const DEFAULT_LEAF_PAIRS_FROM: usize = tree::PAIRS_FROM;

/// Default of [`BuildOptions::host_map_threshold`].
pub const DEFAULT_HOST_MAP_THRESHOLD: usize = 64;

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            memory_budget: DEFAULT_MEMORY_BUDGET,
            max_pairs: DEFAULT_MAX_PAIRS,
            lpm_threshold: DEFAULT_LPM_THRESHOLD,
            host_map_threshold: DEFAULT_HOST_MAP_THRESHOLD,
            engine: Engine::Auto,
            leaf_pairs_from: DEFAULT_LEAF_PAIRS_FROM,
            class_nodes: DEFAULT_CLASS_NODES,
        }
    }
}

/// Why a rule set could not be compiled (only with [`Engine::Rfc`], or past 2^31 rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    pub message: String,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

/// Sizes of the compiled structure (for reports and tests). The RFC fields are zero when the
/// tree was used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassifierStats {
    /// `"rfc"` or `"tree"`.
    pub engine: &'static str,
    /// Why RFC was not used (the budget it crossed), with the tree.
    pub rfc_gave_up: Option<String>,
    /// Classes of the fields: iface×dir, af×proto×flags, sport, dport, src, dst.
    pub field_classes: [usize; 6],
    /// Classes after each combination: ab, ef, abef, cd, final.
    pub join_classes: [usize; 5],
    /// Dense entries of each combination.
    pub join_dense: [usize; 5],
    /// Exceptions of each combination.
    pub join_exceptions: [usize; 5],
    /// Whether the source / destination fields use an LPM table (src v4, src v6, dst v4, dst v6).
    pub lpm: [bool; 4],
    /// Host routes in exact-match maps (src v4, src v6, dst v4, dst v6).
    pub host_maps: [usize; 4],
    /// The tree's sizes, with the tree.
    pub tree: Option<TreeStats>,
}

/// Bytes the RFC engine may use on `rs`: [`BuildOptions::memory_budget`], but in
/// [`Engine::Auto`] at most [`RFC_BASE_BUDGET`] plus [`RFC_BYTES_PER_ITEM`] per rule and
/// table entry, so that a rule set RFC cannot hold is given up after little work (what it
/// needs grows with how the rules overlap, not with their number).
fn rfc_budget(rs: &RuleSet, opts: &BuildOptions) -> usize {
    if opts.engine == Engine::Rfc {
        return opts.memory_budget;
    }
    let items = rs.rules.len() + rs.tables.iter().map(|t| t.entries.len()).sum::<usize>();
    opts.memory_budget.min(RFC_BASE_BUDGET.saturating_add(items.saturating_mul(RFC_BYTES_PER_ITEM)))
}

/// See [`rfc_budget`].
pub const RFC_BASE_BUDGET: usize = 16 << 20;
/// See [`rfc_budget`].
pub const RFC_BYTES_PER_ITEM: usize = 2048;

enum Compiled {
    Rfc(Box<rfc::Rfc>),
    Tree(Box<tree::Tree>),
    Routes(Box<RouteVariants>),
    Tags(Box<tags::TagVariants>),
}

impl Compiled {
    #[inline(always)]
    fn classify(&self, key: &PacketKey) -> Verdict {
        match self {
            Compiled::Rfc(r) => r.classify(key),
            Compiled::Tree(t) => t.classify(key),
            Compiled::Routes(v) => v.classify(key),
            Compiled::Tags(v) => v.classify(key),
        }
    }

    /// Whether a tree answers (some of) the packets.
    fn has_tree(&self) -> bool {
        match self {
            Compiled::Rfc(_) => false,
            Compiled::Tree(_) => true,
            Compiled::Routes(v) => v.sets.iter().flatten().any(|(c, _)| c.has_tree()),
            Compiled::Tags(v) => v.has_tree(),
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Compiled::Rfc(r) => r.memory_bytes(),
            Compiled::Tree(t) => t.memory_bytes(),
            Compiled::Routes(v) => {
                v.sets.iter().flatten().map(|(c, map)| c.memory_bytes() + map.len() * 4).sum()
            }
            Compiled::Tags(v) => v.memory_bytes(),
        }
    }
}

/// A rule set with pf's `no-route` / `urpf-failed` hosts: what the rules say depends on the
/// FIB, which changes without a reload. So it is compiled once per value of the
/// [`route`](crate::packet::route) bits it tests (at most 8), each time over the rules that
/// value lets match, and the packet's bits (filled by the data plane) pick the one to ask.
struct RouteVariants {
    /// The bits some rule tests.
    used: u8,
    /// Indexed by `route & used`: the compiled rules, and each one's index in the rule set.
    sets: Vec<Option<(Compiled, Vec<u32>)>>,
}

impl RouteVariants {
    fn build(
        rs: &RuleSet,
        opts: &BuildOptions,
        used: u8,
    ) -> Result<(RouteVariants, ClassifierStats), BuildError> {
        let mut sets = Vec::with_capacity(8);
        let mut first_stats = None;
        for route in 0..8u8 {
            if route & !used != 0 {
                sets.push(None);
                continue;
            }
            let (keep, map): (Vec<_>, Vec<u32>) = rs
                .rules
                .iter()
                .zip(0u32..)
                .filter(|(r, _)| {
                    route & r.route_need == r.route_need && route & r.route_refuse == 0
                })
                .map(|(r, i)| (r.clone(), i))
                .unzip();
            // The engines read the rules and the tables only.
            let variant = RuleSet { rules: keep, tables: rs.tables.clone(), ..RuleSet::default() };
            let (c, stats) = compile(&variant, opts)?;
            first_stats.get_or_insert(stats);
            sets.push(Some((c, map)));
        }
        Ok((RouteVariants { used, sets }, first_stats.unwrap_or_default()))
    }

    #[inline]
    fn classify(&self, key: &PacketKey) -> Verdict {
        let Some((c, map)) = &self.sets[usize::from(key.route & self.used)] else {
            unreachable!("a set per value of the used bits")
        };
        let mut v = c.classify(key);
        v.rule = v.rule.map(|i| map[i] as usize);
        v
    }
}

/// Compiles `rs` (without tags), once per value of the route bits it tests if any.
fn compile_routes(
    rs: &RuleSet,
    opts: &BuildOptions,
) -> Result<(Compiled, ClassifierStats), BuildError> {
    match rs.route_bits_used() {
        0 => compile(rs, opts),
        used => {
            let (v, stats) = RouteVariants::build(rs, opts, used)?;
            Ok((Compiled::Routes(Box::new(v)), stats))
        }
    }
}

/// Compiles `rs` with one engine (see [`Classifier::build_with`]), ignoring route hosts.
fn compile(rs: &RuleSet, opts: &BuildOptions) -> Result<(Compiled, ClassifierStats), BuildError> {
    let gave_up = match opts.engine {
        Engine::Tree => None,
        // Not attempted where its address fields alone would cross the budget.
        Engine::Auto if let Some(e) = rfc::surely_over_budget(rs, opts, rfc_budget(rs, opts)) => {
            Some(e.message)
        }
        Engine::Rfc | Engine::Auto => {
            match rfc::Rfc::build(rs, opts, rfc_budget(rs, opts), opts.max_pairs) {
                Ok(r) => {
                    let stats = ClassifierStats { engine: "rfc", ..r.stats.clone() };
                    return Ok((Compiled::Rfc(Box::new(r)), stats));
                }
                Err(e) if opts.engine == Engine::Rfc => return Err(e),
                Err(e) => Some(e.message),
            }
        }
    };
    let t = tree::Tree::build(rs, opts.leaf_pairs_from);
    let stats = ClassifierStats {
        engine: "tree",
        rfc_gave_up: gave_up,
        tree: Some(t.stats()),
        ..ClassifierStats::default()
    };
    Ok((Compiled::Tree(Box::new(t)), stats))
}

/// The compiled rule set. See the module documentation.
pub struct Classifier {
    compiled: Compiled,
    rules: usize,
    stats: ClassifierStats,
    /// Unique per build: what a [`VerdictCache`] knows its entries by.
    id: u64,
    /// The TCP flag bits some rule tests.
    flags_mask: u8,
    /// See [`Classifier::wants_cache`]: 0 no, 1 yes, 2 yes and the rules test tags (the
    /// cache then keys on them; one byte, so that the fast path reads one field).
    cache_mode: u8,
    /// With the cache: the classes of addresses and ports, by which it looks up a key that
    /// has no entry of its own (`classes.rs`).
    classes: Option<Box<classes::KeyClasses>>,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("rules", &self.rules)
            .field("memory_bytes", &self.memory_bytes())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Classifier {
    /// Compiles `rs` with the default [`BuildOptions`].
    pub fn build(rs: &RuleSet) -> Result<Classifier, BuildError> {
        Self::build_with(rs, &BuildOptions::default())
    }

    /// Compiles `rs`. Fails only with [`Engine::Rfc`] over its budgets, or past 2^31 rules.
    pub fn build_with(rs: &RuleSet, opts: &BuildOptions) -> Result<Classifier, BuildError> {
        if rs.rules.len() >= 1 << 31 {
            return Err(BuildError {
                message: format!("too many rules: {} (at most 2^31 - 1)", rs.rules.len()),
            });
        }
        let rules = rs.rules.len();
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let flags_mask = rs.rules.iter().filter_map(|r| r.flags).fold(0, |m, (_, mask)| m | mask);
        let (compiled, stats) = if rs.rules.iter().any(|r| r.tag.is_some() || r.tagged.is_some()) {
            let (v, stats) = tags::TagVariants::build(rs, opts)?;
            (Compiled::Tags(Box::new(v)), stats)
        } else {
            compile_routes(rs, opts)?
        };
        let cache_mode = match (compiled.has_tree(), matches!(compiled, Compiled::Tags(_))) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        };
        // Built from every rule: each variant's rules are a subset, whose classes these refine.
        let classes =
            (cache_mode != 0).then(|| Box::new(classes::KeyClasses::build(rs, opts.class_nodes)));
        Ok(Classifier { compiled, rules, stats, id, flags_mask, cache_mode, classes })
    }

    /// The verdict for one packet (same as [`reference::evaluate`](crate::reference::evaluate)).
    #[inline(always)]
    pub fn classify(&self, key: &PacketKey) -> Verdict {
        self.compiled.classify(key)
    }

    /// Classifies `keys[i]` into `out[i]` (`out` at least as long as `keys`).
    pub fn classify_batch(&self, keys: &[PacketKey], out: &mut [Verdict]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.classify(k);
        }
    }

    /// Bytes held by the compiled structure (LPM tables counted as their committed size).
    pub fn memory_bytes(&self) -> usize {
        self.compiled.memory_bytes() + self.classes.as_ref().map_or(0, |c| c.memory_bytes())
    }

    /// Unique per build (a rebuilt rule set gets another).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The TCP flag bits that some rule tests (`flags S/SA`: SYN and ACK): the others cannot
    /// change a verdict.
    pub fn flags_mask(&self) -> u8 {
        self.flags_mask
    }

    /// Whether a [`VerdictCache`] in front pays: with the tree engine (a walk of several
    /// trees and leaves, 100-400 ns), not with RFC (about 30 ns, less than a cache miss).
    #[inline(always)]
    pub fn wants_cache(&self) -> bool {
        self.cache_mode != 0
    }

    /// [`wants_cache`](Self::wants_cache), and 2 where the rules read packet tags.
    #[inline(always)]
    pub(crate) fn cache_mode(&self) -> u8 {
        self.cache_mode
    }

    /// The classes of addresses and ports (with the cache only: the tree engine).
    #[inline(always)]
    pub(crate) fn key_classes(&self) -> Option<&classes::KeyClasses> {
        self.classes.as_deref()
    }

    /// Number of rules compiled.
    pub fn rule_count(&self) -> usize {
        self.rules
    }

    /// Sizes of the structure.
    pub fn stats(&self) -> &ClassifierStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::{BuildOptions, Classifier, rfc, tree};
    use crate::testgen;
    use std::path::Path;

    #[test]
    fn classifier_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<Classifier>();
    }

    /// RFC's attempt is skipped only where it would fail: on realistic and adversarial sets
    /// of several sizes, under budgets from tight to the default, whenever the bound says
    /// "surely over", RFC gives up too; and the bound does say so for 10,000 realistic
    /// rules under the default budget (RFC gave up there after building the field).
    #[test]
    fn rfc_is_skipped_only_where_it_would_give_up() {
        let parse = |text: String| {
            crate::rules::parse(&text, Path::new("t.conf"), &testgen::iface_index).unwrap()
        };
        let mut sets: Vec<_> = [40, 200, 600, 2000, 10_000]
            .iter()
            .enumerate()
            .map(|(s, &n)| parse(testgen::ruleset(s as u64, n)))
            .collect();
        sets.extend(
            testgen::adversarial::SHAPES
                .iter()
                .map(|shape| parse(testgen::adversarial::ruleset(shape, 3, 300).unwrap())),
        );
        let mut skipped = 0;
        for (k, rs) in sets.iter().enumerate() {
            for limit in [
                300 << 10,
                400 << 10,
                600 << 10,
                1 << 20,
                4 << 20,
                super::rfc_budget(rs, &BuildOptions::default()),
            ] {
                if let Some(e) = rfc::surely_over_budget(rs, &BuildOptions::default(), limit) {
                    skipped += 1;
                    let built = rfc::Rfc::build(rs, &BuildOptions::default(), limit, usize::MAX);
                    assert!(
                        built.is_err(),
                        "set {k}, limit {limit}: skipped ({}), yet RFC fits",
                        e.message
                    );
                }
            }
        }
        assert!(skipped >= 8, "the bound skipped RFC {skipped} times");
        // At the bound's edge: one byte less than the bound of the source field, or of both
        // fields, and RFC must give up there, on realistic sets of many sizes and seeds and
        // on the adversarial shapes.
        let shapes = testgen::adversarial::SHAPES
            .iter()
            .map(|shape| parse(testgen::adversarial::ruleset(shape, 5, 400).unwrap()));
        for (seed, rs) in (0..40u64)
            .map(|s| parse(testgen::ruleset(100 + s, [20, 60, 150, 400, 1000][s as usize % 5])))
            .chain(shapes)
            .enumerate()
        {
            // Lower LPM thresholds, so that the bound's `lpm` term is met at these sizes too.
            let opts = BuildOptions {
                lpm_threshold: [256, 64, 16, 0][seed % 4],
                ..BuildOptions::default()
            };
            let src = rfc::PORT_AND_PROTO_TABLES + rfc::field_at_least(&rs, &opts, tree::SRC);
            let both = src + rfc::field_at_least(&rs, &opts, tree::SRC + 1);
            for (limit, fields) in [
                (src - 1, &["source address"][..]),
                (both - 1, &["source address", "destination address"]),
            ] {
                assert!(rfc::surely_over_budget(&rs, &opts, limit).is_some());
                // Within those fields (it builds them first), not in a later phase.
                let e = rfc::Rfc::build(&rs, &opts, limit, usize::MAX).err().map(|e| e.message);
                let within = e.as_ref().is_some_and(|m| {
                    m.contains("port and protocol") || fields.iter().any(|f| m.contains(f))
                });
                assert!(
                    within,
                    "seed {seed}, limit {limit}: under the bound, yet RFC got past {fields:?}: {e:?}"
                );
            }
        }
        let big = &sets[4];
        assert!(
            rfc::surely_over_budget(
                big,
                &BuildOptions::default(),
                super::rfc_budget(big, &BuildOptions::default())
            )
            .is_some()
        );
    }
}
