//! Fixed-size frame buffers in one contiguous region, handed out by index.
//!
//! The layout mirrors an AF_XDP UMEM (kernel doc `networking/af_xdp.rst`, "UMEM"): the region
//! is split into `FRAME_SIZE` chunks and a frame is named by its byte address in the region.
//! Each chunk keeps `HEADROOM` bytes in front of the frame so a VLAN tag can be pushed without
//! moving the payload.

/// Size of one frame chunk: a power of two holding a 1518-byte frame plus headroom.
pub const FRAME_SIZE: usize = 2048;
/// Bytes kept free in front of each frame (for pushing an 802.1Q tag, or metadata).
pub const HEADROOM: usize = 64;
/// Largest frame a chunk holds.
pub const MAX_FRAME_LEN: usize = FRAME_SIZE - HEADROOM;

/// A frame in a pool: where it starts and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDesc {
    /// Byte address of the first byte of the frame in the pool's region.
    pub addr: u32,
    /// Frame length in bytes (Ethernet header onwards, no FCS).
    pub len: u16,
    /// Index of the port the frame arrived on.
    pub port: u16,
}

impl FrameDesc {
    /// The chunk this frame lives in.
    #[inline]
    pub fn chunk(&self) -> u32 {
        self.addr / FRAME_SIZE as u32
    }
}

/// One page of the pool's region. Page alignment lets the region be registered as an
/// AF_XDP UMEM as it is; a chunk never straddles two pages (`FRAME_SIZE` divides `PAGE`).
#[repr(C, align(4096))]
#[derive(Clone)]
struct Page([u8; PAGE]);

const PAGE: usize = 4096;
const CHUNKS_PER_PAGE: usize = PAGE / FRAME_SIZE;

/// A pool of frame chunks with a LIFO free list (recently freed chunks are still in cache).
pub struct FramePool {
    mem: Vec<Page>,
    free: Vec<u32>,
    chunks: u32,
    leases: std::sync::Arc<()>,
}

