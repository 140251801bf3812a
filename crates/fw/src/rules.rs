//! The rule language: a subset of OpenBSD's pf.conf(5) filter rules, its AST and its parser.
//!
//! The grammar (EBNF), the defaults and examples are in `docs/firewall.md`. In short:
//!
//! ```text
//! ext_if = "em0"
//! table <bad> file "bad-hosts.txt"
//! set limit states 200000
//! block all
//! pass in on $ext_if proto tcp from any to 192.0.2.10 port { www https }
//! block in quick from <bad>
//! ```
//!
//! Semantics follow pf: rules are evaluated first to last, the **last** matching rule decides
//! unless a matching rule carries `quick`, which ends the evaluation; a packet matching no rule
//! is **passed** (pf's implicit `pass all` without state), so a rule file normally starts with
//! `block all`. `pass` rules keep state by default and, when stateful, only match TCP packets
//! whose flags are `S/SA` (pf's defaults since OpenBSD 4.1); both are filled into [`Rule`] by the
//! parser, so a `Rule` always holds its *effective* options.
//!
//! pf expands a rule holding lists (`from { a, !b }`) into one rule per combination; here the
//! rule stays one [`Rule`] whose lists match if **any** element matches, which selects exactly
//! the same packets with the same outcome (the expanded rules are adjacent and identical apart
//! from the address), the deciding rule index being the one of the unexpanded rule. As in pf,
//! an address element of one family only matches packets of that family, negated or not
//! (`from !10.0.0.0/8` matches IPv4 packets outside 10/8, no IPv6 packet); tables and `any`
//! match both families.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod extras;
mod nat;

pub use extras::LogMode;

pub use crate::packet::{Af, Dir};

/// TCP flag bits as in [`PacketKey::tcp_flags`](crate::packet::PacketKey::tcp_flags).
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// pf's default flags of a stateful rule: `flags S/SA`.
pub const DEFAULT_FLAGS: (u8, u8) = (tcp_flags::SYN, tcp_flags::SYN | tcp_flags::ACK);

/// pf's default `set limit states` (OpenBSD pf FAQ "Options" / pf.conf(5): "Default is 100000").
pub const DEFAULT_LIMIT_STATES: u64 = 100_000;

/// The largest `set limit states` (the state table's [`MAX_LIMIT`](crate::state::MAX_LIMIT)):
/// each worker reserves 104 bytes per state, 10.4 GB at this limit.
pub const MAX_LIMIT_STATES: u64 = crate::state::MAX_LIMIT as u64;

/// pf features linerate parses only to refuse them, with the reason given after "`X` is not
/// supported by linerate": accepting them would promise what is not done.
const UNSUPPORTED: [(&str, &str); 4] = [
    ("return", "blocked packets are dropped silently; use `block` or `block drop`"),
    ("return-rst", "blocked packets are dropped silently; use `block` or `block drop`"),
    ("return-icmp", "blocked packets are dropped silently; use `block` or `block drop`"),
    ("return-icmp6", "blocked packets are dropped silently; use `block` or `block drop`"),
];

/// What a rule does with the packets it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Pass,
    Block,
}

/// Whether a deciding `pass` rule creates a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateMode {
    /// `no state` (and every `block` rule).
    None,
    /// `keep state` (the default of `pass` rules).
    Keep,
    /// `keep state (sloppy)`: the state does not check TCP sequence windows.
    KeepSloppy,
}

/// An address prefix of one family. `addr` has its host bits cleared; IPv4 in the low 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub af: Af,
    pub addr: u128,
    pub len: u8,
}

impl Prefix {
    /// Address width of the family in bits.
    pub fn bits(af: Af) -> u8 {
        match af {
            Af::Inet => 32,
            Af::Inet6 => 128,
        }
    }

