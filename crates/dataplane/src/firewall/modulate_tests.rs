use super::*;
use crate::firewall::scrub::tests::tcp_ck_v4;
use fw::packet::PacketKey;
use proptest::prelude::*;
use wire::checksum::checksum;

/// An IPv4 ACK with data, 10.0.0.1:40000 -> 198.51.100.2:80, options NOP NOP timestamps,
/// NOP NOP SACK with two blocks (data offset 13), 5 bytes of payload; `seq`, `ack` and the
/// block edges as given, checksums filled from scratch.
fn segment(seq: u32, ack: u32, blocks: [u32; 4]) -> Vec<u8> {
    segment_with_nops(seq, ack, blocks, 2)
}

/// [`segment`] with `nops` NOPs before the SACK option (and NOPs after it to a 4-byte
/// boundary): with an odd number the edges start at odd offsets, across the checksum's
/// 16-bit words. Its SACK edges start at byte 54 + `nops` of the packet.
fn segment_with_nops(seq: u32, ack: u32, blocks: [u32; 4], nops: usize) -> Vec<u8> {
    let mut ip = vec![
        0x45, 0x00, 0x00, 0x00, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 10, 0, 0, 1, 198,
        51, 100, 2, //
        0x9c, 0x40, 0x00, 0x50,
    ];
    ip.extend_from_slice(&seq.to_be_bytes());
    ip.extend_from_slice(&ack.to_be_bytes());
    let opts = (12 + nops + 18).div_ceil(4) * 4;
    ip.extend_from_slice(&[((20 + opts) / 4 * 16) as u8, 0x18, 0x01, 0xf5, 0x00, 0x00, 0x00, 0x00]);
    ip.extend_from_slice(&[1, 1, 8, 10, 0x00, 0x9c, 0x27, 0x24, 0x00, 0x01, 0x02, 0x03]);
    ip.extend(std::iter::repeat_n(1, nops));
    ip.extend_from_slice(&[5, 18]);
    for b in blocks {
        ip.extend_from_slice(&b.to_be_bytes());
    }
    ip.resize(40 + opts, 1);
    ip.extend_from_slice(b"hello");
    let len = ip.len() as u16;
    ip[2..4].copy_from_slice(&len.to_be_bytes());
    let c = checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let c = tcp_ck_v4(&ip);
    ip[36..38].copy_from_slice(&c.to_be_bytes());
    ip
}

fn word(ip: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([ip[at], ip[at + 1], ip[at + 2], ip[at + 3]])
}

fn modulated(mut ip: Vec<u8>, m: Modulation) -> Vec<u8> {
    let t = target(&ip, true).expect("a TCP segment");
    let Target::Segment { flow, off } = t else { panic!("{t:?}") };
    assert_eq!(off, 20);
    let k = PacketKey {
        af: fw::packet::Af::Inet,
        proto: proto::TCP,
        src: 0x0a00_0001,
        dst: 0xc633_6402,
        src_port: 40000,
        dst_port: 80,
        ..PacketKey::ZERO
    };
    assert_eq!(flow, Flow::of(&k), "the flow the state table keys");
    apply(&mut ip, t, m);
    ip
}

#[test]
fn initiator_side_shifts_the_sequence_number_only() {
    let ip = segment(1000, 2000, [1, 2, 3, 4]);
    let out = modulated(ip.clone(), Modulation { seq_add: 0x8000_0001, ack_sub: 0 });
    assert_eq!(word(&out, 24), 1000u32.wrapping_add(0x8000_0001));
    assert_eq!(word(&out, 28), 2000);
    // The SACK blocks are the responder's numbers: left alone.
    assert_eq!([word(&out, 56), word(&out, 60), word(&out, 64), word(&out, 68)], [1, 2, 3, 4]);
    assert_eq!(u16::from_be_bytes([out[36], out[37]]), tcp_ck_v4(&out));
    assert_eq!(out[..20], ip[..20], "the IP header is untouched");
}

#[test]
fn responder_side_shifts_the_ack_and_the_sack_blocks_back() {
    let d = 0x1234_5678;
    let ip = segment(
        9,
        5u32.wrapping_add(d),
        [
            10u32.wrapping_add(d),
            20u32.wrapping_add(d),
            30u32.wrapping_add(d),
            40u32.wrapping_add(d),
        ],
    );
    let out = modulated(ip, Modulation { seq_add: 0, ack_sub: d });
    assert_eq!((word(&out, 24), word(&out, 28)), (9, 5));
    assert_eq!([word(&out, 56), word(&out, 60), word(&out, 64), word(&out, 68)], [10, 20, 30, 40]);
    assert_eq!(u16::from_be_bytes([out[36], out[37]]), tcp_ck_v4(&out));
    assert_eq!(&out[out.len() - 5..], b"hello");
}

#[test]
fn not_a_tcp_first_fragment_or_cut_short() {
    let mut ip = segment(1, 2, [0; 4]);
    ip[6] = 0x20;
    ip[7] = 0x01; // offset 8: a later fragment
    assert!(target(&ip, true).is_none());
    let ip = segment(1, 2, [0; 4]);
    assert!(target(&ip[..36], true).is_none(), "no room for the checksum");
    let mut udp = segment(1, 2, [0; 4]);
    udp[9] = proto::UDP;
    assert!(target(&udp, true).is_none());
}

