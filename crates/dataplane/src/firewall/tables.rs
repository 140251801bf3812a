//! pfctl's `-t TABLE -T add|delete|flush|replace` on the running rules (`linerate table`):
//! the table's entries change, the rules do not. As with `overload` (`overload.rs`), the
//! change is made off the packet path on a copy of the rule set, compiled again and
//! published like a reload, sharing the set's limits, source nodes and rule counters (the
//! counts go on). The entries last until the rule file is loaded again, which defines the
//! tables anew, as `pfctl -f` does.

use fw::rules::{Table, TableEntry};

use super::{CompiledRules, RulesSlot};

/// pf's default `set limit table-entries`: what the tables may hold in all after a change,
/// unless the rule file sets its own limit or already holds more.
pub const DEFAULT_TABLE_ENTRIES: usize = 200_000;

/// A change to one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableOp {
    /// Adds the entries it lacks (an entry already there with the other sign changes sign).
    Add(Vec<TableEntry>),
    /// Removes the entries with these prefixes.
    Delete(Vec<TableEntry>),
    /// Removes every entry.
    Flush,
    /// Makes these the table's entries.
    Replace(Vec<TableEntry>),
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableChange {
    pub added: usize,
    pub deleted: usize,
    /// Entries in the table afterwards.
    pub entries: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    #[error("no table <{0}> in the running rules")]
    Unknown(String),
    #[error("table <{0}> is const (or made by linerate) and cannot be changed while the rules run")]
    Constant(String),
    #[error(
        "the tables would hold {total} entries, above the limit of {limit} (`set limit table-entries`)"
    )]
    TooMany { total: usize, limit: usize },
    #[error("the rules with the new entries do not compile: {0}")]
    Compile(String),
    #[error("publishing the new entries: {0}")]
    Publish(String),
}

/// Applies `op` to `t`; what it did.
fn apply(t: &mut Table, op: TableOp) -> TableChange {
    let before = t.entries.len();
    let mut c = TableChange::default();
    match op {
        TableOp::Add(entries) => {
            for e in entries {
                match t.entries.iter_mut().find(|x| x.prefix == e.prefix) {
                    Some(x) if x.negated == e.negated => {}
                    Some(x) => {
                        x.negated = e.negated;
                        c.added += 1;
                    }
                    None => {
                        t.entries.push(e);
                        c.added += 1;
                    }
                }
            }
        }
        TableOp::Delete(entries) => {
            t.entries.retain(|x| !entries.iter().any(|e| e.prefix == x.prefix));
            c.deleted = before - t.entries.len();
        }
        TableOp::Flush => {
            t.entries.clear();
            c.deleted = before;
        }
        TableOp::Replace(mut entries) => {
            entries.dedup_by(|a, b| a.prefix == b.prefix);
            c.added = entries.iter().filter(|e| !t.entries.contains(e)).count();
            c.deleted = t.entries.iter().filter(|x| !entries.contains(x)).count();
            t.entries = entries;
        }
    }
    c.entries = t.entries.len();
    c
}

impl RulesSlot {
    /// Changes table `name` of the running rules and publishes them (nothing is published if
    /// nothing changed). One change at a time, and none while overloads are applied; a
    /// reload published meanwhile has the change made again on its rules.
    pub fn change_table(&self, name: &str, op: TableOp) -> Result<TableChange, TableError> {
        let _one = self.overloading.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(change) = self.try_change_table(name, op.clone())? {
                return Ok(change);
            }
        }
    }

    /// [`change_table`](Self::change_table) on the rules running now; `None` if a reload
    /// replaced them before the change could be published.
    fn try_change_table(&self, name: &str, op: TableOp) -> Result<Option<TableChange>, TableError> {
        let cur = self.current();
        let mut rules = cur.rules.clone();
        let held: usize = rules.tables.iter().map(|t| t.entries.len()).sum();
        let limit = rules
            .limit_table_entries
            .map_or(DEFAULT_TABLE_ENTRIES.max(held), |l| usize::try_from(l).unwrap_or(usize::MAX));
        let t = rules
            .tables
            .iter_mut()
            .find(|t| t.name == name)
            .ok_or_else(|| TableError::Unknown(name.into()))?;
        if t.constant {
            return Err(TableError::Constant(name.into()));
        }
        let was = t.entries.len();
        let change = apply(t, op);
        let total = held - was + change.entries;
        if total > limit && total > held {
            return Err(TableError::TooMany { total, limit });
        }
        if change.added + change.deleted == 0 {
            return Ok(Some(change));
        }
        let new = cur.derived(rules).map_err(|e| TableError::Compile(e.to_string()))?;
        let published = self
            .publish_derived(&cur, std::sync::Arc::new(new), Vec::new())
            .map_err(|e| TableError::Publish(e.to_string()))?;
        Ok(published.then_some(change))
    }

    /// Table `name` of the running rules.
    pub fn table(&self, name: &str) -> Option<Table> {
        self.current().rules.tables.iter().find(|t| t.name == name).cloned()
    }
}

