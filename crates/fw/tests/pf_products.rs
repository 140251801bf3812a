//! The rule sets pfSense and OPNsense write (`/tmp/rules.debug`), as fixtures written after
//! those products' output (`tests/fixtures/{pfsense,opnsense}`): they load whole, and the
//! compiled classifier decides crafted and random packets as the reference evaluator does,
//! by the rules an administrator of those products would expect.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use fw::classifier::Classifier;
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::reference::evaluate;
use fw::rules::{Action, RuleSet, parse_with_addresses};
use fw::state::Tmo;
use fw::testgen::{Rng, boundaries};

const WAN: u16 = 0;
const LAN: u16 = 1;

fn ifaces(name: &str) -> Option<u16> {
    ["lr-wan", "lr-lan"].iter().position(|n| *n == name).map(|i| i as u16)
}

fn addresses() -> Vec<(String, Vec<(IpAddr, u8)>)> {
    let a = |s: &str| s.parse::<IpAddr>().unwrap();
    vec![
        ("lr-wan".into(), vec![(a("198.18.0.1"), 24), (a("2001:db8:18::1"), 64)]),
        ("lr-lan".into(), vec![(a("10.0.0.1"), 24), (a("fd00:10::1"), 64)]),
    ]
}

fn path(product: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(product).join("rules.debug")
}

