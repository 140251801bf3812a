//! Pinning a thread to a CPU, so that a benchmark's worker and a lab's generator do not
//! migrate onto each other's core (sched_setaffinity(2)).

use std::io;

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("cpu {cpu} out of range")));
    }
    // SAFETY: cpu_set_t is plain data, all-zero is the empty set; CPU_SET writes inside it
    // (cpu checked against CPU_SETSIZE above); sched_setaffinity reads `size_of` bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pin_to_cpu0_works_and_bad_cpu_fails() {
        std::thread::spawn(|| {
            super::pin_current_thread(0).unwrap();
            assert!(super::pin_current_thread(1 << 20).is_err());
        })
        .join()
        .unwrap();
    }
}
