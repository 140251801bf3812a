//! Software prefetch, used by the batched lookups to overlap the cache misses of a batch.
#![allow(unsafe_code)]

/// Hints the CPU to bring the cache line holding `*r` into L1. No-op off x86-64.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a pure hint that never faults and has no architectural effect;
    // SSE (which provides it) is part of the x86-64 baseline. The pointer comes from a live
    // reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
