//! Turning an interface's GRO on (ETHTOOL_GGRO / ETHTOOL_SGRO, `struct ethtool_value`), as
//! `ethtool -K IF gro on` does. On a veth, GRO gives the receiving end a NAPI instance (so
//! its receive work can run in a pinned thread) without an XDP program, which would turn
//! the peer's TSO off.

use std::io;
use std::os::fd::AsRawFd;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;

/// GRO turned on by [`enable`]; turned off again when dropped.
pub struct GroOn {
    ifname: String,
}

impl Drop for GroOn {
    fn drop(&mut self) {
        let _ = command(&self.ifname, ETHTOOL_SGRO, 0);
    }
}

/// Turns GRO on on `ifname`. `None` if it was on already (nothing to undo).
pub fn enable(ifname: &str) -> io::Result<Option<GroOn>> {
    if command(ifname, ETHTOOL_GGRO, 0)? != 0 {
        return Ok(None);
    }
    command(ifname, ETHTOOL_SGRO, 1)?;
    Ok(Some(GroOn { ifname: ifname.to_owned() }))
}

/// One `struct ethtool_value` command on `ifname`; returns its `data` afterwards.
fn command(ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {ifname:?}"),
        ));
    }
    let sock = crate::tap::ioctl_socket()?;
    let mut value = [cmd, data];
    let mut req = crate::tap::ifreq(ifname);
    req.ifr_ifru.ifru_data = value.as_mut_ptr().cast();
    // SAFETY: `req` names the interface (NUL-terminated: the name is shorter than IFNAMSIZ)
    // and points at an 8-byte `struct ethtool_value`, which the kernel reads and writes
    // during the call only.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut req) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(value[1]) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_device_is_an_error() {
        assert!(super::enable("lrnosuchdev0").is_err());
        assert!(super::enable("").is_err());
    }
}
