//! Raw eBPF: instructions (for the programs still assembled here: the live generator's and
//! the tc program that drops the kernel's copies), the `bpf()` calls linerate makes itself on
//! maps and programs, and their attachment as bpf_links. The XDP programs that steer, forward,
//! count and pass are C (`crates/io/bpf/`), loaded by aya ([`super::object`]).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys;

/// BPF object name of the steering program of linerate before the fast path (a crashed older
/// linerate may have left it attached).
pub const PROG_NAME: &str = "lr_xsk";
/// Name of the pass-everything program that gives a veth its NAPI (`xdp::attach_pass`).
pub const PASS_PROG_NAME: &str = "lr_pass";
/// Names of XDP programs linerate may have left attached; these are replaced without asking.
pub const OWN_PROG_NAMES: &[&str] = &[PROG_NAME, PASS_PROG_NAME, super::fastpath::PROG_NAME];
/// Entries of the XSKMAP: the highest queue index a socket can bind to, plus one.
pub const MAX_QUEUES: u32 = 256;

pub const XDP_PASS: i32 = 2;
pub const XDP_DROP: i32 = 1;
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high nibble.
    regs: u8,
    off: i16,
    imm: i32,
}

/// Registers.
pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
/// The read-only frame pointer (the program's 512-byte stack ends there).
pub const R10: u8 = 10;