/// Held by whatever registered the pool's region with the kernel (an AF_XDP socket): while a
/// lease exists, dropping the pool leaks its region instead of freeing it, so the kernel can
/// never write into memory the allocator has handed out again.
pub struct RegionLease(#[allow(dead_code)] std::sync::Arc<()>);

impl Drop for FramePool {
    fn drop(&mut self) {
        if std::sync::Arc::strong_count(&self.leases) > 1 {
            std::mem::forget(std::mem::take(&mut self.mem));
        }
    }
}

impl FramePool {
    /// The region as one byte slice.
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        // SAFETY: `Page` is `repr(C)` around `[u8; PAGE]` (size PAGE, no padding), so the
        // `mem.len()` pages are `mem.len() * PAGE` initialised, contiguous bytes, borrowed
        // for as long as `&self`.
        unsafe { std::slice::from_raw_parts(self.mem.as_ptr().cast::<u8>(), self.mem.len() * PAGE) }
    }

    /// The region as one writable byte slice.
    #[inline(always)]
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_mut_ptr().cast::<u8>(), self.mem.len() * PAGE) }
    }

    /// A pool of `chunks` frames of `FRAME_SIZE` bytes.
    pub fn new(chunks: u32) -> Self {
        assert!(chunks > 0 && (chunks as usize) * FRAME_SIZE <= u32::MAX as usize, "pool size");
        let pages = (chunks as usize).div_ceil(CHUNKS_PER_PAGE);
        let mem = vec![Page([0; PAGE]); pages];
        let free = (0..chunks).rev().collect();
        FramePool { mem, free, chunks, leases: std::sync::Arc::new(()) }
    }

    /// Number of chunks in the pool.
    pub fn capacity(&self) -> u32 {
        self.chunks
    }

    /// Number of chunks not in use.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Takes a free chunk; the returned descriptor has length 0 and port 0.
    #[inline]
    pub fn alloc(&mut self) -> Option<FrameDesc> {
        let chunk = self.free.pop()?;
        Some(FrameDesc { addr: chunk * FRAME_SIZE as u32 + HEADROOM as u32, len: 0, port: 0 })
    }

    /// Returns a frame's chunk to the pool.
    #[inline]
    pub fn free(&mut self, desc: FrameDesc) {
        debug_assert!(desc.chunk() < self.chunks);
        debug_assert!(self.free.len() < self.chunks as usize, "double free");
        self.free.push(desc.chunk());
    }

    /// The frame's bytes.
    #[inline]
    pub fn frame(&self, desc: FrameDesc) -> &[u8] {
        let start = desc.addr as usize;
        &self.bytes()[start..start + desc.len as usize]
    }

    /// `N` bytes of the pool from byte address `addr` (a frame's address plus an offset into
    /// it), which may run past the end of that frame into stale bytes: for a fast path that
    /// reads a header whole before it knows the packet's length, and trusts the bytes only
    /// after checking the length fields. `None` past the end of the pool.
    #[inline(always)]
    pub fn peek<const N: usize>(&self, addr: usize) -> Option<&[u8; N]> {
        self.bytes().get(addr..addr.wrapping_add(N))?.first_chunk()
    }

    /// The frame's bytes, writable.
    #[inline]
    pub fn frame_mut(&mut self, desc: FrameDesc) -> &mut [u8] {
        let start = desc.addr as usize;
        &mut self.bytes_mut()[start..start + desc.len as usize]
    }

    /// The whole chunk `addr` lies in, writable (for ports that receive into it).
    #[inline]
    pub fn chunk_mut(&mut self, addr: u32) -> &mut [u8] {
        let base = addr as usize - addr as usize % FRAME_SIZE;
        &mut self.bytes_mut()[base..base + FRAME_SIZE]
    }

    /// A lease on the region, for whoever registers it with the kernel (see [`RegionLease`]).
    pub fn lease(&self) -> RegionLease {
        RegionLease(std::sync::Arc::clone(&self.leases))
    }

    /// Start and length of the region, page-aligned, for registering it with the kernel
    /// (an AF_XDP UMEM). The kernel may then write into chunks handed to it; the pool keeps
    /// no reference into a chunk while the kernel owns it.
    pub fn region(&mut self) -> (*mut u8, usize) {
        (self.mem.as_mut_ptr().cast::<u8>(), self.mem.len() * PAGE)
    }

    /// Copies `data` into the frame (as a NIC's DMA would) and sets its length.
    /// Data longer than the room left in the chunk is cut (a real NIC would drop it; callers
    /// check).
    #[inline]
    pub fn write(&mut self, desc: &mut FrameDesc, data: &[u8]) {
        let start = desc.addr as usize;
        // Never past the end of the frame's own chunk, wherever in it the frame starts.
        let room = FRAME_SIZE - start % FRAME_SIZE;
        let len = data.len().min(MAX_FRAME_LEN).min(room);
        self.bytes_mut()[start..start + len].copy_from_slice(&data[..len]);
        desc.len = len as u16;
    }

    /// Hints the CPU to load the first cache line of the frame.
    #[inline]
    pub fn prefetch(&self, desc: FrameDesc) {
        if let Some(byte) = self.bytes().get(desc.addr as usize) {
            crate::prefetch::prefetch_read(byte);
        }
    }

    /// Moves the start of the frame `n` bytes earlier into its headroom (to push a header).
    /// Returns false, changing nothing, if the headroom is too small.
    pub fn push_front(&mut self, desc: &mut FrameDesc, n: usize) -> bool {
        let offset_in_chunk = desc.addr as usize % FRAME_SIZE;
        if n > offset_in_chunk {
            return false;
        }
        desc.addr -= n as u32;
        desc.len += n as u16;
        true
    }

    /// Drops `n` bytes from the front of the frame (to pop a header).
    pub fn pull_front(&mut self, desc: &mut FrameDesc, n: usize) -> bool {
        if n > desc.len as usize {
            return false;
        }
        desc.addr += n as u32;
        desc.len -= n as u16;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_write_free_roundtrip() {
        let mut pool = FramePool::new(4);
        let mut d = pool.alloc().unwrap();
        pool.write(&mut d, &[1, 2, 3]);
        assert_eq!(pool.frame(d), &[1, 2, 3]);
        assert_eq!(pool.available(), 3);
        pool.free(d);
        assert_eq!(pool.available(), 4);
    }

    #[test]
    fn region_is_page_aligned_and_frames_stay_in_their_page() {
        let mut pool = FramePool::new(5);
        let (ptr, len) = pool.region();
        assert_eq!(ptr as usize % 4096, 0);
        assert_eq!(len, 3 * 4096);
        let mut descs: Vec<_> = (0..5).map(|_| pool.alloc().unwrap()).collect();
        for (i, d) in descs.iter_mut().enumerate() {
            pool.write(d, &[i as u8; MAX_FRAME_LEN]);
        }
        for (i, d) in descs.iter().enumerate() {
            assert!(pool.frame(*d).iter().all(|&b| b == i as u8));
            assert_eq!(pool.chunk_mut(d.addr).len(), FRAME_SIZE);
        }
    }

    #[test]
    fn exhaustion_returns_none() {
        let mut pool = FramePool::new(2);
        assert!(pool.alloc().is_some());
        assert!(pool.alloc().is_some());
        assert!(pool.alloc().is_none());
    }

    #[test]
    fn push_and_pull_front_stay_in_chunk() {
        let mut pool = FramePool::new(1);
        let mut d = pool.alloc().unwrap();
        pool.write(&mut d, &[9; 20]);
        assert!(pool.push_front(&mut d, 4));
        assert_eq!(d.len, 24);
        assert!(!pool.push_front(&mut d, HEADROOM));
        assert!(pool.pull_front(&mut d, 4));
        assert_eq!(pool.frame(d), &[9; 20]);
        assert!(!pool.pull_front(&mut d, 21));
        assert_eq!(d.chunk(), 0);
    }
}
