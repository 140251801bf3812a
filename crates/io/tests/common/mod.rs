//! What the io namespace tests share: a network namespace deleted on drop (also when a test
//! panics), entered by a dedicated thread (setns(2) switches only the calling thread).

#![allow(dead_code)] // each test binary uses its own subset

use std::process::Command;

/// Whether the tests can make namespaces (root); the caller says "skipped" when not.
pub fn is_root() -> bool {
    io::netdev::is_root()
}

/// `ip ARGS...`: its stdout, or its stderr as the error.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// A network namespace (name starting with `lr`), replacing a stale one of the same name.
pub struct Netns(pub String);

impl Netns {
    pub fn create(name: String) -> Netns {
        assert!(name.starts_with("lr"), "test namespaces carry the lr prefix");
        let _ = ip(&["netns", "del", &name]);
        ip(&["netns", "add", &name]).unwrap();
        Netns(name)
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// No IPv6 in the namespace: no router solicitations or MLD reports among test frames.
    pub fn disable_ipv6(&self) {
        for key in ["all", "default"] {
            ip(&["netns", "exec", &self.0, "sysctl", "-qw", &format!("net.ipv6.conf.{key}.disable_ipv6=1")]).unwrap();
        }
    }

    /// Runs `f` on a thread that has entered the namespace; a panic there is raised again
    /// here (after which the namespace is still deleted).
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/var/run/netns/{}", self.0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(&path).expect("open netns");
                // SAFETY: setns on a namespace fd held open for the call; it switches only
                // the calling thread, which runs nothing but `f`.
                let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}
