//! Parts of the rule syntax kept out of the main parser: interface and ICMP type lists,
//! address ranges (`a - b`), `log` options, and pf's keywords that linerate refuses by name.

use super::{AddrItem, AddrTarget, PResult, Parser, Prefix, Tok, Token, here};
use crate::packet::Af;

/// pf options linerate does not implement: named in an error ("`X` is not supported by
/// linerate") rather than reported as unknown words or, worse, accepted and ignored.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "route-to",
    "reply-to",
    "dup-to",
    "rdr-to",
    "nat-to",
    "binat-to",
    "af-to",
    "divert-to",
    "divert-reply",
    "divert-packet",
    "queue",
    "prio",
    "set",
    "probability",
    "rtable",
    "rdomain",
    "user",
    "group",
    "os",
    "max",
    "max-pkt-rate",
    "pflow",
    "no-sync",
    "once",
    "received-on",
    "fragment",
    "tos",
    "reassemble",
    "scrub",
    "adaptive.start",
    "adaptive.end",
    "sticky-address",
    "route",
    "dnqueue",
    "dnpipe",
];

/// Why each word of the lists above is refused, shown after the error.
const OPTION_REASONS: &[(&str, &str)] = &[
    ("route-to", "only on `pass in` filter rules"),
    ("reply-to", "only on `pass in` filter rules"),
    ("dup-to", "linerate does not duplicate packets"),
    ("af-to", "only on `pass in` filter rules"),
    ("rdr-to", "only on `pass in` filter rules"),
    ("nat-to", "only on `pass out` filter rules and `match out` rules"),
    ("no-sync", "write it inside `keep state (...)`"),
    ("binat-to", "write a `binat` rule"),
    (
        "divert-to",
        "linerate hands no packet to a local socket: it forwards them, and its host stack is the kernel's",
    ),
    ("divert-reply", "linerate hands no packet to a local socket"),
    ("divert-packet", "linerate hands no packet to a divert(4) socket"),
    ("queue", "linerate does not shape traffic: no ALTQ or queues"),
    ("prio", "linerate does not shape traffic: no priority queues"),
    (
        "set",
        "rules do not set priorities, queues or the TOS here; `scrub (set-tos N)` sets the TOS",
    ),
    ("probability", "linerate gives every packet of a flow the same verdict"),
    ("rtable", "linerate has one routing table"),
    ("rdomain", "linerate has one routing domain"),
    (
        "user",
        "pf asks the local socket's owner; linerate forwards other hosts' packets, which have no local socket",
    ),
    (
        "group",
        "pf asks the local socket's owner; linerate forwards other hosts' packets, which have no local socket",
    ),
    ("os", "no passive OS fingerprinting (pf.os)"),
    ("max", "write it inside `keep state (...)`"),
    ("max-pkt-rate", "no per-rule packet rate limit"),
    ("pflow", "no pflow(4) flow export"),
    ("once", "linerate's rules change only by a reload"),
    ("received-on", "not implemented: `in on IFACE` matches the input of inbound packets"),
    ("fragment", "linerate judges each fragment with its datagram's ports instead"),
    ("tos", "matching the TOS byte is not implemented"),
    (
        "reassemble",
        "linerate does not reassemble fragments: it judges each with its datagram's ports",
    ),
    ("scrub", "on a filter rule: write a `scrub` rule or `match ... scrub (...)`"),
    ("adaptive.start", "write it inside `keep state (...)`"),
    ("adaptive.end", "write it inside `keep state (...)`"),
    (
        "sticky-address",
        "a translation pool's option: write it after a `nat-to`, `rdr-to` or a translation rule's pool",
    ),
    ("dnqueue", "no dummynet: linerate does not shape traffic"),
    ("dnpipe", "no dummynet: linerate does not shape traffic"),
    ("altq", "linerate does not shape traffic: no ALTQ or queues"),
    ("ether", "layer 2 filtering (`ether` rules) is not implemented"),
    ("syncookies", "no SYN cookies: `synproxy state` protects servers from SYN floods"),
    ("fail-policy", "linerate's `router.fail_closed` decides what happens when it cannot filter"),
    ("timeout-adaptive", "write `set timeout { adaptive.start N, adaptive.end M }`"),
    ("route", "linerate's routes have no labels"),
];

