//! ARP and Neighbor Discovery builders (`wire::ndisc`) on frames captured from Linux 6.x:
//! replies are parsed back with the crate's views and every checksum verified.

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::ndisc::{
    self, OPT_SOURCE_LL_ADDR, OPT_TARGET_LL_ADDR, anycast_neighbor_advert, arp_reply, arp_request,
    multicast_mac, na_flags, ndp_option_mac, neighbor_advert, neighbor_solicit, solicited_node,
};
use wire::{
    ArpOperation, ArpPacket, Error, EtherType, EthernetFrame, Icmpv6Packet, Icmpv6Type, IpProtocol,
    Ipv6Packet, MacAddr, parse_l2,
};

const ROUTER_MAC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0xaa, 0x01]);

/// Parses `tcpdump -xx` hex (whitespace ignored).
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

/// Linux resolving 2001:db8::2 from 2001:db8::1 (02:00:00:00:00:01): NS to ff02::1:ff00:2
/// with a source link-layer address option.
fn ns_capture() -> Vec<u8> {
    hex("3333 ff00 0002 0200 0000 0001 86dd 6000
         0000 0020 3aff 2001 0db8 0000 0000 0000
         0000 0000 0001 ff02 0000 0000 0000 0000
         0001 ff00 0002 8700 1c27 0000 0000 2001
         0db8 0000 0000 0000 0000 0000 0002 0101
         0200 0000 0001")
}

/// Linux's duplicate address detection for 2001:db8::1: NS from :: with a nonce option
/// (type 14, RFC 7527) and no source link-layer address.
fn dad_capture() -> Vec<u8> {
    hex("3333 ff00 0001 0200 0000 0001 86dd 6000
         0000 0020 3aff 0000 0000 0000 0000 0000
         0000 0000 0000 ff02 0000 0000 0000 0000
         0001 ff00 0001 8700 f39e 0000 0000 2001
         0db8 0000 0000 0000 0000 0000 0001 0e01
         9b78 73b5 3c17")
}

/// A real ARP request on Ethernet ("who has 24.166.173.159? tell 24.166.172.1" from
/// 00:07:0d:af:f4:54), padded to 60 bytes: the fixture of `arp.rs`.
const ARP_REQUEST: [u8; 60] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54, 0x08, 0x06, 0x00, 0x01,
    0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54, 0x18, 0xa6, 0xac, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0xa6, 0xad, 0x9f, 0x06, 0x01, 0x04, 0x00, 0x00, 0x00,
    0x00, 0x02, 0x01, 0x00, 0x03, 0x02, 0x00, 0x00, 0x05, 0x01, 0x03, 0x01,
];

/// Recomputes the ICMPv6 checksum of an untagged frame after an edit.
fn fix_checksum(f: &mut [u8]) {
    let ip = Ipv6Packet::new_unchecked(&f[14..]);
    let (s, d) = (ip.src_addr(), ip.dst_addr());
    let end = 54 + usize::from(ip.payload_len());
    Icmpv6Packet::new_unchecked(&mut f[54..end]).fill_checksum(&s, &d);
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn captures_parse_as_expected() {
    for f in [ns_capture(), dad_capture()] {
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
        assert_eq!(icmp.msg_type(), Icmpv6Type::NeighborSolicit);
        assert_eq!(ip.dst_addr(), solicited_node(icmp.ndp_target_addr().unwrap()));
        assert_eq!(&f[..6], &multicast_mac(ip.dst_addr()).0);
    }
}

#[test]
fn address_helpers() {
    assert_eq!(solicited_node(v6("2001:db8::1:2345:6789")), v6("ff02::1:ff45:6789"));
    assert_eq!(solicited_node(v6("fe80::ff:fe00:2")), v6("ff02::1:ff00:2"));
    assert_eq!(multicast_mac(v6("ff02::1")), MacAddr([0x33, 0x33, 0, 0, 0, 1]));
    assert_eq!(
        multicast_mac(v6("ff02::1:ff45:6789")),
        MacAddr([0x33, 0x33, 0xff, 0x45, 0x67, 0x89])
    );
}

#[test]
fn ndp_options() {
    let ns = ns_capture();
    let opts = &ns[14 + 40 + 24..];
    assert_eq!(ndp_option_mac(opts, OPT_SOURCE_LL_ADDR), Ok(Some(MacAddr([2, 0, 0, 0, 0, 1]))));
    assert_eq!(ndp_option_mac(opts, OPT_TARGET_LL_ADDR), Ok(None));
    let dad = dad_capture();
    assert_eq!(ndp_option_mac(&dad[14 + 40 + 24..], OPT_SOURCE_LL_ADDR), Ok(None)); // nonce skipped
    assert_eq!(ndp_option_mac(&[], OPT_SOURCE_LL_ADDR), Ok(None));
    assert_eq!(ndp_option_mac(&[1, 0, 0, 0, 0, 0, 0, 0], 1), Err(Error::Malformed));
    assert_eq!(ndp_option_mac(&[1, 2, 0, 0, 0, 0, 0, 0], 1), Err(Error::Truncated));
    assert_eq!(ndp_option_mac(&[1], 1), Err(Error::Truncated));
    // The first matching option wins.
    let two = [[1, 1, 1, 2, 3, 4, 5, 6], [1, 1, 9, 9, 9, 9, 9, 9]].concat();
    assert_eq!(ndp_option_mac(&two, 1), Ok(Some(MacAddr([1, 2, 3, 4, 5, 6]))));
}

/// Checks a built NA completely; returns (IPv6 src, dst, flags, target).
fn parse_na(f: &[u8], to_mac: MacAddr) -> (Ipv6Addr, Ipv6Addr, u32, Ipv6Addr) {
    let eth = EthernetFrame::new_checked(f).unwrap();
    assert_eq!(
        (eth.dst_addr(), eth.src_addr(), eth.ethertype()),
        (to_mac, ROUTER_MAC, EtherType::Ipv6)
    );
    let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
    assert_eq!((ip.next_header(), ip.hop_limit(), ip.payload_len()), (IpProtocol::Icmpv6, 255, 32));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
    assert_eq!((icmp.msg_type(), icmp.code()), (Icmpv6Type::NeighborAdvert, 0));
    assert_eq!(ndp_option_mac(&ip.payload()[24..], OPT_TARGET_LL_ADDR), Ok(Some(ROUTER_MAC)));
    (ip.src_addr(), ip.dst_addr(), icmp.rest_of_header(), icmp.ndp_target_addr().unwrap())
}

#[test]
fn neighbor_advert_answers_solicitation() {
    let mut buf = [0u8; 200];
    let ns = ns_capture();
    let n = neighbor_advert(&ns, ROUTER_MAC, v6("2001:db8::2"), &mut buf).unwrap();
    assert_eq!(n, 14 + 40 + 32);
    // To the solicitor, at the MAC from its option, solicited + override + router.
    let (src, dst, flags, target) = parse_na(&buf[..n], MacAddr([2, 0, 0, 0, 0, 1]));
    assert_eq!((src, dst, target), (v6("2001:db8::2"), v6("2001:db8::1"), v6("2001:db8::2")));
    assert_eq!(flags, na_flags::ROUTER | na_flags::SOLICITED | na_flags::OVERRIDE);
    assert_eq!(flags, 0xe000_0000);

    // Without the option, to the frame's source MAC (checksum fixed after cutting it).
    let mut bare = ns[..14 + 40 + 24].to_vec();
    bare[18..20].copy_from_slice(&24u16.to_be_bytes());
    fix_checksum(&mut bare);
    bare[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x77]);
    let n = neighbor_advert(&bare, ROUTER_MAC, v6("2001:db8::2"), &mut buf).unwrap();
    parse_na(&buf[..n], MacAddr([2, 0, 0, 0, 0, 0x77]));
}

/// An anycast target (the Subnet-Router anycast address) is answered without Override (RFC
/// 4861 7.2.4), the rest as for a unicast one.
#[test]
fn anycast_advert_leaves_override_clear() {
    let mut buf = [0u8; 200];
    let n =
        anycast_neighbor_advert(&ns_capture(), ROUTER_MAC, v6("2001:db8::2"), &mut buf).unwrap();
    let (src, _, flags, target) = parse_na(&buf[..n], MacAddr([2, 0, 0, 0, 0, 1]));
    assert_eq!((src, target), (v6("2001:db8::2"), v6("2001:db8::2")));
    assert_eq!(flags, na_flags::ROUTER | na_flags::SOLICITED);
}

#[test]
fn neighbor_advert_answers_dad_to_all_nodes() {
    let mut buf = [0u8; 200];
    let n = neighbor_advert(&dad_capture(), ROUTER_MAC, v6("2001:db8::1"), &mut buf).unwrap();
    let (src, dst, flags, target) = parse_na(&buf[..n], MacAddr([0x33, 0x33, 0, 0, 0, 1]));
    assert_eq!((src, dst, target), (v6("2001:db8::1"), v6("ff02::1"), v6("2001:db8::1")));
    assert_eq!(flags, na_flags::ROUTER | na_flags::OVERRIDE); // not solicited (RFC 4861 7.2.4)
}

#[test]
fn neighbor_advert_validates_solicitation() {
    let mut buf = [0u8; 200];
    let ns = ns_capture();
    let target = v6("2001:db8::2");
    // Someone else's address.
    assert_eq!(
        neighbor_advert(&ns, ROUTER_MAC, v6("2001:db8::3"), &mut buf),
        Err(Error::Malformed)
    );
    // Hop limit not 255 (RFC 4861 7.1.1: possibly off-link).
    let mut f = ns.clone();
    f[21] = 254;
    assert_eq!(neighbor_advert(&f, ROUTER_MAC, target, &mut buf), Err(Error::Malformed));
    // Bad checksum.
    let mut f = ns.clone();
    f[57] ^= 1;
    assert_eq!(neighbor_advert(&f, ROUTER_MAC, target, &mut buf), Err(Error::Malformed));
    // Code not 0.
    let mut f = ns.clone();
    f[55] = 1;
    fix_checksum(&mut f);
    assert_eq!(neighbor_advert(&f, ROUTER_MAC, target, &mut buf), Err(Error::Malformed));
    // Not a solicitation (an echo request), not IPv6, truncated.
    let mut f = ns.clone();
    f[54] = 128;
    fix_checksum(&mut f);
    assert_eq!(neighbor_advert(&f, ROUTER_MAC, target, &mut buf), Err(Error::Malformed));
    assert_eq!(neighbor_advert(&ARP_REQUEST, ROUTER_MAC, target, &mut buf), Err(Error::Malformed));
    assert_eq!(neighbor_advert(&ns[..70], ROUTER_MAC, target, &mut buf), Err(Error::Truncated));
    // DAD with a source link-layer option is invalid (7.1.1).
    let mut dad = dad_capture();
    dad[78] = OPT_SOURCE_LL_ADDR;
    fix_checksum(&mut dad);
    let e = neighbor_advert(&dad, ROUTER_MAC, v6("2001:db8::1"), &mut buf);
    assert_eq!(e, Err(Error::Malformed));
    // ... as is DAD to anything but the solicited-node group.
    let mut dad = dad_capture();
    dad[38..54].copy_from_slice(&v6("ff02::1").octets());
    fix_checksum(&mut dad);
    let e = neighbor_advert(&dad, ROUTER_MAC, v6("2001:db8::1"), &mut buf);
    assert_eq!(e, Err(Error::Malformed));
    // A multicast target.
    let mut f = ns.clone();
    f[62..78].copy_from_slice(&v6("ff02::2").octets());
    fix_checksum(&mut f);
    assert_eq!(neighbor_advert(&f, ROUTER_MAC, v6("ff02::2"), &mut buf), Err(Error::Malformed));
    // Sanity: an edited-and-refixed but otherwise valid NS is still answered.
    let mut f = ns.clone();
    fix_checksum(&mut f);
    assert!(neighbor_advert(&f, ROUTER_MAC, target, &mut buf).is_ok());
    assert_eq!(
        neighbor_advert(&ns, ROUTER_MAC, target, &mut buf[..85]),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn neighbor_solicit_multicast_unicast_and_dad() {
    let mut buf = [0u8; 200];
    let src = v6("2001:db8::1");
    let n = neighbor_solicit(MacAddr([2, 0, 0, 0, 0, 1]), src, v6("2001:db8::2"), None, &mut buf)
        .unwrap();
    // Byte for byte what Linux sent.
    assert_eq!(&buf[..n], &ns_capture()[..]);

    let peer = MacAddr([2, 0, 0, 0, 0, 2]);
    let n = neighbor_solicit(ROUTER_MAC, src, v6("2001:db8::2"), Some(peer), &mut buf).unwrap();
    let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
    assert_eq!((eth.dst_addr(), eth.src_addr()), (peer, ROUTER_MAC));
    let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
    assert_eq!((ip.src_addr(), ip.dst_addr(), ip.hop_limit()), (src, v6("2001:db8::2"), 255));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
    assert_eq!(ndp_option_mac(&ip.payload()[24..], OPT_SOURCE_LL_ADDR), Ok(Some(ROUTER_MAC)));

    // From :: (DAD): no option, 24-byte message.
    let n = neighbor_solicit(ROUTER_MAC, Ipv6Addr::UNSPECIFIED, v6("2001:db8::1"), None, &mut buf)
        .unwrap();
    let ip = Ipv6Packet::new_checked(&buf[14..n]).unwrap();
    assert_eq!((ip.payload_len(), ip.dst_addr()), (24, v6("ff02::1:ff00:1")));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
    // And our own NA builder accepts it.
    let mut na = [0u8; 200];
    assert!(
        neighbor_advert(&buf[..n], MacAddr([2, 0, 0, 0, 0, 9]), v6("2001:db8::1"), &mut na).is_ok()
    );

    assert_eq!(
        neighbor_solicit(ROUTER_MAC, src, v6("ff02::1"), None, &mut buf),
        Err(Error::Malformed)
    );
    assert_eq!(
        neighbor_solicit(ROUTER_MAC, src, v6("2001:db8::2"), None, &mut buf[..85]),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn arp_reply_to_real_request() {
    let mut buf = [0u8; 100];
    let ours = Ipv4Addr::new(24, 166, 173, 159);
    let n = arp_reply(&ARP_REQUEST, ROUTER_MAC, ours, &mut buf).unwrap();
    assert_eq!(n, 60);
    let requester = MacAddr([0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54]);
    let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
    assert_eq!(
        (eth.dst_addr(), eth.src_addr(), eth.ethertype()),
        (requester, ROUTER_MAC, EtherType::Arp)
    );
    let arp = ArpPacket::new_checked(eth.payload()).unwrap();
    assert_eq!(arp.operation(), ArpOperation::Reply);
    assert_eq!((arp.sender_hw_addr(), arp.sender_proto_addr()), (ROUTER_MAC, ours));
    assert_eq!(
        (arp.target_hw_addr(), arp.target_proto_addr()),
        (requester, Ipv4Addr::new(24, 166, 172, 1))
    );
    assert!(buf[42..60].iter().all(|&b| b == 0));

    // Not ours, not a request, not ARP.
    let other = Ipv4Addr::new(24, 166, 173, 1);
    assert_eq!(arp_reply(&ARP_REQUEST, ROUTER_MAC, other, &mut buf), Err(Error::Malformed));
    let mut reply = ARP_REQUEST;
    reply[21] = 2;
    assert_eq!(arp_reply(&reply, ROUTER_MAC, ours, &mut buf), Err(Error::Malformed));
    assert_eq!(arp_reply(&ns_capture(), ROUTER_MAC, ours, &mut buf), Err(Error::Malformed));
    assert_eq!(arp_reply(&ARP_REQUEST[..40], ROUTER_MAC, ours, &mut buf), Err(Error::Truncated));

    // A tagged request gets a tagged reply.
    let mut tagged = ARP_REQUEST[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
    tagged.extend_from_slice(&ARP_REQUEST[12..]);
    let n = arp_reply(&tagged, ROUTER_MAC, ours, &mut buf).unwrap();
    let l2 = parse_l2(&buf[..n]).unwrap();
    assert_eq!((l2.ethertype, l2.vlans), (EtherType::Arp, [Some(7), None]));
    assert_eq!(ArpPacket::new_checked(&buf[18..n]).unwrap().operation(), ArpOperation::Reply);
}

#[test]
fn arp_request_broadcast_and_unicast() {
    let mut buf = [0u8; 100];
    let (me, them) = (Ipv4Addr::new(24, 166, 172, 1), Ipv4Addr::new(24, 166, 173, 159));
    let mac = MacAddr([0x00, 0x07, 0x0d, 0xaf, 0xf4, 0x54]);
    let n = arp_request(mac, me, them, None, &mut buf).unwrap();
    // The captured request, up to its (non-zero) padding.
    assert_eq!(&buf[..42], &ARP_REQUEST[..42]);
    assert!(buf[42..n].iter().all(|&b| b == 0));
    // Our own reply builder answers it.
    let mut reply = [0u8; 100];
    assert_eq!(arp_reply(&buf[..n], ROUTER_MAC, them, &mut reply), Ok(60));

    let n = arp_request(ROUTER_MAC, me, them, Some(mac), &mut buf).unwrap();
    let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
    assert_eq!(eth.dst_addr(), mac);
    let arp = ArpPacket::new_checked(eth.payload()).unwrap();
    assert_eq!((arp.operation(), arp.target_hw_addr()), (ArpOperation::Request, MacAddr::ZERO));
    assert_eq!(arp_request(ROUTER_MAC, me, them, None, &mut buf[..59]), Err(Error::BufferTooSmall));
}

#[test]
fn unsolicited_advert_to_all_nodes() {
    let mac = MacAddr([2, 0, 0, 0, 0, 1]);
    let target: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let mut buf = [0u8; 128];
    let n = ndisc::unsolicited_advert(mac, target, &mut buf).unwrap();
    let f = &buf[..n];
    assert_eq!(&f[0..6], &[0x33, 0x33, 0, 0, 0, 1]);
    let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
    assert_eq!((ip.src_addr(), ip.hop_limit()), (target, ndisc::ND_HOP_LIMIT));
    let na = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(na.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
    assert_eq!(na.msg_type(), Icmpv6Type::NeighborAdvert);
    assert_eq!(na.rest_of_header() & ndisc::na_flags::SOLICITED, 0);
    assert_eq!(na.ndp_target_addr(), Some(target));
    assert_eq!(
        ndisc::ndp_option_mac(&ip.payload()[24..], ndisc::OPT_TARGET_LL_ADDR).unwrap(),
        Some(mac)
    );
    assert!(ndisc::unsolicited_advert(mac, "ff02::1".parse().unwrap(), &mut buf).is_err());
}

/// `parse_nd` on the captures, then on each RFC 4861 7.1 violation, one at a time.
#[test]
fn parse_nd_validates_each_rule() {
    use wire::ndisc::{NdError, parse_nd, unsolicited_advert};
    let ns = ns_capture();
    let m = parse_nd(&ns[14..]).unwrap().unwrap();
    assert_eq!(
        (m.kind, m.src, m.target),
        (Icmpv6Type::NeighborSolicit, v6("2001:db8::1"), v6("2001:db8::2"))
    );
    assert_eq!((m.source_ll, m.target_ll, m.flags), (Some(MacAddr([2, 0, 0, 0, 0, 1])), None, 0));
    assert!(parse_nd(&dad_capture()[14..]).unwrap().is_some());
    assert_eq!(parse_nd(&ARP_REQUEST[14..]), Ok(None), "not IPv6");
    let edit = |f: &[u8], at: usize, v: &[u8], fix: bool| {
        let mut f = f.to_vec();
        f[at..at + v.len()].copy_from_slice(v);
        if fix {
            fix_checksum(&mut f);
        }
        parse_nd(&f[14..])
    };
    assert_eq!(edit(&ns, 54, &[128], true), Ok(None), "an echo request");
    assert_eq!(edit(&ns, 21, &[64], false), Err(NdError::HopLimit));
    assert_eq!(edit(&ns, 57, &[0], false), Err(NdError::Checksum));
    assert_eq!(edit(&ns, 55, &[1], true), Err(NdError::Code));
    assert_eq!(edit(&ns, 62, &v6("ff02::1").octets(), true), Err(NdError::TargetMulticast));
    assert_eq!(edit(&ns, 79, &[0], true), Err(NdError::ZeroLengthOption));
    assert_eq!(edit(&ns, 79, &[2], true), Err(NdError::TooShort), "option past the end");
    let mut short = ns[..14 + 40 + 20].to_vec();
    short[18..20].copy_from_slice(&20u16.to_be_bytes());
    fix_checksum(&mut short);
    assert_eq!(parse_nd(&short[14..]), Err(NdError::TooShort));
    let dad = dad_capture();
    assert_eq!(edit(&dad, 78, &[OPT_SOURCE_LL_ADDR], true), Err(NdError::DadSourceLlOption));
    assert_eq!(edit(&dad, 38, &v6("ff02::1").octets(), true), Err(NdError::DadDestination));
    // An advertisement to all nodes: fine unsolicited, invalid with the Solicited flag.
    let mut buf = [0u8; 128];
    let n = unsolicited_advert(ROUTER_MAC, v6("2001:db8::5"), &mut buf).unwrap();
    let na = buf[..n].to_vec();
    let m = parse_nd(&na[14..]).unwrap().unwrap();
    assert_eq!(
        (m.kind, m.target_ll, m.solicited(), m.override_flag()),
        (Icmpv6Type::NeighborAdvert, Some(ROUTER_MAC), false, true)
    );
    assert_eq!(edit(&na, 58, &[0xe0], true), Err(NdError::MulticastSolicited));
    let names: std::collections::HashSet<_> = NdError::ALL.iter().map(|e| e.name()).collect();
    assert_eq!(names.len(), NdError::ALL.len());
}
