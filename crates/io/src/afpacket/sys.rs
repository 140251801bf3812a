//! Thin wrappers over the syscalls AF_PACKET needs, and the shared ring mapping. Each wrapper
//! is safe to call; the one contract left to callers is [`Mapping::bytes`] (see there).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

pub const TPACKET_V2: libc::c_int = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
pub const TPACKET_V3: libc::c_int = libc::tpacket_versions::TPACKET_V3 as libc::c_int;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// A raw AF_PACKET socket listening to `protocol` (host order; 0 = receive nothing until bound
/// with a protocol).
pub fn packet_socket(protocol: u16) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a fresh fd we now own.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol.to_be() as libc::c_int,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// setsockopt(SOL_PACKET, `opt`) with a plain-data value.
pub fn set_packet_opt<T: Copy>(fd: &OwnedFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to `size_of::<T>()` readable bytes for the duration of the call;
    // callers pass the kernel's struct for `opt` (int, tpacket_req, tpacket_req3, packet_mreq).
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// setsockopt(SOL_SOCKET, SO_ATTACH_BPF): eBPF socket filter `prog` on the socket.
pub fn attach_bpf_filter(fd: &OwnedFd, prog: RawFd) -> io::Result<()> {
    let prog: libc::c_int = prog;
    // SAFETY: the value is a c_int, as SO_ATTACH_BPF takes, readable for the whole call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_BPF,
            (&prog as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// PACKET_STATISTICS for a V3 socket: (tp_packets, tp_drops, tp_freeze_q_cnt) since the last
/// call (the kernel resets them on read).
pub fn packet_stats(fd: &OwnedFd) -> io::Result<(u32, u32, u32)> {
    let mut st = libc::tpacket_stats_v3 { tp_packets: 0, tp_drops: 0, tp_freeze_q_cnt: 0 };
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` and `len` are valid for writes; the kernel writes at most `len` bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    })?;
    Ok((st.tp_packets, st.tp_drops, st.tp_freeze_q_cnt))
}

/// Binds the socket to interface `ifindex` for `protocol` (host order).
pub fn bind(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// The interface's index in the calling thread's network namespace, if it exists.
pub fn ifindex(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (idx != 0).then_some(idx)
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *dst = src as libc::c_char;
    }
    req
}

/// Interface flags (IFF_*) and MTU, read through `fd`'s namespace.
pub fn if_flags_mtu(fd: &OwnedFd, name: &str) -> io::Result<(i32, u32)> {
    let mut req = ifreq(name);
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `req`, a valid ifreq.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: the kernel just filled the `ifru_flags` member.
    let flags = i32::from(unsafe { req.ifr_ifru.ifru_flags });
    let mut req = ifreq(name);
    // SAFETY: as above, SIOCGIFMTU fills `ifru_mtu`.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req) })?;
    // SAFETY: the kernel just filled the `ifru_mtu` member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok((flags, mtu.max(0) as u32))
}

/// Asks the kernel to send every frame marked TP_STATUS_SEND_REQUEST, without blocking.
pub fn kick(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length send with null buffer and address is the documented tx-ring kick.
    let rc = unsafe {
        libc::sendto(fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0)
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Waits up to `timeout_ms` (-1: forever) for `fd` to become readable.
pub fn poll_in(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN | libc::POLLERR, revents: 0 };
    // SAFETY: one valid pollfd, count 1.
    let n = cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) })?;
    Ok(n > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR) != 0)
}

/// A ring mapped from a packet socket (MAP_SHARED): memory the kernel writes and reads too.
/// Ownership of each block or slot passes between kernel and process through its status word,
/// which is only ever accessed atomically ([`Mapping::status`]).
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; nothing in it is tied to a thread.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of the ring configured on `fd`.
    pub fn new(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel checks `len` against
        // the ring size. We keep the result only if it is not MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mapping { ptr, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The 32-bit status word at `offset` (a block's `block_status` or a slot's `tp_status`).
    pub fn status(&self, offset: usize) -> &AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.len, "status word out of the ring");
        // SAFETY: in bounds and 4-aligned (the mapping is page-aligned), valid while `self` is;
        // AtomicU32 has u32's layout, and atomics are the right type for memory another party
        // (the kernel) writes concurrently.
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// `len` bytes at `offset` as a slice.
    ///
    /// # Safety
    /// The range must belong to the process for as long as the slice lives: a block whose
    /// status was read (Acquire) as TP_STATUS_USER and not yet handed back, or a tx slot read
    /// as TP_STATUS_AVAILABLE. The kernel does not write such memory.
    pub unsafe fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "range out of the ring"
        );
        // SAFETY: in bounds; the caller guarantees nobody writes the range meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len) }
    }

    /// Copies `data` to `offset`.
    ///
    /// # Safety
    /// The range must belong to the process (a tx slot read as TP_STATUS_AVAILABLE), and no
    /// slice from [`Mapping::bytes`] may overlap it.
    pub unsafe fn write(&self, offset: usize, data: &[u8]) {
        assert!(
            offset.checked_add(data.len()).is_some_and(|end| end <= self.len),
            "range out of the ring"
        );
        // SAFETY: in bounds; `data` is process memory, so it cannot overlap the ring; the
        // caller guarantees exclusive access to the destination.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no reference into it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
