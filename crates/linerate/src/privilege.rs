//! Least privilege for `linerate run`: it needs capabilities, not uid 0; it checks them
//! before touching anything, naming what is missing and why; once set up (while it still
//! has one thread, capabilities being per thread) it drops every one it no longer needs,
//! optionally becoming `router.user`. See docs/router.md, "Privileges".
//!
//! What each capability is for:
//! - CAP_NET_ADMIN: attach the XDP and tc programs (bpf_link), create and configure the TAPs,
//!   thread the interfaces' NAPI (netlink), the forwarding sysctls of `fail_closed`.
//! - CAP_NET_RAW: open AF_XDP and AF_PACKET sockets.
//! - CAP_BPF: create linerate's maps and load its programs.
//! - CAP_IPC_LOCK: the frame pools the kernel pins (AF_XDP UMEM), unless RLIMIT_MEMLOCK is
//!   unlimited.
//! - CAP_SYS_NICE (`napi_threads`): pin the kernel's NAPI threads and lower their priority.
//! - CAP_DAC_OVERRIDE (`napi_threads`, not uid 0): write the interfaces' sysfs files
//!   (`threaded`, `rps_cpus`), owned by root.
//! - CAP_SETUID, CAP_SETGID (`router.user`), CAP_CHOWN (`router.user` or `control_group`,
//!   unless the socket file can be given away without it).
//!
//! While forwarding, the effective set is empty: every socket, program and TAP is an open
//! file. Only what the exit's clean-up needs stays in the permitted set, raised again after
//! the workers have stopped: CAP_SYS_NICE and CAP_DAC_OVERRIDE to put the NAPI threads and
//! sysfs settings back, CAP_NET_ADMIN where an nftables table has to be removed. With
//! `router.rebuild_ports` (the default) so do CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF (and
//! CAP_IPC_LOCK), raised by a worker's thread alone while it opens a port again whose
//! interface was deleted and created anew (`crate::rebuild`).

use anyhow::{Context, Result, bail};
use config::Config;
use io::privilege::{self as sys, CapSet, Caps, cap};

/// What was found at start, and what to become once set up.
pub struct Plan {
    /// Switch to this uid and gid.
    user: Option<(String, u32, u32)>,
    /// The group that may use the read-only commands.
    pub control_gid: Option<u32>,
    /// Who may reload: root and this uid (the one linerate runs as once set up).
    pub admin_uid: u32,
    /// Owner and group to give the control socket file.
    pub socket_owner: (Option<u32>, Option<u32>),
    /// Not root: programs it runs need the capabilities in their ambient set.
    ambient: bool,
}

fn need(cfg: &Config, euid: u32, member: bool, switching: bool) -> Vec<(u32, &'static str)> {
    let mut v = vec![
        (cap::NET_ADMIN, "attach XDP/tc programs, create and configure the TAPs"),
        (cap::NET_RAW, "open AF_XDP and AF_PACKET sockets"),
        (cap::BPF, "create linerate's eBPF maps and load its programs"),
    ];
    if !memlock_unlimited() {
        v.push((cap::IPC_LOCK, "pin the AF_XDP frame pools (or an unlimited RLIMIT_MEMLOCK)"));
    }
    if cfg.router.napi_threads {
        v.push((
            cap::SYS_NICE,
            "pin the kernel's NAPI threads and lower their priority (router.napi_threads)",
        ));
        if euid != 0 {
            v.push((
                cap::DAC_OVERRIDE,
                "write the interfaces' sysfs threaded and rps_cpus files (router.napi_threads)",
            ));
        }
    }
    if switching {
        v.push((cap::SETUID, "become router.user"));
        v.push((cap::SETGID, "take router.user's group"));
    }
    if switching || (cfg.router.control_group.is_some() && !member) {
        v.push((cap::CHOWN, "give the control socket to router.user / router.control_group"));
    }
    v
}

fn memlock_unlimited() -> bool {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max locked memory"))
                .map(|l| l.split_whitespace().nth(3) == Some("unlimited"))
        })
        .unwrap_or(false)
}

