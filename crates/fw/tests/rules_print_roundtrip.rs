//! The property of `linerate check -v`'s printout (`RuleSet::to_pf_text`): for every rule
//! file of the fixtures (`tests/fixtures/*/`, each with the `c.toml` that names it and the
//! interfaces it is written for), the printed text parses back to the expanded rule set,
//! and prints the same again.

mod print_support;

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use print_support::{Ifaces, roundtrip};

/// The value of `key = "value"` on a line of a TOML file, if the line is that.
fn string_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.trim().strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
    rest.strip_prefix('"')?.strip_suffix('"')
}

/// The fixture's rule file and interfaces, read from its `c.toml` (the few keys the
/// fixtures use: `rules`, each `[[interface]]`'s `name` and `addresses`, a default route's
/// `via` for `egress`).
fn fixture(dir: &Path) -> (PathBuf, Ifaces) {
    let toml = std::fs::read_to_string(dir.join("c.toml")).expect("c.toml");
    let (mut rules, mut names, mut addresses, mut via) = (None, Vec::new(), Vec::new(), None);
    for line in toml.lines() {
        if let Some(r) = string_value(line, "rules") {
            rules = Some(dir.join(r));
        } else if let Some(n) = string_value(line, "name") {
            names.push(n.to_owned());
            addresses.push((n.to_owned(), Vec::new()));
        } else if let Some(list) = line.trim().strip_prefix("addresses = [") {
            let list = list.trim_end_matches(']');
            let parsed = list
                .split(',')
                .filter_map(|a| a.trim().trim_matches('"').split_once('/'))
                .map(|(a, l)| {
                    (a.parse::<IpAddr>().expect("address"), l.parse::<u8>().expect("length"))
                });
            addresses.last_mut().expect("[[interface]] first").1.extend(parsed);
        } else if let Some(v) = string_value(line, "via") {
            via = v.parse::<IpAddr>().ok();
        }
    }
    let on_link = |(_, a): &&(String, Vec<(IpAddr, u8)>)| {
        a.iter().any(|&(addr, len)| via.is_some_and(|v| same_net(addr, v, len)))
    };
    let egress = addresses.iter().position(|x| on_link(&x)).map(|i| i as u16);
    (rules.expect("rules = ..."), Ifaces { names, addresses, egress })
}

fn same_net(a: IpAddr, b: IpAddr, len: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            len == 0 || (u32::from(a) ^ u32::from(b)) >> (32 - u32::from(len.min(32))) == 0
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            len == 0 || (u128::from(a) ^ u128::from(b)) >> (128 - u32::from(len.min(128))) == 0
        }
        _ => false,
    }
}

#[test]
fn every_fixture_prints_and_parses_back_to_itself() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("c.toml").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 3, "{dirs:?}");
    for dir in dirs {
        let (path, ifaces) = fixture(&dir);
        let text = std::fs::read_to_string(&path).expect("rule file");
        let rs = ifaces.parse(&text, &path).unwrap_or_else(|e| panic!("{e}"));
        let printed = roundtrip(&rs, &ifaces, &path);
        assert!(printed.lines().count() >= rs.rules.len(), "{}", path.display());
    }
}

