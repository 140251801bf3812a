//! The parser's machinery (tokens with macro expansion, errors) and the statements other
//! than filter rules: macro definitions, tables and `set` options.

use std::collections::HashMap;
use std::path::Path;

use super::*;

pub(super) enum PErr {
    /// File (`Parser::files`), line, column, message.
    Here(u16, usize, usize, String),
    /// An error located in another file (a table file).
    Full(RuleError),
}

pub(super) type PResult<T> = Result<T, PErr>;

pub(super) const MAX_MACRO_DEPTH: u8 = 16;

/// The most tokens macro expansions may add to one file. A few nested macros, each naming
/// the one below ten times, expand past memory ("billion laughs": 9 lines, 10^8 addresses,
/// gigabytes, minutes); a `linerate reload` parses in the running router. Real files stay
/// far below: a 5,000-address macro used in 50 rules adds 500,000.
pub(super) const MAX_MACRO_TOKENS: usize = 2_000_000;

pub(super) const RESERVED: &[&str] = &[
    "pass",
    "block",
    "in",
    "out",
    "quick",
    "on",
    "inet",
    "inet6",
    "proto",
    "from",
    "to",
    "port",
    "all",
    "any",
    "flags",
    "keep",
    "modulate",
    "synproxy",
    "no",
    "state",
    "label",
    "table",
    "set",
    "log",
    "icmp-type",
    "icmp6-type",
    "code",
    "file",
    "drop",
    "return",
    "allow-opts",
];

pub(super) struct Parser<'a> {
    /// Remaining tokens, reversed (next token last).
    pub(super) toks: Vec<Token>,
    pub(super) macros: HashMap<String, String>,
    pub(super) table_idx: HashMap<String, usize>,
    /// Tables a rule named before any `table` line defined them: pfctl creates them empty,
    /// and a later definition fills them.
    pub(super) tables_referenced: std::collections::HashSet<String>,
    pub(super) rs: RuleSet,
    pub(super) path: &'a Path,
    pub(super) ifaces: &'a dyn Fn(&str) -> Option<u16>,
    /// `set limit table-entries N`, with its token: checked against the tables at the end.
    pub(super) table_entries_limit: Option<(u64, Token)>,
    /// The file sets `adaptive.start` or `adaptive.end`: pfctl then leaves both as written
    /// rather than deriving them from `set limit states`.
    pub(super) adaptive_set: bool,
    /// The router's addresses per interface, if the caller gave them.
    pub(super) addresses: Option<&'a super::InterfaceAddresses>,
    /// Where the first `synproxy state` is (a translation rule anywhere in the file is then
    /// refused there: see `filter_rule.rs`).
    pub(super) synproxy_at: Option<Token>,
    /// The `match ... scrub` rules so far, (line, direction): a `scrub` rule for the same
    /// packets after one is refused (`match_rule.rs`).
    pub(super) match_scrubs: Vec<(usize, Option<Dir>)>,
    /// The `match ... nat-to` rules so far: checked against the filter rules at the end of
    /// the file (`match_rule.rs`).
    pub(super) match_nats: Vec<super::match_rule::MatchNat>,
    /// The pass rules with `rdr-to` or `nat-to`, made translation rules: checked against the
    /// filter rules at the end of the file (`translate_rule.rs`).
    pub(super) pass_translations: Vec<super::translate_rule::PassTranslation>,
    /// `set state-defaults` (`filter_rule.rs`).
    pub(super) state_defaults: Option<super::filter_rule::StateDefaults>,
    /// Tokens macro expansions have added so far (at most [`MAX_MACRO_TOKENS`]).
    pub(super) macro_tokens: usize,
    /// Inline anchors the parser is inside (`anchor.rs`).
    pub(super) anchor_depth: usize,
    /// The rule file, then each file `include`d, in the order read (`Token::file`).
    pub(super) files: Vec<std::path::PathBuf>,
    /// `load anchor NAME from FILE` statements read so far: NAME's file, for an `anchor NAME`
    /// after it.
    pub(super) anchor_files: HashMap<String, std::path::PathBuf>,
    /// Anchors whose `load anchor` file stands where `anchor NAME` stands.
    pub(super) anchors_loaded: std::collections::HashSet<String>,
}

