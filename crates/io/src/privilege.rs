//! Capabilities, identity and peer credentials: the syscalls behind `linerate run`'s least
//! privilege (capabilities(7), credentials(7), unix(7) `SO_PEERCRED`).
//!
//! Capability sets are per thread: [`set`] changes the calling thread's only, and a thread
//! started later inherits its creator's. `run` therefore drops them while it has one thread.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use crate::tap::cvt;

/// Capability numbers (linux/capability.h).
pub mod cap {
    pub const CHOWN: u32 = 0;
    pub const DAC_OVERRIDE: u32 = 1;
    pub const SETGID: u32 = 6;
    pub const SETUID: u32 = 7;
    pub const SETPCAP: u32 = 8;
    pub const NET_ADMIN: u32 = 12;
    pub const NET_RAW: u32 = 13;
    pub const IPC_LOCK: u32 = 14;
    pub const SYS_ADMIN: u32 = 21;
    pub const SYS_NICE: u32 = 23;
    pub const PERFMON: u32 = 38;
    pub const BPF: u32 = 39;

    /// The name capabilities(7) gives `c`.
    pub fn name(c: u32) -> &'static str {
        match c {
            CHOWN => "CAP_CHOWN",
            DAC_OVERRIDE => "CAP_DAC_OVERRIDE",
            SETGID => "CAP_SETGID",
            SETUID => "CAP_SETUID",
            NET_ADMIN => "CAP_NET_ADMIN",
            NET_RAW => "CAP_NET_RAW",
            IPC_LOCK => "CAP_IPC_LOCK",
            SYS_ADMIN => "CAP_SYS_ADMIN",
            SYS_NICE => "CAP_SYS_NICE",
            PERFMON => "CAP_PERFMON",
            BPF => "CAP_BPF",
            _ => "CAP_?",
        }
    }
}

/// A set of capabilities, bit `n` for capability `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapSet(pub u64);

impl CapSet {
    pub fn of(caps: &[u32]) -> CapSet {
        CapSet(caps.iter().fold(0, |s, &c| s | 1 << c))
    }
    pub fn has(self, c: u32) -> bool {
        self.0 & (1 << c) != 0
    }
}

/// The calling thread's three capability sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    pub effective: CapSet,
    pub permitted: CapSet,
    pub inheritable: CapSet,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn join(d: &[CapData; 2], f: fn(&CapData) -> u32) -> CapSet {
    CapSet(u64::from(f(&d[0])) | u64::from(f(&d[1])) << 32)
}

/// The calling thread's capabilities (capget(2)).
pub fn get() -> io::Result<Caps> {
    let mut hdr = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: version 3 takes a header and an array of two data structs, both valid here.
    cvt(unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut CapHeader, data.as_mut_ptr()) }
        as libc::c_int)?;
    Ok(Caps {
        effective: join(&data, |d| d.effective),
        permitted: join(&data, |d| d.permitted),
        inheritable: join(&data, |d| d.inheritable),
    })
}

/// Sets the calling thread's capabilities (capset(2)): a thread may only lower its
/// permitted set, and its effective set must stay within it.
pub fn set(c: &Caps) -> io::Result<()> {
    let mut hdr = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let part = |i: u32| CapData {
        effective: (c.effective.0 >> i) as u32,
        permitted: (c.permitted.0 >> i) as u32,
        inheritable: (c.inheritable.0 >> i) as u32,
    };
    let data = [part(0), part(32)];
    // SAFETY: as in `get`; the kernel only reads `data`.
    cvt(unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, data.as_ptr()) }
        as libc::c_int)
    .map(drop)
}

fn prctl(op: libc::c_int, a: libc::c_ulong, b: libc::c_ulong) -> io::Result<()> {
    // SAFETY: the prctl operations used here take integer arguments only.
    cvt(unsafe { libc::prctl(op, a, b, 0 as libc::c_ulong, 0 as libc::c_ulong) }).map(drop)
}

/// Raises `c` in the ambient set, so that programs this thread runs (`ip`, `nft`) get it
/// without file capabilities; it must be permitted and inheritable.
pub fn ambient_raise(c: u32) -> io::Result<()> {
    prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong, c.into())
}

/// Empties the ambient set.
pub fn ambient_clear() -> io::Result<()> {
    prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0)
}

/// Removes `c` from the bounding set (needs CAP_SETPCAP): no program this process runs can
/// get it back, not even as uid 0.
pub fn bounding_drop(c: u32) -> io::Result<()> {
    prctl(libc::PR_CAPBSET_DROP, c.into(), 0)
}

/// The highest capability number the kernel knows (`/proc/sys/kernel/cap_last_cap`).
pub fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// PR_SET_KEEPCAPS: whether the permitted set survives a change from uid 0 to another uid.
pub fn keep_caps(on: bool) -> io::Result<()> {
    prctl(libc::PR_SET_KEEPCAPS, on.into(), 0)
}

