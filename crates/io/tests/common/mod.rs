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
            ip(&[
                "netns",
                "exec",
                &self.0,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
            ])
            .unwrap();
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
                let rc = unsafe {
                    libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET)
                };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

/// Skips a test (returns) with a message when not root.
#[macro_export]
macro_rules! need_root {
    () => {
        if !$crate::common::is_root() {
            io::netdev::skip_test("needs root");
            return;
        }
    };
}

/// EtherType of the test frames (IEEE 802 local experimental).
pub const ETHERTYPE_TEST: u16 = 0x88b5;

/// A namespace `<prefix>-<pid>-<tag>` holding the veth pair `<prefix>0` <-> `<prefix>1`, both
/// up, IPv6 off (no stray frames).
pub fn veth_ns(prefix: &str, tag: &str) -> Netns {
    let ns = Netns::create(format!("{prefix}-{}-{tag}", std::process::id()));
    ns.disable_ipv6();
    let n = ns.name();
    let (a, b) = (format!("{prefix}0"), format!("{prefix}1"));
    ip(&["-n", n, "link", "add", &a, "type", "veth", "peer", "name", &b]).unwrap();
    ip(&["-n", n, "link", "set", &a, "up"]).unwrap();
    ip(&["-n", n, "link", "set", &b, "up"]).unwrap();
    ns
}

/// Test frame `seq` of `len` bytes: fixed MACs, the test EtherType, `magic`, seq, filler
/// from seq.
pub fn test_frame(magic: &[u8; 4], seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    f[14..18].copy_from_slice(magic);
    f[18..22].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[22..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
    f
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}
