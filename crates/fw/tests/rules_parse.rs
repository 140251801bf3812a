//! Parser: every construct, every error (with file:line:column), the example file, and
//! random input never panicking.

use std::path::{Path, PathBuf};

use fw::packet::{Af, Dir, PacketKey};
use fw::reference::evaluate;
use fw::rules::{
    Action, AddrItem, AddrMatch, AddrTarget, DEFAULT_FLAGS, DEFAULT_LIMIT_STATES, MAX_LIMIT_STATES,
    PortMatch, Prefix, RuleSet, StateMode, StatePolicy, Timeouts, load, parse, parse_prefix,
};

fn ifaces(name: &str) -> Option<u16> {
    match name {
        "em0" | "lr-a" => Some(0),
        "em1" | "lr-b" => Some(1),
        _ => None,
    }
}

fn ok(text: &str) -> RuleSet {
    parse(text, Path::new("rules.conf"), &ifaces).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    parse(text, Path::new("rules.conf"), &ifaces).expect_err("should fail").to_string()
}

fn p4(s: &str) -> Prefix {
    parse_prefix(s).unwrap()
}

fn item(s: &str) -> AddrItem {
    AddrItem { negated: false, target: AddrTarget::Prefix(p4(s)) }
}

/// `modulate state` takes keep state's options; a rule's state mode says it modulates.
#[test]
fn modulate_state_with_and_without_options() {
    let rs = ok(
        "pass in on em0 proto tcp modulate state\npass in proto { tcp udp } to port 53 modulate state (max 10, if-bound, max-src-conn 5)\n",
    );
    let (a, b) = (&rs.rules[0], &rs.rules[1]);
    assert_eq!((a.keep_state, a.flags), (StateMode::Modulate, Some(DEFAULT_FLAGS)));
    assert_eq!(
        (b.keep_state, b.max_states, b.state_policy),
        (StateMode::Modulate, Some(10), Some(StatePolicy::IfBound))
    );
    assert!(b.src_track.is_some());
}

/// `synproxy state` takes keep state's options (but sloppy); TCP, in rules only.
#[test]
fn synproxy_state_with_and_without_options() {
    let rs = ok(
        "pass in on em0 proto tcp to port 80 synproxy state\npass in proto tcp synproxy state (max 10, if-bound, max-src-conn 5)\npass proto tcp flags S/SA synproxy state\n",
    );
    let (a, b, c) = (&rs.rules[0], &rs.rules[1], &rs.rules[2]);
    assert_eq!((a.keep_state, a.flags), (StateMode::Synproxy, Some(DEFAULT_FLAGS)));
    assert_eq!(
        (b.keep_state, b.max_states, b.state_policy),
        (StateMode::Synproxy, Some(10), Some(StatePolicy::IfBound))
    );
    assert!(b.src_track.is_some());
    assert_eq!((c.keep_state, c.dir), (StateMode::Synproxy, None));
}

#[test]
fn defaults_of_pass_and_block() {
    let rs = ok("block all\npass all\n");
    assert_eq!(rs.limit_states, DEFAULT_LIMIT_STATES);
    assert_eq!(rs.timeouts, Timeouts::default());
    assert_eq!(rs.timeouts.tcp_first, 120);
    assert_eq!(rs.timeouts.tcp_established, 86400);
    let (b, p) = (&rs.rules[0], &rs.rules[1]);
    assert_eq!(
        (b.action, b.keep_state, b.flags, b.quick),
        (Action::Block, StateMode::None, None, false)
    );
    assert_eq!(
        (p.action, p.keep_state, p.flags),
        (Action::Pass, StateMode::Keep, Some(DEFAULT_FLAGS))
    );
    assert_eq!((p.src.clone(), p.dst.clone()), (AddrMatch::Any, AddrMatch::Any));
    assert_eq!((b.line, p.line), (1, 2));
    // Stateless pass: no implicit flags; flags any: none either.
    let rs = ok(
        "pass all no state\npass all flags any\npass proto tcp all flags S/SAFR\npass all flags /SA keep state (sloppy)",
    );
    assert_eq!((rs.rules[0].keep_state, rs.rules[0].flags), (StateMode::None, None));
    assert_eq!((rs.rules[1].keep_state, rs.rules[1].flags), (StateMode::Keep, None));
    assert_eq!(rs.rules[2].flags, Some((0x02, 0x17)));
    assert_eq!(
        (rs.rules[3].keep_state, rs.rules[3].flags),
        (StateMode::KeepSloppy, Some((0, 0x12)))
    );
}