#[test]
fn a_malformed_option_list_ends_the_sack_walk() {
    let d = 7;
    let mut ip = segment(1, 2, [100, 200, 300, 400]);
    ip[40 + 13] = 40; // SACK option length running past the header
    let c = tcp_ck_v4(&ip);
    ip[36..38].copy_from_slice(&c.to_be_bytes());
    let out = modulated(ip, Modulation { seq_add: 0, ack_sub: d });
    assert_eq!(word(&out, 56), 100, "blocks of a malformed option left as they are");
    assert_eq!(word(&out, 28), 2u32.wrapping_sub(d));
    assert_eq!(u16::from_be_bytes([out[36], out[37]]), tcp_ck_v4(&out));
}

#[test]
fn ipv6_segment_found_behind_its_header() {
    let mut ip = vec![0x60, 0, 0, 0, 0, 20, proto::TCP, 64];
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ip.extend_from_slice(&[
        0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    let Some(Target::Segment { flow, off }) = target(&ip, false) else { panic!("a TCP segment") };
    assert_eq!(off, 40);
    let k = PacketKey {
        af: fw::packet::Af::Inet6,
        proto: proto::TCP,
        src: 0x2001_0db8_u128 << 96 | 1,
        dst: 0x2001_0db8_u128 << 96 | 2,
        src_port: 40000,
        dst_port: 80,
        ..PacketKey::ZERO
    };
    assert_eq!(flow, Flow::of(&k));
}

/// A time exceeded from a router beyond, quoting the IPv4 header and 8 bytes of a segment
/// A sent (shifted): the quoted number goes back to A's own, the ICMP checksum holds.
#[test]
fn icmp_error_quoting_a_shifted_segment() {
    let d = 0x4000_0000;
    let seg = segment(1000u32.wrapping_add(d), 0, [0; 4]);
    let mut ip =
        vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto::ICMP, 0, 0, 203, 0, 113, 9, 10, 0, 0, 1];
    ip.extend_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
    ip.extend_from_slice(&seg[..28]);
    let len = ip.len() as u16;
    ip[2..4].copy_from_slice(&len.to_be_bytes());
    let c = checksum(&ip[20..]);
    ip[22..24].copy_from_slice(&c.to_be_bytes());
    let t = target(&ip, true).expect("an error quoting TCP");
    let k = PacketKey {
        af: fw::packet::Af::Inet,
        proto: proto::TCP,
        src: 0x0a00_0001,
        dst: 0xc633_6402,
        src_port: 40000,
        dst_port: 80,
        ..PacketKey::ZERO
    };
    assert_eq!(*t.flow(), Flow::of(&k), "the quoted packet's flow, from its sender");
    apply(&mut ip, t, Modulation { seq_add: d, ack_sub: 0 });
    assert_eq!(word(&ip, 28 + 20 + 4), 1000);
    assert_eq!(checksum(&ip[20..]), 0, "ICMP checksum");
    // A rewrite shifting no sequence number leaves the error alone.
    let before = ip.clone();
    apply(&mut ip, t, Modulation { seq_add: 0, ack_sub: d });
    assert_eq!(ip, before);
}

proptest! {
    /// Any shift of any segment: the fields move by exactly the shift and the checksum is
    /// the one computed from scratch.
    #[test]
    fn checksum_stays_valid(seq in any::<u32>(), ack in any::<u32>(), blocks in any::<[u32; 4]>(),
                            seq_add in any::<u32>(), ack_sub in any::<u32>()) {
        let out = modulated(segment(seq, ack, blocks), Modulation { seq_add, ack_sub });
        prop_assert_eq!(u16::from_be_bytes([out[36], out[37]]), tcp_ck_v4(&out));
        prop_assert_eq!(word(&out, 24), seq.wrapping_add(seq_add));
        prop_assert_eq!(word(&out, 28), ack.wrapping_sub(ack_sub));
        for (i, b) in blocks.iter().enumerate() {
            prop_assert_eq!(word(&out, 56 + 4 * i), b.wrapping_sub(ack_sub));
        }
    }

    /// The same with the SACK edges at any alignment (a stack, or an attacker, need not pad
    /// options to 4 bytes): an edge at an odd offset straddles the checksum's words.
    #[test]
    fn checksum_stays_valid_with_sack_at_any_offset(ack in any::<u32>(), blocks in any::<[u32; 4]>(), ack_sub in any::<u32>(), nops in 0usize..4) {
        let out = modulated(segment_with_nops(1, ack, blocks, nops), Modulation { seq_add: 0, ack_sub });
        prop_assert_eq!(u16::from_be_bytes([out[36], out[37]]), tcp_ck_v4(&out));
        for (i, b) in blocks.iter().enumerate() {
            prop_assert_eq!(word(&out, 54 + nops + 4 * i), b.wrapping_sub(ack_sub));
        }
    }
}
