//! The generator's XDP program, assembled for one template layout and flow set.
//!
//! Live-frames mode copies the template into a page only when the page is new; a recycled
//! page holds the previous frame sent from it, possibly of another length, and as whoever
//! received it last left it: a forwarding kernel rewrites the MACs and the TTL in place (the
//! skb it builds from an XDP frame shares the page) and its cached link-layer header write
//! (`neigh_hh_output`, 16 bytes) clobbers the 2 bytes before the frame. So every run sets the
//! length (`bpf_xdp_adjust_tail` to the wanted size, whatever the current one), writes the
//! template's headers back, then every field that varies: IP length, addresses, ports, UDP
//! length, both checksums. A run is the generator's when it has metadata at all (BPF_PROG_RUN
//! gives 4 bytes; a received frame has none): what the metadata holds is not trusted.

use std::os::fd::RawFd;

use super::layout::{
    EP_ADDR, EP_ADDR_SUM, EP_PORT, EP_SUM, Layout, ST_RUNS, SZ_FRAME_LEN, SZ_IP_LEN, SZ_IP_SUM,
    SZ_UDP_LEN, SZ_UDP_SUM,
};
use crate::xdp::bpf::{Fixups, Insn, R0, R1, R2, R3, R4, R6, R7, R8, R9, R10};

const XDP_ABORTED: i32 = 0;
pub(super) const XDP_PASS: i32 = 2;
pub(super) const XDP_TX: i32 = 3;
/// The generator's runs carry 4 bytes of metadata (before the frame), these on a new page:
/// the program makes a frame only when there is metadata, and passes anything else untouched
/// (see [`program`]). Its content is not checked: a recycled page may hold other bytes there.
pub(super) const META: [u8; 4] = *b"lrlg";
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_XDP_ADJUST_TAIL: i32 = 65;

/// The program's four array maps.
pub(super) struct Maps {
    /// One entry: the next frame's indices (see [`super::layout::STATE_VALUE`]).
    pub state: RawFd,
    pub sizes: RawFd,
    pub sources: RawFd,
    pub destinations: RawFd,
}

/// Entries of the three tables; each is at least 1.
#[derive(Clone, Copy)]
pub(super) struct Counts {
    pub sources: u32,
    pub destinations: u32,
    pub sizes: u32,
}

/// Stack slots: the state's key, then the three indices as lookup keys.
const KEY_STATE: i16 = -4;
const KEY_SOURCE: i16 = -8;
const KEY_DESTINATION: i16 = -12;
const KEY_SIZE: i16 = -16;

/// The program, in outline (r6 = ctx, r7 = source, r8 = destination, r9 = size):
///
/// ```text
///      if there are no 4 bytes of metadata: return XDP_PASS  ; a frame received where the
///                                                    ; program is attached (see Sender::open)
///      state = lookup(state_map, 0); s, d, k = state's indices (kept as keys on the stack)
///      s += 1; if s == sources { s = 0; d += 1; if d == destinations { d = 0; k += 1;
///        if k == sizes { k = 0 } } }; store s, d, k  ; sources vary fastest, then
///                                                    ; destinations, then sizes
///      state.runs += 1                               ; what user space reads as offered
///      r9 = lookup(sizes, k); r7 = lookup(sources, s); r8 = lookup(destinations, d)
///      delta = r9.frame_len - (data_end - data); if delta != 0: bpf_xdp_adjust_tail(delta)
///      if data + headers_end > data_end goto abort
///      write the template's headers (Ethernet to UDP), 4 bytes at a time
///      write IP length, UDP length, addresses, ports from r9, r7, r8
///      IPv4: checksum = ~fold(r9.ip_sum + r7.addr_sum + r8.addr_sum)
///      UDP:  checksum = ~fold(r9.udp_sum + r7.sum + r8.sum), 0 sent as 0xffff (RFC 768)
///      return XDP_TX
/// abort: return XDP_ABORTED                          ; a failed lookup or resize
/// ```
///
/// `headers` is the template up to the end of its UDP header (`layout.headers_end()` bytes).
pub(super) fn program(layout: Layout, headers: &[u8], maps: &Maps, counts: Counts) -> Vec<Insn> {
    debug_assert_eq!(headers.len(), layout.headers_end());
    let (mut abort, mut pass) = (Fixups::default(), Fixups::default());
    // ctx->data_meta, ctx->data: the generator's runs have 4 bytes of metadata.
    let mut p = vec![
        Insn::ldx_w(R2, R1, 8),
        Insn::ldx_w(R3, R1, 0),
        Insn::mov_reg(R4, R2),
        Insn::add_imm(R4, 4),
    ];
    pass.jump(&mut p, Insn::jgt_reg(R4, R3, 0));
    p.extend([Insn::mov_reg(R6, R1), Insn::st_w(R10, KEY_STATE, 0)]);
    lookup(&mut p, &mut abort, maps.state, KEY_STATE);
    p.push(Insn::mov_reg(R7, R0));
    advance(&mut p, counts);
    lookup(&mut p, &mut abort, maps.sizes, KEY_SIZE);
    p.push(Insn::mov_reg(R9, R0));
    lookup(&mut p, &mut abort, maps.sources, KEY_SOURCE);
    p.push(Insn::mov_reg(R7, R0));
    lookup(&mut p, &mut abort, maps.destinations, KEY_DESTINATION);
    p.push(Insn::mov_reg(R8, R0));
    resize(&mut p, &mut abort, layout);
    write_headers(&mut p, headers);
    write_fields(&mut p, layout);
    p.extend([Insn::mov_imm(R0, XDP_TX), Insn::exit()]);
    abort.land(&mut p);
    p.extend([Insn::mov_imm(R0, XDP_ABORTED), Insn::exit()]);
    pass.land(&mut p);
    p.extend([Insn::mov_imm(R0, XDP_PASS), Insn::exit()]);
    p
}

