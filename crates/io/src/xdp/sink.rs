//! A traffic sink that counts in the kernel: an XDP program that counts every frame reaching
//! an interface (packets and bytes, in a per-CPU array) and drops it. A receiver built on it
//! costs its CPU only the kernel's receive path up to XDP; no frame is copied to user space
//! and the reading process sleeps between reads. The lab's receiver uses it so that the
//! machine's second CPU, shared by the generator and the receiver, goes to the generator.
//!
//! Attached in generic (SKB) mode: on a veth, native XDP would run in the sending peer's
//! softirq, on the device under test's CPU. The kernel runs no generic XDP on an skb a
//! program redirected (`netif_receive_generic_xdp`: `skb_is_redirected`), as linerate's tc
//! fast path does: a tc program at the interface's ingress (tcx) counts those, in the same
//! map, where tcx is there (Linux 6.6).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::bpf;
use crate::sys;

/// BPF object name of the program (`lr_sink` in `bpf/tools.bpf.c`).
pub const SINK_PROG_NAME: &str = "lr_sink";
/// Its tc twin, for redirected skbs.
pub const SINK_TC_PROG_NAME: &str = "lr_sink_tc";

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
    _tc: Option<(OwnedFd, OwnedFd)>,
}

impl CountingSink {
    /// Attaches the counting program to `ifname` (in this thread's network namespace).
    pub fn attach(ifname: &str) -> io::Result<CountingSink> {
        let ifindex = sys::ifindex(ifname).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no interface {ifname}"))
        })?;
        let (map, prog, tc) = Self::load()?;
        let link = bpf::link_xdp(prog.as_raw_fd(), ifindex, sys::XDP_FLAGS_SKB_MODE)?;
        // Without tcx, redirected skbs go uncounted (linerate's tc fast path is not there either).
        let tc = tc
            .and_then(|p| bpf::link_tcx_ingress(p.as_raw_fd(), ifindex).ok().map(|link| (p, link)));
        Ok(CountingSink { map, cpus: possible_cpus()?, _prog: prog, _link: link, _tc: tc })
    }

    /// The map and the loaded programs (XDP, tc), not attached.
    fn load() -> io::Result<(OwnedFd, OwnedFd, Option<OwnedFd>)> {
        let mut obj = super::object::load_xdp_and_tc(
            super::object::TOOLS,
            SINK_PROG_NAME,
            Some(SINK_TC_PROG_NAME),
            &[],
        )?;
        Ok((obj.take_map("sink_count")?, obj.prog, obj.tc.take()))
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
        let (map, prog, tc) = CountingSink::load().expect("sink loads");
        assert!(tc.is_some(), "the tc sink loads");
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
