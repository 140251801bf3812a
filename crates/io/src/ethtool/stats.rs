//! An interface's driver statistics, as `ethtool -S` shows them (the SIOCETHTOOL ioctl:
//! ETHTOOL_GDRVINFO for their number, ETHTOOL_GSTRINGS for their names, ETHTOOL_GSTATS for
//! their values; `linux/ethtool.h`). The in-kernel generator reads veth's `xdp_xmit` counters
//! this way: they are the only count of the frames the peer took.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// `struct ethtool_drvinfo`: 196 bytes; `n_stats` is its 46th 32-bit word.
const DRVINFO_WORDS: usize = 49;
const DRVINFO_N_STATS: usize = 45;
/// Spare entries in every buffer: before Linux 6.11 the kernel wrote as many entries as the
/// driver had at the time of the call, whatever the count passed in (fixed by "ethtool: Avoid
/// overflowing userspace buffer on stats query"); a change of queues between two calls could
/// add some.
const SPARE: usize = 1024;

/// The names of an interface's statistics, and a socket to read their values.
pub struct DriverStats {
    sock: OwnedFd,
    ifname: String,
    names: Vec<String>,
}

impl DriverStats {
    /// Reads the statistics' names of `ifname` (in this thread's network namespace).
    pub fn open(ifname: &str) -> io::Result<DriverStats> {
        if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {ifname:?}"),
            ));
        }
        // SAFETY: socket(2) takes no pointers; a non-negative result is a fresh fd we own.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut stats = DriverStats { sock, ifname: ifname.to_owned(), names: Vec::new() };
        let mut info = [0u32; DRVINFO_WORDS];
        info[0] = ETHTOOL_GDRVINFO;
        stats.ioctl(info.as_mut_ptr().cast(), size_of_val(&info))?;
        let n = info[DRVINFO_N_STATS] as usize;
        // struct ethtool_gstrings: cmd, string_set, len, then `len` names of 32 bytes.
        let mut strings = vec![0u32; 3 + (n + SPARE) * ETH_GSTRING_LEN / 4];
        strings[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, ETH_SS_STATS, n as u32]);
        let bytes = size_of_val(strings.as_slice());
        stats.ioctl(strings.as_mut_ptr().cast(), bytes)?;
        let n = (strings[2] as usize).min(n + SPARE);
        let raw: Vec<u8> =
            strings[3..3 + n * ETH_GSTRING_LEN / 4].iter().flat_map(|w| w.to_ne_bytes()).collect();
        stats.names = raw
            .chunks(ETH_GSTRING_LEN)
            .map(|c| {
                String::from_utf8_lossy(&c[..c.iter().position(|&b| b == 0).unwrap_or(c.len())])
                    .into_owned()
            })
            .collect();
        Ok(stats)
    }

    /// The statistics' names, in the order of [`read`](Self::read)'s values.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The current values.
    pub fn read(&self) -> io::Result<Vec<u64>> {
        // struct ethtool_stats: cmd, n_stats (two u32 in the first u64), then the values.
        let n = self.names.len();
        let mut buf = vec![0u64; 1 + n + SPARE];
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
        head[4..].copy_from_slice(&(n as u32).to_ne_bytes());
        buf[0] = u64::from_ne_bytes(head);
        let bytes = size_of_val(buf.as_slice());
        self.ioctl(buf.as_mut_ptr().cast(), bytes)?;
        let got = buf[0].to_ne_bytes();
        if u32::from_ne_bytes([got[4], got[5], got[6], got[7]]) as usize != n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the statistics of {} changed while being read (queues added or removed?)",
                    self.ifname
                ),
            ));
        }
        buf.truncate(1 + n);
        buf.remove(0);
        Ok(buf)
    }

    /// SIOCETHTOOL with `data` (`len` bytes, laid out as the command in its first word
    /// expects) as the request's `ifr_data`.
    fn ioctl(&self, data: *mut libc::c_void, len: usize) -> io::Result<()> {
        debug_assert!(len >= 4);
        // SAFETY: ifreq is plain data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(self.ifname.bytes()) {
            *d = s as libc::c_char;
        }
        req.ifr_ifru.ifru_data = data.cast();
        // SAFETY: `req` names the interface (NUL-terminated: the name is shorter than
        // IFNAMSIZ) and points at `len` writable bytes laid out as the ethtool command asks.
        // The kernel writes the header and one entry per statistic: at most the count in the
        // header (Linux 6.11 and later), else the driver's count at that moment, which the
        // SPARE entries beyond the count read just before cover. It keeps no reference.
        let rc = unsafe { libc::ioctl(self.sock.as_raw_fd(), SIOCETHTOOL, &mut req) };
        if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loopback device has no driver statistics; a missing device is an error.
    #[test]
    fn loopback_and_missing_device() {
        match DriverStats::open("lo") {
            Ok(s) => assert_eq!(s.read().unwrap().len(), s.names().len()),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}"),
        }
        assert!(DriverStats::open("lrnosuchdev0").is_err());
        assert!(DriverStats::open("").is_err());
    }
}
