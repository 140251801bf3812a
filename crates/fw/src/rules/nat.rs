//! The translation statements of FreeBSD's pf.conf(5): `nat`, `rdr`, `binat` and their `no`
//! forms, parsed into [`NatRule`](super::NatRule)s. The grammar is in `docs/firewall.md`
//! ("Translation"); as pfctl's default `set require-order yes`, translation rules come before
//! filter rules.

use super::hosts::check_ports_need_tcp_udp;
use super::scrub::Matching;
use super::translation::{
    DEFAULT_NAT_PORTS, MAX_POOL_ADDRS, NatAddr, NatKind, NatRule, NatTarget, PoolMethod,
};
use super::{AddrItem, AddrMatch, AddrTarget, PResult, Parser, Prefix, Tok, Token, here};
use crate::packet::Af;

/// The pool options after a translation's address and ports.
struct PoolOptions {
    method: PoolMethod,
    /// The pool type's keyword, when one was written.
    method_tok: Option<Token>,
    sticky: bool,
    static_port: bool,
}

/// A translation rule of `kind` matching `m`, written at `at`.
pub(super) fn nat_rule_of(
    kind: NatKind,
    negated: bool,
    pass: bool,
    m: Matching,
    target: Option<NatTarget>,
    at: &Token,
) -> NatRule {
    let h = m.hosts;
    NatRule {
        kind,
        negated,
        pass,
        ifaces: m.ifaces,
        iface_neg: m.iface_neg,
        af: m.af,
        protos: m.protos,
        src: h.src,
        src_ports: h.src_ports,
        dst: h.dst,
        dst_ports: h.dst_ports,
        dst_iface: h.dst_iface,
        target,
        line: at.line,
        column: at.col,
    }
}

/// The family a translation rule applies to, as pfctl settles it: the one written (`inet`,
/// `inet6`), else its pool's, else its addresses'. Every address of the rule must be of that
/// family. `Some(Inet6)` makes it a NAT66 rule; a rule with no family and an `(IFACE)` pool
/// translates IPv4 (the interface's IPv4 address), as before IPv6 translation.
fn rule_family(
    af: Option<Af>,
    target: Option<&NatTarget>,
    addr_toks: &[(Token, Af, bool)],
    first: &Token,
) -> PResult<Option<Af>> {
    let pool = match target.map(|t| &t.addr) {
        Some(NatAddr::Pool(p)) => p.first().map(|p| p.af),
        _ => None,
    };
    if let (Some(a), Some(p)) = (af, pool)
        && a != p
    {
        return here(
            first,
            format!("the translation address is not of the rule's family ({})", name(a)),
        );
    }
    let family = af.or(pool).or_else(|| addr_toks.first().map(|(_, a, _)| *a));
    if let Some(f) = family
        && let Some((t, a, _)) = addr_toks.iter().find(|(_, a, _)| *a != f)
    {
        return here(t, format!("an {} address in a rule for {}", name(*a), name(f)));
    }
    Ok(if family == Some(Af::Inet6) { Some(Af::Inet6) } else { af })
}

fn name(af: Af) -> &'static str {
    match af {
        Af::Inet => "inet",
        Af::Inet6 => "inet6",
    }
}