// Opcode classes/fields from linux/bpf_common.h and linux/bpf.h.
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const W: u8 = 0x00;
const H: u8 = 0x08;
const B: u8 = 0x10;
const DW: u8 = 0x18;
const IMM: u8 = 0x00;
const ABS: u8 = 0x20;
const IND: u8 = 0x40;
const MEM: u8 = 0x60;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const SUB: u8 = 0x10;
const LSH: u8 = 0x60;
const RSH: u8 = 0x70;
const AND: u8 = 0x50;
const XOR: u8 = 0xa0;
const MOV: u8 = 0xb0;
const END: u8 = 0xd0;
const TO_BE: u8 = 0x08;
const JA: u8 = 0x00;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const JSET: u8 = 0x40;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Insn { code, regs: (src << 4) | (dst & 0x0f), off, imm }
    }
    /// dst = *(u32 *)(src + off)
    pub const fn ldx_w(dst: u8, src: u8, off: i16) -> Self {
        Self::new(LDX | MEM | W, dst, src, off, 0)
    }
    /// dst = *(u64 *)(src + off)
    pub const fn ldx_dw(dst: u8, src: u8, off: i16) -> Self {
        Self::new(LDX | MEM | DW, dst, src, off, 0)
    }
    /// *(u64 *)(dst + off) = src
    pub const fn stx_dw(dst: u8, src: u8, off: i16) -> Self {
        Self::new(STX | MEM | DW, dst, src, off, 0)
    }
    /// *(u32 *)(dst + off) = src
    pub const fn stx_w(dst: u8, src: u8, off: i16) -> Self {
        Self::new(STX | MEM | W, dst, src, off, 0)
    }
    /// *(u16 *)(dst + off) = src
    pub const fn stx_h(dst: u8, src: u8, off: i16) -> Self {
        Self::new(STX | MEM | H, dst, src, off, 0)
    }
    /// *(u32 *)(dst + off) = imm
    pub const fn st_w(dst: u8, off: i16, imm: i32) -> Self {
        Self::new(ST | MEM | W, dst, 0, off, imm)
    }
    /// dst += src (64-bit)
    pub const fn add_reg(dst: u8, src: u8) -> Self {
        Self::new(ALU64 | ADD | X, dst, src, 0, 0)
    }
    /// dst -= src (64-bit)
    pub const fn sub_reg(dst: u8, src: u8) -> Self {
        Self::new(ALU64 | SUB | X, dst, src, 0, 0)
    }
    /// dst = *(u16 *)(src + off)
    pub const fn ldx_h(dst: u8, src: u8, off: i16) -> Self {
        Self::new(LDX | MEM | H, dst, src, off, 0)
    }
    /// dst = src (64-bit)
    pub const fn mov_reg(dst: u8, src: u8) -> Self {
        Self::new(ALU64 | MOV | X, dst, src, 0, 0)
    }
    /// dst = imm (64-bit)
    pub const fn mov_imm(dst: u8, imm: i32) -> Self {
        Self::new(ALU64 | MOV | K, dst, 0, 0, imm)
    }
    /// dst += imm (64-bit)
    pub const fn add_imm(dst: u8, imm: i32) -> Self {
        Self::new(ALU64 | ADD | K, dst, 0, 0, imm)
    }
    /// dst = htobe16(dst): network byte order to a number, on any host.
    pub const fn be16(dst: u8) -> Self {
        Self::new(ALU | END | TO_BE, dst, 0, 0, 16)
    }
    /// if dst > src goto +off
    pub const fn jgt_reg(dst: u8, src: u8, off: i16) -> Self {
        Self::new(JMP | JGT | X, dst, src, off, 0)
    }
    /// if dst == imm goto +off
    pub const fn jeq_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(JMP | JEQ | K, dst, 0, off, imm)
    }
    /// dst = map (by fd); two instruction slots.
    pub const fn ld_map_fd(dst: u8, fd: i32) -> [Self; 2] {
        [Self::new(LD | DW | IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd), Self::new(0, 0, 0, 0, 0)]
    }
    /// call helper
    pub const fn call(helper: i32) -> Self {
        Self::new(JMP | CALL, 0, 0, 0, helper)
    }
    pub const fn exit() -> Self {
        Self::new(JMP | EXIT, 0, 0, 0, 0)
    }
    /// r0 = packet byte at `off` (legacy packet access of socket filters; needs r6 = ctx; an
    /// access beyond the packet ends the program with 0).
    pub const fn ld_abs_b(off: i32) -> Self {
        Self::new(LD | ABS | B, 0, 0, 0, off)
    }
    /// r0 = big-endian u16 at packet offset `off`.
    pub const fn ld_abs_h(off: i32) -> Self {
        Self::new(LD | ABS | H, 0, 0, 0, off)
    }
    /// r0 = packet byte at `src + off`.
    pub const fn ld_ind_b(src: u8, off: i32) -> Self {
        Self::new(LD | IND | B, 0, src, 0, off)
    }
    /// r0 = big-endian u16 at packet offset `src + off`.
    pub const fn ld_ind_h(src: u8, off: i32) -> Self {
        Self::new(LD | IND | H, 0, src, 0, off)
    }
    /// if dst > imm goto +off (unsigned)
    pub const fn jgt_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(JMP | JGT | K, dst, 0, off, imm)
    }
    /// dst &= imm (32-bit)
    pub const fn and32_imm(dst: u8, imm: i32) -> Self {
        Self::new(ALU | AND | K, dst, 0, 0, imm)
    }
    /// dst <<= imm (32-bit)
    pub const fn lsh32_imm(dst: u8, imm: i32) -> Self {
        Self::new(ALU | LSH | K, dst, 0, 0, imm)
    }
    /// dst >>= imm (32-bit, logical)
    pub const fn rsh32_imm(dst: u8, imm: i32) -> Self {
        Self::new(ALU | RSH | K, dst, 0, 0, imm)
    }
    /// dst ^= imm (32-bit)
    pub const fn xor32_imm(dst: u8, imm: i32) -> Self {
        Self::new(ALU | XOR | K, dst, 0, 0, imm)
    }
    /// dst = src (32-bit)
    pub const fn mov32_reg(dst: u8, src: u8) -> Self {
        Self::new(ALU | MOV | X, dst, src, 0, 0)
    }
    /// dst = imm (32-bit)
    pub const fn mov32_imm(dst: u8, imm: i32) -> Self {
        Self::new(ALU | MOV | K, dst, 0, 0, imm)
    }
    /// if dst & imm goto +off
    pub const fn jset_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(JMP | JSET | K, dst, 0, off, imm)
    }
    /// if dst != imm goto +off
    pub const fn jne_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(JMP | JNE | K, dst, 0, off, imm)
    }
    /// goto +off
    pub const fn ja(off: i16) -> Self {
        Self::new(JMP | JA, 0, 0, off, 0)
    }
    /// The opcode (for tests).
    pub const fn code(&self) -> u8 {
        self.code
    }
    /// The jump offset field (for tests and for patching forward jumps).
    pub const fn off(&self) -> i16 {
        self.off
    }
    /// Sets the jump offset (forward jumps are patched once their target is known).
    pub fn set_off(&mut self, off: i16) {
        self.off = off;
    }
}

