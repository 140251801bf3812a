//! Tests for `Config::parse`/`load`: happy path, examples, every error kind.

use super::*;
use std::net::IpAddr;

/// Two interfaces; 7 lines, so text appended to it starts on line 8.
const BASE: &str = r#"[[interface]]
name = "lr-a"
addresses = ["198.18.0.1/24", "2001:db8:a::1/64"]

[[interface]]
name = "lr-b"
addresses = ["198.19.0.1/24", "2001:db8:b::1/64"]
"#;
const BASE_LINES: usize = 7;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("router.toml"))
}

/// Asserts `text` fails at `line:col` with a message containing `frag`.
#[track_caller]
fn fails(text: &str, line: usize, col: usize, frag: &str) {
    let e = parse(text).expect_err("config should be rejected");
    assert_eq!((e.line, e.column), (line, col), "wrong position for: {e}");
    assert!(e.message.contains(frag), "message {:?} lacks {frag:?}", e.message);
    assert_eq!(e.to_string(), format!("router.toml:{line}:{col}: {}", e.message));
}

/// Like `fails`, for text appended to `BASE`; `line` is relative to `extra`.
#[track_caller]
fn fails_after_base(extra: &str, line: usize, col: usize, frag: &str) {
    fails(&format!("{BASE}{extra}"), BASE_LINES + line, col, frag);
}

#[test]
fn base_is_seven_lines() {
    assert_eq!(BASE.lines().count(), BASE_LINES);
}

// ---------------------------------------------------------------- happy path

#[test]
fn empty_file_gives_defaults() {
    let c = parse("").unwrap();
    assert_eq!(c.router, RouterSettings::default());
    assert_eq!(c.router.workers, 1);
    assert_eq!(c.router.batch_size, 64);
    assert_eq!(c.router.control_socket, PathBuf::from("/run/linerate.sock"));
    assert!(c.interfaces.is_empty() && c.routes.is_empty() && c.neighbours.is_empty());
    assert_eq!(c.path, PathBuf::from("router.toml"));
}

/// `BASE` with every section: router settings, routes with and without a next hop or an
/// interface, and neighbours with and without an interface.
fn full_config_text() -> String {
    format!(
        r#"{BASE}
[router]
workers = 4
batch_size = 128
control_socket = "/tmp/lr.sock"

[[route]]
prefix = "198.20.0.0/16"
via = "198.19.0.2"

[[route]]
prefix = "2001:db8:c::/48"
via = "2001:db8:a::2"

[[route]]
prefix = "10.0.0.0/8"
via = "192.0.2.1"
interface = "lr-a"

[[route]]
prefix = "203.0.113.0/24"
interface = "lr-b"

[[neighbour]]
address = "198.19.0.2"
mac = "02:00:00:00:00:02"

[[neighbour]]
address = "fe80::2"
mac = "02:00:00:00:00:03"
interface = "lr-a"
"#
    )
}

#[test]
fn full_config() {
    let c = parse(&full_config_text()).unwrap();
    assert_eq!(c.router.workers, 4);
    assert_eq!(c.router.batch_size, 128);
    assert_eq!(c.router.control_socket, PathBuf::from("/tmp/lr.sock"));
    check_full_interfaces(&c);
    check_full_routes(&c);
    check_full_neighbours(&c);
}

/// `BASE`'s interfaces with their defaults; on-link inference from their addresses.
fn check_full_interfaces(c: &Config) {
    assert_eq!(c.interfaces.len(), 2);
    let a = &c.interfaces[0];
    assert_eq!(a.name, "lr-a");
    assert_eq!(a.mac, None);
    assert_eq!(a.mtu, 1500);
    assert_eq!(a.backend, Backend::Auto);
    assert_eq!(
        a.addresses,
        vec![
            IfAddr { addr: ip("198.18.0.1"), prefix_len: 24 },
            IfAddr { addr: ip("2001:db8:a::1"), prefix_len: 64 },
        ]
    );
    assert_eq!(a.addresses[0].network().to_string(), "198.18.0.0/24");
    assert!(c.interface("lr-b").unwrap().is_on_link(&ip("198.19.0.77")));
}

/// Routes keep their order; a missing interface is inferred from the next hop.
fn check_full_routes(c: &Config) {
    let r: Vec<_> =
        c.routes.iter().map(|r| (r.prefix.to_string(), r.via, r.interface.as_str())).collect();
    assert_eq!(
        r,
        vec![
            ("198.20.0.0/16".to_owned(), Some(ip("198.19.0.2")), "lr-b"),
            ("2001:db8:c::/48".to_owned(), Some(ip("2001:db8:a::2")), "lr-a"),
            ("10.0.0.0/8".to_owned(), Some(ip("192.0.2.1")), "lr-a"),
            ("203.0.113.0/24".to_owned(), None, "lr-b"),
        ]
    );
}

