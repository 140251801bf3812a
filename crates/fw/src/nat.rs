//! Network address translation as FreeBSD's pf does it: `nat`, `rdr` and `binat` rules
//! (pf.conf(5), "TRANSLATION"), their matching, and the per-worker table of translations.
//!
//! * A translation rule is matched against a packet as a filter rule is, but the **first**
//!   matching rule decides (pf.conf(5): "the first matching rule decides what action is
//!   taken"), and a `no nat` / `no rdr` / `no binat` rule that matches first means "do not
//!   translate". `nat` applies to packets leaving by its interface, `rdr` to packets arriving
//!   on it, `binat` to both (source outbound, destination inbound).
//! * Where the firewall sees which address: as pf's, the filter rules see packets after
//!   translation: the inbound rules `rdr`'s translated destination, the outbound rules `nat`'s
//!   translated source ([`crate::passes::Passes::outbound_translated`]). A translated flow's
//!   state (`crate::state`) stays keyed by its inside form (as the inbound pass sees it), so
//!   a flow keeps one entry; [`table`] holds the two keys of the translation pf's state
//!   holds, the wire side and the stack side.
//! * `nat pass`, `rdr pass`, `binat pass` ([`NatRule::pass`]): the packets the rule translates
//!   skip the filter rules of that pass, which keeps a state instead
//!   ([`crate::verdict::Verdict::TRANSLATION_PASS`]).
//! * The table is per worker (shared-nothing). The dataplane picks the translated port so that
//!   the reply's receive hash lands on the worker that holds the translation.

use crate::packet::{Af, PacketKey};
use crate::rules::{AddrMatch, AddrTarget, PortMatch, Prefix, RuleSet};

mod index;
pub mod pool;
pub mod six;
pub mod table;

pub use crate::rules::{DEFAULT_NAT_PORTS, NatAddr, NatKind, NatRule, NatTarget, PoolMethod};

impl NatRule {
    /// Whether the rule matches `key` (its interface, family, protocol, addresses, ports);
    /// the caller has picked the rules of the right kind and direction.
    pub fn matches(
        &self,
        rs: &RuleSet,
        key: &PacketKey,
        iface_addr: &dyn Fn(u16) -> Option<u32>,
    ) -> bool {
        if let Some(i) = self.dst_iface
            && (key.af != Af::Inet || iface_addr(i).is_none_or(|a| u128::from(a) != key.dst))
        {
            return false;
        }
        if !self.ifaces.is_empty() && self.ifaces.contains(&key.iface) == self.iface_neg {
            return false;
        }
        if self.af.is_some_and(|a| a != key.af)
            || (!self.protos.is_empty() && !self.protos.contains(&key.proto))
        {
            return false;
        }
        let ports =
            key.proto == crate::packet::proto::TCP || key.proto == crate::packet::proto::UDP;
        let port_ok =
            |m: &PortMatch, p: u16| matches!(m, PortMatch::Any) || (ports && m.matches(p));
        self.src.matches(rs, key.af, key.src)
            && self.dst.matches(rs, key.af, key.dst)
            && port_ok(&self.src_ports, key.src_port)
            && port_ok(&self.dst_ports, key.dst_port)
    }
}

/// Which rules a lookup considers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatPhase {
    /// A packet leaving by an interface: `nat` and `binat` rules (source translation).
    Out,
    /// A packet arriving on an interface: `rdr` and `binat` rules (destination translation;
    /// a `binat` rule matches the reverse of its `from`/`to`, see [`first_match`]).
    In,
}

/// The first translation rule of `phase` that matches `key`, `None` if none does or if the
/// first match is a `no` rule. For an inbound `binat` the rule's `from` is its inside address:
/// the packet matches if its destination is the rule's outside address and its source matches
/// the rule's `to`.
pub fn first_match<'a>(
    rs: &'a RuleSet,
    phase: NatPhase,
    key: &PacketKey,
    iface_addr: &dyn Fn(u16) -> Option<u32>,
) -> Option<&'a NatRule> {
    first_match_among(rs, phase, key, iface_addr, &|_| true)
}

/// [`first_match`] for an IPv6 packet (NAT66): among the rules of family `inet6` and the
/// `no` rules of no family; a rule of no family with a translation translates IPv4 (its
/// pool is IPv4, or `(IFACE)` stands for the interface's IPv4 address).
pub fn first_match6<'a>(rs: &'a RuleSet, phase: NatPhase, key: &PacketKey) -> Option<&'a NatRule> {
    let inet6 = |r: &NatRule| r.af == Some(Af::Inet6) || (r.negated && r.af.is_none());
    first_match_among(rs, phase, key, &|_| None, &inet6)
}

