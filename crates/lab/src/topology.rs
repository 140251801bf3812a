//! Network namespaces and veth pairs for tests and the lab, built with iproute2's `ip`.
//!
//! Every name must start with `lr` (the project's prefix, so a stale object is recognisable
//! and can be removed). A [`Namespace`] deletes itself on drop, taking its veths with it, so
//! a test that fails (panics) still leaves nothing behind; [`remove_stale`] clears what a
//! killed process could not.

use std::io;
use std::process::{Command, Output, Stdio};

/// Prefix of every namespace and interface linerate creates.
pub const PREFIX: &str = "lr";

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("name {0:?} must start with {PREFIX:?} and be 1-15 characters of [A-Za-z0-9_-]")]
    BadName(String),
    #[error("cannot run `{cmd}`: {source}")]
    Spawn { cmd: String, source: io::Error },
    #[error("`{cmd}` failed: {stderr}")]
    Failed { cmd: String, stderr: String },
}

fn check_name(name: &str) -> Result<(), TopologyError> {
    let ok = name.starts_with(PREFIX)
        && name.len() <= 15
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok { Ok(()) } else { Err(TopologyError::BadName(name.to_owned())) }
}

/// Runs a command, turning a non-zero exit into an error carrying its stderr.
pub fn run(cmd: &mut Command) -> Result<Output, TopologyError> {
    let text = format!("{cmd:?}").replace('"', "");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| TopologyError::Spawn { cmd: text.clone(), source })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(TopologyError::Failed { cmd: text, stderr });
    }
    Ok(out)
}

fn ip(args: &[&str]) -> Result<Output, TopologyError> {
    run(Command::new("ip").args(args))
}