/// r0 = lookup(map, key on the stack at `key`); a miss aborts.
fn lookup(p: &mut Vec<Insn>, abort: &mut Fixups, map: RawFd, key: i16) {
    p.extend([Insn::mov_reg(R2, R10), Insn::add_imm(R2, i32::from(key))]);
    p.extend(Insn::ld_map_fd(R1, map));
    p.push(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM));
    abort.jump(p, Insn::jeq_imm(R0, 0, 0));
}

/// Copies the state's indices (r7) to the stack as this frame's keys, and stores the next
/// frame's. Each store falls through to the ones below it, which store values unchanged or
/// just reset to 0.
fn advance(p: &mut Vec<Insn>, counts: Counts) {
    let (mut store_s, mut store_d, mut store_k) =
        (Fixups::default(), Fixups::default(), Fixups::default());
    p.extend([
        Insn::ldx_w(R1, R7, 0),
        Insn::stx_w(R10, R1, KEY_SOURCE),
        Insn::ldx_w(R2, R7, 4),
        Insn::stx_w(R10, R2, KEY_DESTINATION),
        Insn::ldx_w(R3, R7, 8),
        Insn::stx_w(R10, R3, KEY_SIZE),
        Insn::add_imm(R1, 1),
    ]);
    store_s.jump(p, Insn::jne_imm(R1, counts.sources as i32, 0));
    p.extend([Insn::mov_imm(R1, 0), Insn::add_imm(R2, 1)]);
    store_d.jump(p, Insn::jne_imm(R2, counts.destinations as i32, 0));
    p.extend([Insn::mov_imm(R2, 0), Insn::add_imm(R3, 1)]);
    store_k.jump(p, Insn::jne_imm(R3, counts.sizes as i32, 0));
    p.push(Insn::mov_imm(R3, 0));
    store_k.land(p);
    p.push(Insn::stx_w(R7, R3, 8));
    store_d.land(p);
    p.push(Insn::stx_w(R7, R2, 4));
    store_s.land(p);
    p.extend([
        Insn::stx_w(R7, R1, 0),
        Insn::ldx_dw(R1, R7, ST_RUNS),
        Insn::add_imm(R1, 1),
        Insn::stx_dw(R7, R1, ST_RUNS),
    ]);
}

/// Sets the frame's length to the size's (r9), then r2 = data with the headers in bounds.
fn resize(p: &mut Vec<Insn>, abort: &mut Fixups, layout: Layout) {
    let mut fits = Fixups::default();
    p.extend([
        Insn::ldx_w(R2, R6, 0),
        Insn::ldx_w(R3, R6, 4),
        Insn::sub_reg(R3, R2),
        Insn::ldx_w(R2, R9, SZ_FRAME_LEN),
        Insn::sub_reg(R2, R3),
    ]);
    fits.jump(p, Insn::jeq_imm(R2, 0, 0));
    p.extend([Insn::mov_reg(R1, R6), Insn::call(BPF_FUNC_XDP_ADJUST_TAIL)]);
    abort.jump(p, Insn::jne_imm(R0, 0, 0));
    fits.land(p);
    // The helper may have moved the frame's end: packet pointers are read again.
    p.extend([
        Insn::ldx_w(R2, R6, 0),
        Insn::ldx_w(R3, R6, 4),
        Insn::mov_reg(R4, R2),
        Insn::add_imm(R4, layout.headers_end() as i32),
    ]);
    abort.jump(p, Insn::jgt_reg(R4, R3, 0));
}