#[test]
fn full_rule() {
    let rs = ok(
        "pass in quick on em1 inet proto tcp from 10.0.0.0/8 port 1024:65535 to ! 192.168.1.1 port { 80, 443 } flags S/SA keep state label \"web\"",
    );
    let r = &rs.rules[0];
    assert_eq!(r.dir, Some(Dir::In));
    assert!(r.quick);
    assert_eq!((r.ifaces.clone(), r.iface_neg), (vec![1], false));
    assert_eq!(r.af, Some(Af::Inet));
    assert_eq!(r.protos, vec![6]);
    assert_eq!(r.src, AddrMatch::List(vec![item("10.0.0.0/8")]));
    assert_eq!(r.src_ports, PortMatch::Ranges(vec![(1024, 65535)]));
    assert_eq!(
        r.dst,
        AddrMatch::List(vec![AddrItem {
            negated: true,
            target: AddrTarget::Prefix(p4("192.168.1.1"))
        }])
    );
    assert_eq!(r.dst_ports, PortMatch::Ranges(vec![(80, 80), (443, 443)]));
    assert_eq!(r.label.as_deref(), Some("web"));
    let rs = ok(
        "block out on ! em0 proto { udp, tcp } to any port ssh\nblock in all\nblock drop out all",
    );
    assert_eq!(
        (rs.rules[0].ifaces.clone(), rs.rules[0].iface_neg, rs.rules[0].dir),
        (vec![0], true, Some(Dir::Out))
    );
    assert_eq!(rs.rules[0].protos, vec![6, 17]);
    assert_eq!((rs.rules[1].action, rs.rules[1].dir), (Action::Block, Some(Dir::In)));
    assert_eq!((rs.rules[2].action, rs.rules[2].dir), (Action::Block, Some(Dir::Out)));
}

#[test]
fn addresses() {
    let rs = ok(
        "block from { 10/8, !10.1.0.0/16 , 2001:db8::/32 } to { ::1 fe80::/10 }\nblock from 192.168.1.77/24",
    );
    let AddrMatch::List(s) = &rs.rules[0].src else { panic!() };
    assert_eq!(s[0].target, AddrTarget::Prefix(Prefix::new(Af::Inet, 0x0a00_0000, 8)));
    assert!(s[1].negated);
    assert_eq!(s[2].target, AddrTarget::Prefix(Prefix::new(Af::Inet6, 0x2001_0db8u128 << 96, 32)));
    let AddrMatch::List(d) = &rs.rules[0].dst else { panic!() };
    assert_eq!(d.len(), 2);
    // Host bits are cleared, as pf does.
    assert_eq!(rs.rules[1].src, AddrMatch::List(vec![item("192.168.1.0/24")]));
    assert!(parse_prefix("10.1/16").is_some() && parse_prefix("10.1").is_none());
    assert!(parse_prefix("256.0.0.0/8").is_none() && parse_prefix("10.0.0.0/33").is_none());
    assert!(parse_prefix("::/129").is_none() && parse_prefix("1.2.3.4/").is_none());
}

#[test]
fn ports_and_operators() {
    let rs = ok(concat!(
        "pass proto tcp to port 80\n",
        "pass proto tcp to port = 80\n",
        "pass proto tcp to port != 80\n",
        "pass proto tcp to port < 1024\n",
        "pass proto tcp to port <= 1024\n",
        "pass proto tcp to port > 1024\n",
        "pass proto tcp to port >= 1024\n",
        "pass proto tcp to port 1000:2000\n",
        "pass proto tcp to port 1000 >< 2000\n",
        "pass proto tcp to port 1000<>2000\n",
        "pass proto udp to port { domain ntp 5000:5010 > 60000 }\n",
        "pass proto tcp to port { www https http smtp ssh }\n",
        "pass proto tcp to port 10 >< 11\n",
        "pass proto udp to port { isakmp ipsec-nat-t dhcpv6-client openvpn }\n",
    ));
    let want: Vec<Vec<(u16, u16)>> = vec![
        vec![(80, 80)],
        vec![(80, 80)],
        vec![(0, 79), (81, 65535)],
        vec![(0, 1023)],
        vec![(0, 1024)],
        vec![(1025, 65535)],
        vec![(1024, 65535)],
        vec![(1000, 2000)],
        vec![(1001, 1999)],
        vec![(0, 999), (2001, 65535)],
        vec![(53, 53), (123, 123), (5000, 5010), (60001, 65535)],
        vec![(80, 80), (443, 443), (80, 80), (25, 25), (22, 22)],
        vec![],
        vec![(500, 500), (4500, 4500), (546, 546), (1194, 1194)],
    ];
    assert_eq!(rs.rules.len(), want.len());
    for (r, w) in rs.rules.iter().zip(want) {
        assert_eq!(r.dst_ports, PortMatch::Ranges(w), "line {}", r.line);
    }
}