    /// Builds the prefix, clearing host bits. `len` must be at most the family's width.
    pub fn new(af: Af, addr: u128, len: u8) -> Prefix {
        let bits = Self::bits(af);
        let len = len.min(bits);
        let addr = if af == Af::Inet {
            addr & 0xffff_ffff
        } else {
            addr
        };
        let host = bits - len;
        let addr = if host >= 128 {
            0
        } else {
            (addr >> host) << host
        };
        Prefix { af, addr, len }
    }

    /// First address covered.
    pub fn first(&self) -> u128 {
        self.addr
    }

    /// Last address covered.
    pub fn last(&self) -> u128 {
        let host = Self::bits(self.af) - self.len;
        if host >= 128 {
            u128::MAX
        } else {
            self.addr | ((1u128 << host) - 1)
        }
    }

    /// Whether the prefix covers `addr` of family `af`.
    pub fn contains(&self, af: Af, addr: u128) -> bool {
        af == self.af && addr >= self.first() && addr <= self.last()
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.af {
            Af::Inet => write!(
                f,
                "{}/{}",
                std::net::Ipv4Addr::from(self.addr as u32),
                self.len
            ),
            Af::Inet6 => write!(f, "{}/{}", std::net::Ipv6Addr::from(self.addr), self.len),
        }
    }
}

/// What one address element designates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrTarget {
    Prefix(Prefix),
    /// Index into [`RuleSet::tables`].
    Table(usize),
}

/// One element of an address match: `[!] prefix` or `[!] <table>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrItem {
    pub negated: bool,
    pub target: AddrTarget,
}

/// The `from`/`to` part of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AddrMatch {
    /// `any`.
    Any,
    /// Matches if any element matches (a single address is a one-element list).
    List(Vec<AddrItem>),
}

/// The `port` part of a rule: inclusive ranges, matching if the port is in any of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PortMatch {
    Any,
    /// May be empty (e.g. `port 10 >< 11`): matches nothing.
    Ranges(Vec<(u16, u16)>),
}

impl PortMatch {
    /// Whether `port` is matched.
    pub fn matches(&self, port: u16) -> bool {
        match self {
            PortMatch::Any => true,
            PortMatch::Ranges(r) => r.iter().any(|&(lo, hi)| lo <= port && port <= hi),
        }
    }
}

/// One entry of a table: `[!] prefix`. The most specific entry covering an address decides
/// whether it is in the table (a negated entry excludes), as in pf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableEntry {
    pub negated: bool,
    pub prefix: Prefix,
}

/// `table <name> { ... } file "..."`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub entries: Vec<TableEntry>,
}

impl Table {
    /// Membership (linear scan: for the reference evaluator and tests).
    pub fn contains(&self, af: Af, addr: u128) -> bool {
        let mut best: Option<&TableEntry> = None;
        for e in &self.entries {
            if e.prefix.contains(af, addr) && best.is_none_or(|b| e.prefix.len >= b.prefix.len) {
                best = Some(e);
            }
        }
        best.is_some_and(|e| !e.negated)
    }
}

/// One filter rule with its effective options (pf's defaults filled in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    pub dir: Option<Dir>,
    pub quick: bool,
    /// `on IFACE` / `on { IFACE ... }` resolved to port indices (empty: any interface).
    pub ifaces: Vec<u16>,
    /// `on ! IFACE` (a single interface).
    pub iface_neg: bool,
    pub af: Option<Af>,
    /// Empty = any protocol.
    pub protos: Vec<u8>,
    pub src: AddrMatch,
    pub src_ports: PortMatch,
    pub dst: AddrMatch,
    pub dst_ports: PortMatch,
    /// `icmp-type T` / `icmp6-type { T ... }` (matched against `PacketKey::src_port`; empty:
    /// any type).
    pub icmp_types: Vec<u8>,
    /// `code C`, after a single type (matched against `PacketKey::dst_port`).
    pub icmp_code: Option<u8>,
    /// `flags set/mask`, only checked on TCP packets; `None` = `flags any`.
    pub flags: Option<(u8, u8)>,
    pub keep_state: StateMode,
    /// `keep state (if-bound)` / `(floating)`: this rule's states bind as it says rather than
    /// as `set state-policy` does.
    pub state_policy: Option<StatePolicy>,
    /// `allow-opts`: packets this rule passes (or its states pass) may carry IP options (see
    /// [`PacketKey::ip_opts`](crate::packet::PacketKey::ip_opts)); without it pf drops them.
    pub allow_opts: bool,
    pub label: Option<String>,
    /// `log` / `log (all)`.
    pub log: LogMode,
    /// 1-based line of the rule in its file.
    pub line: usize,
}

