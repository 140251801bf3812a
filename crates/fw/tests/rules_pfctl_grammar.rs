//! Spellings pfctl's parse.y accepts that linerate once misread (issue 44): each is read as
//! pfctl reads it, and evaluated as pf would evaluate it.

use std::path::Path;

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::reference::evaluate;
use fw::rules::{Action, LogMode, PortMatch, RuleSet, StateMode, parse};

fn ifaces(name: &str) -> Option<u16> {
    ["em0", "em1", "tun0"].iter().position(|n| *n == name).map(|i| i as u16)
}

fn ok(text: &str) -> RuleSet {
    parse(text, Path::new("rules.conf"), &ifaces).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn err(text: &str) -> String {
    parse(text, Path::new("rules.conf"), &ifaces).expect_err(text).to_string()
}

fn udp_to(port: u16) -> PacketKey {
    PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        proto: proto::UDP,
        src: 0x0a00_0001,
        dst: 0x0a00_0002,
        src_port: 1000,
        dst_port: port,
        len: 60,
        ..PacketKey::ZERO
    }
}

/// pf.conf(5): `label string`; parse.y's STRING is a quoted string or a bare word.
#[test]
fn a_label_is_a_word_or_a_quoted_string() {
    assert_eq!(ok("pass in all label foo_bar").rules[0].label.as_deref(), Some("foo_bar"));
    assert_eq!(
        ok("pass in all label \"web servers\"").rules[0].label.as_deref(),
        Some("web servers")
    );
}

/// parse.y's `logquick`: `log quick` and `quick log` alike.
#[test]
fn log_may_follow_quick() {
    for text in ["block in quick log on tun0 all", "block in log quick on tun0 all"] {
        let r = &ok(text).rules[0];
        assert!(r.quick, "{text}");
        assert_eq!(r.log, LogMode::Decided, "{text}");
    }
}

/// A port as pfctl's getservice reads a word that is not all digits: `strtoul` base 0.
#[test]
fn ports_in_hexadecimal() {
    let r = &ok("pass in proto udp to any port 0x10").rules[0];
    assert_eq!(r.dst_ports, PortMatch::Ranges(vec![(16, 16)]));
    assert!(err("pass in proto udp to any port 0x10000").contains("port"));
}

/// parseport takes `hi:lo` (PF_OP_RRG), which pf's test matches with no port: the rule
/// stays and matches nothing, and linerate says so.
#[test]
fn a_port_range_high_to_low_matches_nothing() {
    let rs = ok("block in all\npass in proto udp to any port 100:50");
    assert!(
        rs.notices.iter().any(|n| n.contains("100:50") && n.contains("matches no port")),
        "{:?}",
        rs.notices
    );
    for port in [50, 75, 100] {
        assert_eq!(evaluate(&rs, &udp_to(port)).action, Action::Block, "port {port}");
    }
}

/// pfctl's names of ICMP codes, valid only with their type.
#[test]
fn icmp_codes_by_name() {
    let r = &ok("pass in inet proto icmp icmp-type unreach code needfrag").rules[0];
    assert_eq!((r.icmp_types.clone(), r.icmp_code), (vec![3], Some(4)));
    let r = &ok("pass in inet6 proto icmp6 icmp6-type unreach code notnbr-unr").rules[0];
    assert_eq!((r.icmp_types.clone(), r.icmp_code), (vec![1], Some(2)));
    let r = &ok("pass in inet proto icmp icmp-type photuris code decrypt-fail").rules[0];
    assert_eq!((r.icmp_types.clone(), r.icmp_code), (vec![40], Some(3)));
    let r = &ok("pass in inet6 proto icmp6 icmp6-type listqry").rules[0];
    assert_eq!(r.icmp_types, vec![130]);
    assert!(
        err("pass in inet proto icmp icmp-type timex code needfrag")
            .contains("not a code of type 11")
    );
}

/// pfctl creates a table a rule names before any `table` line (empty); a later definition
/// fills it.
#[test]
fn tables_used_before_they_are_defined() {
    let rs = ok("block in quick from <bad> to any\ntable <bad> { 10.0.0.1 }\npass in all");
    assert_eq!(rs.tables.len(), 1);
    assert_eq!(evaluate(&rs, &udp_to(9)).action, Action::Block, "10.0.0.1 is in <bad>");
    let rs = ok("block in quick from <never> to any\npass in all");
    assert_eq!((rs.tables.len(), rs.tables[0].entries.len()), (1, 0), "made empty");
    assert_eq!(evaluate(&rs, &udp_to(9)).action, Action::Pass);
    assert!(err("table <t> { 10.0.0.1 }\ntable <t> { 10.0.0.2 }").contains("already defined"));
    assert!(
        err("pass from <t>\ntable <t> { 10.0.0.1 }\ntable <t> { 10.0.0.2 }")
            .contains("already defined")
    );
}

/// pfctl takes `synproxy state` on any rule and pf proxies the TCP connections it creates
/// (other protocols get a plain state).
#[test]
fn synproxy_without_proto_tcp() {
    let r = &ok("pass in on em0 all synproxy state").rules[0];
    assert_eq!(r.keep_state, StateMode::Synproxy);
    assert!(r.protos.is_empty());
}

