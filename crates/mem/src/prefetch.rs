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
