//! pf syntax beyond the basics: `block return` and its forms, and the pf features linerate
//! refuses by name (at their file:line:column) rather than accepting and ignoring.

use std::path::Path;

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::reference::evaluate;
use fw::rules::{
    Action, AddrMatch, BlockReturn, Dir as RDir, Flush, Overload, RuleSet, SrcTrack, parse,
    parse_with_addresses,
};

fn ifaces(name: &str) -> Option<u16> {
    ["em0", "em1"].iter().position(|n| *n == name).map(|i| i as u16)
}

fn ok(text: &str) -> RuleSet {
    parse(text, Path::new("rules.conf"), &ifaces).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    parse(text, Path::new("rules.conf"), &ifaces).expect_err("should fail").to_string()
}

fn answer(text: &str) -> Option<BlockReturn> {
    let rs = ok(text);
    rs.rules.last().unwrap().block_return
}

const DROP: BlockReturn = BlockReturn { rst: false, rst_ttl: 64, icmp: None, icmp6: None };

#[test]
fn block_return_forms() {
    assert_eq!(answer("block all"), None);
    assert_eq!(answer("block drop all"), None);
    assert_eq!(answer("block return all"), Some(BlockReturn::RETURN));
    assert_eq!(
        BlockReturn::RETURN,
        BlockReturn { rst: true, rst_ttl: 64, icmp: Some(3), icmp6: Some(4) }
    );
    assert_eq!(answer("block return-rst in proto tcp"), Some(BlockReturn { rst: true, ..DROP }));
    assert_eq!(
        answer("block return-rst (ttl 10) in proto tcp"),
        Some(BlockReturn { rst: true, rst_ttl: 10, ..DROP })
    );
    assert_eq!(
        answer("block return-rst(ttl 255) all"),
        Some(BlockReturn { rst: true, rst_ttl: 255, ..DROP })
    );
    let icmp = |c, c6| Some(BlockReturn { icmp: Some(c), icmp6: Some(c6), ..DROP });
    assert_eq!(answer("block return-icmp all"), icmp(3, 4));
    assert_eq!(answer("block return-icmp6 all"), icmp(3, 4));
    assert_eq!(answer("block return-icmp(net-prohib) all"), icmp(9, 4));
    assert_eq!(answer("block return-icmp (13) in proto udp"), icmp(13, 4));
    assert_eq!(answer("block return-icmp(host-unr, admin-unr) all"), icmp(1, 1));
    assert_eq!(answer("block return-icmp(filter-prohib addr-unr) all"), icmp(13, 3));
    assert_eq!(answer("block return-icmp6(noroute-unr) all"), icmp(3, 0));
    // `set block-policy` applies to the plain `block` rules after it, as in pfctl.
    let rs = ok(
        "block in all\nset block-policy return\nblock out all\nblock drop in proto udp\nset block-policy drop\nblock all\n",
    );
    let got: Vec<_> = rs.rules.iter().map(|r| r.block_return).collect();
    assert_eq!(got, [None, Some(BlockReturn::RETURN), None, None]);
    // The answer does not change the verdict.
    let rs = ok("block return in proto tcp\npass in proto tcp to port 22 no state\n");
    let key = |port| PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        proto: proto::TCP,
        dst_port: port,
        ..PacketKey::ZERO
    };
    assert_eq!(evaluate(&rs, &key(22)).action, Action::Pass);
    assert_eq!(evaluate(&rs, &key(23)).action, Action::Block);
}

