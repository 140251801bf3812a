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

use super::bpf::{self, Insn, MapCreateAttr, R0, R1, R2, R6, R7, R10};
use crate::sys;

/// BPF object name of the program.
pub const SINK_PROG_NAME: &str = "lr_sink";
const XDP_DROP: i32 = 1;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;

/// The counting program for the per-CPU array `map_fd` (one entry: packets, bytes):
///
/// ```text
///  0: r6 = *(u32 *)(r1 + 0)        ; ctx->data
///  1: r7 = *(u32 *)(r1 + 4)        ; ctx->data_end
///  2: r7 -= r6                     ; frame length
///  3: *(u32 *)(r10 - 4) = 0        ; key 0
///  4: r2 = r10
///  5: r2 += -4
///  6: r1 = map_fd ll
///  8: call bpf_map_lookup_elem
///  9: if r0 == 0 goto drop
/// 10: r1 = *(u64 *)(r0 + 0)
/// 11: r1 += 1
/// 12: *(u64 *)(r0 + 0) = r1        ; packets (this CPU's slot: no atomics)
/// 13: r1 = *(u64 *)(r0 + 8)
/// 14: r1 += r7
/// 15: *(u64 *)(r0 + 8) = r1        ; bytes
/// drop:
/// 16: r0 = XDP_DROP
/// 17: exit
/// ```
pub fn sink_program(map_fd: RawFd) -> Vec<Insn> {
    let mut p = vec![
        Insn::ldx_w(R6, R1, 0),
        Insn::ldx_w(R7, R1, 4),
        Insn::sub_reg(R7, R6),
        Insn::st_w(R10, -4, 0),
        Insn::mov_reg(R2, R10),
        Insn::add_imm(R2, -4),
    ];
    p.extend(Insn::ld_map_fd(R1, map_fd));
    p.extend([
        Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM),
        Insn::jeq_imm(R0, 0, 6), // -> 16
        Insn::ldx_dw(R1, R0, 0),
        Insn::add_imm(R1, 1),
        Insn::stx_dw(R0, R1, 0),
        Insn::ldx_dw(R1, R0, 8),
        Insn::add_reg(R1, R7),
        Insn::stx_dw(R0, R1, 8),
        Insn::mov_imm(R0, XDP_DROP),
        Insn::exit(),
    ]);
    p
}

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
        let ifindex = sys::ifindex(ifname).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no interface {ifname}")))?;
        let (map, prog) = Self::load()?;
        let link = bpf::link_xdp(prog.as_raw_fd(), ifindex, sys::XDP_FLAGS_SKB_MODE)?;
        Ok(CountingSink { map, cpus: possible_cpus()?, _prog: prog, _link: link })
    }

    /// The map and the loaded program, not attached.
    fn load() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut attr = MapCreateAttr {
            map_type: sys::BPF_MAP_TYPE_PERCPU_ARRAY,
            key_size: 4,
            value_size: 16,
            max_entries: 1,
            map_name: bpf::obj_name("lr_sink_count"),
            ..Default::default()
        };
        let map = sys::bpf_fd(sys::BPF_MAP_CREATE, &mut attr)?;
        let prog = bpf::load_xdp(&sink_program(map.as_raw_fd()), SINK_PROG_NAME)
            .map_err(|e| io::Error::new(e.source.kind(), format!("{}: {}", e.source, e.log.trim())))?;
        Ok((map, prog))
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

    #[test]
    fn program_shape() {
        let p = sink_program(9);
        assert_eq!(p.len(), 18);
        assert_eq!(9 + 1 + p[9].off() as usize, 16, "a failed lookup jumps to the drop");
        assert_eq!(p[6], Insn::ld_map_fd(R1, 9)[0]);
    }

    /// The program loads, drops what it sees and counts it (BPF_PROG_TEST_RUN, no interface
    /// needed).
    #[test]
    fn counts_and_drops() {
        if !crate::netdev::is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let (map, prog) = CountingSink::load().expect("sink loads");
        let frame = [0u8; 60];
        for _ in 0..3 {
            assert_eq!(bpf::test_run(prog.as_raw_fd(), &frame).unwrap(), XDP_DROP as u32);
        }
        assert_eq!(read_counts(map.as_raw_fd(), possible_cpus().unwrap()).unwrap(), (3, 180));
    }

    #[test]
    fn possible_cpus_is_read() {
        assert!(possible_cpus().unwrap() >= 1);
    }
}
