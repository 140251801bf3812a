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
//! key.
//!
//! Where software can do better than a NIC, it does, so that ICMP reaches the worker that
//! holds its flow's state or translation:
//! * an ICMP query or reply (echo, timestamp, information, address mask; ICMPv6 echo 128,
//!   129) hashes its identifier as the source port
//!   and 0 as the destination port (with the symmetric key the hash depends on the two
//!   ports' XOR, so the identifier twice would cancel out), so a ping and its replies share a
//!   worker, and a NAT worker can choose the identifier whose replies come back to it, as it
//!   chooses ports;
//! * an ICMP error (IPv4 types 3, 4, 5, 11, 12; ICMPv6 1 to 4) hashes the flow it quotes (RFC
//!   792, RFC 4443 2.4(c): the invoking packet's header and at least 8 bytes of it), so it
//!   reaches the worker of that flow.
//!
//! [`reference`] is the same hash in Rust.
//!
//! The program is unrolled at build time, one conditional XOR per input bit (Toeplitz: for
//! every set bit `i` of the input, XOR the 32-bit window of the key starting at bit `i`).
//! The hash is linear in its input bits, so the ports are hashed before the addresses, each
//! input once per family: r8 holds where the IP header to hash starts (the packet's, or the
//! quoted one), r9 where its ports (or echo identifier) are. Packet bytes are read with the
//! socket filters' `LD_ABS`/`LD_IND` loads (offsets from the network header), which end the
//! program with 0 (member 0) on a truncated packet instead of reading beyond it.

use std::os::fd::OwnedFd;

use crate::rss::{KEY_LEN, Toeplitz};
use crate::xdp::bpf::{self, Fixups, Insn, LoadError, R0, R1, R6, R7, R8, R9};

/// Name of the loaded program.
pub const PROG_NAME: &str = "lr_rss";

/// IPv4 ICMP types that quote the packet they are about.
const ICMP4_ERRORS: [i32; 5] = [3, 4, 5, 11, 12];

/// IPv4 ICMP queries and their replies, which carry an identifier (RFC 792: echo, timestamp,
/// information; RFC 950: address mask).
const ICMP4_QUERIES: [i32; 8] = [0, 8, 13, 14, 15, 16, 17, 18];

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
fn hash_bytes(
    p: &mut Vec<Insn>,
    key: &[u8; KEY_LEN],
    loads: impl Iterator<Item = Insn>,
    first_bit: usize,
) {
    for (i, load) in loads.enumerate() {
        p.push(load);
        hash_byte(p, key, first_bit + 8 * i);
    }
}

/// Where the parse of one family jumps: hash the ports at r9, the echo identifier at r9 + 4
/// (then port 0, which adds nothing), or only the addresses of the header at r8.
#[derive(Default)]
struct Targets {
    ports: Fixups,
    echo: Fixups,
    addrs: Fixups,
}

impl Targets {
    /// r0 holds an IP protocol: TCP and UDP go to `ports`; ICMP (`icmp`) falls through; any
    /// other to `addrs`.
    fn by_protocol(&mut self, p: &mut Vec<Insn>, icmp: i32) {
        self.ports.jump(p, Insn::jeq_imm(R0, 6, 0));
        self.ports.jump(p, Insn::jeq_imm(R0, 17, 0));
        self.addrs.jump(p, Insn::jne_imm(R0, icmp, 0));
    }

    /// r0 holds an ICMP type: `echo` types (queries) go to `echo`, the rest to `addrs`.
    fn echo_or_addrs(&mut self, p: &mut Vec<Insn>, echo: &[i32]) {
        for &t in echo {
            self.echo.jump(p, Insn::jeq_imm(R0, t, 0));
        }
        self.addrs.jump(p, Insn::ja(0));
    }

