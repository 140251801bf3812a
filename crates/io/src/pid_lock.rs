//! An exclusive `flock(2)` on a file that names its holder: what keeps a second process
//! off something only one may use (an interface for `linerate run`, the lab's namespaces
//! for `linerate lab`) and tells the refused one who has it. The kernel releases the lock
//! when its holder dies, so a crash leaves a file but no stale lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

/// What [`take`] found.
#[derive(Debug)]
pub enum Taken {
    /// The lock is this process's while the file stays open; the file holds `line`.
    Locked(File),
    /// Another process holds it; its line, as it wrote it.
    HeldBy(String),
}

/// Locks the file at `path` (created if missing) without waiting, and writes `line` into it
/// (its pid first, by convention), or reads the holder's line.
pub fn take(path: &Path, line: &str) -> std::io::Result<Taken> {
    let mut file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Ok(Taken::HeldBy(holder));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    file.set_len(0)?;
    file.write_all(format!("{line}\n").as_bytes())?;
    Ok(Taken::Locked(file))
}

/// The pid at the start of a holder's line, or "unknown".
pub fn holder_pid(line: &str) -> String {
    line.split_whitespace()
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .map_or("unknown".to_owned(), |p| p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_taker_reads_the_holders_line() {
        let path = std::env::temp_dir().join(format!("lr-pidlock-{}", std::process::id()));
        let Taken::Locked(held) = take(&path, "123 lo").unwrap() else { panic!("first take") };
        // flock(2) locks belong to the open file: a second open in this process conflicts
        // as a second process would.
        match take(&path, "456 lo").unwrap() {
            Taken::HeldBy(line) => {
                assert_eq!((line.as_str(), holder_pid(&line)), ("123 lo\n", "123".to_owned()))
            }
            Taken::Locked(_) => panic!("taken twice"),
        }
        drop(held);
        assert!(
            matches!(take(&path, "456 lo").unwrap(), Taken::Locked(_)),
            "released with its file"
        );
        assert_eq!(holder_pid("garbage"), "unknown");
        std::fs::remove_file(&path).unwrap();
    }
}
