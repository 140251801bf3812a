//! OpenBSD's `match [in|out] [on IFACE] [inet|inet6] [proto P] HOSTS scrub (OPTIONS)`, the
//! way OpenBSD writes normalization (`match in all scrub (no-df random-id max-mss 1440)`).
//! pf applies to a packet the scrub options of the match rules it meets on its way through
//! the rules; linerate makes the rule a scrub rule, applied to every packet it matches,
//! which gives the same packets wherever the two cannot differ, and refuses the rest:
//! - a `pass ... quick` rule before it: pf would not scrub what that rule passes;
//! - two scrub rules (`match` or `scrub`) that can apply to the same direction: pf merges
//!   the options of every match rule a packet meets, linerate takes the first rule's.
//!
//! `match` with anything else (`nat-to`, `rdr-to`, `tag`, `log`, ...) is refused by name.

use super::lexer::Tok;
use super::parser::{Parser, here};
use super::scrub::ScrubRule;
use super::*;

impl Parser<'_> {
    /// `match [in|out] [on IFACE] [inet|inet6] [proto P] HOSTS scrub ( OPTIONS )`.
    pub(super) fn match_rule(&mut self) -> PResult<()> {
        let at = self.expect_word("match")?;
        let dir = if self.eat_word("in")? {
            Some(Dir::In)
        } else if self.eat_word("out")? {
            Some(Dir::Out)
        } else {
            None
        };
        let (ifaces, iface_neg) = self.rule_ifaces()?;
        let af = self.rule_af()?;
        let protos = self.rule_protos()?;
        self.refuse_unsupported_option("match ")?;
        let hosts = self.hosts(None)?;
        if let Some(t) = &hosts.route_tok {
            return here(t, format!("`{}` in a match rule is not supported by linerate", super::lexer::describe(&t.tok).trim_matches('"')));
        }
        let t = self.peek()?.clone();
        if !self.eat_word("scrub")? {
            return match &t.tok {
                Tok::Word(w) => here(&t, format!("`match ... {w}` is not supported by linerate (only `match ... scrub (...)`, made a scrub rule)")),
                _ => here(&t, "`match` without `scrub (...)` changes nothing here: write `match ... scrub (...)`"),
            };
        }
        self.expect_punct("(", "\"(\"")?;
        let opts = self.scrub_options(false, true)?;
        self.expect_punct(")", "\")\"")?;
        if let Tok::Word(w) = &self.peek()?.tok {
            let (w, t) = (w.clone(), self.peek()?.clone());
            return here(&t, format!("`match ... {w}` is not supported by linerate (only `match ... scrub (...)`, made a scrub rule)"));
        }
        self.check_match_place(&at, dir)?;
        self.match_scrubs.push((at.line, dir));
        self.rs.scrub.push(ScrubRule {
            exempt: false,
            dir,
            ifaces,
            iface_neg,
            af,
            protos,
            src: hosts.src,
            src_ports: hosts.src_ports,
            dst: hosts.dst,
            dst_ports: hosts.dst_ports,
            opts,
            line: at.line,
        });
        Ok(())
    }

    /// A `scrub` rule for direction `dir` after a `match ... scrub` for the same packets.
    pub(super) fn check_scrub_after_match(&self, at: &super::lexer::Token, dir: Option<Dir>) -> PResult<()> {
        match self.match_scrubs.iter().find(|&&(_, d)| d.is_none() || dir.is_none() || d == dir) {
            Some((line, _)) => here(at, format!("a `scrub` rule for the packets of `match ... scrub` (line {line}) is not supported by linerate: pf merges their options, linerate applies the first rule's; write one")),
            None => Ok(()),
        }
    }

    /// The refusals of the module's doc: where a scrub rule would not scrub what pf does.
    fn check_match_place(&self, at: &super::lexer::Token, dir: Option<Dir>) -> PResult<()> {
        if let Some(r) = self.rs.rules.iter().find(|r| r.quick && r.action == Action::Pass) {
            return here(at, format!("`match ... scrub` after a `pass ... quick` rule (line {}) is not supported by linerate: pf does not scrub the packets that rule passes; put the match rules first", r.line));
        }
        let overlaps = |d: Option<Dir>| d.is_none() || dir.is_none() || d == dir;
        if let Some(r) = self.rs.scrub.iter().find(|r| overlaps(r.dir)) {
            return here(at, format!("a second scrub rule for the same packets (line {}) is not supported with `match ... scrub`: pf merges the options of every match rule a packet meets, linerate applies the first scrub rule's; write one rule per direction", r.line));
        }
        Ok(())
    }
}