/// `name:network` -> (`name`, `:network`); a name without modifier -> (`name`, "").
fn split_modifier(var: &str) -> (&str, &str) {
    var.find(':').map_or((var, ""), |i| var.split_at(i))
}

pub(super) fn here<T>(t: &Token, msg: impl Into<String>) -> PResult<T> {
    Err(PErr::Here(t.file, t.line, t.col, msg.into()))
}

/// Files one rule file may include, directly or not: more means a cycle.
pub(super) const MAX_INCLUDES: usize = 64;

/// The `set timeout` names pfctl knows that linerate has no use for, and why.
fn unsupported_timeout(name: &str) -> Option<&'static str> {
    if name.starts_with("sctp.") {
        return Some(
            "FreeBSD's SCTP states: linerate tracks SCTP as other protocols, under `other.*`",
        );
    }
    match name {
        "tcp.tsdiff" => Some("OpenBSD's bound on TCP timestamps, which linerate does not check"),
        _ => None,
    }
}

/// pf's `set debug` levels: FreeBSD's, then OpenBSD's syslog names.
const DEBUG_LEVELS: &[&str] = &[
    "none", "urgent", "misc", "loud", "emerg", "alert", "crit", "err", "warning", "notice", "info",
    "debug",
];

impl Parser<'_> {
    /// Raw next token, no macro expansion.
    pub(super) fn peek_raw(&self) -> &Token {
        // The Eof token is never popped.
        self.toks.last().expect("eof token")
    }

    /// Next token after macro expansion.
    pub(super) fn peek(&mut self) -> PResult<&Token> {
        loop {
            let t = self.peek_raw();
            let Tok::Var(name) = &t.tok else { break };
            let t = t.clone();
            let (name, modifier) = split_modifier(name);
            let Some(value) = self.macros.get(name) else {
                return here(&t, format!("undefined macro ${name}"));
            };
            if t.depth >= MAX_MACRO_DEPTH {
                return here(
                    &t,
                    format!("macro ${name} expands too deeply (recursive definition?)"),
                );
            }
            let mut toks =
                lex(value, Some((t.line, t.col, t.depth + 1)), t.file).map_err(|(l, c, m)| {
                    PErr::Here(t.file, l, c, format!("in the value of ${name}: {m}"))
                })?;
            if !modifier.is_empty() {
                match toks.as_mut_slice() {
                    [Token { tok: Tok::Word(w), .. }] => w.push_str(modifier),
                    _ => {
                        return here(
                            &t,
                            format!("${name}{modifier}: ${name} must hold one interface name"),
                        );
                    }
                }
            }
            if toks.iter().any(|t| t.tok == Tok::Newline) {
                return here(&t, format!("macro ${name} holds a line break"));
            }
            let expanded = self.macro_tokens + toks.len();
            if expanded > MAX_MACRO_TOKENS {
                return here(
                    &t,
                    format!(
                        "macro expansions in this file add more than {MAX_MACRO_TOKENS} tokens here (${name}: a macro that repeats another many times over?); use a table for large address sets"
                    ),
                );
            }
            self.macro_tokens = expanded;
            self.toks.pop();
            self.toks.extend(toks.into_iter().rev());
        }
        Ok(self.peek_raw())
    }

    pub(super) fn next(&mut self) -> PResult<Token> {
        self.peek()?;
        let t = self.toks.last().cloned().expect("eof token");
        if t.tok != Tok::Eof {
            self.toks.pop();
        }
        Ok(t)
    }

    pub(super) fn fail<T>(&mut self, expected: &str) -> PResult<T> {
        let t = self.peek()?.clone();
        here(&t, format!("expected {expected}, found {}", describe(&t.tok)))
    }

    pub(super) fn is_word(&mut self, w: &str) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tok, Tok::Word(x) if x == w))
    }

    pub(super) fn eat_word(&mut self, w: &str) -> PResult<bool> {
        if self.is_word(w)? {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    pub(super) fn is_punct(&mut self, p: &str) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tok, Tok::Punct(x) if *x == p))
    }

    pub(super) fn eat_punct(&mut self, p: &str) -> PResult<bool> {
        if self.is_punct(p)? {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    pub(super) fn expect_word(&mut self, w: &str) -> PResult<Token> {
        if self.is_word(w)? {
            return self.next();
        }
        self.fail(&format!("\"{w}\""))
    }

    pub(super) fn expect_punct(&mut self, p: &str, what: &str) -> PResult<Token> {
        if self.is_punct(p)? {
            return self.next();
        }
        self.fail(what)
    }

    /// Any word (after expansion), else error.
    pub(super) fn word(&mut self, what: &str) -> PResult<(String, Token)> {
        let t = self.peek()?.clone();
        match &t.tok {
            Tok::Word(w) => {
                let w = w.clone();
                self.next()?;
                Ok((w, t))
            }
            _ => self.fail(what),
        }
    }

    pub(super) fn skip_newlines(&mut self) -> PResult<()> {
        while self.peek()?.tok == Tok::Newline {
            self.next()?;
        }
        Ok(())
    }

    pub(super) fn end_of_statement(&mut self) -> PResult<()> {
        match self.peek()?.tok {
            Tok::Newline | Tok::Eof => {
                self.next()?;
                Ok(())
            }
            _ => self.fail("end of line"),
        }
    }

    pub(super) fn file(&mut self) -> PResult<()> {
        loop {
            self.skip_newlines()?;
            let t = self.peek_raw().clone();
            match &t.tok {
                Tok::Eof => {
                    self.check_synproxy_without_nat()?;
                    self.check_pass_translations()?;
                    return self.check_match_nats();
                }
                Tok::Word(w) => {
                    let is_def = matches!(
                        self.toks.iter().rev().nth(1),
                        Some(Token { tok: Tok::Punct("="), .. })
                    );
                    if is_def {
                        self.macro_def()?;
                    } else {
                        match w.as_str() {
                            "table" => self.table_def()?,
                            "include" => self.include()?,
                            "load" => self.load_anchor()?,
                            "set" => self.set_option()?,
                            "pass" | "block" => self.rule()?,
                            "scrub" => self.scrub_rule()?,
                            "match" => self.match_rule()?,
                            "no" if self.no_scrub() => self.scrub_rule()?,
                            "nat" | "rdr" | "binat" | "no" => self.nat_rule()?,
                            "antispoof" => self.antispoof()?,
                            "anchor" | "nat-anchor" | "rdr-anchor" | "binat-anchor" => {
                                self.anchor()?
                            }
                            _ => {
                                self.refuse_unsupported_statement()?;
                                return self.fail(
                                    "a rule (pass, block), table, set or a macro definition",
                                );
                            }
                        }
                    }
                }
                _ => {
                    // A macro expanding to a rule start, or garbage.
                    let t = self.peek()?.clone();
                    match &t.tok {
                        Tok::Word(w) if w == "pass" || w == "block" => self.rule()?,
                        _ => {
                            return self
                                .fail("a rule (pass, block), table, set or a macro definition");
                        }
                    }
                }
            }
            self.end_of_statement()?;
        }
    }

    /// Whether the statement is `no scrub` (the raw token after `no`).
    fn no_scrub(&self) -> bool {
        matches!(self.toks.iter().rev().nth(1), Some(Token { tok: Tok::Word(w), .. }) if w == "scrub")
    }

    pub(super) fn macro_def(&mut self) -> PResult<()> {
        let t = self.toks.pop().expect("word");
        let Tok::Word(name) = &t.tok else { unreachable!() };
        // OPNsense names its own macros `__lan_network`: pfctl takes a leading '_'.
        if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return here(
                &t,
                format!(
                    "invalid macro name \"{name}\" (a letter or '_', then letters, digits or '_')"
                ),
            );
        }
        if RESERVED.contains(&name.as_str()) {
            return here(&t, format!("\"{name}\" is a reserved word, not a macro name"));
        }
        self.toks.pop(); // '='
        let mut parts: Vec<String> = Vec::new();
        loop {
            let t = self.peek_raw().clone();
            match &t.tok {
                Tok::Newline | Tok::Eof => break,
                Tok::Str(s) | Tok::Word(s) => parts.push(s.clone()),
                Tok::Punct(p) => parts.push((*p).to_string()),
                Tok::Var(v) => {
                    let (v, modifier) = split_modifier(v);
                    match self.macros.get(v) {
                        Some(val) => parts.push(format!("{val}{modifier}")),
                        None => return here(&t, format!("undefined macro ${v}")),
                    }
                }
            }
            self.toks.pop();
        }
        if parts.is_empty() {
            return self.fail("a macro value (a quoted string)");
        }
        self.macros.insert(name.clone(), parts.join(" "));
        Ok(())
    }

    pub(super) fn table_def(&mut self) -> PResult<()> {
        self.expect_word("table")?;
        self.expect_punct("<", "\"<\" (table <name>)")?;
        let (name, nt) = self.word("a table name")?;
        self.expect_punct(">", "\">\" closing the table name")?;
        let referenced = self.tables_referenced.remove(&name);
        if self.table_idx.contains_key(&name) && !referenced {
            return here(&nt, format!("table <{name}> is already defined"));
        }
        let mut entries = Vec::new();
        let mut constant = false;
        loop {
            if self.eat_word("const")? {
                constant = true;
                continue;
            }
            if self.eat_word("persist")? || self.eat_word("counters")? {
                continue;
            }
            if self.eat_punct("{")? {
                loop {
                    self.skip_newlines()?;
                    if self.eat_punct("}")? {
                        break;
                    }
                    let negated = self.eat_punct("!")?;
                    let t = self.peek()?.clone();
                    let Tok::Word(w) = &t.tok else {
                        return self.fail("an address or a prefix, or \"}\"");
                    };
                    let Some(prefix) = parse_prefix(w) else {
                        return self.fail("an address or a prefix, or \"}\"");
                    };
                    self.next()?;
                    entries.push(TableEntry { negated, prefix });
                    self.eat_punct(",")?;
                }
                continue;
            }
            if self.is_word("file")? {
                self.next()?;
                let t = self.peek()?.clone();
                let Tok::Str(f) = &t.tok else {
                    return self.fail("a quoted file name");
                };
                let f = f.clone();
                self.next()?;
                let base = self.file_of(&t).parent().unwrap_or(Path::new("")).to_path_buf();
                let fp = base.join(&f);
                let text = super::read_rule_text(&fp).or_else(|e| {
                    here(&t, format!("cannot read table file \"{}\": {e}", fp.display()))
                })?;
                parse_table_file(&text, &fp, &mut entries).map_err(PErr::Full)?;
                continue;
            }
            break;
        }
        match self.peek()?.tok {
            Tok::Newline | Tok::Eof => {}
            _ => return self.fail("\"{\", file, persist, const, counters or end of line"),
        }
        let table = Table { name: name.clone(), entries, constant };
        match self.table_idx.get(&name) {
            Some(&i) => self.rs.tables[i] = table,
            None => {
                self.table_idx.insert(name, self.rs.tables.len());
                self.rs.tables.push(table);
            }
        }
        Ok(())
    }

    /// The index of table `<name>`, made empty if no `table` line defined it yet (as pfctl
    /// does: a later definition fills it; `linerate table` can add entries).
    pub(super) fn table_named(&mut self, name: &str) -> usize {
        if let Some(&i) = self.table_idx.get(name) {
            return i;
        }
        self.tables_referenced.insert(name.to_owned());
        self.table_idx.insert(name.to_owned(), self.rs.tables.len());
        self.rs.tables.push(Table { name: name.to_owned(), entries: Vec::new(), constant: false });
        self.rs.tables.len() - 1
    }

    /// Fails with "`X` is not supported by linerate" at the next word if it is one of
    /// [`UNSUPPORTED`]; `context` is the text shown before it (e.g. "block ").
    pub(super) fn refuse_unsupported(&mut self, context: &str) -> PResult<()> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && let Some((_, why)) = UNSUPPORTED.iter().find(|(u, _)| u == w)
        {
            let context = if w == "log" { "" } else { context };
            return here(&t, format!("`{context}{w}` is not supported by linerate ({why})"));
        }
        Ok(())
    }

    pub(super) fn number(&mut self, what: &str, max: u64) -> PResult<u64> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && let Ok(n) = w.parse::<u64>()
        {
            if n > max {
                return here(&t, format!("{what} {n} out of range (at most {max})"));
            }
            self.next()?;
            return Ok(n);
        }
        self.fail(what)
    }

    /// One `set limit` / `set timeout` item, or a braced, comma-separated list of them
    /// (pf.conf(5): `set timeout { tcp.first 120, udp.first 60 }`).
    fn settings(&mut self, mut item: impl FnMut(&mut Self) -> PResult<()>) -> PResult<()> {
        let braced = self.eat_punct("{")?;
        loop {
            if braced {
                self.skip_newlines()?;
            }
            item(self)?;
            if !braced {
                return Ok(());
            }
            self.eat_punct(",")?;
            self.skip_newlines()?;
            if self.eat_punct("}")? {
                return Ok(());
            }
        }
    }

    /// pf refuses tables holding more entries, all together, than `set limit
    /// table-entries` (its `PF_LIMIT_TABLE_ENTRIES`).
    pub(super) fn check_table_entries(&self) -> PResult<()> {
        let Some((limit, t)) = &self.table_entries_limit else {
            return Ok(());
        };
        let n: usize = self.rs.tables.iter().map(|t| t.entries.len()).sum();
        if n as u64 > *limit {
            return here(
                t,
                format!("the tables hold {n} entries, above `set limit table-entries {limit}`"),
            );
        }
        Ok(())
    }

    /// After `set optimization`: pfctl's presets of the TCP timeouts (pfctl.c `pf_hints`),
    /// applied where the statement stands (a later `set timeout` overrides them). pf's
    /// `tcp.tsdiff` of each preset has no counterpart: linerate does not check timestamps.
    fn optimization(&mut self) -> PResult<()> {
        let (name, t) = self.word("normal, high-latency, satellite, conservative or aggressive")?;
        // tcp.first, tcp.opening, tcp.established, tcp.closing, tcp.finwait, tcp.closed.
        let secs: [u32; 6] = match name.as_str() {
            "normal" | "default" => [120, 30, 86400, 900, 45, 90],
            "high-latency" | "satellite" => [180, 35, 86400, 905, 50, 95],
            "conservative" => [3600, 900, 432_000, 3600, 600, 180],
            "aggressive" => [30, 5, 18000, 60, 30, 30],
            _ => {
                return here(
                    &t,
                    format!(
                        "unknown optimization \"{name}\" (normal, high-latency, satellite, conservative or aggressive)"
                    ),
                );
            }
        };
        let to = &mut self.rs.timeouts;
        [
            to.tcp_first,
            to.tcp_opening,
            to.tcp_established,
            to.tcp_closing,
            to.tcp_finwait,
            to.tcp_closed,
        ] = secs;
        Ok(())
    }

    /// After `set skip on`: interface names, the ones not configured left out with a notice
    /// (pf skips an interface that does not exist yet; here it has no packets).
    fn skip_list(&mut self) -> PResult<Vec<u16>> {
        let braced = self.eat_punct("{")?;
        let mut out = Vec::new();
        let mut seen = 0;
        loop {
            if braced {
                self.skip_newlines()?;
                if seen > 0 && self.eat_punct("}")? {
                    return Ok(out);
                }
            }
            let (name, t) = self.word("an interface name")?;
            seen += 1;
            match (self.ifaces)(&name) {
                Some(i) if !out.contains(&i) => out.push(i),
                Some(_) => {}
                // Loopback: linerate never sees its traffic, the skip holds already.
                None if matches!(name.as_str(), "lo" | "lo0") => {}
                None => self.notice(&t, format!("`set skip on {name}`: no interface \"{name}\" is configured, nothing to skip")),
            }
            if !braced {
                return Ok(out);
            }
            self.eat_punct(",")?;
        }
    }

    /// `NAME SECONDS` of `set timeout` (`adaptive.start` and `adaptive.end` take a number
    /// of states).
    fn timeout_setting(&mut self) -> PResult<()> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && (w == "adaptive.start" || w == "adaptive.end")
        {
            self.adaptive_set = true;
        }
        if let Tok::Word(w) = &t.tok
            && let Some(why) = unsupported_timeout(w)
        {
            return here(&t, format!("timeout `{w}` is not supported by linerate ({why})"));
        }
        let ok = matches!(&t.tok, Tok::Word(w) if self.rs.timeouts.get_mut(w).is_some());
        if !ok {
            return self.fail(
                "a timeout name (tcp.first, tcp.opening, tcp.established, tcp.closing, \
                 tcp.finwait, tcp.closed, udp.first, udp.single, udp.multiple, icmp.first, \
                 icmp.error, other.first, other.single, other.multiple, interval, src.track, frag, adaptive.start, adaptive.end)",
            );
        }
        let (name, _) = self.word("")?;
        let what = if name.starts_with("adaptive.") {
            "a number of states"
        } else {
            "a number of seconds"
        };
        let v = self.number(what, u32::MAX as u64)? as u32;
        *self.rs.timeouts.get_mut(&name).expect("checked") = v;
        Ok(())
    }

    /// The file token `t` comes from.
    pub(super) fn file_of(&self, t: &Token) -> &Path {
        self.files.get(usize::from(t.file)).map_or(self.path, |p| p.as_path())
    }

    /// `include "FILE"` (pf.conf(5)): FILE's statements in place of the line, as if written
    /// there (macros defined before it apply in it; its own apply after it). A relative name
    /// is taken from the including file's folder, as `table ... file` names are.
    fn include(&mut self) -> PResult<()> {
        self.expect_word("include")?;
        let t = self.peek()?.clone();
        let Tok::Str(name) = &t.tok else {
            return self.fail("a quoted file name");
        };
        let path = self.file_of(&t).parent().unwrap_or(Path::new("")).join(name);
        self.next()?;
        match self.peek()?.tok {
            Tok::Newline | Tok::Eof => {}
            _ => return self.fail("end of line"),
        }
        if self.files.len() > MAX_INCLUDES {
            return here(
                &t,
                format!("more than {MAX_INCLUDES} files included (does a file include itself?)"),
            );
        }
        let text = super::read_rule_text(&path).or_else(|e| {
            here(&t, format!("cannot read included file \"{}\": {e}", path.display()))
        })?;
        // Its end of file ends its last statement.
        self.splice_file(path, &text, Tok::Newline)?;
        // What ends the `include` statement, before the file's first.
        self.toks.push(Token { tok: Tok::Newline, ..t });
        Ok(())
    }

    /// Makes the statements of `text`, read from `path`, the next to parse, its end of file
    /// read as `end` (`include`, `load anchor`).
    pub(super) fn splice_file(
        &mut self,
        path: std::path::PathBuf,
        text: &str,
        end: Tok,
    ) -> PResult<()> {
        let file = self.files.len() as u16;
        self.files.push(path.clone());
        let mut toks = lex(text, None, file).map_err(|(line, column, message)| {
            PErr::Full(RuleError { path, line, column, message })
        })?;
        if let Some(eof) = toks.last_mut() {
            eof.tok = end;
        }
        self.toks.extend(toks.into_iter().rev());
        Ok(())
    }

    /// Notes `msg` about the token `t` in [`RuleSet::notices`].
    pub(super) fn notice(&mut self, t: &Token, msg: impl std::fmt::Display) {
        self.rs.notices.push(format!("{}:{}:{}: {msg}", self.file_of(t).display(), t.line, t.col));
    }

    /// The `set` options that change no verdict here: pf's kernel log level (`debug`;
    /// linerate logs by its own `--log-level`), pfsync's `hostid` (no pfsync), the OS
    /// `fingerprints` of `os` rules (refused), `require-order` (linerate takes statements in
    /// any order), and `reassemble yes` (what linerate's fragment table does for IPv4).
    fn set_without_effect(&mut self) -> PResult<()> {
        let (opt, _) = self.word("")?;
        let t = self.peek()?.clone();
        let (arg, ok) = match &t.tok {
            Tok::Word(w) => (
                w.clone(),
                match opt.as_str() {
                    "debug" => DEBUG_LEVELS.contains(&w.as_str()),
                    "hostid" => {
                        w.parse::<u32>().is_ok()
                            || w.starts_with("0x") && u32::from_str_radix(&w[2..], 16).is_ok()
                    }
                    "require-order" => w == "yes" || w == "no",
                    "reassemble" => w == "yes" || w == "no",
                    _ => false,
                },
            ),
            Tok::Str(_) if opt == "fingerprints" => (String::new(), true),
            _ => (String::new(), false),
        };
        if !ok {
            let what = match opt.as_str() {
                "debug" => "a debug level (none, urgent, misc, loud, or emerg ... debug)",
                "hostid" => "a host id (a number)",
                "fingerprints" => "a quoted file name",
                _ => "yes or no",
            };
            return self.fail(what);
        }
        if opt == "reassemble" && arg == "no" {
            return here(
                &t,
                "`set reassemble no` is not supported by linerate (its fragment table always gives IPv4 fragments their datagram's ports, as pf's reassembly does)",
            );
        }
        self.next()?;
        if opt == "reassemble" && self.is_word("no-df")? {
            let t = self.peek()?.clone();
            return here(
                &t,
                "`no-df` is not supported by linerate (it does not reassemble, so there is no reassembled packet to clear DF on)",
            );
        }
        Ok(())
    }

    pub(super) fn set_option(&mut self) -> PResult<()> {
        self.expect_word("set")?;
        if self.eat_word("limit")? {
            self.settings(|p| {
                if p.eat_word("table-entries")? {
                    let t = p.peek()?.clone();
                    let n = p.number("a number of table entries", u64::MAX)?;
                    p.table_entries_limit = Some((n, t));
                    p.rs.limit_table_entries = Some(n);
                    return Ok(());
                }
                if p.eat_word("src-nodes")? {
                    p.rs.limit_src_nodes = p.number("a number of source nodes", MAX_LIMIT_SRC_NODES)?;
                    return Ok(());
                }
                if p.eat_word("frags")? {
                    let t = p.peek()?.clone();
                    p.rs.limit_frags = p.number("a number of fragmented datagrams", MAX_LIMIT_FRAGS)?;
                    if p.rs.limit_frags == 0 {
                        return here(&t, "`set limit frags` needs at least 1 datagram (linerate drops no fragment for want of room: a full table evicts its oldest datagram)");
                    }
                    return Ok(());
                }
                if !p.is_word("states")? {
                    return p.fail("states, src-nodes, frags or table-entries");
                }
                p.next()?;
                p.rs.limit_states = p.number("a number of states", MAX_LIMIT_STATES)?;
                Ok(())
            })?;
        } else if self.eat_word("timeout")? {
            self.settings(Self::timeout_setting)?;
        } else if self.eat_word("state-defaults")? {
            self.state_defaults()?;
        } else if self.eat_word("optimization")? {
            self.optimization()?;
        } else if self.eat_word("ruleset-optimization")? {
            // pfctl's optimizer reorders and merges rules without changing any verdict;
            // linerate's classifier is exact to the rule order already.
            if !(self.eat_word("none")? || self.eat_word("basic")? || self.eat_word("profile")?) {
                return self.fail("none, basic or profile");
            }
        } else if self.eat_word("loginterface")? {
            // pf's statistics interface (`pfctl -si`): linerate counts every interface.
            self.word("an interface name or none")?;
        } else if self.eat_word("keepcounters")? {
            self.rs.keep_counters = true;
        } else if self.is_word("debug")?
            || self.is_word("hostid")?
            || self.is_word("fingerprints")?
            || self.is_word("require-order")?
            || self.is_word("reassemble")?
        {
            self.set_without_effect()?;
        } else if self.eat_word("skip")? {
            self.expect_word("on")?;
            let ifaces = self.skip_list()?;
            self.rs.skip.extend(ifaces);
        } else if self.eat_word("state-policy")? {
            let at = self.peek()?.clone();
            self.rs.state_policy = if self.eat_word("floating")? {
                StatePolicy::Floating
            } else if self.eat_word("if-bound")? {
                StatePolicy::IfBound
            } else {
                return self.fail("floating or if-bound");
            };
            let routed_out =
                |r: &Rule| r.dir == Some(Dir::Out) && r.route.is_some() && r.state_policy.is_none();
            if self.rs.state_policy == StatePolicy::IfBound && self.rs.rules.iter().any(routed_out)
            {
                return here(
                    &at,
                    "if-bound states with a `route-to` on an `out` rule above are not supported by linerate (its state is made on the interface the routing table chose, and its packets leave by another)",
                );
            }
        } else if self.eat_word("block-policy")? {
            // As in pfctl, it applies to the `block` rules that follow.
            self.rs.block_policy = if self.eat_word("drop")? {
                None
            } else if self.eat_word("return")? {
                Some(BlockReturn::RETURN)
            } else {
                return self.fail("drop or return");
            };
        } else {
            self.refuse_unsupported_set()?;
            return self.fail("limit, timeout, skip, state-policy or block-policy");
        }
        Ok(())
    }
}
