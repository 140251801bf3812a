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
}

pub(super) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-' | '+' | '*')
}

pub(super) type LexErr = (usize, usize, String);

/// Tokenizes `text`. With `at`, every token gets that position (macro expansion).
pub(super) fn lex(text: &str, at: Option<(usize, usize, u8)>) -> Result<Vec<Token>, LexErr> {
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