#[test]
fn block_return_errors() {
    let cases = [
        ("block return-rst (ttl 0) all", "rules.conf:1:23: a reset's TTL is 1 to 255"),
        (
            "block return-rst (ttl 256) all",
            "rules.conf:1:23: a TTL (1-255) 256 out of range (at most 255)",
        ),
        ("block return-rst (hops 3) all", "rules.conf:1:19: expected \"ttl\", found \"hops\""),
        (
            "block return-icmp(bogus) all",
            "rules.conf:1:19: expected an ICMP unreachable code (port-unr, host-unr, net-prohib, ... or 0-255), found \"bogus\"",
        ),
        ("block return-icmp(3, 4 all", "rules.conf:1:24: expected \")\", found \"all\""),
        (
            "block return-icmp6(host-prohib) all",
            "rules.conf:1:20: expected an ICMPv6 unreachable code (port-unr, admin-unr, addr-unr, ... or 0-255), found \"host-prohib\"",
        ),
        ("pass return all", "rules.conf:1:6: `return` only applies to block rules"),
        ("pass drop all", "rules.conf:1:6: `drop` only applies to block rules"),
        (
            "block return in proto tcp keep state",
            "rules.conf:1:27: keep state only applies to pass rules",
        ),
        ("set block-policy reject", "rules.conf:1:18: expected drop or return, found \"reject\""),
    ];
    let bad: Vec<_> = cases.iter().map(|(t, w)| (err(t), w)).filter(|(e, w)| e != *w).collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// pf syntax linerate does not implement: an error at its position naming it.
#[test]
fn unimplemented_pf_syntax_is_refused_where_written() {
    let cases = [
        (
            "block in from { no-route, 10.0.0.1 }",
            "rules.conf:1:17: `no-route` in a host list is not supported by linerate",
        ),
        (
            "block in to urpf-failed",
            "rules.conf:1:13: urpf-failed only applies to a source (`from urpf-failed`)",
        ),
        (
            "nat on em0 from no-route -> 192.0.2.1",
            "rules.conf:1:17: `no-route` in a translation rule is not supported by linerate",
        ),
        (
            "rdr on em0 proto tcp to port 80 tag web -> 10.0.0.5",
            "rules.conf:1:33: `tag` is not supported by linerate",
        ),
        (
            "pass in all tag web\npass in all tagged web",
            "rules.conf:2:13: `tagged` after a rule that tags packets in the same pass (line 1) is not supported by linerate",
        ),
        (
            "scrub in all fragment drop-ovl",
            "rules.conf:1:14: `fragment` is not supported by linerate but as `fragment reassemble`",
        ),
        ("match in all log", "rules.conf:1:14: `match ... log` is not supported by linerate"),
        (
            "pass in all scrub (random-id)",
            "rules.conf:1:13: `scrub` is not supported by linerate (on a filter rule: write a `scrub` rule or `match ... scrub (...)`)",
        ),
    ];
    let bad: Vec<_> =
        cases.iter().map(|(t, w)| (err(t), w)).filter(|(e, w)| !e.starts_with(*w)).collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// pf's `no-route` (no route covers the address) and `urpf-failed` (the source's route does
/// not leave by the packet's interface): route bits of the key, which the data plane fills
/// from its FIB; the classifier agrees with the reference on every combination.
#[test]
fn route_hosts_match_the_route_bits() {
    use fw::classifier::Classifier;
    use fw::packet::route::{DST_NO_ROUTE, SRC_NO_ROUTE, SRC_URPF_FAILED};
    let rs = ok("block in quick from urpf-failed label \"urpf\"\n\
                 block in quick from no-route to any\n\
                 pass out proto udp to ! no-route port 53 no state\n\
                 block out quick to no-route\n\
                 pass all no state\n");
    let need: Vec<_> = rs.rules.iter().map(|r| (r.route_need, r.route_refuse)).collect();
    assert_eq!(
        need,
        [(SRC_URPF_FAILED, 0), (SRC_NO_ROUTE, 0), (0, DST_NO_ROUTE), (DST_NO_ROUTE, 0), (0, 0)]
    );
    assert_eq!(rs.route_bits_used(), SRC_URPF_FAILED | SRC_NO_ROUTE | DST_NO_ROUTE);
    let cl = Classifier::build(&rs).unwrap();
    let key = |dir, route| PacketKey {
        af: Af::Inet,
        dir,
        proto: proto::UDP,
        dst_port: 53,
        route,
        ..PacketKey::ZERO
    };
    for (dir, route, want) in [
        (Dir::In, 0, Some(4)),
        (Dir::In, SRC_URPF_FAILED, Some(0)),
        (Dir::In, SRC_NO_ROUTE | SRC_URPF_FAILED, Some(0)),
        (Dir::In, SRC_NO_ROUTE, Some(1)),
        (Dir::In, DST_NO_ROUTE, Some(4)),
        (Dir::Out, 0, Some(4)),
        (Dir::Out, DST_NO_ROUTE, Some(3)),
        (Dir::Out, DST_NO_ROUTE | SRC_URPF_FAILED, Some(3)),
    ] {
        let k = key(dir, route);
        assert_eq!(evaluate(&rs, &k).rule, want, "{dir:?} route {route:#b}");
        assert_eq!(cl.classify(&k), evaluate(&rs, &k), "{dir:?} route {route:#b}");
    }
    // The out rule with `! no-route` decides only where the destination has a route.
    assert_eq!(evaluate(&rs, &PacketKey { dir: Dir::Out, ..key(Dir::Out, 0) }).rule, Some(4));
    let rs = ok("block all\npass out proto udp to ! no-route port 53 no state\n");
    assert_eq!(evaluate(&rs, &key(Dir::Out, 0)).action, Action::Pass);
    assert_eq!(evaluate(&rs, &key(Dir::Out, DST_NO_ROUTE)).action, Action::Block);
    // Without route hosts the rule set tests no bit, and the data plane looks nothing up.
    assert_eq!(ok("pass all\n").route_bits_used(), 0);
}

/// Lists that already work: `on { if1, if2 }`, icmp-type lists, address ranges.
#[test]
fn lists_and_ranges_parse() {
    let rs = ok(
        "pass in on { em0, em1 } inet proto icmp from 10.0.0.1 - 10.0.0.6 icmp-type { echoreq, unreach } no state",
    );
    let r = &rs.rules[0];
    assert_eq!((r.ifaces.clone(), r.icmp_types.clone()), (vec![0, 1], vec![8, 3]));
    let key = |src: u32, t: u16| PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface: 1,
        proto: proto::ICMP,
        src: u128::from(src),
        src_port: t,
        ..PacketKey::ZERO
    };
    let rs2 = ok(
        "block all\npass in on { em0, em1 } inet proto icmp from 10.0.0.1 - 10.0.0.6 icmp-type { echoreq, unreach } no state",
    );
    assert_eq!(evaluate(&rs2, &key(0x0a00_0006, 8)).action, Action::Pass);
    assert_eq!(evaluate(&rs2, &key(0x0a00_0007, 8)).action, Action::Block);
    assert_eq!(evaluate(&rs2, &key(0x0a00_0001, 0)).action, Action::Block);
}

/// em0: 192.0.2.1/24, 192.0.2.9/24 (an alias), 2001:db8::1/64; em1: 198.51.100.1/30.
fn addresses() -> Vec<(String, Vec<(std::net::IpAddr, u8)>)> {
    let a = |s: &str| s.parse().unwrap();
    vec![
        ("em0".into(), vec![(a("192.0.2.1"), 24), (a("192.0.2.9"), 24), (a("2001:db8::1"), 64)]),
        ("em1".into(), vec![(a("198.51.100.1"), 30)]),
    ]
}

fn ok_addr(text: &str) -> RuleSet {
    parse_with_addresses(text, Path::new("rules.conf"), &ifaces, &addresses())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn err_addr(text: &str) -> String {
    parse_with_addresses(text, Path::new("rules.conf"), &ifaces, &addresses())
        .expect_err("should fail")
        .to_string()
}

fn v4(s: &str) -> u128 {
    u128::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()))
}

fn v6(s: &str) -> u128 {
    u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
}

fn to(af: Af, dst: u128, iface: u16) -> PacketKey {
    PacketKey {
        af,
        dir: Dir::In,
        iface,
        proto: proto::UDP,
        src: v4("203.0.113.5"),
        dst,
        ..PacketKey::ZERO
    }
}

