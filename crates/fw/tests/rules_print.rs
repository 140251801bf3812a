//! `linerate check -v`'s printout of a rule set (`RuleSet::to_pf_text`), construct by
//! construct, against the lines `pfctl -nvf` prints for the same statements (pfctl_parser.c
//! `print_rule`, `print_pool`, `print_tabledef`; pf.conf(5)'s examples). Every case also
//! parses its printout back to the same rule set ([`print_support::roundtrip`]).

mod print_support;

use std::path::Path;

use fw::rules::MAX_PRINTED_RULES;
use print_support::{Ifaces, roundtrip};

/// The printout of `text` (interfaces `lr-wan`, `lr-lan`), checked to roundtrip.
fn printed(text: &str) -> Vec<String> {
    let ifaces = Ifaces::wan_lan();
    let path = Path::new("print.conf");
    let rs = ifaces.parse(text, path).unwrap_or_else(|e| panic!("{e}"));
    roundtrip(&rs, &ifaces, path).lines().map(str::to_owned).collect()
}

fn assert_prints(text: &str, want: &[&str]) {
    assert_eq!(printed(text), want, "{text}");
}

#[test]
fn defaults_are_explicit() {
    assert_prints(
        "block all\npass all\npass proto udp all\npass proto tcp all flags any\npass out all no state\nblock in proto tcp all flags S/SA\n",
        &[
            "block drop all",
            "pass all flags S/SA keep state",
            "pass proto udp all keep state",
            "pass proto tcp all flags any keep state",
            "pass out all no state",
            "block drop in proto tcp all flags S/SA",
        ],
    );
}

#[test]
fn lists_expand_one_rule_per_element_in_pfctls_order() {
    assert_prints(
        "pass in on { lr-wan lr-lan } proto { tcp udp } from { 10.0.0.1 10.0.0.2 } to any port { 22 53 }\n",
        &[
            "pass in on lr-wan inet proto tcp from 10.0.0.1 to any port = 22 flags S/SA keep state",
            "pass in on lr-wan inet proto tcp from 10.0.0.1 to any port = 53 flags S/SA keep state",
            "pass in on lr-wan inet proto tcp from 10.0.0.2 to any port = 22 flags S/SA keep state",
            "pass in on lr-wan inet proto tcp from 10.0.0.2 to any port = 53 flags S/SA keep state",
            "pass in on lr-wan inet proto udp from 10.0.0.1 to any port = 22 keep state",
            "pass in on lr-wan inet proto udp from 10.0.0.1 to any port = 53 keep state",
            "pass in on lr-wan inet proto udp from 10.0.0.2 to any port = 22 keep state",
            "pass in on lr-wan inet proto udp from 10.0.0.2 to any port = 53 keep state",
            "pass in on lr-lan inet proto tcp from 10.0.0.1 to any port = 22 flags S/SA keep state",
            "pass in on lr-lan inet proto tcp from 10.0.0.1 to any port = 53 flags S/SA keep state",
            "pass in on lr-lan inet proto tcp from 10.0.0.2 to any port = 22 flags S/SA keep state",
            "pass in on lr-lan inet proto tcp from 10.0.0.2 to any port = 53 flags S/SA keep state",
            "pass in on lr-lan inet proto udp from 10.0.0.1 to any port = 22 keep state",
            "pass in on lr-lan inet proto udp from 10.0.0.1 to any port = 53 keep state",
            "pass in on lr-lan inet proto udp from 10.0.0.2 to any port = 22 keep state",
            "pass in on lr-lan inet proto udp from 10.0.0.2 to any port = 53 keep state",
        ],
    );
}

#[test]
fn macros_and_families() {
    // A combination of an IPv4 source and an IPv6 destination matches nothing: left out.
    assert_prints(
        "hosts = \"{ 192.0.2.1, 2001:db8::1 }\"\nblock in from $hosts to { 198.51.100.0/24, 2001:db8:1::/48 }\nblock from ! 10.0.0.0/8\n",
        &[
            "block drop in inet from 192.0.2.1 to 198.51.100.0/24",
            "block drop in inet6 from 2001:db8::1 to 2001:db8:1::/48",
            "block drop inet from ! 10.0.0.0/8 to any",
        ],
    );
}

