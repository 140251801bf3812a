//! One lab at a time. The lab's namespaces have fixed names (`lrlab-g`, `lrlab-d`,
//! `lrlab-r`), and building them first removes any of those names that a crashed lab left
//! behind: a second `linerate lab` started by mistake would delete the running lab's
//! namespaces under it, and both would measure nonsense. So a lab holds an exclusive
//! `flock(2)` on [`LOCK_FILE`] from before it builds its namespaces until after it has
//! removed them. The file holds the holder's pid, for the refusal; the kernel releases the
//! lock when the process dies, so a crash leaves no stale lock.

use std::fs::File;
use std::path::Path;

use io::pid_lock::{Taken, holder_pid, take};

use crate::error::LabError;

/// The lock's file (`/run` is the same in every network namespace `ip netns exec` makes,
/// as the namespaces' names are).
pub const LOCK_FILE: &str = "/run/linerate/lab.lock";

/// The lab lock, held while this lives (or until the process dies).
#[derive(Debug)]
pub struct LabLock {
    _file: File,
}

impl LabLock {
    /// Takes the lock at `path` ([`LOCK_FILE`] outside tests), or fails at once naming the
    /// process that holds it.
    pub fn take(path: &Path) -> Result<LabLock, LabError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match take(path, &std::process::id().to_string())? {
            Taken::Locked(file) => Ok(LabLock { _file: file }),
            Taken::HeldBy(line) => {
                Err(LabError::Busy { pid: holder_pid(&line), lock: path.display().to_string() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lab_is_refused_naming_the_first() {
        let dir = std::env::temp_dir().join(format!("lr-lablock-{}", std::process::id()));
        let path = dir.join("lab.lock");
        let held = LabLock::take(&path).unwrap();
        // flock(2) locks belong to the open file: a second open in this process conflicts
        // as a second process would.
        let err = LabLock::take(&path).expect_err("the second lab must be refused").to_string();
        assert!(
            err.contains("another `linerate lab` is running")
                && err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        // Released: the next lab takes it, also over a file a crashed lab left behind.
        std::fs::write(&path, "999999999\n").unwrap();
        drop(LabLock::take(&path).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