/// `self`, interfaces as hosts (`em0`, `(em0)`, `em0:network`, `:broadcast`, `:0`), with the
/// addresses the caller gives.
#[test]
fn interface_addresses_as_hosts() {
    let verdict =
        |rules: &str, k: PacketKey| evaluate(&ok_addr(&format!("block all\n{rules}\n")), &k).action;
    let pass = Action::Pass;
    let block = Action::Block;
    for (rules, dst, want) in [
        ("pass to self no state", v4("198.51.100.1"), pass),
        ("pass to self no state", v4("192.0.2.9"), pass),
        ("pass to self no state", v4("192.0.2.2"), block),
        ("pass to em0 no state", v4("192.0.2.9"), pass),
        ("pass to em0 no state", v4("198.51.100.1"), block),
        ("pass to (em0) no state", v4("192.0.2.1"), pass),
        ("pass to em0:0 no state", v4("192.0.2.9"), block),
        ("pass to em0:0 no state", v4("192.0.2.1"), pass),
        ("pass to em0:network no state", v4("192.0.2.200"), pass),
        ("pass to em0:network no state", v4("192.0.3.1"), block),
        ("pass to em1:network no state", v4("198.51.100.3"), pass),
        ("pass to em1:broadcast no state", v4("198.51.100.3"), pass),
        ("pass to em1:broadcast no state", v4("198.51.100.2"), block),
        // A negated interface host is one set: what is none of its addresses.
        ("pass to ! em0 no state", v4("192.0.2.1"), block),
        ("pass to ! em0 no state", v4("192.0.2.9"), block),
        ("pass to ! em0 no state", v4("10.0.0.1"), pass),
    ] {
        assert_eq!(verdict(rules, to(Af::Inet, dst, 0)), want, "{rules} to {dst:x}");
    }
    assert_eq!(verdict("pass to em0 no state", to(Af::Inet6, v6("2001:db8::1"), 0)), pass);
    assert_eq!(verdict("pass to em0:network no state", to(Af::Inet6, v6("2001:db8::77"), 0)), pass);
    assert_eq!(verdict("pass to em0 no state", to(Af::Inet6, v6("2001:db8::2"), 0)), block);
    // One table per spelling, shared by the rules that use it.
    let rs = ok_addr("pass to em0\npass from em0\npass to (em0)\npass to self\n");
    assert_eq!(rs.tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["(em0)", "(self)"]);
}

/// `$if:network` glues the modifier to the macro's value, as pfctl's textual expansion does,
/// also inside another macro's value.
#[test]
fn macro_with_interface_modifier() {
    let direct = ok_addr("pass to em0:network no state\n");
    for text in [
        "i = \"em0\"\npass to $i:network no state\n",
        "i = \"em0\"\npass to ($i:network) no state\n",
        "i = \"em0\"\nn = $i:network\npass to $n no state\n",
    ] {
        let rs = ok_addr(text);
        assert_eq!(
            rs.tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["(em0:network)"],
            "{text}"
        );
        assert_eq!(rs.tables[0].entries, direct.tables[0].entries, "{text}");
    }
    assert_eq!(
        err_addr("l = \"{ em0 em1 }\"\npass to $l:network"),
        "rules.conf:2:9: $l:network: $l must hold one interface name"
    );
    assert_eq!(err_addr("pass to $nope:network"), "rules.conf:1:9: undefined macro $nope");
}

/// `set skip on lo` (in nearly every pf.conf) is taken: loopback traffic never reaches
/// linerate. Other unknown names stay errors.
#[test]
fn set_skip_on_loopback() {
    assert!(ok("set skip on lo\n").skip.is_empty());
    assert_eq!(ok("set skip on { lo0 em1 lo }\n").skip, [1]);
    assert!(ok("set skip on { lo0 }\n").skip.is_empty());
    // pf skips an interface that does not exist: nothing to skip here, a notice says so.
    let rs = ok("set skip on { em0 lx }");
    assert_eq!(rs.skip, [0]);
    assert_eq!(
        rs.notices,
        ["rules.conf:1:19: `set skip on lx`: no interface \"lx\" is configured, nothing to skip"]
    );
    // A rule on loopback alone matches nothing here: left out, with a notice.
    let rs = ok("pass on lo\nblock in on { lo0 em1 } all\npass out on ! lo0 all");
    assert_eq!(rs.rules.len(), 2);
    assert_eq!((rs.rules[0].ifaces.as_slice(), rs.rules[0].line), (&[1u16][..], 2));
    assert!(rs.rules[1].ifaces.is_empty() && !rs.rules[1].iface_neg, "`on ! lo0`: every interface");
    assert_eq!(
        rs.notices,
        [
            "rules.conf:1:6: a rule on the loopback interface only: linerate never sees loopback traffic, the rule matches nothing and is left out"
        ]
    );
    // Its errors are still errors.
    assert_eq!(
        err("pass on lo proto tcp from any port 0 to bogus"),
        "rules.conf:1:41: unknown host \"bogus\": not an address, an interface or a name in /etc/hosts (linerate resolves no name by DNS: write the address)"
    );
    assert_eq!(err("pass on lx"), "rules.conf:1:9: unknown interface \"lx\"");
}

#[test]
fn interface_address_errors() {
    let cases = [
        (
            "pass to em0:peer",
            "rules.conf:1:9: `em0:peer` is not supported by linerate (no point-to-point interfaces)",
        ),
        (
            "pass to em0:net",
            "rules.conf:1:9: `em0:net`: expected em0:network, em0:broadcast or em0:0",
        ),
        ("pass to self:network", "rules.conf:1:9: `self` takes no modifier"),
        ("pass to (em7)", "rules.conf:1:10: unknown interface \"em7\""),
        ("antispoof for em7", "rules.conf:1:15: unknown interface \"em7\""),
        ("antispoof on em0", "rules.conf:1:11: expected \"for\", found \"on\""),
    ];
    let bad: Vec<_> =
        cases.iter().map(|(t, w)| (err_addr(t), w)).filter(|(e, w)| e != *w).collect();
    assert!(bad.is_empty(), "{bad:#?}");
    // pf's `antispoof log`: its block rules log.
    let logged = ok_addr("antispoof log for em0");
    assert!(
        !logged.rules.is_empty() && logged.rules.iter().all(|r| r.log != fw::rules::LogMode::None)
    );
    // Without the addresses (`parse`): an error, never an empty set.
    assert_eq!(
        err("pass in from self"),
        "rules.conf:1:14: `self` needs the interfaces' addresses, which only `linerate run`, `check` and `reload` know"
    );
    assert_eq!(
        err("pass in to em0:network"),
        "rules.conf:1:12: `em0` as an address needs the interfaces' addresses, which only `linerate run`, `check` and `reload` know"
    );
    assert!(err("antispoof for em0").starts_with("rules.conf:1:15: `em0` as an address needs"));
}

