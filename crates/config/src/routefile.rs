//! Plain route files for `linerate bench --routes-file`: one
//! `PREFIX/LEN NEXTHOP` per line (IPv4 or IPv6), `#` starts a comment
//! (full-line or trailing), blank lines are ignored, fields are separated
//! by any run of spaces/tabs. Hand-rolled (no regex): a 1M-line file
//! parses in well under a second.

use std::net::IpAddr;
use std::path::Path;

use crate::prefix::split_cidr;
use crate::{ConfigError, Prefix, PrefixError};

/// One route from a route file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRoute {
    pub prefix: Prefix,
    pub next_hop: IpAddr,
    /// 1-based line number in the file.
    pub line: usize,
}

/// Reads and parses `path`.
pub fn load(path: &Path) -> Result<Vec<FileRoute>, ConfigError> {
    let text = crate::read(path)?;
    parse(&text, path)
}

#[inline]
fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// Next field of `s` at or after byte `from`: `(start, end)`.
#[inline]
fn field(s: &[u8], from: usize) -> Option<(usize, usize)> {
    let start = from + s[from..].iter().position(|&b| !is_blank(b))?;
    let end = s[start..]
        .iter()
        .position(|&b| is_blank(b))
        .map_or(s.len(), |n| start + n);
    Some((start, end))
}

/// Parses route-file text; `path` is used only in error messages.
pub fn parse(text: &str, path: &Path) -> Result<Vec<FileRoute>, ConfigError> {
    let mut out = Vec::with_capacity(text.len() / 24);
    for (idx, full) in text.split('\n').enumerate() {
        let line = idx + 1;
        // Error at byte `at` of this line (column counted in characters).
        let err = |at: usize, msg: String| ConfigError {
            path: path.to_owned(),
            line,
            column: 1 + full[..at].chars().count(),
            message: msg,
        };
        let content = match full.as_bytes().iter().position(|&b| b == b'#') {
            Some(i) => &full[..i],
            None => full,
        };
        let b = content.as_bytes();
        let Some((ps, pe)) = field(b, 0) else {
            continue;
        };
        let ptext = &content[ps..pe];
        let prefix = split_cidr(ptext)
            .and_then(|(a, l)| Prefix::new(a, l).map_err(|e| (e, 0)))
            .map_err(|(e, off)| match e {
                PrefixError::MissingLength => err(
                    ps,
                    format!(
                        "{ptext:?} is not a prefix: missing /LEN (expected PREFIX/LEN NEXTHOP)"
                    ),
                ),
                e => err(ps + off, format!("bad prefix {ptext:?}: {e}")),
            })?;
        let Some((hs, he)) = field(b, pe) else {
            return Err(err(
                pe,
                format!("route {prefix} has no next hop (expected PREFIX/LEN NEXTHOP)"),
            ));
        };
        let htext = &content[hs..he];
        let next_hop: IpAddr = htext.parse().map_err(|_| {
            err(
                hs,
                format!("next hop {htext:?} is not an IPv4 or IPv6 address"),
            )
        })?;
        if next_hop.is_ipv4() != prefix.is_ipv4() {
            return Err(err(
                hs,
                format!(
                    "next hop {next_hop} is {} but prefix {prefix} is {}",
                    if next_hop.is_ipv4() { "IPv4" } else { "IPv6" },
                    prefix.family()
                ),
            ));
        }
        if let Some((xs, xe)) = field(b, he) {
            return Err(err(
                xs,
                format!(
                    "unexpected {:?} after the next hop (expected PREFIX/LEN NEXTHOP)",
                    &content[xs..xe]
                ),
            ));
        }
        out.push(FileRoute {
            prefix,
            next_hop,
            line,
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "routefile_tests.rs"]
mod tests;
