//! Phase 0 of the RFC engine for the address fields: per family, the class of an address
//! is that of the most specific rule prefix or table entry containing it, looked up in
//! sorted elementary intervals or an LPM table, with host routes in an exact-match map.

use std::collections::{HashMap, HashSet};

use super::fields::{common_rules, rules_of};
use super::join::mix;
use super::sets::{Budget, RSet, Space};
use crate::classifier::{BuildError, BuildOptions};
use crate::packet::Af;
use crate::rules::{AddrMatch, AddrTarget, Prefix, Rule, RuleSet};

/// Exact-match map for host routes (/32, /128): open addressing, u128 keys.
pub(crate) struct HostMap {
    pub(crate) keys: Vec<u128>,
    pub(crate) vals: Vec<u32>,
    /// Value of the key equal to the EMPTY sentinel (the all-ones v6 address).
    pub(crate) max_val: Option<u32>,
    pub(crate) shift: u32,
    pub(crate) len: usize,
    /// One bit per IPv4 /24 (per hashed IPv6 /64): whether a host may be in it. Traffic
    /// outside the hosts' /24s then costs a read in this 2 MiB bitmap (cache-friendly for
    /// clustered traffic) instead of a random probe in the map.
    pub(crate) filter: Vec<u64>,
    pub(crate) v6: bool,
}

impl HostMap {
    const EMPTY: u128 = u128::MAX;

    #[inline]
    pub(crate) fn filter_index(v6: bool, k: u128) -> usize {
        if v6 { (mix((k >> 64) as u64) >> 40) as usize } else { ((k >> 8) & 0xff_ffff) as usize }
    }

    pub(crate) fn new(items: &[(u128, u32)], v6: bool) -> HostMap {
        let cap = (items.len() * 2).next_power_of_two().max(2);
        let mut m = HostMap {
            keys: vec![Self::EMPTY; cap],
            vals: vec![0; cap],
            max_val: None,
            shift: 64 - cap.trailing_zeros(),
            len: items.len(),
            filter: vec![0u64; (1 << 24) / 64],
            v6,
        };
        for &(k, v) in items {
            let f = Self::filter_index(v6, k);
            m.filter[f / 64] |= 1 << (f % 64);
            if k == Self::EMPTY {
                m.max_val = Some(v);
                continue;
            }
            let mut i = m.slot(k);
            while m.keys[i] != Self::EMPTY {
                i = (i + 1) & (cap - 1);
            }
            m.keys[i] = k;
            m.vals[i] = v;
        }
        m
    }

    #[inline]
    pub(crate) fn slot(&self, k: u128) -> usize {
        (mix((k as u64) ^ ((k >> 64) as u64).rotate_left(17)) >> self.shift) as usize
    }

    /// Inlined up to the filter test, which is all that traffic away from the hosts costs;
    /// the probe is a call.
    #[inline(always)]
    pub(crate) fn get(&self, k: u128) -> Option<u32> {
        let f = Self::filter_index(self.v6, k);
        if self.filter[f / 64] & (1 << (f % 64)) == 0 {
            return None;
        }
        self.probe(k)
    }