fn copy16(p: &mut Vec<Insn>, from: u8, off: i16, to: usize) {
    p.extend([Insn::ldx_h(R1, from, off), Insn::stx_h(R2, R1, to as i16)]);
}

fn copy32(p: &mut Vec<Insn>, from: u8, off: i16, to: usize) {
    p.extend([Insn::ldx_w(R1, from, off), Insn::stx_w(R2, R1, to as i16)]);
}

/// r1 = ~fold(r9[size_sum] + r7[ep_sum] + r8[ep_sum]) & 0xffff. Each partial sum is below
/// 2^20, so two folds bring the total below 2^16.
fn checksum(p: &mut Vec<Insn>, size_sum: i16, ep_sum: i16) {
    p.extend([
        Insn::ldx_w(R1, R9, size_sum),
        Insn::ldx_w(R3, R7, ep_sum),
        Insn::add_reg(R1, R3),
        Insn::ldx_w(R3, R8, ep_sum),
        Insn::add_reg(R1, R3),
    ]);
    for _ in 0..2 {
        p.extend([
            Insn::mov32_reg(R3, R1),
            Insn::rsh32_imm(R3, 16),
            Insn::and32_imm(R1, 0xffff),
            Insn::add_reg(R1, R3),
        ]);
    }
    p.push(Insn::xor32_imm(R1, 0xffff));
}

/// Writes `headers` at r2 = data as 4-byte immediates; the last word overlaps the one before
/// it when the length is not a multiple of 4 (headers are at least 42 bytes).
fn write_headers(p: &mut Vec<Insn>, headers: &[u8]) {
    let last = headers.len() - 4;
    for at in (0..last).step_by(4).chain([last]) {
        let word = i32::from_ne_bytes(headers[at..at + 4].try_into().expect("4 bytes"));
        p.push(Insn::st_w(R2, at as i16, word));
    }
}

/// Writes what varies, with r2 = data, r7/r8 = source/destination, r9 = size.
fn write_fields(p: &mut Vec<Insn>, layout: Layout) {
    let (l3, l4) = (layout.l3, layout.l4());
    let (len_at, src_at, dst_at, words) =
        if layout.ipv6 { (l3 + 4, l3 + 8, l3 + 24, 4) } else { (l3 + 2, l3 + 12, l3 + 16, 1) };
    copy16(p, R9, SZ_IP_LEN, len_at);
    copy16(p, R9, SZ_UDP_LEN, l4 + 4);
    for w in 0..words {
        copy32(p, R7, EP_ADDR + 4 * w as i16, src_at + 4 * w);
        copy32(p, R8, EP_ADDR + 4 * w as i16, dst_at + 4 * w);
    }
    copy16(p, R7, EP_PORT, l4);
    copy16(p, R8, EP_PORT, l4 + 2);
    if !layout.ipv6 {
        checksum(p, SZ_IP_SUM, EP_ADDR_SUM);
        p.push(Insn::stx_h(R2, R1, (l3 + 10) as i16));
    }
    checksum(p, SZ_UDP_SUM, EP_SUM);
    p.extend([
        Insn::jne_imm(R1, 0, 1),
        Insn::mov_imm(R1, 0xffff),
        Insn::stx_h(R2, R1, (l4 + 6) as i16),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_inside_the_program() {
        for layout in [Layout { l3: 14, ipv6: false }, Layout { l3: 18, ipv6: true }] {
            let maps = Maps { state: 3, sizes: 4, sources: 5, destinations: 6 };
            let headers = vec![0u8; layout.headers_end()];
            let p = program(
                layout,
                &headers,
                &maps,
                Counts { sources: 20, destinations: 100, sizes: 12 },
            );
            crate::xdp::bpf::assert_jumps_land_inside(&p);
            assert_eq!(p.last().unwrap().code(), 0x95, "ends with exit");
        }
    }
}
