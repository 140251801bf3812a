//! pf's anchors (pf.conf(5), ANCHORS): `anchor`, `nat-anchor`, `rdr-anchor` and
//! `binat-anchor`.
//!
//! pf evaluates an anchor's rules where the anchor stands. pfSense and OPNsense write empty
//! anchors (`anchor "userrules/*"`, `rdr-anchor "relayd/*"`) that their packages fill at run
//! time with `pfctl -a`; linerate loads no rules into anchors at run time, so such an anchor
//! holds no rules, matches nothing, and is accepted with a notice naming it. An `anchor` with
//! its rules written inline (`anchor "name" { ... }`), or loaded from a file by `load anchor
//! "name" from "file"` (before or after it), and no filter criteria of its own is
//! evaluated as pf does: its rules stand in its place, a `quick` one among them ending the
//! evaluation ("Matching filter and translation rules marked with the quick option are
//! final and abort the evaluation of the rules in other anchors and the main ruleset").

use super::{PResult, Parser, Tok, here};

/// What an anchor holds: filter rules (`anchor`) or translation rules of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorKind {
    Filter,
    Nat,
    Rdr,
    Binat,
}

impl AnchorKind {
    /// The statement's keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            AnchorKind::Filter => "anchor",
            AnchorKind::Nat => "nat-anchor",
            AnchorKind::Rdr => "rdr-anchor",
            AnchorKind::Binat => "binat-anchor",
        }
    }

    fn of(keyword: &str) -> AnchorKind {
        match keyword {
            "nat-anchor" => AnchorKind::Nat,
            "rdr-anchor" => AnchorKind::Rdr,
            "binat-anchor" => AnchorKind::Binat,
            _ => AnchorKind::Filter,
        }
    }
}

