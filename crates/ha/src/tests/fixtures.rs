//! Datagrams written out byte by byte from the layout in `docs/ha.md`, checked against the
//! encoder and the decoder both ways: a change to the layout fails here, not at a peer. The
//! keyed one's tag was computed apart from this crate (Python's `hmac` over the same bytes).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::*;

const DIGEST: u64 = 0x0123_4567_89ab_cdef;
pub(super) const CREATOR: u32 = 0x0a0b_0c0d;

/// An IPv4 TCP state, established, NATed (the initiator's source), its `in` state floating
/// with `allow-opts`, its `out` state bound to `wan0` and tagging with tag 3.
pub(super) fn tcp_v4() -> StateRecord {
    let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
    let window =
        |seqlo, seqhi, max_win| TcpWindow { seqlo, seqhi, seqdiff: 0, max_win, wscale: Some(7) };
    StateRecord {
        id: StateId { creator: CREATOR, counter: 1 },
        family: Family::V4,
        proto: 6,
        initiator: Endpoint { addr: v4(192, 0, 2, 10), port: 40000 },
        responder: Endpoint { addr: v4(198, 51, 100, 20), port: 443 },
        translation: Some(Translation {
            side: Side::Initiator,
            addr: v4(203, 0, 113, 5),
            port: 61000,
        }),
        rule: RuleRef { digest: DIGEST, index: 7 },
        from_initiator: Some(PfState { interface: None, allow_opts: true, tag: 0 }),
        from_responder: Some(PfState { interface: Some("wan0".into()), allow_opts: false, tag: 3 }),
        peers: [
            Peer { state: tcp_state::ESTABLISHED, window: Some(window(1000, 66535, 64240)) },
            Peer { state: tcp_state::ESTABLISHED, window: Some(window(5000, 70000, 65160)) },
        ],
        expire_in: 86400,
        timeout: TimeoutClass::TcpEstablished,
        sloppy: false,
        packets: [10, 8],
        bytes: [1200, 6400],
    }
}

#[rustfmt::skip]
pub(super) const TCP_V4: [u8; 184] = [
    // Header: magic "LRHA", version 1, flags 0, 1 message, 184 bytes, reserved.
    0x4c, 0x52, 0x48, 0x41, 0x01, 0x00, 0x00, 0x01, 0x00, 0xb8, 0x00, 0x00,
    // Sender 0x0a0b0c0d, sequence 42.
    0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 0, 0, 0, 0x2a,
    // Subheader: INS, reserved, 156 bytes.
    0x01, 0x00, 0x00, 0x9c,
    // 0: id (0x0a0b0c0d, 1).
    0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 0, 0, 0, 0x01,
    // 12: family 4, TCP, tcp.established, flags: translated (the initiator).
    0x04, 0x06, 0x02, 0x02,
    // 16: rule-set digest; 24: rule 7; 28: expires in 86400 s.
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
    0x00, 0x00, 0x00, 0x07,
    0x00, 0x01, 0x51, 0x80,
    // 32: ports 40000, 443, translated 61000; reserved.
    0x9c, 0x40, 0x01, 0xbb, 0xee, 0x48, 0x00, 0x00,
    // 40: initiator: seqlo 1000, seqhi 66535, seqdiff 0, max_win 64240, scale 7, ESTABLISHED.
    0x00, 0x00, 0x03, 0xe8, 0x00, 0x01, 0x03, 0xe7, 0, 0, 0, 0, 0xfa, 0xf0, 0x87, 0x04,
    // 56: responder: seqlo 5000, seqhi 70000, seqdiff 0, max_win 65160, scale 7, ESTABLISHED.
    0x00, 0x00, 0x13, 0x88, 0x00, 0x01, 0x11, 0x70, 0, 0, 0, 0, 0xfe, 0x88, 0x87, 0x04,
    // 72: packets 10, 8; bytes 1200, 6400.
    0, 0, 0, 0, 0, 0, 0, 0x0a,
    0, 0, 0, 0, 0, 0, 0, 0x08,
    0, 0, 0, 0, 0, 0, 0x04, 0xb0,
    0, 0, 0, 0, 0, 0, 0x19, 0x00,
    // 104: pf state from the initiator: present + allow-opts, tag 0, floating.
    0x03, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    // 124: pf state from the responder: present, tag 3, bound to "wan0".
    0x01, 0x00, 0x00, 0x03, b'w', b'a', b'n', b'0', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    // 144: 192.0.2.10, 198.51.100.20, translated 203.0.113.5.
    0xc0, 0x00, 0x02, 0x0a, 0xc6, 0x33, 0x64, 0x14, 0xcb, 0x00, 0x71, 0x05,
];