impl Parser<'_> {
    /// `[no] (nat | rdr | binat) ...` up to the end of the statement.
    pub(super) fn nat_rule(&mut self) -> PResult<()> {
        let first = self.peek()?.clone();
        if !self.rs.rules.is_empty() {
            return here(
                &first,
                "translation rules (nat, rdr, binat) must come before filter rules (pf.conf(5), STATEMENT ORDER)",
            );
        }
        if let Some(p) = self.pass_translations.first() {
            return here(
                &first,
                format!(
                    "translation rules together with `rdr-to` or `nat-to` on a pass rule (line {}) are not supported by linerate: write one or the other",
                    p.line()
                ),
            );
        }
        if let Some(m) = self.match_nats.first() {
            return here(
                &first,
                format!(
                    "translation rules together with `match ... nat-to` (line {}) are not supported by linerate: write one or the other",
                    m.line
                ),
            );
        }
        let negated = self.eat_word("no")?;
        let kind = self.nat_kind()?;
        let pass = self.nat_pass(kind, negated)?;
        self.refuse_unsupported("")?;
        let (mut ifaces, mut iface_neg) = (Vec::new(), false);
        if self.eat_word("on")? {
            iface_neg = self.eat_punct("!")?;
            ifaces = self.iface_list()?;
        }
        let af = if self.eat_word("inet")? {
            Some(Af::Inet)
        } else if self.eat_word("inet6")? {
            Some(Af::Inet6)
        } else {
            None
        };
        let protos = if self.eat_word("proto")? { self.proto_list()? } else { Vec::new() };
        let hosts = self.hosts(Some(&first))?;
        if let Some(t) = &hosts.route_tok {
            return here(
                t,
                format!(
                    "`{}` in a translation rule is not supported by linerate",
                    super::lexer::describe(&t.tok).trim_matches('"')
                ),
            );
        }
        check_ports_need_tcp_udp(hosts.port_tok.as_ref(), &protos)?;
        self.refuse_translation_tag()?;
        let target = if negated {
            None
        } else {
            let arrow = self.peek()?.clone();
            if !self.eat_punct("->")? {
                return self.fail("\"->\" and the translation address");
            }
            Some(self.nat_target(kind, &arrow)?)
        };
        if negated && self.is_punct("->")? {
            let t = self.peek()?.clone();
            return here(&t, format!("`no {}` takes no translation (\"->\")", kind.name()));
        }
        let af = rule_family(af, target.as_ref(), &hosts.addr_toks, &first)?;
        if kind == NatKind::Binat {
            self.check_binat(&first, &hosts.src, target.as_ref())?;
        }
        let m = Matching { ifaces, iface_neg, af, protos, hosts };
        self.rs.nat.push(nat_rule_of(kind, negated, pass, m, target, &first));
        Ok(())
    }

    /// `nat`, `rdr` or `binat`.
    fn nat_kind(&mut self) -> PResult<NatKind> {
        let (k, kt) = self.word("nat, rdr or binat")?;
        match k.as_str() {
            "nat" => Ok(NatKind::Nat),
            "rdr" => Ok(NatKind::Rdr),
            "binat" => Ok(NatKind::Binat),
            _ => here(&kt, format!("expected nat, rdr or binat, found \"{k}\"")),
        }
    }

    /// pf's `[ "pass" [ "log" [ "(" logopts ")" ] ] ]` after the kind: `true` for `pass`.
    /// A `no` rule translates nothing, so it passes nothing (pfctl refuses it too); `log`
    /// there would log under a translation rule, which linerate's log (by filter rule) has
    /// no record for.
    fn nat_pass(&mut self, kind: NatKind, negated: bool) -> PResult<bool> {
        if !self.is_word("pass")? {
            return Ok(false);
        }
        let t = self.next()?;
        if negated {
            return here(
                &t,
                format!("`no {}` translates nothing: it takes no `pass`", kind.name()),
            );
        }
        if self.is_word("log")? {
            let l = self.peek()?.clone();
            return here(
                &l,
                format!(
                    "`{} pass log` is not supported by linerate (log with a filter rule)",
                    kind.name()
                ),
            );
        }
        Ok(true)
    }

    /// What follows `->`: the address(es), `port`, the pool type, `sticky-address`,
    /// `static-port`.
    pub(super) fn nat_target(&mut self, kind: NatKind, arrow: &Token) -> PResult<NatTarget> {
        let addr = self.nat_addr()?;
        let (mut ports, mut port_star) = (None, false);
        if self.is_word("port")? {
            let pt = self.next()?;
            if kind == NatKind::Binat {
                return here(&pt, "binat translates addresses only (no port)");
            }
            let (range, star) = self.nat_port_range()?;
            ports = Some(range);
            port_star = star;
        }
        let pool = self.pool_options(kind)?;
        match &self.peek()?.tok {
            Tok::Newline | Tok::Eof => {}
            // NAT46's destination (`af-to inet6 from ... to ...`): the caller's.
            Tok::Word(w) if w == "to" && kind == NatKind::AfTo => {}
            _ => {
                self.refuse_translation_tag()?;
                return self.fail("port, a pool type (round-robin, random, source-hash, bitmask), sticky-address, static-port or end of line");
            }
        }
        let method = pool.method;
        if let (Some(t), NatAddr::Table(_)) = (&pool.method_tok, &addr)
            && method != PoolMethod::RoundRobin
        {
            return here(t, "tables are only supported in round-robin pools (pfctl)");
        }
        if let (Some(t), NatAddr::Pool(p)) = (&pool.method_tok, &addr)
            && method != PoolMethod::RoundRobin
            && p.len() != 1
        {
            return here(
                t,
                "only round-robin takes a list of addresses; other pool types need one prefix (pf.conf(5), POOL OPTIONS)",
            );
        }
        if pool.sticky && !matches!(method, PoolMethod::RoundRobin | PoolMethod::Random) {
            return here(arrow, "sticky-address only applies to round-robin and random pools");
        }
        let ports = match (kind, ports) {
            (NatKind::Nat | NatKind::AfTo, None) if pool.static_port => Some((0, 65535)),
            (NatKind::Nat | NatKind::AfTo, None) => Some(DEFAULT_NAT_PORTS),
            (_, p) => p,
        };
        Ok(NatTarget {
            addr,
            ports,
            port_star,
            method,
            sticky: pool.sticky,
            static_port: pool.static_port,
            af_dst: None,
        })
    }

    /// The translation address: `(IFACE)`, or IPv4 addresses, prefixes and ranges.
    pub(super) fn nat_addr(&mut self) -> PResult<NatAddr> {
        let at = self.peek()?.clone();
        if self.eat_punct("(")? {
            // `(em0:0)`: the interface's first address, no aliases: what `(em0)` is here.
            let t = self.peek()?.clone();
            if let Tok::Word(w) = &t.tok
                && let Some(i) = w.strip_suffix(":0").and_then(|n| (self.ifaces)(n))
            {
                self.next()?;
                self.expect_punct(")", "\")\" closing `(interface)`")?;
                return Ok(NatAddr::Iface(i));
            }
            let iface = self.iface_list()?;
            self.expect_punct(")", "\")\" closing `(interface)`")?;
            return match iface.as_slice() {
                [i] => Ok(NatAddr::Iface(*i)),
                _ => here(&at, "`({ ... })` is not supported by linerate: name one interface"),
            };
        }
        let mut items = Vec::new();
        let mut toks = Vec::new();
        if self.eat_punct("{")? {
            self.addr_list(&mut toks, false, &mut items, 0)?;
        } else {
            self.addr_item(&mut toks, false, &mut items)?;
        }
        if let [AddrItem { negated: false, target: AddrTarget::Table(t) }] = items.as_slice() {
            return Ok(NatAddr::Table(*t));
        }
        let mut prefixes: Vec<Prefix> = Vec::new();
        for item in &items {
            match item.target {
                AddrTarget::Prefix(p) if prefixes.first().is_some_and(|f| f.af != p.af) => {
                    return here(&at, "a translation pool of IPv4 and IPv6 addresses");
                }
                AddrTarget::Prefix(p) if !item.negated => prefixes.push(p),
                AddrTarget::Table(_) => {
                    return here(
                        &at,
                        "a table in a list of translation addresses (write the table alone)",
                    );
                }
                _ => return here(&at, "a translation address cannot be negated"),
            }
        }
        // IPv4 pools are expanded into a list; IPv6 ones stay prefixes (a /64 is usual).
        let v4 = prefixes.first().is_some_and(|p| p.af == Af::Inet);
        let total: u128 = prefixes.iter().map(|p: &Prefix| p.last() - p.first() + 1).sum();
        if v4 && total > MAX_POOL_ADDRS {
            return here(
                &at,
                format!("translation pool of {total} addresses (at most {})", MAX_POOL_ADDRS),
            );
        }
        Ok(NatAddr::Pool(prefixes))
    }

    /// After the target's `port`: a port, `lo:hi` or `lo:*` (`true`: the range maps onto
    /// one of the same size from `lo`).
    fn nat_port_range(&mut self) -> PResult<((u16, u16), bool)> {
        let t = self.peek()?.clone();
        let Tok::Word(w) = &t.tok else { return self.fail("a port or a range lo:hi") };
        let mut port_star = false;
        let parsed = match w.split_once(':') {
            Some((a, "*")) => super::port_number(a).map(|a| {
                port_star = true;
                (a, a)
            }),
            Some((a, b)) => {
                super::port_number(a).zip(super::port_number(b)).filter(|(a, b)| a <= b)
            }
            None => super::port_number(w).map(|p| (p, p)),
        };
        let Some(parsed) = parsed else { return self.fail("a port, a range lo:hi or lo:*") };
        self.next()?;
        Ok((parsed, port_star))
    }

    /// The pool type, `sticky-address` and `static-port`, in any order.
    fn pool_options(&mut self, kind: NatKind) -> PResult<PoolOptions> {
        let mut pool = PoolOptions {
            method: PoolMethod::RoundRobin,
            method_tok: None,
            sticky: false,
            static_port: false,
        };
        loop {
            let t = self.peek()?.clone();
            let Tok::Word(w) = &t.tok else { break };
            let m = match w.as_str() {
                "round-robin" => PoolMethod::RoundRobin,
                "random" => PoolMethod::Random,
                "source-hash" => PoolMethod::SourceHash,
                "bitmask" => PoolMethod::Bitmask,
                "sticky-address" => {
                    self.next()?;
                    pool.sticky = true;
                    continue;
                }
                "static-port" if matches!(kind, NatKind::Nat | NatKind::AfTo) => {
                    self.next()?;
                    pool.static_port = true;
                    continue;
                }
                "static-port" => return here(&t, "static-port only applies to nat rules"),
                "endpoint-independent" => {
                    return here(
                        &t,
                        "`endpoint-independent` is not supported by linerate (its translations are per flow: a reply must come from the host the inside host sent to, RFC 4787's endpoint-dependent mapping)",
                    );
                }
                "map-e-portset" => {
                    return here(
                        &t,
                        "`map-e-portset` is not supported by linerate (MAP-E port sets, RFC 7597, need the tunnel linerate does not have)",
                    );
                }
                _ => break,
            };
            self.next()?;
            pool.method = m;
            pool.method_tok = Some(t);
            if m == PoolMethod::SourceHash
                && matches!(&self.peek()?.tok, Tok::Str(_) | Tok::Word(_))
                && !self.is_word("sticky-address")?
                && !self.is_word("static-port")?
            {
                let k = self.peek()?.clone();
                return here(
                    &k,
                    "`source-hash KEY` is not supported by linerate (the hash key is fixed)",
                );
            }
        }
        Ok(pool)
    }

    /// pf's binat: one inside host or prefix, one outside address or prefix of the same length.
    fn check_binat(
        &mut self,
        first: &Token,
        src: &AddrMatch,
        target: Option<&NatTarget>,
    ) -> PResult<()> {
        let inside = match src {
            AddrMatch::List(l) => match l.as_slice() {
                [i] if !i.negated => match i.target {
                    AddrTarget::Prefix(p) => Some(p),
                    AddrTarget::Table(_) => None,
                },
                _ => None,
            },
            AddrMatch::Any => None,
        };
        let Some(inside) = inside else {
            return here(first, "binat needs `from ADDRESS[/LEN]`: one inside host or network");
        };
        if let Some(t) = target {
            let outside = match &t.addr {
                NatAddr::Pool(p) if p.len() == 1 => Some(p[0]),
                _ => None,
            };
            match outside {
                Some(o) if o.len == inside.len => {}
                _ => {
                    return here(
                        first,
                        format!(
                            "binat maps {inside} onto one outside address or prefix of the same length (/{})",
                            inside.len
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}

/// A prefix word, for the tests of this module.
#[cfg(test)]
fn p(w: &str) -> Prefix {
    super::parse_prefix(w).expect("prefix")
}

#[cfg(test)]
mod tests {
    use super::p;
    use crate::rules::{AddrMatch, PortMatch, RuleSet, parse};
    use crate::rules::{NatAddr, NatKind, PoolMethod};
    use std::path::Path;

    fn ifaces(n: &str) -> Option<u16> {
        ["lr-lan", "lr-ext"].iter().position(|x| *x == n).map(|i| i as u16)
    }

    fn ok(text: &str) -> RuleSet {
        parse(text, Path::new("nat.conf"), &ifaces).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> String {
        parse(text, Path::new("nat.conf"), &ifaces).unwrap_err().to_string()
    }

    #[test]
    fn nat_to_interface_address_with_defaults() {
        let rs = ok(
            "ext_if = \"lr-ext\"\nlan = \"10.0.0.0/24\"\nnat on $ext_if inet from $lan to any -> ($ext_if)\npass all\n",
        );
        let r = &rs.nat[0];
        assert_eq!(
            (r.kind, r.negated, r.ifaces.as_slice(), r.line, r.column),
            (NatKind::Nat, false, &[1u16][..], 3, 1)
        );
        let t = r.target.as_ref().unwrap();
        assert_eq!(t.addr, NatAddr::Iface(1));
        assert_eq!(
            (t.ports, t.method, t.sticky, t.static_port),
            (Some((50001, 65535)), PoolMethod::RoundRobin, false, false)
        );
        assert_eq!(rs.rules.len(), 1);
    }

    #[test]
    fn pools_ports_and_options() {
        let rs = ok(
            "nat on lr-ext from 10.0.0.0/24 -> { 192.0.2.1, 192.0.2.2 } port 1024:65535 round-robin sticky-address\n\
                     nat on lr-ext proto udp from 10.1.0.0/16 -> 192.0.2.16/28 source-hash static-port\n\
                     nat on lr-ext from 10.2.0.0/24 -> 198.51.100.0/24 bitmask\n",
        );
        let t = rs.nat[0].target.as_ref().unwrap();
        assert_eq!(t.addr, NatAddr::Pool(vec![p("192.0.2.1"), p("192.0.2.2")]));
        assert_eq!((t.ports, t.sticky), (Some((1024, 65535)), true));
        let t = rs.nat[1].target.as_ref().unwrap();
        assert_eq!(
            (t.method, t.static_port, t.ports),
            (PoolMethod::SourceHash, true, Some((0, 65535)))
        );
        assert_eq!(rs.nat[2].target.as_ref().unwrap().method, PoolMethod::Bitmask);
    }

    /// A table as the pool: round-robin over its addresses, pfctl's only pool type for one.
    #[test]
    fn a_table_as_the_pool() {
        let rs = ok(
            "table <pool> { 192.0.2.10 192.0.2.11 }\nnat on lr-ext from 10.0.0.0/8 -> <pool> sticky-address\n",
        );
        let t = rs.nat[0].target.as_ref().unwrap();
        assert_eq!(
            (&t.addr, t.method, t.sticky),
            (&NatAddr::Table(0), PoolMethod::RoundRobin, true)
        );
        let printed = rs.to_pf_text(&["lr-lan", "lr-ext"]).unwrap();
        assert!(printed.contains("-> <pool> round-robin sticky-address"), "{printed}");
        for (text, want) in [
            (
                "table <pool> { 192.0.2.10 }\nnat on lr-ext from any -> <pool> random\n",
                "nat.conf:2:34: tables are only supported in round-robin pools",
            ),
            (
                "table <pool> { 192.0.2.10 }\nnat on lr-ext from any -> { <pool> 192.0.2.1 }\n",
                "nat.conf:2:27: a table in a list of translation addresses",
            ),
        ] {
            let e = parse(text, Path::new("nat.conf"), &ifaces).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }

    /// NAT66: `inet6` written, or taken from the pool or the addresses, as pfctl does.
    #[test]
    fn ipv6_translation_rules() {
        let rs = ok("nat on lr-ext inet6 from fd00::/64 to any -> (lr-ext)\n\
                     rdr on lr-ext proto tcp to 2001:db8::1 port 80 -> fd00::10 port 8080\n\
                     binat on lr-ext from fd00::7/128 to any -> 2001:db8::7\n\
                     nat on lr-ext from any -> 2001:db8:1::/64 source-hash\n\
                     nat on lr-ext from 10.0.0.0/8 -> (lr-ext)\n");
        use crate::packet::Af;
        let afs: Vec<Option<Af>> = rs.nat.iter().map(|r| r.af).collect();
        assert_eq!(afs, [Some(Af::Inet6), Some(Af::Inet6), Some(Af::Inet6), Some(Af::Inet6), None]);
        assert_eq!(rs.nat[0].target.as_ref().unwrap().addr, NatAddr::Iface(1));
        let t = rs.nat[3].target.as_ref().unwrap();
        assert_eq!(t.addr, NatAddr::Pool(vec![p("2001:db8:1::/64")]));
    }

    #[test]
    fn rdr_binat_and_no() {
        let rs = ok("table <web> { 192.0.2.80 }\n\
                     no rdr on lr-ext proto tcp from 203.0.113.9 to any port 80\n\
                     rdr on lr-ext proto tcp from any to <web> port 80 -> 10.0.0.5 port 8080\n\
                     rdr on lr-ext proto tcp to (lr-ext) port 2000:2999 -> 10.0.0.6 port 4000:*\n\
                     binat on lr-ext from 10.0.0.7 to any -> 192.0.2.7\n");
        assert!(rs.nat[0].negated && rs.nat[0].target.is_none());
        let r = &rs.nat[1];
        assert_eq!(
            (r.kind, r.dst_ports.clone()),
            (NatKind::Rdr, PortMatch::Ranges(vec![(80, 80)]))
        );
        assert!(matches!(r.dst, AddrMatch::List(_)));
        assert_eq!(r.target.as_ref().unwrap().ports, Some((8080, 8080)));
        let t = rs.nat[2].target.as_ref().unwrap();
        assert_eq!(
            (t.ports, t.port_star, rs.nat[2].dst_iface),
            (Some((4000, 4000)), true, Some(1))
        );
        assert_eq!(rs.nat[3].target.as_ref().unwrap().addr, NatAddr::Pool(vec![p("192.0.2.7")]));
    }

    #[test]
    fn pass_on_translation_rules() {
        let rs = ok("nat pass on lr-ext from 10.0.0.0/24 -> (lr-ext)\n\
                     rdr pass on lr-ext proto tcp to (lr-ext) port 80 -> 10.0.0.5 port 8080\n\
                     binat pass on lr-ext from 10.0.0.7 -> 192.0.2.7\n\
                     nat on lr-ext from 10.0.1.0/24 -> (lr-ext)\n\
                     block all\n");
        assert_eq!(
            rs.nat.iter().map(|r| (r.kind, r.pass)).collect::<Vec<_>>(),
            [
                (NatKind::Nat, true),
                (NatKind::Rdr, true),
                (NatKind::Binat, true),
                (NatKind::Nat, false)
            ]
        );
        assert_eq!(rs.nat[1].target.as_ref().unwrap().ports, Some((8080, 8080)));
        // `block all` acts on both passes anyway; a pass translation rule alone makes its pass
        // one the data plane must run (for the state it keeps).
        use crate::packet::Dir;
        let only = |text: &str| {
            let rs = ok(text);
            (rs.acts_on(Dir::In), rs.acts_on(Dir::Out))
        };
        assert_eq!(
            only("nat pass on lr-ext from 10.0.0.0/24 -> (lr-ext)\npass all no state\n"),
            (false, true)
        );
        assert_eq!(
            only("rdr pass on lr-ext proto tcp to port 80 -> 10.0.0.5\npass all no state\n"),
            (true, false)
        );
        assert_eq!(
            only("nat on lr-ext from 10.0.0.0/24 -> (lr-ext)\npass all no state\n"),
            (false, false)
        );
    }

    #[test]
    fn errors_name_the_position() {
        for (text, want) in [
            (
                "pass all\nnat on lr-ext from any -> 192.0.2.1\n",
                "nat.conf:2:1: translation rules (nat, rdr, binat) must come before filter rules",
            ),
            (
                "nat on lr-ext from any\n",
                "nat.conf:1:23: expected \"->\" and the translation address, found end of line",
            ),
            (
                "nat pass log on lr-ext from any -> 192.0.2.1\n",
                "nat.conf:1:10: `nat pass log` is not supported by linerate",
            ),
            (
                "no rdr pass on lr-ext proto tcp to port 80\n",
                "nat.conf:1:8: `no rdr` translates nothing: it takes no `pass`",
            ),
            (
                "nat on lr-ext inet from any -> 2001:db8::1\n",
                "nat.conf:1:1: the translation address is not of the rule's family (inet)",
            ),
            (
                "nat on lr-ext from 10.0.0.0/8 -> 2001:db8::1\n",
                "nat.conf:1:20: an inet address in a rule for inet6",
            ),
            (
                "nat on lr-ext from any -> { 192.0.2.1 2001:db8::1 }\n",
                "nat.conf:1:27: a translation pool of IPv4 and IPv6 addresses",
            ),
            (
                "nat on lr-ext from any -> { 192.0.2.1 192.0.2.2 } random\n",
                "nat.conf:1:51: only round-robin takes a list of addresses",
            ),
            (
                "nat on lr-ext from any -> 192.0.2.0/24 source-hash 0xabcd\n",
                "nat.conf:1:52: `source-hash KEY` is not supported by linerate",
            ),
            (
                "nat on lr-ext from any -> 192.0.2.0/24 bitmask sticky-address\n",
                "nat.conf:1:24: sticky-address only applies to round-robin and random pools",
            ),
            (
                "no nat on lr-ext from any -> 192.0.2.1\n",
                "nat.conf:1:27: `no nat` takes no translation",
            ),
            (
                "binat on lr-ext from any -> 192.0.2.7\n",
                "nat.conf:1:1: binat needs `from ADDRESS[/LEN]`",
            ),
            (
                "binat on lr-ext from 10.0.0.0/24 -> 192.0.2.7\n",
                "nat.conf:1:1: binat maps 10.0.0.0/24 onto one outside address or prefix of the same length",
            ),
            (
                "rdr on lr-ext proto tcp to port 80 -> 10.0.0.5 port 8080 static-port\n",
                "nat.conf:1:58: static-port only applies to nat rules",
            ),
            (
                "nat on lr-ext from any -> 192.0.2.1 tag foo\n",
                "nat.conf:1:37: `tag` is not supported by linerate",
            ),
            ("nat on lr-nope from any -> 192.0.2.1\n", "nat.conf:1:8: unknown interface"),
            (
                "rdr on lr-ext to port 80 -> 10.0.0.5\n",
                "nat.conf:1:18: port only applies to proto tcp or udp",
            ),
            ("nat on lr-ext from any -> (lr-ext:network)\n", "nat.conf:1:"),
        ] {
            let e = err(text);
            assert!(e.starts_with(want), "{text:?}: got {e:?}, want {want:?}");
        }
    }
}