#[test]
fn ports_print_as_pf_operators() {
    assert_prints(
        "block proto tcp to port != 25\nblock proto tcp to port 10 <> 20\nblock proto tcp to port 10 >< 20\nblock proto tcp from port > 1023\nblock proto tcp from port < 1024\nblock proto tcp to port 6000:6010\nblock proto tcp to port 0x10\nblock proto tcp to port 10 >< 11\n",
        &[
            "block drop proto tcp from any to any port != 25",
            "block drop proto tcp from any to any port 10 <> 20",
            "block drop proto tcp from any to any port 11:19",
            "block drop proto tcp from any port >= 1024 to any",
            "block drop proto tcp from any port <= 1023 to any",
            "block drop proto tcp from any to any port 6000:6010",
            "block drop proto tcp from any to any port = 16",
        ],
    );
}

#[test]
fn block_answers() {
    assert_prints(
        "set block-policy return\nblock in all\nblock drop out all\nblock return-rst proto tcp all\nblock return-rst (ttl 5) proto tcp all\nblock return-icmp (host-unr) inet all\nblock return-icmp6 (admin-unr) inet6 all\nblock return-icmp (net-unr, addr-unr) all\n",
        &[
            "set block-policy return",
            "block return in all",
            "block drop out all",
            "block return-rst proto tcp all",
            "block return-rst(ttl 5) proto tcp all",
            "block return-icmp(host-unr) inet all",
            "block return-icmp6(admin-unr) inet6 all",
            "block return-icmp(net-unr, addr-unr) all",
        ],
    );
}

#[test]
fn rule_options_in_pfctls_order() {
    assert_prints(
        "pass in log (all) quick on ! lr-wan inet proto tcp from any to 10.0.0.1 port 22 flags S/SAFR modulate state (max 100, if-bound, tcp.established 60, source-track rule, max-src-nodes 5, max-src-states 3) allow-opts label \"ssh\" ridentifier 7 tag SSH\n",
        &[
            "pass in log (all) quick on ! lr-wan inet proto tcp from any to 10.0.0.1 port = 22 flags S/FSRA modulate state (max 100, source-track rule, max-src-states 3, max-src-nodes 5, if-bound, tcp.established 60, adaptive.start 60, adaptive.end 120) allow-opts label \"ssh\" ridentifier 7 tag SSH",
        ],
    );
    assert_prints(
        "pass in proto tcp all keep state (sloppy, floating, udp.first 5, tcp.first 9)\npass in proto tcp all synproxy state\nblock out all ! tagged SSH\npass out all tagged \"x\"\n",
        &[
            "pass in proto tcp all flags S/SA keep state (floating, sloppy, tcp.first 9, udp.first 5)",
            "pass in proto tcp all flags S/SA synproxy state",
            "block drop out all ! tagged SSH",
            "pass out all flags S/SA keep state tagged x",
        ],
    );
}

/// Protocols print by the names pfctl gives them, which parse back; others as numbers.
#[test]
fn protocol_names_parse_back() {
    let lines = printed("block proto { 1 2 4 6 17 41 47 50 51 58 89 103 112 132 240 250 }\n");
    let protos: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("block drop proto ")?.strip_suffix(" all"))
        .collect();
    assert_eq!(
        protos,
        [
            "icmp",
            "igmp",
            "ipencap",
            "tcp",
            "udp",
            "ipv6",
            "gre",
            "esp",
            "ah",
            "ipv6-icmp",
            "ospf",
            "pim",
            "carp",
            "sctp",
            "pfsync",
            "250"
        ]
    );
}

#[test]
fn icmp_types_and_codes_by_name() {
    assert_prints(
        "pass inet proto icmp icmp-type { echoreq, 3 }\npass inet proto icmp icmp-type unreach code needfrag\npass inet6 proto icmp6 icmp6-type 1 code 4\npass inet proto icmp icmp-type 99 code 7\n",
        &[
            "pass inet proto icmp all icmp-type echoreq keep state",
            "pass inet proto icmp all icmp-type unreach keep state",
            "pass inet proto icmp all icmp-type unreach code needfrag keep state",
            "pass inet6 proto ipv6-icmp all icmp6-type unreach code port-unr keep state",
            "pass inet proto icmp all icmp-type 99 code 7 keep state",
        ],
    );
}

