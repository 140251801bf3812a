//! Software RSS for AF_PACKET fanout: an eBPF program that spreads a group's frames over its
//! sockets by the Toeplitz hash, as a NIC with RSS would spread them over its queues.
//!
//! `PACKET_FANOUT_EBPF` (packet(7)) runs a socket-filter program on every frame and gives it
//! to member `return value % members`. This one computes the Toeplitz hash of the standard
//! NDIS inputs with the key given (the ports use [`crate::rss::SYMMETRIC_KEY`], so that both
//! directions of a flow reach the same worker and its state table): source and
//! destination address, plus the ports for unfragmented TCP/UDP over IPv4 and TCP/UDP right
//! after the IPv6 header; and returns `hash & 127`, which the kernel's modulo turns into
//! exactly [`crate::rss::queue_for`] (a 128-entry round-robin indirection table). So a flow
//! stays on one worker, and a worker gets the same flows as it would behind a NIC with that
//! key. ICMP errors are hashed by their own addresses, not the quoted flow's: one about a
//! flow may reach another worker than the flow.
//!
//! The program is unrolled at build time, one conditional XOR per input bit (Toeplitz: for
//! every set bit `i` of the input, XOR the 32-bit window of the key starting at bit `i`):
//! 96 bits for IPv4 with ports, 288 for IPv6, three instructions each. Packet bytes are read
//! with the socket filters' `LD_ABS`/`LD_IND` loads (offsets from the network header), which
//! end the program with 0 (member 0) on a truncated packet instead of reading beyond it.

use std::os::fd::OwnedFd;

use crate::rss::KEY_LEN;
use crate::xdp::bpf::{self, Fixups, Insn, LoadError, R0, R1, R6, R7, R8};

/// Name of the loaded program.
pub const PROG_NAME: &str = "lr_rss";

/// The 32-bit window of `key` starting at bit `bit` (bits numbered from the most significant
/// bit of byte 0).
fn window(key: &[u8; KEY_LEN], bit: usize) -> u32 {
    (0..32).fold(0u32, |w, i| {
        let b = bit + i;
        let set = key.get(b / 8).is_some_and(|byte| byte & (0x80 >> (b % 8)) != 0);
        (w << 1) | u32::from(set)
    })
}

/// r7 ^= window(input bit) for every set bit of the byte in r0, the byte being input bits
/// `first_bit..first_bit + 8`.
fn hash_byte(p: &mut Vec<Insn>, key: &[u8; KEY_LEN], first_bit: usize) {
    for b in 0..8 {
        p.push(Insn::jset_imm(R0, 0x80 >> b, 1));
        p.push(Insn::ja(1));
        p.push(Insn::xor32_imm(R7, window(key, first_bit + b) as i32));
    }
}

/// Hashes the bytes `loads` put in r0, in order, as input bits `first_bit..`.
fn hash_bytes(p: &mut Vec<Insn>, key: &[u8; KEY_LEN], loads: impl Iterator<Item = Insn>, first_bit: usize) {
    for (i, load) in loads.enumerate() {
        p.push(load);
        hash_byte(p, key, first_bit + 8 * i);
    }
}

/// Goes to `done` unless the protocol byte at packet offset `at` is TCP or UDP.
fn unless_tcp_udp(p: &mut Vec<Insn>, done: &mut Fixups, at: i32) {
    p.push(Insn::ld_abs_b(at));
    p.push(Insn::jeq_imm(R0, 6, 2));
    p.push(Insn::jeq_imm(R0, 17, 1));
    done.jump(p, Insn::ja(0));
}

/// The fanout program for `key`.
pub fn program(key: &[u8; KEY_LEN]) -> Vec<Insn> {
    let mut p = vec![Insn::mov_reg(R6, R1), Insn::mov32_imm(R7, 0), Insn::ld_abs_b(0), Insn::rsh32_imm(R0, 4)];
    let mut done = Fixups::default();
    let mut v6 = Fixups::default();
    p.push(Insn::jeq_imm(R0, 4, 2)); // -> v4, past the next two
    v6.jump(&mut p, Insn::jeq_imm(R0, 6, 0));
    done.jump(&mut p, Insn::ja(0)); // neither: member 0
    // IPv4: addresses at 12..20, then ports after the IHL for unfragmented TCP/UDP.
    hash_bytes(&mut p, key, (12..20).map(Insn::ld_abs_b), 0);
    unless_tcp_udp(&mut p, &mut done, 9);
    p.push(Insn::ld_abs_h(6));
    p.push(Insn::and32_imm(R0, 0x3fff)); // MF and fragment offset
    done.jump(&mut p, Insn::jne_imm(R0, 0, 0));
    p.extend([Insn::ld_abs_b(0), Insn::and32_imm(R0, 0x0f), Insn::lsh32_imm(R0, 2), Insn::mov32_reg(R8, R0)]);
    hash_bytes(&mut p, key, (0..4).map(|j| Insn::ld_ind_b(R8, j)), 64);
    done.jump(&mut p, Insn::ja(0));
    // IPv6: addresses at 8..40, ports right after the header for TCP/UDP.
    v6.land(&mut p);
    hash_bytes(&mut p, key, (8..40).map(Insn::ld_abs_b), 0);
    unless_tcp_udp(&mut p, &mut done, 6);
    hash_bytes(&mut p, key, (40..44).map(Insn::ld_abs_b), 256);
    done.land(&mut p);
    p.extend([Insn::mov32_reg(R0, R7), Insn::and32_imm(R0, (crate::rss::DEFAULT_TABLE_LEN - 1) as i32), Insn::exit()]);
    p
}

/// Loads the program for `key`.
pub fn load(key: &[u8; KEY_LEN]) -> Result<OwnedFd, LoadError> {
    bpf::load_socket_filter(&program(key), PROG_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rss::{MICROSOFT_KEY, Toeplitz, toeplitz_reference};

    #[test]
    fn windows_match_the_reference_bit_by_bit() {
        // A one-bit input selects exactly its window.
        for bit in [0, 1, 7, 8, 95, 287] {
            let mut input = [0u8; 36];
            input[bit / 8] = 0x80 >> (bit % 8);
            assert_eq!(window(&MICROSOFT_KEY, bit), toeplitz_reference(&MICROSOFT_KEY, &input), "bit {bit}");
        }
    }

    #[test]
    fn program_shape_and_jumps_in_range() {
        let p = program(&MICROSOFT_KEY);
        assert!(p.len() > 96 * 3 + 288 * 3 && p.len() < 4096, "{}", p.len());
        assert_eq!(p.last(), Some(&Insn::exit()));
        // Every jump lands inside the program.
        for (i, insn) in p.iter().enumerate() {
            assert!(i as i64 + 1 + i64::from(insn.off()) <= p.len() as i64);
        }
        let _ = Toeplitz::new(&MICROSOFT_KEY);
    }
}