/// A network namespace, deleted (with every interface in it) when dropped.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Creates `name`, first removing a stale namespace of that name. Loopback is brought up.
    pub fn create(name: &str) -> Result<Namespace, TopologyError> {
        check_name(name)?;
        let _ = ip(&["netns", "del", name]);
        ip(&["netns", "add", name])?;
        let ns = Namespace { name: name.to_owned() };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME ARGS...`
    pub fn ip(&self, args: &[&str]) -> Result<Output, TopologyError> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// A command that runs `program` inside the namespace (`ip netns exec`), stopped
    /// (SIGTERM) when the thread that spawns it ends, even if the lab is killed with SIGKILL
    /// ([`::io::child::stop_with_parent`]): nothing the lab started runs on without it.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        ::io::child::stop_with_parent(&mut cmd);
        cmd
    }

    /// Runs `program ARGS` inside the namespace and waits for it.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<Output, TopologyError> {
        run(self.command(program).args(args))
    }

    /// Sets a sysctl inside the namespace, e.g. `net.ipv4.ip_forward=1`.
    pub fn sysctl(&self, setting: &str) -> Result<(), TopologyError> {
        self.exec("sysctl", &["-qw", setting]).map(|_| ())
    }

    /// Turns off checksum and segmentation offloads (and GRO) on a veth end. linerate takes
    /// frames with offloads pending (partial checksums, GSO frames) as they come, but a
    /// measurement turns them off so that every set (the kernel, linerate) is offered and
    /// forwards the same per-packet frames, as the study turned TSO/LRO off on its routers.
    pub fn offloads_off(&self, ifname: &str) -> Result<(), TopologyError> {
        self.exec(
            "ethtool",
            &["-K", ifname, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off"],
        )
        .map(|_| ())
    }

    /// Adds an address (CIDR) to an interface and brings it up.
    pub fn addr(&self, ifname: &str, cidr: &str) -> Result<(), TopologyError> {
        if cidr.contains(':') {
            // nodad: the address is usable at once, not after duplicate address detection.
            self.ip(&["-6", "addr", "add", cidr, "dev", ifname, "nodad"])?;
        } else {
            self.ip(&["-4", "addr", "add", cidr, "dev", ifname])?;
        }
        self.ip(&["link", "set", ifname, "up"]).map(|_| ())
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// One end of a veth pair: its namespace, name and MAC address.
#[derive(Clone, Copy)]
pub struct End<'a> {
    pub ns: &'a Namespace,
    pub name: &'a str,
    pub mac: &'a str,
}

/// Creates a veth pair between two namespaces, sets the MACs, brings both ends up, with the
/// kernel's default offloads (tx checksumming, TSO, GSO on), as a new user has them.
pub fn veth(a: End<'_>, b: End<'_>) -> Result<(), TopologyError> {
    veth_queues(a, b, 1)
}

/// [`veth`] with `queues` receive and transmit queues on each end (each receive queue has
/// its own NAPI instance: one per worker in a lab with several).
pub fn veth_queues(a: End<'_>, b: End<'_>, queues: usize) -> Result<(), TopologyError> {
    check_name(a.name)?;
    check_name(b.name)?;
    let q = queues.to_string();
    // One queue: the kernel's default, which leaves `ethtool -L` room to add queues later
    // (veth's maximum is the CPU count unless given).
    let counts: &[&str] = if queues > 1 { &["numtxqueues", &q, "numrxqueues", &q] } else { &[] };
    let mut args = vec!["link", "add", a.name, "address", a.mac];
    args.extend_from_slice(counts);
    args.extend_from_slice(&["type", "veth", "peer", "name", b.name, "address", b.mac]);
    args.extend_from_slice(counts);
    args.extend_from_slice(&["netns", b.ns.name()]);
    a.ns.ip(&args)?;
    a.ns.ip(&["link", "set", a.name, "up"])?;
    b.ns.ip(&["link", "set", b.name, "up"]).map(|_| ())
}

/// [`veth`] with offloads off on both ends ([`Namespace::offloads_off`]): for measurements.
pub fn veth_offloads_off(a: End<'_>, b: End<'_>, queues: usize) -> Result<(), TopologyError> {
    veth_queues(a, b, queues)?;
    a.ns.offloads_off(a.name)?;
    b.ns.offloads_off(b.name)
}

/// Deletes namespaces whose name starts with `prefix` (which must itself start with `lr`):
/// what a killed test or lab left behind.
pub fn remove_stale(prefix: &str) -> Result<usize, TopologyError> {
    if !prefix.starts_with(PREFIX) {
        return Err(TopologyError::BadName(prefix.to_owned()));
    }
    let out = ip(&["netns", "list"])?;
    let mut removed = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if name.starts_with(prefix) && ip(&["netns", "del", name]).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// True when running as root (the namespace tests need it).
pub use ::io::netdev::{is_root, skip_test};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_carry_the_prefix() {
        assert!(check_name("lr-a").is_ok());
        assert!(check_name("eth0").is_err());
        assert!(check_name("lr-name-too-long-x").is_err());
        assert!(check_name("lr a").is_err());
        assert!(Namespace::create("foo").is_err());
        assert!(remove_stale("x").is_err());
    }

    #[test]
    fn namespace_and_veth_are_removed_on_drop() {
        if !is_root() {
            crate::topology::skip_test("needs root");
            return;
        }
        let pid = std::process::id();
        let (na, nb) = (format!("lrt{pid}a"), format!("lrt{pid}b"));
        {
            let a = Namespace::create(&na).unwrap();
            let b = Namespace::create(&nb).unwrap();
            veth(
                End { ns: &a, name: "lrt0", mac: "02:00:00:00:01:01" },
                End { ns: &b, name: "lrt1", mac: "02:00:00:00:01:02" },
            )
            .unwrap();
            a.addr("lrt0", "198.18.0.1/30").unwrap();
            b.addr("lrt1", "198.18.0.2/30").unwrap();
            let ping = a.exec("ping", &["-c", "1", "-W", "2", "198.18.0.2"]);
            assert!(ping.is_ok(), "{ping:?}");
        }
        let list = String::from_utf8(ip(&["netns", "list"]).unwrap().stdout).unwrap();
        assert!(!list.contains(&na) && !list.contains(&nb), "{list}");
    }
}
