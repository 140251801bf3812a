//! Plain route files, for `linerate bench --routes-file` and the config's
//! `router.route_file` (a large table without one TOML table per route). One route per line:
//!
//! ```text
//! PREFIX/LEN NEXTHOP                 # via a gateway, its interface found from the prefixes
//! PREFIX/LEN NEXTHOP dev INTERFACE   # via a gateway on that interface (link-local ones)
//! PREFIX/LEN dev INTERFACE           # directly connected
//! ```
//!
//! IPv4 or IPv6; `#` starts a comment (full-line or trailing), blank lines are ignored, fields
//! are separated by any run of spaces/tabs. Hand-rolled (no regex): a 1M-line file parses in
//! well under a second.

use std::net::IpAddr;
use std::path::Path;

use crate::prefix::split_cidr;
use crate::{ConfigError, Prefix, PrefixError};

/// One route from a route file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRoute {
    pub prefix: Prefix,
    /// `None`: directly connected on `interface`.
    pub next_hop: Option<IpAddr>,
    /// The interface named with `dev`, if any.
    pub interface: Option<String>,
    /// 1-based line number in the file.
    pub line: usize,
    /// 1-based columns of the next hop and of the interface name (0 where absent), for the
    /// errors the config's validation finds later.
    pub next_hop_column: u32,
    pub interface_column: u32,
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
    let end = s[start..].iter().position(|&b| is_blank(b)).map_or(s.len(), |n| start + n);
    Some((start, end))
}

/// Parses route-file text; `path` is used only in error messages.
pub fn parse(text: &str, path: &Path) -> Result<Vec<FileRoute>, ConfigError> {
    let mut out = Vec::with_capacity(text.len() / 24);
    for_each(text, path, |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

const EXPECTED: &str = "expected PREFIX/LEN NEXTHOP [dev INTERFACE] or PREFIX/LEN dev INTERFACE";

/// Parses route-file text, handing each route to `each` as it is read (a large table is never
/// held twice); the first error, the parser's or `each`'s, stops it.
pub fn for_each(
    text: &str,
    path: &Path,
    mut each: impl FnMut(FileRoute) -> Result<(), ConfigError>,
) -> Result<(), ConfigError> {
    for (idx, full) in text.split('\n').enumerate() {
        let line = idx + 1;
        let column = |at: usize| 1 + full[..at].chars().count();
        // Error at byte `at` of this line (column counted in characters).
        let err = |at: usize, msg: String| ConfigError {
            path: path.to_owned(),
            line,
            column: column(at),
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
                PrefixError::MissingLength => {
                    err(ps, format!("{ptext:?} is not a prefix: missing /LEN ({EXPECTED})"))
                }
                e => err(ps + off, format!("bad prefix {ptext:?}: {e}")),
            })?;
        let Some((fs, mut fe)) = field(b, pe) else {
            return Err(err(pe, format!("route {prefix} has no next hop ({EXPECTED})")));
        };
        let mut route = FileRoute {
            prefix,
            next_hop: None,
            interface: None,
            line,
            next_hop_column: 0,
            interface_column: 0,
        };
        if &content[fs..fe] != "dev" {
            let htext = &content[fs..fe];
            let next_hop: IpAddr = htext.parse().map_err(|_| {
                err(fs, format!("next hop {htext:?} is not an IPv4 or IPv6 address"))
            })?;
            if next_hop.is_ipv4() != prefix.is_ipv4() {
                let family = if next_hop.is_ipv4() { "IPv4" } else { "IPv6" };
                return Err(err(
                    fs,
                    format!(
                        "next hop {next_hop} is {family} but prefix {prefix} is {}",
                        prefix.family()
                    ),
                ));
            }
            route.next_hop = Some(next_hop);
            route.next_hop_column = column(fs) as u32;
            match field(b, fe) {
                None => {
                    each(route)?;
                    continue;
                }
                Some((s, e)) if &content[s..e] == "dev" => fe = e,
                Some((s, e)) => {
                    return Err(err(
                        s,
                        format!("unexpected {:?} after the next hop ({EXPECTED})", &content[s..e]),
                    ));
                }
            }
        }
        // `dev INTERFACE` at fs..fe.
        let Some((is, ie)) = field(b, fe) else {
            return Err(err(
                fe,
                format!("route {prefix}: `dev` needs an interface name ({EXPECTED})"),
            ));
        };
        route.interface = Some(content[is..ie].to_owned());
        route.interface_column = column(is) as u32;
        if let Some((xs, xe)) = field(b, ie) {
            return Err(err(
                xs,
                format!("unexpected {:?} after the interface ({EXPECTED})", &content[xs..xe]),
            ));
        }
        each(route)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "routefile_tests.rs"]
mod tests;