#[test]
fn icmp_types() {
    let rs = ok(
        "pass inet proto icmp icmp-type echoreq\npass proto icmp icmp-type 3 code 4\npass inet6 proto icmp6 icmp6-type 128",
    );
    assert_eq!((rs.rules[0].icmp_types.clone(), rs.rules[0].icmp_code), (vec![8], None));
    assert_eq!((rs.rules[1].icmp_types.clone(), rs.rules[1].icmp_code), (vec![3], Some(4)));
    assert_eq!(rs.rules[2].icmp_types, vec![128]);
}

#[test]
fn macros_and_tables() {
    let rs = ok(concat!(
        "ext = \"em0\"\n",
        "nets = \"{ 10.0.0.0/8, 172.16.0.0/12 }\"\n",
        "more = $nets\n",
        "web = \"{\" 80 443 \"}\"\n",
        "table <bad> persist { 192.0.2.0/24, !192.0.2.1, 2001:db8::/32 }\n",
        "table <empty> persist\n",
        "block in on $ext from { $nets, 1.2.3.4 } to <bad>\n",
        "pass proto tcp from $more to !<bad> port $web\n",
    ));
    assert_eq!(rs.tables.len(), 2);
    assert_eq!(rs.tables[0].name, "bad");
    assert_eq!(rs.tables[0].entries.len(), 3);
    assert!(rs.tables[0].entries[1].negated);
    assert!(rs.tables[1].entries.is_empty());
    let r = &rs.rules[0];
    assert_eq!(r.ifaces, vec![0]);
    // `{ $nets, 1.2.3.4 }` reads `{ { 10.0.0.0/8, 172.16.0.0/12 }, 1.2.3.4 }`: flattened.
    assert_eq!(
        r.src,
        AddrMatch::List(vec![item("10.0.0.0/8"), item("172.16.0.0/12"), item("1.2.3.4")])
    );
    assert_eq!(
        r.dst,
        AddrMatch::List(vec![AddrItem { negated: false, target: AddrTarget::Table(0) }])
    );
    let r = &rs.rules[1];
    assert_eq!(r.src, AddrMatch::List(vec![item("10.0.0.0/8"), item("172.16.0.0/12")]));
    assert_eq!(
        r.dst,
        AddrMatch::List(vec![AddrItem { negated: true, target: AddrTarget::Table(0) }])
    );
    assert_eq!(r.dst_ports, PortMatch::Ranges(vec![(80, 80), (443, 443)]));
}

#[test]
fn options() {
    let rs = ok(concat!(
        "set limit states 5000\n",
        "set timeout { tcp.established 3600, udp.first 10 \n udp.single 5 }\n",
        "set timeout tcp.first 100\n",
        "set timeout interval 2\n",
        "set block-policy drop\n",
        "set limit { states 7000 }\n",
    ));
    assert_eq!(rs.limit_states, 7000);
    assert_eq!(rs.timeouts.tcp_established, 3600);
    assert_eq!(rs.timeouts.udp_first, 10);
    assert_eq!(rs.timeouts.udp_single, 5);
    assert_eq!(rs.timeouts.tcp_first, 100);
    assert_eq!(rs.timeouts.interval, 2);
    assert_eq!(rs.timeouts.tcp_closing, 900);
    assert_eq!(ok(&format!("set limit states {MAX_LIMIT_STATES}")).limit_states, MAX_LIMIT_STATES);
}

#[test]
fn comments_continuations_blank_lines() {
    let rs = ok("# header\n\n  block all # trailing\npass in \\\n  proto tcp \\\n  to port 22\n\n");
    assert_eq!(rs.rules.len(), 2);
    assert_eq!(rs.rules[1].line, 4);
    assert_eq!(rs.rules[1].dst_ports, PortMatch::Ranges(vec![(22, 22)]));
}