impl CompiledRules {
    /// Whether the running rules' table `name` holds `addr` (pf's `-T test`): its most
    /// specific entry covering the address is not negated.
    pub fn table_test(&self, name: &str, af: fw::packet::Af, addr: u128) -> Option<bool> {
        Some(self.rules.tables.iter().find(|t| t.name == name)?.contains(af, addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fw::packet::Af;

    fn e(s: &str) -> TableEntry {
        let (negated, s) = s.strip_prefix('!').map_or((false, s), |r| (true, r));
        TableEntry { negated, prefix: fw::rules::parse_prefix(s).unwrap() }
    }

    fn table(entries: &[&str]) -> Table {
        Table { name: "t".into(), entries: entries.iter().map(|s| e(s)).collect(), constant: false }
    }

    /// A change made on rules that a reload replaced meanwhile is not published over the
    /// reload: `change_table` makes it again on the new rules.
    #[test]
    fn a_reload_in_between_wins() {
        let set = |t: &str| {
            std::sync::Arc::new(
                CompiledRules::parse(
                    &format!("table <t> persist {{ {t} }}\nblock in from <t>\n"),
                    std::path::Path::new("t.conf"),
                    &|_| None,
                )
                .unwrap(),
            )
        };
        let slot = RulesSlot::new(set("10.0.0.1"));
        let stale = slot.current();
        slot.publish(set("10.0.0.2")).unwrap();
        let derived = std::sync::Arc::new(stale.derived(stale.rules.clone()).unwrap());
        assert!(!slot.publish_derived(&stale, derived, Vec::new()).unwrap());
        assert_eq!(slot.table("t").unwrap().entries, [e("10.0.0.2")], "the reload's table stays");
        assert_eq!(slot.change_table("t", TableOp::Add(vec![e("10.0.0.3")])).unwrap().entries, 2);
        assert_eq!(slot.table("t").unwrap().entries, [e("10.0.0.2"), e("10.0.0.3")]);
    }

    #[test]
    fn add_delete_flush_replace_count_as_pfctl() {
        let mut t = table(&["10.0.0.0/8"]);
        let c =
            apply(&mut t, TableOp::Add(vec![e("10.0.0.0/8"), e("192.0.2.1"), e("!10.1.0.0/16")]));
        assert_eq!((c.added, c.deleted, c.entries), (2, 0, 3));
        assert!(
            t.contains(Af::Inet, 0xc000_0201)
                && !t.contains(Af::Inet, 0x0a01_0001)
                && t.contains(Af::Inet, 0x0a02_0001)
        );
        assert_eq!(
            apply(&mut t, TableOp::Add(vec![e("10.1.0.0/16")])),
            TableChange { added: 1, deleted: 0, entries: 3 },
            "a sign changes"
        );
        assert_eq!(
            apply(&mut t, TableOp::Delete(vec![e("192.0.2.1"), e("198.51.100.1")])),
            TableChange { added: 0, deleted: 1, entries: 2 }
        );
        let c = apply(
            &mut t,
            TableOp::Replace(vec![e("10.0.0.0/8"), e("2001:db8::/32"), e("2001:db8::/32")]),
        );
        assert_eq!((c.added, c.deleted, c.entries), (1, 1, 2));
        assert_eq!(apply(&mut t, TableOp::Flush), TableChange { added: 0, deleted: 2, entries: 0 });
        assert_eq!(t.entries, Vec::<TableEntry>::new());
    }
}
