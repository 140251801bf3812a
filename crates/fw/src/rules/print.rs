//! The rule set printed as `pfctl -nvf` prints what it loaded (`linerate check -v`), so that
//! a user can diff linerate's reading of a file against pfctl's: the options that differ
//! from pf's defaults (`set ...`), the tables, then the scrub, translation and filter rules,
//! one per line after macro and list expansion ([`RuleSet::expanded`]), pf's defaults
//! explicit (`block drop`, `flags S/SA keep state`, `no state`), anchors as pfctl nests them
//! (`anchor "name" all {`, their rules indented two spaces a level, `}`).
//!
//! It prints what linerate applies, which the parsed rule set holds rather than the file's
//! words: a table's entries rather than its `file`, OpenBSD's `nat-to`, `rdr-to` and `match
//! ... scrub` as the FreeBSD `nat`, `rdr` and `scrub` rules linerate makes of them, ports as
//! numbers, options only where they differ from the defaults (pfctl prints those the file
//! sets). What it prints parses back to the same (expanded) rule set.

mod expand;
mod line;
mod words;

pub use expand::{ExpansionTooLarge, MAX_PRINTED_RULES};

use super::{Anchor, AnchorKind, BlockReturn, RuleSet, StatePolicy, Timeouts};

/// The `set timeout` names, in pfctl's order.
const TIMEOUTS: [&str; 19] = [
    "tcp.first",
    "tcp.opening",
    "tcp.established",
    "tcp.closing",
    "tcp.finwait",
    "tcp.closed",
    "udp.first",
    "udp.single",
    "udp.multiple",
    "icmp.first",
    "icmp.error",
    "other.first",
    "other.single",
    "other.multiple",
    "frag",
    "interval",
    "adaptive.start",
    "adaptive.end",
    "src.track",
];

impl RuleSet {
    /// The text `pfctl -nvf` would print for this rule set (see the module documentation),
    /// one statement per line. `iface_names`: the interfaces by port index.
    pub fn to_pf_text(&self, iface_names: &[&str]) -> Result<String, ExpansionTooLarge> {
        let x = self.expanded(iface_names)?;
        let mut out = x.option_lines(iface_names);
        out.extend(x.table_lines());
        out.extend(x.scrub.iter().map(|r| line::scrub(&x, r, iface_names)));
        out.extend(x.nat_lines(iface_names));
        out.extend(x.filter_lines(iface_names));
        Ok(out.iter().map(|l| format!("{l}\n")).collect())
    }

    /// The `set` statements of the options that differ from pf's defaults.
    fn option_lines(&self, names: &[&str]) -> Vec<String> {
        let limits = [
            ("states", self.limit_states, super::DEFAULT_LIMIT_STATES),
            ("src-nodes", self.limit_src_nodes, super::DEFAULT_LIMIT_SRC_NODES),
            ("frags", self.limit_frags, super::DEFAULT_LIMIT_FRAGS),
        ];
        let mut out: Vec<String> = limits
            .iter()
            .filter(|(_, v, d)| v != d)
            .map(|(n, v, _)| format!("set limit {n} {v}"))
            .collect();
        out.extend(self.limit_table_entries.map(|n| format!("set limit table-entries {n}")));
        out.extend(self.timeout_lines());
        if self.state_policy == StatePolicy::IfBound {
            out.push("set state-policy if-bound".into());
        }
        if self.block_policy == Some(BlockReturn::RETURN) {
            out.push("set block-policy return".into());
        }
        out.extend(self.skip.iter().map(|&i| format!("set skip on {}", words::iface(names, i))));
        if self.keep_counters {
            out.push("set keepcounters".into());
        }
        out
    }

