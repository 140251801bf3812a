//! The control socket's path from a config file without parsing the whole file: `show`,
//! `top` and `reload` need only `router.control_socket`, and a config with a large route table
//! takes seconds to validate (and its route file more).
//!
//! The scan reads the file line by line, keeps track of the current table header and of
//! multi-line strings, and parses only the line that sets the key (with the TOML parser, so
//! quoting and escapes are TOML's): `control_socket = ...` under `[router]`,
//! `router.control_socket = ...` at the top, or an inline `router = { ... }`.

use std::path::{Path, PathBuf};

use crate::{ConfigError, RouterSettings};

/// `router.control_socket` of the config at `path`, or the default if it sets none.
pub fn control_socket(path: &Path) -> Result<PathBuf, ConfigError> {
    let text = crate::read(path)?;
    control_socket_in(&text, path)
}

/// [`control_socket`] of config text; `path` is used only in error messages.
pub fn control_socket_in(text: &str, path: &Path) -> Result<PathBuf, ConfigError> {
    let mut table = String::new();
    let mut in_string: Option<&str> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if let Some(delim) = in_string {
            if line.matches(delim).count() % 2 == 1 {
                in_string = None;
            }
            continue;
        }
        for delim in ["\"\"\"", "'''"] {
            if line.matches(delim).count() % 2 == 1 {
                in_string = Some(delim);
            }
        }
        let t = line.trim();
        if t.starts_with('[') {
            table = t
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .split('.')
                .map(|p| p.trim().trim_matches('"'))
                .collect::<Vec<_>>()
                .join(".");
            continue;
        }
        let Some((key, _)) = t.split_once('=') else { continue };
        let key: Vec<&str> = key.split('.').map(|p| p.trim().trim_matches('"')).collect();
        let full: Vec<&str> =
            table.split('.').filter(|p| !p.is_empty()).chain(key.iter().copied()).collect();
        let wanted = match full.as_slice() {
            ["router", "control_socket"] => true,
            ["router"] => t.contains("control_socket"),
            _ => false,
        };
        if !wanted {
            continue;
        }
        let col = line.len() - line.trim_start().len();
        let (value, span) =
            parse_line(&table, t).map_err(|m| ConfigError::at(path, text, start + col, m))?;
        let Some(value) = value else { continue };
        return check(&value).map_err(|m| ConfigError::at(path, text, start + col + span, m));
    }
    Ok(RouterSettings::default().control_socket)
}

/// Parses the key's line as TOML (inside its table): the value of `router.control_socket` if
/// the line sets it, and where the value starts in the line.
fn parse_line(table: &str, line: &str) -> Result<(Option<String>, usize), String> {
    let doc = if table.is_empty() { line.to_owned() } else { format!("[{table}]\n{line}") };
    let parsed: toml::Table =
        toml::from_str(&doc).map_err(|e| e.message().trim().replace('\n', "; "))?;
    let value = parsed.get("router").and_then(|r| r.get("control_socket"));
    match value {
        None => Ok((None, 0)),
        Some(toml::Value::String(s)) => Ok((
            Some(s.clone()),
            line.find("control_socket").map_or(0, |i| i + line[i..].find('=').map_or(0, |e| e + 1)),
        )),
        Some(other) => {
            Err(format!("router: control_socket must be a string, not {}", other.type_str()))
        }
    }
}

fn check(p: &str) -> Result<PathBuf, String> {
    if p.is_empty() || p.contains('\0') {
        return Err("router: control_socket must be a non-empty path without NUL bytes".into());
    }
    if p.len() > crate::validate::MAX_SOCKET_PATH {
        return Err(format!(
            "router: control_socket path is {} bytes long; Unix socket paths are limited to {} bytes",
            p.len(),
            crate::validate::MAX_SOCKET_PATH
        ));
    }
    Ok(PathBuf::from(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Result<PathBuf, ConfigError> {
        control_socket_in(text, Path::new("router.toml"))
    }

    #[test]
    fn finds_the_key_where_toml_may_put_it() {
        assert_eq!(scan("").unwrap(), PathBuf::from("/run/linerate.sock"));
        let routes = "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"1.2.3.4\"\n".repeat(3);
        assert_eq!(
            scan(&format!("[router]\nworkers = 2\ncontrol_socket = \"/tmp/a.sock\"\n{routes}"))
                .unwrap(),
            PathBuf::from("/tmp/a.sock")
        );
        assert_eq!(
            scan(&format!("{routes}[ router ]\n  control_socket='/tmp/b.sock' # c\n")).unwrap(),
            PathBuf::from("/tmp/b.sock")
        );
        assert_eq!(
            scan("router.control_socket = \"/tmp/c.sock\"\n").unwrap(),
            PathBuf::from("/tmp/c.sock")
        );
        assert_eq!(
            scan("router = { workers = 1, control_socket = \"/tmp/d\\u0073.sock\" }\n").unwrap(),
            PathBuf::from("/tmp/ds.sock")
        );
        // Another table's key of the same name, and a multi-line string that looks like TOML.
        let tricky = "[router.punt]\ncontrol_socket = 1\n[firewall]\nnote = \"\"\"\n[router]\ncontrol_socket = \"/no\"\n\"\"\"\n";
        assert_eq!(scan(tricky).unwrap(), PathBuf::from("/run/linerate.sock"));
    }

    #[test]
    fn bad_values_are_located() {
        let e = scan("[router]\nworkers = 1\ncontrol_socket = \"\"\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, 17), "{e}");
        assert!(e.message.contains("non-empty path"), "{e}");
        let e = scan("[router]\ncontrol_socket = 5\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("must be a string"), "{e}");
        let e = scan("[router]\ncontrol_socket = \"x\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }
}
