//! Zero-initialised arrays backed by transparent huge pages.
//!
//! tbl24 alone is 64 MiB: with 4 KiB pages a random lookup would miss the TLB almost every
//! time (16384 pages), turning one cache miss into a page walk plus a miss. Mapping the
//! arrays 2 MiB-aligned and advising `MADV_HUGEPAGE` (the host runs THP in `madvise` mode)
//! lets the kernel back them with 2 MiB pages: 32 TLB entries cover tbl24. This is the only
//! module besides `prefetch` that contains `unsafe` code in this crate.
#![allow(unsafe_code)]

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64};

const HUGE_PAGE: usize = 2 << 20;

mod sealed {
    pub trait Sealed {}
}

/// Element types for which the all-zero bit pattern is a valid value.
pub trait Zeroable: sealed::Sealed + Sized {}

macro_rules! zeroable {
    ($($t:ty),*) => {$(impl sealed::Sealed for $t {} impl Zeroable for $t {})*};
}
zeroable!(u8, u32, u64, AtomicU8, AtomicU32, AtomicU64);

/// Advises `MADV_HUGEPAGE` for the whole 2 MiB pages inside `buf`: memory allocated elsewhere
/// (a large `Vec`'s spare capacity, not yet written, so that its pages are faulted in as huge
/// pages). Advice only: a failure (THP disabled) is harmless and ignored.
pub fn advise_huge<T>(buf: &[T]) {
    let start = (buf.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
    let end = (buf.as_ptr() as usize + size_of_val(buf)) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        #[cfg(target_os = "linux")]
        // SAFETY: advice on whole pages inside memory that `buf` borrows; MADV_HUGEPAGE
        // changes no contents and no mapping, only how later faults are served.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// A fixed-size, zero-initialised array in its own 2 MiB-aligned anonymous mapping.
///
/// Pages are committed on first write, so reserving a large pool is cheap.
pub struct HugeArray<T: Zeroable> {
    ptr: NonNull<T>,
    len: usize,
    map_len: usize,
}

// SAFETY: the mapping is owned exclusively by this value (like a `Box<[T]>`), so sending it
// or sharing `&HugeArray<T>` is exactly as safe as sending or sharing `[T]`.
unsafe impl<T: Zeroable + Send> Send for HugeArray<T> {}
// SAFETY: see `Send`; shared access only yields `&[T]`.
unsafe impl<T: Zeroable + Sync> Sync for HugeArray<T> {}

impl<T: Zeroable> HugeArray<T> {
    /// Maps `len` zeroed elements. Fails only if the kernel refuses the mapping.
    pub fn zeroed(len: usize) -> std::io::Result<Self> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        let map_len = bytes.max(1).next_multiple_of(HUGE_PAGE);
        // Over-reserve one huge page so that an aligned start exists inside the mapping.
        let reserve = map_len + HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping at a kernel-chosen address aliases no
        // existing Rust object; the result is checked against MAP_FAILED.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserve,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE);
        let head = aligned - start;
        let tail = reserve - head - map_len;
        // SAFETY: both ranges lie inside the mapping created above, page-aligned (mmap returns
        // page-aligned addresses, HUGE_PAGE is a page multiple) and nothing refers to them.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + map_len) as *mut libc::c_void, tail);
            }
        }
        #[cfg(target_os = "linux")]
        // SAFETY: pure advice on a range we own; failure (THP disabled) is harmless and ignored.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, map_len, libc::MADV_HUGEPAGE);
        }
        let ptr = NonNull::new(aligned as *mut T).expect("mmap returned null");
        Ok(HugeArray { ptr, len, map_len })
    }

    /// Bytes of address space mapped (committed only as pages are written).
    pub fn mapped_bytes(&self) -> usize {
        self.map_len
    }
}

impl<T: Zeroable> Deref for HugeArray<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is valid for `len` elements until Drop, 2 MiB-aligned (enough for any
        // T here), and zero-filled by the kernel, which `Zeroable` guarantees is a valid T.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> DerefMut for HugeArray<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`; `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Drop for HugeArray<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the aligned range kept in `zeroed`; no borrow outlives self.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.map_len);
        }
    }
}

impl<T: Zeroable> std::fmt::Debug for HugeArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeArray").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn zeroed_aligned_writable() {
        let mut a = HugeArray::<AtomicU32>::zeroed(3 << 20).unwrap();
        assert_eq!(a.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(a.iter().step_by(4099).all(|x| x.load(Relaxed) == 0));
        a[12345].store(7, Relaxed);
        assert_eq!(a[12345].load(Relaxed), 7);
        let b = HugeArray::<u8>::zeroed(1).unwrap();
        assert_eq!(&b[..], &[0]);
        a[0] = AtomicU32::new(1);
        assert_eq!(a[0].load(Relaxed), 1);
    }
}
