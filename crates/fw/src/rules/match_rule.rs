//! OpenBSD's `match [in|out] [on IFACE] [inet|inet6] [proto P] HOSTS scrub (OPTIONS)`, the
//! way OpenBSD writes normalization (`match in all scrub (no-df random-id max-mss 1440)`).
//! pf applies to a packet the scrub options of the match rules it meets on its way through
//! the rules; linerate makes the rule a scrub rule, applied to every packet it matches,
//! which gives the same packets wherever the two cannot differ, and refuses the rest:
//! - a `pass ... quick` rule before it: pf would not scrub what that rule passes;
//! - two scrub rules (`match` or `scrub`) that can apply to the same direction: pf merges
//!   the options of every match rule a packet meets, linerate takes the first rule's.
//!
//! `match out [on IFACE] [inet] [proto P] HOSTS nat-to ADDR [port ...] [pool options]`
//! (OpenBSD's outbound NAT, `match out on egress inet from !(egress:network) nat-to
//! (egress:0)`) becomes the `nat` rule it stands for. pf translates after its rules have
//! judged the packet as it came, the last matching `nat-to` winning; a `nat` rule translates
//! before the out rules, the first matching one winning. So the rules are kept in reverse
//! order, and refused where the difference shows: a `pass ... quick` rule before it (pf
//! would not translate what that rule passes), an outbound filter rule on its interfaces
//! that looks at the source (address or port: it would see the translated one), and `nat`,
//! `rdr` or `binat` rules beside it.
//!
//! `match` with anything else (`rdr-to`, `tag`, `log`, ...) is refused by name.

use super::lexer::{Tok, Token};
use super::parser::{PErr, Parser, here};
use super::scrub::{Matching, ScrubRule};
use super::*;

