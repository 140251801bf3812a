//! Kernel ABI not in the `libc` crate (from `linux/if_xdp.h`, `linux/bpf.h`, `linux/if_link.h`)
//! and thin syscall wrappers returning `io::Result`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

// --- linux/if_xdp.h ---
pub const AF_XDP: libc::c_int = 44;
pub const SOL_XDP: libc::c_int = 283;

pub const XDP_SHARED_UMEM: u16 = 1 << 0;
pub const XDP_COPY: u16 = 1 << 1;
pub const XDP_ZEROCOPY: u16 = 1 << 2;
pub const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;

pub const XDP_MMAP_OFFSETS: libc::c_int = 1;
pub const XDP_RX_RING: libc::c_int = 2;
pub const XDP_TX_RING: libc::c_int = 3;
pub const XDP_UMEM_REG: libc::c_int = 4;
pub const XDP_UMEM_FILL_RING: libc::c_int = 5;
pub const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
pub const XDP_STATISTICS: libc::c_int = 7;
pub const XDP_OPTIONS: libc::c_int = 8;
pub const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;

pub const XDP_PGOFF_RX_RING: libc::off_t = 0;
pub const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
pub const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
pub const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

pub const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;
/// Headroom the kernel keeps in front of received data in every chunk (copy mode).
pub const XDP_PACKET_HEADROOM: u32 = 256;

#[repr(C)]
#[derive(Default)]
pub struct SockaddrXdp {
    pub family: u16,
    pub flags: u16,
    pub ifindex: u32,
    pub queue_id: u32,
    pub shared_umem_fd: u32,
}

#[repr(C)]
#[derive(Default)]
pub struct XdpUmemReg {
    pub addr: u64,
    pub len: u64,
    pub chunk_size: u32,
    pub headroom: u32,
    pub flags: u32,
    /// Must be zero (older headers left this as padding, which the kernel now reads).
    pub tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct XdpRingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

#[repr(C)]
#[derive(Default)]
pub struct XdpMmapOffsets {
    pub rx: XdpRingOffset,
    pub tx: XdpRingOffset,
    pub fr: XdpRingOffset,
    pub cr: XdpRingOffset,
}

/// An rx/tx ring entry.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

// --- linux/bpf.h ---
pub const BPF_MAP_CREATE: libc::c_int = 0;
pub const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
pub const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
pub const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
pub const BPF_PROG_LOAD: libc::c_int = 5;
pub const BPF_PROG_TEST_RUN: libc::c_int = 10;
pub const BPF_MAP_LOOKUP_BATCH: libc::c_int = 24;
pub const BPF_MAP_UPDATE_BATCH: libc::c_int = 26;
pub const BPF_PROG_GET_FD_BY_ID: libc::c_int = 13;
pub const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
pub const BPF_LINK_CREATE: libc::c_int = 28;

pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
pub const BPF_PROG_TYPE_XDP: u32 = 6;
pub const BPF_XDP: u32 = 37;
pub const BPF_TCX_INGRESS: u32 = 46;
/// BPF_PROG_RUN of an XDP program: send the frames it returns XDP_TX for (Linux 5.18).
pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

// --- linux/if_link.h ---
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
pub const IFLA_XDP: u16 = 43;
pub const IFLA_XDP_FD: u16 = 1;
pub const IFLA_XDP_ATTACHED: u16 = 2;
pub const IFLA_XDP_FLAGS: u16 = 3;
pub const IFLA_XDP_PROG_ID: u16 = 4;
pub const IFLA_XDP_DRV_PROG_ID: u16 = 5;
pub const IFLA_XDP_SKB_PROG_ID: u16 = 6;
pub const XDP_ATTACHED_SKB: u8 = 2;
pub const XDP_ATTACHED_MULTI: u8 = 4;

/// Maps a `-1` return to the thread's errno.
fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 { Err(io::Error::last_os_error()) } else { Ok(ret) }
}

/// The `bpf(2)` syscall with a command-specific attribute struct, returning the raw result.
pub fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, exclusively borrowed `repr(C)` struct of the layout `cmd`
    // expects (a prefix of `union bpf_attr`); the kernel reads and may write
    // `size_of::<T>()` bytes of it and keeps no reference after returning.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, size_of::<T>() as u32) };
    check(ret)
}

/// `bpf(2)` for a command that returns a new file descriptor.
pub fn bpf_fd<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: on success these commands return a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `socket(2)` returning an owned descriptor.
pub fn socket(domain: libc::c_int, ty: libc::c_int, proto: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall, no pointers.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    check(fd as libc::c_long)?;
    // SAFETY: `socket` returned a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(2)` with a plain-data value.
pub fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to `size_of::<T>()` readable bytes for the duration of the call.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    check(ret as libc::c_long).map(drop)
}

/// `getsockopt(2)` into a plain-data value; returns the length the kernel wrote.
pub fn getsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &mut T,
) -> io::Result<usize> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` points to `len` writable bytes of a `repr(C)` plain-data struct (any bit
    // pattern valid), and `len` is a live socklen_t the kernel updates.
    let ret = unsafe { libc::getsockopt(fd, level, name, (value as *mut T).cast(), &mut len) };
    check(ret as libc::c_long)?;
    Ok(len as usize)
}

/// `if_nametoindex(3)`; `None` if there is no such interface in this thread's namespace.
pub fn ifindex(ifname: &str) -> Option<u32> {
    let name = std::ffi::CString::new(ifname).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// Identity of the calling thread's network namespace (inode of /proc/thread-self/ns/net).
pub fn netns_id() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()).unwrap_or(0)
}
