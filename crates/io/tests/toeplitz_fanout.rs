//! The AF_PACKET fanout program (eBPF, crates/io/src/afpacket/toeplitz.rs) run by the kernel
//! (BPF_PROG_TEST_RUN) gives every frame the queue the Rust Toeplitz implementation gives it:
//! the Microsoft RSS verification vectors, and random IPv4/IPv6 TCP/UDP/ICMP/other frames,
//! with fragments, ICMP echo and ICMP errors quoting flows, whole and cut short. An echo and
//! its reply, and an error and the flow it quotes, go to the same queue. Needs root (loading
//! a program); skips without.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;

use io::afpacket::toeplitz;
use io::rss::{DEFAULT_TABLE_LEN, MICROSOFT_KEY, SYMMETRIC_KEY, Toeplitz};
use io::xdp::bpf;

fn ipv4_frame(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    sport: u16,
    dport: u16,
    frag: u16,
) -> Vec<u8> {
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
        io::netdev::skip_test("needs root");
        return;
    }
    let prog = toeplitz::load(&MICROSOFT_KEY).unwrap_or_else(|e| panic!("{}: {}", e.source, e.log));
    let t = Toeplitz::new(&MICROSOFT_KEY);
    let run = |f: &[u8]| {
        bpf::test_run(prog.as_raw_fd(), f)
            .unwrap_or_else(|e| panic!("{e}: {} bytes {f:02x?}", f.len()))
    };
    let want = |f: &[u8]| toeplitz::reference(&t, f);
    // Microsoft's verification suite, first IPv4 TCP line: 66.9.149.187:2794 -> 161.142.100.80:1766.
    let f = ipv4_frame(
        Ipv4Addr::new(66, 9, 149, 187),
        Ipv4Addr::new(161, 142, 100, 80),
        6,
        2794,
        1766,
        0,
    );
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
        let v6 = i % 2 == 1;
        let proto = [6u8, 17, if v6 { 58 } else { 1 }, 47][(r % 4) as usize];
        let (sp, dp) = ((r >> 8) as u16, (r >> 24) as u16);
        let f = if i % 2 == 0 {
            // Some fragments: MF set, or a non-zero offset (no ports then).
            let frag = match (r >> 40) % 5 {
                0 => 0x2000,
                1 => 0x0010,
                _ => 0,
            };
            ipv4_frame(
                Ipv4Addr::from(next() as u32),
                Ipv4Addr::from(next() as u32),
                proto,
                sp,
                dp,
                frag,
            )
        } else {
            let (a, b) = (
                u128::from(next()) << 64 | u128::from(next()),
                u128::from(next()) << 64 | u128::from(next()),
            );
            ipv6_frame(Ipv6Addr::from(a), Ipv6Addr::from(b), proto, sp, dp)
        };
        assert_eq!(run(&f), want(&f), "frame {i}: {f:02x?}");
        if proto == 6 || proto == 17 || proto == 47 {
            // Where a NIC hashes the same, the reference is the NIC's hash.
            assert_eq!(want(&f), t.hash_frame(&f).unwrap() & (DEFAULT_TABLE_LEN as u32 - 1));
        }
        // ICMP echo and errors quoting this frame (or an echo), whole and cut short.
        let inner = if v6 { f.clone() } else { echo_or(&f, r) };
        let err = icmp_error(&inner, [3u8, 11, 12, 1, 2, 4][(r >> 48) as usize % 6], v6);
        // Cut inside the quoted ports, and inside the quoted IP header.
        let cut = if v6 { 14 + 40 + 8 + 30 } else { 14 + 20 + 8 + 10 };
        for g in [&inner, &err, &err[..err.len() - 3].to_vec(), &err[..cut].to_vec()] {
            assert_eq!(run(g), want(g), "frame {i}: {g:02x?}");
        }
    }
    // Random bytes behind an IPv4 or IPv6 version nibble (bad lengths, IHL below 5, ICMP
    // errors quoting garbage): the program and the reference still agree.
    for i in 0..3000 {
        let len = 14 + 20 + (next() % 120) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        f[12..14].copy_from_slice(if i % 2 == 0 { &[0x08, 0x00] } else { &[0x86, 0xdd] });
        f[14] = (f[14] & 0x0f) | if i % 2 == 0 { 0x40 } else { 0x60 };
        if i % 3 == 0 {
            // An ICMP error or echo, to reach the quoted-header paths.
            let (proto_at, icmp_at) = if i % 2 == 0 {
                (14 + 9, 14 + usize::from(f[14] & 0x0f) * 4)
            } else {
                (14 + 6, 14 + 40)
            };
            f[proto_at] = if i % 2 == 0 { 1 } else { 58 };
            f[14 + 6] &= if i % 2 == 0 { 0 } else { 0xff };
            if let Some(t) = f.get_mut(icmp_at) {
                *t = [3u8, 11, 8, 1, 128, 2][(i / 3) % 6];
            }
        }
        if len >= 14 + 40 || i % 2 == 0 {
            assert_eq!(run(&f), want(&f), "random frame {i}: {f:02x?}");
        }
    }
    // Non-IP frames go to member 0.
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(run(&arp), 0);
}

