//! The AF_PACKET fanout program (eBPF, crates/io/src/afpacket/toeplitz.rs) run by the kernel
//! (BPF_PROG_TEST_RUN) gives every frame the queue the Rust Toeplitz implementation gives it:
//! the Microsoft RSS verification vectors, and random IPv4/IPv6 TCP/UDP/other frames, with
//! fragments. Needs root (loading a program); skips without.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;

use io::afpacket::toeplitz;
use io::rss::{DEFAULT_TABLE_LEN, MICROSOFT_KEY, Toeplitz};
use io::xdp::bpf;

fn ipv4_frame(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, sport: u16, dport: u16, frag: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 18];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(46u16).to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    ip[20..22].copy_from_slice(&sport.to_be_bytes());
    ip[22..24].copy_from_slice(&dport.to_be_bytes());
    f
}

fn ipv6_frame(src: Ipv6Addr, dst: Ipv6Addr, next: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + 8 + 8];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let ip = &mut f[14..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&(16u16).to_be_bytes());
    ip[6] = next;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    ip[40..42].copy_from_slice(&sport.to_be_bytes());
    ip[42..44].copy_from_slice(&dport.to_be_bytes());
    f
}

#[test]
fn kernel_runs_the_same_hash_as_the_reference() {
    if !io::netdev::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let prog = toeplitz::load(&MICROSOFT_KEY).unwrap_or_else(|e| panic!("{}: {}", e.source, e.log));
    let t = Toeplitz::new(&MICROSOFT_KEY);
    let run = |f: &[u8]| bpf::test_run(prog.as_raw_fd(), f).unwrap();
    let want = |f: &[u8]| t.hash_frame(f).unwrap() & (DEFAULT_TABLE_LEN as u32 - 1);
    // Microsoft's verification suite, first IPv4 TCP line: 66.9.149.187:2794 -> 161.142.100.80:1766.
    let f = ipv4_frame(Ipv4Addr::new(66, 9, 149, 187), Ipv4Addr::new(161, 142, 100, 80), 6, 2794, 1766, 0);
    assert_eq!(t.hash_frame(&f), Some(0x51cc_c178));
    assert_eq!(run(&f), 0x51cc_c178 & 127);
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..3000 {
        let r = next();
        let proto = [6u8, 17, 1, 47][(r % 4) as usize];
        let (sp, dp) = ((r >> 8) as u16, (r >> 24) as u16);
        let f = if i % 2 == 0 {
            // Some fragments: MF set, or a non-zero offset (no ports then).
            let frag = match (r >> 40) % 5 {
                0 => 0x2000,
                1 => 0x0010,
                _ => 0,
            };
            ipv4_frame(Ipv4Addr::from(next() as u32), Ipv4Addr::from(next() as u32), proto, sp, dp, frag)
        } else {
            let (a, b) = (u128::from(next()) << 64 | u128::from(next()), u128::from(next()) << 64 | u128::from(next()));
            ipv6_frame(Ipv6Addr::from(a), Ipv6Addr::from(b), proto, sp, dp)
        };
        assert_eq!(run(&f), want(&f), "frame {i}: {f:02x?}");
    }
    // Non-IP frames go to member 0.
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(run(&arp), 0);
}