// One table of (rule text, error) cases: read top to bottom.
#[test]
fn errors_name_file_line_column() {
    let cases: &[(&str, &str)] = &[
        (
            "block all\npass in from foo\n",
            "rules.conf:2:14: unknown host \"foo\": not an address, an interface or a name in /etc/hosts (linerate resolves no name by DNS: write the address)",
        ),
        (
            "pass from {{{{{{{{{{{{{{{{{{10.0.0.1}}}}}}}}}}}}}}}}}} to any",
            "rules.conf:1:28: host lists nested more than 16 deep",
        ),
        (
            "ports = \"{ 22, 80 }\"\npass proto tcp to port { $ports, 443 }",
            "rules.conf:2:26: port lists do not nest in pf's grammar (a macro holding `{ ... }` inside a list of ports): write the ports as one list",
        ),
        ("pass on em7 all", "rules.conf:1:9: unknown interface \"em7\""),
        (
            "frobnicate all",
            "rules.conf:1:1: expected a rule (pass, block), table, set or a macro definition, found \"frobnicate\"",
        ),
        (
            "pass all extra",
            "rules.conf:1:10: expected flags, keep state, modulate state, synproxy state, no state, allow-opts, label, ridentifier, tag, tagged, icmp-type, icmp6-type, route-to, reply-to, rdr-to, nat-to, af-to or end of line, found \"extra\"",
        ),
        (
            "pass proto tcp to port 70000",
            "rules.conf:1:24: expected a port number (0-65535) or service name, found \"70000\"",
        ),
        ("pass to port 80", "rules.conf:1:9: port only applies to proto tcp or udp"),
        (
            "pass proto { tcp icmp } to port 80",
            "rules.conf:1:28: port only applies to proto tcp or udp",
        ),
        (
            "pass proto bogus all",
            "rules.conf:1:12: expected a protocol (tcp, udp, icmp, icmp6, gre, esp, ah, sctp, carp, ... or a number 0-255), found \"bogus\"",
        ),
        (
            "pass proto 256 all",
            "rules.conf:1:12: expected a protocol (tcp, udp, icmp, icmp6, gre, esp, ah, sctp, carp, ... or a number 0-255), found \"256\"",
        ),
        ("pass from $nope", "rules.conf:1:11: undefined macro $nope"),
        (
            "pass all flags XY",
            "rules.conf:1:16: expected TCP flags set/mask (e.g. S/SA, /SA) or \"any\", found \"XY\"",
        ),
        (
            "pass all flags S",
            "rules.conf:1:16: expected TCP flags set/mask (e.g. S/SA, /SA) or \"any\", found \"S\"",
        ),
        ("block all keep state", "rules.conf:1:11: keep state only applies to pass rules"),
        (
            "pass all keep state (max-pkt-rate 100/10)",
            "rules.conf:1:22: `max-pkt-rate` is not supported by linerate (no per-rule packet rate limit)",
        ),
        (
            "pass all label \"web",
            "rules.conf:1:16: unterminated string (expected '\"' before end of line)",
        ),
        (
            "pass inet6 from 10.0.0.0/8",
            "rules.conf:1:17: address family mismatch: the rule is inet6 but this address is inet",
        ),
        (
            "pass from 10.0.0.0/8 to ::1",
            "rules.conf:1:25: address family mismatch between source and destination",
        ),
        ("pass icmp-type 8", "rules.conf:1:6: icmp-type requires proto icmp"),
        ("pass proto icmp6 icmp-type 8", "rules.conf:1:18: icmp-type requires proto icmp"),
        (
            "pass proto icmp icmp-type bogus",
            "rules.conf:1:27: expected an ICMP type (a number 0-255 or echoreq, echorep, unreach, timex, paramprob, ...), found \"bogus\"",
        ),
        ("set limit states lots", "rules.conf:1:18: expected a number of states, found \"lots\""),
        (
            "set limit fragments 10",
            "rules.conf:1:11: expected states, src-nodes, frags or table-entries, found \"fragments\"",
        ),
        (
            "set timeout tcp.bogus 5",
            "rules.conf:1:13: expected a timeout name (tcp.first, tcp.opening, tcp.established, tcp.closing, tcp.finwait, tcp.closed, udp.first, udp.single, udp.multiple, icmp.first, icmp.error, other.first, other.single, other.multiple, interval, src.track, frag, adaptive.start, adaptive.end), found \"tcp.bogus\"",
        ),
        (
            "set timeout { tcp.first 5",
            "rules.conf:1:26: expected a timeout name (tcp.first, tcp.opening, tcp.established, tcp.closing, tcp.finwait, tcp.closed, udp.first, udp.single, udp.multiple, icmp.first, icmp.error, other.first, other.single, other.multiple, interval, src.track, frag, adaptive.start, adaptive.end), found end of file",
        ),
        ("set block-policy maybe", "rules.conf:1:18: expected drop or return, found \"maybe\""),
        (
            "table <t> { 10.0.0.0/8, bogus }",
            "rules.conf:1:25: expected an address or a prefix, or \"}\", found \"bogus\"",
        ),
        ("table <t> { }\ntable <t> { }", "rules.conf:2:8: table <t> is already defined"),
        (
            "table <t> file \"/nonexistent/x.txt\"",
            "rules.conf:1:16: cannot read table file \"/nonexistent/x.txt\": No such file or directory (os error 2)",
        ),
        ("pass = \"x\"", "rules.conf:1:1: \"pass\" is a reserved word, not a macro name"),
        (
            "1x = \"x\"",
            "rules.conf:1:1: invalid macro name \"1x\" (a letter or '_', then letters, digits or '_')",
        ),
        (
            "a = \"$a\"\npass from $a",
            "rules.conf:2:11: macro $a expands too deeply (recursive definition?)",
        ),
        ("pass all ; block all", "rules.conf:1:10: unexpected character ';'"),
        (
            "pass from { 10.0.0.0/8",
            "rules.conf:1:23: expected an address, a prefix, a table <name> or \"any\", found end of file",
        ),
        ("pass all \\ x", "rules.conf:1:10: expected end of line after '\\'"),
        ("pass from any port 80", "rules.conf:1:15: port only applies to proto tcp or udp"),
        (
            "pass to 10.0.0.1/40",
            "rules.conf:1:9: expected an address, a prefix, a table <name> or \"any\", found \"10.0.0.1/40\"",
        ),
        (
            "ports = \"{ 80\"\npass proto tcp to port $ports",
            "rules.conf:2:30: expected a port number (0-65535) or service name, found end of file",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want, "for {text:?}");
    }
}