/// Forward jumps to one place of a program being assembled, whose position is known only
/// once the code before it is: [`jump`](Self::jump) emits a jump there (its offset is set
/// later), [`land`](Self::land) makes the current end of the program that place.
#[derive(Default)]
pub(crate) struct Fixups(Vec<usize>);

impl Fixups {
    pub(crate) fn jump(&mut self, p: &mut Vec<Insn>, insn: Insn) {
        self.0.push(p.len());
        p.push(insn);
    }
    pub(crate) fn land(self, p: &mut [Insn]) {
        let target = p.len();
        for at in self.0 {
            p[at].set_off((target - at - 1) as i16);
        }
    }
}

/// Entry 0 of per-CPU array `map` (a value of `N` u64 counters, on each of `cpus` CPUs),
/// summed over the CPUs counter by counter.
pub fn percpu_sums<const N: usize>(map: RawFd, cpus: usize) -> io::Result<[u64; N]> {
    percpu_values(map, 0, cpus)
}

/// Entry `key` of per-CPU array `map` (a value of `N` u64 counters, on each of `cpus` CPUs),
/// summed over the CPUs counter by counter.
pub fn percpu_values<const N: usize>(map: RawFd, key: u32, cpus: usize) -> io::Result<[u64; N]> {
    let mut values = vec![[0u64; N]; cpus];
    let mut attr = MapElemAttr {
        map_fd: map as u32,
        key: &key as *const u32 as u64,
        value: values.as_mut_ptr() as u64,
        ..Default::default()
    };
    sys::bpf(sys::BPF_MAP_LOOKUP_ELEM, &mut attr)?;
    Ok(values.iter().fold([0; N], |mut sum, v| {
        sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
        sum
    }))
}

/// Test helper: every jump of `p` lands forward, inside the program (JMP and JMP32 classes,
/// calls and exits aside).
#[cfg(test)]
pub(crate) fn assert_jumps_land_inside(p: &[Insn]) {
    for (i, insn) in p.iter().enumerate() {
        let code = insn.code();
        let is_jump = matches!(code & 0x07, 0x05 | 0x06) && !matches!(code & 0xf0, 0x80 | 0x90);
        if is_jump {
            let target = i as i64 + 1 + i64::from(insn.off());
            assert!(target > i as i64 && (target as usize) < p.len(), "insn {i} jumps to {target}");
        }
    }
}

pub(super) fn obj_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = name.len().min(15);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

