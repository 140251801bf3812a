//! The rule file's tokens: words, quoted strings, `$macro` references, punctuation and
//! line ends, each with its position (a macro's tokens carry the position of its `$name`).

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Word(String),
    Str(String),
    Var(String),
    Punct(&'static str),
    Newline,
    Eof,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) line: usize,
    pub(super) col: usize,
    /// Macro expansion depth that produced the token.
    pub(super) depth: u8,
    /// The file it comes from: 0 the rule file, else an `include`d one (`Parser::files`).
    pub(super) file: u16,
}

pub(super) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-' | '+' | '*' | '%')
}

pub(super) type LexErr = (usize, usize, String);

/// Tokenizes `text` of file `file`. With `at`, every token gets that position (macro
/// expansion).
pub(super) fn lex(
    text: &str,
    at: Option<(usize, usize, u8)>,
    file: u16,
) -> Result<Vec<Token>, LexErr> {
    let mut lx =
        Lexer { chars: text.chars().collect(), i: 0, line: 1, col: 1, at, file, out: Vec::new() };
    while lx.i < lx.chars.len() {
        lx.token()?;
    }
    let (tl, tc, depth) = lx.pos();
    if at.is_none() {
        lx.out.push(Token { tok: Tok::Eof, line: tl, col: tc, depth, file });
    }
    Ok(lx.out)
}

/// The lexer's place in the text and the tokens so far.
struct Lexer {
    chars: Vec<char>,
    /// Index of the next character.
    i: usize,
    line: usize,
    col: usize,
    /// The position every token gets, when lexing a macro's text.
    at: Option<(usize, usize, u8)>,
    file: u16,
    out: Vec<Token>,
}

impl Lexer {
    /// Where the token starting at the current character is reported: line, column, depth.
    fn pos(&self) -> (usize, usize, u8) {
        self.at.map_or((self.line, self.col, 0), |a| a)
    }

    fn push(&mut self, tok: Tok, (line, col, depth): (usize, usize, u8)) {
        self.out.push(Token { tok, line, col, depth, file: self.file });
    }

    fn err<T>(
        &self,
        (line, col, _): (usize, usize, u8),
        msg: impl Into<String>,
    ) -> Result<T, LexErr> {
        Err((line, col, msg.into()))
    }

    /// Reads one token (or skips blanks, a comment, a line continuation) at the current
    /// character.
    fn token(&mut self) -> Result<(), LexErr> {
        let c = self.chars[self.i];
        let at = self.pos();
        match c {
            ' ' | '\t' | '\r' => {
                self.i += 1;
                self.col += 1;
            }
            '#' => {
                while self.i < self.chars.len() && self.chars[self.i] != '\n' {
                    self.i += 1;
                }
            }
            '\n' => {
                self.push(Tok::Newline, at);
                self.i += 1;
                self.line += 1;
                self.col = 1;
            }
            '\\' => self.continuation(at)?,
            '"' => self.string(at)?,
            '$' => self.macro_ref(at)?,
            '{' | '}' | ',' | '(' | ')' | '=' | '!' | '<' | '>' => self.punct(c, at),
            // pf's translation arrow (`nat ... -> addr`), never the start of a word.
            '-' if self.chars.get(self.i + 1) == Some(&'>') => {
                self.push(Tok::Punct("->"), at);
                self.i += 2;
                self.col += 2;
            }
            c if is_word_char(c) => {
                let w = self.take_while(self.i, is_word_char);
                self.push(Tok::Word(w), at);
            }
            c => return self.err(at, format!("unexpected character {c:?}")),
        }
        Ok(())
    }

    /// The characters from `start` while `keep` holds, as a string; the position moves past
    /// them.
    fn take_while(&mut self, start: usize, keep: fn(char) -> bool) -> String {
        let mut j = start;
        while j < self.chars.len() && keep(self.chars[j]) {
            j += 1;
        }
        let s: String = self.chars[start..j].iter().collect();
        self.col += j - self.i;
        self.i = j;
        s
    }

    /// `\` at the end of a line (blanks may follow it): the statement goes on.
    fn continuation(&mut self, at: (usize, usize, u8)) -> Result<(), LexErr> {
        let mut j = self.i + 1;
        while j < self.chars.len() && matches!(self.chars[j], ' ' | '\t' | '\r') {
            j += 1;
        }
        if j < self.chars.len() && self.chars[j] == '\n' {
            self.i = j + 1;
            self.line += 1;
            self.col = 1;
            Ok(())
        } else {
            self.err(at, "expected end of line after '\\'")
        }
    }

    /// A quoted string, which must end on its line.
    fn string(&mut self, at: (usize, usize, u8)) -> Result<(), LexErr> {
        let (chars, i) = (&self.chars, self.i);
        let mut j = i + 1;
        let mut s = String::new();
        while j < chars.len() && chars[j] != '"' && chars[j] != '\n' {
            s.push(chars[j]);
            j += 1;
        }
        if j >= chars.len() || chars[j] != '"' {
            return self.err(at, "unterminated string (expected '\"' before end of line)");
        }
        self.col += j + 1 - i;
        self.i = j + 1;
        self.push(Tok::Str(s), at);
        Ok(())
    }

    /// `$name`, or `$name:modifier` (`$ext_if:network`): the modifier is glued to the
    /// macro's value when it is expanded, as pfctl's textual expansion does.
    fn macro_ref(&mut self, at: (usize, usize, u8)) -> Result<(), LexErr> {
        let start = self.i;
        let mut name = self.take_while(start + 1, |c| c.is_ascii_alphanumeric() || c == '_');
        if name.is_empty() {
            return self.err(at, "expected a macro name after '$'");
        }
        if self.chars.get(self.i) == Some(&':') {
            name.push_str(&self.take_while(self.i, is_word_char));
        }
        self.push(Tok::Var(name), at);
        Ok(())
    }

    /// Punctuation: the two-character operators first (`!=`, `<=`, `>=`, `<>`, `><`).
    fn punct(&mut self, c: char, at: (usize, usize, u8)) {
        let next = self.chars.get(self.i + 1).copied();
        let two: Option<&'static str> = match (c, next) {
            ('!', Some('=')) => Some("!="),
            ('<', Some('=')) => Some("<="),
            ('>', Some('=')) => Some(">="),
            ('<', Some('>')) => Some("<>"),
            ('>', Some('<')) => Some("><"),
            _ => None,
        };
        if let Some(p) = two {
            self.push(Tok::Punct(p), at);
            self.i += 2;
            self.col += 2;
            return;
        }
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
        self.push(Tok::Punct(p), at);
        self.i += 1;
        self.col += 1;
    }
}

pub(super) fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("\"{w}\""),
        Tok::Str(s) => format!("string \"{s}\""),
        Tok::Var(v) => format!("${v}"),
        Tok::Punct(p) => format!("\"{p}\""),
        Tok::Newline => "end of line".into(),
        Tok::Eof => "end of file".into(),
    }
}
