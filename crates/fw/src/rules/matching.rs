//! Whether a rule matches a packet, condition by condition: the rule language's meaning,
//! which the reference evaluator walks and the compiled classifier must agree with.

use crate::packet::{Af, PacketKey, proto};
use crate::rules::{AddrMatch, AddrTarget, Rule, RuleSet};

impl AddrMatch {
    /// Whether `addr` (of family `af`) matches, the tables it names read from `rs`. An
    /// element of one family only ever matches addresses of that family; a table index out
    /// of range matches nothing.
    pub fn matches(&self, rs: &RuleSet, af: Af, addr: u128) -> bool {
        match self {
            AddrMatch::Any => true,
            AddrMatch::List(items) => items.iter().any(|i| match i.target {
                AddrTarget::Prefix(p) => p.af == af && (p.contains(af, addr) != i.negated),
                AddrTarget::Table(t) => {
                    rs.tables.get(t).is_some_and(|t| t.contains(af, addr)) != i.negated
                }
            }),
        }
    }
}

impl Rule {
    /// Whether the rule matches `key` (its tables read from `rs`), all its conditions but
    /// the verdict's: what pf's rule walk tests.
    pub fn matches(&self, rs: &RuleSet, key: &PacketKey) -> bool {
        let rule = self;
        if rule.dir.is_some_and(|d| d != key.dir) {
            return false;
        }
        if !rule.ifaces.is_empty() && rule.ifaces.contains(&key.iface) == rule.iface_neg {
            return false;
        }
        if rule.af.is_some_and(|a| a != key.af) {
            return false;
        }
        if !rule.protos.is_empty() && !rule.protos.contains(&key.proto) {
            return false;
        }
        if !rule.src.matches(rs, key.af, key.src) || !rule.dst.matches(rs, key.af, key.dst) {
            return false;
        }
        if !rule.src_ports.matches(key.src_port) || !rule.dst_ports.matches(key.dst_port) {
            return false;
        }
        if key.route & rule.route_need != rule.route_need || key.route & rule.route_refuse != 0 {
            return false;
        }
        if !rule.icmp_types.is_empty()
            && !rule.icmp_types.iter().any(|&t| u16::from(t) == key.src_port)
        {
            return false;
        }
        if rule.icmp_code.is_some_and(|c| u16::from(c) != key.dst_port) {
            return false;
        }
        if rule.tagged.is_some_and(|(negated, id)| (key.tag == id) == negated) {
            return false;
        }
        // Flags are only checked on TCP packets, as pf does.
        if let Some((set, mask)) = rule.flags
            && key.proto == proto::TCP
            && key.tcp_flags & mask != set
        {
            return false;
        }
        true
    }
}
