//! Phase 0 of the RFC engine for the small fields: interface x direction, family x
//! protocol x TCP flags, source and destination ports (ICMP type and code).

use std::collections::{BTreeMap, HashMap};

use super::sets::{Budget, RSet, Space};
use crate::classifier::BuildError;
use crate::packet::{Af, Dir, proto};
use crate::rules::{PortMatch, Rule, RuleSet};

/// Union of the rule lists of the given signatures (disjoint lists).
pub(crate) fn rules_of(sigs: &[u32], sig_rules: &[RSet]) -> RSet {
    let mut v: RSet = sigs.iter().flat_map(|&s| sig_rules[s as usize].iter().copied()).collect();
    v.sort_unstable();
    v
}

pub(crate) fn common_rules(rs: &RuleSet, wild: impl Fn(&Rule) -> bool) -> RSet {
    rs.rules.iter().enumerate().filter(|(_, r)| wild(r)).map(|(i, _)| i as u32).collect()
}

pub(crate) struct IfaceField {
    pub(crate) slot: Vec<u16>,
    pub(crate) cls: Vec<u32>,
}

impl IfaceField {
    #[inline]
    pub(crate) fn lookup(&self, iface: u16, dir: Dir) -> u32 {
        let s = self.slot.get(iface as usize).copied().unwrap_or(0) as usize;
        self.cls[s * 2 + (dir == Dir::Out) as usize]
    }

    pub(crate) fn build(
        rs: &RuleSet,
        budget: &mut Budget,
    ) -> Result<(IfaceField, Space), BuildError> {
        let wild = |r: &Rule| r.dir.is_none() && r.ifaces.is_empty();
        let mut space = Space::new(common_rules(rs, wild));
        let mut ifs: Vec<u16> = rs.rules.iter().flat_map(|r| r.ifaces.iter().copied()).collect();
        ifs.sort_unstable();
        ifs.dedup();
        let mut slot = vec![0u16; ifs.last().map_or(0, |&m| m as usize + 1)];
        for (i, &f) in ifs.iter().enumerate() {
            slot[f as usize] = (i + 1) as u16;
        }
        let mut cls = Vec::new();
        for s in 0..=ifs.len() {
            let v = if s == 0 { None } else { Some(ifs[s - 1]) };
            for dir in [Dir::In, Dir::Out] {
                let set: RSet = rs
                    .rules
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| {
                        !wild(r)
                            && r.dir.is_none_or(|d| d == dir)
                            && (r.ifaces.is_empty()
                                || v.is_some_and(|v| r.ifaces.contains(&v)) != r.iface_neg)
                    })
                    .map(|(i, _)| i as u32)
                    .collect();
                cls.push(space.id(set, budget, "the interface field")?);
            }
        }
        Ok((IfaceField { slot, cls }, space))
    }
}

#[inline]
pub(crate) fn proto_index(af: Af, proto: u8, flags: u8) -> usize {
    (af == Af::Inet6) as usize * 512
        + if proto == proto::TCP { 256 + flags as usize } else { proto as usize }
}

