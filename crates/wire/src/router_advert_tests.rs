use super::*;

fn ip6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// An advertisement from 02:00:00:00:0a:01 (link-local fe80::ff:fe00:a01): hop limit 64,
/// Managed, lifetime 1800 s, MTU 1500, 2001:db8:a::/64 for 30 / 7 days. The checksum was
/// computed independently (Python, RFC 4443 2.3's pseudo-header).
const RA_FIXTURE: [u8; 118] = [
    0x33, 0x33, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0a, 0x01, 0x86, 0xdd, 0x60,
    0x00, //
    0x00, 0x00, 0x00, 0x40, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x00, 0xff, 0xfe, 0x00, 0x0a, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0x00, 0xda, 0x5f, 0x40, 0x80, 0x07, 0x08, 0x00,
    0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0a, 0x01, 0x05,
    0x01, //
    0x00, 0x00, 0x00, 0x00, 0x05, 0xdc, 0x03, 0x04, 0x40, 0xc0, 0x00, 0x27, 0x8d, 0x00, 0x00,
    0x09, //
    0x3a, 0x80, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x0a, 0x00, 0x00, 0x00,
    0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

fn fixture_advert() -> RouterAdvert {
    RouterAdvert {
        hop_limit: 64,
        managed: true,
        other_config: false,
        router_lifetime: 1800,
        reachable_time: 0,
        retrans_timer: 0,
        mtu: Some(1500),
        prefixes: vec![AdvertPrefix {
            prefix: ip6("2001:db8:a::"),
            len: 64,
            valid_lifetime: 2_592_000,
            preferred_lifetime: 604_800,
        }],
    }
}

#[test]
fn builds_the_fixture_byte_for_byte() {
    let mut buf = [0xaau8; 256];
    let mac = MacAddr([2, 0, 0, 0, 0x0a, 0x01]);
    let n = router_advert(mac, ip6("fe80::ff:fe00:a01"), &fixture_advert(), &mut buf).unwrap();
    assert_eq!(n, RA_FIXTURE.len());
    assert_eq!(&buf[..n], &RA_FIXTURE[..]);
    let ip = Ipv6Packet::new_checked(&buf[14..n]).unwrap();
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
}

#[test]
fn flags_lifetime_zero_and_no_options() {
    let mut ra = fixture_advert();
    ra.managed = false;
    ra.other_config = true;
    ra.router_lifetime = 0;
    ra.mtu = None;
    ra.prefixes.clear();
    let mut buf = [0u8; 128];
    let n =
        router_advert(MacAddr([2, 0, 0, 0, 0x0a, 0x01]), ip6("fe80::1"), &ra, &mut buf).unwrap();
    // 14 + 40 + 16 + 8: the source link-layer option only.
    assert_eq!(n, 78);
    let icmp = &buf[54..n];
    assert_eq!(
        (icmp[0], icmp[4], icmp[5], &icmp[6..8]),
        (134, 64, ra_flags::OTHER_CONFIG, &[0u8, 0][..])
    );
    assert_eq!(&icmp[16..18], &[OPT_SOURCE_LL_ADDR, 1]);
    let ip = Ipv6Packet::new_checked(&buf[14..n]).unwrap();
    assert!(
        Icmpv6Packet::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(&ip.src_addr(), &ip.dst_addr())
    );
}

#[test]
fn refuses_a_global_source_and_a_small_buffer() {
    let mut buf = [0u8; 256];
    assert_eq!(
        router_advert(MacAddr([2, 0, 0, 0, 0, 1]), ip6("2001:db8::1"), &fixture_advert(), &mut buf),
        Err(Error::Malformed)
    );
    assert_eq!(
        router_advert(
            MacAddr([2, 0, 0, 0, 0, 1]),
            ip6("fe80::1"),
            &fixture_advert(),
            &mut buf[..100]
        ),
        Err(Error::BufferTooSmall)
    );
}

/// A solicitation from fe80::2 to all-routers with a source link-layer option
/// (02:00:00:00:0a:02), as Linux sends one; checksum computed independently.
const RS_FIXTURE: [u8; 56] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x10, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x85, 0x00, 0x70, 0x2a, 0x00, 0x00, 0x00,
    0x00, //
    0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0a, 0x02,
];

#[test]
fn parses_and_validates_solicitations() {
    let rs = parse_router_solicit(&RS_FIXTURE).unwrap().unwrap();
    assert_eq!(
        rs,
        RouterSolicit { src: ip6("fe80::2"), source_ll: Some(MacAddr([2, 0, 0, 0, 0x0a, 0x02])) }
    );
    let mut bad = RS_FIXTURE;
    bad[7] = 64;
    assert_eq!(parse_router_solicit(&bad), Err(NdError::HopLimit));
    let mut bad = RS_FIXTURE;
    bad[50] ^= 1;
    assert_eq!(parse_router_solicit(&bad), Err(NdError::Checksum));
    // Code 1: the checksum is fixed up by the same amount, so only the code is wrong.
    let mut bad = RS_FIXTURE;
    bad[41] = 1;
    bad[43] = bad[43].wrapping_sub(1);
    assert_eq!(parse_router_solicit(&bad), Err(NdError::Code));
    // Option length 0 (1 less in a low byte: the checksum 1 more).
    let mut bad = RS_FIXTURE;
    bad[49] = 0;
    bad[43] = bad[43].wrapping_add(1);
    assert_eq!(parse_router_solicit(&bad), Err(NdError::ZeroLengthOption));
    // An advertisement, a neighbour solicitation: not ours to judge.
    let mut other = RS_FIXTURE;
    other[40] = 135;
    assert_eq!(parse_router_solicit(&other), Ok(None));
    assert_eq!(parse_router_solicit(&RA_FIXTURE[14..]), Ok(None));
}