#[repr(C)]
#[derive(Default)]
pub(super) struct MapCreateAttr {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub inner_map_fd: u32,
    pub numa_node: u32,
    pub map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
pub(super) struct MapElemAttr {
    pub map_fd: u32,
    pub _pad: u32,
    pub key: u64,
    pub value: u64,
    pub flags: u64,
}

/// `BPF_MAP_UPDATE_ELEM` of `key` to `value` in `map`, whose key and value sizes must be
/// `K`'s and `V`'s.
pub fn map_update<K: Copy, V: Copy>(map: RawFd, key: &K, value: &V) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map as u32,
        key: key as *const K as u64,
        value: value as *const V as u64,
        ..Default::default()
    };
    sys::bpf(sys::BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Points XSKMAP entry `queue` at socket `sock`.
pub fn xskmap_set(map: RawFd, queue: u32, sock: RawFd) -> io::Result<()> {
    let value = sock as u32;
    let mut attr = MapElemAttr {
        map_fd: map as u32,
        key: &queue as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..Default::default()
    };
    sys::bpf(sys::BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// A program the verifier refused, with its log.
#[derive(Debug)]
pub struct LoadError {
    pub source: io::Error,
    pub log: String,
}

/// Loads `insns` as an XDP program named `name`. On failure, loads again with the verifier
/// log enabled and returns it.
pub fn load_xdp(insns: &[Insn], name: &str) -> Result<OwnedFd, LoadError> {
    load(sys::BPF_PROG_TYPE_XDP, sys::BPF_XDP, insns, name)
}

/// Loads `insns` as a socket filter (also the program type of an AF_PACKET fanout program).
pub fn load_socket_filter(insns: &[Insn], name: &str) -> Result<OwnedFd, LoadError> {
    load(sys::BPF_PROG_TYPE_SOCKET_FILTER, 0, insns, name)
}

fn load(prog_type: u32, attach: u32, insns: &[Insn], name: &str) -> Result<OwnedFd, LoadError> {
    let license = CString::new("Dual MIT/GPL").expect("no NUL");
    let attempt = |log: &mut [u8], level: u32| {
        let mut attr = ProgLoadAttr {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: level,
            log_size: log.len() as u32,
            log_buf: if level > 0 { log.as_mut_ptr() as u64 } else { 0 },
            prog_name: obj_name(name),
            expected_attach_type: attach,
            ..Default::default()
        };
        if level == 0 {
            attr.log_size = 0;
        }
        sys::bpf_fd(sys::BPF_PROG_LOAD, &mut attr)
    };
    match attempt(&mut [], 0) {
        Ok(fd) => Ok(fd),
        Err(source) => {
            let mut log = vec![0u8; 64 * 1024];
            let _ = attempt(&mut log, 1);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err(LoadError {
                source,
                log: String::from_utf8_lossy(&log[..end]).trim_end().to_string(),
            })
        }
    }
}

/// The `test` member of `union bpf_attr` (BPF_PROG_RUN).
#[repr(C)]
#[derive(Default)]
pub(super) struct TestRunAttr {
    pub prog_fd: u32,
    pub retval: u32,
    pub data_size_in: u32,
    pub data_size_out: u32,
    pub data_in: u64,
    pub data_out: u64,
    pub repeat: u32,
    pub duration: u32,
    pub ctx_size_in: u32,
    pub ctx_size_out: u32,
    pub ctx_in: u64,
    pub ctx_out: u64,
    pub flags: u32,
    pub cpu: u32,
    pub batch_size: u32,
    pub _pad: u32,
}

/// Runs program `prog` once on `data` (BPF_PROG_TEST_RUN; for a socket filter, `data` is an
/// Ethernet frame) and returns what it returned.
pub fn test_run(prog: RawFd, data: &[u8]) -> io::Result<u32> {
    let mut attr = TestRunAttr {
        prog_fd: prog as u32,
        data_size_in: data.len() as u32,
        data_in: data.as_ptr() as u64,
        repeat: 1,
        ..Default::default()
    };
    sys::bpf(sys::BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(attr.retval)
}

/// What [`test_run_xdp`] saw: the program's verdict, the frame as it left it, and the
/// average time of a run in nanoseconds.
#[derive(Debug)]
pub struct XdpRun {
    pub action: u32,
    pub frame: Vec<u8>,
    pub ns_per_run: u32,
}

/// Runs XDP program `prog` `repeat` times on `data` as if it had arrived on queue 0 of
/// `ifindex` (BPF_PROG_TEST_RUN, no frame sent anywhere).
pub fn test_run_xdp(prog: RawFd, data: &[u8], ifindex: u32, repeat: u32) -> io::Result<XdpRun> {
    run_xdp(prog, data, 0, ifindex, repeat, data.len() + 256)
}

/// BPF_PROG_TEST_RUN of an XDP program: `meta` bytes of metadata before the frame, `room`
/// bytes for what the program leaves.
fn run_xdp(
    prog: RawFd,
    data: &[u8],
    meta: u32,
    ifindex: u32,
    repeat: u32,
    room: usize,
) -> io::Result<XdpRun> {
    let ctx = XdpMd {
        data: meta,
        data_end: data.len() as u32,
        ingress_ifindex: ifindex,
        ..Default::default()
    };
    let mut out = vec![0u8; room];
    let mut attr = TestRunAttr {
        prog_fd: prog as u32,
        data_size_in: data.len() as u32,
        data_in: data.as_ptr() as u64,
        data_size_out: out.len() as u32,
        data_out: out.as_mut_ptr() as u64,
        repeat,
        ctx_size_in: size_of::<XdpMd>() as u32,
        ctx_in: &ctx as *const XdpMd as u64,
        ..Default::default()
    };
    sys::bpf(sys::BPF_PROG_TEST_RUN, &mut attr)?;
    out.truncate(attr.data_size_out as usize);
    Ok(XdpRun { action: attr.retval, frame: out, ns_per_run: attr.duration })
}

/// `struct xdp_md`, the context of an XDP program as BPF_PROG_RUN takes it.
#[repr(C)]
#[derive(Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// Runs XDP program `prog` `repeat` times in live-frames mode (Linux 5.18; kernel doc
/// `bpf/bpf_prog_run.rst`): each run gets a frame made from `data` (a fresh copy only when
/// the kernel's page pool hands out a new page), whose first `meta` bytes are metadata as in
/// [`test_run_frame`], and the frames it returns XDP_TX for leave through `ifindex`, `batch`
/// at a time (1..=256; the kernel's default when 0). Runs on the calling CPU.
pub fn run_live(
    prog: RawFd,
    data: &[u8],
    meta: u32,
    ifindex: u32,
    repeat: u32,
    batch: u32,
) -> io::Result<()> {
    let ctx = XdpMd {
        data: meta,
        data_end: data.len() as u32,
        ingress_ifindex: ifindex,
        ..Default::default()
    };
    let mut attr = TestRunAttr {
        prog_fd: prog as u32,
        data_size_in: data.len() as u32,
        data_in: data.as_ptr() as u64,
        repeat,
        ctx_size_in: size_of::<XdpMd>() as u32,
        ctx_in: &ctx as *const XdpMd as u64,
        flags: sys::BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size: batch,
        ..Default::default()
    };
    sys::bpf(sys::BPF_PROG_TEST_RUN, &mut attr).map(drop)
}

/// Like [`test_run`] for an XDP program, whose first `meta` bytes of `data` are metadata
/// (before the frame, 0..=32, a multiple of 4), and also returns the data as the program
/// left it, metadata included (it may rewrite, grow or shrink the frame); `room` is the most
/// bytes it may have.
pub fn test_run_frame(
    prog: RawFd,
    data: &[u8],
    meta: u32,
    room: usize,
) -> io::Result<(u32, Vec<u8>)> {
    run_xdp(prog, data, meta, 0, 1, room).map(|r| (r.action, r.frame))
}

#[repr(C)]
#[derive(Default)]
struct MapBatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Reads every entry of hash map `map` (keys `K`, values `V`: the map's own sizes) in
/// BPF_MAP_LOOKUP_BATCH calls of `chunk` entries (Linux 5.6), handing each to `each`. Entries
/// written or removed meanwhile may or may not be seen.
pub fn hash_for_each<K: Copy + Default, V: Copy + Default>(
    map: RawFd,
    chunk: usize,
    mut each: impl FnMut(&K, &V),
) -> io::Result<()> {
    let chunk = chunk.max(1);
    let mut keys = vec![K::default(); chunk];
    let mut values = vec![V::default(); chunk];
    // The kernel's position in the table (a bucket index for a hash map), at least a key.
    let mut position = vec![0u64; size_of::<K>().div_ceil(8).max(1)];
    let mut first = true;
    loop {
        let mut attr = MapBatchAttr {
            in_batch: if first { 0 } else { position.as_ptr() as u64 },
            out_batch: position.as_mut_ptr() as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: map as u32,
            ..Default::default()
        };
        let done = match sys::bpf(sys::BPF_MAP_LOOKUP_BATCH, &mut attr) {
            Ok(_) => false,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
            Err(e) => return Err(e),
        };
        let n = (attr.count as usize).min(chunk);
        for (k, v) in keys[..n].iter().zip(&values[..n]) {
            each(k, v);
        }
        if done {
            return Ok(());
        }
        first = false;
    }
}

/// Creates an array map (`BPF_MAP_TYPE_ARRAY`) of `entries` values of `value_size` bytes.
pub fn create_array(name: &str, value_size: u32, entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: sys::BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size,
        max_entries: entries,
        map_name: obj_name(name),
        ..Default::default()
    };
    sys::bpf_fd(sys::BPF_MAP_CREATE, &mut attr)
}

/// Writes `values` (whole values of the map's value size, back to back) into array map
/// `map` from index 0 on, in one BPF_MAP_UPDATE_BATCH (Linux 5.6).
pub fn array_fill(map: RawFd, value_size: usize, values: &[u8]) -> io::Result<()> {
    if value_size == 0 || !values.len().is_multiple_of(value_size) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "values are not whole map values"));
    }
    let keys: Vec<u32> = (0..(values.len() / value_size) as u32).collect();
    let mut attr = MapBatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: keys.len() as u32,
        map_fd: map as u32,
        ..Default::default()
    };
    sys::bpf(sys::BPF_MAP_UPDATE_BATCH, &mut attr)?;
    if attr.count as usize != keys.len() {
        return Err(io::Error::other(format!(
            "map update wrote {} of {} values",
            attr.count,
            keys.len()
        )));
    }
    Ok(())
}