pub(crate) fn build_proto(
    rs: &RuleSet,
    budget: &mut Budget,
) -> Result<(Vec<u32>, Space), BuildError> {
    let wild = |r: &Rule| r.af.is_none() && r.protos.is_empty() && r.flags.is_none();
    let mut space = Space::new(common_rules(rs, wild));
    type Sig = (Option<Af>, Vec<u8>, Option<(u8, u8)>);
    let mut sig_ids: HashMap<Sig, u32> = HashMap::new();
    let mut sigs: Vec<Sig> = Vec::new();
    let mut sig_rules: Vec<RSet> = Vec::new();
    for (i, r) in rs.rules.iter().enumerate() {
        if wild(r) {
            continue;
        }
        let sig = (r.af, r.protos.clone(), r.flags);
        let id = *sig_ids.entry(sig.clone()).or_insert_with(|| {
            sigs.push(sig);
            sig_rules.push(Vec::new());
            (sigs.len() - 1) as u32
        });
        sig_rules[id as usize].push(i as u32);
    }
    let mut memo: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut table = vec![0u32; 1024];
    for af in [Af::Inet, Af::Inet6] {
        for idx in 0..512usize {
            let (p, flags) =
                if idx >= 256 { (proto::TCP, (idx - 256) as u8) } else { (idx as u8, 0) };
            let matched: Vec<u32> = sigs
                .iter()
                .enumerate()
                .filter(|(_, (saf, protos, fl))| {
                    saf.is_none_or(|a| a == af)
                        && (protos.is_empty() || protos.contains(&p))
                        && fl.is_none_or(|(set, mask)| p != proto::TCP || flags & mask == set)
                })
                .map(|(i, _)| i as u32)
                .collect();
            let c = match memo.get(&matched) {
                Some(&c) => c,
                None => {
                    let c =
                        space.id(rules_of(&matched, &sig_rules), budget, "the protocol field")?;
                    memo.insert(matched, c);
                    c
                }
            };
            table[proto_index(af, p, flags)] = c;
        }
    }
    Ok((table, space))
}

pub(crate) fn port_constraint(pm: &PortMatch, icmp: &[u8]) -> Option<Vec<(u16, u16)>> {
    match (pm, icmp) {
        (_, [_, ..]) => {
            let mut r: Vec<(u16, u16)> = icmp.iter().map(|&t| (t.into(), t.into())).collect();
            r.sort_unstable();
            Some(r)
        }
        (PortMatch::Any, []) => None,
        (PortMatch::Ranges(r), []) => {
            let mut r = r.clone();
            r.sort_unstable();
            Some(r)
        }
    }
}

pub(crate) fn build_ports(
    rs: &RuleSet,
    get: impl Fn(&Rule) -> Option<Vec<(u16, u16)>>,
    budget: &mut Budget,
    what: &str,
) -> Result<(Vec<u16>, Space), BuildError> {
    let mut space = Space::new(common_rules(rs, |r| get(r).is_none()));
    let mut sig_ids: HashMap<Vec<(u16, u16)>, u32> = HashMap::new();
    let mut sig_rules: Vec<RSet> = Vec::new();
    // events[pos] = (sig, +1/-1) changes at pos.
    let mut events: BTreeMap<u32, Vec<(u32, i32)>> = BTreeMap::new();
    events.entry(0).or_default();
    for (i, r) in rs.rules.iter().enumerate() {
        let Some(c) = get(r) else { continue };
        let next = sig_rules.len() as u32;
        let id = *sig_ids.entry(c.clone()).or_insert_with(|| {
            sig_rules.push(Vec::new());
            for &(lo, hi) in &c {
                events.entry(lo as u32).or_default().push((next, 1));
                events.entry(hi as u32 + 1).or_default().push((next, -1));
            }
            next
        });
        sig_rules[id as usize].push(i as u32);
    }
    let mut count: HashMap<u32, i32> = HashMap::new();
    let mut memo: HashMap<Vec<u32>, u16> = HashMap::new();
    let mut table = vec![0u16; 65536];
    let points: Vec<(u32, Vec<(u32, i32)>)> = events.into_iter().collect();
    for (k, (pos, evs)) in points.iter().enumerate() {
        for &(s, d) in evs {
            let e = count.entry(s).or_insert(0);
            *e += d;
            if *e == 0 {
                count.remove(&s);
            }
        }
        if *pos > 65535 {
            break;
        }
        let mut active: Vec<u32> = count.keys().copied().collect();
        active.sort_unstable();
        let c = match memo.get(&active) {
            Some(&c) => c,
            None => {
                let c = space.id(rules_of(&active, &sig_rules), budget, what)?;
                let c = u16::try_from(c).expect("at most 65536 port classes");
                memo.insert(active, c);
                c
            }
        };
        let end = points.get(k + 1).map_or(65536, |p| p.0.min(65536));
        table[*pos as usize..end as usize].fill(c);
    }
    Ok((table, space))
}