/// Neighbours, the first one's interface inferred from its address.
fn check_full_neighbours(c: &Config) {
    assert_eq!(
        c.neighbours,
        vec![
            Neighbour {
                address: ip("198.19.0.2"),
                mac: MacAddr([2, 0, 0, 0, 0, 2]),
                interface: "lr-b".into()
            },
            Neighbour {
                address: ip("fe80::2"),
                mac: MacAddr([2, 0, 0, 0, 0, 3]),
                interface: "lr-a".into()
            },
        ]
    );
}

#[test]
fn interface_options() {
    let c = parse(
        "[[interface]]\nname = \"eth0\"\nmac = \"02:AA:00:00:00:01\"\nmtu = 1966\nbackend = \"af_xdp\"\n\
         [[interface]]\nname = \"x\"\nbackend = \"af_packet\"\nmtu = 68\n\
         [[interface]]\nname = \"m\"\nbackend = \"memory\"\n",
    )
    .unwrap();
    let i = &c.interfaces[0];
    assert_eq!(i.mac, Some(MacAddr([2, 0xaa, 0, 0, 0, 1])));
    assert_eq!((i.mtu, i.backend), (1966, Backend::AfXdp));
    assert!(i.addresses.is_empty());
    assert_eq!((c.interfaces[1].backend, c.interfaces[1].mtu), (Backend::AfPacket, 68));
    assert_eq!(c.interfaces[2].backend, Backend::Memory);
}

#[test]
fn on_link_inference_prefers_longest_prefix() {
    let c = parse(
        "[[interface]]\nname = \"wide\"\naddresses = [\"10.0.0.1/8\"]\n\
         [[interface]]\nname = \"narrow\"\naddresses = [\"10.1.0.1/16\"]\n\
         [[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"10.1.2.3\"\n\
         [[neighbour]]\naddress = \"10.2.0.1\"\nmac = \"02:00:00:00:00:09\"\n",
    )
    .unwrap();
    assert_eq!(c.routes[0].interface, "narrow");
    assert_eq!(c.neighbours[0].interface, "wide");
}

#[test]
fn example_files_validate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let c = Config::load(&dir.join("router.toml")).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = c.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["lr-a", "lr-b", "lr-b.100"]);
    assert_eq!(c.interfaces[2].vlan, Some(Vlan { parent: "lr-b".into(), tag: 100 }));
    assert_eq!(c.interfaces[0].tap_name(0), "lrh-a");
    assert_eq!(c.interfaces[0].addresses.len(), 2);
    assert_eq!(c.interfaces[0].mac, Some("02:00:00:00:00:01".parse().unwrap()));
    assert_eq!(c.interfaces[1].mac, None);
    assert!(c.routes.len() >= 2 && c.neighbours.len() >= 2);
    assert!(c.routes.iter().any(|r| r.via.is_none()));
    assert!(c.neighbours.iter().any(|n| n.address.is_ipv6()));
    // The example spells out every punt default.
    assert_eq!(c.router.punt, crate::PuntSettings::default());

    assert_eq!(c.firewall.as_ref().unwrap().rules, dir.join("rules.conf"));

    let routes = routefile::load(&dir.join("routes.txt")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(routes.len(), 10);
    assert_eq!(routes[0].prefix.to_string(), "198.18.0.0/15");
    assert_eq!(routes[0].next_hop, Some(ip("198.19.0.1")));
    assert!(routes.iter().any(|r| r.prefix.is_ipv6()));
}

// --------------------------------------------------------------- I/O errors

#[test]
fn missing_file() {
    let p = Path::new("/nonexistent/linerate/router.toml");
    let e = Config::load(p).unwrap_err();
    assert_eq!((e.line, e.column), (0, 0));
    assert_eq!(e.path, p);
    let s = e.to_string();
    assert!(s.starts_with("/nonexistent/linerate/router.toml: cannot read: "), "{s}");
    assert!(s.contains("No such file"), "{s}");
}

/// A device or a folder given as the config is refused at once (reading `/dev/zero` whole
/// would fill memory).
#[test]
fn devices_and_folders_are_not_configs() {
    for p in ["/dev/zero", "/tmp"] {
        let e = Config::load(Path::new(p)).unwrap_err().to_string();
        assert_eq!(e, format!("{p}: cannot read: not a regular file"));
    }
}

// ---------------------------------------------------- TOML / serde errors

#[test]
fn toml_syntax_error() {
    let e = parse("[router\nworkers = 1\n").unwrap_err();
    assert_eq!((e.line, e.column), (1, 8));
    assert!(e.message.contains("invalid table header"), "{}", e.message);
    assert!(!e.message.contains('\n'));
    fails("[router]\nworkers = \n", 2, 11, "");
}