fn first_match_among<'a>(
    rs: &'a RuleSet,
    phase: NatPhase,
    key: &PacketKey,
    iface_addr: &dyn Fn(u16) -> Option<u32>,
    among: &dyn Fn(&NatRule) -> bool,
) -> Option<&'a NatRule> {
    for r in rs.nat.iter().filter(|r| among(r)) {
        let hit = match (phase, r.kind) {
            (NatPhase::Out, NatKind::Nat | NatKind::Binat) | (NatPhase::In, NatKind::Rdr) => {
                r.matches(rs, key, iface_addr)
            }
            (NatPhase::In, NatKind::Binat) => binat_in_matches(rs, r, key, iface_addr),
            _ => false,
        };
        if hit {
            return (!r.negated).then_some(r);
        }
    }
    None
}

/// An inbound packet against a `binat` rule: destination = the outside address (the target's
/// single address), source within the rule's `to`.
fn binat_in_matches(
    rs: &RuleSet,
    r: &NatRule,
    key: &PacketKey,
    iface_addr: &dyn Fn(u16) -> Option<u32>,
) -> bool {
    let outside = match r.target.as_ref().map(|t| &t.addr) {
        Some(NatAddr::Pool(p)) => p.first().copied(),
        _ => None,
    };
    // The cheap test first: most inbound packets are not to a binat address.
    if outside.is_some_and(|p| !p.contains(key.af, key.dst)) {
        return false;
    }
    let reversed = NatRule {
        src: r.dst.clone(),
        src_ports: r.dst_ports.clone(),
        dst: outside.map_or(AddrMatch::Any, |p| {
            AddrMatch::List(vec![crate::rules::AddrItem {
                negated: false,
                target: AddrTarget::Prefix(p),
            }])
        }),
        dst_ports: PortMatch::Any,
        ..r.clone()
    };
    (r.negated || outside.is_some()) && reversed.matches(rs, key, iface_addr)
}

/// The destination port an `rdr` rule gives `dport` (a TCP or UDP port the rule matched):
/// a matched range maps onto the target's as pf maps it (`port lo:*` by offset, `lo:hi` by
/// offset modulo its size, a single port takes them all); without a target port, kept.
pub fn rdr_port(r: &NatRule, dport: u16) -> u16 {
    let Some((lo, hi)) = r.target.as_ref().and_then(|t| t.ports) else { return dport };
    let first = match &r.dst_ports {
        PortMatch::Ranges(rg) => {
            rg.iter().find(|(a, b)| (*a..=*b).contains(&dport)).map_or(dport, |(a, _)| *a)
        }
        PortMatch::Any => dport,
    };
    let off = dport - first;
    if r.target.as_ref().is_some_and(|t| t.port_star) {
        lo.saturating_add(off)
    } else {
        lo + (off % (hi - lo + 1))
    }
}

/// The entries of table `id` of family `af` that a translation pool takes: its addresses
/// and prefixes, not its negated entries (which only except addresses from a match).
pub fn table_pool(rs: &RuleSet, id: usize, af: Af) -> Vec<Prefix> {
    let Some(t) = rs.tables.get(id) else { return Vec::new() };
    t.entries.iter().filter(|e| !e.negated && e.prefix.af == af).map(|e| e.prefix).collect()
}

/// The inside address of a `binat` rule (its `from`, a single host or prefix).
pub fn binat_inside(r: &NatRule) -> Option<Prefix> {
    match &r.src {
        AddrMatch::List(l) => match l.as_slice() {
            [crate::rules::AddrItem { negated: false, target: AddrTarget::Prefix(p) }] => Some(*p),
            _ => None,
        },
        AddrMatch::Any => None,
    }
}

/// The first rule that translates to `(IFACE)` or matches `to (IFACE)` where the interface
/// has no address of the rule's family (`has_addr` says which do: IPv6 for a NAT66 rule,
/// else IPv4), with that interface and family: such a rule could never translate
/// (`linerate check` refuses it).
pub fn iface_without_address<'a>(
    rs: &'a RuleSet,
    has_addr: &dyn Fn(u16, Af) -> bool,
) -> Option<(&'a NatRule, u16, Af)> {
    rs.nat.iter().find_map(|r| {
        let target = match r.target.as_ref().map(|t| &t.addr) {
            Some(NatAddr::Iface(i)) => Some(*i),
            _ => None,
        };
        let af = if r.af == Some(Af::Inet6) { Af::Inet6 } else { Af::Inet };
        [target, r.dst_iface].into_iter().flatten().find(|&i| !has_addr(i, af)).map(|i| (r, i, af))
    })
}
