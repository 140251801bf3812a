//! The external programs `linerate run` uses (`ip` to configure its TAPs, `nft` on kernels
//! without tcx), found in a fixed list of system directories, never through `PATH`: with
//! capabilities, a `PATH` the caller controls would pick the program that gets them. The
//! programs also run with an empty environment but for a fixed `PATH`.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

/// Where the programs are looked for, in order.
pub const DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The first executable regular file named `name` in [`DIRS`].
pub fn find(name: &str) -> Option<PathBuf> {
    DIRS.iter().map(|d| PathBuf::from(d).join(name)).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// A command for program `name` by its absolute path, with a clean environment; an error
/// naming the directories searched if it is not there.
pub fn command(name: &str) -> Result<Command, String> {
    let path = find(name).ok_or_else(|| format!("`{name}` not found in {}", DIRS.join(", ")))?;
    let mut cmd = Command::new(path);
    cmd.env_clear().env("PATH", DIRS.join(":")).env("LC_ALL", "C");
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_absolute_path_only() {
        let ip = find("ip").expect("iproute2 is installed");
        assert!(ip.is_absolute() && DIRS.iter().any(|d| ip.starts_with(d)), "{}", ip.display());
        assert!(find("lr-no-such-program").is_none());
        assert!(find("../bin/sh").is_none_or(|p| p.is_absolute()));
        let err = command("lr-no-such-program").err().unwrap();
        assert!(err.contains("/usr/sbin, /sbin, /usr/bin, /bin"), "{err}");
    }
}