#[test]
fn unknown_keys() {
    fails("[[interfaces]]\nname = \"a\"\n", 1, 3, "unknown field `interfaces`");
    fails("[router]\nworkers = 1\nbogus = 2\n", 3, 1, "unknown field `bogus`");
    fails(
        "[[interface]]\nname = \"a\"\n  mtuu = 5\n",
        3,
        3,
        "unknown field `mtuu`, expected one of",
    );
    fails_after_base(
        "[[route]]\nprefix = \"10.0.0.0/8\"\ngateway = \"1.2.3.4\"\n",
        3,
        1,
        "unknown field `gateway`",
    );
    fails_after_base(
        "[[neighbour]]\naddress = \"198.18.0.9\"\nlladdr = \"x\"\n",
        3,
        1,
        "unknown field `lladdr`",
    );
}

#[test]
fn missing_and_mistyped_fields() {
    fails("\n[[interface]]\nmtu = 1500\n", 2, 1, "missing field `name`");
    fails_after_base("[[route]]\nvia = \"198.18.0.2\"\n", 1, 1, "missing field `prefix`");
    fails_after_base("[[neighbour]]\naddress = \"198.18.0.2\"\n", 1, 1, "missing field `mac`");
    fails("[[interface]]\nname = \"a\"\nmtu = \"1500\"\n", 3, 7, "invalid type: string");
    fails("[[interface]]\nname = 5\n", 2, 8, "expected a string");
    fails("[[interface]]\nname = \"a\"\naddresses = \"198.18.0.1/24\"\n", 3, 13, "invalid type");
    fails("[router]\nworkers = 99999999999999999999\n", 2, 11, "");
}

// ------------------------------------------------------------ [router]

#[test]
fn router_ranges() {
    fails("[router]\nworkers = 0\n", 2, 11, "router: workers 0 is out of range (1..=256)");
    fails("[router]\nworkers = 257\n", 2, 11, "workers 257 is out of range");
    fails("[router]\nbatch_size = 31\n", 2, 14, "router: batch_size 31 is out of range (32..=256)");
    fails("[router]\nbatch_size = 257\n", 2, 14, "batch_size 257 is out of range");
    fails("[router]\nbatch_size = -64\n", 2, 14, "batch_size -64 is out of range");
    assert_eq!(parse("[router]\nbatch_size = 32\n").unwrap().router.batch_size, 32);
    assert_eq!(parse("[router]\nbatch_size = 256\n").unwrap().router.batch_size, 256);
}

#[test]
fn router_control_socket() {
    fails("[router]\ncontrol_socket = \"\"\n", 2, 18, "control_socket must be a non-empty path");
    let long = format!("[router]\ncontrol_socket = \"/{}\"\n", "x".repeat(107));
    fails(&long, 2, 18, "108 bytes long; Unix socket paths are limited to 107 bytes");
}

// --------------------------------------------------------- [[interface]]

#[test]
fn interface_names() {
    fails("[[interface]]\nname = \"\"\n", 2, 8, "interface name \"\" is empty");
    fails("[[interface]]\nname = \"abcdefghijklmnop\"\n", 2, 8, "is longer than 15 bytes");
    assert!(parse("[[interface]]\nname = \"abcdefghijklmno\"\n").is_ok());
    fails("[[interface]]\nname = \"lr/a\"\n", 2, 8, "must not contain '/'");
    fails("[[interface]]\nname = \"lr a\"\n", 2, 8, "whitespace");
    fails("[[interface]]\nname = \"lr:0\"\n", 2, 8, "must not contain");
    fails("[[interface]]\nname = \"..\"\n", 2, 8, "is reserved");
}

#[test]
fn duplicate_interface() {
    fails_after_base(
        "\n[[interface]]\nname = \"lr-a\"\n",
        3,
        8,
        "duplicate interface \"lr-a\" (first defined at line 2)",
    );
}

#[test]
fn interface_mac() {
    fails(
        "[[interface]]\nname = \"lr-b\"\nmac = \"zz:00:00:00:00:01\"\n",
        3,
        7,
        "interface \"lr-b\": mac \"zz:00:00:00:00:01\" is not a MAC address (expected six hex bytes like 02:00:00:00:00:01)",
    );
    fails("[[interface]]\nname = \"a\"\nmac = \"02:00:00:00:01\"\n", 3, 7, "is not a MAC address");
    fails(
        "[[interface]]\nname = \"a\"\nmac = \"01:00:5e:00:00:01\"\n",
        3,
        7,
        "is a multicast address",
    );
    fails(
        "[[interface]]\nname = \"a\"\nmac = \"ff:ff:ff:ff:ff:ff\"\n",
        3,
        7,
        "is a broadcast address",
    );
    fails(
        "[[interface]]\nname = \"a\"\nmac = \"00:00:00:00:00:00\"\n",
        3,
        7,
        "is an all-zero address",
    );
}