/// `antispoof for em0 inet` is pfctl's two rules: em0's network seen on another interface,
/// and em0's own addresses as a source anywhere.
#[test]
fn antispoof_expands_as_pfctl() {
    let rs = ok_addr("antispoof quick for { em0 em1 } inet label \"spoof\"\npass all no state\n");
    assert_eq!(rs.rules.len(), 5);
    let r = &rs.rules[0];
    assert_eq!(
        (r.action, r.dir, r.quick, r.ifaces.clone(), r.iface_neg, r.af),
        (Action::Block, Some(RDir::In), true, vec![0], true, Some(Af::Inet))
    );
    assert_eq!(r.label.as_deref(), Some("spoof"));
    assert!(
        matches!(&r.src, AddrMatch::List(l) if l.len() == 2),
        "192.0.2.0/24 twice (two addresses): {:?}",
        r.src
    );
    let r = &rs.rules[1];
    assert_eq!((r.ifaces.clone(), r.iface_neg), (vec![], false));
    let key = |src: u128, iface: u16| PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface,
        proto: proto::UDP,
        src,
        dst: v4("10.0.0.1"),
        ..PacketKey::ZERO
    };
    let v = |k| evaluate(&rs, &k).action;
    assert_eq!(v(key(v4("192.0.2.50"), 1)), Action::Block, "em0's network arriving on em1");
    assert_eq!(v(key(v4("192.0.2.50"), 0)), Action::Pass, "em0's network on em0");
    assert_eq!(v(key(v4("192.0.2.1"), 0)), Action::Block, "em0's own address as a source");
    assert_eq!(v(key(v4("198.51.100.2"), 0)), Action::Block, "em1's network arriving on em0");
    assert_eq!(v(key(v4("10.9.9.9"), 1)), Action::Pass);
    let six =
        PacketKey { af: Af::Inet6, src: v6("2001:db8::5"), dst: v6("2001:db8:9::1"), ..key(0, 1) };
    assert_eq!(v(six), Action::Pass, "inet only");
    let rs6 = ok_addr("antispoof for em0\n");
    assert_eq!(rs6.rules.len(), 2);
    assert_eq!(evaluate(&rs6, &six).action, Action::Block, "both families without inet/inet6");
}

/// pf's source-tracking state options, tracked per rule or globally as pfctl decides.
#[test]
fn source_tracking_options() {
    let track = |text: &str| ok(text).rules.last().unwrap().src_track;
    let none = SrcTrack::default();
    assert_eq!(track("pass in proto tcp keep state"), None);
    assert_eq!(
        track(
            "pass in proto tcp keep state (max 100, max-src-conn 10, max-src-conn-rate 15/5, max-src-nodes 50, sloppy)"
        ),
        Some(SrcTrack {
            max_conn: Some(10),
            max_conn_rate: Some((15, 5)),
            max_nodes: Some(50),
            ..none
        })
    );
    // `max-src-states` alone, or a bare `source-track`, track globally.
    assert_eq!(
        track("pass keep state (max-src-states 3)"),
        Some(SrcTrack { global: true, max_states: Some(3), ..none })
    );
    assert_eq!(track("pass keep state (source-track)"), Some(SrcTrack { global: true, ..none }));
    assert_eq!(
        track("pass keep state (source-track global, max-src-states 3)"),
        Some(SrcTrack { global: true, max_states: Some(3), ..none })
    );
    assert_eq!(
        track("pass keep state (source-track rule, max-src-states 3)"),
        Some(SrcTrack { max_states: Some(3), ..none })
    );
    assert_eq!(
        track("pass keep state (max-src-states 3, max-src-conn 2)"),
        Some(SrcTrack { max_states: Some(3), max_conn: Some(2), ..none })
    );
    // The rate as one word or three, and through a macro.
    for text in [
        "pass keep state (max-src-conn-rate 10 / 60)",
        "pass keep state (max-src-conn-rate 10/ 60)",
        "pass keep state (max-src-conn-rate 10 /60)",
        "rate = \"10/60\"\npass keep state (max-src-conn-rate $rate)",
    ] {
        assert_eq!(track(text).and_then(|t| t.max_conn_rate), Some((10, 60)), "{text}");
    }
    // `overload <table> [flush [global]]`.
    let ov = |text: &str| {
        track(&format!("table <a> persist\ntable <bad> persist\n{text}")).and_then(|t| t.overload)
    };
    assert_eq!(
        ov("pass keep state (max-src-conn 5, overload <bad>)"),
        Some(Overload { table: 1, flush: Flush::None })
    );
    assert_eq!(
        ov("pass keep state (overload <bad> flush, max-src-conn-rate 5/1)"),
        Some(Overload { table: 1, flush: Flush::Rule })
    );
    assert_eq!(
        ov("pass keep state (max-src-conn 5, overload <a> flush global)"),
        Some(Overload { table: 0, flush: Flush::Global })
    );
    // `set limit src-nodes`, `set timeout src.track`.
    let rs = ok("set limit { states 1000, src-nodes 500 }\nset timeout src.track 30\npass all");
    assert_eq!((rs.limit_states, rs.limit_src_nodes, rs.timeouts.src_track), (1000, 500, 30));
    assert_eq!(ok("pass all").limit_src_nodes, fw::rules::DEFAULT_LIMIT_SRC_NODES);
}

