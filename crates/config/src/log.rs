//! `[log]`: where the packets that firewall rules with `log` decide are written (pflog
//! capture files, rotated by size), and how much of them.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::ConfigError;
use crate::context::Ctx;

/// The `[log]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSettings {
    /// The pflog capture file (`tcpdump -r` reads it), resolved against the config file's
    /// directory; `None`: logged packets only reach `linerate log`.
    pub file: Option<PathBuf>,
    /// Size in bytes past which the file is rotated (FILE -> FILE.1 -> ... FILE.keep).
    pub max_size: u64,
    /// Rotated files kept besides the current one.
    pub keep: u32,
    /// Bytes of each logged IP packet kept, 1..=256 (default 128).
    pub snaplen: u32,
    /// Records per second, all workers together (each worker gets its share); more are
    /// counted and not logged.
    pub rate: u32,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings { file: None, max_size: 10 << 20, keep: 5, snaplen: 128, rate: 10_000 }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLog {
    file: Option<Spanned<String>>,
    max_size: Option<Spanned<i64>>,
    keep: Option<Spanned<i64>>,
    snaplen: Option<Spanned<i64>>,
    rate: Option<Spanned<i64>>,
}

pub(crate) fn settings(
    cx: &Ctx,
    path: &Path,
    raw: Option<RawLog>,
) -> Result<LogSettings, ConfigError> {
    let d = LogSettings::default();
    let Some(r) = raw else { return Ok(d) };
    let file = match r.file {
        None => None,
        Some(f) if f.get_ref().is_empty() || f.get_ref().contains('\0') => {
            return Err(cx.err(f.span(), "log: file must be a non-empty path without NUL bytes"));
        }
        Some(f) => Some(path.parent().unwrap_or(Path::new("")).join(f.get_ref())),
    };
    Ok(LogSettings {
        file,
        max_size: cx.int(&r.max_size, "log: ", "max_size", 4096, i64::MAX, d.max_size as i64)?
            as u64,
        keep: cx.int(&r.keep, "log: ", "keep", 0, 1000, d.keep.into())? as u32,
        snaplen: cx.int(&r.snaplen, "log: ", "snaplen", 1, 256, d.snaplen.into())? as u32,
        rate: cx.int(&r.rate, "log: ", "rate", 1, 10_000_000, d.rate.into())? as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    const IFACE: &str = "[[interface]]\nname = \"lr-a\"\naddresses = [\"10.0.0.1/24\"]\n";

    #[test]
    fn defaults_and_values() {
        let c = Config::parse(IFACE, Path::new("/etc/linerate/r.toml")).unwrap();
        assert_eq!(c.log, LogSettings::default());
        let text = format!(
            "{IFACE}[log]\nfile = \"log/pflog.pcap\"\nmax_size = 100000\nkeep = 2\nsnaplen = 96\nrate = 50\n"
        );
        let c = Config::parse(&text, Path::new("/etc/linerate/r.toml")).unwrap();
        let want = LogSettings {
            file: Some("/etc/linerate/log/pflog.pcap".into()),
            max_size: 100_000,
            keep: 2,
            snaplen: 96,
            rate: 50,
        };
        assert_eq!(c.log, want);
    }

    #[test]
    fn errors_name_the_key() {
        let e = |extra: &str| {
            Config::parse(&format!("{IFACE}[log]\n{extra}\n"), Path::new("r.toml"))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(e("snaplen = 300"), "r.toml:5:11: log: snaplen 300 is out of range (1..=256)");
        assert_eq!(
            e("file = \"\""),
            "r.toml:5:8: log: file must be a non-empty path without NUL bytes"
        );
        assert!(e("size = 5").contains("unknown field `size`"), "{}", e("size = 5"));
    }
}
