//! Child processes that do not outlive the thread that started them.
//!
//! The lab starts `linerate run` in its namespaces with no end of its own: killed with
//! SIGKILL, the lab could not stop it, and it forwarded on in a namespace nobody could name
//! any more. The kernel's parent-death signal (prctl(2), `PR_SET_PDEATHSIG`) stops it then.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the child of `cmd` receive SIGTERM when the thread that spawns it ends, however it
/// ends (the kernel sends it; the setting survives `exec` of programs without set-user-ID or
/// file capabilities, such as `ip netns exec`). Spawn from a thread that lives as long as
/// the child should. The spawn fails if the parent is already gone.
pub fn stop_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id();
    let hook = move || {
        // SAFETY: runs in the forked child before exec; prctl and getppid are
        // async-signal-safe and take or return plain integers.
        let set = unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        if set != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::getppid() } as u32 != parent {
            return Err(io::Error::other("the parent exited before the child started"));
        }
        Ok(())
    };
    // SAFETY: the hook allocates nothing and calls only async-signal-safe functions, as
    // `pre_exec` requires of code that runs between fork and exec.
    unsafe { cmd.pre_exec(hook) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A `sleep 30` started from a thread that then ends is stopped within a second.
    #[test]
    fn a_child_stops_when_its_thread_ends() {
        let pid = std::thread::spawn(|| {
            stop_with_parent(Command::new("sleep").arg("30")).spawn().unwrap().id()
        })
        .join()
        .unwrap();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
        };
        let t0 = Instant::now();
        while alive() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "sleep {pid} outlived the thread that started it");
    }
}