/// pf's state timeouts (`set timeout`): the state table's own type, so that a parsed rule
/// set configures the table directly.
pub use crate::state::Timeouts;

/// `set state-policy`: whether a state matches packets on any interface (`floating`, pf's
/// default) or only on the interface where it was created (`if-bound`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StatePolicy {
    #[default]
    Floating,
    IfBound,
}

/// A parsed rule file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub tables: Vec<Table>,
    /// `set limit states N` (default [`DEFAULT_LIMIT_STATES`]).
    pub limit_states: u64,
    pub timeouts: Timeouts,
    pub state_policy: StatePolicy,
    /// `set skip on IFACE`: interfaces pf does not filter at all (port indices).
    pub skip: Vec<u16>,
    /// `nat`, `rdr` and `binat` rules, in file order (`crate::nat`).
    pub nat: Vec<crate::nat::NatRule>,
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet {
            rules: Vec::new(),
            tables: Vec::new(),
            limit_states: DEFAULT_LIMIT_STATES,
            timeouts: Timeouts::default(),
            state_policy: StatePolicy::Floating,
            skip: Vec::new(),
            nat: Vec::new(),
        }
    }
}

impl RuleSet {
    /// Whether some rule that can match packets of direction `dir` blocks or keeps state.
    /// If none does, that pass over any packet (without IP options) ends in "pass, no
    /// state": the data plane skips it, and a state need not cover it to settle a packet.
    pub fn acts_on(&self, dir: Dir) -> bool {
        self.rules
            .iter()
            .any(|r| r.dir.is_none_or(|d| d == dir) && (r.action == Action::Block || r.keep_state != StateMode::None))
    }
}

/// A rejected rule file: `path:line:column: message` (line and column 1-based; line 0 when
/// the file itself could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.path.display(),
                self.line,
                self.column,
                self.message
            )
        }
    }
}

impl std::error::Error for RuleError {}

/// Reads and parses the rule file at `path` (and the table files it names).
pub fn load(path: &Path, ifaces: &dyn Fn(&str) -> Option<u16>) -> Result<RuleSet, RuleError> {
    let text = std::fs::read_to_string(path).map_err(|e| RuleError {
        path: path.to_path_buf(),
        line: 0,
        column: 0,
        message: format!("cannot read rule file: {e}"),
    })?;
    parse(&text, path, ifaces)
}

