//! OpenBSD's translation on pass rules: `pass in ... rdr-to ADDR [port P]` (a port
//! forward) and `pass out ... nat-to ADDR` (outbound NAT), IPv4.
//!
//! pf translates a packet such a rule decides: the last matching rule, or the first `quick`
//! one. linerate makes the rule the `rdr pass` / `nat pass` rule it stands for: its
//! translation applies to every packet it matches and passes it without the rules of that
//! pass, with a state. The two agree where no other rule of the pass can decide one of
//! those packets, and the rest is refused at the end of the file: a `quick` rule before it,
//! any rule after it (unless it is `quick`), or another such rule, that may match a packet
//! it matches ([`super::dims::may_overlap`], which errs towards "may"). So are
//! options a translation rule cannot carry (`label`, `log`, `tag`, state options, ...) and
//! translation rules beside it.

use super::lexer::Token;
use super::parser::{PErr, Parser, here};
use super::scrub::Matching;
use super::*;
use crate::rules::tcp_flags;

/// A pass rule made a translation rule, for the checks at the end of the file.
#[derive(Debug)]
pub(super) struct PassTranslation {
    /// The rule as written (IPv4), to compare with the others.
    rule: Rule,
    /// `rdr-to` or `nat-to`.
    keyword: &'static str,
    /// The number of filter rules before it.
    position: usize,
}

impl PassTranslation {
    pub(super) fn line(&self) -> usize {
        self.rule.line
    }
}

