//! One AF_XDP socket: UMEM registration (or sharing), the four rings, and bind.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::ring::{Ring, Side};
use crate::pool::FRAME_SIZE;
use crate::sys::{self, XdpDesc, XdpMmapOffsets, XdpStatistics};

/// How to bind the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    /// Register `region` as a new UMEM and bind in copy mode.
    Copy,
    /// Register `region` as a new UMEM and bind in zero-copy mode.
    ZeroCopy,
    /// Use the UMEM of the socket `fd` (its copy/zero-copy mode and need-wakeup setting).
    Shared(RawFd),
}

/// A bound socket and its mapped rings.
pub struct Parts {
    pub fd: OwnedFd,
    pub fill: Ring<u64>,
    pub comp: Ring<u64>,
    pub rx: Ring<XdpDesc>,
    pub tx: Ring<XdpDesc>,
    pub zero_copy: bool,
}

/// A failed step and the kernel's answer.
#[derive(Debug)]
pub struct StepError {
    pub step: &'static str,
    pub source: io::Error,
}

fn step<T>(step: &'static str, r: io::Result<T>) -> Result<T, StepError> {
    r.map_err(|source| StepError { step, source })
}

/// Creates a socket on (`ifindex`, `queue`) with rings of `ring_size` entries over the UMEM
/// `region` (registered here unless `bind` is `Shared`).
///
/// The region is given as an address and length: the caller guarantees it stays allocated
/// (the frame pool outlives its ports) since the kernel pins and writes into it.
pub fn create(
    region: (*mut u8, usize),
    ifindex: u32,
    queue: u32,
    ring_size: u32,
    bind: Bind,
) -> Result<Parts, StepError> {
    let fd = step("socket(AF_XDP)", sys::socket(sys::AF_XDP, libc::SOCK_RAW, 0))?;
    let raw = fd.as_raw_fd();
    if !matches!(bind, Bind::Shared(_)) {
        let reg = sys::XdpUmemReg {
            addr: region.0 as u64,
            len: region.1 as u64,
            chunk_size: FRAME_SIZE as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        step("XDP_UMEM_REG", sys::setsockopt(raw, sys::SOL_XDP, sys::XDP_UMEM_REG, &reg))?;
    }
    // Every socket has its own fill and completion rings, also with a shared UMEM (bound to
    // another interface or queue: supported since Linux 5.10).
    for opt in
        [sys::XDP_UMEM_FILL_RING, sys::XDP_UMEM_COMPLETION_RING, sys::XDP_RX_RING, sys::XDP_TX_RING]
    {
        step("ring setup (setsockopt)", sys::setsockopt(raw, sys::SOL_XDP, opt, &ring_size))?;
    }
    let mut off = XdpMmapOffsets::default();
    step("XDP_MMAP_OFFSETS", sys::getsockopt(raw, sys::SOL_XDP, sys::XDP_MMAP_OFFSETS, &mut off))?;
    let fill = step(
        "mmap fill ring",
        Ring::map(raw, sys::XDP_UMEM_PGOFF_FILL_RING, &off.fr, ring_size, Side::Producer),
    )?;
    let comp = step(
        "mmap completion ring",
        Ring::map(raw, sys::XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, ring_size, Side::Consumer),
    )?;
    let rx = step(
        "mmap rx ring",
        Ring::map(raw, sys::XDP_PGOFF_RX_RING, &off.rx, ring_size, Side::Consumer),
    )?;
    let tx = step(
        "mmap tx ring",
        Ring::map(raw, sys::XDP_PGOFF_TX_RING, &off.tx, ring_size, Side::Producer),
    )?;

    let mut addr = sys::SockaddrXdp {
        family: sys::AF_XDP as u16,
        ifindex,
        queue_id: queue,
        ..Default::default()
    };
    match bind {
        Bind::Copy => addr.flags = sys::XDP_COPY | sys::XDP_USE_NEED_WAKEUP,
        Bind::ZeroCopy => addr.flags = sys::XDP_ZEROCOPY | sys::XDP_USE_NEED_WAKEUP,
        // Flags are inherited from the UMEM's first socket; the kernel refuses any here.
        Bind::Shared(first) => {
            addr.flags = sys::XDP_SHARED_UMEM;
            addr.shared_umem_fd = first as u32;
        }
    }
    // SAFETY: `addr` is a live sockaddr_xdp of the size passed.
    let ret = unsafe {
        libc::bind(
            raw,
            (&addr as *const sys::SockaddrXdp).cast(),
            size_of::<sys::SockaddrXdp>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(StepError { step: "bind", source: io::Error::last_os_error() });
    }
    let mut opts = 0u32;
    step("XDP_OPTIONS", sys::getsockopt(raw, sys::SOL_XDP, sys::XDP_OPTIONS, &mut opts))?;
    Ok(Parts { fd, fill, comp, rx, tx, zero_copy: opts & sys::XDP_OPTIONS_ZEROCOPY != 0 })
}

/// The kernel's drop counters of a socket.
pub fn statistics(fd: RawFd) -> XdpStatistics {
    let mut st = XdpStatistics::default();
    let _ = sys::getsockopt(fd, sys::SOL_XDP, sys::XDP_STATISTICS, &mut st);
    st
}

/// Asks the kernel to process the tx ring (copy mode transmits here, in the syscall).
pub fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with NULL buffer and address, which AF_XDP defines as "wake
    // up tx"; no memory is read.
    let ret =
        unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if ret < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Asks the kernel to process the fill ring (drivers set need-wakeup when they ran dry).
pub fn kick_rx(fd: RawFd) {
    // SAFETY: a zero-length receive with NULL buffer and address, which AF_XDP defines as
    // "wake up rx"; no memory is written.
    unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}