#[test]
fn source_tracking_errors_where_written() {
    let cases = [
        ("pass keep state (max-src-conn 0)", "rules.conf:1:31: `max-src-conn` must be at least 1"),
        (
            "pass keep state (max-src-states 0)",
            "rules.conf:1:33: `max-src-states` must be at least 1",
        ),
        ("pass keep state (max-src-nodes)", "rules.conf:1:31: expected a number, found \")\""),
        (
            "pass keep state (max-src-conn 4294967296)",
            "rules.conf:1:31: a number 4294967296 out of range (at most 4294967295)",
        ),
        (
            "pass keep state (max-src-conn 5, max-src-conn 6)",
            "rules.conf:1:34: `max-src-conn` is given twice",
        ),
        (
            "pass keep state (max-src-conn-rate 10)",
            "rules.conf:1:38: expected a rate (connections/seconds, e.g. 10/5), found \")\"",
        ),
        (
            "pass keep state (max-src-conn-rate 10/0)",
            "rules.conf:1:36: `max-src-conn-rate` needs at least 1 connection per at least 1 second",
        ),
        (
            "pass keep state (max-src-conn-rate ten/5)",
            "rules.conf:1:36: expected a rate (connections/seconds, e.g. 10/5), found \"ten/5\"",
        ),
        (
            "pass keep state (max-src-conn-rate 1/2/3)",
            "rules.conf:1:36: expected a rate (connections/seconds, e.g. 10/5), found \"1/2/3\"",
        ),
        (
            "pass keep state (source-track global, max-src-conn 5)",
            "rules.conf:1:18: `max-src-conn` counts per rule: it cannot be combined with `source-track global`",
        ),
        (
            "pass keep state (max-src-nodes 5, source-track)",
            "rules.conf:1:35: `max-src-nodes` counts per rule: it cannot be combined with `source-track global`",
        ),
        (
            "pass keep state (source-track rule, source-track global)",
            "rules.conf:1:37: `source-track` is given twice",
        ),
        ("pass in max-src-conn 10", "rules.conf:1:9: expected flags, keep state"),
        (
            "set limit src-nodes 10000001",
            "rules.conf:1:21: a number of source nodes 10000001 out of range (at most 10000000)",
        ),
        (
            "block keep state (max-src-conn 3)",
            "rules.conf:1:7: keep state only applies to pass rules",
        ),
        (
            "table <bad> persist\npass keep state (overload <bad> flush)",
            "rules.conf:2:18: `overload` acts on sources refused by `max-src-conn` or `max-src-conn-rate`: give one",
        ),
        (
            "table <bad> persist\npass keep state (max-src-conn 3, overload bad)",
            "rules.conf:2:43: expected a table <name>, found \"bad\"",
        ),
        (
            "table <bad> persist\npass keep state (max-src-conn 3, overload <bad> flush rule)",
            "rules.conf:2:55: expected \",\" or \")\", found \"rule\"",
        ),
    ];
    let bad: Vec<_> =
        cases.iter().map(|(t, w)| (err(t), w)).filter(|(e, w)| !e.starts_with(*w)).collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// What pfSense and OPNsense write in their rule files (issue 17): each accepted form, and
/// each error with its place.
#[test]
fn pfsense_rule_identifiers() {
    let rs = ok_addr(
        "pass in all ridentifier 1000000103 keep state label \"x\"\nblock all tracker 7\nantispoof for em0 label \"a\" ridentifier 9",
    );
    assert_eq!(rs.rules[0].ridentifier, Some(1_000_000_103));
    assert_eq!((rs.rules[0].label.as_deref(), rs.rules[1].ridentifier), (Some("x"), Some(7)));
    assert!(
        rs.rules[2..].iter().all(|r| r.ridentifier == Some(9) && r.label.as_deref() == Some("a"))
    );
    assert_eq!(
        err("pass all ridentifier 4294967296"),
        "rules.conf:1:22: a rule identifier (a number 0-4294967295) 4294967296 out of range (at most 4294967295)"
    );
    assert_eq!(
        err("pass all ridentifier x"),
        "rules.conf:1:22: expected a rule identifier (a number 0-4294967295), found \"x\""
    );
}

#[test]
fn pfsense_set_statements() {
    let t = |text: &str| ok(text).timeouts;
    let d = fw::state::Timeouts::default();
    assert_eq!(t("set optimization normal"), d);
    assert_eq!(
        d.adaptive(),
        Some((60_000, 120_000)),
        "pf's default for its default limit of 100000 states"
    );
    assert_eq!(t("set optimization default"), d);
    let sat = t("set optimization satellite");
    assert_eq!(sat, t("set optimization high-latency"));
    assert_eq!(
        (sat.tcp_first, sat.tcp_opening, sat.tcp_closing, sat.tcp_finwait, sat.tcp_closed),
        (180, 35, 905, 50, 95)
    );
    let c = t("set optimization conservative");
    assert_eq!(
        (c.tcp_first, c.tcp_opening, c.tcp_established, c.tcp_closing, c.tcp_finwait, c.tcp_closed),
        (3600, 900, 432_000, 3600, 600, 180)
    );
    let a = t("set optimization aggressive");
    assert_eq!(
        (a.tcp_first, a.tcp_opening, a.tcp_established, a.tcp_closing, a.tcp_finwait, a.tcp_closed),
        (30, 5, 18000, 60, 30, 30)
    );
    assert_eq!(a.udp_first, d.udp_first, "only TCP's timeouts are preset");
    // Applied where it stands: a later `set timeout` overrides it, an earlier one does not.
    assert_eq!(t("set optimization aggressive\nset timeout tcp.first 99").tcp_first, 99);
    assert_eq!(t("set timeout tcp.first 99\nset optimization aggressive").tcp_first, 30);
    for o in ["none", "basic", "profile"] {
        assert_eq!(ok(&format!("set ruleset-optimization {o}\npass all")).rules.len(), 1);
    }
    assert_eq!(
        err("set ruleset-optimization full"),
        "rules.conf:1:26: expected none, basic or profile, found \"full\""
    );
    assert_eq!(t("set timeout { adaptive.start 0, adaptive.end 0, tcp.first 10 }").tcp_first, 10);
    assert_eq!(t("set timeout { adaptive.start 0, adaptive.end 0 }").adaptive(), None);
    assert_eq!(
        t("set timeout { adaptive.start 6000, adaptive.end 12000 }").adaptive(),
        Some((6000, 12000))
    );
    // As pfctl: without either, both follow `set limit states` (60% and 120%), wherever the
    // limit stands; with either, both stay as written (the other at its default).
    assert_eq!(t("set limit states 48000").adaptive(), Some((28_800, 57_600)));
    assert_eq!(t("set timeout tcp.first 9\nset limit states 50").adaptive(), Some((30, 60)));
    // The start stays at its default, 60000, not below the end: off, as in pf.
    assert_eq!(t("set limit states 48000\nset timeout adaptive.end 50000").adaptive(), None);
    assert_eq!(
        t("set limit states 48000\nset timeout adaptive.start 10000").adaptive(),
        Some((10_000, 120_000))
    );
    assert_eq!(
        err("set timeout adaptive.start"),
        "rules.conf:1:27: expected a number of states, found end of file"
    );
    ok("set loginterface em0\nset loginterface none");
    // The fragment table's settings.
    assert_eq!((t("set timeout frag 10").frag, fw::state::Timeouts::default().frag), (10, 30));
    assert_eq!(ok("set limit { frags 100, states 10 }").limit_frags, 100);
    assert_eq!(ok("pass all").limit_frags, 5000, "pf's default");
    assert_eq!(
        err("set limit frags 0"),
        "rules.conf:1:17: `set limit frags` needs at least 1 datagram (linerate drops no fragment for want of room: a full table evicts its oldest datagram)"
    );
    assert_eq!(
        err("set limit frags 2000000"),
        "rules.conf:1:17: a number of fragmented datagrams 2000000 out of range (at most 1000000)"
    );
    assert_eq!(
        err("set limit bogus 1"),
        "rules.conf:1:11: expected states, src-nodes, frags or table-entries, found \"bogus\""
    );
    // A word with `%` reaches the parser, which names what it does not support.
    assert_eq!(
        err("pass in all probability 50%"),
        "rules.conf:1:13: `probability` is not supported by linerate (linerate gives every packet of a flow the same verdict)"
    );
    assert_eq!(
        ok("set limit { table-entries 3, states 10 }\ntable <t> { 10.0.0.1 10.0.0.2 10.0.0.3 }")
            .limit_states,
        10
    );
    assert_eq!(
        err("set limit table-entries 2\ntable <t> { 10.0.0.1 10.0.0.2 10.0.0.3 }"),
        "rules.conf:1:25: the tables hold 3 entries, above `set limit table-entries 2`"
    );
}

#[test]
fn anchors() {
    // Empty anchors: accepted, nothing in them, a notice each.
    let rs = ok(
        "anchor \"userrules/*\"\nnat-anchor \"natrules/*\"\nrdr-anchor \"relayd/*\" on em0\nbinat-anchor \"b\"\npass all",
    );
    assert_eq!((rs.rules.len(), rs.nat.len()), (1, 0));
    assert_eq!(rs.notices.len(), 4);
    assert_eq!(
        rs.notices[2],
        "rules.conf:3:1: rdr-anchor \"relayd/*\" holds no rules: linerate does not load rules into anchors at run time (`pfctl -a`), so it matches nothing"
    );
    // Inline rules stand where the anchor stands; a quick one in it ends the evaluation.
    let rs = ok(
        "block all\nanchor \"lan\" {\n pass in quick on em1 proto tcp to port 22\n anchor \"deeper\" {\n  pass out all\n }\n}\nblock in proto tcp to port 23",
    );
    assert_eq!(rs.rules.len(), 4);
    assert!(rs.notices.is_empty());
    let k = PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface: 1,
        proto: proto::TCP,
        dst_port: 22,
        tcp_flags: 0x02,
        ..PacketKey::ZERO
    };
    assert_eq!(evaluate(&rs, &k).rule, Some(1));
    assert_eq!(ok("anchor \"a\" { pass all }").rules.len(), 1, "one line");
    assert_eq!(
        err("anchor \"a\" in on em0 {\npass all\n}"),
        "rules.conf:1:12: `anchor` with criteria of its own and inline rules is not supported by linerate (write the criteria in its rules)"
    );
    assert_eq!(
        err("rdr-anchor \"r\" {\n}"),
        "rules.conf:1:16: inline rules of `rdr-anchor` are not supported by linerate (only `anchor \"name\" { ... }` with filter rules)"
    );
    assert_eq!(
        err("anchor \"a\" {\ntable <t> { 10.0.0.1 }\n}"),
        "rules.conf:2:1: expected a filter rule (pass, block), an anchor or \"}\" in an inline anchor, found \"table\""
    );
    assert_eq!(
        err("anchor \"a\" {\npass all"),
        "rules.conf:2:9: expected a filter rule (pass, block), an anchor or \"}\" in an inline anchor, found end of file"
    );
    assert!(
        err("load anchor \"a\" from \"lr-no-such-file\"").starts_with(
            "rules.conf:1:22: cannot read the rules of anchor \"a\" from \"lr-no-such-file\""
        ),
        "pfctl reads the file of `load anchor` when it loads the rules"
    );
}

