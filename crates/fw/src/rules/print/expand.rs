//! pfctl's expansion of a rule's lists (parse.y `expand_rule`): one rule per interface,
//! protocol, ICMP type, source host, source port, destination host and destination port,
//! in that order of nesting. linerate keeps one rule whose lists match if any element
//! matches, which decides the same packets; printed expanded, the rule set reads as pfctl's
//! does, and parses back to the expanded rule set ([`RuleSet::expanded`]).
//!
//! Each expanded rule also gets what pfctl makes explicit: the family of its addresses
//! (`inet` for `from 10.0.0.0/8`), its label macros substituted (`$if`, `$srcaddr`,
//! `$dstaddr`, `$srcport`, `$dstport`, `$proto`, `$nr`: pf.conf(5), PARAMETERS, `label`),
//! and its state timeouts in pfctl's order.

use std::fmt;

use super::words;
use crate::rules::{
    AddrMatch, AddrTarget, Af, Anchor, AnchorKind, NatRule, PortMatch, Rule, RuleSet, ScrubRule,
};

/// The most rules an expanded rule set may hold: a few lists of thousands of hosts in one
/// rule multiply past what is worth printing (or holding in memory to print).
pub const MAX_PRINTED_RULES: u128 = 1_000_000;

/// A rule set whose expansion would hold more than [`MAX_PRINTED_RULES`] rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpansionTooLarge {
    /// How many rules it would hold.
    pub rules: u128,
}

impl fmt::Display for ExpansionTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the rule set expands to {} rules (pfctl's one rule per list element), more than the {MAX_PRINTED_RULES} linerate prints; use tables for large address sets",
            self.rules
        )
    }
}

impl std::error::Error for ExpansionTooLarge {}

/// The lists of a rule that pfctl expands, borrowed to be replaced by one element each.
struct Parts<'a> {
    ifaces: &'a mut Vec<u16>,
    iface_neg: bool,
    af: &'a mut Option<Af>,
    protos: &'a mut Vec<u8>,
    src: &'a mut AddrMatch,
    src_ports: &'a mut PortMatch,
    dst: &'a mut AddrMatch,
    dst_ports: &'a mut PortMatch,
}

/// A filter, translation or scrub rule: what the expansion needs of it.
trait Expand: Clone {
    fn parts(&mut self) -> Parts<'_>;

    /// The ICMP types (and code) to expand over: one choice for rules without them.
    fn icmp_choices(&self) -> Vec<(Vec<u8>, Option<u8>)> {
        vec![(Vec::new(), None)]
    }

    fn set_icmp(&mut self, _choice: &(Vec<u8>, Option<u8>)) {}
}

macro_rules! parts {
    () => {
        fn parts(&mut self) -> Parts<'_> {
            Parts {
                ifaces: &mut self.ifaces,
                iface_neg: self.iface_neg,
                af: &mut self.af,
                protos: &mut self.protos,
                src: &mut self.src,
                src_ports: &mut self.src_ports,
                dst: &mut self.dst,
                dst_ports: &mut self.dst_ports,
            }
        }
    };
}

impl Expand for Rule {
    parts!();

    fn icmp_choices(&self) -> Vec<(Vec<u8>, Option<u8>)> {
        match self.icmp_types.as_slice() {
            [] => vec![(Vec::new(), self.icmp_code)],
            [t] => vec![(vec![*t], self.icmp_code)],
            many => many.iter().map(|&t| (vec![t], None)).collect(),
        }
    }

    fn set_icmp(&mut self, (types, code): &(Vec<u8>, Option<u8>)) {
        self.icmp_types.clone_from(types);
        self.icmp_code = *code;
    }
}

impl Expand for NatRule {
    parts!();
}

impl Expand for ScrubRule {
    parts!();
}

/// The elements of each list of a rule, as one-element lists.
struct Choices {
    ifaces: Vec<Vec<u16>>,
    protos: Vec<Vec<u8>>,
    src: Vec<AddrMatch>,
    src_ports: Vec<PortMatch>,
    dst: Vec<AddrMatch>,
    dst_ports: Vec<PortMatch>,
}

