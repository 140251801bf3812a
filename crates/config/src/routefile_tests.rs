use super::*;
use std::fmt::Write as _;
use std::time::Instant;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn p(text: &str) -> Result<Vec<FileRoute>, ConfigError> {
    parse(text, Path::new("routes.txt"))
}

#[track_caller]
fn fails(text: &str, line: usize, col: usize, frag: &str) {
    let e = p(text).expect_err("route file should be rejected");
    assert_eq!((e.line, e.column), (line, col), "wrong position for: {e}");
    assert!(e.message.contains(frag), "message {:?} lacks {frag:?}", e.message);
    assert_eq!(e.to_string(), format!("routes.txt:{line}:{col}: {}", e.message));
}

#[test]
fn happy_path() {
    let text = "# header\n\n198.18.0.0/15 198.19.0.1\n\t 2001:db8::/32\t\tfe80::1   # trailing\n   \n10.0.0.0/8 10.0.0.1#c\r\n0.0.0.0/0 1.1.1.1";
    let r = p(text).unwrap();
    assert_eq!(r.len(), 4);
    assert_eq!(
        r[0],
        FileRoute {
            prefix: "198.18.0.0/15".parse().unwrap(),
            next_hop: Some(ip("198.19.0.1")),
            interface: None,
            line: 3,
            next_hop_column: 15,
            interface_column: 0,
        }
    );
    assert_eq!(
        (r[1].prefix.to_string(), r[1].next_hop, r[1].line),
        ("2001:db8::/32".into(), Some(ip("fe80::1")), 4)
    );
    assert_eq!((r[2].prefix.to_string(), r[2].line), ("10.0.0.0/8".into(), 6));
    assert_eq!((r[3].prefix.len, r[3].line), (0, 7));
    assert!(p("").unwrap().is_empty());
    assert!(p("# only\n\n   # comments\n").unwrap().is_empty());
    assert_eq!(p("10.0.0.0/8 10.0.0.1\r\n").unwrap().len(), 1);
}

// One table of (text, line, column, message) cases: read top to bottom.
#[test]
fn errors() {
    fails("10.0.0.0/8\n", 1, 11, "route 10.0.0.0/8 has no next hop");
    fails("# c\n  10.0.0.0/8   # gw missing\n", 2, 13, "has no next hop");
    fails("10.0.0.0 10.0.0.1\n", 1, 1, "\"10.0.0.0\" is not a prefix: missing /LEN");
    fails(
        "\n 10.0.0/8 1.2.3.4\n",
        2,
        2,
        "bad prefix \"10.0.0/8\": `10.0.0` is not an IPv4 or IPv6 address",
    );
    fails("10.0.0.0/33 1.2.3.4\n", 1, 10, "prefix length 33 is too long for IPv4 (maximum 32)");
    fails(
        "2001:db8::/129 fe80::1\n",
        1,
        12,
        "prefix length 129 is too long for IPv6 (maximum 128)",
    );
    fails("10.0.0.0/x8 1.2.3.4\n", 1, 10, "prefix length `x8` is not a number");
    fails("10.0.0.0/ 1.2.3.4\n", 1, 10, "prefix length `` is not a number");
    fails("10.1.0.0/8 1.2.3.4\n", 1, 1, "10.1.0.0/8 has host bits set (did you mean 10.0.0.0/8?)");
    fails("10.0.0.0/8 1.2.3\n", 1, 12, "next hop \"1.2.3\" is not an IPv4 or IPv6 address");
    fails(
        "10.0.0.0/8\t\tfe80::1\n",
        1,
        13,
        "next hop fe80::1 is IPv6 but prefix 10.0.0.0/8 is IPv4",
    );
    fails(
        "2001:db8::/32 192.0.2.1\n",
        1,
        15,
        "next hop 192.0.2.1 is IPv4 but prefix 2001:db8::/32 is IPv6",
    );
    fails("10.0.0.0/8 1.2.3.4 extra # c\n", 1, 20, "unexpected \"extra\" after the next hop");
    fails("10.0.0.0/8 1.2.3.4 dev\n", 1, 23, "`dev` needs an interface name");
    fails("10.0.0.0/8 dev lr-a x\n", 1, 21, "unexpected \"x\" after the interface");
    fails("10.0.0.0/8 dev\n", 1, 15, "`dev` needs an interface name");
    // Columns count characters, not bytes.
    fails("# é\n10.0.0.0/8 1.2.3.4\n10.0.0.0/8 é\n", 3, 12, "next hop \"é\" is not");
}

#[test]
fn interfaces_and_connected_routes() {
    let r = p("2001:db8::/32 fe80::1 dev lr-a\n10.0.0.0/8\tdev  lr-b # connected\n").unwrap();
    assert_eq!(
        (r[0].next_hop, r[0].interface.as_deref(), r[0].next_hop_column, r[0].interface_column),
        (Some(ip("fe80::1")), Some("lr-a"), 15, 27)
    );
    assert_eq!(
        (r[1].next_hop, r[1].interface.as_deref(), r[1].line, r[1].interface_column),
        (None, Some("lr-b"), 2, 17)
    );
}

#[test]
fn missing_file() {
    let e = load(Path::new("/nonexistent/routes.txt")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.to_string().starts_with("/nonexistent/routes.txt: cannot read: "), "{e}");
}

#[test]
fn million_lines_fast() {
    let mut text = String::with_capacity(32 << 20);
    for i in 0u32..1_000_000 {
        if i % 2 == 0 {
            let a = 0x0a00_0000 | (i << 3);
            let _ = writeln!(
                text,
                "{}/29 198.18.{}.{}",
                std::net::Ipv4Addr::from(a),
                (i >> 8) & 255,
                i & 255
            );
        } else {
            let _ = writeln!(
                text,
                "2001:db8:{:x}:{:x}::/64\tfe80::{:x}  # v6",
                i >> 16,
                i & 0xffff,
                i & 0xff
            );
        }
    }
    let t = Instant::now();
    let r = p(&text).unwrap();
    let dt = t.elapsed();
    eprintln!("parsed {} routes ({} MB) in {dt:?}", r.len(), text.len() >> 20);
    assert_eq!(r.len(), 1_000_000);
    assert_eq!(r[999_999].line, 1_000_000);
    // Generous bound so a loaded CI machine does not flake; typically ~100 ms.
    assert!(dt.as_secs_f64() < 3.0, "too slow: {dt:?}");
}