fn load(product: &str) -> RuleSet {
    let text = std::fs::read_to_string(path(product)).unwrap();
    parse_with_addresses(&text, &path(product), &ifaces, &addresses())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Both products' files load as they write them: no line is left out.
#[test]
fn fixtures_load_whole() {
    for product in ["pfsense", "opnsense"] {
        let text = std::fs::read_to_string(path(product)).unwrap();
        assert!(!text.contains("refused by linerate"), "{product}");
        parse_with_addresses(&text, &path(product), &ifaces, &addresses())
            .unwrap_or_else(|e| panic!("{product}: {e}"));
    }
}

#[test]
fn fixtures_load_with_their_settings_and_notices() {
    let rs = load("pfsense");
    // 49 pass and block lines, two on lo0 left out, antispoof's two.
    assert_eq!(rs.rules.len(), 49);
    assert_eq!((rs.limit_states, rs.limit_src_nodes), (48000, 48000));
    assert!(rs.skip.is_empty(), "pfsync0 and lo0 are not linerate's interfaces");
    assert_eq!(rs.scrub.len(), 3);
    assert_eq!(rs.nat.len(), 6, "no nat, no rdr, two nat, two rdr");
    let p = path("pfsense").display().to_string();
    assert!(rs.notices.contains(&format!("{p}:32:13: `set skip on pfsync0`: no interface \"pfsync0\" is configured, nothing to skip")), "{:?}", rs.notices);
    assert!(rs.notices.contains(&format!("{p}:153:1: anchor \"userrules/*\" holds no rules: linerate does not load rules into anchors at run time (`pfctl -a`), so it matches nothing")), "{:?}", rs.notices);
    assert!(rs.notices.contains(&format!("{p}:43:1: nat-anchor \"natearly/*\" holds no rules: linerate does not load rules into anchors at run time (`pfctl -a`), so it matches nothing")));
    let anchors = rs.notices.iter().filter(|n| n.contains("holds no rules")).count();
    let loopback = rs.notices.iter().filter(|n| n.contains("loopback")).count();
    assert!(rs.notices.contains(&format!("{p}:38:24: `fragment reassemble`: linerate does not reassemble; it judges every fragment as pf judges the reassembled datagram (by its first fragment's protocol and ports, a fragment that comes ahead of its first waiting for it) and forwards the fragments as they came, those of a datagram whose last fragment never comes too (docs/firewall.md, \"Normalization\")")), "{:?}", rs.notices);
    assert_eq!((anchors, loopback, rs.notices.len()), (10, 2, 14));
    // The per-rule timeouts and identifiers are the rules' own.
    let rule = |rid: u32| {
        rs.rules
            .iter()
            .find(|r| r.ridentifier == Some(rid))
            .unwrap_or_else(|| panic!("no rule {rid}"))
    };
    assert_eq!(rule(1770001002).state_timeouts, [(Tmo::TcpEstablished, 3600)]);
    assert_eq!(rule(1770001006).state_timeouts, [(Tmo::UdpFirst, 30), (Tmo::UdpMultiple, 90)]);
    assert_eq!(
        rule(1770001008).label.as_deref(),
        Some("USER_RULE: admins (old tracker)"),
        "`tracker` is read as `ridentifier`"
    );
    assert!(rule(1000002620).action == Action::Block, "antispoof's rules carry its ridentifier");
    // `set optimization normal` is pf's defaults; pfSense turns adaptive scaling off.
    assert_eq!(
        rs.timeouts,
        fw::state::Timeouts { adaptive_start: 0, adaptive_end: 0, ..Default::default() }
    );
    assert_eq!(rs.timeouts.adaptive(), None);

    let rs = load("opnsense");
    assert_eq!((rs.rules.len(), rs.limit_states), (39, 48000));
    assert_eq!(rs.nat.len(), 4);
    let r = rs
        .rules
        .iter()
        .find(|r| r.label.as_deref() == Some("8e9fa0b1c2d3e4f5061728394a5b6c7d"))
        .unwrap();
    assert_eq!(r.state_timeouts, [(Tmo::TcpEstablished, 3600), (Tmo::TcpClosing, 60)]);
    assert!(rs.rules.iter().all(|r| r.ridentifier.is_none()));
}

/// A packet of family `af` seen in direction `dir` on interface `iface`.
fn key(
    (af, dir, iface): (Af, Dir, u16),
    proto: u8,
    src: &str,
    dst: &str,
    sp: u16,
    dp: u16,
) -> PacketKey {
    let addr = |s: &str| match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    PacketKey {
        af,
        dir,
        iface,
        proto,
        src: addr(src),
        dst: addr(dst),
        src_port: sp,
        dst_port: dp,
        tcp_flags: if proto == proto::TCP { 0x02 } else { 0 },
        len: 60,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

fn v4(dir: Dir, iface: u16, proto: u8, src: &str, dst: &str, sp: u16, dp: u16) -> PacketKey {
    key((Af::Inet, dir, iface), proto, src, dst, sp, dp)
}

/// The classifier's verdict, checked against the reference's: the action and the deciding
/// rule's ridentifier and label.
fn decide(rs: &RuleSet, cl: &Classifier, k: &PacketKey) -> (Action, Option<u32>, String) {
    let (want, got) = (evaluate(rs, k), cl.classify(k));
    assert_eq!(got, want, "{k:?}");
    let r = got.rule.map(|i| &rs.rules[i]);
    (got.action, r.and_then(|r| r.ridentifier), r.and_then(|r| r.label.clone()).unwrap_or_default())
}

/// Random packets from the rule sets' boundaries: the classifier agrees with the reference.
fn random_agree(rs: &RuleSet, cl: &Classifier, seed: u64) {
    let b = boundaries(rs);
    let mut rng = Rng(seed);
    for _ in 0..20_000 {
        let af = if rng.index(3) == 0 { Af::Inet6 } else { Af::Inet };
        let pool = if af == Af::Inet { &b.v4 } else { &b.v6 };
        let mut addr = || pool[rng.index(pool.len())];
        let (src, dst) = (addr(), addr());
        let proto = [6u8, 6, 17, 17, 1, 58, 112, 47][rng.index(8)];
        let port = |rng: &mut Rng| {
            if rng.index(4) == 0 {
                rng.next_u64() as u16
            } else {
                b.ports[rng.index(b.ports.len())]
            }
        };
        let k = PacketKey {
            af,
            dir: if rng.index(2) == 0 { Dir::In } else { Dir::Out },
            iface: rng.index(2) as u16,
            proto,
            src,
            dst,
            src_port: port(&mut rng),
            dst_port: port(&mut rng),
            tcp_flags: [0x02, 0x12, 0x10, 0x11, 0x04][rng.index(5)],
            len: 100,
            icmp_id: 0,
            ip_opts: rng.index(8) == 0,
            route: 0,
            tag: 0,
        };
        assert_eq!(cl.classify(&k), evaluate(rs, &k), "{k:?}");
    }
}

#[test]
fn pfsense_verdicts() {
    let rs = load("pfsense");
    let cl = Classifier::build(&rs).unwrap();
    let (pass, block) = (Action::Pass, Action::Block);
    // LAN to anything passes by the default allow LAN rule.
    let k = v4(Dir::In, LAN, proto::TCP, "10.0.0.50", "93.184.216.34", 40000, 443);
    assert_eq!(
        decide(&rs, &cl, &k),
        (pass, Some(1770000000), "USER_RULE: Default allow LAN to any rule".into())
    );
    // WAN inbound that no rule allows: the default deny.
    let k = v4(Dir::In, WAN, proto::TCP, "8.8.8.8", "10.0.0.7", 40000, 3389);
    assert_eq!(decide(&rs, &cl, &k), (block, Some(1000000103), "Default deny rule IPv4".into()));
    // A bogon source on WAN.
    let k = v4(Dir::In, WAN, proto::TCP, "100.64.1.1", "198.18.0.1", 40000, 443);
    assert_eq!(
        decide(&rs, &cl, &k),
        (block, Some(11000), "block bogon IPv4 networks from WAN".into())
    );
    // A private source on WAN.
    let k = v4(Dir::In, WAN, proto::UDP, "192.168.7.7", "198.18.0.1", 53, 53);
    assert_eq!(decide(&rs, &cl, &k).1, Some(12000));
    // The anti-lockout rule, to the LAN address.
    let k = v4(Dir::In, LAN, proto::TCP, "10.0.0.99", "10.0.0.1", 50000, 443);
    assert_eq!(decide(&rs, &cl, &k), (pass, Some(10000), "anti-lockout rule".into()));
    // Port 0 is blocked whatever the interface.
    let k = v4(Dir::In, LAN, proto::UDP, "10.0.0.50", "93.184.216.34", 1234, 0);
    assert_eq!(decide(&rs, &cl, &k), (block, Some(1000000115), "Block traffic to port 0".into()));
    // IPv6 neighbour solicitation passes by the first ICMPv6 rule.
    let k = key((Af::Inet6, Dir::In, WAN), proto::ICMPV6, "fe80::1", "ff02::1:ff00:1", 135, 0);
    assert_eq!(decide(&rs, &cl, &k), (pass, Some(1000000107), String::new()));
    // The published web server: its replies go back to the WAN gateway (`reply-to`).
    let k = v4(Dir::In, WAN, proto::TCP, "8.8.8.8", "10.0.0.5", 40000, 443);
    assert_eq!(decide(&rs, &cl, &k), (pass, Some(1770001001), "USER_RULE: NAT web".into()));
    let gateway =
        fw::rules::RouteOpt { reply: true, af: Af::Inet, gateway: 0xc612_00fe, port: Some(WAN) };
    assert_eq!(
        rs.rules.iter().find(|r| r.ridentifier == Some(1770001001)).and_then(|r| r.route),
        Some(gateway)
    );
    // LAN DNS by its own rule; LAN SMTP blocked.
    let k = v4(Dir::In, LAN, proto::UDP, "10.0.0.50", "9.9.9.9", 5353, 53);
    assert_eq!(decide(&rs, &cl, &k).1, Some(1770001006));
    let k = v4(Dir::In, LAN, proto::TCP, "10.0.0.50", "9.9.9.9", 40000, 25);
    assert_eq!(decide(&rs, &cl, &k), (block, Some(1770001007), "USER_RULE: no direct smtp".into()));
    // The router's own traffic out of WAN.
    let k = v4(Dir::Out, WAN, proto::TCP, "198.18.0.1", "8.8.8.8", 40000, 443);
    assert_eq!(
        decide(&rs, &cl, &k),
        (pass, Some(1000005715), "let out anything from firewall host itself".into())
    );
    // ... and that rule sends it to WAN's gateway (the router's own packets leave by it).
    let gw = rs.rules.iter().find(|r| r.ridentifier == Some(1000005715)).unwrap();
    assert_eq!(
        gw.route.map(|o| (o.gateway, o.port)),
        Some((u128::from(u32::from(std::net::Ipv4Addr::new(198, 18, 0, 254))), Some(WAN)))
    );
    // LAN's addresses arriving on WAN: antispoof.
    let k = v4(Dir::In, WAN, proto::UDP, "10.0.0.9", "8.8.8.8", 1, 2);
    assert_eq!(decide(&rs, &cl, &k).0, block);
    random_agree(&rs, &cl, 1);
}

#[test]
fn opnsense_verdicts() {
    let rs = load("opnsense");
    let cl = Classifier::build(&rs).unwrap();
    let (pass, block) = (Action::Pass, Action::Block);
    let k = v4(Dir::In, LAN, proto::TCP, "10.0.0.50", "93.184.216.34", 40000, 443);
    assert_eq!(
        decide(&rs, &cl, &k),
        (pass, None, "f5061728394a5b6c7d8e9fa0b1c2d3e4".into()),
        "Default allow LAN to any rule"
    );
    let k = v4(Dir::In, WAN, proto::TCP, "8.8.8.8", "10.0.0.7", 40000, 3389);
    assert_eq!(
        decide(&rs, &cl, &k),
        (block, None, "02f4bab031b57d1e30553ce08e0ec131".into()),
        "Default deny"
    );
    let k = v4(Dir::In, WAN, proto::TCP, "100.64.1.1", "198.18.0.1", 40000, 443);
    assert_eq!(
        decide(&rs, &cl, &k),
        (block, None, "a0b1c2d3e4f5061728394a5b6c7d8e9f".into()),
        "bogons"
    );
    let k = v4(Dir::In, LAN, proto::TCP, "10.0.0.99", "10.0.0.1", 50000, 22);
    assert_eq!(
        decide(&rs, &cl, &k),
        (pass, None, "394a5b6c7d8e9fa0b1c2d3e4f5061728".into()),
        "anti-lockout"
    );
    let k = v4(Dir::In, WAN, 112, "198.18.0.2", "224.0.0.18", 0, 0);
    assert_eq!(
        decide(&rs, &cl, &k),
        (pass, None, "7b8a99a0b1c2d3e4f5061728394a5b6c".into()),
        "CARP"
    );
    // Multicast listener messages are blocked; link-local to global too.
    let k = key((Af::Inet6, Dir::In, LAN), proto::ICMPV6, "fe80::5", "ff02::16", 131, 0);
    assert_eq!(decide(&rs, &cl, &k).0, block);
    let k = key((Af::Inet6, Dir::In, LAN), proto::TCP, "fe80::5", "2001:db8::1", 4000, 80);
    assert_eq!(decide(&rs, &cl, &k), (block, None, "a1b2c3d4e5f60718293a4b5c6d7e8f90".into()));
    // The published web servers (a table behind a macro), and the ping rule's named and
    // numbered types.
    let k = v4(Dir::In, WAN, proto::TCP, "8.8.8.8", "10.0.0.6", 40000, 80);
    assert_eq!(
        decide(&rs, &cl, &k),
        (pass, None, "7d8e9fa0b1c2d3e4f5061728394a5b6c".into()),
        "web, reply-to"
    );
    for t in [8u16, 3, 11] {
        let k = v4(Dir::In, WAN, proto::ICMP, "8.8.8.8", "198.18.0.1", t, 0);
        assert_eq!(decide(&rs, &cl, &k).2, "b1c2d3e4f5061728394a5b6c7d8e9fa0", "icmp type {t}");
    }
    let k = v4(Dir::In, LAN, proto::TCP, "10.0.0.50", "9.9.9.9", 40000, 587);
    assert_eq!(
        decide(&rs, &cl, &k),
        (block, None, "c2d3e4f5061728394a5b6c7d8e9fa0b1".into()),
        "mail ports list"
    );
    random_agree(&rs, &cl, 2);
}