/// An IPv6 UDP state (a DNS query and its answer), both ends MULTIPLE, only its `in` state,
/// bound to `eth1`.
pub(super) fn udp_v6() -> StateRecord {
    let v6 = |s: &str| IpAddr::V6(s.parse::<Ipv6Addr>().unwrap());
    let multiple = Peer { state: 2, window: None };
    StateRecord {
        id: StateId { creator: CREATOR, counter: 2 },
        family: Family::V6,
        proto: 17,
        initiator: Endpoint { addr: v6("2001:db8::1"), port: 5353 },
        responder: Endpoint { addr: v6("2001:db8:1::53"), port: 53 },
        translation: None,
        rule: RuleRef { digest: DIGEST, index: 12 },
        from_initiator: Some(PfState { interface: Some("eth1".into()), allow_opts: false, tag: 0 }),
        from_responder: None,
        peers: [multiple, multiple],
        expire_in: 60,
        timeout: TimeoutClass::UdpMultiple,
        sloppy: false,
        packets: [3, 3],
        bytes: [210, 450],
    }
}

#[rustfmt::skip]
pub(super) const UDP_V6: [u8; 204] = [
    // Header: "LRHA", version 1, flags 0, 1 message, 204 bytes; sender, sequence 43.
    0x4c, 0x52, 0x48, 0x41, 0x01, 0x00, 0x00, 0x01, 0x00, 0xcc, 0x00, 0x00,
    0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 0, 0, 0, 0x2b,
    // Subheader: INS, 176 bytes.
    0x01, 0x00, 0x00, 0xb0,
    // 0: id (0x0a0b0c0d, 2); 12: family 6, UDP, udp.multiple, no flags.
    0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 0, 0, 0, 0x02,
    0x06, 0x11, 0x08, 0x00,
    // 16: digest; 24: rule 12; 28: expires in 60 s.
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
    0x00, 0x00, 0x00, 0x0c,
    0x00, 0x00, 0x00, 0x3c,
    // 32: ports 5353, 53, no translation; reserved.
    0x14, 0xe9, 0x00, 0x35, 0x00, 0x00, 0x00, 0x00,
    // 40, 56: no TCP tracking, pseudo-state MULTIPLE for each end.
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
    // 72: packets 3, 3; bytes 210, 450.
    0, 0, 0, 0, 0, 0, 0, 0x03,
    0, 0, 0, 0, 0, 0, 0, 0x03,
    0, 0, 0, 0, 0, 0, 0, 0xd2,
    0, 0, 0, 0, 0, 0, 0x01, 0xc2,
    // 104: from the initiator: present, bound to "eth1". 124: none from the responder.
    0x01, 0x00, 0x00, 0x00, b'e', b't', b'h', b'1', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    // 144: 2001:db8::1, 2001:db8:1::53.
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
    0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53,
];

/// The key of [`TCP_V4_TAG`].
pub(super) const KEY: &[u8; 32] = b"linerate-ha-fixture-key-32-bytes";

/// The tag of [`TCP_V4`] sent with [`KEY`]: flags 0x01 and length 216 in its header, then
/// HMAC-SHA256 over those 184 bytes (computed by Python's `hmac`).
#[rustfmt::skip]
pub(super) const TCP_V4_TAG: [u8; 32] = [
    0xae, 0xcb, 0x9a, 0x5d, 0x35, 0x95, 0x09, 0x2a, 0x32, 0xbd, 0x76, 0x13, 0x2d, 0x6c, 0x96, 0x62,
    0x80, 0x76, 0xf6, 0x81, 0xa7, 0xcb, 0x93, 0x63, 0x02, 0xd7, 0x41, 0x92, 0xe5, 0xe0, 0xd9, 0xa6,
];

fn header(sequence: u64) -> Header {
    Header { creator: CREATOR, sequence }
}

#[test]
fn ipv4_tcp_insert_encodes_to_the_fixture_and_back() {
    let msgs = [Message::Insert(tcp_v4())];
    let encoded = encode(&msgs, &header(42), None, 1500).unwrap();
    assert_eq!(encoded.taken, 1);
    assert_eq!(encoded.bytes, TCP_V4);
    let d = decode(&TCP_V4, None).unwrap();
    assert_eq!(d.header, header(42));
    assert_eq!(d.messages, msgs);
    assert_eq!((d.skipped, d.authenticated), (0, false));
}

#[test]
fn ipv6_udp_insert_encodes_to_the_fixture_and_back() {
    let msgs = [Message::Insert(udp_v6())];
    assert_eq!(encode(&msgs, &header(43), None, 1500).unwrap().bytes, UDP_V6);
    assert_eq!(decode(&UDP_V6, None).unwrap().messages, msgs);
}

#[test]
fn the_keyed_fixture_carries_an_independently_computed_tag() {
    let key = Key::new(KEY).unwrap();
    let msgs = [Message::Insert(tcp_v4())];
    let bytes = encode(&msgs, &header(42), Some(&key), 1500).unwrap().bytes;
    let mut want = TCP_V4.to_vec();
    want[5] = 0x01;
    want[9] = 0xd8;
    want.extend_from_slice(&TCP_V4_TAG);
    assert_eq!(bytes, want);
    let d = decode(&want, Some(&key)).unwrap();
    assert!(d.authenticated);
    assert_eq!(d.messages, msgs);
}