impl Choices {
    fn of<T: Expand>(r: &T) -> Choices {
        let mut probe = r.clone();
        let p = probe.parts();
        // `on ! { a b }` (translation rules) is one condition: it cannot be split.
        let ifaces = if p.ifaces.len() <= 1 || p.iface_neg {
            vec![p.ifaces.clone()]
        } else {
            p.ifaces.iter().map(|&i| vec![i]).collect()
        };
        let protos = if p.protos.is_empty() {
            vec![Vec::new()]
        } else {
            p.protos.iter().map(|&x| vec![x]).collect()
        };
        Choices {
            ifaces,
            protos,
            src: addrs(p.src),
            src_ports: ports(p.src_ports),
            dst: addrs(p.dst),
            dst_ports: ports(p.dst_ports),
        }
    }

    /// How many rules the choices make, with `icmp` ICMP choices.
    fn count(&self, icmp: usize) -> u128 {
        let lens = [
            self.ifaces.len(),
            self.protos.len(),
            icmp,
            self.src.len(),
            self.src_ports.len(),
            self.dst.len(),
            self.dst_ports.len(),
        ];
        lens.iter().fold(1u128, |n, &len| n.saturating_mul(len as u128))
    }
}

fn addrs(m: &AddrMatch) -> Vec<AddrMatch> {
    match m {
        AddrMatch::Any => vec![AddrMatch::Any],
        AddrMatch::List(items) => items.iter().map(|i| AddrMatch::List(vec![*i])).collect(),
    }
}

/// One choice per pf port operator ([`words::port_groups`]); none for ports that match
/// nothing (`port 10 >< 11`): such a rule expands to no rule, as it decides no packet.
fn ports(p: &PortMatch) -> Vec<PortMatch> {
    match p {
        PortMatch::Any => vec![PortMatch::Any],
        PortMatch::Ranges(r) => words::port_groups(r).into_iter().map(PortMatch::Ranges).collect(),
    }
}

/// Every rule of `rules` with each choice of `choices` set by `set`.
fn fan<T: Clone, C>(rules: Vec<T>, choices: &[C], set: impl Fn(&mut T, &C)) -> Vec<T> {
    let set = &set;
    rules
        .into_iter()
        .flat_map(|r| {
            choices.iter().map(move |c| {
                let mut t = r.clone();
                set(&mut t, c);
                t
            })
        })
        .collect()
}

/// The family of a single address (a prefix; a table holds both).
fn prefix_af(m: &AddrMatch) -> Option<Af> {
    match m {
        AddrMatch::List(items) => match items.as_slice() {
            [i] => match i.target {
                AddrTarget::Prefix(p) => Some(p.af),
                AddrTarget::Table(_) => None,
            },
            _ => None,
        },
        AddrMatch::Any => None,
    }
}

/// The family of a combination: the rule's, else its addresses'. `None` when they disagree
/// (an IPv4 source with an IPv6 destination): the combination matches no packet and pfctl
/// leaves it out too.
fn family(af: Option<Af>, src: &AddrMatch, dst: &AddrMatch) -> Option<Option<Af>> {
    let mut af = af;
    for f in [prefix_af(src), prefix_af(dst)].into_iter().flatten() {
        match af {
            Some(a) if a != f => return None,
            _ => af = Some(f),
        }
    }
    Some(af)
}

/// The rules of `r`'s expansion.
fn expand_one<T: Expand>(r: &T) -> Vec<T> {
    let c = Choices::of(r);
    let mut out = fan(vec![r.clone()], &c.ifaces, |t, v| t.parts().ifaces.clone_from(v));
    out = fan(out, &c.protos, |t, v| t.parts().protos.clone_from(v));
    out = fan(out, &r.icmp_choices(), T::set_icmp);
    out = fan(out, &c.src, |t, v| t.parts().src.clone_from(v));
    out = fan(out, &c.src_ports, |t, v| t.parts().src_ports.clone_from(v));
    out = fan(out, &c.dst, |t, v| t.parts().dst.clone_from(v));
    out = fan(out, &c.dst_ports, |t, v| t.parts().dst_ports.clone_from(v));
    out.into_iter()
        .filter_map(|mut t| {
            let p = t.parts();
            *p.af = family(*p.af, p.src, p.dst)?;
            Some(t)
        })
        .collect()
}

