//! What every section's validation shares: the file being read, for errors that name its
//! path, line and column, and where a route was first defined.

use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use crate::ConfigError;
use crate::span::LineIndex;

type S<T> = Spanned<T>;

pub(crate) struct Ctx<'a> {
    text: &'a str,
    path: &'a Path,
    lines: LineIndex,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(text: &'a str, path: &'a Path) -> Ctx<'a> {
        Ctx { text, path, lines: LineIndex::new(text) }
    }

    pub(crate) fn err(&self, span: Range<usize>, msg: impl Into<String>) -> ConfigError {
        let (line, column) = self.lines.line_col(self.text, span.start);
        ConfigError { path: self.path.to_owned(), line, column, message: msg.into() }
    }

    pub(crate) fn line(&self, span: &Range<usize>) -> usize {
        self.lines.line(span.start)
    }

    pub(crate) fn int(
        &self,
        v: &Option<S<i64>>,
        ctx: &str,
        key: &str,
        lo: i64,
        hi: i64,
        default: i64,
    ) -> Result<i64, ConfigError> {
        match v {
            None => Ok(default),
            Some(v) if (lo..=hi).contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => Err(self.err(
                v.span(),
                format!("{ctx}{key} {} is out of range ({lo}..={hi})", v.get_ref()),
            )),
        }
    }
}

/// Where a route was first defined, for "duplicate route" errors.
#[derive(Clone, Copy)]
pub(crate) enum Origin {
    /// A `[[route]]` table: the byte offset of its prefix in the config (its line is found
    /// only for an error).
    Config(usize),
    /// A line of the route file.
    File(usize),
}

impl Ctx<'_> {
    pub(crate) fn describe(&self, origin: Origin, route_file: &Path) -> String {
        match origin {
            Origin::Config(offset) => {
                format!("{} line {}", self.path.display(), self.lines.line(offset))
            }
            Origin::File(line) => format!("{} line {line}", route_file.display()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.path
    }
}
