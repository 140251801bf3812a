//! pf's anchors (pf.conf(5), ANCHORS): `anchor`, `nat-anchor`, `rdr-anchor` and
//! `binat-anchor`.
//!
//! pf evaluates an anchor's rules where the anchor stands. pfSense and OPNsense write empty
//! anchors (`anchor "userrules/*"`, `rdr-anchor "relayd/*"`) that their packages fill at run
//! time with `pfctl -a`; linerate loads no rules into anchors at run time, so such an anchor
//! holds no rules, matches nothing, and is accepted with a notice naming it. An `anchor` with
//! its rules written inline (`anchor "name" { ... }`) and no filter criteria of its own is
//! evaluated as pf does: its rules stand in its place, a `quick` one among them ending the
//! evaluation ("Matching filter and translation rules marked with the quick option are
//! final and abort the evaluation of the rules in other anchors and the main ruleset").

use super::{PResult, Parser, Tok, here};

/// Inline anchors nest; deeper than this is an error (pf's limit is the anchor path's
/// length, MAXPATHLEN) rather than a parser that recurses until the stack runs out.
const MAX_ANCHOR_DEPTH: usize = 64;

impl Parser<'_> {
    /// One anchor statement (the keyword is next).
    pub(super) fn anchor(&mut self) -> PResult<()> {
        let (kw, at) = self.word("an anchor")?;
        let nt = self.peek()?.clone();
        let name = match &nt.tok {
            Tok::Str(s) | Tok::Word(s) => s.clone(),
            _ => return self.fail("an anchor name (a quoted string)"),
        };
        self.next()?;
        // The anchor's own criteria (`anchor "x" in on em0 proto tcp`): they only narrow
        // which packets reach its rules.
        let mut criteria = None;
        loop {
            let t = self.peek()?.clone();
            match &t.tok {
                Tok::Newline | Tok::Eof => break,
                Tok::Punct("{") => {
                    if kw != "anchor" {
                        return here(&t, format!("inline rules of `{kw}` are not supported by linerate (only `anchor \"name\" {{ ... }}` with filter rules)"));
                    }
                    if let Some(c) = criteria {
                        return here(&c, "`anchor` with criteria of its own and inline rules is not supported by linerate (write the criteria in its rules)");
                    }
                    if self.anchor_depth >= MAX_ANCHOR_DEPTH {
                        return here(&t, format!("anchors nested more than {MAX_ANCHOR_DEPTH} deep"));
                    }
                    self.next()?;
                    self.anchor_depth += 1;
                    let rules = self.inline_anchor();
                    self.anchor_depth -= 1;
                    return rules;
                }
                _ => {
                    criteria.get_or_insert(t);
                    self.next()?;
                }
            }
        }
        self.notice(&at, format!("{kw} \"{name}\" holds no rules: linerate does not load rules into anchors at run time (`pfctl -a`), so it matches nothing"));
        Ok(())
    }

    /// The rules of `anchor "name" { ... }` (after the `{`), up to the `}`: filter rules and
    /// nested inline anchors, added where the anchor stands.
    fn inline_anchor(&mut self) -> PResult<()> {
        loop {
            self.skip_newlines()?;
            if self.eat_punct("}")? {
                return Ok(());
            }
            let t = self.peek()?.clone();
            match &t.tok {
                Tok::Word(w) if w == "pass" || w == "block" => self.rule()?,
                Tok::Word(w) if w == "anchor" => self.anchor()?,
                _ => return self.fail("a filter rule (pass, block), an anchor or \"}\" in an inline anchor"),
            }
            if !self.is_punct("}")? {
                self.end_of_statement()?;
            }
        }
    }
}