    #[inline(never)]
    pub(crate) fn probe(&self, k: u128) -> Option<u32> {
        if k == Self::EMPTY {
            return self.max_val;
        }
        let mask = self.keys.len() - 1;
        let mut i = self.slot(k);
        loop {
            let x = self.keys[i];
            if x == k {
                return Some(self.vals[i]);
            }
            if x == Self::EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }
}

pub(crate) enum Rest {
    Const(u32),
    Intervals {
        starts: Vec<u128>,
        classes: Vec<u32>,
    },
    /// At most 4 IPv4 intervals, padded with copies of the last one (start and class): the
    /// interval is found by counting the starts <= the address, without branches.
    Small4 {
        starts: [u32; 4],
        classes: [u32; 4],
    },
    /// IPv4 intervals: 32-bit starts (cheaper compares, 4x denser than u128).
    Intervals4 {
        starts: Vec<u32>,
        classes: Vec<u32>,
    },
    V4 {
        lpm: lpm::Ipv4Lpm,
        root: u32,
    },
    V6 {
        lpm: lpm::Ipv6Lpm,
        root: u32,
    },
}

/// Address -> class for one family: host routes in an exact-match map (when numerous),
/// the other prefixes in intervals or an LPM table.
pub(crate) struct AddrLookup {
    pub(crate) hosts: Option<HostMap>,
    pub(crate) rest: Rest,
}

impl AddrLookup {
    #[inline(always)]
    pub(crate) fn lookup(&self, addr: u128) -> u32 {
        if let Some(h) = &self.hosts
            && let Some(c) = h.get(addr)
        {
            return c;
        }
        match &self.rest {
            Rest::Const(c) => *c,
            Rest::Intervals { starts, classes } => {
                let i = starts.partition_point(|&s| s <= addr);
                classes[i - 1]
            }
            Rest::Small4 { starts, classes } => {
                let a = addr as u32;
                let n: usize = starts.iter().map(|&s| usize::from(s <= a)).sum();
                // starts[0] == 0, so n >= 1; the padding repeats the last interval.
                classes[n.wrapping_sub(1) & 3]
            }
            Rest::Intervals4 { starts, classes } => {
                let a = addr as u32;
                let i = starts.partition_point(|&s| s <= a);
                classes[i - 1]
            }
            Rest::V4 { lpm, root } => lpm.lookup(addr as u32).unwrap_or(*root),
            Rest::V6 { lpm, root } => lpm.lookup(addr).unwrap_or(*root),
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.hosts.as_ref().map_or(0, |h| h.keys.len() * 20 + h.filter.len() * 8)
            + match &self.rest {
                Rest::Const(_) => 0,
                Rest::Intervals { starts, .. } => starts.len() * 20,
                Rest::Intervals4 { starts, .. } => starts.len() * 8,
                Rest::Small4 { .. } => 32,
                Rest::V4 { lpm, .. } => lpm.memory_bytes(),
                Rest::V6 { lpm, .. } => lpm.memory_bytes(),
            }
    }

    pub(crate) fn uses_lpm(&self) -> bool {
        matches!(self.rest, Rest::V4 { .. } | Rest::V6 { .. })
    }
}

pub(crate) struct AddrField {
    pub(crate) v4: AddrLookup,
    pub(crate) v6: AddrLookup,
}

impl AddrField {
    #[inline(always)]
    pub(crate) fn lookup(&self, af: Af, addr: u128) -> u32 {
        match af {
            Af::Inet => self.v4.lookup(addr & 0xffff_ffff),
            Af::Inet6 => self.v6.lookup(addr),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Pred {
    Prefix(Prefix),
    Table(usize),
}

#[derive(Clone, Copy)]
pub(crate) enum Effect {
    Direct(u32),
    Table(u32, bool),
}

/// Phase 0 for one address field (`get` picks it from a rule): its classes, and for each
/// family the lookup from an address to its class.
pub(crate) fn build_addr(
    rs: &RuleSet,
    get: impl Fn(&Rule) -> &AddrMatch,
    opts: &BuildOptions,
    budget: &mut Budget,
    what: &str,
) -> Result<(AddrField, Space), BuildError> {
    let mut space = Space::new(common_rules(rs, |r| matches!(get(r), AddrMatch::Any)));
    let sigs = signatures(rs, &get);
    let mut classes = Classes::new(&sigs);
    let mut lookups = Vec::new();
    for fam in [Af::Inet, Af::Inet6] {
        classes.start_family(fam);
        let mut nodes = family_nodes(rs, &sigs.preds, fam);
        budget.charge(nodes.len() * 48, what)?;
        nodes.sort_by_key(|n| (n.0, n.1));
        let root = classes.class_of(&Vec::new(), &mut space, budget, what)?;
        let inserted = classes.prefix_classes(&nodes, root, &mut space, budget, what)?;
        drop(nodes);
        lookups.push(addr_lookup(fam, root, &inserted, opts, budget, what)?);
    }
    let v6 = lookups.pop().expect("v6");
    let v4 = lookups.pop().expect("v4");
    Ok((AddrField { v4, v6 }, space))
}

/// A rule's address items as `(negated, predicate id)`, sorted: rules with the same
/// signature match the same addresses.
type Sig = Vec<(bool, u32)>;

/// The distinct predicates (prefixes, tables) of a field's rules, and its rules grouped by
/// signature.
struct Signatures {
    preds: Vec<Pred>,
    sigs: Vec<Sig>,
    /// The rules of each signature.
    sig_rules: Vec<RSet>,
}

fn signatures(rs: &RuleSet, get: &impl Fn(&Rule) -> &AddrMatch) -> Signatures {
    let mut pred_ids: HashMap<Pred, u32> = HashMap::new();
    let mut preds: Vec<Pred> = Vec::new();
    let mut sig_ids: HashMap<Sig, u32> = HashMap::new();
    let mut sigs: Vec<Sig> = Vec::new();
    let mut sig_rules: Vec<RSet> = Vec::new();
    for (i, r) in rs.rules.iter().enumerate() {
        let AddrMatch::List(items) = get(r) else {
            continue;
        };
        let mut sig: Sig = items
            .iter()
            .map(|it| {
                let p = match it.target {
                    AddrTarget::Prefix(p) => Pred::Prefix(p),
                    AddrTarget::Table(t) => Pred::Table(t),
                };
                let next = preds.len() as u32;
                let id = *pred_ids.entry(p).or_insert_with(|| {
                    preds.push(p);
                    next
                });
                (it.negated, id)
            })
            .collect();
        sig.sort_unstable();
        sig.dedup();
        let next = sigs.len() as u32;
        let id = *sig_ids.entry(sig.clone()).or_insert_with(|| {
            sigs.push(sig);
            sig_rules.push(Vec::new());
            next
        });
        sig_rules[id as usize].push(i as u32);
    }
    Signatures { preds, sigs, sig_rules }
}

/// The prefixes of family `fam` that change which predicates hold: the rules' own prefixes,
/// and the tables' entries (a negated entry takes its table's predicate away).
fn family_nodes(rs: &RuleSet, preds: &[Pred], fam: Af) -> Vec<(u128, u8, Effect)> {
    let mut nodes: Vec<(u128, u8, Effect)> = Vec::new();
    for (pid, p) in preds.iter().enumerate() {
        match *p {
            Pred::Prefix(x) if x.af == fam => {
                nodes.push((x.addr, x.len, Effect::Direct(pid as u32)))
            }
            Pred::Prefix(_) => {}
            Pred::Table(t) => {
                for e in &rs.tables[t].entries {
                    if e.prefix.af == fam {
                        nodes.push((
                            e.prefix.addr,
                            e.prefix.len,
                            Effect::Table(pid as u32, !e.negated),
                        ));
                    }
                }
            }
        }
    }
    nodes
}

/// The classes of predicate vectors (the sorted predicates true of an address): the rules
/// of the signatures such a vector satisfies.
struct Classes<'a> {
    sigs: &'a Signatures,
    /// Per predicate, the signatures that list it un-negated.
    pos_index: Vec<Vec<u32>>,
    /// The signatures with a negated item.
    neg_sigs: Vec<u32>,
    /// The class of a set of satisfied signatures, for both families.
    by_sigset: HashMap<Vec<u32>, u32>,
    /// The family being built, and the class of each of its vectors seen so far.
    fam: Af,
    by_vector: HashMap<Vec<u32>, u32>,
}

impl<'a> Classes<'a> {
    fn new(sigs: &'a Signatures) -> Self {
        let mut pos_index: Vec<Vec<u32>> = vec![Vec::new(); sigs.preds.len()];
        let mut neg_sigs: Vec<u32> = Vec::new();
        for (s, sig) in sigs.sigs.iter().enumerate() {
            for &(neg, p) in sig {
                if !neg {
                    pos_index[p as usize].push(s as u32);
                }
            }
            if sig.iter().any(|x| x.0) {
                neg_sigs.push(s as u32);
            }
        }
        Classes {
            sigs,
            pos_index,
            neg_sigs,
            by_sigset: HashMap::new(),
            fam: Af::Inet,
            by_vector: HashMap::new(),
        }
    }

    fn start_family(&mut self, fam: Af) {
        self.fam = fam;
        self.by_vector = HashMap::new();
    }

    /// The class of predicate vector `v`.
    fn class_of(
        &mut self,
        v: &Vec<u32>,
        space: &mut Space,
        budget: &mut Budget,
        what: &str,
    ) -> Result<u32, BuildError> {
        if let Some(&c) = self.by_vector.get(v) {
            return Ok(c);
        }
        let (preds, fam) = (&self.sigs.preds, self.fam);
        // A negated item of another family's prefix never matches (see docs/firewall.md).
        let compatible = |p: u32| match preds[p as usize] {
            Pred::Table(_) => true,
            Pred::Prefix(x) => x.af == fam,
        };
        let mut matched: Vec<u32> =
            v.iter().flat_map(|&p| self.pos_index[p as usize].iter().copied()).collect();
        for &s in &self.neg_sigs {
            if self.sigs.sigs[s as usize]
                .iter()
                .any(|&(neg, p)| neg && compatible(p) && v.binary_search(&p).is_err())
            {
                matched.push(s);
            }
        }
        matched.sort_unstable();
        matched.dedup();
        let c = match self.by_sigset.get(&matched) {
            Some(&c) => c,
            None => {
                let c = space.id(rules_of(&matched, &self.sigs.sig_rules), budget, what)?;
                self.by_sigset.insert(matched, c);
                c
            }
        };
        self.by_vector.insert(v.clone(), c);
        Ok(c)
    }

    /// Walks the sorted `nodes` as nested prefixes (a stack of the enclosing ones) and
    /// returns each prefix whose class differs from its parent's, with that class.
    fn prefix_classes(
        &mut self,
        nodes: &[(u128, u8, Effect)],
        root: u32,
        space: &mut Space,
        budget: &mut Budget,
        what: &str,
    ) -> Result<Vec<(Prefix, u32)>, BuildError> {
        let fam = self.fam;
        let mut stack: Vec<(u128, Vec<u32>, u32)> = Vec::new(); // (last addr, vector, class)
        let mut inserted: Vec<(Prefix, u32)> = Vec::new();
        let mut k = 0;
        while k < nodes.len() {
            let (addr, len) = (nodes[k].0, nodes[k].1);
            let p = Prefix { af: fam, addr, len };
            while stack.last().is_some_and(|t| addr > t.0) {
                stack.pop();
            }
            let (mut v, parent) = match stack.last() {
                Some(t) => (t.1.clone(), t.2),
                None => (Vec::new(), root),
            };
            while k < nodes.len() && nodes[k].0 == addr && nodes[k].1 == len {
                match nodes[k].2 {
                    Effect::Direct(pid) | Effect::Table(pid, true) => {
                        if let Err(i) = v.binary_search(&pid) {
                            v.insert(i, pid);
                        }
                    }
                    Effect::Table(pid, false) => {
                        if let Ok(i) = v.binary_search(&pid) {
                            v.remove(i);
                        }
                    }
                }
                k += 1;
            }
            let c = self.class_of(&v, space, budget, what)?;
            if c != parent {
                inserted.push((p, c));
            }
            stack.push((p.last(), v, c));
        }
        Ok(inserted)
    }
}

pub(crate) fn addr_lookup(
    fam: Af,
    root: u32,
    inserted: &[(Prefix, u32)],
    opts: &BuildOptions,
    budget: &mut Budget,
    what: &str,
) -> Result<AddrLookup, BuildError> {
    let bits = Prefix::bits(fam);
    let n_hosts = inserted.iter().filter(|(p, _)| p.len == bits).count();
    let (hosts, rest): (Option<HostMap>, Vec<(Prefix, u32)>) =
        if inserted.len() > opts.lpm_threshold && n_hosts >= opts.host_map_threshold.max(1) {
            budget.charge(n_hosts * 2 * 20 + (1 << 21), what)?;
            let h: Vec<(u128, u32)> =
                inserted.iter().filter(|(p, _)| p.len == bits).map(|(p, c)| (p.addr, *c)).collect();
            (
                Some(HostMap::new(&h, fam == Af::Inet6)),
                inserted.iter().filter(|(p, _)| p.len != bits).copied().collect(),
            )
        } else {
            (None, inserted.to_vec())
        };
    Ok(AddrLookup { hosts, rest: rest_lookup(fam, root, &rest, opts, budget, what)? })
}

/// The lookup for the prefixes the host map does not hold: a constant, sorted intervals, or
/// past `opts.lpm_threshold` prefixes an `lpm` table.
pub(crate) fn rest_lookup(
    fam: Af,
    root: u32,
    inserted: &[(Prefix, u32)],
    opts: &BuildOptions,
    budget: &mut Budget,
    what: &str,
) -> Result<Rest, BuildError> {
    if inserted.is_empty() {
        return Ok(Rest::Const(root));
    }
    if inserted.len() > opts.lpm_threshold {
        return lpm_rest(fam, root, inserted, budget, what);
    }
    let (starts, classes) = intervals(root, inserted);
    if fam == Af::Inet {
        // IPv4 addresses are held in the low 32 bits: a start at 2^32 (after a prefix
        // ending at 255.255.255.255) is never reached and is dropped with its class.
        let n = starts.partition_point(|&s| s <= u128::from(u32::MAX));
        let starts: Vec<u32> = starts[..n].iter().map(|&s| s as u32).collect();
        let classes = classes[..n].to_vec();
        if (1..=4).contains(&n) && starts[0] == 0 {
            let pad = |v: &[u32]| -> [u32; 4] { std::array::from_fn(|i| v[i.min(n - 1)]) };
            return Ok(Rest::Small4 { starts: pad(&starts), classes: pad(&classes) });
        }
        return Ok(Rest::Intervals4 { starts, classes });
    }
    Ok(Rest::Intervals { starts, classes })
}

/// What an `lpm` table is charged at least: its 2^24 first-level entries.
pub(crate) const LPM_TABLE_BYTES: usize = (1 << 24) * 5;

/// How many distinct host prefixes (/32, /128) of family `fam` the source (`src`) or
/// destination field may insert: those of the rules' items and of every table's entries
/// (at least as many as RFC's host map takes out of the lookup).
pub(crate) fn host_prefixes(rs: &RuleSet, src: bool, fam: Af) -> usize {
    let bits = Prefix::bits(fam);
    let items = rs.rules.iter().flat_map(|r| match if src { &r.src } else { &r.dst } {
        AddrMatch::Any => &[][..],
        AddrMatch::List(items) => items.as_slice(),
    });
    let of_rules = items.filter_map(|it| match it.target {
        AddrTarget::Prefix(p) => Some(p),
        AddrTarget::Table(_) => None,
    });
    let of_tables = rs.tables.iter().flat_map(|t| t.entries.iter().map(|e| e.prefix));
    let hosts: HashSet<u128> = of_rules
        .chain(of_tables)
        .filter(|p| p.af == fam && p.len == bits)
        .map(|p| p.addr)
        .collect();
    hosts.len()
}

/// An `lpm` table of the prefixes' classes (misses give `root`).
fn lpm_rest(
    fam: Af,
    root: u32,
    inserted: &[(Prefix, u32)],
    budget: &mut Budget,
    what: &str,
) -> Result<Rest, BuildError> {
    // tbl8 groups needed: one per distinct 24+8(d-1)-bit prefix of the prefixes longer
    // than that, at each depth d.
    let bits = Prefix::bits(fam) as u32;
    let mut groups: usize = 0;
    let mut level = 24u32;
    while level < bits {
        let set: HashSet<u128> = inserted
            .iter()
            .filter(|(p, _)| u32::from(p.len) > level)
            .map(|(p, _)| p.addr >> (bits - level))
            .collect();
        groups += set.len();
        level += 8;
    }
    let groups = groups + groups / 8 + 16;
    budget.charge(LPM_TABLE_BYTES + groups * 256 * 5, what)?;
    let groups = u32::try_from(groups)
        .map_err(|_| BuildError { message: format!("{what}: too many LPM groups") })?;
    let fail = |e: lpm::LpmError| BuildError { message: format!("{what}: address table: {e}") };
    Ok(match fam {
        Af::Inet => {
            let lpm = lpm::Ipv4Lpm::try_with_tbl8_groups(groups).map_err(fail)?;
            for (p, c) in inserted {
                lpm.insert(p.addr as u32, p.len, *c).map_err(fail)?;
            }
            Rest::V4 { lpm, root }
        }
        Af::Inet6 => {
            let lpm = lpm::Ipv6Lpm::try_with_tbl8_groups(groups).map_err(fail)?;
            for (p, c) in inserted {
                lpm.insert(p.addr, p.len, *c).map_err(fail)?;
            }
            Rest::V6 { lpm, root }
        }
    })
}

/// The elementary intervals of the nested prefixes `inserted` (sorted by address, then
/// length): their starts and classes, neighbours of the same class merged.
fn intervals(root: u32, inserted: &[(Prefix, u32)]) -> (Vec<u128>, Vec<u32>) {
    let mut out: Vec<(u128, u32)> = vec![(0, root)];
    let mut st: Vec<(u128, u32)> = Vec::new();
    for &(p, c) in inserted {
        while let Some(&(last, _)) = st.last() {
            if p.first() <= last {
                break;
            }
            st.pop();
            out.push((last + 1, st.last().map_or(root, |x| x.1)));
        }
        out.push((p.first(), c));
        st.push((p.last(), c));
    }
    while let Some((last, _)) = st.pop() {
        if last != u128::MAX {
            out.push((last + 1, st.last().map_or(root, |x| x.1)));
        }
    }
    let mut starts: Vec<u128> = Vec::new();
    let mut classes: Vec<u32> = Vec::new();
    for (s, c) in out {
        if starts.last() == Some(&s) {
            *classes.last_mut().expect("same length") = c;
            // Merge with the previous interval if now equal.
            let n = classes.len();
            if n >= 2 && classes[n - 2] == c {
                starts.pop();
                classes.pop();
            }
        } else if classes.last() != Some(&c) {
            starts.push(s);
            classes.push(c);
        }
    }
    (starts, classes)
}