/// PR_SET_NO_NEW_PRIVS: no program this process runs can gain privileges (set-user-ID,
/// file capabilities).
pub fn no_new_privs() -> io::Result<()> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0)
}

/// Real, effective and saved uid and gid become `uid` and `gid`, the supplementary groups
/// `groups` (glibc applies these to every thread of the process).
pub fn switch_user(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    // SAFETY: `groups` is a valid slice of gid_t for its length.
    cvt(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) })?;
    // SAFETY: plain integer arguments.
    cvt(unsafe { libc::setresgid(gid, gid, gid) })?;
    // SAFETY: plain integer arguments.
    cvt(unsafe { libc::setresuid(uid, uid, uid) }).map(drop)
}

/// The process's effective uid and gid and its supplementary groups.
pub fn ids() -> (u32, u32, Vec<u32>) {
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: the buffer holds `groups.len()` entries.
    let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    groups.truncate(n.max(0) as usize);
    (uid, gid, groups)
}

/// A user's uid and primary gid (getpwnam_r(3)); `None` if there is no such user.
pub fn user(name: &str) -> io::Result<Option<(u32, u32)>> {
    let cname = CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: passwd is plain data; all-zero is valid before getpwnam_r fills it.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; the strings in `pw` point into `buf`.
    let rc =
        unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok((!out.is_null()).then_some((pw.pw_uid, pw.pw_gid)))
}

/// A group's gid (getgrnam_r(3)); `None` if there is no such group.
pub fn group(name: &str) -> io::Result<Option<u32>> {
    let cname = CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut buf = vec![0 as libc::c_char; 64 * 1024];
    // SAFETY: group is plain data; all-zero is valid before getgrnam_r fills it.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in `user`.
    let rc =
        unsafe { libc::getgrnam_r(cname.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok((!out.is_null()).then_some(gr.gr_gid))
}

/// Who is at the other end of a connected Unix socket, as the kernel recorded it at
/// connect(2): uid, gid and supplementary groups (`SO_PEERCRED`, `SO_PEERGROUPS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The credentials of the peer of Unix socket `fd`.
pub fn peer(fd: RawFd) -> io::Result<Peer> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    crate::sys::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred)?;
    let mut groups = vec![0u32; 256];
    let mut len = (groups.len() * 4) as libc::socklen_t;
    // SAFETY: `groups` holds `len` bytes; the kernel writes at most that many.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERGROUPS,
            groups.as_mut_ptr().cast(),
            &mut len,
        )
    };
    cvt(rc)?;
    groups.truncate(len as usize / 4);
    Ok(Peer { pid: cred.pid, uid: cred.uid, gid: cred.gid, groups })
}

/// Runs `f` with the process's file mode creation mask set to `mask` (umask(2)), then puts
/// the old one back. The mask is the process's: call it while no other thread creates files.
pub fn with_umask<T>(mask: u32, f: impl FnOnce() -> T) -> T {
    // SAFETY: umask cannot fail.
    let old = unsafe { libc::umask(mask as libc::mode_t) };
    let out = f();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    out
}

/// Changes the group of the file at `path` (chown(2) with the owner unchanged).
pub fn chgrp(path: &std::path::Path, gid: u32) -> io::Result<()> {
    std::os::unix::fs::chown(path, None, Some(gid))
}

/// Threads of this process (`Threads:` of /proc/self/status).
pub fn thread_count() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no Threads: line in /proc/self/status")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_sets_read_back() {
        let c = get().unwrap();
        assert_eq!(c.effective.0 & !c.permitted.0, 0, "effective within permitted");
        // Setting what we have changes nothing.
        set(&c).unwrap();
        assert_eq!(get().unwrap(), c);
        assert!(CapSet::of(&[cap::NET_ADMIN, cap::BPF]).has(cap::BPF));
        assert!(!CapSet::of(&[cap::NET_ADMIN]).has(cap::NET_RAW));
        assert_eq!(cap::name(cap::BPF), "CAP_BPF");
    }

    #[test]
    fn accounts_and_peer_credentials() {
        assert_eq!(user("root").unwrap(), Some((0, 0)));
        assert_eq!(user("lr-no-such-user").unwrap(), None);
        assert_eq!(group("root").unwrap(), Some(0));
        assert_eq!(group("lr-no-such-group").unwrap(), None);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let p = peer(std::os::fd::AsRawFd::as_raw_fd(&a)).unwrap();
        let (uid, gid, _) = ids();
        assert_eq!((p.pid as u32, p.uid, p.gid), (std::process::id(), uid, gid));
        assert!(thread_count().unwrap() >= 1);
    }

    #[test]
    fn umask_applies_and_is_restored() {
        let dir = std::env::temp_dir().join(format!("lr-umask-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        with_umask(0o077, || std::fs::write(&dir, b"x")).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&dir).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(with_umask(0o022, || 0), 0);
    }
}
