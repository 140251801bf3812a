//! Pinning a thread to a CPU, so that a benchmark's worker and a lab's generator do not
//! migrate onto each other's core (sched_setaffinity(2)).

use std::io;

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    pin_thread(0, cpu)
}

/// Pins thread `tid` (any thread of the system, a kernel thread too; 0: the caller) to `cpu`.
pub fn pin_thread(tid: u32, cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("cpu {cpu} out of range")));
    }
    // SAFETY: cpu_set_t is plain data, all-zero is the empty set; CPU_SET writes inside it
    // (cpu checked against CPU_SETSIZE above); sched_setaffinity reads `size_of` bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// The CPUs thread `tid` may run on.
pub fn thread_cpus(tid: u32) -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most `size_of` bytes into
    // it; CPU_ISSET reads inside it for every cpu below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// Sets thread `tid`'s CPUs back to `cpus` (as [`thread_cpus`] returned them).
pub fn set_thread_cpus(tid: u32, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: as in `pin_thread`; every cpu is checked against CPU_SETSIZE before CPU_SET.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Thread `tid`'s nice value (-20..=19).
pub fn thread_nice(tid: u32) -> io::Result<i32> {
    // SAFETY: getpriority has no memory arguments; -1 is a valid nice value, so errno is
    // cleared first and read after to tell it from an error.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        if nice == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(nice)
    }
}

/// Sets thread `tid`'s nice value.
pub fn set_thread_nice(tid: u32, nice: i32) -> io::Result<()> {
    // SAFETY: setpriority has no memory arguments.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
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
