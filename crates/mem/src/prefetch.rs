//! A cache prefetch hint, the one piece of `unsafe` the fast path needs outside the rings.
#![allow(unsafe_code)]

/// Asks the CPU to start loading the cache line holding `*target`. Never faults, has no effect
/// on program semantics.
#[inline(always)]
pub fn prefetch_read<T>(target: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint that cannot fault, even on an invalid address; here the
    // address comes from a live reference. SSE is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (target as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = target;
}

/// [`prefetch_read`] of a line read once, soon (a lookup a batch ahead in a table far larger
/// than the caches): a non-temporal hint, which on x86 loads the line close to the core
/// without making it displace the lines the rest of the batch's work reuses from the
/// mid-level cache (the routing table's, the state table's).
#[inline(always)]
pub fn prefetch_read_once<T>(target: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `prefetch_read`: a hint that cannot fault, on a live reference's address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_NTA }>(
            (target as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = target;
}