/// Errors in table files name the table file; an unreadable rule file names itself.
#[test]
fn file_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("fw-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.txt"), "10.0.0.0/8\n# c\n  192.0.2.1 bogus\n").unwrap();
    std::fs::write(dir.join("r.conf"), "table <t> file \"t.txt\"\n").unwrap();
    let e = load(&dir.join("r.conf"), &ifaces).unwrap_err();
    assert_eq!(e.path, dir.join("t.txt"));
    assert_eq!((e.line, e.column), (3, 13));
    assert_eq!(e.message, "expected an address or a prefix, found \"bogus\"");
    let e = load(&dir.join("missing.conf"), &ifaces).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot read rule file", dir.join("missing.conf").display()))
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// What linerate does not do is an error at its position, never accepted and ignored.
#[test]
fn unsupported_features_are_errors() {
    let cases = [
        ("block log (to pflog1) all", "rules.conf:1:12: `log (to IFACE)` is not supported by linerate (one log: `[log]` in the config, `linerate log`)".to_owned()),
        ("pass all\npass in log (user) proto tcp", "rules.conf:2:14: `log (user)` is not supported by linerate".to_owned()),
        ("pass in log (bogus) all", "rules.conf:1:14: expected a log option (all), found \"bogus\"".to_owned()),
        ("set limit states 100000001", "rules.conf:1:18: a number of states 100000001 out of range (at most 100000000)".to_owned()),
        ("set limit states 4000000000", "rules.conf:1:18: a number of states 4000000000 out of range (at most 100000000)".to_owned()),
    ];
    for (text, want) in cases {
        assert_eq!(err(text), want, "for {text:?}");
    }
}

fn example_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rules.conf")
}