/// pf statements linerate does not implement.
const UNSUPPORTED_STATEMENTS: &[&str] = &["queue", "altq", "ether"];

/// `set` options linerate does not implement.
const UNSUPPORTED_SET: &[&str] = &["syncookies", "fail-policy", "prio", "timeout-adaptive"];

/// Interface lists nest (a macro holding a list inside another list); deeper is an error
/// rather than a parser that recurses until the stack runs out.
const MAX_IFACE_LIST_DEPTH: usize = 16;

/// Address keywords linerate does not implement.
const UNSUPPORTED_ADDRESSES: &[&str] = &["route"];

/// The prefixes that cover exactly the addresses `lo..=hi` of family `af`, fewest first to
/// last (a range of an address family is a union of aligned blocks).
pub(super) fn range_prefixes(af: Af, lo: u128, hi: u128) -> Vec<Prefix> {
    let bits = u32::from(Prefix::bits(af));
    // The last address of the block of 2^host addresses at `start` (aligned to it).
    let last = |start: u128, host: u32| {
        if host >= 128 { u128::MAX } else { start + ((1u128 << host) - 1) }
    };
    let mut out = Vec::new();
    let mut cur = lo;
    loop {
        // The largest aligned block starting at `cur` that ends by `hi`.
        let mut host = if cur == 0 { bits } else { cur.trailing_zeros().min(bits) };
        while host > 0 && last(cur, host) > hi {
            host -= 1;
        }
        out.push(Prefix::new(af, cur, (bits - host) as u8));
        let end = last(cur, host);
        if end >= hi {
            return out;
        }
        cur = end + 1;
    }
}

/// A rule's `log` option (pf.conf(5) "log"): which packets it decides are copied, with a
/// pflog header, to linerate's log (`docs/firewall.md`, "Logging").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LogMode {
    #[default]
    None,
    /// `log`: the packets the rule decides; for a rule that keeps state, the packet that
    /// creates the state.
    Decided,
    /// `log (all)`: also every packet its states pass.
    All,
}

