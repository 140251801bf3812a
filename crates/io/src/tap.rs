//! A TAP device: an Ethernet interface whose "wire" is a file descriptor (kernel doc
//! `networking/tuntap.rst`). Frames written to the descriptor arrive in the kernel as if
//! received on the interface; frames the kernel sends out of the interface are read from it.
//!
//! The router uses one to hand the host stack what is addressed to it (host-stack
//! passthrough: routing daemons, SSH, the kernel's own ARP/ND) and to send what the host stack
//! answers. The device is opened with `IFF_TAP | IFF_NO_PI` (whole Ethernet frames, no
//! packet-information prefix) and non-blocking; it disappears when the last descriptor closes
//! (it is not made persistent). Names must start with `lr`, like every interface linerate
//! creates, so that leftovers are easy to recognise (`lr%d` lets the kernel pick the number).
//!
//! [`Tap`] implements [`RxPort`] and [`TxPort`] by copying each frame between the descriptor
//! and a [`FramePool`] chunk (one `read`/`write` per frame: a slow path, not the forwarding
//! path). [`Tap::try_clone`] gives a second handle for the other direction.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::batch::Batch;
use crate::pool::{FRAME_SIZE, FramePool};
use crate::port::{PortStats, RxPort, TxPort};

/// Prefix of every TAP linerate creates.
pub const NAME_PREFIX: &str = "lr";

pub(crate) fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

pub(crate) fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *dst = src as libc::c_char;
    }
    req
}

fn ifreq_name(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req.ifr_name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A datagram socket for the interface ioctls (SIOCSIFHWADDR, SIOCGIFFLAGS, SIOCSIFFLAGS),
/// in the calling thread's network namespace.
pub(crate) fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a fresh fd we now own.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An open TAP device. Dropping the last handle removes the interface.
pub struct Tap {
    fd: OwnedFd,
    name: String,
    port: u16,
    stats: PortStats,
}

impl Tap {
    /// Creates (or attaches to) TAP `name` in the calling thread's network namespace; needs
    /// CAP_NET_ADMIN. `name` must start with `lr` and fit IFNAMSIZ; it may contain `%d`.
    /// The interface starts down; see [`set_mac`](Self::set_mac) and [`set_up`](Self::set_up),
    /// or configure it with `ip link`. Received frames are stamped with port index `port`.
    pub fn open(name: &str, port: u16) -> io::Result<Tap> {
        if !name.starts_with(NAME_PREFIX) || name.len() >= libc::IFNAMSIZ || name.contains('/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "TAP name {name:?} must start with {NAME_PREFIX:?} and be at most {} bytes",
                    libc::IFNAMSIZ - 1
                ),
            ));
        }
        let path = c"/dev/net/tun";
        // SAFETY: `path` is NUL-terminated and outlives the call; a non-negative result is a
        // fresh fd we now own.
        let fd = cvt(unsafe {
            libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC)
        })
        .map_err(|e| {
            io::Error::new(e.kind(), format!("opening {}: {e} (modprobe tun?)", path_str(path)))
        })?;
        // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = ifreq(name);
        req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads the name and flags from `req`, a valid ifreq, and writes the
        // interface's actual name back into it.
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) }).map_err(|e| {
            io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e} (needs CAP_NET_ADMIN)"))
        })?;
        Ok(Tap { fd, name: ifreq_name(&req), port, stats: PortStats::default() })
    }

    /// The interface's name (with any `%d` resolved).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the interface's MAC address (SIOCSIFHWADDR; the kernel's side of the link).
    pub fn set_mac(&self, mac: [u8; 6]) -> io::Result<()> {
        let sock = ioctl_socket()?;
        let mut req = ifreq(&self.name);
        // SAFETY: writing plain data into the `ifru_hwaddr` member of our own ifreq.
        unsafe {
            req.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
            for (d, s) in req.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac) {
                *d = s as libc::c_char;
            }
        }
        // SAFETY: SIOCSIFHWADDR reads the name and address from `req`, a valid ifreq.
        cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFHWADDR, &req) }).map(drop)
    }

    /// Brings the interface up or down (SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP changed).
    pub fn set_up(&self, up: bool) -> io::Result<()> {
        let sock = ioctl_socket()?;
        let mut req = ifreq(&self.name);
        // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `req`.
        cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
        // SAFETY: the kernel just filled `ifru_flags`; we change one bit of it.
        unsafe {
            let up_flag = libc::IFF_UP as libc::c_short;
            let flags = req.ifr_ifru.ifru_flags;
            req.ifr_ifru.ifru_flags = if up { flags | up_flag } else { flags & !up_flag };
        }
        // SAFETY: SIOCSIFFLAGS reads the name and flags from `req`, a valid ifreq.
        cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) }).map(drop)
    }

    /// Sets the TAP's carrier (TUNSETCARRIER, Linux 4.20): off, the kernel sees the link as
    /// down (NO-CARRIER), as routing daemons on it should while the port it stands for is.
    pub fn set_carrier(&self, on: bool) -> io::Result<()> {
        /// linux/if_tun.h: `_IOW('T', 226, int)`.
        const TUNSETCARRIER: libc::c_ulong = 0x4004_54e2;
        let value: libc::c_int = on.into();
        // SAFETY: TUNSETCARRIER reads one int from the pointer, valid for the call.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNSETCARRIER, &value) }).map(drop)
    }

    /// A second handle on the same device (dup(2)), e.g. one for the rx side of a worker and
    /// one for the tx side. Each handle keeps its own counters.
    pub fn try_clone(&self) -> io::Result<Tap> {
        Ok(Tap {
            fd: self.fd.try_clone()?,
            name: self.name.clone(),
            port: self.port,
            stats: PortStats::default(),
        })
    }

    /// Reads one frame into `buf`; `Ok(None)` if none is waiting. A frame longer than `buf`
    /// is cut to its length (tun(4) semantics).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) }
    }

    /// Writes one whole frame (the kernel receives it on the interface); `Ok(false)` if the
    /// device cannot take it now.
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes for the duration of the call.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        if n >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock { Ok(false) } else { Err(e) }
    }

    /// Waits up to `timeout_ms` (-1: forever) for a frame to read.
    pub fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, count 1.
        let n = cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) })?;
        Ok(n > 0 && pfd.revents & libc::POLLIN != 0)
    }
}

