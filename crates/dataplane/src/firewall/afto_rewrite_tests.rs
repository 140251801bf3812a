use super::*;

const CLIENT: u128 = 0x2001_0db8_000a_0000_0000_0000_0000_0002;
const PREFIX: u128 = 0x0064_ff9b_0000_0000_0000_0000_0000_0000;
const SERVER: u32 = 0xc613_0002;
const POOL: u32 = 0xc613_0001;

/// An Ethernet frame carrying an IPv6 packet of protocol `p` with L4 bytes `l4` (checksum
/// at `ck` filled in).
fn v6_frame(p: u8, src: u128, dst: u128, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
    let mut ip = [0u8; 40];
    v6_header(&mut ip, 0, l4.len(), 64, p, src, dst);
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    let pseudo = pseudo_header_v6(&src.into(), &dst.into(), p, l4.len() as u32);
    let ck = l4_checksum(&f[54..], checksum_at(p), pseudo);
    put16(&mut f[54..], checksum_at(p), ck);
    f
}

/// An Ethernet frame carrying an IPv4 packet of protocol `p` with L4 bytes `l4` (checksum
/// filled in).
fn v4_frame(p: u8, src: u32, dst: u32, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = [0u8; 20];
    v4_header(&mut ip, 0, l4.len(), 64, p, src, dst);
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    let pseudo = if p == proto::ICMP {
        0
    } else {
        pseudo_header_v4(&src.into(), &dst.into(), p, l4.len() as u32)
    };
    let ck = l4_checksum(&f[34..], checksum_at(p), pseudo);
    put16(&mut f[34..], checksum_at(p), ck);
    f
}

/// Whether the L4 checksum of the IP packet at 14 of `f` holds (a sum of zero).
fn checksum_holds(f: &[u8]) -> bool {
    let ip = &f[14..];
    if ip[0] >> 4 == 4 {
        assert_eq!(wire::checksum::checksum(&ip[..20]), 0, "IPv4 header checksum");
        let p = ip[9];
        let l4 = &ip[20..];
        let pseudo = if p == proto::ICMP {
            0
        } else {
            let a = |at: usize| u32::from_be_bytes(ip[at..at + 4].try_into().unwrap());
            pseudo_header_v4(&a(12).into(), &a(16).into(), p, l4.len() as u32)
        };
        fold(u64::from(pseudo) + u64::from(sum(l4))) == 0xffff
    } else {
        let a = |at: usize| u128::from_be_bytes(ip[at..at + 16].try_into().unwrap());
        let l4 = &ip[40..];
        let pseudo = pseudo_header_v6(&a(8).into(), &a(24).into(), ip[6], l4.len() as u32);
        fold(u64::from(pseudo) + u64::from(sum(l4))) == 0xffff
    }
}

fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = vec![0u8; 12];
    put16(&mut u, 0, sport);
    put16(&mut u, 2, dport);
    put16(&mut u, 4, 12);
    u[8..].copy_from_slice(b"data");
    u
}

#[test]
fn udp_and_echo_to_ipv4_and_back() {
    let mut out = [0u8; 2048];
    let f = v6_frame(proto::UDP, CLIENT, PREFIX | u128::from(SERVER), &udp(40000, 53));
    let n = to_v4(&f, 14, (POOL, 50001, SERVER), PortField::Src, &mut out).unwrap();
    let v4 = &out[..n];
    assert_eq!((n, &v4[12..14]), (14 + 20 + 12, &[0x08, 0x00][..]));
    assert_eq!((&v4[26..30], &v4[30..34]), (&POOL.to_be_bytes()[..], &SERVER.to_be_bytes()[..]));
    assert_eq!((be16(v4, 34), be16(v4, 36)), (Some(50001), Some(53)));
    assert!(checksum_holds(v4));

    let reply = v4_frame(proto::UDP, SERVER, POOL, &udp(53, 50001));
    let back = Back {
        src: PREFIX | u128::from(SERVER),
        dst: CLIENT,
        port: 40000,
        field: PortField::Dst,
        quote: None,
    };
    let n = to_v6(&reply, 14, &back, &mut out).unwrap();
    let v6 = &out[..n];
    assert_eq!((n, v6[20]), (14 + 40 + 12, proto::UDP));
    assert_eq!((be16(v6, 54), be16(v6, 56)), (Some(53), Some(40000)));
    assert!(checksum_holds(v6));

    let echo = v6_frame(proto::ICMPV6, CLIENT, PREFIX | 1, &[128, 0, 0, 0, 0x12, 0x34, 0, 7]);
    let n = to_v4(&echo, 14, (POOL, 50002, 1), PortField::Src, &mut out).unwrap();
    assert_eq!((out[23], out[34], be16(&out, 38)), (proto::ICMP, 8, Some(50002)));
    assert!(checksum_holds(&out[..n]));
    let pong = v4_frame(proto::ICMP, 1, POOL, &[0, 0, 0, 0, 0xc3, 0x52, 0, 7]);
    let back =
        Back { src: PREFIX | 1, dst: CLIENT, port: 0x1234, field: PortField::Dst, quote: None };
    let n = to_v6(&pong, 14, &back, &mut out).unwrap();
    assert_eq!((out[20], out[54], be16(&out, 58)), (proto::ICMPV6, 129, Some(0x1234)));
    assert!(checksum_holds(&out[..n]));
}

/// traceroute's last hop through NAT64: the server's "port unreachable" about the
/// translated probe becomes ICMPv6 "port unreachable" about the probe the client sent.
#[test]
fn a_port_unreachable_is_translated_with_its_quote() {
    let mut out = [0u8; 2048];
    let probe = v4_frame(proto::UDP, POOL, SERVER, &udp(50003, 33435));
    let mut err = vec![3, 3, 0, 0, 0, 0, 0, 0];
    err.extend_from_slice(&probe[14..]);
    let f = v4_frame(proto::ICMP, SERVER, POOL, &err);
    let server6 = PREFIX | u128::from(SERVER);
    let back = Back {
        src: server6,
        dst: CLIENT,
        port: 0,
        field: PortField::Dst,
        quote: Some((CLIENT, 40001, server6)),
    };
    let n = to_v6(&f, 14, &back, &mut out).unwrap();
    let v6 = &out[..n];
    assert!(checksum_holds(v6), "the ICMPv6 checksum");
    assert_eq!((v6[54], v6[55]), (1, 4), "destination unreachable, port unreachable");
    let q = &v6[62..];
    assert_eq!(u128::from_be_bytes(q[8..24].try_into().unwrap()), CLIENT);
    assert_eq!(u128::from_be_bytes(q[24..40].try_into().unwrap()), server6);
    assert_eq!((be16(q, 40), be16(q, 42)), (Some(40001), Some(33435)));
    let mut quoted = vec![0u8; 14];
    quoted.extend_from_slice(q);
    assert!(checksum_holds(&quoted), "the quoted datagram's checksum");
}

#[test]
fn what_is_not_translated() {
    let mut out = [0u8; 2048];
    let other = v6_frame(proto::ICMPV6, CLIENT, PREFIX | 1, &[135, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        to_v4(&other, 14, (POOL, 1, 1), PortField::Src, &mut out),
        None,
        "neighbour solicitation"
    );
    let mut frag = v4_frame(proto::UDP, SERVER, POOL, &udp(53, 50001));
    frag[20] = 0x20;
    let back = Back { src: 1, dst: CLIENT, port: 1, field: PortField::Dst, quote: None };
    assert_eq!(to_v6(&frag, 14, &back, &mut out), None, "a fragment");
}
