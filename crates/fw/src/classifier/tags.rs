//! Rule sets with pf's tags (`tag`, `tagged`; semantics in `rules/tags.rs`).
//!
//! `tagged` tests the tag the packet brings into the pass (the parser refuses a tag set and
//! tested within one pass), so it is compiled like the route bits: one classifier per tag
//! value some rule tests, plus one for every other value, each over the rules that value
//! lets match; the packet's tag picks the one to ask. Rule sets without tags never get
//! here and pay nothing.
//!
//! The tag a pass sets is that of the last matching rule with `tag` up to the deciding
//! rule (all rules when none decided by `quick`); the tagging rules, usually a handful, are
//! checked one by one after the verdict, and a [`VerdictCache`](super::VerdictCache) in
//! front keeps the whole answer.

use super::{BuildError, BuildOptions, ClassifierStats, Compiled};
use crate::packet::PacketKey;
use crate::rules::RuleSet;
use crate::verdict::Verdict;

pub(super) struct TagVariants {
    /// Variant index by the packet's tag id.
    by_tag: Box<[u8; 256]>,
    /// The compiled rules that each variant lets match, and each one's index in the rule set.
    sets: Vec<(Compiled, Vec<u32>)>,
    /// The rules with `tag` (and the tables they read), in order, and each one's index.
    tagging: RuleSet,
    tagging_index: Vec<usize>,
    /// Whether each rule of the set is `quick` (what bounds the tagging rules that apply).
    quick: Vec<bool>,
}

impl TagVariants {
    pub(super) fn build(
        rs: &RuleSet,
        opts: &BuildOptions,
    ) -> Result<(TagVariants, ClassifierStats), BuildError> {
        let mut tested: Vec<u8> =
            rs.rules.iter().filter_map(|r| r.tagged.map(|(_, id)| id)).collect();
        tested.sort_unstable();
        tested.dedup();
        let mut by_tag = Box::new([0u8; 256]);
        for (v, &id) in tested.iter().enumerate() {
            by_tag[usize::from(id)] = v as u8 + 1;
        }
        // Variant 0 stands for every tag no rule tests (none included): 0 is never a
        // tested id, so it matches `tagged` nowhere.
        let values = std::iter::once(0u8).chain(tested.iter().copied());
        let mut sets = Vec::with_capacity(tested.len() + 1);
        let mut first_stats = None;
        for value in values {
            let (keep, map): (Vec<_>, Vec<u32>) = rs
                .rules
                .iter()
                .zip(0u32..)
                .filter(|(r, _)| r.tagged.is_none_or(|(negated, id)| (value == id) != negated))
                .map(|(r, i)| (crate::rules::Rule { tagged: None, tag: None, ..r.clone() }, i))
                .unzip();
            let variant = RuleSet { rules: keep, tables: rs.tables.clone(), ..RuleSet::default() };
            let (c, stats) = super::compile_routes(&variant, opts)?;
            first_stats.get_or_insert(stats);
            sets.push((c, map));
        }
        let (tagging_rules, tagging_index): (Vec<_>, Vec<usize>) = rs
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.tag.is_some())
            .map(|(i, r)| (r.clone(), i))
            .unzip();
        let tagging =
            RuleSet { rules: tagging_rules, tables: rs.tables.clone(), ..RuleSet::default() };
        let quick = rs.rules.iter().map(|r| r.quick).collect();
        Ok((
            TagVariants { by_tag, sets, tagging, tagging_index, quick },
            first_stats.unwrap_or_default(),
        ))
    }

    #[inline]
    pub(super) fn classify(&self, key: &PacketKey) -> Verdict {
        let (c, map) = &self.sets[usize::from(self.by_tag[usize::from(key.tag)])];
        let mut v = c.classify(key);
        v.rule = v.rule.map(|i| map[i] as usize);
        // A quick rule that decides ends the walk: later rules tag nothing.
        let last = v.rule.filter(|&d| self.quick[d]).unwrap_or(usize::MAX);
        v.tag = self
            .tagging
            .rules
            .iter()
            .zip(&self.tagging_index)
            .rev()
            .filter(|&(_, &i)| i <= last)
            .find(|(r, _)| r.matches(&self.tagging, key))
            .and_then(|(r, _)| r.tag)
            .unwrap_or(0);
        v
    }

    pub(super) fn has_tree(&self) -> bool {
        self.sets.iter().any(|(c, _)| c.has_tree())
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.sets.iter().map(|(c, map)| c.memory_bytes() + map.len() * 4).sum()
    }
}