    /// The three hashing blocks: ports or identifier at input bit `l4_bit`, then the
    /// addresses (`addr_len` bytes at r8 + `addr_at`) at bit 0; then to `done`.
    fn hash(
        self,
        p: &mut Vec<Insn>,
        key: &[u8; KEY_LEN],
        l4_bit: usize,
        addr_at: i32,
        addr_len: i32,
        done: &mut Fixups,
    ) {
        let mut addrs = self.addrs;
        self.ports.land(p);
        hash_bytes(p, key, (0..4).map(|j| Insn::ld_ind_b(R9, j)), l4_bit);
        addrs.jump(p, Insn::ja(0));
        self.echo.land(p);
        hash_bytes(p, key, [4, 5].into_iter().map(|j| Insn::ld_ind_b(R9, j)), l4_bit);
        addrs.land(p);
        hash_bytes(p, key, (addr_at..addr_at + addr_len).map(|j| Insn::ld_ind_b(R8, j)), 0);
        done.jump(p, Insn::ja(0));
    }
}

/// r9 = r8 + the IHL of the IPv4 header at r8 (where its ports are).
fn ports_after_ipv4_header(p: &mut Vec<Insn>) {
    p.extend([
        Insn::ld_ind_b(R8, 0),
        Insn::and32_imm(R0, 0x0f),
        Insn::lsh32_imm(R0, 2),
        Insn::mov_reg(R9, R0),
        Insn::add_reg(R9, R8),
    ]);
}

/// Goes to `t.addrs` if the IPv4 header at r8 is a fragment (MF or an offset: no ports).
fn unless_fragment(p: &mut Vec<Insn>, t: &mut Targets) {
    p.extend([Insn::ld_ind_h(R8, 6), Insn::and32_imm(R0, 0x3fff)]);
    t.addrs.jump(p, Insn::jne_imm(R0, 0, 0));
}

/// IPv4: the packet's header, or for an ICMP error the quoted one (r8 = outer IHL + 8).
fn ipv4(p: &mut Vec<Insn>, key: &[u8; KEY_LEN], done: &mut Fixups) {
    let mut t = Targets::default();
    let mut quoted = Fixups::default();
    p.push(Insn::mov_imm(R8, 0));
    unless_fragment(p, &mut t);
    ports_after_ipv4_header(p);
    p.push(Insn::ld_abs_b(9));
    t.by_protocol(p, 1);
    p.push(Insn::ld_ind_b(R9, 0));
    for e in ICMP4_ERRORS {
        quoted.jump(p, Insn::jeq_imm(R0, e, 0));
    }
    t.echo_or_addrs(p, &ICMP4_QUERIES);
    quoted.land(p);
    p.extend([Insn::mov_reg(R8, R9), Insn::add_imm(R8, 8)]);
    unless_fragment(p, &mut t);
    ports_after_ipv4_header(p);
    p.push(Insn::ld_ind_b(R8, 9));
    t.by_protocol(p, 1);
    p.push(Insn::ld_ind_b(R9, 0));
    t.echo_or_addrs(p, &ICMP4_QUERIES);
    t.hash(p, key, 64, 12, 8, done);
}

/// IPv6: TCP, UDP and ICMPv6 right after the header; an error's quoted header at 48.
fn ipv6(p: &mut Vec<Insn>, key: &[u8; KEY_LEN], done: &mut Fixups) {
    let mut t = Targets::default();
    let mut quoted = Fixups::default();
    p.extend([Insn::mov_imm(R8, 0), Insn::mov_imm(R9, 40), Insn::ld_abs_b(6)]);
    t.by_protocol(p, 58);
    p.push(Insn::ld_abs_b(40));
    // Types 1 to 4 are errors (RFC 4443 2.1); the others go on with the type in r0.
    let mut not_error = Fixups::default();
    not_error.jump(p, Insn::jeq_imm(R0, 0, 0));
    not_error.jump(p, Insn::jgt_imm(R0, 4, 0));
    quoted.jump(p, Insn::ja(0));
    not_error.land(p);
    t.echo_or_addrs(p, &[128, 129]);
    quoted.land(p);
    p.extend([Insn::mov_imm(R8, 48), Insn::mov_imm(R9, 88), Insn::ld_abs_b(54)]);
    t.by_protocol(p, 58);
    p.push(Insn::ld_abs_b(88));
    t.echo_or_addrs(p, &[128, 129]);
    t.hash(p, key, 256, 8, 32, done);
}