#[test]
fn label_macros_are_substituted() {
    assert_prints(
        "pass in on { lr-wan lr-lan } proto tcp from 10.0.0.0/24 to <t> port { 80 >=1024 } label \"$nr:$if:$proto:$srcaddr:$srcport->$dstaddr:$dstport\"\n",
        &[
            "table <t>",
            "pass in on lr-wan inet proto tcp from 10.0.0.0/24 to <t> port = 80 flags S/SA keep state label \"0:lr-wan:tcp:10.0.0.0/24:-><t>:80\"",
            "pass in on lr-wan inet proto tcp from 10.0.0.0/24 to <t> port >= 1024 flags S/SA keep state label \"1:lr-wan:tcp:10.0.0.0/24:-><t>:>=1024\"",
            "pass in on lr-lan inet proto tcp from 10.0.0.0/24 to <t> port = 80 flags S/SA keep state label \"2:lr-lan:tcp:10.0.0.0/24:-><t>:80\"",
            "pass in on lr-lan inet proto tcp from 10.0.0.0/24 to <t> port >= 1024 flags S/SA keep state label \"3:lr-lan:tcp:10.0.0.0/24:-><t>:>=1024\"",
        ],
    );
    assert_prints(
        "pass all label \"$if $proto $srcaddr $nr\"\n",
        &["pass all flags S/SA keep state label \"any ip any 0\""],
    );
}

#[test]
fn options_and_tables() {
    assert_prints(
        "set limit { states 20000, frags 100, src-nodes 50 }\nset limit table-entries 500\nset optimization aggressive\nset timeout { tcp.established 600, interval 5 }\nset state-policy if-bound\nset skip on lr-lan\nset keepcounters\n\
         table <a> const { 10.0.0.0/8, !10.1.0.0/16 }\ntable <b> persist\npass from <a> to <c>\n",
        &[
            "set limit states 20000",
            "set limit src-nodes 50",
            "set limit frags 100",
            "set limit table-entries 500",
            "set timeout tcp.first 30",
            "set timeout tcp.opening 5",
            "set timeout tcp.established 600",
            "set timeout tcp.closing 60",
            "set timeout tcp.finwait 30",
            "set timeout tcp.closed 30",
            "set timeout interval 5",
            "set state-policy if-bound",
            "set skip on lr-lan",
            "set keepcounters",
            "table <a> const { 10.0.0.0/8 !10.1.0.0/16 }",
            "table <b>",
            "table <c>",
            "pass from <a> to <c> flags S/SA keep state",
        ],
    );
}

#[test]
fn interface_addresses_and_route_hosts() {
    assert_prints(
        "pass in on lr-wan from lr-wan:network to (self)\nblock in from no-route to any\nblock in from ! urpf-failed to no-route\n",
        &[
            "pass in on lr-wan from (lr-wan:network) to (self) flags S/SA keep state",
            "block drop in from no-route to any",
            "block drop in from ! urpf-failed to no-route",
        ],
    );
}

#[test]
fn route_to_and_reply_to() {
    assert_prints(
        "pass in on lr-lan route-to (lr-wan 198.18.0.254) inet from 10.0.0.0/24\npass in on lr-wan inet proto tcp to port 80 reply-to 198.18.0.254\n",
        &[
            "pass in on lr-lan route-to (lr-wan 198.18.0.254) inet from 10.0.0.0/24 to any flags S/SA keep state",
            "pass in on lr-wan reply-to 198.18.0.254 inet proto tcp from any to any port = 80 flags S/SA keep state",
        ],
    );
}

#[test]
fn translation_rules() {
    assert_prints(
        "no nat on lr-wan from 10.0.0.9\nnat pass on lr-wan inet from 10.0.0.0/24 -> { 198.18.0.1, 198.18.0.2 } sticky-address\n\
         nat on lr-wan from 10.1.0.0/24 -> 198.18.0.8/30 port 2000:3000 random\nnat on lr-wan from 10.2.0.0/24 -> (lr-wan) static-port\n\
         rdr on lr-wan proto tcp to (lr-wan) port 8000:8010 -> 10.0.0.5 port 80:*\nbinat on lr-wan from 10.0.0.7 -> 198.18.0.7\n\
         rdr on lr-wan proto { tcp udp } to 198.18.0.1 port 53 -> 10.0.0.53 source-hash\n",
        &[
            "no nat on lr-wan inet from 10.0.0.9 to any",
            "nat pass on lr-wan inet from 10.0.0.0/24 to any -> { 198.18.0.1, 198.18.0.2 } round-robin sticky-address",
            "nat on lr-wan inet from 10.1.0.0/24 to any -> 198.18.0.8/30 port 2000:3000 random",
            "nat on lr-wan inet from 10.2.0.0/24 to any -> (lr-wan) static-port",
            "rdr on lr-wan proto tcp from any to (lr-wan) port 8000:8010 -> 10.0.0.5 port 80:*",
            "binat on lr-wan inet from 10.0.0.7 to any -> 198.18.0.7",
            "rdr on lr-wan inet proto tcp from any to 198.18.0.1 port = 53 -> 10.0.0.53 source-hash",
            "rdr on lr-wan inet proto udp from any to 198.18.0.1 port = 53 -> 10.0.0.53 source-hash",
        ],
    );
}

