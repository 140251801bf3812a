//! What the tests of the printed rule set (`RuleSet::to_pf_text`) share: the roundtrip check
//! (print, parse the text back, print again) and a rule set's canonical form for comparing
//! two parses of different texts (table and tag numbers follow the order a file names them
//! in, lines are where the rule stood).

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::path::Path;

use fw::rules::{AddrMatch, AddrTarget, RuleSet, parse_with_addresses};

/// Interfaces by name in port order, with their addresses.
pub struct Ifaces {
    pub names: Vec<String>,
    pub addresses: Vec<(String, Vec<(IpAddr, u8)>)>,
    /// The port `egress` stands for, if any.
    pub egress: Option<u16>,
}

impl Ifaces {
    /// `lr-wan` and `lr-lan` with pfSense's fixture addresses.
    pub fn wan_lan() -> Ifaces {
        let a = |s: &str| s.parse::<IpAddr>().expect("address");
        Ifaces {
            names: vec!["lr-wan".into(), "lr-lan".into()],
            addresses: vec![
                ("lr-wan".into(), vec![(a("198.18.0.1"), 24), (a("2001:db8:18::1"), 64)]),
                ("lr-lan".into(), vec![(a("10.0.0.1"), 24), (a("fd00:10::1"), 64)]),
            ],
            egress: Some(0),
        }
    }

    pub fn port(&self, name: &str) -> Option<u16> {
        let named = self.names.iter().position(|n| n == name).map(|i| i as u16);
        named.or(if name == "egress" { self.egress } else { None })
    }

    pub fn name_refs(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }

    /// The addresses, `egress` among them as the interface it stands for.
    fn with_egress(&self) -> Vec<(String, Vec<(IpAddr, u8)>)> {
        let mut all = self.addresses.clone();
        if let Some(e) = self.egress.and_then(|e| self.addresses.get(usize::from(e))) {
            all.push(("egress".into(), e.1.clone()));
        }
        all
    }

    pub fn parse(&self, text: &str, path: &Path) -> Result<RuleSet, String> {
        parse_with_addresses(text, path, &|n| self.port(n), &self.with_egress())
            .map_err(|e| e.to_string())
    }
}

/// Prints `rs`, parses the text back and prints that: the two texts must be the same, and
/// the reparsed rule set the expanded `rs` (in canonical form). Returns the text.
pub fn roundtrip(rs: &RuleSet, ifaces: &Ifaces, path: &Path) -> String {
    let names = ifaces.name_refs();
    let text = rs.to_pf_text(&names).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let back = ifaces.parse(&text, path).unwrap_or_else(|e| {
        panic!("{}: the printed text does not parse: {e}\n{text}", path.display())
    });
    let again = back.to_pf_text(&names).expect("prints");
    assert_eq!(text, again, "{}: printed twice differs", path.display());
    let expanded = rs.expanded(&names).expect("expands");
    assert_eq!(expanded.rules.len(), back.rules.len(), "{}: filter rules", path.display());
    assert_eq!(expanded.nat.len(), back.nat.len(), "{}: translation rules", path.display());
    assert_eq!(expanded.scrub.len(), back.scrub.len(), "{}: scrub rules", path.display());
    assert_eq!(
        canonical(&expanded),
        canonical(&back),
        "{}: the reparsed rule set differs\n{text}",
        path.display()
    );
    assert_eq!(
        expanded.expanded(&names).expect("expands"),
        expanded,
        "{}: expanding twice changes it",
        path.display()
    );
    text
}

/// Whether a table is one linerate makes for interface addresses or host names.
fn made(name: &str) -> bool {
    name.starts_with('(') || name.ends_with(" (/etc/hosts)")
}

fn addr_tables(m: &mut AddrMatch, f: &mut impl FnMut(&mut usize)) {
    if let AddrMatch::List(items) = m {
        for i in items {
            if let AddrTarget::Table(t) = &mut i.target {
                f(t);
            }
        }
    }
}

/// Every table reference of `rs`, to `f`.
fn each_table_ref(rs: &mut RuleSet, mut f: impl FnMut(&mut usize)) {
    for r in &mut rs.rules {
        addr_tables(&mut r.src, &mut f);
        addr_tables(&mut r.dst, &mut f);
        if let Some(o) = r.src_track.as_mut().and_then(|s| s.overload.as_mut()) {
            f(&mut o.table);
        }
    }
    for r in &mut rs.nat {
        addr_tables(&mut r.src, &mut f);
        addr_tables(&mut r.dst, &mut f);
    }
    for r in &mut rs.scrub {
        addr_tables(&mut r.src, &mut f);
        addr_tables(&mut r.dst, &mut f);
    }
}

/// `rs` with what two parses of equivalent texts may differ in set aside: positions and
/// notices; tables and tags renumbered by name (tables linerate made that no rule names
/// left out, as a reparse does not make them).
pub fn canonical(rs: &RuleSet) -> RuleSet {
    let mut rs = rs.clone();
    rs.notices.clear();
    rs.rules.iter_mut().for_each(|r| r.line = 0);
    rs.nat.iter_mut().for_each(|r| (r.line, r.column) = (0, 0));
    rs.scrub.iter_mut().for_each(|r| r.line = 0);
    let mut used = BTreeSet::new();
    each_table_ref(&mut rs, |t| {
        used.insert(*t);
    });
    let mut kept: Vec<(usize, fw::rules::Table)> = rs
        .tables
        .iter()
        .cloned()
        .enumerate()
        .filter(|(i, t)| !made(&t.name) || used.contains(i))
        .collect();
    kept.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    let renumber: HashMap<usize, usize> =
        kept.iter().enumerate().map(|(new, (old, _))| (*old, new)).collect();
    each_table_ref(&mut rs, |t| *t = renumber.get(t).copied().unwrap_or(usize::MAX));
    rs.tables = kept.into_iter().map(|(_, t)| t).collect();
    canonical_tags(&mut rs);
    rs
}

/// Tag ids renumbered in the order of their names, unused names left out.
fn canonical_tags(rs: &mut RuleSet) {
    let name = |id: u8| rs.tags.get(usize::from(id) - 1).cloned().unwrap_or_default();
    let used: BTreeSet<String> =
        rs.rules.iter().flat_map(|r| [r.tag, r.tagged.map(|t| t.1)]).flatten().map(name).collect();
    let ids: HashMap<String, u8> =
        used.iter().enumerate().map(|(i, n)| (n.clone(), i as u8 + 1)).collect();
    let old = rs.tags.clone();
    let new_id = |id: u8| ids.get(&old[usize::from(id) - 1]).copied().unwrap_or(0);
    for r in &mut rs.rules {
        r.tag = r.tag.map(new_id);
        r.tagged = r.tagged.map(|(neg, id)| (neg, new_id(id)));
    }
    rs.tags = used.into_iter().collect();
}