impl Parser<'_> {
    /// `log [ ( all ) ]`, if next; pf's other log options are refused by name.
    pub(super) fn log_mode(&mut self) -> PResult<LogMode> {
        if !self.eat_word("log")? {
            return Ok(LogMode::None);
        }
        if !self.eat_punct("(")? {
            return Ok(LogMode::Decided);
        }
        loop {
            let t = self.peek()?.clone();
            match &t.tok {
                Tok::Word(w) if w == "all" => {}
                Tok::Word(w) if w == "to" => {
                    return here(
                        &t,
                        "`log (to IFACE)` is not supported by linerate (one log: `[log]` in the config, `linerate log`)",
                    );
                }
                Tok::Word(w) if w == "user" || w == "matches" => {
                    return here(&t, format!("`log ({w})` is not supported by linerate"));
                }
                _ => return self.fail("a log option (all)"),
            }
            self.next()?;
            if self.eat_punct(")")? {
                return Ok(LogMode::All);
            }
            self.expect_punct(",", "\",\" or \")\"")?;
        }
    }

    /// Fails at the next word if it is a pf keyword in `list`: "`{context}X` is not
    /// supported by linerate".
    fn refuse_in(&mut self, list: &[&str], context: &str) -> PResult<()> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && list.contains(&w.as_str())
        {
            return match OPTION_REASONS.iter().find(|(o, _)| o == w) {
                Some((_, why)) => {
                    here(&t, format!("`{context}{w}` is not supported by linerate ({why})"))
                }
                None => here(&t, format!("`{context}{w}` is not supported by linerate")),
            };
        }
        Ok(())
    }

    pub(super) fn refuse_unsupported_option(&mut self, context: &str) -> PResult<()> {
        self.refuse_in(UNSUPPORTED_OPTIONS, context)
    }

    /// [`Self::refuse_unsupported_option`] where a filter rule's `route-to`, `reply-to`,
    /// `rdr-to` or `nat-to` may come next (read among its options, `route_opt.rs`,
    /// `translate_rule.rs`).
    pub(super) fn refuse_unsupported_filter_option(&mut self) -> PResult<()> {
        for w in ["route-to", "reply-to", "rdr-to", "nat-to", "af-to"] {
            if self.is_word(w)? {
                return Ok(());
            }
        }
        self.refuse_unsupported_option("")
    }

    /// `tag` / `tagged` on a translation rule (pf allows them there; linerate tags in filter
    /// rules only).
    pub(super) fn refuse_translation_tag(&mut self) -> PResult<()> {
        self.refuse_in(&["tag", "tagged"], "")?;
        self.refuse_unsupported_option("")
    }

    pub(super) fn refuse_unsupported_statement(&mut self) -> PResult<()> {
        self.refuse_in(UNSUPPORTED_STATEMENTS, "")
    }

    pub(super) fn refuse_unsupported_set(&mut self) -> PResult<()> {
        self.refuse_in(UNSUPPORTED_SET, "set ")
    }

    pub(super) fn refuse_unsupported_address(&mut self) -> PResult<()> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && (w == "no-route" || w == "urpf-failed")
        {
            return here(
                &t,
                format!(
                    "`{w}` in a host list is not supported by linerate (make it the whole `from` or `to` of the rule)"
                ),
            );
        }
        self.refuse_in(UNSUPPORTED_ADDRESSES, "")
    }

    /// One interface name, or `{ name [,] ... }`, resolved to port indices.
    pub(super) fn iface_list(&mut self) -> PResult<Vec<u16>> {
        Ok(self.iface_list_skipping(false)?.0)
    }

    /// [`Self::iface_list`]; with `loopback_ok`, the loopback names `lo` and `lo0` are taken
    /// and left out of the list, and counted: linerate never sees loopback traffic.
    pub(super) fn iface_list_skipping(&mut self, loopback_ok: bool) -> PResult<(Vec<u16>, usize)> {
        self.iface_list_nested(loopback_ok, 0)
    }

    /// [`Self::iface_list_skipping`] inside `depth` enclosing lists.
    fn iface_list_nested(&mut self, loopback_ok: bool, depth: usize) -> PResult<(Vec<u16>, usize)> {
        let mut out = Vec::new();
        let mut loopbacks = 0;
        let braced = self.eat_punct("{")?;
        let mut n = 0;
        loop {
            if braced {
                self.skip_newlines()?;
                if n > 0 && self.eat_punct("}")? {
                    return Ok((out, loopbacks));
                }
                if self.is_punct("!")? {
                    let t = self.peek()?.clone();
                    return here(
                        &t,
                        "`!` in an interface list is not supported by linerate (negate a single interface)",
                    );
                }
            }
            if braced && self.is_punct("{")? {
                // A list inside the list (a macro holding one: `{ egress $int_if }`), flattened
                // as pfctl does.
                if depth >= MAX_IFACE_LIST_DEPTH {
                    let t = self.peek()?.clone();
                    return here(
                        &t,
                        format!("interface lists nested more than {MAX_IFACE_LIST_DEPTH} deep"),
                    );
                }
                let (inner, lo) = self.iface_list_nested(loopback_ok, depth + 1)?;
                out.extend(inner.into_iter().filter(|i| !out.contains(i)).collect::<Vec<_>>());
                loopbacks += lo;
                n += 1;
                self.eat_punct(",")?;
                continue;
            }
            match self.iface_name(loopback_ok)? {
                Some(i) if !out.contains(&i) => out.push(i),
                Some(_) => {}
                None => loopbacks += 1,
            }
            n += 1;
            if !braced {
                return Ok((out, loopbacks));
            }
            self.eat_punct(",")?;
        }
    }

    fn iface_name(&mut self, loopback_ok: bool) -> PResult<Option<u16>> {
        let t = self.peek()?.clone();
        let Tok::Word(name) = &t.tok else {
            return self.fail("an interface name");
        };
        match (self.ifaces)(name) {
            Some(i) => {
                self.next()?;
                Ok(Some(i))
            }
            None if loopback_ok && matches!(name.as_str(), "lo" | "lo0") => {
                self.next()?;
                Ok(None)
            }
            None => here(&t, format!("unknown interface \"{name}\"")),
        }
    }

    /// The rest of `icmp-type { T [,] ... }` (the `{` is consumed).
    pub(super) fn icmp_type_list(&mut self, v6: bool) -> PResult<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            self.skip_newlines()?;
            if !out.is_empty() && self.eat_punct("}")? {
                return Ok(out);
            }
            let t = self.icmp_type(v6)?;
            if self.is_word("code")? {
                let t = self.peek()?.clone();
                return here(
                    &t,
                    "`code` in an icmp-type list is not supported by linerate (one rule per type and code)",
                );
            }
            if !out.contains(&t) {
                out.push(t);
            }
            self.eat_punct(",")?;
        }
    }

    /// After an address `first` (token `t`): ` - LAST` makes it a range, expanded into the
    /// prefixes that cover it (pf's `host - host`). `None` when no `-` follows.
    pub(super) fn address_range(
        &mut self,
        first: Prefix,
        t: &Token,
        negated: bool,
    ) -> PResult<Option<Vec<AddrItem>>> {
        if !self.is_word("-")? {
            return Ok(None);
        }
        let dash = self.next()?;
        if negated {
            return here(&dash, "`! a - b` is not supported by linerate (a negated range)");
        }
        let full = Prefix::bits(first.af);
        if first.len != full || matches!(&t.tok, Tok::Word(w) if w.contains('/')) {
            return here(t, "a range is written between two addresses, without /len");
        }
        let lt = self.peek()?.clone();
        let last = match &lt.tok {
            Tok::Word(w) if !w.contains('/') => super::parse_prefix(w),
            _ => None,
        };
        let Some(last) = last else {
            return self.fail("the address that ends the range");
        };
        if last.af != first.af {
            return here(&lt, "the range's two addresses are of different families");
        }
        if last.addr < first.addr {
            return here(&lt, "the range's last address is below its first");
        }
        self.next()?;
        let items = range_prefixes(first.af, first.addr, last.addr)
            .into_iter()
            .map(|p| AddrItem { negated: false, target: AddrTarget::Prefix(p) })
            .collect();
        Ok(Some(items))
    }
}