/// Reads entry `index` of array map `map` into `value`, which must be the map's value size.
pub fn array_get(map: RawFd, index: u32, value: &mut [u8]) -> io::Result<()> {
    let mut info = MapInfo::default();
    let mut attr = InfoAttr {
        bpf_fd: map as u32,
        info_len: size_of::<MapInfo>() as u32,
        info: &mut info as *mut _ as u64,
    };
    sys::bpf(sys::BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    if info.value_size as usize != value.len() || info.key_size != 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("map values are {} bytes, not {}", info.value_size, value.len()),
        ));
    }
    let mut attr = MapElemAttr {
        map_fd: map as u32,
        key: &index as *const u32 as u64,
        value: value.as_mut_ptr() as u64,
        ..Default::default()
    };
    sys::bpf(sys::BPF_MAP_LOOKUP_ELEM, &mut attr).map(drop)
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Attaches XDP program `prog` to `ifindex` as a bpf_link in mode `flags`
/// (`XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE`). Closing the link fd detaches it.
pub fn link_xdp(prog: RawFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog as u32,
        target_ifindex: ifindex,
        attach_type: sys::BPF_XDP,
        flags,
    };
    sys::bpf_fd(sys::BPF_LINK_CREATE, &mut attr)
}

/// Attaches tc program `prog` to the ingress of `ifindex` as a tcx bpf_link (Linux 6.6,
/// `BPF_TCX_INGRESS`), after any program already there. Closing the link fd detaches it.
pub fn link_tcx_ingress(prog: RawFd, ifindex: u32) -> io::Result<OwnedFd> {
    link_tcx(prog, ifindex, 0)
}

