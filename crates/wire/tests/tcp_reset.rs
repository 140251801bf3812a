//! The resets of `block return-rst` (`wire::tcp_reset`) on byte fixtures: the expected
//! frames were built independently (Python's struct and its own checksum), so the sequence
//! numbers, addresses, ports and both checksums are checked byte for byte.

use wire::tcp_reset::{reset_for, tcp_reset};
use wire::{Error, MacAddr, TcpFlags};

const ROUTER_MAC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0xaa, 0x01]);

/// SYN 192.168.1.10:40000 -> 10.0.0.2:8099, seq 0x11223344, MSS 1460, window 64240, ident
/// 0x1c46, from 3c:22:fb:12:34:56 to the router (2 bytes of Ethernet padding).
const SYN_V4: [u8; 60] = [
    0x02, 0x00, 0x00, 0x00, 0xaa, 0x01, 0x3c, 0x22, 0xfb, 0x12, 0x34, 0x56, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x2c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x52, 0xd2, 0xc0, 0xa8, 0x01, 0x0a, 0x0a, 0x00,
    0x00, 0x02, 0x9c, 0x40, 0x1f, 0xa3, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x00, 0x60, 0x02,
    0xfa, 0xf0, 0xd1, 0x37, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x00, 0x00,
];

/// Its reset (RFC 9293 3.10.7.1, no ACK in the SYN): 10.0.0.2:8099 -> 192.168.1.10:40000,
/// seq 0, ack 0x11223345 (the SYN counts one), RST+ACK, window 0, TTL 64, DF, ident 0.
const RST_V4: [u8; 60] = [
    0x3c, 0x22, 0xfb, 0x12, 0x34, 0x56, 0x02, 0x00, 0x00, 0x00, 0xaa, 0x01, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0x6f, 0x1c, 0x0a, 0x00, 0x00, 0x02, 0xc0, 0xa8,
    0x01, 0x0a, 0x1f, 0xa3, 0x9c, 0x40, 0x00, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x45, 0x50, 0x14,
    0x00, 0x00, 0xe3, 0xd1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// PSH+ACK with 5 bytes ("hello") 2001:db8::1:40000 -> [2001:db8:1::2]:443, seq 1000, ack
/// 0xdeadbeef, hop limit 64.
const DATA_V6: [u8; 79] = [
    0x02, 0x00, 0x00, 0x00, 0xaa, 0x01, 0x3c, 0x22, 0xfb, 0x12, 0x34, 0x56, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x19, 0x06, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x01, 0xbb, 0x00, 0x00, 0x03, 0xe8, 0xde, 0xad,
    0xbe, 0xef, 0x50, 0x18, 0x02, 0x00, 0xce, 0xfe, 0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

/// Its reset: seq = the segment's ACK (0xdeadbeef), RST alone, hop limit 64.
const RST_V6: [u8; 74] = [
    0x3c, 0x22, 0xfb, 0x12, 0x34, 0x56, 0x02, 0x00, 0x00, 0x00, 0xaa, 0x01, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x14, 0x06, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0xbb, 0x9c, 0x40, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00,
    0x00, 0x00, 0x50, 0x04, 0x00, 0x00, 0x18, 0xd2, 0x00, 0x00,
];

#[test]
fn a_syn_gets_rst_ack_acknowledging_the_syn() {
    let mut buf = [0u8; 128];
    let n = tcp_reset(&SYN_V4, 0, ROUTER_MAC, &mut buf).unwrap();
    assert_eq!(&buf[..n], &RST_V4[..]);
}

#[test]
fn a_segment_with_ack_gets_rst_at_its_ack_number() {
    let mut buf = [0u8; 128];
    let n = tcp_reset(&DATA_V6, 64, ROUTER_MAC, &mut buf).unwrap();
    assert_eq!(&buf[..n], &RST_V6[..]);
}

#[test]
fn the_ttl_is_the_rules() {
    let mut buf = [0u8; 128];
    tcp_reset(&SYN_V4, 10, ROUTER_MAC, &mut buf).unwrap();
    assert_eq!(buf[14 + 8], 10);
    let ip = wire::Ipv4Packet::new_checked(&buf[14..54]).unwrap();
    assert!(ip.verify_checksum());
    tcp_reset(&DATA_V6, 7, ROUTER_MAC, &mut buf).unwrap();
    assert_eq!(buf[14 + 7], 7);
}

#[test]
fn sequence_space_of_syn_fin_and_data() {
    let (syn, fin, ack, rst, psh) =
        (TcpFlags::SYN, TcpFlags::FIN, TcpFlags::ACK, TcpFlags::RST, TcpFlags(0x08));
    assert_eq!(reset_for(100, 7, syn, 0), Some((0, 101, rst | ack)));
    assert_eq!(reset_for(100, 7, syn | fin, 10), Some((0, 112, rst | ack)));
    assert_eq!(reset_for(u32::MAX, 7, psh, 3), Some((0, 2, rst | ack)), "wraps around");
    assert_eq!(reset_for(100, 7, syn | ack, 0), Some((7, 0, rst)));
    assert_eq!(reset_for(100, 7, rst, 0), None, "never a reset for a reset");
    assert_eq!(reset_for(100, 7, rst | ack, 0), None);
}

#[test]
fn no_reset_for_resets_group_addresses_or_fragments() {
    let mut buf = [0u8; 128];
    let mut set = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = SYN_V4.to_vec();
        f(&mut v);
        tcp_reset(&v, 0, ROUTER_MAC, &mut buf)
    };
    // A RST (flags at 14 + 20 + 13); the checksum is not looked at.
    assert_eq!(set(&|v| v[47] = 0x04), Err(Error::Malformed));
    // Link-layer broadcast.
    assert_eq!(set(&|v| v[..6].copy_from_slice(&[0xff; 6])), Err(Error::Malformed));
    // A first fragment (MF) and a later one: the header checksum is fixed up by hand.
    let frag = |v: &mut Vec<u8>, flags: [u8; 2]| {
        v[20..22].copy_from_slice(&flags);
        v[24..26].copy_from_slice(&[0, 0]);
        let c = wire::checksum::checksum(&v[14..34]);
        v[24..26].copy_from_slice(&c.to_be_bytes());
    };
    assert_eq!(set(&|v| frag(v, [0x20, 0x00])), Err(Error::Malformed));
    assert_eq!(set(&|v| frag(v, [0x00, 0x10])), Err(Error::Malformed));
    // A multicast destination (224.0.0.2).
    assert_eq!(
        set(&|v| {
            v[30..34].copy_from_slice(&[224, 0, 0, 2]);
            frag(v, [0x40, 0])
        }),
        Err(Error::Malformed)
    );
    // UDP.
    assert_eq!(
        set(&|v| {
            v[23] = 17;
            frag(v, [0x40, 0])
        }),
        Err(Error::Malformed)
    );
    // Truncated.
    assert!(tcp_reset(&SYN_V4[..40], 0, ROUTER_MAC, &mut buf).is_err());
    // An IPv6 multicast destination.
    let mut v = DATA_V6.to_vec();
    v[38] = 0xff;
    assert_eq!(tcp_reset(&v, 0, ROUTER_MAC, &mut buf), Err(Error::Malformed));
}

mod never_panic {
    use super::*;
    use proptest::prelude::*;
    use wire::{IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket, parse_l2};

    /// A reset built from any frame parses back, with valid checksums and RST set.
    fn check(frame: &[u8]) {
        let mut buf = [0u8; 256];
        let Ok(n) = tcp_reset(frame, 0, ROUTER_MAC, &mut buf) else { return };
        let f = &buf[..n];
        let l2 = parse_l2(f).unwrap();
        let l3 = &f[l2.l3_offset..];
        if l3[0] >> 4 == 4 {
            let ip = Ipv4Packet::new_checked(l3).unwrap();
            assert!(ip.verify_checksum() && ip.protocol() == IpProtocol::Tcp);
            let t = TcpPacket::new_checked(ip.payload()).unwrap();
            assert!(
                t.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()) && t.flags().0 & 0x04 != 0
            );
        } else {
            let ip = Ipv6Packet::new_checked(l3).unwrap();
            let t = TcpPacket::new_checked(ip.payload()).unwrap();
            assert!(
                t.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()) && t.flags().0 & 0x04 != 0
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn mutated_fixtures(v6 in any::<bool>(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4), cut in any::<usize>()) {
            let mut f = if v6 { DATA_V6.to_vec() } else { SYN_V4.to_vec() };
            for (at, v) in flips {
                let i = at % f.len();
                f[i] = v;
            }
            f.truncate(cut % (f.len() + 1));
            check(&f);
        }

        #[test]
        fn random_bytes(frame in proptest::collection::vec(any::<u8>(), 0..120)) {
            check(&frame);
        }
    }
}