/// Resolves `router.user` and `router.control_group` and checks that the effective set
/// holds every capability the configuration needs; the error names each missing one.
pub fn check(cfg: &Config, path: &str) -> Result<Plan> {
    let (euid, egid, groups) = sys::ids();
    let user = match &cfg.router.user {
        None => None,
        Some(name) => {
            let (uid, gid) = sys::user(name)
                .with_context(|| format!("{path}: router.user {name:?}"))?
                .with_context(|| format!("{path}: router.user {name:?}: no such user"))?;
            Some((name.clone(), uid, gid))
        }
    };
    let control_gid = match &cfg.router.control_group {
        None => None,
        Some(name) => Some(
            sys::group(name)
                .with_context(|| format!("{path}: router.control_group {name:?}"))?
                .with_context(|| format!("{path}: router.control_group {name:?}: no such group"))?,
        ),
    };
    let switching = user.as_ref().is_some_and(|u| u.1 != euid);
    let member = control_gid.is_some_and(|g| g == egid || groups.contains(&g));
    let have = sys::get().context("reading this process's capabilities (capget)")?;
    let missing: Vec<String> = need(cfg, euid, member, switching)
        .into_iter()
        .filter(|(c, _)| !have.effective.has(*c))
        .map(|(c, why)| format!("{} ({why})", cap::name(c)))
        .collect();
    if !missing.is_empty() {
        bail!(
            "linerate run needs {}; run it as root, or grant them (e.g. systemd AmbientCapabilities=, or `setpriv --inh-caps=+... --ambient-caps=+...`; see docs/router.md, \"Privileges\")",
            missing.join(", ")
        );
    }
    let ambient = euid != 0;
    if ambient {
        // `ip` and `nft` run as children: without file capabilities, they get ours only
        // through the ambient set.
        let mut c = have;
        c.inheritable = CapSet(c.inheritable.0 | CapSet::of(&[cap::NET_ADMIN]).0);
        sys::set(&c).context("making CAP_NET_ADMIN inheritable")?;
        sys::ambient_raise(cap::NET_ADMIN).context("raising CAP_NET_ADMIN in the ambient set")?;
    }
    let admin_uid = user.as_ref().map_or(euid, |u| u.1);
    let socket_owner = (
        user.as_ref().filter(|_| switching).map(|u| u.1),
        control_gid.or(user.as_ref().filter(|_| switching).map(|u| u.2)),
    );
    Ok(Plan { user, control_gid, admin_uid, socket_owner, ambient })
}

/// What the exit's clean-up needs, and rebuilding a port (`rebuild`: `router.rebuild_ports`
/// with an AF_XDP port): see the module documentation.
pub fn exit_needs(cfg: &Config, nft_table: bool, rebuild: bool) -> CapSet {
    let mut keep = Vec::new();
    if cfg.router.napi_threads {
        keep.extend([cap::SYS_NICE, cap::DAC_OVERRIDE]);
    }
    if nft_table {
        keep.push(cap::NET_ADMIN);
    }
    if rebuild {
        keep.extend([cap::NET_ADMIN, cap::NET_RAW, cap::BPF]);
        if !memlock_unlimited() {
            keep.push(cap::IPC_LOCK);
        }
    }
    CapSet::of(&keep)
}

/// Runs `f` with the kept capabilities effective on the calling thread only (capabilities
/// are per thread), then lowers them again: a worker rebuilding its side of a port.
pub fn raised<T>(f: impl FnOnce() -> T) -> T {
    let before = sys::get().ok();
    if let Some(c) = &before {
        let _ = sys::set(&Caps { effective: c.permitted, ..*c });
    }
    let out = f();
    if let Some(c) = &before {
        let _ = sys::set(c);
    }
    out
}

impl Plan {
    /// Becomes `router.user` if set, then keeps `exit` (only those it has) in the permitted
    /// set and nothing in the effective, inheritable and ambient sets. Must run while this
    /// is the process's only thread. Returns a line for the log.
    pub fn drop_privileges(&self, exit: CapSet) -> Result<String> {
        let threads = sys::thread_count().context("counting threads")?;
        if threads != 1 {
            bail!(
                "internal: privileges must be dropped before any thread starts ({threads} running)"
            );
        }
        let before = sys::get()?;
        let kept = CapSet(exit.0 & before.permitted.0);
        if before.effective.has(cap::SETPCAP) {
            // Uid 0 regains the full bounding set by running any program: empty it too.
            for c in (0..=sys::last_cap()).filter(|&c| !kept.has(c)) {
                sys::bounding_drop(c)
                    .with_context(|| format!("dropping {} from the bounding set", cap::name(c)))?;
            }
        }
        if let Some((name, uid, gid)) = &self.user {
            sys::keep_caps(true).context("PR_SET_KEEPCAPS")?;
            let groups: Vec<u32> = self.control_gid.into_iter().collect();
            sys::switch_user(*uid, *gid, &groups)
                .with_context(|| format!("becoming user {name} (uid {uid}, gid {gid})"))?;
            sys::keep_caps(false).context("PR_SET_KEEPCAPS")?;
        }
        if self.ambient || self.user.is_some() {
            sys::ambient_clear().context("clearing the ambient capabilities")?;
        }
        sys::set(&Caps { effective: CapSet(0), permitted: kept, inheritable: CapSet(0) })
            .context("dropping capabilities (capset)")?;
        sys::no_new_privs().context("PR_SET_NO_NEW_PRIVS")?;
        let (uid, gid, _) = sys::ids();
        let names: Vec<&str> = (0..64).filter(|&c| kept.has(c)).map(cap::name).collect();
        Ok(format!(
            "running as uid {uid} gid {gid}, no effective capabilities; kept in the permitted set (for rebuilding a port, the clean-up at exit): {}",
            if names.is_empty() { "none".to_owned() } else { names.join(", ") }
        ))
    }
}

/// Raises the kept capabilities again for the clean-up at exit (restoring NAPI threads and
/// sysfs settings, removing an nftables table), once the workers have stopped.
pub fn for_clean_up() {
    let Ok(mut c) = sys::get() else { return };
    c.effective = c.permitted;
    c.inheritable = c.permitted;
    let _ = sys::set(&c);
    if c.permitted.has(cap::NET_ADMIN) {
        let _ = sys::ambient_raise(cap::NET_ADMIN);
    }
}