/// linux/bpf.h: attach before the relative program, or, with none given, first.
const BPF_F_BEFORE: u32 = 1 << 3;

/// As [`link_tcx_ingress`], but first in the chain, before any program already there.
pub fn link_tcx_ingress_first(prog: RawFd, ifindex: u32) -> io::Result<OwnedFd> {
    link_tcx(prog, ifindex, BPF_F_BEFORE)
}

fn link_tcx(prog: RawFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog as u32,
        target_ifindex: ifindex,
        attach_type: sys::BPF_TCX_INGRESS,
        flags,
    };
    sys::bpf_fd(sys::BPF_LINK_CREATE, &mut attr)
}

#[repr(C)]
#[derive(Default)]
struct GetFdByIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// Leading fields of `struct bpf_prog_info`, up to the name.
#[repr(C)]
#[derive(Default)]
struct ProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; 16],
}

/// Leading fields of `struct bpf_map_info`.
#[repr(C)]
#[derive(Default)]
struct MapInfo {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

/// The BPF object name of program `id`.
pub fn prog_name(id: u32) -> io::Result<String> {
    let mut attr = GetFdByIdAttr { id, ..Default::default() };
    let fd = sys::bpf_fd(sys::BPF_PROG_GET_FD_BY_ID, &mut attr)?;
    let mut info = ProgInfo::default();
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: size_of::<ProgInfo>() as u32,
        info: &mut info as *mut _ as u64,
    };
    sys::bpf(sys::BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let end = info.name.iter().position(|&b| b == 0).unwrap_or(16);
    Ok(String::from_utf8_lossy(&info.name[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_eight_bytes() {
        assert_eq!(size_of::<Insn>(), 8);
        assert_eq!(Insn::ld_map_fd(R1, 7)[0], Insn { code: 0x18, regs: 0x11, off: 0, imm: 7 });
    }

    #[test]
    fn rejected_program_comes_with_the_verifier_log() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        // Exits without setting r0.
        let err = load_xdp(&[Insn::exit()], "lr_bad").expect_err("verifier refuses");
        assert_eq!(err.source.raw_os_error(), Some(libc::EACCES));
        assert!(err.log.contains("R0 !read_ok"), "log: {}", err.log);
    }

    #[test]
    fn names_are_truncated_and_nul_terminated() {
        assert_eq!(&obj_name("lr_xsk")[..7], b"lr_xsk\0");
        assert_eq!(obj_name("a_very_long_program_name")[15], 0);
    }
}