/// An IPv4 ICMP query or reply (echo, timestamp, address mask; or a router advertisement, not
/// a query), or by `r` the frame itself: identifier from `r`.
fn echo_or(f: &[u8], r: u64) -> Vec<u8> {
    if r & 0x100 == 0 {
        return f.to_vec();
    }
    let mut e = f.to_vec();
    e[14 + 9] = 1;
    e[14 + 6..14 + 8].copy_from_slice(&[0, 0]);
    e[14 + 20] = [0u8, 8, 13, 14, 17, 9][(r >> 9) as usize % 6];
    e[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&((r >> 16) as u16).to_be_bytes());
    e
}

/// An ICMP error of `kind` from a router, quoting `inner` (its IP header and what follows),
/// sent to the quoted packet's source. For IPv6 the type is taken as 1 to 4.
fn icmp_error(inner: &[u8], kind: u8, v6: bool) -> Vec<u8> {
    let quoted = &inner[14..];
    let mut f = inner[..14].to_vec();
    if v6 {
        let mut ip = vec![0u8; 40];
        ip[0] = 0x60;
        ip[6] = 58;
        ip[8..24].copy_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x99).octets());
        ip[24..40].copy_from_slice(&quoted[8..24]);
        f.extend(ip);
        f.extend([1 + kind % 4, 0, 0, 0, 0, 0, 0, 0]);
    } else {
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[8] = 64;
        ip[9] = 1;
        ip[12..16].copy_from_slice(&[192, 0, 2, 99]);
        ip[16..20].copy_from_slice(&quoted[12..16]);
        f.extend(ip);
        f.extend([kind, 0, 0, 0, 0, 0, 0, 0]);
    }
    f.extend_from_slice(quoted);
    f
}

/// With the symmetric key: a ping and its reply share a queue, and an error about a flow goes
/// where the flow's replies go.
#[test]
fn icmp_follows_its_flow() {
    if !io::netdev::is_root() {
        io::netdev::skip_test("needs root");
        return;
    }
    let prog = toeplitz::load(&SYMMETRIC_KEY).unwrap_or_else(|e| panic!("{}: {}", e.source, e.log));
    let run = |f: &[u8]| bpf::test_run(prog.as_raw_fd(), f).unwrap();
    let (a, b) = (Ipv4Addr::new(198, 51, 100, 7), Ipv4Addr::new(203, 0, 113, 9));
    let mut queues = std::collections::HashSet::new();
    for id in 0..64u16 {
        let mut request = ipv4_frame(a, b, 1, 0, 0, 0);
        request[14 + 20] = 8;
        request[14 + 24..14 + 26].copy_from_slice(&id.to_be_bytes());
        let mut reply = ipv4_frame(b, a, 1, 0, 0, 0);
        reply[14 + 24..14 + 26].copy_from_slice(&id.to_be_bytes());
        assert_eq!(run(&request), run(&reply), "echo id {id}");
        assert_eq!(
            run(&icmp_error(&request, 11, false)),
            run(&reply),
            "time exceeded about echo id {id}"
        );
        queues.insert(run(&request));
        let udp = ipv4_frame(a, b, 17, 40000 + id, 53, 0);
        let back = ipv4_frame(b, a, 17, 53, 40000 + id, 0);
        assert_eq!(
            run(&icmp_error(&udp, 3, false)),
            run(&back),
            "port unreachable about port {}",
            40000 + id
        );
        let (a6, b6) = (
            Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7),
            Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 9),
        );
        let out6 = ipv6_frame(a6, b6, 6, 40000 + id, 443);
        let back6 = ipv6_frame(b6, a6, 6, 443, 40000 + id);
        assert_eq!(
            run(&icmp_error(&out6, 1, true)),
            run(&back6),
            "packet too big about port {}",
            40000 + id
        );
    }
    // The identifier spreads pings between the same two hosts over queues.
    assert!(queues.len() > 16, "{queues:?}");
}