#[test]
fn per_rule_state_timeouts() {
    use fw::state::Tmo;
    let rs = ok(
        "pass in proto tcp all flags S/SA keep state (tcp.established 3600, max 5, tcp.established 60, tcp.closing 10)",
    );
    assert_eq!(rs.rules[0].state_timeouts, [(Tmo::TcpEstablished, 60), (Tmo::TcpClosing, 10)]);
    assert_eq!(rs.rules[0].max_states, Some(5));
    assert_eq!(
        ok("pass proto udp all keep state (udp.first 30, udp.single 20, udp.multiple 90)").rules[0]
            .state_timeouts
            .len(),
        3
    );
    assert_eq!(
        ok("pass proto tcp all modulate state (tcp.first 5)").rules[0].state_timeouts,
        [(Tmo::TcpFirst, 5)]
    );
    assert_eq!(
        err("pass all keep state (tcp.established x)"),
        "rules.conf:1:38: expected a number of seconds, found \"x\""
    );
    assert_eq!(
        ok("pass all keep state (adaptive.start 10)").rules[0].state_adaptive,
        Some((10, 0))
    );
    assert_eq!(
        err("pass all keep state (adaptive.end x)"),
        "rules.conf:1:35: expected a number of states, found \"x\""
    );
    assert_eq!(
        err("pass all keep state (interval 10)"),
        "rules.conf:1:22: `interval` is not a state timeout (it belongs to `set timeout`)"
    );
}

