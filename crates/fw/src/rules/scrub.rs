//! Normalization rules: the `scrub` statement of FreeBSD's and pfSense's pf (pf.conf(5)
//! before OpenBSD 4.6), `[no] scrub [in|out] [quick] [on IFACE] [af] [proto P] HOSTS [OPTS]`.
//!
//! As in FreeBSD's `pf_normalize_ip`, the **first** matching scrub rule applies to a packet
//! (`quick` changes nothing), and a matching `no scrub` rule exempts it. What the options do
//! to the packet is the data plane's (`docs/firewall.md`, "Normalization").
//!
//! linerate does not reassemble fragments (it judges IPv4 fragments with their first
//! fragment's ports, whether or not a scrub rule matches): pf's fragment options
//! (`fragment reassemble`, `fragment crop`, `fragment drop-ovl`) and `reassemble tcp` are
//! refused by name rather than accepted for what they would not do.

use super::hosts::{check_families, check_ports_need_tcp_udp};
use super::*;

/// What a matching `scrub` rule does to a packet (pf's scrub options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ScrubOpts {
    /// `no-df`: clear IPv4's Don't Fragment bit.
    pub no_df: bool,
    /// `random-id`: a random IPv4 identification on packets that are not fragments.
    pub random_id: bool,
    /// `min-ttl N`: raise the TTL (hop limit) to N (0: not set).
    pub min_ttl: u8,
    /// `max-mss N`: lower the MSS option of TCP segments to N (0: not set).
    pub max_mss: u16,
    /// `set-tos N`: the IPv4 TOS (IPv6 traffic class), its ECN bits kept.
    pub set_tos: Option<u8>,
}

/// One `scrub` (or `no scrub`) rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubRule {
    /// `no scrub`: the packets it matches are not normalized.
    pub exempt: bool,
    pub dir: Option<Dir>,
    pub ifaces: Vec<u16>,
    pub iface_neg: bool,
    pub af: Option<Af>,
    pub protos: Vec<u8>,
    pub src: AddrMatch,
    pub src_ports: PortMatch,
    pub dst: AddrMatch,
    pub dst_ports: PortMatch,
    pub opts: ScrubOpts,
    pub line: usize,
}

/// What a scrub, match or translation rule matches: its interfaces, family, protocols and
/// hosts.
pub(super) struct Matching {
    pub(super) ifaces: Vec<u16>,
    pub(super) iface_neg: bool,
    pub(super) af: Option<Af>,
    pub(super) protos: Vec<u8>,
    pub(super) hosts: super::hosts::Hosts,
}

impl ScrubRule {
    pub(super) fn of(
        exempt: bool,
        dir: Option<Dir>,
        m: Matching,
        opts: ScrubOpts,
        line: usize,
    ) -> ScrubRule {
        let h = m.hosts;
        ScrubRule {
            exempt,
            dir,
            ifaces: m.ifaces,
            iface_neg: m.iface_neg,
            af: m.af,
            protos: m.protos,
            src: h.src,
            src_ports: h.src_ports,
            dst: h.dst,
            dst_ports: h.dst_ports,
            opts,
            line,
        }
    }

    /// Whether the rule matches `key` (its direction and interface those of the pass).
    pub fn matches(&self, rs: &RuleSet, key: &PacketKey) -> bool {
        self.dir.is_none_or(|d| d == key.dir)
            && (self.ifaces.is_empty() || self.ifaces.contains(&key.iface) != self.iface_neg)
            && self.af.is_none_or(|a| a == key.af)
            && (self.protos.is_empty() || self.protos.contains(&key.proto))
            && self.src.matches(rs, key.af, key.src)
            && self.dst.matches(rs, key.af, key.dst)
            && self.src_ports.matches(key.src_port)
            && self.dst_ports.matches(key.dst_port)
    }

    /// Whether the rule matches every packet of its direction and interfaces (`scrub in on
    /// em0 all`): the data plane then needs no key to match it.
    pub fn matches_all_hosts(&self) -> bool {
        self.af.is_none()
            && self.protos.is_empty()
            && self.src == AddrMatch::Any
            && self.dst == AddrMatch::Any
            && self.src_ports == PortMatch::Any
            && self.dst_ports == PortMatch::Any
    }
}

use crate::packet::PacketKey;

impl RuleSet {
    /// The options of the first scrub rule that matches `key`, pf's way: `None` if none
    /// matches or the first that matches is a `no scrub` rule.
    /// Interfaces of `set skip on` are not normalized either.
    pub fn scrub_for(&self, key: &PacketKey) -> Option<ScrubOpts> {
        if self.skip.contains(&key.iface) {
            return None;
        }
        let r = self.scrub.iter().find(|r| r.matches(self, key))?;
        (!r.exempt).then_some(r.opts)
    }

