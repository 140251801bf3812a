//! The hosts of filter and translation rules: `all`, or `from` and `to` with addresses,
//! tables, interfaces and ports, and the checks that tie them to the rule's family and
//! protocols.

use super::*;
use crate::packet::route;

/// Host lists nest (a macro holding a list inside another list); deeper than this is an error.
const MAX_LIST_DEPTH: usize = 16;

/// What `all` / `from ... to ...` named.
pub(super) struct Hosts {
    pub(super) src: AddrMatch,
    pub(super) src_ports: PortMatch,
    pub(super) dst: AddrMatch,
    pub(super) dst_ports: PortMatch,
    /// A translation rule's `to (IFACE)`.
    pub(super) dst_iface: Option<u16>,
    /// Each address written, with its family and whether it is a source, for the checks.
    pub(super) addr_toks: Vec<(Token, Af, bool)>,
    /// The first `port` keyword, for the check that ports need TCP or UDP.
    pub(super) port_tok: Option<Token>,
    /// `no-route` / `urpf-failed` hosts: see [`Rule::route_need`].
    pub(super) route_need: u8,
    pub(super) route_refuse: u8,
    /// The first of them, for the error of rules that cannot have them.
    pub(super) route_tok: Option<Token>,
}

/// pf's address family rules: an address of one family in a rule of the other, or a
/// source and destination of different families (each all prefixes of one family), is an
/// error.
pub(super) fn check_families(af: Option<Af>, hosts: &Hosts) -> PResult<()> {
    let addr_toks = &hosts.addr_toks;
    for (t, iaf, _) in addr_toks {
        if let Some(raf) = af
            && raf != *iaf
        {
            return here(
                t,
                format!(
                    "address family mismatch: the rule is {} but this address is {}",
                    af_name(raf),
                    af_name(*iaf)
                ),
            );
        }
    }
    let fam = |is_src: bool| {
        let v: Vec<Af> = addr_toks.iter().filter(|x| x.2 == is_src).map(|x| x.1).collect();
        let all_prefix = match if is_src { &hosts.src } else { &hosts.dst } {
            AddrMatch::Any => false,
            AddrMatch::List(l) => l.iter().all(|i| matches!(i.target, AddrTarget::Prefix(_))),
        };
        if all_prefix && !v.is_empty() && v.iter().all(|a| *a == v[0]) { Some(v[0]) } else { None }
    };
    if let (Some(s), Some(d)) = (fam(true), fam(false))
        && s != d
    {
        let t = addr_toks.iter().find(|x| !x.2).expect("dst").0.clone();
        return here(&t, "address family mismatch between source and destination");
    }
    Ok(())
}

/// Ports name TCP or UDP ports: a rule with ports must be limited to those protocols.
pub(super) fn check_ports_need_tcp_udp(port_tok: Option<&Token>, protos: &[u8]) -> PResult<()> {
    if let Some(t) = port_tok
        && (protos.is_empty()
            || protos
                .iter()
                .any(|p| *p != crate::packet::proto::TCP && *p != crate::packet::proto::UDP))
    {
        return here(t, "port only applies to proto tcp or udp");
    }
    Ok(())
}

impl Hosts {
    /// Hosts from `src` (address, ports) to `dst`, with nothing else written.
    pub(super) fn between(
        (src, src_ports): (AddrMatch, PortMatch),
        (dst, dst_ports): (AddrMatch, PortMatch),
    ) -> Hosts {
        Hosts {
            src,
            src_ports,
            dst,
            dst_ports,
            dst_iface: None,
            addr_toks: Vec::new(),
            port_tok: None,
            route_need: 0,
            route_refuse: 0,
            route_tok: None,
        }
    }
}