/// Parses rule text. `path` names the file in errors and anchors relative `table ... file`
/// paths (table files are read by this function); `ifaces` maps interface names to port
/// indices (an unknown name is an error at its position).
pub fn parse(
    text: &str,
    path: &Path,
    ifaces: &dyn Fn(&str) -> Option<u16>,
) -> Result<RuleSet, RuleError> {
    let err = |(line, column, message): (usize, usize, String)| RuleError {
        path: path.to_path_buf(),
        line,
        column,
        message,
    };
    let toks = lex(text, None).map_err(err)?;
    let mut p = Parser {
        toks: toks.into_iter().rev().collect(),
        macros: HashMap::new(),
        table_idx: HashMap::new(),
        rs: RuleSet::default(),
        path,
        ifaces,
    };
    p.file().map_err(|e| match e {
        PErr::Here(l, c, m) => err((l, c, m)),
        PErr::Full(e) => e,
    })?;
    Ok(p.rs)
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    Var(String),
    Punct(&'static str),
    Newline,
    Eof,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
    col: usize,
    /// Macro expansion depth that produced the token.
    depth: u8,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-' | '+' | '*')
}

type LexErr = (usize, usize, String);

/// Tokenizes `text`. With `at`, every token gets that position (macro expansion).
fn lex(text: &str, at: Option<(usize, usize, u8)>) -> Result<Vec<Token>, LexErr> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut line, mut col) = (1usize, 1usize);
    let mut i = 0;
    let pos = |l: usize, c: usize| at.map_or((l, c, 0), |a| a);
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc, depth) = pos(line, col);
        let push = |out: &mut Vec<Token>, tok: Tok| {
            out.push(Token {
                tok,
                line: tl,
                col: tc,
                depth,
            })
        };
        match c {
            ' ' | '\t' | '\r' => {
                i += 1;
                col += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\n' => {
                push(&mut out, Tok::Newline);
                i += 1;
                line += 1;
                col = 1;
            }
            '\\' => {
                let mut j = i + 1;
                while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\r') {
                    j += 1;
                }
                if j < chars.len() && chars[j] == '\n' {
                    i = j + 1;
                    line += 1;
                    col = 1;
                } else {
                    return Err((tl, tc, "expected end of line after '\\'".into()));
                }
            }
            '"' => {
                let mut j = i + 1;
                let mut s = String::new();
                while j < chars.len() && chars[j] != '"' && chars[j] != '\n' {
                    s.push(chars[j]);
                    j += 1;
                }
                if j >= chars.len() || chars[j] != '"' {
                    return Err((
                        tl,
                        tc,
                        "unterminated string (expected '\"' before end of line)".into(),
                    ));
                }
                col += j + 1 - i;
                i = j + 1;
                push(&mut out, Tok::Str(s));
            }
            '$' => {
                let mut j = i + 1;
                while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                    j += 1;
                }
                if j == i + 1 {
                    return Err((tl, tc, "expected a macro name after '$'".into()));
                }
                let name: String = chars[i + 1..j].iter().collect();
                col += j - i;
                i = j;
                push(&mut out, Tok::Var(name));
            }
            '{' | '}' | ',' | '(' | ')' | '=' | '!' | '<' | '>' => {
                let next = chars.get(i + 1).copied();
                let two: Option<&'static str> = match (c, next) {
                    ('!', Some('=')) => Some("!="),
                    ('<', Some('=')) => Some("<="),
                    ('>', Some('=')) => Some(">="),
                    ('<', Some('>')) => Some("<>"),
                    ('>', Some('<')) => Some("><"),
                    _ => None,
                };
                if let Some(p) = two {
                    push(&mut out, Tok::Punct(p));
                    i += 2;
                    col += 2;
                } else {
                    let p = match c {
                        '{' => "{",
                        '}' => "}",
                        ',' => ",",
                        '(' => "(",
                        ')' => ")",
                        '=' => "=",
                        '!' => "!",
                        '<' => "<",
                        _ => ">",
                    };
                    push(&mut out, Tok::Punct(p));
                    i += 1;
                    col += 1;
                }
            }
            // pf's translation arrow (`nat ... -> addr`), never the start of a word.
            '-' if chars.get(i + 1) == Some(&'>') => {
                push(&mut out, Tok::Punct("->"));
                i += 2;
                col += 2;
            }
            c if is_word_char(c) => {
                let mut j = i;
                while j < chars.len() && is_word_char(chars[j]) {
                    j += 1;
                }
                let w: String = chars[i..j].iter().collect();
                col += j - i;
                i = j;
                push(&mut out, Tok::Word(w));
            }
            c => {
                return Err((tl, tc, format!("unexpected character {c:?}")));
            }
        }
    }
    let (tl, tc, depth) = pos(line, col);
    if at.is_none() {
        out.push(Token {
            tok: Tok::Eof,
            line: tl,
            col: tc,
            depth,
        });
    }
    Ok(out)
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("\"{w}\""),
        Tok::Str(s) => format!("string \"{s}\""),
        Tok::Var(v) => format!("${v}"),
        Tok::Punct(p) => format!("\"{p}\""),
        Tok::Newline => "end of line".into(),
        Tok::Eof => "end of file".into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Parser