    /// Whether some scrub rule can apply to packets of direction `dir`.
    pub fn scrubs(&self, dir: Dir) -> bool {
        self.scrub.iter().any(|r| !r.exempt && r.dir.is_none_or(|d| d == dir))
    }
}

/// The named `set-tos` values of pf.conf(5) (IPTOS_LOWDELAY, ...).
fn tos_name(w: &str) -> Option<u8> {
    match w {
        "lowdelay" => Some(0x10),
        "throughput" => Some(0x08),
        "reliability" => Some(0x04),
        _ => None,
    }
}

/// The notice of `scrub ... fragment reassemble`.
const FRAGMENT_REASSEMBLE: &str = "`fragment reassemble`: linerate does not reassemble; it judges every fragment as pf judges the reassembled datagram (by its first fragment's protocol and ports, a fragment that comes ahead of its first waiting for it) and forwards the fragments as they came, those of a datagram whose last fragment never comes too (docs/firewall.md, \"Normalization\")";

impl Parser<'_> {
    /// `[no] scrub [in|out] [quick] [on IFACE] [inet|inet6] [proto P] HOSTS [OPTIONS]`.
    pub(super) fn scrub_rule(&mut self) -> PResult<()> {
        let first = self.peek()?.clone();
        if !self.rs.rules.is_empty() || !self.rs.nat.is_empty() {
            return here(
                &first,
                "scrub rules must come before translation and filter rules (pf.conf(5), STATEMENT ORDER)",
            );
        }
        let exempt = self.eat_word("no")?;
        let at = self.expect_word("scrub")?;
        let dir = self.rule_dir()?;
        if self.is_word("log")? {
            let t = self.peek()?.clone();
            return here(
                &t,
                "`scrub log` is not supported by linerate (what scrub drops is counted, per reason)",
            );
        }
        // The first matching scrub rule applies anyway: `quick` changes nothing.
        self.eat_word("quick")?;
        let m = self.rule_matching("scrub")?;
        let opts = self.scrub_options(exempt, false)?;
        self.check_scrub_after_match(&at, dir)?;
        self.rs.scrub.push(ScrubRule::of(exempt, dir, m, opts, at.line));
        Ok(())
    }

    /// `[on IFACE] [inet|inet6] [proto P] HOSTS` of a `kind` rule (`scrub`, `match`), checked
    /// as a filter rule's are. An unsupported option before the hosts is refused by name,
    /// but for `match`'s `nat-to`.
    pub(super) fn rule_matching(&mut self, kind: &str) -> PResult<Matching> {
        let (ifaces, iface_neg) = self.rule_ifaces()?;
        let af = self.rule_af()?;
        let protos = self.rule_protos()?;
        if !(kind == "match" && self.is_word("nat-to")?) {
            self.refuse_unsupported_option(if kind == "match" { "match " } else { "" })?;
        }
        let hosts = self.hosts(None)?;
        if let Some(t) = &hosts.route_tok {
            return here(
                t,
                format!(
                    "`{}` in a {kind} rule is not supported by linerate",
                    super::lexer::describe(&t.tok).trim_matches('"')
                ),
            );
        }
        check_families(af, &hosts)?;
        check_ports_need_tcp_udp(hosts.port_tok.as_ref(), &protos)?;
        Ok(Matching { ifaces, iface_neg, af, protos, hosts })
    }

    /// The options of a scrub rule, to the end of the line (or to the `)` of `match ...
    /// scrub (...)`, `inside`), optionally comma-separated (none after `no scrub`).
    pub(super) fn scrub_options(&mut self, exempt: bool, inside: bool) -> PResult<ScrubOpts> {
        let mut o = ScrubOpts::default();
        loop {
            let t = self.peek()?.clone();
            let Tok::Word(w) = &t.tok else {
                if matches!(t.tok, Tok::Newline | Tok::Eof) || (inside && t.tok == Tok::Punct(")"))
                {
                    return Ok(o);
                }
                return self.fail(
                    "a scrub option (no-df, random-id, min-ttl, max-mss, set-tos) or end of line",
                );
            };
            if exempt {
                return here(&t, "`no scrub` takes no options");
            }
            match w.as_str() {
                "no-df" => o.no_df = true,
                "random-id" => o.random_id = true,
                "min-ttl" => {
                    self.next()?;
                    let nt = self.peek()?.clone();
                    let n = self.number("a TTL (1-255)", 255)?;
                    if n == 0 {
                        return here(&nt, "min-ttl is 1 to 255");
                    }
                    o.min_ttl = n as u8;
                    self.eat_punct(",")?;
                    continue;
                }
                "max-mss" => {
                    self.next()?;
                    let nt = self.peek()?.clone();
                    let n = self.number("an MSS (1-65535)", 65535)?;
                    if n == 0 {
                        return here(&nt, "max-mss is 1 to 65535");
                    }
                    o.max_mss = n as u16;
                    self.eat_punct(",")?;
                    continue;
                }
                "set-tos" => {
                    self.next()?;
                    o.set_tos = Some(self.tos()?);
                    self.eat_punct(",")?;
                    continue;
                }
                // pfSense writes it on every interface. What it asks for, pf judging each
                // datagram as a whole, linerate's fragment table does for every rule set;
                // how it differs (no reassembled packet) is noted.
                "fragment" if !exempt => {
                    self.next()?;
                    if self.eat_word("reassemble")? {
                        self.notice(&t, FRAGMENT_REASSEMBLE);
                        self.eat_punct(",")?;
                        continue;
                    }
                    return here(
                        &t,
                        "`fragment` is not supported by linerate but as `fragment reassemble` (`crop` and `drop-ovl` keep fragments pf's reassembly would not: docs/firewall.md, \"Normalization\")",
                    );
                }
                "fragment" | "reassemble" => {
                    return here(
                        &t,
                        format!(
                            "`{w}` is not supported by linerate (it does not reassemble fragments: IPv4 fragments are forwarded as they come, judged by their first fragment's ports; docs/firewall.md, \"Normalization\")"
                        ),
                    );
                }
                _ => {
                    self.refuse_unsupported_option("")?;
                    return self.fail("a scrub option (no-df, random-id, min-ttl, max-mss, set-tos) or end of line");
                }
            }
            self.next()?;
            self.eat_punct(",")?;
        }
    }

    /// A TOS value: a number (decimal or `0x..`) up to 255, or `lowdelay`, `throughput`,
    /// `reliability`.
    fn tos(&mut self) -> PResult<u8> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok {
            let n = match w.strip_prefix("0x") {
                Some(hex) => u8::from_str_radix(hex, 16).ok(),
                None => tos_name(w).or_else(|| w.parse::<u8>().ok()),
            };
            if let Some(n) = n {
                self.next()?;
                return Ok(n);
            }
        }
        self.fail("a TOS (0-255, 0x00-0xff, lowdelay, throughput or reliability)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::proto;

    fn ifaces(name: &str) -> Option<u16> {
        ["em0", "em1"].iter().position(|n| *n == name).map(|i| i as u16)
    }

    fn ok(text: &str) -> RuleSet {
        parse(text, Path::new("pf.conf"), &ifaces).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> String {
        parse(text, Path::new("pf.conf"), &ifaces).expect_err("should fail").to_string()
    }

    #[test]
    fn scrub_statements_parse() {
        let rs = ok(
            "ext = \"em1\"\nscrub in all\nscrub on em0 all max-mss 1440\nscrub out on $ext all random-id no-df\n\
                     scrub in on em1 inet proto tcp from any to 10.0.0.0/8 port 80 min-ttl 64, set-tos lowdelay\n\
                     no scrub in on em0 from 10.1.0.0/16\nscrub quick all set-tos 0x1c max-mss 1400\npass all\n",
        );
        assert_eq!(rs.scrub.len(), 6);
        let s = &rs.scrub;
        assert_eq!((s[0].dir, s[0].opts, s[0].line), (Some(Dir::In), ScrubOpts::default(), 2));
        assert!(s[0].matches_all_hosts());
        assert_eq!((s[1].dir, &s[1].ifaces[..], s[1].opts.max_mss), (None, &[0u16][..], 1440));
        assert_eq!((s[2].dir, &s[2].ifaces[..]), (Some(Dir::Out), &[1u16][..]));
        assert_eq!(s[2].opts, ScrubOpts { no_df: true, random_id: true, ..ScrubOpts::default() });
        assert_eq!(
            s[3].opts,
            ScrubOpts { min_ttl: 64, set_tos: Some(0x10), ..ScrubOpts::default() }
        );
        assert_eq!((s[3].af, &s[3].protos[..]), (Some(Af::Inet), &[proto::TCP][..]));
        assert!(!s[3].matches_all_hosts());
        assert!(s[4].exempt);
        assert_eq!(
            s[5].opts,
            ScrubOpts { max_mss: 1400, set_tos: Some(0x1c), ..ScrubOpts::default() }
        );
        assert_eq!(rs.rules.len(), 1);
        assert!(rs.scrubs(Dir::In) && rs.scrubs(Dir::Out));
        assert!(!ok("scrub in all").scrubs(Dir::Out));
        assert!(!ok("pass all").scrubs(Dir::In));
        assert!(!ok("no scrub all").scrubs(Dir::In));
    }

    #[test]
    fn the_first_matching_scrub_rule_applies() {
        let rs = ok(
            "no scrub in on em0 from 10.1.0.0/16\nscrub in on em0 all max-mss 1400\nscrub in all max-mss 1300\nscrub out all no-df\n",
        );
        let key =
            |dir, iface, src| PacketKey { dir, iface, src, proto: proto::TCP, ..PacketKey::ZERO };
        let mss = |k| rs.scrub_for(&k).map(|o| o.max_mss);
        assert_eq!(mss(key(Dir::In, 0, 0x0a01_0203)), None, "exempted by `no scrub`");
        assert_eq!(mss(key(Dir::In, 0, 0x0a02_0203)), Some(1400));
        assert_eq!(mss(key(Dir::In, 1, 0x0a01_0203)), Some(1300), "first match, not the last");
        assert_eq!(rs.scrub_for(&key(Dir::Out, 1, 0)).map(|o| o.no_df), Some(true));
        assert_eq!(ok("pass all").scrub_for(&key(Dir::In, 0, 0)), None);
        assert_eq!(
            ok("set skip on em1\nscrub all").scrub_for(&key(Dir::In, 1, 0)),
            None,
            "set skip"
        );
    }

    /// pfSense's `scrub on $WAN all fragment reassemble`: a scrub rule, and a notice of how
    /// linerate's fragment handling differs from reassembly.
    #[test]
    fn fragment_reassemble_is_noted() {
        let rs = ok("scrub on em0 inet all fragment reassemble max-mss 1400");
        assert_eq!((rs.scrub.len(), rs.scrub[0].opts.max_mss), (1, 1400));
        assert_eq!(rs.notices.len(), 1);
        assert!(rs.notices[0].starts_with("pf.conf:1:23: `fragment reassemble`: linerate does not reassemble; it judges every fragment as pf judges the reassembled datagram"), "{:?}", rs.notices);
    }

    #[test]
    fn scrub_errors_name_their_place() {
        let cases = [
            (
                "scrub in all max-mss 1400 reassemble tcp",
                "pf.conf:1:27: `reassemble` is not supported by linerate (it does not reassemble fragments: IPv4 fragments are forwarded as they come, judged by their first fragment's ports; docs/firewall.md, \"Normalization\")",
            ),
            (
                "scrub in all\nscrub on em0 all fragment crop",
                "pf.conf:2:18: `fragment` is not supported by linerate but as `fragment reassemble` (`crop` and `drop-ovl` keep fragments pf's reassembly would not: docs/firewall.md, \"Normalization\")",
            ),
            ("scrub in all max-mss 0", "pf.conf:1:22: max-mss is 1 to 65535"),
            (
                "scrub in all max-mss 70000",
                "pf.conf:1:22: an MSS (1-65535) 70000 out of range (at most 65535)",
            ),
            ("scrub in all min-ttl 0", "pf.conf:1:22: min-ttl is 1 to 255"),
            (
                "scrub in all set-tos fast",
                "pf.conf:1:22: expected a TOS (0-255, 0x00-0xff, lowdelay, throughput or reliability), found \"fast\"",
            ),
            (
                "scrub in all max-pkt-rate 10/1",
                "pf.conf:1:14: `max-pkt-rate` is not supported by linerate (no per-rule packet rate limit)",
            ),
            (
                "scrub in all bogus",
                "pf.conf:1:14: expected a scrub option (no-df, random-id, min-ttl, max-mss, set-tos) or end of line, found \"bogus\"",
            ),
            (
                "scrub log in all",
                "pf.conf:1:7: `scrub log` is not supported by linerate (what scrub drops is counted, per reason)",
            ),
            ("no scrub in all no-df", "pf.conf:1:17: `no scrub` takes no options"),
            ("scrub in on em9 all", "pf.conf:1:13: unknown interface \"em9\""),
            (
                "scrub in from no-route",
                "pf.conf:1:15: `no-route` in a scrub rule is not supported by linerate",
            ),
            (
                "pass in all scrub (random-id)",
                "pf.conf:1:13: `scrub` is not supported by linerate (on a filter rule: write a `scrub` rule or `match ... scrub (...)`)",
            ),
            (
                "pass all\nscrub in all",
                "pf.conf:2:1: scrub rules must come before translation and filter rules (pf.conf(5), STATEMENT ORDER)",
            ),
            (
                "nat on em0 from 10/8 -> 192.0.2.1\nno scrub in all",
                "pf.conf:2:1: scrub rules must come before translation and filter rules (pf.conf(5), STATEMENT ORDER)",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "{text}");
        }
    }
}
