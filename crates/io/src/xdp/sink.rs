//! A traffic sink that counts in the kernel: an XDP program that counts every frame reaching
//! an interface (packets and bytes, in a per-CPU array) and drops it. A receiver built on it
//! costs its CPU only the kernel's receive path up to XDP; no frame is copied to user space
//! and the reading process sleeps between reads. The lab's receiver uses it so that the
//! machine's second CPU, shared by the generator and the receiver, goes to the generator.
//!
//! Attached in generic (SKB) mode: on a veth, native XDP would run in the sending peer's
//! softirq, on the device under test's CPU.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::bpf;
use crate::sys;

/// BPF object name of the program (`lr_sink` in `bpf/tools.bpf.c`).
pub const SINK_PROG_NAME: &str = "lr_sink";

/// The kernel's number of possible CPUs: the per-CPU array holds one value for each
/// (`/sys/devices/system/cpu/possible`, e.g. `0-1`).
pub(super) fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let last = text.trim().rsplit([',', '-']).next().unwrap_or("0");
    last.parse::<usize>().map(|n| n + 1).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The counting program attached to an interface; detached when dropped.
pub struct CountingSink {
    map: OwnedFd,
    cpus: usize,
    _prog: OwnedFd,
    _link: OwnedFd,
}

impl CountingSink {
    /// Attaches the counting program to `ifname` (in this thread's network namespace).
    pub fn attach(ifname: &str) -> io::Result<CountingSink> {
        let ifindex = sys::ifindex(ifname).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no interface {ifname}"))
        })?;
        let (map, prog) = Self::load()?;
        let link = bpf::link_xdp(prog.as_raw_fd(), ifindex, sys::XDP_FLAGS_SKB_MODE)?;
        Ok(CountingSink { map, cpus: possible_cpus()?, _prog: prog, _link: link })
    }

    /// The map and the loaded program, not attached.
    fn load() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut obj = super::object::load_xdp(super::object::TOOLS, SINK_PROG_NAME, &[])?;
        Ok((obj.take_map("sink_count")?, obj.prog))
    }

    /// Packets and bytes counted since attaching, all CPUs together.
    pub fn counts(&self) -> io::Result<(u64, u64)> {
        read_counts(self.map.as_raw_fd(), self.cpus)
    }
}

fn read_counts(map: RawFd, cpus: usize) -> io::Result<(u64, u64)> {
    let [packets, bytes] = bpf::percpu_sums::<2>(map, cpus)?;
    Ok((packets, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The program loads, drops what it sees and counts it (BPF_PROG_TEST_RUN, no interface
    /// needed).
    #[test]
    fn counts_and_drops() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let (map, prog) = CountingSink::load().expect("sink loads");
        let frame = [0u8; 60];
        for _ in 0..3 {
            assert_eq!(bpf::test_run(prog.as_raw_fd(), &frame).unwrap(), 1, "XDP_DROP");
        }
        assert_eq!(read_counts(map.as_raw_fd(), possible_cpus().unwrap()).unwrap(), (3, 180));
    }

    #[test]
    fn possible_cpus_is_read() {
        assert!(possible_cpus().unwrap() >= 1);
    }
}
