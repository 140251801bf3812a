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

const PAGE: usize = 4096;
const CHUNKS_PER_PAGE: usize = PAGE / FRAME_SIZE;

/// The pool's memory: page-aligned, zeroed, owned through a raw pointer. The kernel writes
/// into chunks it owns (an AF_XDP UMEM) while the worker reads others, so no reference ever
/// spans the whole region: each accessor makes a slice over one frame or chunk only (as
/// ixy.rs keeps per-buffer pointers). `FRAME_SIZE` divides `PAGE`, so no chunk straddles a page.
struct Region {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the region is plain bytes owned by its pool; shared access only reads, and writes
// go through `&mut`, exactly as for a `Vec<u8>`.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len, PAGE).expect("pool region layout")
    }

    /// `len` zeroed bytes (a multiple of `PAGE`, not zero), page-aligned.
    fn new(len: usize) -> Self {
        let layout = Self::layout(len);
        // SAFETY: `layout` has a non-zero size (callers ask for at least one page).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Region { ptr, len }
    }

    /// Panics unless `start..start + len` lies inside the region (as slice indexing would).
    #[inline(always)]
    fn check(&self, start: usize, len: usize) {
        if start > self.len || len > self.len - start {
            outside(start, len, self.len);
        }
    }

    #[inline(always)]
    fn slice(&self, start: usize, len: usize) -> &[u8] {
        self.check(start, len);
        // SAFETY: in bounds (checked).
        unsafe { self.slice_unchecked(start, len) }
    }

    /// # Safety
    /// `start..start + len` must lie inside the region.
    #[inline(always)]
    unsafe fn slice_unchecked(&self, start: usize, len: usize) -> &[u8] {
        // SAFETY: in bounds (the caller's contract), initialised (zeroed at allocation); the
        // pool hands a chunk to the kernel only while no descriptor of it is held, so nothing
        // writes these bytes while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) }
    }

    #[inline(always)]
    fn slice_mut(&mut self, start: usize, len: usize) -> &mut [u8] {
        self.check(start, len);
        // SAFETY: as in `slice`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), len) }
    }
}

#[cold]
#[inline(never)]
fn outside(start: usize, len: usize, region: usize) -> ! {
    panic!("frame {start}+{len} outside the pool ({region} bytes)")
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout and not freed before.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// A pool of frame chunks with a LIFO free list (recently freed chunks are still in cache).
pub struct FramePool {
    mem: std::mem::ManuallyDrop<Region>,
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
        if std::sync::Arc::strong_count(&self.leases) == 1 {
            // SAFETY: dropped once, here; `mem` is not used afterwards.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.mem) }
        }
    }
}

impl FramePool {
    /// A pool of `chunks` frames of `FRAME_SIZE` bytes.
    pub fn new(chunks: u32) -> Self {
        assert!(chunks > 0 && (chunks as usize) * FRAME_SIZE <= u32::MAX as usize, "pool size");
        let pages = (chunks as usize).div_ceil(CHUNKS_PER_PAGE);
        let mem = std::mem::ManuallyDrop::new(Region::new(pages * PAGE));
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
        self.mem.slice(desc.addr as usize, desc.len as usize)
    }

    /// `N` bytes of the pool from byte address `addr` (a frame's address plus an offset into
    /// it), which may run past the end of that frame into stale bytes of its chunk: for a fast
    /// path that reads a header whole before it knows the packet's length, and trusts the
    /// bytes only after checking the length fields. `None` past the end of the chunk (the next
    /// chunk may belong to the kernel).
    #[inline(always)]
    pub fn peek<const N: usize>(&self, addr: usize) -> Option<&[u8; N]> {
        let room = FRAME_SIZE - addr % FRAME_SIZE;
        if N > room || addr >= self.mem.len {
            return None;
        }
        // SAFETY: `addr` is inside the region, whose length is a multiple of `FRAME_SIZE`, so
        // the `N <= room` bytes up to the end of its chunk are too.
        unsafe { self.mem.slice_unchecked(addr, N) }.first_chunk()
    }

    /// The frame's bytes, writable.
    #[inline]
    pub fn frame_mut(&mut self, desc: FrameDesc) -> &mut [u8] {
        self.mem.slice_mut(desc.addr as usize, desc.len as usize)
    }

    /// The whole chunk `addr` lies in, writable (for ports that receive into it).
    #[inline]
    pub fn chunk_mut(&mut self, addr: u32) -> &mut [u8] {
        let base = addr as usize - addr as usize % FRAME_SIZE;
        self.mem.slice_mut(base, FRAME_SIZE)
    }

    /// A lease on the region, for whoever registers it with the kernel (see [`RegionLease`]).
    pub fn lease(&self) -> RegionLease {
        RegionLease(std::sync::Arc::clone(&self.leases))
    }

    /// Start and length of the region, page-aligned, for registering it with the kernel
    /// (an AF_XDP UMEM). The kernel may then write into chunks handed to it; the pool keeps
    /// no reference into a chunk while the kernel owns it.
    pub fn region(&mut self) -> (*mut u8, usize) {
        (self.mem.ptr.as_ptr(), self.mem.len)
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
        self.mem.slice_mut(start, len).copy_from_slice(&data[..len]);
        desc.len = len as u16;
    }

    /// Hints the CPU to load the first cache line of the frame.
    #[inline]
    pub fn prefetch(&self, desc: FrameDesc) {
        if (desc.addr as usize) < self.mem.len {
            ::mem::prefetch::prefetch_read(&self.mem.slice(desc.addr as usize, 1)[0]);
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
    fn peek_stays_inside_the_chunk() {
        let mut pool = FramePool::new(2);
        let mut d = pool.alloc().unwrap();
        pool.write(&mut d, &[7; 28]);
        assert_eq!(pool.peek::<28>(d.addr as usize), Some(&[7; 28]));
        assert!(pool.peek::<28>(FRAME_SIZE - 27).is_none(), "would cross into the next chunk");
        assert!(pool.peek::<1>(2 * FRAME_SIZE).is_none(), "past the pool");
        assert!(pool.peek::<1>(usize::MAX).is_none());
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