/// The fanout program for `key`.
pub fn program(key: &[u8; KEY_LEN]) -> Vec<Insn> {
    let mut p = vec![
        Insn::mov_reg(R6, R1),
        Insn::mov32_imm(R7, 0),
        Insn::ld_abs_b(0),
        Insn::rsh32_imm(R0, 4),
    ];
    let mut done = Fixups::default();
    let mut v6 = Fixups::default();
    p.push(Insn::jeq_imm(R0, 4, 2)); // -> v4, past the next two
    v6.jump(&mut p, Insn::jeq_imm(R0, 6, 0));
    done.jump(&mut p, Insn::ja(0)); // neither: member 0
    ipv4(&mut p, key, &mut done);
    v6.land(&mut p);
    ipv6(&mut p, key, &mut done);
    done.land(&mut p);
    p.extend([
        Insn::mov32_reg(R0, R7),
        Insn::and32_imm(R0, (crate::rss::DEFAULT_TABLE_LEN - 1) as i32),
        Insn::exit(),
    ]);
    p
}

/// What [`program`] returns for an Ethernet frame (untagged), computed in Rust: the queue
/// input `hash & 127`, 0 for a frame that is not IP or is cut short where the program reads.
pub fn reference(t: &Toeplitz, frame: &[u8]) -> u32 {
    let ip = frame.get(14..).unwrap_or(&[]);
    let hash = match ip.first().map(|b| b >> 4) {
        Some(4) => reference_v4(t, ip, 0),
        Some(6) => reference_v6(t, ip),
        _ => Some(0),
    };
    hash.unwrap_or(0) & (crate::rss::DEFAULT_TABLE_LEN as u32 - 1)
}

/// The IPv4 header at `at`: its ports or echo identifier, or for an error (at the top level
/// only) the header it quotes.
fn reference_v4(t: &Toeplitz, ip: &[u8], at: usize) -> Option<u32> {
    let byte = |i: usize| ip.get(i).copied();
    let addrs = |l4: Option<(u16, u16)>| {
        let a = ip.get(at + 12..at + 20)?;
        let (src, dst) = (
            std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]),
            std::net::Ipv4Addr::new(a[4], a[5], a[6], a[7]),
        );
        Some(l4.map_or_else(|| t.ipv4(src, dst), |(s, d)| t.ipv4_ports(src, dst, s, d)))
    };
    let word = |i: usize| Some(u16::from_be_bytes([byte(i)?, byte(i + 1)?]));
    if word(at + 6)? & 0x3fff != 0 {
        return addrs(None);
    }
    let l4 = at + usize::from(byte(at)? & 0x0f) * 4;
    match byte(at + 9)? {
        6 | 17 => addrs(Some((word(l4)?, word(l4 + 2)?))),
        1 => match byte(l4)? {
            q if ICMP4_QUERIES.contains(&i32::from(q)) => addrs(Some((word(l4 + 4)?, 0))),
            e if at == 0 && ICMP4_ERRORS.contains(&i32::from(e)) => reference_v4(t, ip, l4 + 8),
            _ => addrs(None),
        },
        _ => addrs(None),
    }
}

/// The IPv6 header: as [`reference_v4`], the quoted header at 48 for ICMPv6 errors 1 to 4.
fn reference_v6(t: &Toeplitz, ip: &[u8]) -> Option<u32> {
    let byte = |i: usize| ip.get(i).copied();
    let word = |i: usize| Some(u16::from_be_bytes([byte(i)?, byte(i + 1)?]));
    let hash = |at: usize, l4: Option<(u16, u16)>| {
        let a = ip.get(at + 8..at + 40)?;
        let src = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&a[..16]).ok()?);
        let dst = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&a[16..]).ok()?);
        Some(l4.map_or_else(|| t.ipv6(src, dst), |(s, d)| t.ipv6_ports(src, dst, s, d)))
    };
    let of = |at: usize, next: u8| match next {
        6 | 17 => hash(at, Some((word(at + 40)?, word(at + 42)?))),
        58 => match byte(at + 40)? {
            128 | 129 => hash(at, Some((word(at + 44)?, 0))),
            _ => hash(at, None),
        },
        _ => hash(at, None),
    };
    match byte(6)? {
        58 if (1..=4).contains(&byte(40)?) => of(48, byte(54)?),
        next => of(0, next),
    }
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
            assert_eq!(
                window(&MICROSOFT_KEY, bit),
                toeplitz_reference(&MICROSOFT_KEY, &input),
                "bit {bit}"
            );
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