    /// `set timeout` for each timeout off its default: pf's, with the adaptive ones derived
    /// from `set limit states` as pfctl does. Both adaptive ones are printed if either is
    /// off: one written stops the derivation of the other.
    fn timeout_lines(&self) -> Vec<String> {
        let mut defaults = Timeouts::default();
        defaults.adapt_to_limit(self.limit_states);
        let value = |t: Timeouts, name: &str| {
            let mut t = t;
            t.get_mut(name).map(|v| *v)
        };
        let off = |name: &str| value(self.timeouts, name) != value(defaults, name);
        let adaptive = off("adaptive.start") || off("adaptive.end");
        TIMEOUTS
            .iter()
            .filter(|n| off(n) || (adaptive && n.starts_with("adaptive.")))
            .filter_map(|n| value(self.timeouts, n).map(|v| format!("set timeout {n} {v}")))
            .collect()
    }

    /// `table <name> [const] { entries }` for the tables the file defines or names (those
    /// linerate makes for interfaces and host names are made again by the rules naming
    /// them).
    fn table_lines(&self) -> Vec<String> {
        let entry = |e: &super::TableEntry| {
            format!("{}{}", if e.negated { "!" } else { "" }, words::prefix(&e.prefix))
        };
        self.tables
            .iter()
            .filter(|t| !words::table_is_made(&t.name))
            .map(|t| {
                let konst = if t.constant { " const" } else { "" };
                let entries: Vec<String> = t.entries.iter().map(entry).collect();
                if entries.is_empty() {
                    format!("table <{}>{konst}", t.name)
                } else {
                    format!("table <{}>{konst} {{ {} }}", t.name, entries.join(" "))
                }
            })
            .collect()
    }

    /// The translation rules in linerate's order (which decides, as the file's order),
    /// `nat-anchor`, `rdr-anchor` and `binat-anchor` where they stand.
    fn nat_lines(&self, names: &[&str]) -> Vec<String> {
        let anchors: Vec<&Anchor> =
            self.anchors.iter().filter(|a| a.kind != AnchorKind::Filter).collect();
        let mut out = Vec::new();
        for i in 0..=self.nat.len() {
            let here = anchors.iter().filter(|a| a.start.min(self.nat.len()) == i);
            out.extend(here.map(|a| format!("{} \"{}\" all", a.kind.keyword(), a.name)));
            out.extend(self.nat.get(i).map(|r| line::nat(self, r, names)));
        }
        out
    }

    /// The filter rules, nested in their anchors.
    fn filter_lines(&self, names: &[&str]) -> Vec<String> {
        let indent = |depth: usize| "  ".repeat(depth);
        filter_items(self.rules.len(), &self.anchors)
            .into_iter()
            .map(|(depth, item)| match item {
                Item::Rule(i) => format!(
                    "{}{}",
                    indent(depth),
                    self.rules.get(i).map(|r| line::filter(self, r, names)).unwrap_or_default()
                ),
                Item::Anchor(a, opens) => {
                    let name = self.anchors.get(a).map_or("", |a| a.name.as_str());
                    format!(
                        "{}anchor \"{name}\" all{}",
                        indent(depth),
                        if opens { " {" } else { "" }
                    )
                }
                Item::End => format!("{}}}", indent(depth)),
            })
            .collect()
    }
}

/// A line of the filter section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// Rule `i` of [`RuleSet::rules`].
    Rule(usize),
    /// Anchor `i` of [`RuleSet::anchors`]; `true` when a block of rules follows (`{`).
    Anchor(usize, bool),
    /// The `}` that closes an anchor's block.
    End,
}