/// An anchor as the file wrote it, kept to print the rule set as pfctl does (`linerate check
/// -v`). Its rules stand in the rule set in its place already: evaluation needs nothing of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub kind: AnchorKind,
    pub name: String,
    /// The anchors it is written inside (0: the main rule set).
    pub depth: usize,
    /// Where it stands: the index in [`RuleSet::rules`](super::RuleSet::rules) of its first
    /// rule (of the first rule after it when it holds none); in
    /// [`RuleSet::nat`](super::RuleSet::nat) for a translation anchor.
    pub start: usize,
    /// One past its last rule: `start` when it holds none (a translation anchor always).
    pub end: usize,
}

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
        let kind = AnchorKind::of(&kw);
        loop {
            let t = self.peek()?.clone();
            match &t.tok {
                Tok::Newline | Tok::Eof => break,
                // pfctl prints an anchor without criteria as `anchor "x" all`.
                Tok::Word(w) if w == "all" && criteria.is_none() => {
                    self.next()?;
                }
                Tok::Punct("{") => {
                    if kw != "anchor" {
                        return here(
                            &t,
                            format!(
                                "inline rules of `{kw}` are not supported by linerate (only `anchor \"name\" {{ ... }}` with filter rules)"
                            ),
                        );
                    }
                    if let Some(c) = criteria {
                        return here(
                            &c,
                            "`anchor` with criteria of its own and inline rules is not supported by linerate (write the criteria in its rules)",
                        );
                    }
                    if self.anchor_depth >= MAX_ANCHOR_DEPTH {
                        return here(
                            &t,
                            format!("anchors nested more than {MAX_ANCHOR_DEPTH} deep"),
                        );
                    }
                    self.next()?;
                    return self.anchor_block(kind, name, Self::inline_anchor);
                }
                _ => {
                    criteria.get_or_insert(t);
                    self.next()?;
                }
            }
        }
        if kw == "anchor"
            && let Some(file) = self.anchor_file(&name)?
        {
            if let Some(c) = criteria {
                return here(
                    &c,
                    "`anchor` with criteria of its own and rules loaded by `load anchor` is not supported by linerate (write the criteria in its rules)",
                );
            }
            return self.loaded_anchor(&name, &file, &nt);
        }
        self.notice(&at, format!("{kw} \"{name}\" holds no rules: linerate does not load rules into anchors at run time (`pfctl -a`), so it matches nothing"));
        let at = if kind == AnchorKind::Filter { self.rs.rules.len() } else { self.rs.nat.len() };
        self.rs.anchors.push(Anchor { kind, name, depth: self.anchor_depth, start: at, end: at });
        Ok(())
    }

    /// The file `load anchor NAME from FILE` loads into anchor `name`, before or after this
    /// `anchor` statement (pf.conf(5)'s examples write the `load` after it).
    fn anchor_file(&mut self, name: &str) -> PResult<Option<std::path::PathBuf>> {
        if let Some(f) = self.anchor_files.get(name) {
            return Ok(Some(f.clone()));
        }
        // The statements still to come, in order: a `load` at the start of a line.
        fn word(t: &super::Token) -> Option<&str> {
            match &t.tok {
                Tok::Word(s) | Tok::Str(s) => Some(s.as_str()),
                _ => None,
            }
        }
        let ahead: Vec<&super::Token> = self.toks.iter().rev().collect();
        for w in ahead.windows(6) {
            let head = [word(w[1]), word(w[2]), word(w[3]), word(w[4])];
            if w[0].tok == Tok::Newline
                && head == [Some("load"), Some("anchor"), Some(name), Some("from")]
                && let Tok::Str(f) = &w[5].tok
            {
                return Ok(Some(
                    self.file_of(w[5]).parent().unwrap_or(std::path::Path::new("")).join(f),
                ));
            }
        }
        Ok(None)
    }

    /// Anchor `name`'s rules from `file`, read where the anchor stands as if written inline.
    fn loaded_anchor(
        &mut self,
        name: &str,
        file: &std::path::Path,
        at: &super::Token,
    ) -> PResult<()> {
        if self.anchor_depth >= MAX_ANCHOR_DEPTH || self.files.len() > super::parser::MAX_INCLUDES {
            return here(
                at,
                format!(
                    "anchors nested more than {MAX_ANCHOR_DEPTH} deep, or too many files loaded"
                ),
            );
        }
        let text = super::read_rule_text(file).or_else(|e| {
            here(
                at,
                format!(
                    "cannot read the rules of anchor \"{name}\" from \"{}\": {e}",
                    file.display()
                ),
            )
        })?;
        // The file's end closes the anchor, as `}` closes an inline one.
        self.splice_file(file.to_path_buf(), &text, Tok::Punct("}"))?;
        self.anchors_loaded.insert(name.to_owned());
        self.anchor_block(AnchorKind::Filter, name.to_owned(), Self::inline_anchor)
    }

    /// The rules of anchor `name`, read by `rules` one level deeper, recorded in
    /// [`RuleSet::anchors`](super::RuleSet::anchors) with the place they take.
    fn anchor_block(
        &mut self,
        kind: AnchorKind,
        name: String,
        rules: fn(&mut Self) -> PResult<()>,
    ) -> PResult<()> {
        let (k, start) = (self.rs.anchors.len(), self.rs.rules.len());
        self.rs.anchors.push(Anchor { kind, name, depth: self.anchor_depth, start, end: start });
        self.anchor_depth += 1;
        let read = rules(self);
        self.anchor_depth -= 1;
        let end = self.rs.rules.len();
        if let Some(a) = self.rs.anchors.get_mut(k) {
            a.end = end;
        }
        read
    }

    /// `load anchor NAME from FILE`: NAME's rules, for an `anchor NAME` that stands before
    /// or after it. Loaded into no anchor that is evaluated, they match nothing: a notice.
    pub(super) fn load_anchor(&mut self) -> PResult<()> {
        let (_, at) = self.word("load")?;
        self.expect_word("anchor")?;
        let nt = self.peek()?.clone();
        let name = match &nt.tok {
            Tok::Str(s) | Tok::Word(s) => s.clone(),
            _ => return self.fail("an anchor name"),
        };
        self.next()?;
        self.expect_word("from")?;
        let ft = self.peek()?.clone();
        let Tok::Str(f) = &ft.tok else { return self.fail("a quoted file name") };
        let file = self.file_of(&ft).parent().unwrap_or(std::path::Path::new("")).join(f);
        // pfctl reads it here: a file that is not there is an error, used or not.
        if let Err(e) = super::read_rule_text(&file) {
            return here(
                &ft,
                format!(
                    "cannot read the rules of anchor \"{name}\" from \"{}\": {e}",
                    file.display()
                ),
            );
        }
        self.next()?;
        if !self.anchors_loaded.contains(&name) && !self.anchor_files.contains_key(&name) {
            let ahead = self
                .toks
                .iter()
                .rev()
                .any(|t| matches!(&t.tok, Tok::Str(s) | Tok::Word(s) if *s == name));
            if !ahead {
                self.notice(&at, format!("the rules loaded into anchor \"{name}\" match nothing: no `anchor \"{name}\"` evaluates them"));
            }
            self.anchor_files.insert(name, file);
        }
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
                _ => {
                    return self.fail(
                        "a filter rule (pass, block), an anchor or \"}\" in an inline anchor",
                    );
                }
            }
            if !self.is_punct("}")? {
                self.end_of_statement()?;
            }
        }
    }
}