/// Host names, as pfctl resolves them when it loads the file: linerate reads /etc/hosts
/// (every machine has `localhost`), and refuses a name only DNS would know.
#[test]
fn host_names_from_the_hosts_file() {
    let rs = ok("block in quick from localhost to any\npass in all");
    let t = &rs.tables[0];
    assert!(t.contains(Af::Inet, 0x7f00_0001), "127.0.0.1 in {t:?}");
    let from_localhost = PacketKey { src: 0x7f00_0001, ..udp_to(9) };
    assert_eq!(evaluate(&rs, &from_localhost).action, Action::Block);
    assert_eq!(evaluate(&rs, &udp_to(9)).action, Action::Pass);
    assert!(
        err("pass in from no-such-host.invalid").contains("unknown host \"no-such-host.invalid\"")
    );
}

/// `em0/24`: the interface's addresses with that prefix length (pfctl's host with a mask).
#[test]
fn an_interface_with_a_prefix_length() {
    let addrs = vec![("em0".to_owned(), vec![("192.0.2.1".parse().unwrap(), 32)])];
    let rs = fw::rules::parse_with_addresses(
        "block in quick from em0/24 to any\npass in all",
        Path::new("rules.conf"),
        &ifaces,
        &addrs,
    )
    .unwrap();
    let t = &rs.tables[0];
    assert!(t.contains(Af::Inet, 0xc000_02fe), "192.0.2.254 is in em0/24: {t:?}");
    assert!(!t.contains(Af::Inet, 0xc000_0301));
}

/// What pfctl knows and linerate does not do is refused by name, with why.
#[test]
fn refused_by_name() {
    for (text, what) in [
        ("set timeout sctp.first 30", "timeout `sctp.first` is not supported by linerate"),
        ("set timeout tcp.tsdiff 30", "timeout `tcp.tsdiff` is not supported by linerate"),
        (
            "nat on em0 from any to any -> (em0) endpoint-independent",
            "`endpoint-independent` is not supported by linerate",
        ),
    ] {
        let e = err(text);
        assert!(e.contains(what), "{text}: {e}");
    }
}

/// `include`: the file's statements in place, macros shared both ways, errors naming the
/// included file and its line; a file that includes itself is stopped.
#[test]
fn include_reads_a_file_in_place() {
    let dir = std::env::temp_dir().join(format!("lr-include-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("lan.conf"),
        "block in quick proto udp to any port $p\nlan = \"10.0.0.0/8\"",
    )
    .unwrap();
    std::fs::write(dir.join("bad.conf"), "pass in all\npass in from bogus.invalid\n").unwrap();
    std::fs::write(dir.join("self.conf"), "include \"self.conf\"\n").unwrap();
    let main = dir.join("main.conf");
    let load = |text: &str| {
        std::fs::write(&main, text).unwrap();
        fw::rules::load(&main, &ifaces)
    };
    let rs = load("p = 53\ninclude \"lan.conf\"\npass in from $lan to any").unwrap();
    assert_eq!(rs.rules.len(), 2);
    assert_eq!(
        evaluate(&rs, &udp_to(53)).action,
        Action::Block,
        "the included rule, with the macro defined before"
    );
    assert_eq!(evaluate(&rs, &udp_to(54)).action, Action::Pass, "the macro it defines, used after");
    let e = load("include \"bad.conf\"\n").unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:2:", dir.join("bad.conf").display())), "{e}");
    let e = load("include \"self.conf\"\n").unwrap_err().to_string();
    assert!(e.contains("more than 64 files included"), "{e}");
    let e = load("include \"missing.conf\"\n").unwrap_err().to_string();
    assert!(e.contains("main.conf:1:9: cannot read included file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `load anchor NAME from FILE` (pf.conf(5)'s example writes it after `anchor NAME`): the
/// file's rules stand where the anchor does; loaded into no evaluated anchor, a notice.
#[test]
fn load_anchor_fills_the_anchor_where_it_stands() {
    let dir = std::env::temp_dir().join(format!("lr-anchor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("spam.conf"), "block in quick proto udp to any port 53\n").unwrap();
    let main = dir.join("main.conf");
    let load = |text: &str| {
        std::fs::write(&main, text).unwrap();
        fw::rules::load(&main, &ifaces).unwrap()
    };
    for text in [
        "anchor spam\nload anchor spam from \"spam.conf\"\npass in all",
        "load anchor \"spam\" from \"spam.conf\"\nanchor \"spam\"\npass in all",
    ] {
        let rs = load(text);
        assert_eq!(rs.rules.len(), 2, "{text}");
        assert_eq!(evaluate(&rs, &udp_to(53)).action, Action::Block, "{text}: quick in the anchor");
        assert_eq!(evaluate(&rs, &udp_to(54)).action, Action::Pass, "{text}");
        assert!(rs.notices.is_empty(), "{:?}", rs.notices);
    }
    let rs = load("load anchor other from \"spam.conf\"\npass in all");
    assert_eq!(rs.rules.len(), 1);
    assert!(rs.notices.iter().any(|n| n.contains("match nothing")), "{:?}", rs.notices);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A pool type after `route-to`'s one gateway: refused by name, with why.
#[test]
fn a_pool_type_after_route_to_is_refused_by_name() {
    let e = err("pass in on em0 all route-to (em1 10.0.0.1) round-robin");
    assert!(e.contains("`round-robin` after `route-to`/`reply-to` is not supported by linerate (it takes one gateway"), "{e}");
}
