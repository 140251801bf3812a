//! Rule sets shaped to be hard for a classifier, beside [`super::ruleset`]'s realistic ones:
//! what a decision tree copies into many leaves (wide ranges crossing in every dimension,
//! negations) or what blows up RFC's cross products (many distinct values per field). Issue
//! 17 asks that no rule set be refused and that 10,000 rules compile in at most 1 s and 256
//! MiB; these are the sets that test it beyond the realistic mix.
//! `cargo run --release -p linerate-fw --example classify_build -- SHAPE:N` measures one.

use std::fmt::Write;

use super::{IFACES, Rng};

/// The shapes [`ruleset`] knows.
pub const SHAPES: [&str; 6] = ["cross", "negated", "lists", "tables", "v6", "hosts"];

/// `n` rules (plus their tables) of `shape` ([`SHAPES`]), `None` for another name:
/// - `cross`: in or out, quick or not, pass or block, TCP or UDP, from and to prefixes of
///   /1 to /16 and port ranges up to 30,000 wide: every rule overlaps most others;
/// - `negated`: `block` from and to negated prefixes, to every port but one;
/// - `lists`: from a list of five prefixes to any, on a list of ten ports;
/// - `tables`: 200 tables of 50 hosts, rules from a table (negated or not) to another, on
///   a port;
/// - `v6`: `cross` over IPv6 prefixes of /16 to /64;
/// - `hosts`: host to host on a port, `quick`, then `block all` (RFC's many classes).
pub fn ruleset(shape: &str, seed: u64, n: usize) -> Option<String> {
    let mut rng = Rng(seed);
    let mut out = String::new();
    let rule: fn(&mut Rng, usize) -> String = match shape {
        "cross" => |rng, _| cross(rng, false),
        "v6" => |rng, _| cross(rng, true),
        "negated" => |rng, _| {
            let (iface, dir) = (IFACES[rng.index(4)], ["in", "out"][rng.index(2)]);
            format!(
                "block {dir} on {iface} proto udp from !{} to !{} port != {}",
                v4(rng, 4, 20),
                v4(rng, 4, 20),
                1 + rng.index(9999)
            )
        },
        "lists" => |rng, _| {
            let nets: Vec<String> = (0..5).map(|_| v4(rng, 8, 30)).collect();
            let ports: Vec<String> = (0..10).map(|_| (1 + rng.index(60_000)).to_string()).collect();
            format!(
                "pass in on {} proto tcp from {{ {} }} to any port {{ {} }}",
                IFACES[rng.index(4)],
                nets.join(" "),
                ports.join(" ")
            )
        },
        "tables" => |rng, _| {
            let not = if rng.index(2) == 0 { "!" } else { "" };
            format!(
                "{} in quick on {} proto tcp from {not}<t{}> to <t{}> port {}",
                ["pass", "block"][rng.index(2)],
                IFACES[rng.index(4)],
                rng.index(200),
                rng.index(200),
                1 + rng.index(9999)
            )
        },
        "hosts" => |rng, _| {
            format!(
                "pass in quick on {} proto tcp from {} to {} port {}",
                IFACES[rng.index(4)],
                v4(rng, 32, 32),
                v4(rng, 32, 32),
                1 + rng.index(65_535)
            )
        },
        _ => return None,
    };
    if shape == "tables" {
        for t in 0..200 {
            let hosts: Vec<String> = (0..50).map(|_| v4(&mut rng, 24, 32)).collect();
            let _ = writeln!(out, "table <t{t}> {{ {} }}", hosts.join(" "));
        }
    }
    for i in 0..n {
        let _ = writeln!(out, "{}", rule(&mut rng, i));
    }
    if shape == "hosts" {
        out.push_str("block all\n");
    }
    Some(out)
}

/// A rule of the `cross` and `v6` shapes.
fn cross(rng: &mut Rng, v6: bool) -> String {
    let action = ["pass", "block"][rng.index(2)];
    let dir = ["in", "out"][rng.index(2)];
    let quick = ["quick ", ""][rng.index(2)];
    let proto = ["tcp", "udp"][rng.index(2)];
    let net = |rng: &mut Rng| if v6 { v6_net(rng) } else { v4(rng, 1, 16) };
    let (src, dst) = (net(rng), net(rng));
    let (sports, dports) = (port_range(rng), port_range(rng));
    format!(
        "{action} {dir} {quick}on {} {} proto {proto} from {src} port {sports} to {dst} port {dports}",
        IFACES[rng.index(4)],
        if v6 { "inet6" } else { "inet" }
    )
}

/// A random IPv4 prefix of `lo` to `hi` bits.
fn v4(rng: &mut Rng, lo: usize, hi: usize) -> String {
    let len = lo + rng.index(hi - lo + 1);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    format!("{}/{len}", std::net::Ipv4Addr::from(rng.next_u64() as u32 & mask))
}

/// A random prefix of 2001:db8::/32 of /16 to /64 bits (the shorter ones reach beyond it).
fn v6_net(rng: &mut Rng) -> String {
    let len = 16 + rng.index(49);
    let addr = 0x2001_0db8u128 << 96 | u128::from(rng.next_u64()) << 32;
    format!("{}/{len}", std::net::Ipv6Addr::from(addr & (u128::MAX << (128 - len))))
}

/// A port range `a:b` up to 30,000 wide.
fn port_range(rng: &mut Rng) -> String {
    let a = 1 + rng.index(65_000);
    let b = (a + [1, 10, 100, 5000, 30_000][rng.index(5)]).min(65_535);
    format!("{a}:{b}")
}