/// The expansions of `rules`, and where each rule's begins in them (one more entry for the
/// end), to move the anchors' places.
fn expand_all<T: Expand>(rules: &[T]) -> (Vec<T>, Vec<usize>) {
    let mut out = Vec::new();
    let mut at = Vec::with_capacity(rules.len() + 1);
    for r in rules {
        at.push(out.len());
        out.extend(expand_one(r));
    }
    at.push(out.len());
    (out, at)
}

fn count<T: Expand>(r: &T) -> u128 {
    Choices::of(r).count(r.icmp_choices().len())
}

/// `a`, its place moved to the expanded rules (`at` from [`expand_all`]).
fn moved(a: &Anchor, at: &[usize]) -> Anchor {
    let last = at.last().copied().unwrap_or(0);
    let place = |i: usize| at.get(i).copied().unwrap_or(last);
    Anchor { start: place(a.start), end: place(a.end), ..a.clone() }
}

impl RuleSet {
    /// The rule set as `pfctl -nvf` would load it: every rule expanded into one rule per
    /// combination of its lists' elements (combinations of two families left out), with the
    /// family of its addresses, its label macros substituted and its state timeouts in
    /// pfctl's order. It decides every packet as `self` does; printed
    /// ([`RuleSet::to_pf_text`]), it parses back to itself. `iface_names`: the interfaces
    /// by port index (for `$if`).
    pub fn expanded(&self, iface_names: &[&str]) -> Result<RuleSet, ExpansionTooLarge> {
        let total = [
            self.rules.iter().map(count).fold(0u128, u128::saturating_add),
            self.nat.iter().map(count).fold(0, u128::saturating_add),
            self.scrub.iter().map(count).fold(0, u128::saturating_add),
        ]
        .into_iter()
        .fold(0, u128::saturating_add);
        if total > MAX_PRINTED_RULES {
            return Err(ExpansionTooLarge { rules: total });
        }
        let (rules, rule_at) = expand_all(&self.rules);
        let (nat, nat_at) = expand_all(&self.nat);
        let (scrub, _) = expand_all(&self.scrub);
        let anchors = self
            .anchors
            .iter()
            .map(|a| moved(a, if a.kind == AnchorKind::Filter { &rule_at } else { &nat_at }))
            .collect();
        let mut out = RuleSet { rules, nat, scrub, anchors, ..self.clone() };
        let numbers = super::filter_numbers(out.rules.len(), &out.anchors);
        for (k, nr) in numbers.into_iter().enumerate() {
            let Some(r) = out.rules.get(k) else { continue };
            let label = r.label.as_deref().map(|l| label(l, r, &out, iface_names, nr));
            let r = &mut out.rules[k];
            r.label = label;
            r.state_timeouts.sort_by_key(|&(t, _)| t as u8);
        }
        Ok(out)
    }
}

/// Label `text` of expanded rule `r` (number `nr` in its rule set) with pf's macros
/// substituted, in pfctl's order (parse.y `expand_label`).
fn label(text: &str, r: &Rule, rs: &RuleSet, names: &[&str], nr: usize) -> String {
    if !text.contains('$') {
        return text.to_owned();
    }
    let iface = match r.ifaces.as_slice() {
        [] => "any".to_owned(),
        ifaces => ifaces.iter().map(|&i| words::iface(names, i)).collect::<Vec<_>>().join(" "),
    };
    let addr = |m: &AddrMatch, src: bool| match words::route_host(r.route_need, r.route_refuse, src)
    {
        Some(h) => h.to_owned(),
        None => words::addr_match(rs, m),
    };
    let proto = match r.protos.as_slice() {
        [p] => words::proto(*p),
        _ => "ip".to_owned(),
    };
    let values = [
        ("$if", iface),
        ("$srcaddr", addr(&r.src, true)),
        ("$dstaddr", addr(&r.dst, false)),
        ("$srcport", words::port_label(&r.src_ports)),
        ("$dstport", words::port_label(&r.dst_ports)),
        ("$proto", proto),
        ("$nr", nr.to_string()),
    ];
    values.iter().fold(text.to_owned(), |l, (name, value)| l.replace(name, value))
}