#[test]
fn interface_addresses() {
    let t = |addrs: &str| format!("[[interface]]\nname = \"a\"\naddresses = [{addrs}]\n");
    fails(
        &t(r#""198.18.0.1/24", "198.18.0.300/24""#),
        3,
        31,
        "interface \"a\": address \"198.18.0.300/24\" is not a valid CIDR address: `198.18.0.300` is not an IPv4 or IPv6 address",
    );
    fails(&t(r#""198.18.0.1""#), 3, 14, "missing prefix length");
    fails(&t(r#""198.18.0.1/33""#), 3, 14, "prefix length 33 is too long for IPv4 (maximum 32)");
    fails(
        &t(r#""2001:db8::1/129""#),
        3,
        14,
        "prefix length 129 is too long for IPv6 (maximum 128)",
    );
    fails(&t(r#""198.18.0.1/x""#), 3, 14, "prefix length `x` is not a number");
    fails(&t(r#""0.0.0.0/0""#), 3, 14, "address 0.0.0.0 is not a unicast address");
    fails(
        &t(r#""198.18.0.1/24", "198.18.0.1/16""#),
        3,
        31,
        "address 198.18.0.1 is already assigned to interface \"a\"",
    );
    fails_after_base(
        "[[interface]]\nname = \"c\"\naddresses = [\"198.19.0.1/24\"]\n",
        3,
        14,
        "already assigned to interface \"lr-b\"",
    );
}

#[test]
fn interface_numbers_and_backend() {
    let t = |kv: &str| format!("[[interface]]\nname = \"a\"\n{kv}\n");
    fails(&t("mtu = 67"), 3, 7, "interface \"a\": mtu 67 is out of range (68..=9000)");
    fails(&t("mtu = 9001"), 3, 7, "mtu 9001 is out of range (68..=9000)");
    // Jumbo frames: before, accepted, and every frame longer than a frame buffer was lost
    // without a count (and a host stack with a 9000-byte MTU offered peers an MSS it could
    // never receive).
    fails(
        &t("mtu = 9000"),
        3,
        7,
        "interface \"a\": mtu 9000 is more than linerate's frame buffers hold: at most 1966",
    );
    fails(
        &t("queues = 4"),
        3,
        10,
        "interface \"a\": queues is no longer a setting: each worker reads one queue (router.workers)",
    );
    fails(
        &t("backend = \"xdp\""),
        3,
        11,
        "interface \"a\": unknown backend \"xdp\" (expected auto, af_xdp, af_packet or memory)",
    );
}

// -------------------------------------------------------------- [[route]]

#[test]
fn route_prefix_errors() {
    let t = |p: &str| format!("[[route]]\nprefix = \"{p}\"\ninterface = \"lr-a\"\n");
    fails_after_base(
        &t("198.19.1.0/16"),
        2,
        10,
        "route: prefix \"198.19.1.0/16\" is invalid: 198.19.1.0/16 has host bits set (did you mean 198.19.0.0/16?)",
    );
    fails_after_base(&t("2001:db8::1/32"), 2, 10, "did you mean 2001:db8::/32?");
    fails_after_base(&t("198.19.0.0/33"), 2, 10, "prefix length 33 is too long for IPv4");
    fails_after_base(&t("198.19.0.0"), 2, 10, "missing prefix length");
    fails_after_base(&t("198.19.0/16"), 2, 10, "`198.19.0` is not an IPv4 or IPv6 address");
}

#[test]
fn duplicate_route() {
    fails_after_base(
        "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"198.18.0.2\"\n[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"198.19.0.2\"\n",
        5,
        10,
        "duplicate route 10.0.0.0/8 (first defined at line 9)",
    );
}

#[test]
fn route_via_errors() {
    let t = |p: &str, via: &str| format!("[[route]]\nprefix = \"{p}\"\nvia = \"{via}\"\n");
    fails_after_base(
        &t("10.0.0.0/8", "2001:db8:a::2"),
        3,
        7,
        "route 10.0.0.0/8: via 2001:db8:a::2 is IPv6 but the prefix is IPv4",
    );
    fails_after_base(
        &t("2001:db8:c::/48", "198.18.0.2"),
        3,
        7,
        "via 198.18.0.2 is IPv4 but the prefix is IPv6",
    );
    fails_after_base(
        &t("10.0.0.0/8", "198.18.0.256"),
        3,
        7,
        "route 10.0.0.0/8: via \"198.18.0.256\" is not an IPv4 or IPv6 address",
    );
    fails_after_base(
        &t("10.0.0.0/8", "192.0.2.1"),
        3,
        7,
        "route 10.0.0.0/8: via 192.0.2.1 is not on-link on any interface",
    );
    fails_after_base(&t("2001:db8:c::/48", "fe80::1"), 3, 7, "via fe80::1 is not on-link");
    fails_after_base(
        &t("10.0.0.0/8", "198.18.0.1"),
        3,
        7,
        "via 198.18.0.1 is this router's own address on interface \"lr-a\"",
    );
    fails_after_base(&t("10.0.0.0/8", "224.0.0.1"), 3, 7, "via 224.0.0.1 is not a unicast address");
    fails_after_base(
        &t("10.0.0.0/8", "198.18.0.255"),
        3,
        7,
        "via 198.18.0.255 is the broadcast address of 198.18.0.0/24 on interface \"lr-a\"",
    );
}

/// An interface's own routes are not a static route's to replace (the FIB refuses it too):
/// before, such a route was installed over them, and removed by a reload it withdrew them.
#[test]
fn static_routes_for_interface_routes_are_refused() {
    let t =
        |prefix: &str, via: &str| format!("[[route]]\nprefix = \"{prefix}\"\nvia = \"{via}\"\n");
    fails_after_base(
        &t("198.18.0.0/24", "198.19.0.7"),
        2,
        10,
        "route 198.18.0.0/24 is the connected prefix of interface \"lr-a\" (198.18.0.1/24)",
    );
    fails_after_base(
        &t("198.18.0.1/32", "198.19.0.7"),
        2,
        10,
        "route 198.18.0.1/32 is this router's own address on interface \"lr-a\"",
    );
    fails_after_base(
        &t("2001:db8:b::/64", "2001:db8:a::7"),
        2,
        10,
        "route 2001:db8:b::/64 is the connected prefix of interface \"lr-b\"",
    );
    fails_after_base(
        &t("2001:db8:b::1/128", "2001:db8:a::7"),
        2,
        10,
        "is this router's own address on interface \"lr-b\"",
    );
    fails_after_base(
        &t("198.18.0.255/32", "198.19.0.7"),
        2,
        10,
        "route 198.18.0.255/32 is the broadcast address of 198.18.0.0/24 on interface \"lr-a\"",
    );
    // The network named is the broadcast address's own, whichever address comes first.
    let v6_first = "[[interface]]\nname = \"lr-a\"\naddresses = [\"2001:db8:a::1/64\", \"198.18.0.1/24\"]\n[[interface]]\nname = \"lr-b\"\naddresses = [\"198.19.0.1/24\"]\n";
    fails(
        &format!("{v6_first}{}", t("198.18.0.255/32", "198.19.0.7")),
        8,
        10,
        "route 198.18.0.255/32 is the broadcast address of 198.18.0.0/24 on interface \"lr-a\"",
    );
    // More specific routes inside a connected prefix, and wider ones around it, are fine.
    for (prefix, via) in [
        ("198.18.0.128/25", "198.19.0.7"),
        ("198.18.0.0/16", "198.19.0.7"),
        ("198.18.0.2/32", "198.19.0.7"),
    ] {
        parse(&format!("{BASE}{}", t(prefix, via))).unwrap_or_else(|e| panic!("{prefix}: {e}"));
    }
    // The same from a route file.
    let dir = std::env::temp_dir().join(format!("lr-cfg-ifroute-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("routes.txt");
    std::fs::write(&file, "10.0.0.0/8 198.18.0.2\n198.19.0.0/24 198.18.0.2\n").unwrap();
    let e = parse(&format!("[router]\nroute_file = \"{}\"\n{BASE}", file.display())).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((e.line, e.column), (2, 1), "{e}");
    assert!(
        e.message.contains("route 198.19.0.0/24 is the connected prefix of interface \"lr-b\""),
        "{e}"
    );
}

#[test]
fn route_interface_errors() {
    fails_after_base(
        "[[route]]\nprefix = \"10.0.0.0/8\"\n",
        2,
        10,
        "route 10.0.0.0/8 has neither `via` nor `interface`",
    );
    fails_after_base(
        "[[route]]\nprefix = \"10.0.0.0/8\"\ninterface = \"lr-c\"\n",
        3,
        13,
        "route 10.0.0.0/8: interface \"lr-c\" is not defined (defined: \"lr-a\", \"lr-b\")",
    );
    fails(
        "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"192.0.2.1\"\ninterface = \"lr-a\"\n",
        4,
        13,
        "interface \"lr-a\" is not defined (none are defined)",
    );
}

// ---------------------------------------------------------- [[neighbour]]

#[test]
fn neighbour_errors() {
    let t = |addr: &str, mac: &str, extra: &str| {
        format!("[[neighbour]]\naddress = \"{addr}\"\nmac = \"{mac}\"\n{extra}")
    };
    const M: &str = "02:00:00:00:00:02";
    fails_after_base(
        &t("198.19.0.x", M, ""),
        2,
        11,
        "neighbour: address \"198.19.0.x\" is not an IPv4 or IPv6 address",
    );
    fails_after_base(
        &t("198.19.0.2", "02:00:00:00:00:0g", ""),
        3,
        7,
        "neighbour 198.19.0.2: mac \"02:00:00:00:00:0g\" is not a MAC address",
    );
    fails_after_base(&t("198.19.0.2", "ff:ff:ff:ff:ff:ff", ""), 3, 7, "is a broadcast address");
    fails_after_base(
        &t("198.19.0.2", M, "interface = \"lr-z\"\n"),
        4,
        13,
        "neighbour 198.19.0.2: interface \"lr-z\" is not defined",
    );
    fails_after_base(
        &t("192.0.2.9", M, ""),
        2,
        11,
        "neighbour 192.0.2.9: address is not on-link on any interface",
    );
    fails_after_base(&t("fe80::9", M, ""), 2, 11, "neighbour fe80::9: address is not on-link");
    fails_after_base(
        &t("198.19.0.1", M, ""),
        2,
        11,
        "address is this router's own address on interface \"lr-b\"",
    );
    fails_after_base(
        &t("198.19.0.255", M, ""),
        2,
        11,
        "neighbour 198.19.0.255: address is the broadcast address of 198.19.0.0/24 on interface \"lr-b\"",
    );
    fails_after_base(
        &t("ff02::1", M, "interface = \"lr-a\"\n"),
        2,
        11,
        "address is not a unicast address",
    );
    fails_after_base(
        &format!(
            "{}{}",
            t("198.19.0.2", M, ""),
            t("198.19.0.2", "02:00:00:00:00:03", "interface = \"lr-b\"\n")
        ),
        5,
        11,
        "duplicate neighbour 198.19.0.2 on interface \"lr-b\" (first defined at line 9)",
    );
    // Same address on two different interfaces is fine (e.g. link-local).
    let ok = format!(
        "{BASE}{}{}",
        t("fe80::1", M, "interface = \"lr-a\"\n"),
        t("fe80::1", M, "interface = \"lr-b\"\n")
    );
    assert_eq!(parse(&ok).unwrap().neighbours.len(), 2);
}

// --------------------------------------------------------------- [firewall]

#[test]
fn firewall_rules_resolve_against_the_config_directory() {
    let text = format!("{BASE}[firewall]\nrules = \"fw/rules.conf\"\n");
    let c = Config::parse(&text, Path::new("/etc/linerate/router.toml")).unwrap();
    assert_eq!(c.firewall.unwrap().rules, Path::new("/etc/linerate/fw/rules.conf"));
    let c = Config::parse(
        &format!("{BASE}[firewall]\nrules = \"/abs/r.conf\"\n"),
        Path::new("x/router.toml"),
    )
    .unwrap();
    assert_eq!(c.firewall.unwrap().rules, Path::new("/abs/r.conf"));
    assert_eq!(parse(BASE).unwrap().firewall, None);
}

#[test]
fn firewall_errors() {
    fails_after_base(
        "[firewall]\nrules = \"r.conf\"\nstates = 5\n",
        3,
        1,
        "unknown field `states`",
    );
    fails_after_base(
        "[firewall]\nrules = \"\"\n",
        2,
        9,
        "firewall: rules must be a non-empty path",
    );
    fails_after_base("[firewall]\n", 1, 1, "missing field `rules`");
}

#[test]
fn vlan_sub_interfaces() {
    let ok = format!(
        "{BASE}\n[[interface]]\nname = \"lr-a.10\"\nparent = \"lr-a\"\nvlan = 10\naddresses = [\"10.10.0.1/24\"]\n"
    );
    let cfg = parse(&ok).unwrap();
    let sub = cfg.interface("lr-a.10").unwrap();
    assert_eq!(sub.vlan, Some(Vlan { parent: "lr-a".into(), tag: 10 }));
    assert_eq!(cfg.interface("lr-a").unwrap().vlan, None);
    // Sub-interface before its parent is fine.
    let before = "[[interface]]\nname = \"lr-v\"\nparent = \"lr-p\"\nvlan = 7\n\n[[interface]]\nname = \"lr-p\"\n";
    assert_eq!(parse(before).unwrap().interfaces[0].vlan.as_ref().unwrap().tag, 7);
    let sub = |kv: &str| format!("{BASE}\n[[interface]]\nname = \"lr-s\"\n{kv}\n");
    let l = BASE_LINES + 4;
    fails(
        &sub("parent = \"lr-x\"\nvlan = 5"),
        l,
        10,
        "parent \"lr-x\" is not a configured interface",
    );
    fails(&sub("parent = \"lr-a\""), l, 10, "parent needs a vlan tag");
    fails(&sub("vlan = 5"), l, 8, "vlan needs a parent interface");
    fails(&sub("parent = \"lr-a\"\nvlan = 4095"), l + 1, 8, "vlan 4095 is out of range (1..=4094)");
    fails(
        &sub("parent = \"lr-a\"\nvlan = 5\nbackend = \"af_xdp\""),
        l + 2,
        11,
        "backend cannot be set on a VLAN sub-interface",
    );
    let dup = format!("{ok}\n[[interface]]\nname = \"lr-a.b\"\nparent = \"lr-a\"\nvlan = 10\n");
    let e = parse(&dup).unwrap_err();
    assert!(e.message.contains("vlan 10 on \"lr-a\" is already interface \"lr-a.10\""), "{e}");
    let stacked =
        format!("{ok}\n[[interface]]\nname = \"lr-q\"\nparent = \"lr-a.10\"\nvlan = 11\n");
    assert!(parse(&stacked).unwrap_err().message.contains("stacked tags are not supported"));
}

/// Addresses a router cannot have, and one prefix on two links: before, each was accepted
/// (a loopback address, martian on the wire; the same /24 on two interfaces, whose second
/// connected route replaced the first).
#[test]
fn interface_addresses_a_router_cannot_have() {
    let one = |addrs: &str| format!("[[interface]]\nname = \"lr-a\"\naddresses = [{addrs}]\n");
    fails(
        &one("\"127.0.0.2/8\""),
        3,
        14,
        "interface \"lr-a\": address 127.0.0.2/8 is a loopback address",
    );
    fails(&one("\"::1/128\""), 3, 14, "address ::1/128 is the loopback address");
    fails(
        &one("\"198.18.0.255/24\""),
        3,
        14,
        "address 198.18.0.255/24 is the broadcast address of its prefix",
    );
    parse(&one("\"198.18.0.255/23\", \"198.19.0.1/31\", \"198.19.1.1/32\"")).unwrap();
    let two =
        |a: &str, b: &str| format!("{}[[interface]]\nname = \"lr-b\"\naddresses = [{b}]\n", one(a));
    fails(
        &two("\"198.18.0.1/24\"", "\"198.18.0.2/24\""),
        6,
        14,
        "interface \"lr-b\": address 198.18.0.2/24: its prefix 198.18.0.0/24 is interface \"lr-a\"'s already",
    );
    // Link-local prefixes are on every link; a more specific prefix inside another is fine.
    parse(&two("\"fe80::1/64\", \"198.18.0.1/24\"", "\"fe80::2/64\", \"198.18.0.129/25\""))
        .unwrap();
    // A TAP may not take an interface's name.
    let clash = "[[interface]]\nname = \"lr-a\"\ntap = \"lr-b\"\n[[interface]]\nname = \"lr-b\"\n";
    fails(
        clash,
        2,
        8,
        "interface \"lr-a\"'s host-stack TAP would be named \"lr-b\", as interface \"lr-b\" is",
    );
}

#[test]
fn host_stack_settings_and_tap_names() {
    let cfg = parse(BASE).unwrap();
    assert!(cfg.router.host_stack);
    assert_eq!(cfg.router.icmp_errors_per_second, 100);
    assert_eq!(cfg.interfaces[0].tap_name(0), "lrh-a");
    let long = Interface { name: "lr1234567890-d0".into(), ..cfg.interfaces[0].clone() };
    assert_eq!(long.tap_name(3), "lrh1234567890-3");
    let r = parse("[router]\nhost_stack = false\nicmp_errors_per_second = 0\n").unwrap();
    assert!(!r.router.host_stack);
    assert_eq!(r.router.icmp_errors_per_second, 0);
    fails(&format!("{BASE}tap = \"eth9\"\n"), BASE_LINES + 1, 7, "must start with \"lr\"");
    let clash = "[[interface]]\nname = \"lr-a\"\n[[interface]]\nname = \"-a\"\n";
    fails(clash, 4, 8, "would both use host-stack TAP \"lrh-a\"");
}

#[test]
fn idle_and_receive_thread_settings() {
    let d = parse(BASE).unwrap().router;
    assert!(d.sleep_when_idle && d.napi_threads);
    // A spinning worker would starve receive threads placed below it: off together.
    let spin = parse("[router]\nsleep_when_idle = false\n").unwrap().router;
    assert!(!spin.sleep_when_idle && !spin.napi_threads);
    let off = parse("[router]\nnapi_threads = false\n").unwrap().router;
    assert!(off.sleep_when_idle && !off.napi_threads);
    fails(
        "[router]\nsleep_when_idle = false\nnapi_threads = true\n",
        3,
        16,
        "napi_threads = true needs sleep_when_idle = true",
    );
}

#[test]
fn max_neighbours_default_range_and_position() {
    assert_eq!(parse(BASE).unwrap().router.max_neighbours, 65_536);
    let r = parse("[router]\nmax_neighbours = 16\n").unwrap();
    assert_eq!(r.router.max_neighbours, 16);
    assert_eq!(
        parse("[router]\nmax_neighbours = 1048576\n").unwrap().router.max_neighbours,
        1 << 20
    );
    fails(
        "[router]\nmax_neighbours = 15\n",
        2,
        18,
        "router: max_neighbours 15 is out of range (16..=1048576)",
    );
    fails("[router]\nmax_neighbours = 1048577\n", 2, 18, "max_neighbours 1048577 is out of range");
    fails("[router]\nmax_neighbours = \"many\"\n", 2, 18, "expected i64");
}

#[test]
fn punt_classes_defaults_overrides_and_positions() {
    let d = parse(BASE).unwrap().router.punt;
    assert_eq!(d, crate::PuntSettings::default());
    assert_eq!((d.resolve.rate, d.next_hop_burst, d.icmp_error_queue), (5_000, 8, 256));
    let text = "[router.punt]\narp_nd = { rate = 500, burst = 50, queue = 64 }\nresolve = { rate = 100 }\nicmp_error = { queue = 16 }\nnext_hop_burst = 2\nnext_hop_rate = 1\n";
    let p = parse(text).unwrap().router.punt;
    assert_eq!((p.arp_nd.rate, p.arp_nd.burst, p.arp_nd.queue), (500, 50, 64));
    // What is not given keeps its default.
    assert_eq!((p.resolve.rate, p.resolve.burst, p.resolve.queue), (100, 500, 1_024));
    assert_eq!(
        (p.icmp_error_queue, p.next_hop_burst, p.next_hop_rate, p.local),
        (16, 2, 1, d.local)
    );
    fails(
        "[router.punt]\nlocal = { rate = 0 }\n",
        2,
        18,
        "router.punt.local: rate 0 is out of range (1..=10000000)",
    );
    fails(
        "[router.punt]\nfragment = { queue = 8 }\n",
        2,
        22,
        "router.punt.fragment: queue 8 is out of range (16..=1048576)",
    );
    fails(
        "[router.punt]\nnext_hop_burst = 9\n",
        2,
        18,
        "router.punt: next_hop_burst 9 is out of range (1..=8)",
    );
    fails(
        "[router.punt]\nicmp_error = { queue = 64, rate = 5 }\n",
        2,
        35,
        "only queue can be set here; the rate of ICMP errors is router.icmp_errors_per_second",
    );
    fails(
        "[router.punt]\nresolve = { rate = 5, per_host = 1 }\n",
        2,
        23,
        "unknown field `per_host`",
    );
    fails("[router.punt]\nflood = 1\n", 2, 1, "unknown field `flood`");
}

#[test]
fn privilege_settings() {
    let d = parse(BASE).unwrap().router;
    assert!(!d.fail_closed && d.user.is_none() && d.control_group.is_none());
    let r =
        parse("[router]\nfail_closed = true\nuser = \"linerate\"\ncontrol_group = \"lr-ops\"\n")
            .unwrap()
            .router;
    assert!(r.fail_closed);
    assert_eq!((r.user.as_deref(), r.control_group.as_deref()), (Some("linerate"), Some("lr-ops")));
    fails(
        "[router]\nuser = \"-root\"\n",
        2,
        8,
        "router: user \"-root\" is not a user or group name",
    );
    fails("[router]\ncontrol_group = \"a b\"\n", 2, 17, "control_group \"a b\" is not");
    fails("[router]\nuser = \"\"\n", 2, 8, "is not a user");
    fails("[router]\nfail_closed = 1\n", 2, 15, "expected a boolean");
}

#[test]
fn metrics_listen() {
    assert_eq!(parse(BASE).unwrap().router.metrics_listen, None);
    let r = parse("[router]\nmetrics_listen = \"127.0.0.1:9111\"\n").unwrap().router;
    assert_eq!(r.metrics_listen, Some("127.0.0.1:9111".parse().unwrap()));
    let r = parse("[router]\nmetrics_listen = \"[::1]:9111\"\n").unwrap().router;
    assert_eq!(r.metrics_listen, Some("[::1]:9111".parse().unwrap()));
    fails(
        "[router]\nmetrics_listen = \"localhost\"\n",
        2,
        18,
        "metrics_listen \"localhost\" is not an address and port",
    );
    fails("[router]\nmetrics_listen = 9111\n", 2, 18, "expected a string");
}

#[test]
fn fast_path_settings() {
    let d = parse("").unwrap().router;
    assert!(d.fast_path && d.fast_path_flows == 1 << 18);
    let off = parse("[router]\nfast_path = false\nfast_path_flows = 4096\n").unwrap().router;
    assert!(!off.fast_path && off.fast_path_flows == 4096);
    fails("[router]\nfast_path_flows = 10\n", 2, 19, "fast_path_flows");
    fails("[router]\nfast_path = 1\n", 2, 13, "expected a boolean");
    assert!(d.rebuild_ports);
    assert!(!parse("[router]\nrebuild_ports = false\n").unwrap().router.rebuild_ports);
}
