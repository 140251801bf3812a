//! Messages with levels on stderr (`--log-level`). Under systemd, when stderr is the
//! journal's stream (`JOURNAL_STREAM` names its device and inode, see systemd.exec(5)), each
//! line starts with its syslog priority as `<3>`..`<7>` (sd-daemon(3)) so that the journal
//! records it at that level; elsewhere lines read `linerate: warning: ...`.
//!
//! Messages printed with `eprintln!` elsewhere keep their `linerate: ...` form and reach the
//! journal at its default level (info).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Syslog priorities, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Level {
    Error = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
    Debug = 7,
}

static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static JOURNAL: AtomicBool = AtomicBool::new(false);

/// Sets the most verbose level printed, and whether stderr is the journal.
pub fn init(level: Level) {
    MAX_LEVEL.store(level as u8, Ordering::Relaxed);
    JOURNAL.store(
        stderr_is_journal(std::env::var("JOURNAL_STREAM").ok().as_deref()),
        Ordering::Relaxed,
    );
}

/// Whether `journal_stream` (`DEV:INODE`) names this process's stderr.
fn stderr_is_journal(journal_stream: Option<&str>) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) else { return false };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else { return false };
    let Ok(meta) = std::fs::File::from(fd).metadata() else { return false };
    dev.parse() == Ok(meta.dev()) && ino.parse() == Ok(meta.ino())
}

/// The line for a message at `level`.
fn line(level: Level, journal: bool, message: std::fmt::Arguments) -> String {
    if journal {
        return format!("<{}>{message}", level as u8);
    }
    let tag = match level {
        Level::Error => "error: ",
        Level::Warning => "warning: ",
        Level::Debug => "debug: ",
        Level::Notice | Level::Info => "",
    };
    format!("linerate: {tag}{message}")
}

pub fn log(level: Level, message: std::fmt::Arguments) {
    if level as u8 <= MAX_LEVEL.load(Ordering::Relaxed) {
        eprintln!("{}", line(level, JOURNAL.load(Ordering::Relaxed), message));
    }
}

pub fn error(message: std::fmt::Arguments) {
    log(Level::Error, message);
}

pub fn warn(message: std::fmt::Arguments) {
    log(Level::Warning, message);
}

pub fn notice(message: std::fmt::Arguments) {
    log(Level::Notice, message);
}

pub fn info(message: std::fmt::Arguments) {
    log(Level::Info, message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(line(Level::Warning, true, format_args!("x {}", 1)), "<4>x 1");
        assert_eq!(line(Level::Error, false, format_args!("bad")), "linerate: error: bad");
        assert_eq!(line(Level::Info, false, format_args!("ok")), "linerate: ok");
        assert!(!stderr_is_journal(None));
        assert!(!stderr_is_journal(Some("garbage")));
        assert!(!stderr_is_journal(Some("1:1")));
    }
}