enum PErr {
    Here(usize, usize, String),
    /// An error located in another file (a table file).
    Full(RuleError),
}

type PResult<T> = Result<T, PErr>;

const MAX_MACRO_DEPTH: u8 = 16;

const RESERVED: &[&str] = &[
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

struct Parser<'a> {
    /// Remaining tokens, reversed (next token last).
    toks: Vec<Token>,
    macros: HashMap<String, String>,
    table_idx: HashMap<String, usize>,
    rs: RuleSet,
    path: &'a Path,
    ifaces: &'a dyn Fn(&str) -> Option<u16>,
}

fn here<T>(t: &Token, msg: impl Into<String>) -> PResult<T> {
    Err(PErr::Here(t.line, t.col, msg.into()))
}

impl Parser<'_> {
    /// Raw next token, no macro expansion.
    fn peek_raw(&self) -> &Token {
        // The Eof token is never popped.
        self.toks.last().expect("eof token")
    }

    /// Next token after macro expansion.
    fn peek(&mut self) -> PResult<&Token> {
        loop {
            let t = self.peek_raw();
            let Tok::Var(name) = &t.tok else { break };
            let t = t.clone();
            let Some(value) = self.macros.get(name) else {
                return here(&t, format!("undefined macro ${name}"));
            };
            if t.depth >= MAX_MACRO_DEPTH {
                return here(
                    &t,
                    format!("macro ${name} expands too deeply (recursive definition?)"),
                );
            }
            let toks = lex(value, Some((t.line, t.col, t.depth + 1)))
                .map_err(|(l, c, m)| PErr::Here(l, c, format!("in the value of ${name}: {m}")))?;
            if toks.iter().any(|t| t.tok == Tok::Newline) {
                return here(&t, format!("macro ${name} holds a line break"));
            }
            self.toks.pop();
            self.toks.extend(toks.into_iter().rev());
        }
        Ok(self.peek_raw())
    }

    fn next(&mut self) -> PResult<Token> {
        self.peek()?;
        let t = self.toks.last().cloned().expect("eof token");
        if t.tok != Tok::Eof {
            self.toks.pop();
        }
        Ok(t)
    }

    fn fail<T>(&mut self, expected: &str) -> PResult<T> {
        let t = self.peek()?.clone();
        here(
            &t,
            format!("expected {expected}, found {}", describe(&t.tok)),
        )
    }

    fn is_word(&mut self, w: &str) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tok, Tok::Word(x) if x == w))
    }

    fn eat_word(&mut self, w: &str) -> PResult<bool> {
        if self.is_word(w)? {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn is_punct(&mut self, p: &str) -> PResult<bool> {
        Ok(matches!(&self.peek()?.tok, Tok::Punct(x) if *x == p))
    }

    fn eat_punct(&mut self, p: &str) -> PResult<bool> {
        if self.is_punct(p)? {
            self.next()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect_word(&mut self, w: &str) -> PResult<Token> {
        if self.is_word(w)? {
            return self.next();
        }
        self.fail(&format!("\"{w}\""))
    }

    fn expect_punct(&mut self, p: &str, what: &str) -> PResult<Token> {
        if self.is_punct(p)? {
            return self.next();
        }
        self.fail(what)
    }

    /// Any word (after expansion), else error.
    fn word(&mut self, what: &str) -> PResult<(String, Token)> {
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

    fn skip_newlines(&mut self) -> PResult<()> {
        while self.peek()?.tok == Tok::Newline {
            self.next()?;
        }
        Ok(())
    }

    fn end_of_statement(&mut self) -> PResult<()> {
        match self.peek()?.tok {
            Tok::Newline | Tok::Eof => {
                self.next()?;
                Ok(())
            }
            _ => self.fail("end of line"),
        }
    }

    fn file(&mut self) -> PResult<()> {
        loop {
            self.skip_newlines()?;
            let t = self.peek_raw().clone();
            match &t.tok {
                Tok::Eof => return Ok(()),
                Tok::Word(w) => {
                    let is_def = matches!(
                        self.toks.iter().rev().nth(1),
                        Some(Token {
                            tok: Tok::Punct("="),
                            ..
                        })
                    );
                    if is_def {
                        self.macro_def()?;
                    } else {
                        match w.as_str() {
                            "table" => self.table_def()?,
                            "set" => self.set_option()?,
                            "pass" | "block" => self.rule()?,
                            "nat" | "rdr" | "binat" | "no" => self.nat_rule()?,
                            _ => {
                                self.refuse_unsupported_statement()?;
                                return self
                                    .fail("a rule (pass, block), table, set or a macro definition");
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

    fn macro_def(&mut self) -> PResult<()> {
        let t = self.toks.pop().expect("word");
        let Tok::Word(name) = &t.tok else {
            unreachable!()
        };
        if !name.starts_with(|c: char| c.is_ascii_alphabetic())
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return here(
                &t,
                format!("invalid macro name \"{name}\" (a letter, then letters, digits or '_')"),
            );
        }
        if RESERVED.contains(&name.as_str()) {
            return here(
                &t,
                format!("\"{name}\" is a reserved word, not a macro name"),
            );
        }
        self.toks.pop(); // '='
        let mut parts: Vec<String> = Vec::new();
        loop {
            let t = self.peek_raw().clone();
            match &t.tok {
                Tok::Newline | Tok::Eof => break,
                Tok::Str(s) | Tok::Word(s) => parts.push(s.clone()),
                Tok::Punct(p) => parts.push((*p).to_string()),
                Tok::Var(v) => match self.macros.get(v) {
                    Some(val) => parts.push(val.clone()),
                    None => return here(&t, format!("undefined macro ${v}")),
                },
            }
            self.toks.pop();
        }
        if parts.is_empty() {
            return self.fail("a macro value (a quoted string)");
        }
        self.macros.insert(name.clone(), parts.join(" "));
        Ok(())
    }

    fn table_def(&mut self) -> PResult<()> {
        self.expect_word("table")?;
        self.expect_punct("<", "\"<\" (table <name>)")?;
        let (name, nt) = self.word("a table name")?;
        self.expect_punct(">", "\">\" closing the table name")?;
        if self.table_idx.contains_key(&name) {
            return here(&nt, format!("table <{name}> is already defined"));
        }
        let mut entries = Vec::new();
        loop {
            if self.eat_word("persist")? || self.eat_word("const")? || self.eat_word("counters")? {
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
                let base = self.path.parent().unwrap_or(Path::new(""));
                let fp = base.join(&f);
                let text = std::fs::read_to_string(&fp).or_else(|e| {
                    here(
                        &t,
                        format!("cannot read table file \"{}\": {e}", fp.display()),
                    )
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
        self.table_idx.insert(name.clone(), self.rs.tables.len());
        self.rs.tables.push(Table { name, entries });
        Ok(())
    }

    /// Fails with "`X` is not supported by linerate" at the next word if it is one of
    /// [`UNSUPPORTED`]; `context` is the text shown before it (e.g. "block ").
    fn refuse_unsupported(&mut self, context: &str) -> PResult<()> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && let Some((_, why)) = UNSUPPORTED.iter().find(|(u, _)| u == w)
        {
            let context = if w == "log" { "" } else { context };
            return here(&t, format!("`{context}{w}` is not supported by linerate ({why})"));
        }
        Ok(())
    }

    fn number(&mut self, what: &str, max: u64) -> PResult<u64> {
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

    fn set_option(&mut self) -> PResult<()> {
        self.expect_word("set")?;
        if self.eat_word("limit")? {
            let braced = self.eat_punct("{")?;
            loop {
                if braced {
                    self.skip_newlines()?;
                }
                self.expect_word("states")?;
                self.rs.limit_states = self.number("a number of states", MAX_LIMIT_STATES)?;
                if !braced {
                    break;
                }
                self.eat_punct(",")?;
                self.skip_newlines()?;
                if self.eat_punct("}")? {
                    break;
                }
            }
        } else if self.eat_word("timeout")? {
            let braced = self.eat_punct("{")?;
            loop {
                if braced {
                    self.skip_newlines()?;
                }
                let t = self.peek()?.clone();
                let ok = matches!(&t.tok, Tok::Word(w) if self.rs.timeouts.get_mut(w).is_some());
                if !ok {
                    return self.fail(
                        "a timeout name (tcp.first, tcp.opening, tcp.established, tcp.closing, \
                         tcp.finwait, tcp.closed, udp.first, udp.single, udp.multiple, icmp.first, \
                         icmp.error, other.first, other.single, other.multiple, interval)",
                    );
                }
                let (name, _) = self.word("")?;
                let v = self.number("a number of seconds", u32::MAX as u64)? as u32;
                *self.rs.timeouts.get_mut(&name).expect("checked") = v;
                if !braced {
                    break;
                }
                self.eat_punct(",")?;
                self.skip_newlines()?;
                if self.eat_punct("}")? {
                    break;
                }
            }
        } else if self.eat_word("skip")? {
            self.expect_word("on")?;
            let ifaces = self.iface_list()?;
            self.rs.skip.extend(ifaces);
        } else if self.eat_word("state-policy")? {
            self.rs.state_policy = if self.eat_word("floating")? {
                StatePolicy::Floating
            } else if self.eat_word("if-bound")? {
                StatePolicy::IfBound
            } else {
                return self.fail("floating or if-bound");
            };
        } else if self.eat_word("block-policy")? {
            // `drop` is what linerate does; `return` is refused, not ignored.
            self.refuse_unsupported("set block-policy ")?;
            if !self.eat_word("drop")? {
                return self.fail("drop");
            }
        } else {
            self.refuse_unsupported_set()?;
            return self.fail("limit, timeout, skip, state-policy or block-policy");
        }
        Ok(())
    }

    fn rule(&mut self) -> PResult<()> {
        let (a, at) = self.word("pass or block")?;
        let action = if a == "pass" {
            Action::Pass
        } else {
            Action::Block
        };
        if action == Action::Block {
            self.refuse_unsupported("block ")?;
            self.eat_word("drop")?;
        }
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
            if self.eat_punct("{")? {
                loop {
                    self.skip_newlines()?;
                    if !protos.is_empty() && self.eat_punct("}")? {
                        break;
                    }
                    protos.push(self.proto()?);
                    self.eat_punct(",")?;
                }
            } else {
                protos.push(self.proto()?);
            }
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

    fn proto(&mut self) -> PResult<u8> {
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

    fn icmp_type(&mut self, v6: bool) -> PResult<u8> {
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

    fn addr_match(
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
    fn addr_list(
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
    fn addr_item(&mut self, toks: &mut Vec<(Token, Af, bool)>, is_src: bool, out: &mut Vec<AddrItem>) -> PResult<()> {
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
                None => self.fail(WHAT),
            },
            Tok::Punct("(") => here(&t, "`(interface)` addresses are not supported by linerate"),
            _ => self.fail(WHAT),
        }
    }

    fn port_spec(&mut self) -> PResult<PortMatch> {
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

    fn port_value(&mut self) -> PResult<u16> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && let Some(p) = port_number(w)
        {
            self.next()?;
            return Ok(p);
        }
        self.fail("a port number (0-65535) or service name")
    }

    fn port_item(&mut self, out: &mut Vec<(u16, u16)>) -> PResult<()> {
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

fn af_name(af: Af) -> &'static str {
    match af {
        Af::Inet => "inet",
        Af::Inet6 => "inet6",
    }
}

/// A small service-name table (a subset of /etc/services) plus numbers.
fn port_number(w: &str) -> Option<u16> {
    Some(match w {
        "ftp-data" => 20,
        "ftp" => 21,
        "ssh" => 22,
        "telnet" => 23,
        "smtp" => 25,
        "domain" => 53,
        "bootps" => 67,
        "bootpc" => 68,
        "www" | "http" => 80,
        "pop3" => 110,
        "ntp" => 123,
        "imap" => 143,
        "snmp" => 161,
        "https" => 443,
        "submission" => 587,
        "imaps" => 993,
        "pop3s" => 995,
        _ => return w.parse().ok(),
    })
}

/// `S/SA`, `/SA`: (set, mask). Letters F S R P A U E W.
fn parse_flags(w: &str) -> Option<(u8, u8)> {
    let (set, mask) = w.split_once('/')?;
    let bits = |s: &str| -> Option<u8> {
        let mut b = 0u8;
        for c in s.chars() {
            b |= match c {
                'F' => tcp_flags::FIN,
                'S' => tcp_flags::SYN,
                'R' => tcp_flags::RST,
                'P' => tcp_flags::PSH,
                'A' => tcp_flags::ACK,
                'U' => tcp_flags::URG,
                'E' => tcp_flags::ECE,
                'W' => tcp_flags::CWR,
                _ => return None,
            };
        }
        Some(b)
    };
    let mask = bits(mask)?;
    if mask == 0 {
        return None;
    }
    Some((bits(set)?, mask))
}

/// `a.b.c.d[/len]` (with `/len`, 1 to 4 octets: `10/8`), `v6addr[/len]`. Host bits cleared.
pub fn parse_prefix(w: &str) -> Option<Prefix> {
    let (a, len) = match w.split_once('/') {
        Some((a, l)) => {
            if l.is_empty() || l.len() > 3 || !l.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (a, Some(l.parse::<u8>().ok()?))
        }
        None => (w, None),
    };
    if a.contains(':') {
        let ip: std::net::Ipv6Addr = a.parse().ok()?;
        let len = len.unwrap_or(128);
        if len > 128 {
            return None;
        }
        return Some(Prefix::new(Af::Inet6, u128::from(ip), len));
    }
    let octets: Vec<&str> = a.split('.').collect();
    if octets.is_empty() || octets.len() > 4 || (len.is_none() && octets.len() != 4) {
        return None;
    }
    let mut v: u32 = 0;
    for (i, o) in octets.iter().enumerate() {
        if o.is_empty() || o.len() > 3 || !o.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = o.parse().ok()?;
        if n > 255 {
            return None;
        }
        v |= n << (24 - 8 * i);
    }
    let len = len.unwrap_or(32);
    if len > 32 {
        return None;
    }
    Some(Prefix::new(Af::Inet, v as u128, len))
}

/// Table file: one `[!]prefix` per whitespace-separated word, `#` comments.
fn parse_table_file(text: &str, path: &Path, out: &mut Vec<TableEntry>) -> Result<(), RuleError> {
    for (ln, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("");
        let mut col = 1;
        let mut rest = body;
        loop {
            let trimmed = rest.trim_start();
            col += rest[..rest.len() - trimmed.len()].chars().count();
            if trimmed.is_empty() {
                break;
            }
            let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
            let word = &trimmed[..end];
            let (negated, w) = match word.strip_prefix('!') {
                Some(w) => (true, w),
                None => (false, word),
            };
            match parse_prefix(w) {
                Some(prefix) => out.push(TableEntry { negated, prefix }),
                None => {
                    return Err(RuleError {
                        path: path.to_path_buf(),
                        line: ln + 1,
                        column: col,
                        message: format!("expected an address or a prefix, found \"{word}\""),
                    });
                }
            }
            col += word.chars().count();
            rest = &trimmed[end..];
        }
    }
    Ok(())
}