/// pfSense's file, printed, as pfctl would show its head: the options it sets, the tables,
/// scrub, translation and the first filter rules, with the defaults explicit.
#[test]
fn pfsense_fixture_reads_as_pfctl_prints_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pfsense");
    let (path, ifaces) = fixture(&dir);
    let rs = ifaces.parse(&std::fs::read_to_string(&path).expect("file"), &path).expect("parses");
    let text = rs.to_pf_text(&ifaces.name_refs()).expect("prints");
    let has = |line: &str| assert!(text.lines().any(|l| l == line), "no line {line:?} in\n{text}");
    has("set limit states 48000");
    has("set limit src-nodes 48000");
    has("set timeout adaptive.start 0");
    has("set timeout adaptive.end 0");
    has("table <vpn_networks> { 10.8.0.0/24 }");
    has("table <sshguard>");
    has("scrub on lr-wan inet all");
    has("no nat proto carp all");
    has("nat-anchor \"natearly/*\" all");
    has(
        "nat on lr-wan inet proto udp from 10.0.0.0/24 port = 500 to any port = 500 -> 198.18.0.1 static-port",
    );
    has("nat on lr-wan inet from 10.0.0.0/24 to any -> 198.18.0.1 port 1024:65535");
    has("rdr on lr-wan inet proto tcp from any to 198.18.0.1 port = 8443 -> 10.0.0.5 port 443");
    has("block drop in log inet all label \"Default deny rule IPv4\" ridentifier 1000000103");
    has(
        "pass quick inet6 proto ipv6-icmp all icmp6-type unreach keep state ridentifier 1000000107",
    );
    has("pass quick inet6 proto ipv6-icmp all icmp6-type toobig keep state ridentifier 1000000107");
    has(
        "block drop in log quick inet proto tcp from any port = 0 to any label \"Block traffic from port 0\" ridentifier 1000000114",
    );
    has(
        "block drop in log quick inet proto udp from any port = 0 to any label \"Block traffic from port 0\" ridentifier 1000000114",
    );
    has(
        "block drop in log quick proto tcp from <sshguard> to (self) port = 22 label \"sshguard\" ridentifier 1000000301",
    );
    has(
        "pass out route-to (lr-wan 198.18.0.254) inet from 198.18.0.1 to ! 198.18.0.0/24 flags S/SA keep state allow-opts label \"let out anything from firewall host itself\" ridentifier 1000005715",
    );
    has(
        "pass in quick on lr-wan inet proto tcp from any to (self) port = 2222 flags S/SA keep state (source-track rule, max-src-conn 10, max-src-conn-rate 15/60, overload <virusprot> flush global) label \"USER_RULE: ssh rate limit\" ridentifier 1770001003",
    );
    has(
        "pass in quick on lr-lan inet proto udp from 10.0.0.0/24 to any port = 53 keep state (udp.first 30, udp.multiple 90) label \"USER_RULE: DNS\" ridentifier 1770001006",
    );
    has("anchor \"userrules/*\" all");
    has(
        "pass in inet all flags S/SA keep state label \"NAT REFLECT: Allow traffic to localhost\" ridentifier 1000005911 tagged PFREFLECT",
    );
}

/// A small xorshift generator: the random files below are the same on every run.
struct Rng(u64);

impl Rng {
    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        choices[(self.0 % choices.len() as u64) as usize]
    }
}

/// A filter rule of random parts that agree with each other (ports only with TCP or UDP,
/// ICMP types with their protocol, addresses of the rule's family, state options on pass
/// rules); the parser may still refuse a few (those files are skipped).
fn random_filter_rule(rng: &mut Rng) -> String {
    let pass = rng.pick(&["pass", "block"]) == "pass";
    let action = if pass {
        "pass"
    } else {
        rng.pick(&[
            "block",
            "block drop",
            "block return",
            "block return-rst",
            "block return-icmp (host-unr)",
        ])
    };
    let af = rng.pick(&["", "", "inet", "inet6"]);
    let proto = rng.pick(&[
        "",
        "proto tcp",
        "proto udp",
        "proto { tcp udp }",
        "proto icmp",
        "proto icmp6",
        "proto gre",
    ]);
    let ports = proto.contains("tcp") || proto.contains("udp");
    let v4 = ["10.0.0.0/8", "{ 10.0.0.1 !10.0.0.2 }", "10.0.0.1 - 10.0.0.6", "192.0.2.0/24"];
    let v6 = ["2001:db8::/32", "{ 2001:db8::1 !2001:db8::2 }"];
    let shared = ["any", "<t1>", "! <t2>", "(self)", "lr-lan:network", "! (lr-wan)"];
    let mut hosts: Vec<&str> = shared.to_vec();
    if af != "inet6" {
        hosts.extend(v4);
    }
    if af != "inet" {
        hosts.extend(v6);
    }
    let mut w = vec![
        action,
        rng.pick(&["", "in", "out"]),
        rng.pick(&["", "", "log", "log (all)"]),
        rng.pick(&["", "quick"]),
    ];
    w.extend([rng.pick(&["", "on lr-wan", "on ! lr-lan", "on { lr-wan lr-lan }"]), af, proto]);
    match rng.pick(&["all", "from", "to", "both", "no-route"]) {
        "all" => w.push("all"),
        "no-route" => w.extend([
            "from",
            rng.pick(&["no-route", "! urpf-failed"]),
            "to",
            rng.pick(&["any", "no-route"]),
        ]),
        side => {
            if side != "to" {
                w.extend(["from", rng.pick(&hosts)]);
                w.push(if ports {
                    rng.pick(&["", "port 53", "port { 80 443 }", "port > 1023", "port != 25"])
                } else {
                    ""
                });
            }
            if side != "from" {
                w.extend(["to", rng.pick(&hosts)]);
                w.push(if ports {
                    rng.pick(&["", "port 22", "port { 22 8000:8080 }", "port 10 <> 20"])
                } else {
                    ""
                });
            }
        }
    }
    w.push(rng.pick(&["", "", "flags S/SA", "flags any", "flags /SAFR"]));
    w.push(match proto {
        "proto icmp" => rng.pick(&[
            "",
            "icmp-type echoreq",
            "icmp-type { unreach timex }",
            "icmp-type unreach code needfrag",
        ]),
        "proto icmp6" => rng.pick(&["", "icmp6-type echoreq", "icmp6-type { toobig neighbrsol }"]),
        _ => "",
    });
    if pass {
        w.push(rng.pick(&[
            "",
            "",
            "keep state",
            "no state",
            "modulate state",
            "keep state (max 10)",
            "keep state (sloppy, if-bound)",
            "keep state (max-src-conn 5, overload <bad> flush)",
            "keep state (udp.first 7, tcp.first 9)",
        ]));
        w.push(rng.pick(&["", "allow-opts"]));
    }
    w.extend([
        rng.pick(&["", "label \"L $nr $if $srcaddr $dstport $proto\"", "label plain"]),
        rng.pick(&["", "ridentifier 5"]),
        rng.pick(&["", "", "tag T1", "tagged T2", "! tagged T3"]),
    ]);
    w.iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>().join(" ")
}