impl Parser<'_> {
    /// `match [in|out] [on IFACE] [inet|inet6] [proto P] HOSTS scrub ( OPTIONS )`.
    pub(super) fn match_rule(&mut self) -> PResult<()> {
        let at = self.expect_word("match")?;
        let dir = self.rule_dir()?;
        let m = self.rule_matching("match")?;
        let t = self.peek()?.clone();
        if self.is_word("nat-to")? {
            return self.match_nat(at, dir, m);
        }
        if !self.eat_word("scrub")? {
            return match &t.tok {
                Tok::Word(w) => here(&t, only_scrub_or_nat(w)),
                _ => here(&t, "`match` without `scrub (...)` or `nat-to` changes nothing here"),
            };
        }
        self.expect_punct("(", "\"(\"")?;
        let opts = self.scrub_options(false, true)?;
        self.expect_punct(")", "\")\"")?;
        if let Tok::Word(w) = &self.peek()?.tok {
            let (w, t) = (w.clone(), self.peek()?.clone());
            return here(&t, only_scrub_or_nat(&w));
        }
        self.check_match_place(&at, dir)?;
        self.match_scrubs.push((at.line, dir));
        self.rs.scrub.push(ScrubRule::of(false, dir, m, opts, at.line));
        Ok(())
    }

    /// The rest of `match out ... nat-to TARGET`, from `nat-to`.
    fn match_nat(&mut self, at: Token, dir: Option<Dir>, mut m: Matching) -> PResult<()> {
        let nt = self.next()?;
        if dir != Some(Dir::Out) {
            return here(
                &nt,
                "`nat-to` on a `match` rule that is not `out` is not supported by linerate (`match out ... nat-to`)",
            );
        }
        // Not beside pf's translation rules; beside OpenBSD's `pass in ... rdr-to`, which
        // translates other packets (`translate_rule.rs`).
        let in_the_way = |n: &&NatRule| {
            let ours = self.match_nats.iter().any(|m| m.line == n.line);
            let forward = n.kind == NatKind::Rdr && self.is_pass_translation(n.line);
            !(ours || forward)
        };
        if let Some(t) = self.rs.nat.iter().find(in_the_way).map(|r| r.line) {
            return here(
                &at,
                format!(
                    "`match ... nat-to` together with translation rules (line {t}) is not supported by linerate: write one or the other"
                ),
            );
        }
        let v6_target = |t: &NatTarget| matches!(&t.addr, NatAddr::Pool(p) if p.first().is_some_and(|p| p.af == Af::Inet6));
        let v6 =
            m.af == Some(Af::Inet6) || m.hosts.addr_toks.iter().any(|(_, a, _)| *a == Af::Inet6);
        let target = self.nat_target(NatKind::Nat, &nt)?;
        if v6 || v6_target(&target) {
            return here(
                &at,
                "`match ... nat-to` for IPv6 is not supported by linerate: write pf's NAT66, `nat on IFACE inet6 ... -> ADDRESS`",
            );
        }
        if let Tok::Word(w) = &self.peek()?.tok {
            let (w, t) = (w.clone(), self.peek()?.clone());
            return here(&t, format!("`match ... nat-to ... {w}` is not supported by linerate"));
        }
        if let Some(r) = self.rs.rules.iter().find(|r| r.quick && r.action == Action::Pass) {
            return here(
                &at,
                format!(
                    "`match ... nat-to` after a `pass ... quick` rule (line {}) is not supported by linerate: pf does not translate the packets that rule passes; put the match rules first",
                    r.line
                ),
            );
        }
        self.match_nats.push(MatchNat {
            line: at.line,
            ifaces: m.ifaces.clone(),
            iface_neg: m.iface_neg,
        });
        // nat-to translates IPv4 only, as pf with an IPv4 target.
        m.af = Some(Af::Inet);
        // Last written, first tried: pf's last matching `nat-to` wins.
        self.rs
            .nat
            .insert(0, super::nat::nat_rule_of(NatKind::Nat, false, false, m, Some(target), &at));
        Ok(())
    }

    /// At the end of the file: no outbound filter rule on the interfaces of a `match ...
    /// nat-to` looks at the source, which pf's rules see untranslated and linerate's
    /// translated.
    pub(super) fn check_match_nats(&self) -> PResult<()> {
        for m in &self.match_nats {
            let looks = self.rs.rules.iter().find(|r| {
                let outbound = r.dir != Some(Dir::In);
                let shares = r.ifaces.is_empty()
                    || m.ifaces.is_empty()
                    || r.iface_neg
                    || m.iface_neg
                    || r.ifaces.iter().any(|i| m.ifaces.contains(i));
                outbound && shares && (r.src != AddrMatch::Any || r.src_ports != PortMatch::Any)
            });
            if let Some(r) = looks {
                return Err(PErr::Here(
                    0,
                    r.line,
                    1,
                    format!(
                        "an outbound rule that looks at the source, on the interface of `match ... nat-to` (line {}), is not supported by linerate: pf's rules see the source before translation, linerate's after; match the source on the way in instead",
                        m.line
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A `scrub` rule for direction `dir` after a `match ... scrub` for the same packets.
    pub(super) fn check_scrub_after_match(
        &self,
        at: &super::lexer::Token,
        dir: Option<Dir>,
    ) -> PResult<()> {
        match self.match_scrubs.iter().find(|&&(_, d)| dirs_meet(d, dir)) {
            Some((line, _)) => here(
                at,
                format!(
                    "a `scrub` rule for the packets of `match ... scrub` (line {line}) is not supported by linerate: pf merges their options, linerate applies the first rule's; write one"
                ),
            ),
            None => Ok(()),
        }
    }

    /// The refusals of the module's doc: where a scrub rule would not scrub what pf does.
    fn check_match_place(&self, at: &super::lexer::Token, dir: Option<Dir>) -> PResult<()> {
        if let Some(r) = self.rs.rules.iter().find(|r| r.quick && r.action == Action::Pass) {
            return here(
                at,
                format!(
                    "`match ... scrub` after a `pass ... quick` rule (line {}) is not supported by linerate: pf does not scrub the packets that rule passes; put the match rules first",
                    r.line
                ),
            );
        }
        if let Some(r) = self.rs.scrub.iter().find(|r| dirs_meet(r.dir, dir)) {
            return here(
                at,
                format!(
                    "a second scrub rule for the same packets (line {}) is not supported with `match ... scrub`: pf merges the options of every match rule a packet meets, linerate applies the first scrub rule's; write one rule per direction",
                    r.line
                ),
            );
        }
        Ok(())
    }
}

/// A `match ... nat-to` rule, for the checks at the end of the file.
#[derive(Debug)]
pub(super) struct MatchNat {
    pub(super) line: usize,
    ifaces: Vec<u16>,
    iface_neg: bool,
}

/// Whether rules of directions `a` and `b` (`None`: both) can see the same packets.
fn dirs_meet(a: Option<Dir>, b: Option<Dir>) -> bool {
    a.is_none() || b.is_none() || a == b
}

/// The error for a `match` rule's option other than `scrub` and `nat-to`.
fn only_scrub_or_nat(w: &str) -> String {
    format!(
        "`match ... {w}` is not supported by linerate (only `match ... scrub (...)` and `match out ... nat-to`)"
    )
}
