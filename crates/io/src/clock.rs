//! The raw system clocks, for protocols that name them (systemd's `MONOTONIC_USEC`, the
//! fast path's expiry times).

/// CLOCK_MONOTONIC in microseconds: what systemd compares a `RELOADING=1` notification's
/// `MONOTONIC_USEC` with (std's `Instant` reads the same clock but does not expose it).
pub fn monotonic_usec() -> u64 {
    monotonic_ns() / 1000
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of the kernel's `bpf_ktime_get_coarse_ns`,
/// which the fast path's entries expire by.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec to the valid pointer it is given; with
    // CLOCK_MONOTONIC it cannot fail on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic_usec_moves_forward() {
        let a = super::monotonic_usec();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = super::monotonic_usec();
        assert!(b >= a + 2000 && b < a + 2_000_000, "{a} -> {b}");
    }
}