#[test]
fn product_shaped_hosts_protocols_and_macros() {
    // OPNsense: `{any}` is any, macros may start with '_', `(if:0)` as a translation address.
    let rs = ok_addr(
        "__lan_net = \"{ 10.0.0.0/24 }\"\nnat on em0 from any to any -> (em0:0)\npass in from {any} to { any }\npass in from $__lan_net to {(self)}",
    );
    assert_eq!((&rs.rules[0].src, &rs.rules[0].dst), (&AddrMatch::Any, &AddrMatch::Any));
    assert_eq!(
        rs.nat[0].target.as_ref().map(|t| t.addr.clone()),
        Some(fw::rules::NatAddr::Iface(0))
    );
    assert_eq!(
        err("pass from { any, 10.0.0.1 }"),
        "rules.conf:1:13: `any` in a list with other hosts is not supported by linerate (pfctl leaves it out of such a list: write the list without it)"
    );
    assert_eq!(
        err("pass from { 10.0.0.1 any }"),
        "rules.conf:1:22: `any` in a list with other hosts is not supported by linerate (pfctl leaves it out of such a list: write the list without it)"
    );
    // Protocol names of /etc/protocols: carp (and its vrrp), pfsync, ipv6-icmp, ...
    let rs = ok(
        "no nat proto carp\nno rdr proto vrrp\npass proto carp\npass proto { pfsync igmp ospf pim ipv6 ipencap }\npass inet6 proto ipv6-icmp icmp6-type {1,2,135,136}",
    );
    assert_eq!(rs.rules[0].protos, [112]);
    assert_eq!(rs.nat.len(), 2);
    assert_eq!(rs.rules[1].protos, [2, 4, 41, 89, 103, 240]);
    assert_eq!(
        (rs.rules[2].protos.as_slice(), rs.rules[2].icmp_types.as_slice()),
        (&[58u8][..], &[1u8, 2, 135, 136][..])
    );
    // `port = N`, `!=`, `<`, `>=` and space-separated lists.
    let rs = ok(
        "pass proto udp from any port = 68 to any port = 67\npass proto tcp to port != 25\npass proto tcp to port < 1024\npass proto tcp to port { 443 80 22 }",
    );
    assert!(
        rs.rules[0].src_ports.matches(68)
            && !rs.rules[0].src_ports.matches(69)
            && rs.rules[0].dst_ports.matches(67)
    );
    assert!(!rs.rules[1].dst_ports.matches(25) && rs.rules[1].dst_ports.matches(26));
    assert!(rs.rules[2].dst_ports.matches(1023) && !rs.rules[2].dst_ports.matches(1024));
    assert!(
        [443, 80, 22].iter().all(|&p| rs.rules[3].dst_ports.matches(p))
            && !rs.rules[3].dst_ports.matches(81)
    );
    // What stays refused says why.
    assert_eq!(
        err("pass in on em0 reply-to (em0 192.0.2.254) all"),
        "rules.conf:1:16: `reply-to` on a rule for both address families: add `inet`"
    );
    assert_eq!(
        err("pass out on em0 reply-to (em0 192.0.2.254) inet all"),
        "rules.conf:1:17: `reply-to` on an `out` rule is not supported by linerate (write it on the `pass in` rule of the interface the flows arrive on)"
    );
    assert_eq!(
        err("scrub on em0 all reassemble tcp"),
        "rules.conf:1:18: `reassemble` is not supported by linerate (it does not reassemble fragments: IPv4 fragments are forwarded as they come, judged by their first fragment's ports; docs/firewall.md, \"Normalization\")"
    );
}

/// `set` options that change no verdict here are accepted; what they would change is
/// refused by name.
#[test]
fn set_options_without_effect() {
    for text in [
        "set debug urgent",
        "set debug misc",
        "set debug crit",
        "set hostid 0x1234abcd",
        "set hostid 7",
        "set fingerprints \"/etc/pf.os\"",
        "set require-order yes",
        "set require-order no",
        "set reassemble yes",
    ] {
        assert_eq!(ok(&format!("{text}\npass all")).rules.len(), 1, "{text}");
    }
    assert_eq!(
        err("set debug chatty"),
        "rules.conf:1:11: expected a debug level (none, urgent, misc, loud, or emerg ... debug), found \"chatty\""
    );
    assert_eq!(
        err("set hostid me"),
        "rules.conf:1:12: expected a host id (a number), found \"me\""
    );
    assert_eq!(
        err("set fingerprints /etc/pf.os"),
        "rules.conf:1:18: expected a quoted file name, found \"/etc/pf.os\""
    );
    assert!(
        err("set reassemble no")
            .starts_with("rules.conf:1:16: `set reassemble no` is not supported by linerate")
    );
    assert!(
        err("set reassemble yes no-df")
            .starts_with("rules.conf:1:20: `no-df` is not supported by linerate")
    );
    assert!(ok("set keepcounters\npass all").keep_counters && !ok("pass all").keep_counters);
    // `set state-defaults`: what later rules that keep state start from, their own options
    // over it.
    let rs = ok(
        "set state-defaults if-bound, tcp.established 3600, max 100, no-sync\npass in proto tcp keep state (floating, max 5)\npass in proto udp\npass in proto icmp no state",
    );
    let (r0, r1, r2) = (&rs.rules[0], &rs.rules[1], &rs.rules[2]);
    assert_eq!((r0.state_policy, r0.max_states), (Some(fw::rules::StatePolicy::Floating), Some(5)));
    assert_eq!(
        (r1.state_policy, r1.max_states),
        (Some(fw::rules::StatePolicy::IfBound), Some(100))
    );
    assert_eq!(
        (r0.state_timeouts.as_slice(), r1.state_timeouts.as_slice()),
        (
            &[(fw::state::Tmo::TcpEstablished, 3600)][..],
            &[(fw::state::Tmo::TcpEstablished, 3600)][..]
        )
    );
    assert_eq!(
        (r2.state_policy, r2.max_states, r2.state_timeouts.len()),
        (None, None, 0),
        "no state: nothing to start from"
    );
    assert_eq!(
        ok("set state-defaults sloppy\npass in proto tcp").rules[0].keep_state,
        fw::rules::StateMode::KeepSloppy
    );
    assert!(
        err("set state-defaults pflow")
            .starts_with("rules.conf:1:20: `pflow` is not supported by linerate")
    );
    assert!(err("set state-defaults max-src-conn 10").starts_with(
        "rules.conf:1:20: source tracking in `set state-defaults` is not supported by linerate"
    ));
    // pfsync's `no-sync` state option: nothing to keep off a sync interface here.
    assert_eq!(ok("pass in proto tcp keep state (no-sync, max 5)").rules[0].max_states, Some(5));
    assert!(
        err("pass in proto tcp keep state (pflow)")
            .starts_with("rules.conf:1:31: `pflow` is not supported by linerate")
    );
}