/// OpenBSD's translation on match and pass rules prints as the rules linerate makes of it.
#[test]
fn openbsd_translation_and_scrub() {
    assert_prints(
        "match in on lr-wan all scrub (no-df, min-ttl 10, set-tos lowdelay)\nmatch out on lr-wan inet from 10.0.0.0/24 nat-to (lr-wan)\n\
         pass in quick on lr-wan inet proto tcp to 198.18.0.1 port 80 rdr-to 10.0.0.5 port 8080\npass out quick\n",
        &[
            "scrub in on lr-wan all no-df min-ttl 10 set-tos 0x10",
            "nat on lr-wan inet from 10.0.0.0/24 to any -> (lr-wan)",
            "rdr pass on lr-wan inet proto tcp from any to 198.18.0.1 port = 80 -> 10.0.0.5 port 8080",
            "pass out quick all flags S/SA keep state",
        ],
    );
    assert_prints(
        "no scrub on lr-lan proto tcp\nscrub out proto tcp max-mss 1400 random-id\n",
        &["no scrub on lr-lan proto tcp all", "scrub out proto tcp all random-id max-mss 1400"],
    );
}

#[test]
fn anchors_nest_as_pfctl_prints_them() {
    assert_prints(
        "nat-anchor \"ftp/*\"\nanchor \"empty\"\nblock all\nanchor \"outer\" {\n  pass in proto tcp to port { 22 80 } label \"$nr\"\n  anchor \"inner\" {\n    block in quick from 192.0.2.1\n  }\n  anchor \"hole\"\n}\npass out all label \"$nr\"\n",
        &[
            "nat-anchor \"ftp/*\" all",
            "anchor \"empty\" all",
            "block drop all",
            "anchor \"outer\" all {",
            "  pass in proto tcp from any to any port = 22 flags S/SA keep state label \"0\"",
            "  pass in proto tcp from any to any port = 80 flags S/SA keep state label \"1\"",
            "  anchor \"inner\" all {",
            "    block drop in quick inet from 192.0.2.1 to any",
            "  }",
            "  anchor \"hole\" all",
            "}",
            "pass out all flags S/SA keep state label \"3\"",
        ],
    );
    assert_prints(
        "anchor \"a\" all {\n anchor \"b\" all\n}\n",
        &["anchor \"a\" all {", "  anchor \"b\" all", "}"],
    );
}

/// An anchor's rules loaded from a file print where the anchor stands.
#[test]
fn loaded_anchor_prints_inline() {
    let dir = std::env::temp_dir().join(format!("fw-print-anchor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("a.conf"), "pass in proto tcp to port 22\n").expect("write");
    let path = dir.join("main.conf");
    let text = "anchor \"spam\"\nload anchor \"spam\" from \"a.conf\"\nblock all\n";
    let ifaces = Ifaces::wan_lan();
    let rs = ifaces.parse(text, &path).unwrap_or_else(|e| panic!("{e}"));
    let lines = roundtrip(&rs, &ifaces, &path);
    assert_eq!(
        lines,
        "anchor \"spam\" all {\n  pass in proto tcp from any to any port = 22 flags S/SA keep state\n}\nblock drop all\n"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_rule_that_matches_nothing_prints_nothing() {
    assert_prints(
        "block proto tcp to port 10 >< 11\npass all\n",
        &["pass all flags S/SA keep state"],
    );
}

#[test]
fn an_expansion_past_the_cap_is_an_error_not_a_flood() {
    let hosts: Vec<String> = (0..1100).map(|i| format!("10.{}.{}.1", i / 256, i % 256)).collect();
    let list = hosts.join(" ");
    let text = format!("block from {{ {list} }} to {{ {list} }}\n");
    let ifaces = Ifaces::wan_lan();
    let rs = ifaces.parse(&text, Path::new("big.conf")).expect("parses");
    let err = rs.to_pf_text(&ifaces.name_refs()).expect_err("too large");
    assert_eq!(err.rules, 1100 * 1100);
    assert!(err.rules > MAX_PRINTED_RULES);
    assert!(err.to_string().contains("1210000 rules"), "{err}");
}
