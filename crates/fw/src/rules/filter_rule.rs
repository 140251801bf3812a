//! Filter rules: `pass` / `block` with their hosts, ports, protocols and options.

use super::*;

impl Parser<'_> {
    pub(super) fn rule(&mut self) -> PResult<()> {
        let (a, at) = self.word("pass or block")?;
        let action = if a == "pass" {
            Action::Pass
        } else {
            Action::Block
        };
        let block_return = if action == Action::Block { self.block_return()? } else { self.refuse_return()? };
        let dir = if self.eat_word("in")? {
            Some(Dir::In)
        } else if self.eat_word("out")? {
            Some(Dir::Out)
        } else {
            None
        };
        let log = self.log_mode()?;
        self.refuse_unsupported("")?;
        let quick = self.eat_word("quick")?;
        let (mut ifaces, mut iface_neg) = (Vec::new(), false);
        if self.eat_word("on")? {
            iface_neg = self.eat_punct("!")?;
            if iface_neg && self.is_punct("{")? {
                let t = self.peek()?.clone();
                return here(&t, "`on ! { ... }` is not supported by linerate (negate a single interface)");
            }
            ifaces = self.iface_list()?;
        }
        self.refuse_unsupported_option("")?;
        let af = if self.eat_word("inet")? {
            Some(Af::Inet)
        } else if self.eat_word("inet6")? {
            Some(Af::Inet6)
        } else {
            None
        };
        let mut protos = Vec::new();
        if self.eat_word("proto")? {
            protos = self.proto_list()?;
            protos.sort_unstable();
            protos.dedup();
        }
        let (mut src, mut dst) = (AddrMatch::Any, AddrMatch::Any);
        let (mut src_ports, mut dst_ports) = (PortMatch::Any, PortMatch::Any);
        let mut port_tok: Option<Token> = None;
        let mut addr_toks: Vec<(Token, Af, bool)> = Vec::new(); // (pos, af, is_src)
        self.refuse_unsupported_option("")?;
        if self.eat_word("all")? {
        } else {
            if self.eat_word("from")? {
                if !self.is_word("port")? {
                    src = self.addr_match(&mut addr_toks, true)?;
                }
                if self.is_word("port")? {
                    port_tok = Some(self.next()?);
                    src_ports = self.port_spec()?;
                }
            }
            if self.eat_word("to")? {
                if !self.is_word("port")? {
                    dst = self.addr_match(&mut addr_toks, false)?;
                }
                if self.is_word("port")? {
                    let t = self.next()?;
                    port_tok.get_or_insert(t);
                    dst_ports = self.port_spec()?;
                }
            }
        }
        let mut flags: Option<Option<(u8, u8)>> = None;
        let mut keep: Option<(StateMode, Token)> = None;
        let mut label = None;
        let mut allow_opts: Option<Token> = None;
        let mut state_policy = None;
        let (mut icmp_types, mut icmp_code) = (Vec::new(), None);
        let mut icmp_tok: Option<(Token, u8)> = None;
        loop {
            let t = self.peek()?.clone();
            match &t.tok {
                Tok::Newline | Tok::Eof => break,
                Tok::Word(w) if w == "flags" => {
                    self.next()?;
                    if self.eat_word("any")? {
                        flags = Some(None);
                    } else {
                        let ft = self.peek()?.clone();
                        match &ft.tok {
                            Tok::Word(w) if parse_flags(w).is_some() => {
                                flags = Some(parse_flags(w));
                                self.next()?;
                            }
                            _ => {
                                return self.fail("TCP flags set/mask (e.g. S/SA, /SA) or \"any\"");
                            }
                        }
                    }
                }
                Tok::Word(w) if w == "keep" => {
                    self.next()?;
                    self.expect_word("state")?;
                    let mut mode = StateMode::Keep;
                    if self.eat_punct("(")? {
                        loop {
                            if self.eat_word("sloppy")? {
                                mode = StateMode::KeepSloppy;
                            } else if self.eat_word("if-bound")? {
                                state_policy = Some(StatePolicy::IfBound);
                            } else if self.eat_word("floating")? {
                                state_policy = Some(StatePolicy::Floating);
                            } else {
                                self.refuse_unsupported_option("")?;
                                return self.fail("a state option (sloppy, if-bound, floating)");
                            }
                            if self.eat_punct(")")? {
                                break;
                            }
                            self.expect_punct(",", "\",\" or \")\"")?;
                        }
                    }
                    keep = Some((mode, t));
                }
                Tok::Word(w) if w == "no" => {
                    self.next()?;
                    self.expect_word("state")?;
                    keep = Some((StateMode::None, t));
                }
                Tok::Word(w) if w == "allow-opts" => {
                    self.next()?;
                    allow_opts = Some(t);
                }
                Tok::Word(w) if w == "label" => {
                    self.next()?;
                    let lt = self.peek()?.clone();
                    let Tok::Str(s) = &lt.tok else {
                        return self.fail("a quoted label");
                    };
                    label = Some(s.clone());
                    self.next()?;
                }
                Tok::Word(w) if w == "icmp-type" || w == "icmp6-type" => {
                    let want = if w == "icmp-type" {
                        crate::packet::proto::ICMP
                    } else {
                        crate::packet::proto::ICMPV6
                    };
                    self.next()?;
                    let v6 = want == crate::packet::proto::ICMPV6;
                    if self.eat_punct("{")? {
                        icmp_types = self.icmp_type_list(v6)?;
                    } else {
                        icmp_types = vec![self.icmp_type(v6)?];
                        if self.eat_word("code")? {
                            icmp_code = Some(self.number("an ICMP code (0-255)", 255)? as u8);
                        }
                    }
                    icmp_tok = Some((t, want));
                }
                _ => {
                    self.refuse_unsupported_option("")?;
                    return self.fail(
                        "flags, keep state, no state, allow-opts, label, icmp-type, icmp6-type or end of line",
                    );
                }
            }
        }
        // Semantic checks, pf's defaults.
        for (t, iaf, _) in &addr_toks {
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
            let v: Vec<Af> = addr_toks
                .iter()
                .filter(|x| x.2 == is_src)
                .map(|x| x.1)
                .collect();
            let all_prefix = match if is_src { &src } else { &dst } {
                AddrMatch::Any => false,
                AddrMatch::List(l) => l.iter().all(|i| matches!(i.target, AddrTarget::Prefix(_))),
            };
            if all_prefix && !v.is_empty() && v.iter().all(|a| *a == v[0]) {
                Some(v[0])
            } else {
                None
            }
        };
        if let (Some(s), Some(d)) = (fam(true), fam(false))
            && s != d
        {
            let t = addr_toks.iter().find(|x| !x.2).expect("dst").0.clone();
            return here(&t, "address family mismatch between source and destination");
        }
        if let Some(t) = &port_tok
            && (protos.is_empty()
                || protos
                    .iter()
                    .any(|p| *p != crate::packet::proto::TCP && *p != crate::packet::proto::UDP))
        {
            return here(t, "port only applies to proto tcp or udp");
        }
        if let Some((t, want)) = &icmp_tok
            && protos != [*want]
        {
            let kw = if *want == crate::packet::proto::ICMP {
                "icmp-type requires proto icmp"
            } else {
                "icmp6-type requires proto icmp6"
            };
            return here(t, kw);
        }
        let keep_state = match (&keep, action) {
            (Some((m, t)), Action::Block) if *m != StateMode::None => {
                return here(t, "keep state only applies to pass rules");
            }
            (Some((m, _)), _) => *m,
            (None, Action::Pass) => StateMode::Keep,
            (None, Action::Block) => StateMode::None,
        };
        if let Some(t) = &allow_opts
            && action == Action::Block
        {
            return here(t, "allow-opts only applies to pass rules");
        }
        let flags = match flags {
            Some(f) => f,
            None if keep_state != StateMode::None => Some(DEFAULT_FLAGS),
            None => None,
        };
        self.rs.rules.push(Rule {
            action,
            block_return,
            dir,
            quick,
            ifaces,
            iface_neg,
            af,
            protos,
            src,
            src_ports,
            dst,
            dst_ports,
            icmp_types,
            icmp_code,
            flags,
            keep_state,
            state_policy,
            allow_opts: allow_opts.is_some(),
            label,
            log,
            line: at.line,
        });
        Ok(())
    }

    /// After `proto`: one protocol or a `{ ... }` list.
    pub(super) fn proto_list(&mut self) -> PResult<Vec<u8>> {
        if !self.eat_punct("{")? {
            return Ok(vec![self.proto()?]);
        }
        let mut protos = Vec::new();
        loop {
            self.skip_newlines()?;
            if !protos.is_empty() && self.eat_punct("}")? {
                return Ok(protos);
            }
            protos.push(self.proto()?);
            self.eat_punct(",")?;
        }
    }

    pub(super) fn proto(&mut self) -> PResult<u8> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok {
            let p = match w.as_str() {
                "tcp" => Some(6),
                "udp" => Some(17),
                "icmp" => Some(1),
                "icmp6" | "ipv6-icmp" => Some(58),
                "gre" => Some(47),
                "esp" => Some(50),
                "ah" => Some(51),
                "sctp" => Some(132),
                w => w.parse::<u8>().ok(),
            };
            if let Some(p) = p {
                self.next()?;
                return Ok(p);
            }
        }
        self.fail("a protocol (tcp, udp, icmp, icmp6, gre, esp, ah, sctp or a number 0-255)")
    }

    pub(super) fn icmp_type(&mut self, v6: bool) -> PResult<u8> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok {
            let named = if v6 {
                match w.as_str() {
                    "unreach" => Some(1),
                    "toobig" => Some(2),
                    "timex" => Some(3),
                    "paramprob" => Some(4),
                    "echoreq" => Some(128),
                    "echorep" => Some(129),
                    "routersol" => Some(133),
                    "routeradv" => Some(134),
                    "neighbrsol" => Some(135),
                    "neighbradv" => Some(136),
                    _ => None,
                }
            } else {
                match w.as_str() {
                    "echorep" => Some(0),
                    "unreach" => Some(3),
                    "squench" => Some(4),
                    "redir" => Some(5),
                    "echoreq" => Some(8),
                    "routeradv" => Some(9),
                    "routersol" => Some(10),
                    "timex" => Some(11),
                    "paramprob" => Some(12),
                    _ => None,
                }
            };
            if let Some(n) = named.or_else(|| w.parse::<u8>().ok()) {
                self.next()?;
                return Ok(n);
            }
        }
        self.fail(
            "an ICMP type (a number 0-255 or echoreq, echorep, unreach, timex, paramprob, ...)",
        )
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
            if depth < 16 && self.eat_punct("{")? {
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
    pub(super) fn addr_item(&mut self, toks: &mut Vec<(Token, Af, bool)>, is_src: bool, out: &mut Vec<AddrItem>) -> PResult<()> {
        const WHAT: &str = "an address, a prefix, a table <name> or \"any\"";
        let negated = self.eat_punct("!")?;
        self.refuse_unsupported_address()?;
        let t = self.peek()?.clone();
        match &t.tok {
            Tok::Punct("<") => {
                self.next()?;
                let (name, nt) = self.word("a table name")?;
                self.expect_punct(">", "\">\" closing the table name")?;
                match self.table_idx.get(&name) {
                    Some(&i) => {
                        out.push(AddrItem { negated, target: AddrTarget::Table(i) });
                        Ok(())
                    }
                    None => here(
                        &nt,
                        format!(
                            "undefined table <{name}> (define it with `table <{name}> {{ ... }}` first)"
                        ),
                    ),
                }
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
                    // pf's interface addresses: `self`, `em0`, `em0:network`, ...
                    let name = w.split(':').next().unwrap_or(w);
                    if name == "self" || (self.ifaces)(name).is_some() {
                        self.next()?;
                        let target = self.iface_hosts(&t, w)?;
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
            if a > b {
                return here(&t, format!("empty port range {a}:{b}"));
            }
            self.next()?;
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
