//! Reading the files a rule set names: the rule file and its table files. They are read
//! whole, also by `linerate reload` in the running router, so a path that names a device
//! (`/dev/zero`), a pipe or a runaway file must fail at once instead of filling memory or
//! waiting forever.

use std::io::Read;
use std::path::Path;

/// The most bytes a rule or table file may hold: far above any real one (a million table
/// entries take about 16 MiB).
pub const MAX_RULE_FILE_BYTES: u64 = 256 << 20;

/// The text of the regular file at `path`, at most [`MAX_RULE_FILE_BYTES`] long.
pub fn read_rule_text(path: &Path) -> std::io::Result<String> {
    read_bounded(path, MAX_RULE_FILE_BYTES)
}

/// The text of the regular file at `path`, at most `max` bytes long.
pub(super) fn read_bounded(path: &Path, max: u64) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut text = String::new();
    file.take(max + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} MiB", max >> 20),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_folders_are_refused_at_once() {
        let t0 = std::time::Instant::now();
        for (path, why) in [
            ("/dev/zero", "not a regular file"),
            ("/dev/urandom", "not a regular file"),
            ("/tmp", "not a regular file"),
        ] {
            let e = read_rule_text(Path::new(path)).expect_err(path).to_string();
            assert!(e.contains(why), "{path}: {e}");
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        let f = std::env::temp_dir().join(format!("lr-textfile-{}", std::process::id()));
        std::fs::write(&f, "pass all\n").unwrap();
        assert_eq!(read_rule_text(&f).unwrap(), "pass all\n");
        std::fs::remove_file(&f).unwrap();
    }
}