fn path_str(p: &CStr) -> String {
    p.to_string_lossy().into_owned()
}

impl AsRawFd for Tap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl RxPort for Tap {
    fn rx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        let mut got = 0;
        while got < max.min(batch.room()) {
            let Some(mut desc) = pool.alloc() else {
                break; // frames stay queued in the kernel (up to the device's txqueuelen)
            };
            let start = desc.addr as usize % FRAME_SIZE;
            let read = self.recv(&mut pool.chunk_mut(desc.addr)[start..]);
            match read {
                Ok(Some(n)) if n > 0 => {
                    desc.len = n as u16;
                    desc.port = self.port;
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += n as u64;
                    batch.push(desc);
                    got += 1;
                }
                _ => {
                    pool.free(desc);
                    break;
                }
            }
        }
        got
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

impl TxPort for Tap {
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        for desc in batch.drain() {
            match self.send(pool.frame(desc)) {
                Ok(true) => {
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += u64::from(desc.len);
                }
                _ => self.stats.tx_dropped += 1,
            }
            pool.free(desc);
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_need_the_prefix() {
        for bad in ["eth0", "tap0", "", "lr-name-too-long-x", "lr/x"] {
            let e = Tap::open(bad, 0).err().expect(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
    }

    #[test]
    fn ifreq_round_trips_names() {
        assert_eq!(ifreq_name(&ifreq("lrtap0")), "lrtap0");
        assert_eq!(ifreq_name(&ifreq("lr%d")), "lr%d");
    }
}