impl Parser<'_> {
    /// `all`, or `[from ipportspec] [to ipportspec]`. With `iface_dst`, `to (IFACE)` is
    /// accepted (translation rules); a list there is refused at that token.
    pub(super) fn hosts(&mut self, iface_dst: Option<&Token>) -> PResult<Hosts> {
        let mut hosts =
            Hosts::between((AddrMatch::Any, PortMatch::Any), (AddrMatch::Any, PortMatch::Any));
        if self.eat_word("all")? {
            return Ok(hosts);
        }
        if self.eat_word("from")? {
            if !self.route_host(&mut hosts, true)? && !self.is_word("port")? {
                hosts.src = self.addr_match(&mut hosts.addr_toks, true)?;
            }
            if self.is_word("port")? {
                hosts.port_tok = Some(self.next()?);
                hosts.src_ports = self.port_spec()?;
            }
        }
        if self.eat_word("to")? {
            if let Some(first) = iface_dst
                && self.eat_punct("(")?
            {
                let i = self.iface_list()?;
                self.expect_punct(")", "\")\" closing `(interface)`")?;
                hosts.dst_iface = i.first().copied().filter(|_| i.len() == 1);
                if hosts.dst_iface.is_none() {
                    return here(
                        first,
                        "`to ({ ... })` is not supported by linerate: name one interface",
                    );
                }
            } else if !self.route_host(&mut hosts, false)? && !self.is_word("port")? {
                hosts.dst = self.addr_match(&mut hosts.addr_toks, false)?;
            }
            if self.is_word("port")? {
                let t = self.next()?;
                hosts.port_tok.get_or_insert(t);
                hosts.dst_ports = self.port_spec()?;
            }
        }
        Ok(hosts)
    }

    /// pf's `[!] no-route` (from or to) and `[!] urpf-failed` (from only) as the whole host:
    /// recorded in `hosts` as a [`route`] bit the packet must have or lack. Whether it was
    /// one.
    fn route_host(&mut self, hosts: &mut Hosts, is_src: bool) -> PResult<bool> {
        let negated = self.is_punct("!")?;
        // The word after a `!` is two raw tokens ahead (the next is the `!`).
        let ahead = self.toks.len() - if negated { 2 } else { 1 };
        let t = self.toks[ahead].clone();
        let Tok::Word(w) = &t.tok else { return Ok(false) };
        let bit = match (w.as_str(), is_src) {
            ("no-route", true) => route::SRC_NO_ROUTE,
            ("no-route", false) => route::DST_NO_ROUTE,
            ("urpf-failed", true) => route::SRC_URPF_FAILED,
            ("urpf-failed", false) => {
                return here(&t, "urpf-failed only applies to a source (`from urpf-failed`)");
            }
            _ => return Ok(false),
        };
        if negated {
            self.next()?;
        }
        self.next()?;
        if negated {
            hosts.route_refuse |= bit;
        } else {
            hosts.route_need |= bit;
        }
        hosts.route_tok.get_or_insert(t);
        Ok(true)
    }

    pub(super) fn addr_match(
        &mut self,
        toks: &mut Vec<(Token, Af, bool)>,
        is_src: bool,
    ) -> PResult<AddrMatch> {
        if self.eat_word("any")? {
            return Ok(AddrMatch::Any);
        }
        if self.eat_punct("{")? {
            // OPNsense writes `from {any}`: pfctl takes a list of `any` alone as `any`.
            self.skip_newlines()?;
            let t = self.peek()?.clone();
            if self.eat_word("any")? {
                self.skip_newlines()?;
                self.eat_punct(",")?;
                self.skip_newlines()?;
                if self.eat_punct("}")? {
                    return Ok(AddrMatch::Any);
                }
                return here(
                    &t,
                    "`any` in a list with other hosts is not supported by linerate (pfctl leaves it out of such a list: write the list without it)",
                );
            }
            let mut items = Vec::new();
            self.addr_list(toks, is_src, &mut items, 0)?;
            return Ok(AddrMatch::List(items));
        }
        let mut items = Vec::new();
        self.addr_item(toks, is_src, &mut items)?;
        Ok(AddrMatch::List(items))
    }

    /// The rest of a `{ ... }` host list (the `{` is consumed); nested lists (from macros
    /// holding lists) are flattened, as pfctl does.
    pub(super) fn addr_list(
        &mut self,
        toks: &mut Vec<(Token, Af, bool)>,
        is_src: bool,
        items: &mut Vec<AddrItem>,
        depth: usize,
    ) -> PResult<()> {
        let mut n = 0;
        loop {
            self.skip_newlines()?;
            if n > 0 && self.eat_punct("}")? {
                return Ok(());
            }
            let t = self.peek()?.clone();
            if self.eat_punct("{")? {
                if depth >= MAX_LIST_DEPTH {
                    return here(&t, format!("host lists nested more than {MAX_LIST_DEPTH} deep"));
                }
                self.addr_list(toks, is_src, items, depth + 1)?;
            } else {
                self.addr_item(toks, is_src, items)?;
            }
            n += 1;
            self.eat_punct(",")?;
        }
    }

    /// One host of an address: `[!] prefix`, `[!] <table>`, or a range `a - b` (several
    /// prefixes), appended to `out`.
    pub(super) fn addr_item(
        &mut self,
        toks: &mut Vec<(Token, Af, bool)>,
        is_src: bool,
        out: &mut Vec<AddrItem>,
    ) -> PResult<()> {
        const WHAT: &str = "an address, a prefix, a table <name> or \"any\"";
        let negated = self.eat_punct("!")?;
        self.refuse_unsupported_address()?;
        let t = self.peek()?.clone();
        if matches!(&t.tok, Tok::Word(w) if w == "any") {
            return here(
                &t,
                "`any` in a list with other hosts is not supported by linerate (pfctl leaves it out of such a list: write the list without it)",
            );
        }
        match &t.tok {
            Tok::Punct("<") => {
                self.next()?;
                let (name, _) = self.word("a table name")?;
                self.expect_punct(">", "\">\" closing the table name")?;
                let i = self.table_named(&name);
                out.push(AddrItem { negated, target: AddrTarget::Table(i) });
                Ok(())
            }
            Tok::Word(w) => match parse_prefix(w) {
                Some(p) => {
                    self.next()?;
                    toks.push((t.clone(), p.af, is_src));
                    match self.address_range(p, &t, negated)? {
                        Some(items) => out.extend(items),
                        None => out.push(AddrItem { negated, target: AddrTarget::Prefix(p) }),
                    }
                    Ok(())
                }
                None => {
                    // pf's interface addresses: `self`, `em0`, `em0:network`, `em0/24`, ...
                    let name = w.split([':', '/']).next().unwrap_or(w);
                    if name == "self" || (self.ifaces)(name).is_some() {
                        self.next()?;
                        let target = self.iface_hosts(&t, w)?;
                        out.push(AddrItem { negated, target });
                        return Ok(());
                    }
                    // A host name, which pfctl resolves when it loads the file.
                    if let Some(target) = self.host_name(&t, w)? {
                        self.next()?;
                        out.push(AddrItem { negated, target });
                        return Ok(());
                    }
                    self.fail(WHAT)
                }
            },
            Tok::Punct("(") => {
                self.next()?;
                let (w, nt) = self.word("an interface name")?;
                self.expect_punct(")", "\")\" closing the interface")?;
                let target = self.iface_hosts(&nt, &w)?;
                out.push(AddrItem { negated, target });
                Ok(())
            }
            _ => self.fail(WHAT),
        }
    }

    pub(super) fn port_spec(&mut self) -> PResult<PortMatch> {
        let mut ranges = Vec::new();
        if self.eat_punct("{")? {
            let mut n = 0;
            loop {
                self.skip_newlines()?;
                if n > 0 && self.eat_punct("}")? {
                    break;
                }
                let t = self.peek()?;
                if matches!(t.tok, Tok::Punct("{")) {
                    return here(
                        t,
                        "port lists do not nest in pf's grammar (a macro holding `{ ... }` inside a list of ports): write the ports as one list",
                    );
                }
                self.port_item(&mut ranges)?;
                n += 1;
                self.eat_punct(",")?;
            }
        } else {
            self.port_item(&mut ranges)?;
        }
        Ok(PortMatch::Ranges(ranges))
    }

    pub(super) fn port_value(&mut self) -> PResult<u16> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && let Some(p) = port_number(w)
        {
            self.next()?;
            return Ok(p);
        }
        self.fail("a port number (0-65535) or service name")
    }

    pub(super) fn port_item(&mut self, out: &mut Vec<(u16, u16)>) -> PResult<()> {
        let t = self.peek()?.clone();
        if let Tok::Punct(op) = &t.tok {
            let op = *op;
            if matches!(op, "=" | "!=" | "<" | "<=" | ">" | ">=") {
                self.next()?;
                let p = self.port_value()?;
                match op {
                    "=" => out.push((p, p)),
                    "!=" => {
                        if p > 0 {
                            out.push((0, p - 1));
                        }
                        if p < u16::MAX {
                            out.push((p + 1, u16::MAX));
                        }
                    }
                    "<" => {
                        if p > 0 {
                            out.push((0, p - 1));
                        }
                    }
                    "<=" => out.push((0, p)),
                    ">" => {
                        if p < u16::MAX {
                            out.push((p + 1, u16::MAX));
                        }
                    }
                    _ => out.push((p, u16::MAX)),
                }
                return Ok(());
            }
        }
        if let Tok::Word(w) = &t.tok
            && let Some((a, b)) = w.split_once(':')
        {
            let (Some(a), Some(b)) = (port_number(a), port_number(b)) else {
                return self.fail("a port range lo:hi");
            };
            self.next()?;
            if a > b {
                // pfctl takes it (PF_OP_RRG with lo > hi), and pf's test matches no port.
                self.notice(
                    &t,
                    format!("port range {a}:{b} runs high to low: as in pf, it matches no port"),
                );
                return Ok(());
            }
            out.push((a, b));
            return Ok(());
        }
        let a = self.port_value()?;
        if self.eat_punct("><")? {
            let b = self.port_value()?;
            if b > 0 && a < b - 1 {
                out.push((a + 1, b - 1));
            }
        } else if self.eat_punct("<>")? {
            let b = self.port_value()?;
            if a > 0 {
                out.push((0, a - 1));
            }
            if b < u16::MAX {
                out.push((b + 1, u16::MAX));
            }
        } else {
            out.push((a, a));
        }
        Ok(())
    }
}