impl Parser<'_> {
    /// Whether the translation rule of line `line` is a pass rule's.
    pub(super) fn is_pass_translation(&self, line: usize) -> bool {
        self.pass_translations.iter().any(|p| p.rule.line == line)
    }

    /// After `rdr-to` / `nat-to` (the keyword `t`, not consumed): the target, up to the end
    /// of the rule.
    pub(super) fn translate_option(&mut self, t: &Token) -> PResult<(NatKind, NatTarget, Token)> {
        let kind = if matches!(&t.tok, Tok::Word(w) if w == "rdr-to") {
            NatKind::Rdr
        } else {
            NatKind::Nat
        };
        self.next()?;
        let target = self.nat_target(kind, t)?;
        Ok((kind, target, t.clone()))
    }

    /// After `af-to` (the keyword `t`, not consumed), up to the end of the rule: NAT64's
    /// `inet from POOL`, or NAT46's `inet6 from ADDRESS to PREFIX` (one IPv6 source address,
    /// its ports translated; the destination a /96 or one address).
    pub(super) fn af_to_option(&mut self, t: &Token) -> PResult<(NatKind, NatTarget, Token)> {
        self.next()?;
        let to6 = self.eat_word("inet6")?;
        if !to6 {
            self.expect_word("inet")?;
        }
        self.expect_word("from")?;
        let mut target = self.nat_target(NatKind::AfTo, t)?;
        let family = if to6 { Af::Inet6 } else { Af::Inet };
        if let NatAddr::Pool(p) = &target.addr
            && p.iter().any(|p| p.af != family)
        {
            let (to, af) = if to6 { ("inet6", "IPv6") } else { ("inet", "IPv4") };
            return here(t, format!("`af-to {to} from` takes {af} addresses"));
        }
        if !to6 {
            if self.is_word("to")? {
                let w = self.peek()?.clone();
                return here(
                    &w,
                    "`af-to inet ... to` is not supported by linerate: the IPv4 destination is the last 32 bits of the IPv6 one (RFC 6052)",
                );
            }
            return Ok((NatKind::AfTo, target, t.clone()));
        }
        if !matches!(&target.addr, NatAddr::Pool(p) if p.len() == 1 && p[0].len == 128) {
            return here(
                t,
                "`af-to inet6 from` takes one IPv6 address in linerate (its ports translated); a prefix that embeds the IPv4 source is not supported",
            );
        }
        let to = self.expect_word("to")?;
        target.af_dst = Some(self.af46_destination(&to)?);
        Ok((NatKind::AfTo, target, t.clone()))
    }

    /// NAT46's `to` (after the keyword `to`): an IPv6 /96, or one IPv6 address.
    fn af46_destination(&mut self, to: &Token) -> PResult<super::Prefix> {
        let addr = self.nat_addr()?;
        match (&addr, &self.peek()?.tok) {
            (NatAddr::Pool(p), Tok::Newline | Tok::Eof)
                if p.len() == 1 && p[0].af == Af::Inet6 && matches!(p[0].len, 96 | 128) =>
            {
                Ok(p[0])
            }
            _ => here(
                to,
                "`af-to inet6 ... to` takes an IPv6 /96 whose last 32 bits take the IPv4 destination (RFC 6052), or one IPv6 address, then the end of the rule",
            ),
        }
    }

    /// Pass rule `rule`, which translates as `tr` says: its translation rule, or the error
    /// that says why it cannot be one.
    pub(super) fn pass_translation(
        &mut self,
        mut rule: Rule,
        (kind, target, t): (NatKind, NatTarget, Token),
    ) -> PResult<()> {
        let keyword = match kind {
            NatKind::Rdr => "rdr-to",
            NatKind::AfTo => "af-to",
            _ => "nat-to",
        };
        let dir = if kind == NatKind::Nat { Dir::Out } else { Dir::In };
        if rule.action != Action::Pass {
            return here(&t, format!("`{keyword}` only applies to pass rules"));
        }
        if rule.dir != Some(dir) {
            return here(
                &t,
                format!(
                    "`{keyword}` on a pass rule that is not `{}` is not supported by linerate",
                    if dir == Dir::In { "in" } else { "out" }
                ),
            );
        }
        let v6_host = |m: &AddrMatch| matches!(m, AddrMatch::List(items) if items.iter().any(|i| matches!(i.target, AddrTarget::Prefix(p) if p.af == Af::Inet6)));
        let v6_target = matches!(&target.addr, NatAddr::Pool(p) if p.first().is_some_and(|p| p.af == Af::Inet6));
        let nat46 = target.af_dst.is_some();
        if kind == NatKind::AfTo {
            check_af_to(&rule, nat46, &t)?;
        } else if rule.af == Some(Af::Inet6)
            || v6_host(&rule.src)
            || v6_host(&rule.dst)
            || v6_target
        {
            return here(
                &t,
                format!(
                    "`{keyword}` for IPv6 is not supported by linerate: write pf's NAT66, `{} on IFACE inet6 ... -> ADDRESS`",
                    kind.name()
                ),
            );
        }
        if let Some(what) = option_of(&rule) {
            return here(
                &t,
                format!(
                    "`{keyword}` on a pass rule with {what} is not supported by linerate: it becomes a `{} pass` rule, which has no such option",
                    kind.name()
                ),
            );
        }
        // Beside OpenBSD's other translation rules of the other kind (`match out ... nat-to`
        // with `pass in ... rdr-to`), which translate other packets; not beside pf's.
        let in_the_way = |n: &&NatRule| {
            let from_match = self.match_nats.iter().any(|m| m.line == n.line);
            !self.is_pass_translation(n.line) && (!from_match || n.kind == kind)
        };
        if let Some(n) = self.rs.nat.iter().find(in_the_way) {
            return here(
                &t,
                format!(
                    "`{keyword}` on a pass rule together with translation rules (line {}) is not supported by linerate: write one or the other",
                    n.line
                ),
            );
        }
        // Compared with the others as what it is: a rule for IPv4 packets (IPv6 for NAT64).
        let nat64 = kind == NatKind::AfTo && !nat46;
        let af = if nat64 {
            Some(Af::Inet6)
        } else if nat46 {
            Some(Af::Inet)
        } else {
            rule.af
        };
        rule.af = Some(if nat64 { Af::Inet6 } else { Af::Inet });
        let hosts = super::hosts::Hosts::between(
            (rule.src.clone(), rule.src_ports.clone()),
            (rule.dst.clone(), rule.dst_ports.clone()),
        );
        let m = Matching {
            ifaces: rule.ifaces.clone(),
            iface_neg: rule.iface_neg,
            af,
            protos: rule.protos.clone(),
            hosts,
        };
        let at = Token { line: rule.line, ..t };
        self.rs.nat.push(super::nat::nat_rule_of(kind, false, true, m, Some(target), &at));
        self.pass_translations.push(PassTranslation {
            rule,
            keyword,
            position: self.rs.rules.len(),
        });
        Ok(())
    }

    /// At the end of the file: the refusals of the module's documentation, where another
    /// rule may decide a packet a translating pass rule matches.
    pub(super) fn check_pass_translations(&self) -> PResult<()> {
        let tables = &self.rs.tables;
        for (k, p) in self.pass_translations.iter().enumerate() {
            let (line, kw) = (p.rule.line, p.keyword);
            let meets = |r: &Rule| super::dims::may_overlap(r, &p.rule, tables);
            let earlier_quick = self.rs.rules[..p.position].iter().find(|r| r.quick && meets(r));
            let later = if p.rule.quick {
                None
            } else {
                self.rs.rules[p.position..].iter().find(|r| meets(r))
            };
            let why =
                "pf translates only the packets the rule decides, linerate every packet it matches";
            if let Some(r) = earlier_quick {
                return Err(PErr::Here(
                    0,
                    line,
                    1,
                    format!(
                        "`{kw}` on a pass rule after a `quick` rule that may decide some of its packets (line {}) is not supported by linerate: {why}",
                        r.line
                    ),
                ));
            }
            if let Some(r) = later {
                return Err(PErr::Here(
                    0,
                    line,
                    1,
                    format!(
                        "`{kw}` on a pass rule that is not `quick`, before a rule that may decide some of its packets (line {}), is not supported by linerate: {why}; make it `quick`",
                        r.line
                    ),
                ));
            }
            if let Some(o) = self.pass_translations[k + 1..].iter().find(|o| meets(&o.rule)) {
                return Err(PErr::Here(
                    0,
                    o.rule.line,
                    1,
                    format!(
                        "two pass rules that translate and may match the same packets (lines {line} and {}) are not supported by linerate",
                        o.rule.line
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `af-to`'s rule. NAT64: for IPv6 (the family written or its addresses'), to one IPv6
/// prefix of 96 bits (RFC 6052's well-known 64:ff9b::/96 or a network-specific one), whose
/// last 32 bits carry the IPv4 destination. NAT46 (`nat46`): for IPv4.
fn check_af_to(rule: &Rule, nat46: bool, t: &Token) -> PResult<()> {
    if nat46 {
        let v6_host = |m: &AddrMatch| matches!(m, AddrMatch::List(items) if items.iter().any(|i| matches!(i.target, AddrTarget::Prefix(p) if p.af == Af::Inet6)));
        if rule.af == Some(Af::Inet6) || v6_host(&rule.src) || v6_host(&rule.dst) {
            return here(t, "`af-to inet6` translates IPv4 packets: the rule is for inet");
        }
        return Ok(());
    }
    if rule.af == Some(Af::Inet) {
        return here(t, "`af-to inet` translates IPv6 packets: the rule is for inet6");
    }
    match &rule.dst {
        AddrMatch::List(items) => match items.as_slice() {
            [AddrItem { negated: false, target: AddrTarget::Prefix(p) }]
                if p.af == Af::Inet6 && p.len == 96 =>
            {
                Ok(())
            }
            _ => here(
                t,
                "`af-to` needs `to PREFIX/96`, the IPv6 prefix whose last 32 bits are the IPv4 destination (RFC 6052); other prefix lengths are not supported by linerate",
            ),
        },
        AddrMatch::Any => here(t, "`af-to` needs `to PREFIX/96` (RFC 6052), such as 64:ff9b::/96"),
    }
}

/// The first option of `r` that a translation rule cannot carry, named for the error.
fn option_of(r: &Rule) -> Option<&'static str> {
    let default_flags =
        r.flags.is_none() || r.flags == Some((tcp_flags::SYN, tcp_flags::SYN | tcp_flags::ACK));
    [
        (
            r.keep_state != StateMode::Keep,
            "`no state`, `modulate state`, `synproxy state` or `keep state (sloppy)`",
        ),
        (!default_flags, "`flags`"),
        (r.label.is_some(), "`label`"),
        (r.log != LogMode::default(), "`log`"),
        (r.tag.is_some() || r.tagged.is_some(), "`tag` or `tagged`"),
        (
            r.max_states.is_some()
                || r.src_track.is_some()
                || !r.state_timeouts.is_empty()
                || r.state_policy.is_some(),
            "state options",
        ),
        (r.allow_opts, "`allow-opts`"),
        (r.ridentifier.is_some(), "`ridentifier`"),
        (r.route.is_some(), "`route-to` or `reply-to`"),
        (!r.icmp_types.is_empty() || r.icmp_code.is_some(), "`icmp-type`"),
        (r.route_need != 0 || r.route_refuse != 0, "`no-route` or `urpf-failed`"),
    ]
    .into_iter()
    .find_map(|(has, what)| has.then_some(what))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn ifaces(name: &str) -> Option<u16> {
        ["lr-wan", "lr-lan"].iter().position(|n| *n == name).map(|i| i as u16)
    }

    fn rules(text: &str) -> Result<RuleSet, String> {
        parse(text, Path::new("r.conf"), &ifaces).map_err(|e| e.to_string())
    }

    /// The translation rules of `text`, their lines and columns aside.
    fn nat_of(text: &str) -> Vec<NatRule> {
        rules(text).unwrap().nat.into_iter().map(|n| NatRule { line: 0, column: 0, ..n }).collect()
    }

    #[test]
    fn a_translating_pass_rule_is_its_translation_rule_with_pass() {
        let rdr = "pass in quick on lr-wan proto tcp from any to 192.0.2.1 port 80 rdr-to 10.0.0.5 port 8080\n";
        assert_eq!(
            nat_of(rdr),
            nat_of(
                "rdr pass on lr-wan proto tcp from any to 192.0.2.1 port 80 -> 10.0.0.5 port 8080\n"
            )
        );
        let nat = "pass out on lr-wan inet from 10.0.0.0/24 nat-to 192.0.2.1\n";
        assert_eq!(nat_of(nat), nat_of("nat pass on lr-wan inet from 10.0.0.0/24 -> 192.0.2.1\n"));
        assert!(rules(rdr).unwrap().rules.is_empty(), "no filter rule is left of it");
    }

    /// OpenBSD's NAT64: an `af-to` rule for IPv6 to a /96, its pool IPv4, ports from pf's
    /// range; NAT46, other prefix lengths and IPv4 rules refused by name.
    #[test]
    fn af_to_is_nat64() {
        let text =
            "pass in quick on lr-lan inet6 from any to 64:ff9b::/96 af-to inet from 192.0.2.1\n";
        let n = &nat_of(text)[0];
        assert_eq!(
            (n.kind, n.pass, n.af, n.ifaces.as_slice()),
            (NatKind::AfTo, true, Some(Af::Inet6), &[1u16][..])
        );
        let t = n.target.as_ref().unwrap();
        assert_eq!(
            (t.ports, &t.addr),
            (Some(DEFAULT_NAT_PORTS), &NatAddr::Pool(vec![Prefix::new(Af::Inet, 0xc000_0201, 32)]))
        );
        assert!(rules(text).unwrap().rules.is_empty(), "no filter rule is left of it");
        let printed = rules(text).unwrap().to_pf_text(&["lr-wan", "lr-lan"]).unwrap();
        assert!(printed.contains("pass in quick on lr-lan inet6 from any to 64:ff9b::/96 flags S/SA keep state af-to inet from 192.0.2.1"), "{printed}");
        assert_eq!(nat_of(&printed), nat_of(text), "check -v's line parses back to the same rule");
        for (text, want) in [
            (
                "pass in on lr-lan inet6 to 64:ff9b::/96 af-to inet from 192.0.2.1 to 192.0.2.9\n",
                "r.conf:1:67: `af-to inet ... to` is not supported by linerate",
            ),
            (
                "pass in on lr-lan inet6 to 64:ff9b::/64 af-to inet from 192.0.2.1\n",
                "r.conf:1:41: `af-to` needs `to PREFIX/96`",
            ),
            (
                "pass in on lr-lan inet6 af-to inet from 192.0.2.1\n",
                "r.conf:1:25: `af-to` needs `to PREFIX/96`",
            ),
            (
                "pass out on lr-lan inet6 to 64:ff9b::/96 af-to inet from 192.0.2.1\n",
                "r.conf:1:42: `af-to` on a pass rule that is not `in`",
            ),
            (
                "pass in on lr-lan inet6 to 64:ff9b::/96 af-to inet from 2001:db8::1\n",
                "r.conf:1:41: `af-to inet from` takes IPv4 addresses",
            ),
        ] {
            let e = rules(text).unwrap_err();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }

    /// OpenBSD's NAT46: an `af-to inet6` rule for IPv4, from one IPv6 address (its ports
    /// translated) to a /96 or one address.
    #[test]
    fn af_to_inet6_is_nat46() {
        let text = "pass in quick on lr-lan inet from any to 198.51.100.0/24 af-to inet6 from 2001:db8::1 to 2001:db8:64::/96\n";
        let n = &nat_of(text)[0];
        assert_eq!((n.kind, n.pass, n.af), (NatKind::AfTo, true, Some(Af::Inet)));
        let t = n.target.as_ref().unwrap();
        assert_eq!(t.addr, NatAddr::Pool(vec![Prefix::new(Af::Inet6, 0x2001_0db8 << 96 | 1, 128)]));
        assert_eq!(t.af_dst, Some(Prefix::new(Af::Inet6, 0x2001_0db8_0064 << 80, 96)));
        assert_eq!(t.ports, Some(DEFAULT_NAT_PORTS));
        let printed = rules(text).unwrap().to_pf_text(&["lr-wan", "lr-lan"]).unwrap();
        assert!(printed.contains("pass in quick on lr-lan inet from any to 198.51.100.0/24 flags S/SA keep state af-to inet6 from 2001:db8::1 to 2001:db8:64::/96"), "{printed}");
        assert_eq!(nat_of(&printed), nat_of(text), "check -v's line parses back to the same rule");
        let one = "pass in quick on lr-lan inet to 198.51.100.7 af-to inet6 from 2001:db8::1 to 2001:db8::7\n";
        assert_eq!(nat_of(one)[0].target.as_ref().unwrap().af_dst.map(|p| p.len), Some(128));
        for (text, want) in [
            (
                "pass in on lr-lan inet6 af-to inet6 from 2001:db8::1 to 2001:db8::/96\n",
                "r.conf:1:25: `af-to inet6` translates IPv4 packets: the rule is for inet",
            ),
            (
                "pass in on lr-lan inet af-to inet6 from 192.0.2.1 to 2001:db8::/96\n",
                "r.conf:1:24: `af-to inet6 from` takes IPv6 addresses",
            ),
            (
                "pass in on lr-lan inet af-to inet6 from 2001:db8::/96 to 2001:db8::/96\n",
                "r.conf:1:24: `af-to inet6 from` takes one IPv6 address in linerate",
            ),
            (
                "pass in on lr-lan inet af-to inet6 from 2001:db8::1 to 2001:db8::/64\n",
                "r.conf:1:53: `af-to inet6 ... to` takes an IPv6 /96",
            ),
            (
                "pass in on lr-lan inet af-to inet6 from 2001:db8::1\n",
                "r.conf:1:52: expected \"to\", found end of line",
            ),
        ] {
            let e = rules(text).unwrap_err();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }

    /// OpenBSD's usual router: the translating rules meet no other rule of their pass.
    #[test]
    fn openbsds_usual_router_loads() {
        let text = "\
table <bad> { 198.51.100.0/24 }
block all
block in quick on lr-wan proto tcp from <bad> to any port 443
pass out quick inet
pass in on lr-wan inet proto tcp to 192.0.2.1 port 22
pass in quick on lr-wan inet proto tcp to 192.0.2.1 port 80 rdr-to 10.0.0.5
pass in on lr-lan
";
        let rs = rules(text).unwrap();
        assert_eq!((rs.rules.len(), rs.nat.len()), (5, 1));
        assert!(rs.nat[0].pass);
        // With OpenBSD's outbound NAT (before the quick rules, as `match` rules must be).
        let rs =
            rules(&format!("match out on lr-wan inet from 10.0.0.0/24 nat-to 192.0.2.1\n{text}"))
                .unwrap();
        assert_eq!(
            rs.nat.iter().map(|n| (n.kind, n.pass)).collect::<Vec<_>>(),
            [(NatKind::Nat, false), (NatKind::Rdr, true)]
        );
    }

    #[test]
    fn refusals_name_the_rule_in_the_way() {
        let cases = [
            (
                "block in quick on lr-wan from 198.51.100.0/24\npass in quick on lr-wan inet proto tcp to port 80 rdr-to 10.0.0.5\n",
                "r.conf:2:1: `rdr-to` on a pass rule after a `quick` rule that may decide some of its packets (line 1) is not supported by linerate",
            ),
            (
                "pass in on lr-wan inet proto tcp to port 80 rdr-to 10.0.0.5\nblock in on lr-wan proto tcp to port 1:1024\n",
                "r.conf:1:1: `rdr-to` on a pass rule that is not `quick`, before a rule that may decide some of its packets (line 2), is not supported by linerate",
            ),
            (
                "pass in quick on lr-wan inet proto tcp to port 80 rdr-to 10.0.0.5\npass in quick on lr-wan inet proto tcp to port 80:81 rdr-to 10.0.0.6\n",
                "r.conf:2:1: two pass rules that translate and may match the same packets (lines 1 and 2)",
            ),
            (
                "pass in quick on lr-wan inet proto tcp to port 80 label \"web\" rdr-to 10.0.0.5\n",
                "r.conf:1:63: `rdr-to` on a pass rule with `label` is not supported by linerate",
            ),
            (
                "pass out on lr-wan inet proto tcp to port 80 rdr-to 10.0.0.5\n",
                "r.conf:1:46: `rdr-to` on a pass rule that is not `in` is not supported by linerate",
            ),
            (
                "pass in quick on lr-wan inet6 proto tcp to port 80 rdr-to 10.0.0.5\n",
                "r.conf:1:52: `rdr-to` for IPv6 is not supported by linerate: write pf's NAT66",
            ),
            (
                "pass in quick on lr-wan proto tcp to 2001:db8::1 port 80 rdr-to 10.0.0.5\n",
                "r.conf:1:58: `rdr-to` for IPv6 is not supported by linerate",
            ),
            (
                "pass out on lr-wan nat-to 2001:db8::1\n",
                "r.conf:1:20: `nat-to` for IPv6 is not supported by linerate",
            ),
            (
                "match out on lr-wan inet from 10.0.0.0/8 nat-to 192.0.2.1\npass out quick on lr-wan inet nat-to 192.0.2.2\n",
                "r.conf:2:31: `nat-to` on a pass rule together with translation rules (line 1)",
            ),
            (
                "nat on lr-wan from 10.0.0.0/8 -> 192.0.2.1\npass in quick on lr-wan inet proto tcp to port 80 rdr-to 10.0.0.5\n",
                "r.conf:2:51: `rdr-to` on a pass rule together with translation rules (line 1)",
            ),
        ];
        for (text, want) in cases {
            let got = rules(text).expect_err(text);
            assert!(got.starts_with(want), "{text}: {got}");
        }
    }
}