/// The filter section of `n` rules and `anchors` in order, each line with its depth (the
/// anchors it is inside), as pfctl nests them. Anchors are in file order, an anchor before
/// the ones inside it, so their depths give the nesting; what does not fit is printed
/// flat rather than refused.
fn filter_items(n: usize, anchors: &[Anchor]) -> Vec<(usize, Item)> {
    let filter: Vec<(usize, &Anchor)> =
        anchors.iter().enumerate().filter(|(_, a)| a.kind == AnchorKind::Filter).collect();
    let mut out = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut next = 0;
    let rules_to = |out: &mut Vec<(usize, Item)>, next: &mut usize, end: usize, depth: usize| {
        while *next < end.min(n) {
            out.push((depth, Item::Rule(*next)));
            *next += 1;
        }
    };
    for (k, &(i, a)) in filter.iter().enumerate() {
        while open.len() > a.depth {
            let end = open.pop().unwrap_or(n);
            rules_to(&mut out, &mut next, end, open.len() + 1);
            out.push((open.len(), Item::End));
        }
        rules_to(&mut out, &mut next, a.start, open.len());
        let holds = a.start < a.end || filter.get(k + 1).is_some_and(|(_, b)| b.depth > a.depth);
        out.push((open.len(), Item::Anchor(i, holds)));
        if holds {
            open.push(a.end);
        }
    }
    while let Some(end) = open.pop() {
        rules_to(&mut out, &mut next, end, open.len() + 1);
        out.push((open.len(), Item::End));
    }
    rules_to(&mut out, &mut next, n, 0);
    out
}

/// Each filter rule's number in its rule set (the main one or its anchor's), pf's `$nr`:
/// anchors count as rules of the set they stand in.
fn filter_numbers(n: usize, anchors: &[Anchor]) -> Vec<usize> {
    let mut numbers = vec![0; n];
    let mut counters = vec![0usize];
    for (_, item) in filter_items(n, anchors) {
        let top = counters.len() - 1;
        match item {
            Item::Rule(i) => {
                if let Some(slot) = numbers.get_mut(i) {
                    *slot = counters[top];
                }
                counters[top] += 1;
            }
            Item::Anchor(_, opens) => {
                counters[top] += 1;
                if opens {
                    counters.push(0);
                }
            }
            Item::End => {
                if counters.len() > 1 {
                    counters.pop();
                }
            }
        }
    }
    numbers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchor(depth: usize, start: usize, end: usize) -> Anchor {
        Anchor { kind: AnchorKind::Filter, name: "a".into(), depth, start, end }
    }

    fn rules_of(items: &[(usize, Item)]) -> Vec<usize> {
        items
            .iter()
            .filter_map(|&(_, i)| if let Item::Rule(r) = i { Some(r) } else { None })
            .collect()
    }

    /// Anchors that no parse makes (depths that jump, places past the rules, ends before
    /// starts) still print every rule once, in order, with balanced braces.
    #[test]
    fn any_anchor_list_prints_each_rule_once() {
        let odd = [
            vec![anchor(3, 1, 2)],
            vec![anchor(0, 5, 9), anchor(1, 2, 1)],
            vec![anchor(0, 2, 1), anchor(0, 0, 4), anchor(2, 1, 3), anchor(1, 9, 9)],
        ];
        for anchors in odd {
            let items = filter_items(4, &anchors);
            assert_eq!(rules_of(&items), [0, 1, 2, 3], "{anchors:?}");
            let opened = items.iter().filter(|(_, i)| matches!(i, Item::Anchor(_, true))).count();
            let closed = items.iter().filter(|(_, i)| *i == Item::End).count();
            assert_eq!(opened, closed, "{anchors:?}");
            assert_eq!(filter_numbers(4, &anchors).len(), 4);
        }
    }

    #[test]
    fn numbers_count_anchors_in_the_set_they_stand_in() {
        // rule 0, anchor { rule 1, rule 2 }, rule 3
        let items = filter_items(4, &[anchor(0, 1, 3)]);
        assert_eq!(
            items,
            [
                (0, Item::Rule(0)),
                (0, Item::Anchor(0, true)),
                (1, Item::Rule(1)),
                (1, Item::Rule(2)),
                (0, Item::End),
                (0, Item::Rule(3))
            ]
        );
        assert_eq!(filter_numbers(4, &[anchor(0, 1, 3)]), [0, 0, 1, 2]);
    }
}
