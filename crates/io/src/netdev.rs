//! Facts about host interfaces that `linerate run` checks before opening ports, read from
//! sysfs (Documentation/ABI/testing/sysfs-class-net) so that errors can say what is wrong.

use std::fs;
use std::io;
use std::path::PathBuf;

fn sysfs(ifname: &str, attr: &str) -> PathBuf {
    PathBuf::from("/sys/class/net").join(ifname).join(attr)
}

/// Whether an interface of that name exists (in this network namespace).
pub fn exists(ifname: &str) -> bool {
    !ifname.is_empty() && !ifname.contains('/') && sysfs(ifname, "ifindex").exists()
}

/// The interface's index.
pub fn ifindex(ifname: &str) -> io::Result<u32> {
    let text = fs::read_to_string(sysfs(ifname, "ifindex"))?;
    text.trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("ifindex: {e}")))
}

/// The name of the interface with index `ifindex` (`if_indextoname(3)`), if it exists in this
/// thread's namespace.
pub fn name_of(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has the IF_NAMESIZE bytes the call may write, and lives across it.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success the kernel wrote a NUL-terminated name into `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

/// The interface's MAC address.
pub fn mac_address(ifname: &str) -> io::Result<[u8; 6]> {
    let text = fs::read_to_string(sysfs(ifname, "address"))?;
    parse_mac(text.trim()).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, format!("bad MAC {:?}", text.trim()))
    })
}

/// Gives the interface the MAC address `mac` (SIOCSIFHWADDR; needs CAP_NET_ADMIN): a port
/// whose interface was created again keeps the router's address on it.
pub fn set_mac_address(ifname: &str, mac: [u8; 6]) -> io::Result<()> {
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name length"));
    }
    let sock = crate::sys::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)?;
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &b) in req.ifr_name.iter_mut().zip(name) {
        *d = b as libc::c_char;
    }
    let mut addr: libc::sockaddr = zeroed_sockaddr();
    addr.sa_family = libc::ARPHRD_ETHER;
    for (d, &b) in addr.sa_data.iter_mut().zip(&mac) {
        *d = b as libc::c_char;
    }
    req.ifr_ifru.ifru_hwaddr = addr;
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCSIFHWADDR reads one ifreq, which lives across the call.
    let r =
        unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFHWADDR, &req as *const libc::ifreq) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn zeroed_sockaddr() -> libc::sockaddr {
    // SAFETY: sockaddr is plain old data; all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Whether the interface is administratively up.
pub fn is_up(ifname: &str) -> io::Result<bool> {
    let text = fs::read_to_string(sysfs(ifname, "flags"))?;
    let flags = u32::from_str_radix(text.trim().trim_start_matches("0x"), 16)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("flags: {e}")))?;
    Ok(flags & 1 != 0) // IFF_UP
}

/// The interface's MTU.
pub fn mtu(ifname: &str) -> io::Result<u32> {
    let text = fs::read_to_string(sysfs(ifname, "mtu"))?;
    text.trim().parse().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("mtu: {e}")))
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// Whether the process runs with root's effective uid.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// What a test that cannot run here does: says why and returns, so that it passes; or, when
/// `LINERATE_NO_SKIP` is set (test.sh sets it when run as root, with every tool installed),
/// fails, so that a test that stopped running is never counted as passed.
pub fn skip_test(reason: &str) {
    if std::env::var_os("LINERATE_NO_SKIP").is_some() {
        panic!("this test cannot run: {reason} (LINERATE_NO_SKIP is set)");
    }
    eprintln!("skipped: {reason}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_there_and_bogus_is_not() {
        assert!(exists("lo"));
        assert_eq!(mac_address("lo").unwrap(), [0; 6]);
        assert!(ifindex("lo").unwrap() >= 1);
        assert!(is_up("lo").unwrap());
        assert!(!exists("lr-nonexistent"));
        assert!(!exists("../lo"));
        assert!(ifindex("lr-nonexistent").is_err());
    }

    #[test]
    fn mac_parsing() {
        assert_eq!(parse_mac("02:00:0a:ff:00:01"), Some([2, 0, 10, 255, 0, 1]));
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:02"), None);
    }
}