#[cfg(test)]
mod tests {
    /// Every word linerate refuses says why (issue 44: "refused by name ...: say why").
    #[test]
    fn every_refusal_says_why() {
        let lists =
            [UNSUPPORTED_OPTIONS, UNSUPPORTED_STATEMENTS, UNSUPPORTED_SET, UNSUPPORTED_ADDRESSES];
        for w in lists.iter().flat_map(|l| l.iter()) {
            assert!(
                super::OPTION_REASONS.iter().any(|(o, _)| o == w),
                "`{w}` is refused without a reason"
            );
        }
    }

    use super::*;

    #[test]
    fn ranges_are_covered_by_aligned_prefixes() {
        let v4 = |a: [u8; 4]| u128::from(u32::from_be_bytes(a));
        let got = range_prefixes(Af::Inet, v4([10, 0, 0, 1]), v4([10, 0, 0, 6]));
        let want: Vec<Prefix> = [(1, 32), (2, 31), (4, 31), (6, 32)]
            .iter()
            .map(|&(a, l)| Prefix::new(Af::Inet, v4([10, 0, 0, a]), l))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            range_prefixes(Af::Inet, 0, u128::from(u32::MAX)),
            vec![Prefix::new(Af::Inet, 0, 0)]
        );
        assert_eq!(range_prefixes(Af::Inet6, 0, u128::MAX), vec![Prefix::new(Af::Inet6, 0, 0)]);
        assert_eq!(range_prefixes(Af::Inet6, 5, 5), vec![Prefix::new(Af::Inet6, 5, 128)]);
        // Every address of random ranges is covered once, and nothing outside.
        let mut x = 0x1234_5678u64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lo = u128::from(x as u16);
            let hi = lo + u128::from((x >> 20) as u16 % 2000);
            let ps = range_prefixes(Af::Inet, lo, hi);
            for a in lo.saturating_sub(3)..hi + 3 {
                let n = ps.iter().filter(|p| p.contains(Af::Inet, a)).count();
                assert_eq!(n, usize::from((lo..=hi).contains(&a)), "{lo}..{hi} at {a}: {ps:?}");
            }
        }
    }
}
