//! One `linerate run` per interface. A second one on an interface already in use would find
//! AF_XDP taken, fall back to AF_PACKET and report "forwarding" while the first receives
//! everything; so `run` takes an exclusive `flock(2)` per interface before it touches any.
//!
//! The lock file is `/run/linerate/net<N>-if<I>.lock`: `N` the inode of the network
//! namespace (`/proc/self/ns/net`; `/run` is shared by `ip netns exec`, so the name must say
//! which namespace), `I` the interface's index. It holds the owner's pid and the interface
//! name, for the refusal message. The kernel releases a `flock` when its process dies, so a
//! crash leaves no stale lock, only a file that the next run locks again. A clean exit
//! removes the file while still holding the lock; a run that opened it just before then
//! finds, once it has the lock, that the name leads elsewhere, and starts over.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use io::pid_lock;

/// Where the lock files are.
pub const LOCK_DIR: &str = "/run/linerate";

/// An interface this process owns; the lock goes with the file, when this is dropped or
/// the process dies.
pub struct InterfaceLock {
    _file: File,
    path: PathBuf,
}

impl Drop for InterfaceLock {
    fn drop(&mut self) {
        // Still locked: see the module doc.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The lock file of `ifname` in this network namespace.
fn lock_path(dir: &Path, ifname: &str) -> Result<PathBuf> {
    let ns = std::fs::metadata("/proc/self/ns/net").context("reading /proc/self/ns/net")?.ino();
    let index =
        io::netdev::ifindex(ifname).with_context(|| format!("reading the index of {ifname}"))?;
    Ok(dir.join(format!("net{ns}-if{index}.lock")))
}

/// Locks every interface in `names` (in `dir`, [`LOCK_DIR`] outside tests), or fails naming
/// the first one another process holds, and that process.
pub fn lock_all(dir: &Path, names: &[&str]) -> Result<Vec<InterfaceLock>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    names.iter().map(|name| lock_one(dir, name)).collect()
}

fn lock_one(dir: &Path, ifname: &str) -> Result<InterfaceLock> {
    let path = lock_path(dir, ifname)?;
    loop {
        if let Some(lock) = try_lock(&path, ifname)? {
            return Ok(lock);
        }
    }
}

/// Locks the file at `path`; `None` if the file was removed by its last owner meanwhile.
fn try_lock(path: &Path, ifname: &str) -> Result<Option<InterfaceLock>> {
    let line = format!("{} {ifname}", std::process::id());
    let file = match pid_lock::take(path, &line)
        .with_context(|| format!("locking {}", path.display()))?
    {
        pid_lock::Taken::Locked(file) => file,
        pid_lock::Taken::HeldBy(holder) => {
            let pid = pid_lock::holder_pid(&holder);
            bail!(
                "interface {ifname} is in use by another linerate (pid {pid}, lock {}): one process per interface",
                path.display()
            );
        }
    };
    let same =
        |a: &std::fs::Metadata, b: &std::fs::Metadata| (a.dev(), a.ino()) == (b.dev(), b.ino());
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) if same(&a, &b) => {
            Ok(Some(InterfaceLock { _file: file, path: path.to_owned() }))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_names_the_holder() {
        let dir = std::env::temp_dir().join(format!("lr-owner-{}", std::process::id()));
        let held = lock_all(&dir, &["lo"]).unwrap();
        let text = std::fs::read_to_string(lock_path(&dir, "lo").unwrap()).unwrap();
        assert_eq!(text, format!("{} lo\n", std::process::id()));
        // flock(2) locks belong to the open file: a second open in this process conflicts
        // as a second process would.
        let err = lock_all(&dir, &["lo"]).err().expect("the second lock must fail").to_string();
        assert!(
            err.contains("interface lo is in use by another linerate")
                && err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        assert!(!lock_path(&dir, "lo").unwrap().exists(), "a clean exit removes the file");
        // A file left by a crash (no lock on it) is taken over.
        std::fs::write(lock_path(&dir, "lo").unwrap(), "999999999 lo\n").unwrap();
        let again = lock_all(&dir, &["lo"]).unwrap();
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
