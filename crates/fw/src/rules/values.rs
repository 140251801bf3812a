//! Values inside rules and table files: service names, TCP flags, addresses and prefixes.

use std::path::Path;

use super::{Af, Prefix, RuleError, TableEntry, tcp_flags};

pub(super) fn af_name(af: Af) -> &'static str {
    match af {
        Af::Inet => "inet",
        Af::Inet6 => "inet6",
    }
}

/// A port: a number (decimal, or hexadecimal as pfctl's `strtoul` reads a word that is not
/// all digits: `0x10`), or a service name as pfctl resolves it ([`super::services`]).
pub(super) fn port_number(w: &str) -> Option<u16> {
    let hex = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X"));
    w.parse()
        .ok()
        .or_else(|| u16::from_str_radix(hex?, 16).ok())
        .or_else(|| super::services::service_port(w))
}

/// `S/SA`, `/SA`: (set, mask). Letters F S R P A U E W.
pub(super) fn parse_flags(w: &str) -> Option<(u8, u8)> {
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
pub fn parse_table_file(
    text: &str,
    path: &Path,
    out: &mut Vec<TableEntry>,
) -> Result<(), RuleError> {
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