/// A packet from `src` port 40000 to `dst` port `dport`, 60 bytes, no IP options.
fn example_key(
    iface: u16,
    dir: Dir,
    src: &str,
    dst: &str,
    proto: u8,
    dport: u16,
    flags: u8,
) -> PacketKey {
    let (s, d): (std::net::IpAddr, std::net::IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let (af, s, d) = match (s, d) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => {
            (Af::Inet, u32::from(s) as u128, u32::from(d) as u128)
        }
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => {
            (Af::Inet6, u128::from(s), u128::from(d))
        }
        _ => panic!(),
    };
    PacketKey {
        af,
        dir,
        iface,
        proto,
        src: s,
        dst: d,
        src_port: 40000,
        dst_port: dport,
        tcp_flags: flags,
        len: 60,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

/// The reference's verdict on `k`, after checking that the classifier agrees and that the
/// action is `action`.
fn check_example(
    rs: &RuleSet,
    cl: &fw::classifier::Classifier,
    k: PacketKey,
    action: Action,
) -> fw::reference::Verdict {
    let v = evaluate(rs, &k);
    assert_eq!(cl.classify(&k), v);
    assert_eq!(v.action, action, "{k:?} -> rule {:?}", v.rule.map(|i| &rs.rules[i]));
    v
}

#[test]
fn example_file_loads_and_behaves() {
    let rs = load(&example_path(), &ifaces).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rs.limit_states, 200_000);
    assert_eq!(rs.timeouts.tcp_established, 7200);
    assert_eq!(rs.timeouts.interval, 5);
    let bl = &rs.tables[0];
    assert_eq!(bl.name, "blocklist");
    assert_eq!(bl.entries.len(), 7);
    let cl = fw::classifier::Classifier::build(&rs).unwrap();
    let check = |k: PacketKey, action: Action| check_example(&rs, &cl, k, action);
    // Web server reachable from outside with a SYN, with state and the label.
    let v = check(example_key(0, Dir::In, "8.8.8.8", "192.0.2.80", 6, 443, 0x02), Action::Pass);
    assert_eq!(rs.rules[v.rule.unwrap()].label.as_deref(), Some("web"));
    assert_eq!(v.keep_state, StateMode::Keep);
    // A bare ACK matches no pass rule (flags S/SA): blocked by `block all`.
    check(example_key(0, Dir::In, "8.8.8.8", "192.0.2.80", 6, 443, 0x10), Action::Block);
    // Blocklisted source: blocked even towards the web server (quick); the excluded relay passes.
    check(example_key(0, Dir::In, "203.0.113.66", "192.0.2.80", 6, 443, 0x02), Action::Block);
    check(example_key(0, Dir::In, "192.0.2.10", "192.0.2.80", 6, 443, 0x02), Action::Pass);
    check(example_key(0, Dir::In, "192.0.2.11", "192.0.2.80", 6, 443, 0x02), Action::Block);
    check(example_key(0, Dir::In, "2001:db8:bad::5", "2001:db8::80", 58, 0, 0), Action::Block);
    // Spoofed private source from outside.
    check(example_key(0, Dir::In, "192.168.1.1", "192.0.2.80", 6, 80, 0x02), Action::Block);
    // LAN out; SSH from the admin hosts with sloppy state.
    check(example_key(1, Dir::In, "10.1.2.3", "8.8.8.8", 17, 53, 0), Action::Pass);
    let v = check(example_key(1, Dir::In, "10.1.0.10", "10.1.9.9", 6, 22, 0x02), Action::Pass);
    assert_eq!(v.keep_state, StateMode::KeepSloppy);
    // Ping to the outside interface from outside: blocked by the final quick rule unless to the web server.
    check(example_key(0, Dir::In, "8.8.8.8", "192.0.2.1", 1, 0, 0), Action::Block);
    let mut k = example_key(0, Dir::In, "8.8.8.8", "192.0.2.80", 1, 0, 0);
    k.src_port = 8;
    check(k, Action::Pass);
}

#[test]
fn relative_table_paths_resolve_against_the_rule_file() {
    let text = std::fs::read_to_string(example_path()).unwrap();
    // Parsed with the real path: the table file is found.
    assert!(parse(&text, &example_path(), &ifaces).is_ok());
    // Parsed as if elsewhere: it is not.
    let e = parse(&text, Path::new("/nonexistent/dir/rules.conf"), &ifaces).unwrap_err();
    assert!(e.message.starts_with("cannot read table file"), "{e}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    /// Random text never panics.
    #[test]
    fn random_text_never_panics(s in "\\PC{0,200}") {
        let _ = parse(&s, Path::new("x.conf"), &ifaces);
    }

    /// Random sequences of the language's own tokens never panic either.
    #[test]
    fn random_tokens_never_panic(toks in proptest::collection::vec(proptest::sample::select(vec![
        "pass", "block", "in", "out", "quick", "on", "em0", "inet", "inet6", "proto", "tcp", "udp",
        "icmp", "{", "}", ",", "!", "<", ">", "<>", "><", "<=", ">=", "!=", "=", ":", "from", "to",
        "any", "all", "port", "80", "1000:2000", "www", "10.0.0.0/8", "::1", "2001:db8::/32",
        "flags", "S/SA", "keep", "state", "no", "(", ")", "sloppy", "label", "\"x\"", "table",
        "<t>", "file", "set", "limit", "states", "timeout", "tcp.first", "\n", "$m", "m", "icmp-type",
        "code", "8", "\\\n", "#", "persist", "block-policy", "return", "log",
    ]), 0..40)) {
        let text = format!("m = \"{{ 80 }}\"\ntable <t> {{ 10.0.0.0/8 }}\n{}", toks.join(" "));
        let _ = parse(&text, Path::new("x.conf"), &ifaces);
    }
}

/// pf syntax issue 17 asked for: interface and ICMP type lists, address ranges, `set skip
/// on`, `set state-policy`, per-rule state binding, `allow-opts`.
#[test]
fn lists_ranges_skip_policy_and_options() {
    let rs = ok("set skip on { em0 em1 }\nset state-policy if-bound\n\
                 pass on { em0, em1 } inet proto icmp icmp-type { echoreq, unreach } allow-opts\n\
                 pass inet6 proto icmp6 icmp6-type { neighbrsol, neighbradv } keep state (floating)\n\
                 block from 10.0.0.1 - 10.0.0.6 to { 192.168.0.0 - 192.168.1.255, 2001:db8::1 - 2001:db8::2 }\n");
    assert_eq!((rs.skip.clone(), rs.state_policy), (vec![0, 1], StatePolicy::IfBound));
    let r = &rs.rules[0];
    assert_eq!(
        (r.ifaces.clone(), r.icmp_types.clone(), r.allow_opts, r.state_policy),
        (vec![0, 1], vec![8, 3], true, None)
    );
    assert_eq!(
        (rs.rules[1].icmp_types.clone(), rs.rules[1].state_policy),
        (vec![135, 136], Some(StatePolicy::Floating))
    );
    let prefixes = |m: &AddrMatch| match m {
        AddrMatch::List(l) => l
            .iter()
            .map(|i| match i.target {
                AddrTarget::Prefix(p) => p.to_string(),
                AddrTarget::Table(_) => panic!(),
            })
            .collect::<Vec<_>>(),
        AddrMatch::Any => panic!(),
    };
    assert_eq!(
        prefixes(&rs.rules[2].src),
        ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"]
    );
    assert_eq!(
        prefixes(&rs.rules[2].dst),
        ["192.168.0.0/23", "2001:db8::1/128", "2001:db8::2/128"]
    );
    assert!(!ok("pass all\n").rules[0].allow_opts);
    assert_eq!(ok("set state-policy floating\n").state_policy, StatePolicy::Floating);
}

/// What linerate does not do is refused by name at its position, never accepted and ignored.
#[test]
fn unimplemented_pf_syntax_is_refused_by_name() {
    let cases = [
        (
            "pass in on ! { em0 em1 }",
            "rules.conf:1:14: `on ! { ... }` is not supported by linerate (negate a single interface)",
        ),
        (
            "pass on { em0 !em1 }",
            "rules.conf:1:15: `!` in an interface list is not supported by linerate (negate a single interface)",
        ),
        (
            "pass proto icmp icmp-type { unreach code 4 }",
            "rules.conf:1:37: `code` in an icmp-type list is not supported by linerate (one rule per type and code)",
        ),
        (
            "block from ! 10.0.0.1 - 10.0.0.2",
            "rules.conf:1:23: `! a - b` is not supported by linerate (a negated range)",
        ),
        (
            "block from 10.0.0.0/8 - 11.0.0.0",
            "rules.conf:1:12: a range is written between two addresses, without /len",
        ),
        (
            "block from 10.0.0.9 - 10.0.0.1",
            "rules.conf:1:23: the range's last address is below its first",
        ),
        (
            "block from 10.0.0.9 - ::1",
            "rules.conf:1:23: the range's two addresses are of different families",
        ),
        ("block all allow-opts", "rules.conf:1:11: allow-opts only applies to pass rules"),
        (
            "set state-policy sticky",
            "rules.conf:1:18: expected floating or if-bound, found \"sticky\"",
        ),
        (
            "pass in proto tcp keep state (no-such)",
            "rules.conf:1:31: expected a state option (sloppy, if-bound, floating, max, max-src-conn, max-src-conn-rate, max-src-states, max-src-nodes, overload, source-track, adaptive.start, adaptive.end, no-sync, or a timeout such as tcp.established 3600), found \"no-such\"",
        ),
        (
            "pass in proto tcp keep state (max 10 sloppy)",
            "rules.conf:1:38: expected \",\" or \")\", found \"sloppy\"",
        ),
        (
            "pass in proto tcp modulate state (sloppy)",
            "rules.conf:1:19: modulate state does not take sloppy (use keep state (sloppy))",
        ),
        (
            "block in proto tcp modulate state",
            "rules.conf:1:20: modulate state only applies to pass rules",
        ),
        ("pass in proto tcp modulate", "rules.conf:1:27: expected \"state\", found end of file"),
        (
            "pass in proto tcp synproxy state (sloppy)",
            "rules.conf:1:19: synproxy state does not take sloppy (the proxy checks the handshake's numbers)",
        ),
        (
            "pass out proto tcp synproxy state",
            "rules.conf:1:20: synproxy state only applies to in rules (it answers the SYNs that arrive)",
        ),
        (
            "block in proto tcp synproxy state",
            "rules.conf:1:20: synproxy state only applies to pass rules",
        ),
        (
            "pass in proto tcp synproxy state (no-such)",
            "rules.conf:1:35: expected a state option (sloppy, if-bound, floating, max, max-src-conn, max-src-conn-rate, max-src-states, max-src-nodes, overload, source-track, adaptive.start, adaptive.end, no-sync, or a timeout such as tcp.established 3600), found \"no-such\"",
        ),
        ("pass in proto tcp synproxy", "rules.conf:1:27: expected \"state\", found end of file"),
        (
            "rdr on em0 proto tcp to port 80 -> 10.0.0.5\npass in proto tcp synproxy state",
            "rules.conf:2:19: synproxy state is not supported together with nat, rdr or binat rules (line 1)",
        ),
        (
            "nat on em0 from 10.0.0.0/8 -> 192.0.2.1\npass in proto tcp to port 80 synproxy state",
            "rules.conf:2:30: synproxy state is not supported together with nat, rdr or binat rules (line 1)",
        ),
        (
            "pass out reply-to (em1 192.0.2.1) inet all",
            "rules.conf:1:10: `reply-to` on an `out` rule is not supported by linerate (write it on the `pass in` rule of the interface the flows arrive on)",
        ),
        (
            "match out on em0 rdr-to 10.0.0.1",
            "rules.conf:1:18: `match rdr-to` is not supported by linerate (only on `pass in` filter rules)",
        ),
        (
            "nat pass log on em0 from any to any -> 1.2.3.4",
            "rules.conf:1:10: `nat pass log` is not supported by linerate (log with a filter rule)",
        ),
        (
            "nat-anchor \"ftp-proxy/*\" {\n}",
            "rules.conf:1:26: inline rules of `nat-anchor` are not supported by linerate (only `anchor \"name\" { ... }` with filter rules)",
        ),
        (
            "set syncookies adaptive",
            "rules.conf:1:5: `set syncookies` is not supported by linerate (no SYN cookies: `synproxy state` protects servers from SYN floods)",
        ),
        (
            "set optimization fast",
            "rules.conf:1:18: unknown optimization \"fast\" (normal, high-latency, satellite, conservative or aggressive)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(err(text), want, "for {text:?}");
    }
}

/// `log` comes after the direction, as in pf; `log (all)` also logs the packets of its states.
#[test]
fn log_options() {
    use fw::rules::LogMode;
    let rs = ok(
        "block log all\npass in log (all) quick proto tcp label \"web\"\npass out all\nblock in log on em0 all\n",
    );
    let modes: Vec<LogMode> = rs.rules.iter().map(|r| r.log).collect();
    assert_eq!(modes, [LogMode::Decided, LogMode::All, LogMode::None, LogMode::Decided]);
    assert!(rs.rules[1].quick);
}

/// "Billion laughs": nine macros, each naming the one below ten times, would expand to 10^8
/// addresses (gigabytes, minutes, in the running router on a reload). The expansion stops at
/// its limit with the place it was reached; a large but real macro (a 45,000-address list
/// used in 20 rules) still parses.
#[test]
fn macro_expansion_is_bounded() {
    let mut text = String::from("x0 = \"10.0.0.1\"\n");
    for i in 1..9 {
        text.push_str(&format!(
            "x{i} = \"{{ {} }}\"\n",
            vec![format!("$x{}", i - 1); 10].join(", ")
        ));
    }
    text.push_str("pass from $x8\n");
    let t0 = std::time::Instant::now();
    let e = err(&text);
    assert!(
        e.starts_with(
            "rules.conf:10:11: macro expansions in this file add more than 2000000 tokens here"
        ),
        "{e}"
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(30), "stopped late: {:?}", t0.elapsed());
    let big: Vec<String> =
        (0..45_000u32).map(|i| format!("10.{}.{}.{}", i >> 8 & 255, i & 255, i >> 16)).collect();
    let mut text = format!("big = \"{{ {} }}\"\n", big.join(", "));
    for k in 0..20 {
        text.push_str(&format!("block in quick proto tcp from $big to any port {}\n", 1000 + k));
    }
    assert_eq!(ok(&text).rules.len(), 20);
}

/// Every nesting the grammar allows is bounded: 200,000 nested `{` (or anchors) used to
/// overflow the parser's stack and abort the process (the running router, on a reload). The
/// deepest nesting accepted still parses on a thread with 2 MiB of stack (the control
/// socket's threads, which run reloads).
#[test]
fn nesting_is_bounded_and_never_overflows_the_stack() {
    let nest = |open: &str, inner: &str, close: &str, d: usize| {
        format!("{}{inner}{}", open.repeat(d), close.repeat(d))
    };
    let cases = [
        (
            format!("pass on {} all", nest("{", "lr-a", "}", 200_000)),
            "interface lists nested more than 16 deep",
        ),
        (
            format!("antispoof for {}", nest("{", "lr-a", "}", 200_000)),
            "interface lists nested more than 16 deep",
        ),
        (
            format!("pass from {} to any", nest("{", "10.0.0.1", "}", 200_000)),
            "host lists nested more than 16 deep",
        ),
        (
            nest("anchor \"a\" {\n", "pass all\n", "}\n", 200_000),
            "anchors nested more than 64 deep",
        ),
    ];
    let deepest = [
        format!("pass on {} all", nest("{", "lr-a", "}", 17)),
        format!("antispoof for {}", nest("{", "lo", "}", 17)),
        format!("pass from {} to any", nest("{", "10.0.0.1", "}", 17)),
        nest("anchor \"a\" {\n", "pass all\n", "}\n", 64),
    ];
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for (text, want) in &cases {
                let e = err(text);
                assert!(e.contains(want), "{e}");
            }
            for text in &deepest {
                ok(text);
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