/// A file of random options, tables, scrub and translation rules, filter rules and an
/// anchor around some of them.
fn random_file(rng: &mut Rng) -> String {
    let mut lines: Vec<String> = Vec::new();
    for _ in 0..3 {
        lines.push(
            rng.pick(&[
                "",
                "set block-policy return",
                "set limit states 5000",
                "set state-policy if-bound",
                "table <t1> { 10.0.0.0/8 }",
                "table <t2> const { 192.0.2.0/24 !192.0.2.1 }",
                "set timeout tcp.first 99",
            ])
            .into(),
        );
    }
    lines.push(
        rng.pick(&[
            "",
            "scrub in on lr-wan all random-id",
            "scrub out proto tcp all max-mss 1400",
            "no scrub on lr-lan",
        ])
        .into(),
    );
    for _ in 0..2 {
        lines.push(
            rng.pick(&[
                "",
                "nat on lr-wan from 10.0.0.0/24 -> (lr-wan)",
                "rdr on lr-wan proto { tcp udp } to port 80 -> 10.0.0.5 port 8080",
                "binat on lr-wan from 10.0.0.7 -> 198.18.0.7",
                "no nat on lr-wan from 10.0.0.9",
                "nat-anchor \"n/*\"",
            ])
            .into(),
        );
    }
    let anchored = rng.pick(&["", "a", "b"]);
    for k in 0..6 {
        if !anchored.is_empty() && k == 2 {
            lines.push(format!("anchor \"{anchored}\" {{"));
        }
        lines.push(random_filter_rule(rng));
        if !anchored.is_empty() && k == 4 {
            lines.push("}".into());
        }
    }
    lines.join("\n") + "\n"
}

/// Random files that parse print and parse back to themselves (property of the printout).
#[test]
fn random_rule_files_print_and_parse_back_to_themselves() {
    let ifaces = Ifaces::wan_lan();
    let path = Path::new("random.conf");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut parsed = 0;
    for _ in 0..4000 {
        let text = random_file(&mut rng);
        let Ok(rs) = ifaces.parse(&text, path) else { continue };
        parsed += 1;
        roundtrip(&rs, &ifaces, path);
    }
    assert!(parsed >= 200, "only {parsed} random files parse: the generator needs fixing");
}

/// The example router's rule file (`examples/rules.conf`, for `examples/router.toml`).
#[test]
fn the_example_rule_file_prints_and_parses_back_to_itself() {
    let a = |s: &str| s.parse::<IpAddr>().expect("address");
    let ifaces = Ifaces {
        names: vec!["lr-a".into(), "lr-b".into(), "lr-b.100".into()],
        addresses: vec![
            ("lr-a".into(), vec![(a("198.18.0.1"), 24), (a("2001:db8:a::1"), 64)]),
            ("lr-b".into(), vec![(a("198.19.0.1"), 24), (a("2001:db8:b::1"), 64)]),
            ("lr-b.100".into(), vec![(a("198.18.100.1"), 24)]),
        ],
        egress: Some(0),
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rules.conf");
    let rs = ifaces
        .parse(&std::fs::read_to_string(&path).expect("file"), &path)
        .unwrap_or_else(|e| panic!("{e}"));
    roundtrip(&rs, &ifaces, &path);
}