/// OpenBSD's `match ... scrub (...)` is the scrub rule it stands for, where pf's result
/// cannot differ; the rest of `match` is refused by name.
#[test]
fn match_scrub_is_a_scrub_rule() {
    let m = ok("match in all scrub (no-df random-id max-mss 1440)\npass all");
    assert_eq!(m.scrub, ok("scrub in all no-df random-id max-mss 1440\npass all").scrub);
    let m = ok(
        "match in all scrub (no-df)\nmatch out on em0 inet proto tcp to port 80 scrub (set-tos lowdelay, min-ttl 5)\nblock in quick on em1\npass all",
    );
    assert_eq!(m.scrub.len(), 2);
    assert_eq!(
        (m.scrub[1].opts.set_tos, m.scrub[1].opts.min_ttl, m.scrub[1].line),
        (Some(0x10), 5, 2)
    );
    assert!(
        ok("block all\nmatch in all scrub (no-df)").scrub.len() == 1,
        "after rules that decide nothing it scrubs"
    );
    for (text, want) in [
        (
            "match in on em0 from any to any rdr-to 10.0.0.1",
            "rules.conf:1:33: `match ... rdr-to` is not supported by linerate (only `match ... scrub (...)` and `match out ... nat-to`)",
        ),
        (
            "match in all",
            "rules.conf:1:13: `match` without `scrub (...)` or `nat-to` changes nothing here",
        ),
        (
            "match in all scrub (no-df) tag X",
            "rules.conf:1:28: `match ... tag` is not supported by linerate",
        ),
        (
            "match in all scrub (reassemble tcp)",
            "rules.conf:1:21: `reassemble` is not supported by linerate",
        ),
        (
            "match in proto icmp to port 80 scrub (no-df)",
            "rules.conf:1:24: port only applies to proto tcp or udp",
        ),
        (
            "pass in quick all\nmatch in all scrub (no-df)",
            "rules.conf:2:1: `match ... scrub` after a `pass ... quick` rule (line 1) is not supported by linerate",
        ),
        (
            "match in all scrub (no-df)\nmatch all scrub (random-id)",
            "rules.conf:2:1: a second scrub rule for the same packets (line 1) is not supported",
        ),
        (
            "scrub in all no-df\nmatch in all scrub (random-id)",
            "rules.conf:2:1: a second scrub rule for the same packets (line 1)",
        ),
        (
            "match in all scrub (no-df)\nscrub in all random-id",
            "rules.conf:2:1: a `scrub` rule for the packets of `match ... scrub` (line 1) is not supported by linerate",
        ),
    ] {
        let e = err(text);
        assert!(e.starts_with(want), "{text}: {e}");
    }
    assert_eq!(
        ok("match in all scrub (no-df)\nmatch out all scrub (random-id)").scrub.len(),
        2,
        "one per direction"
    );
}

/// OpenBSD's `match out ... nat-to` is the `nat` rule it stands for, last written first
/// (pf's last matching `nat-to` wins), and refused where pf's result could differ.
#[test]
fn match_nat_to_is_a_nat_rule() {
    let strip = |mut rs: RuleSet| {
        for r in &mut rs.nat {
            (r.line, r.column) = (0, 0);
        }
        rs.nat
    };
    let m = ok(
        "match out on em0 inet proto tcp from 10.0.0.0/8 to any nat-to 192.0.2.1 port 1024:65535 static-port\npass all",
    );
    assert_eq!(
        strip(m),
        strip(ok(
            "nat on em0 inet proto tcp from 10.0.0.0/8 to any -> 192.0.2.1 port 1024:65535 static-port\npass all"
        ))
    );
    let two = ok(
        "match out on em0 from 10.0.0.0/8 nat-to 192.0.2.1\nmatch out on em0 from 10.1.0.0/16 nat-to 192.0.2.2\nblock all\npass out quick inet\npass in on em1 from 10.0.0.0/8",
    );
    assert_eq!(
        two.nat.iter().map(|r| r.line).collect::<Vec<_>>(),
        [2, 1],
        "the last one is tried first"
    );
    assert!(
        ok("match out on em0 all nat-to 192.0.2.1\npass out on em1 from 10.0.0.0/8").nat.len() == 1,
        "another interface's rules may look at the source"
    );
    assert_eq!(ok("match out on em0 nat-to (em0)").nat.len(), 1, "no hosts: all");
    for (text, want) in [
        (
            "match in on em0 all nat-to 192.0.2.1",
            "rules.conf:1:21: `nat-to` on a `match` rule that is not `out` is not supported by linerate",
        ),
        (
            "pass out quick all\nmatch out on em0 all nat-to 192.0.2.1",
            "rules.conf:2:1: `match ... nat-to` after a `pass ... quick` rule (line 1) is not supported by linerate",
        ),
        (
            "nat on em0 from any -> 192.0.2.1\nmatch out on em0 all nat-to 192.0.2.2",
            "rules.conf:2:1: `match ... nat-to` together with translation rules (line 1) is not supported by linerate",
        ),
        (
            "match out on em0 all nat-to 192.0.2.2\nnat on em0 from any -> 192.0.2.1",
            "rules.conf:2:1: translation rules together with `match ... nat-to` (line 1) are not supported by linerate",
        ),
        (
            "match out on em0 all nat-to 192.0.2.1\npass out on em0 from 10.0.0.0/8",
            "rules.conf:2:1: an outbound rule that looks at the source, on the interface of `match ... nat-to` (line 1), is not supported by linerate",
        ),
        (
            "match out on em0 all nat-to 192.0.2.1\nblock all\npass proto udp from any port 53",
            "rules.conf:3:1: an outbound rule that looks at the source",
        ),
        (
            "match out on em0 inet6 all nat-to 2001:db8::1",
            "rules.conf:1:1: `match ... nat-to` for IPv6 is not supported by linerate",
        ),
        (
            "match out on em0 all nat-to 192.0.2.1 tag x",
            "rules.conf:1:39: `tag` is not supported by linerate",
        ),
    ] {
        let e = err(text);
        assert!(e.starts_with(want), "{text}: {e}");
    }
}

/// A list inside an interface list, as a macro holding one makes it, is flattened.
#[test]
fn lists_inside_interface_lists() {
    let rs = ok("int_if = \"{ em1 }\"\npass in on { em0 $int_if }");
    assert_eq!(rs.rules.last().unwrap().ifaces, [0, 1]);
}
