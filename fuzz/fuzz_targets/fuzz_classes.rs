#![no_main]
//! The decision tree and the verdict cache's classes of addresses and ports
//! (`fw/src/classifier/classes.rs`) on rule sets drawn from the input: addresses crowded
//! into a few /16s (IPv4) and /32s (IPv6), and at both ends of each family, so that class
//! tables get nodes, short runs and spans searched by halves; port ranges, lists and
//! operators. Keys at the rules' edges (at one, one below, one above) go through a small
//! verdict cache, each twice and with a neighbour, and must get the reference's verdict.
//!
//! Input: a byte of options (the node budget, the cache's size), then 12-byte rules (at most
//! [`MAX_RULES`]) until a rule's first byte is 0xff, then 8-byte keys.
use std::fmt::Write;
use std::path::Path;

use fw::classifier::{BuildOptions, Classifier, DEFAULT_CLASS_NODES, Engine, VerdictCache};
use fw::packet::{Af, Dir, PacketKey};
use libfuzzer_sys::fuzz_target;

const MAX_RULES: usize = 160;
const MAX_KEYS: usize = 256;

/// Where IPv4 addresses are drawn: a few crowded /16s, and both ends of the space.
const BASE4: [u32; 6] = [0x0a00_0000, 0x0a01_0000, 0xc000_0200, 0xc612_0000, 0, 0xffff_0000];
/// Where IPv6 addresses are drawn (the top 64 bits; the rest from the input).
const BASE6: [u64; 5] =
    [0x2001_0db8_0000_0000, 0x2001_0db8_0001_0000, 0xfe80_0000_0000_0000, 0, 0xffff_ffff_ffff_0000];
const LEN4: [u8; 10] = [8, 15, 16, 20, 24, 25, 28, 30, 31, 32];
const LEN6: [u8; 10] = [16, 32, 48, 56, 64, 96, 112, 120, 127, 128];

/// The rule set's text and the values at its edges: (v4, v6, ports).
struct Drawn {
    text: String,
    v4: Vec<u128>,
    v6: Vec<u128>,
    ports: Vec<u16>,
}

fuzz_target!(|data: &[u8]| {
    let Some((&opts, mut rest)) = data.split_first() else { return };
    let mut d = Drawn {
        text: String::new(),
        v4: vec![0, u32::MAX.into()],
        v6: vec![0, u128::MAX],
        ports: vec![0, 65535],
    };
    for _ in 0..MAX_RULES {
        let Some(b) = rest.first_chunk::<12>().filter(|b| b[0] != 0xff) else { break };
        rule(&mut d, *b);
        rest = &rest[12..];
    }
    let ifaces = |n: &str| n.strip_prefix("em").and_then(|i| i.parse().ok());
    let rs = fw::rules::parse(&d.text, Path::new("fuzz.conf"), &ifaces)
        .unwrap_or_else(|e| panic!("{e}\n{}", d.text));
    let class_nodes = [DEFAULT_CLASS_NODES, 0, 1, 4][usize::from(opts & 3)];
    let build = BuildOptions {
        engine: Engine::Tree,
        leaf_pairs_from: 0,
        class_nodes,
        ..BuildOptions::default()
    };
    let cl = Classifier::build_with(&rs, &build).unwrap();
    let mut cache = VerdictCache::new([4, 64][usize::from(opts >> 2 & 1)], u64::from(opts));
    for chunk in rest.get(1..).unwrap_or_default().chunks_exact(8).take(MAX_KEYS) {
        let k = key(&d, u64::from_le_bytes(chunk.try_into().unwrap()));
        let near = PacketKey { src: k.src ^ 1, dst_port: k.dst_port ^ 1, ..k };
        for k in [k, near, k] {
            let want = fw::reference::evaluate(&rs, &k);
            assert_eq!(cl.classify(&k), want, "tree: {k:?}\n{}", d.text);
            assert_eq!(cache.lookup(&cl, &k), want, "cache: {k:?}\n{}", d.text);
        }
    }
});

/// Appends one rule drawn from `b` to `d`, and its edges.
fn rule(d: &mut Drawn, b: [u8; 12]) {
    let inet6 = b[0] & 0x10 != 0;
    let action = if b[0] & 1 == 0 { "pass" } else { "block" };
    let quick = if b[0] & 2 != 0 { " quick" } else { "" };
    let dir = ["", " in", " out", " in"][usize::from(b[0] >> 2 & 3)];
    let on = ["", " on em0", " on em1", " on { em0, em1 }"][usize::from(b[11] & 3)];
    let proto = [" proto tcp", " proto udp", " proto { tcp, udp }", " proto tcp"]
        [usize::from(b[0] >> 5 & 3)];
    let af = if inet6 { " inet6" } else { " inet" };
    let from = host(d, inet6, b[1], u16::from_le_bytes([b[2], b[3]]), b[11] >> 2);
    let sport = ports(d, b[7], b[8]);
    let to = host(d, inet6, b[4], u16::from_le_bytes([b[5], b[6]]), b[11] >> 5);
    let dport = ports(d, b[9], b[10]);
    let state = if b[0] & 0x81 == 0x80 { " no state" } else { "" };
    writeln!(
        d.text,
        "{action}{dir}{quick}{on}{af}{proto} from {from}{sport} to {to}{dport}{state}"
    )
    .unwrap();
}

/// An address, a prefix, a range or a list, negated or not; its edges go to `d`.
fn host(d: &mut Drawn, inet6: bool, kind: u8, bits: u16, more: u8) -> String {
    let not = if kind & 0x80 != 0 { "! " } else { "" };
    match kind >> 4 & 7 {
        0 => "any".into(),
        1 | 2 => {
            let (a, b) = (
                prefix(d, inet6, kind, bits),
                prefix(d, inet6, kind.rotate_left(3), bits.rotate_left(5) ^ u16::from(more)),
            );
            format!("{{ {not}{a}, {b} }}")
        }
        3 => {
            let lo = addr(inet6, kind, bits);
            let hi = lo.saturating_add(u128::from(more) << 3).min(if inet6 {
                u128::MAX
            } else {
                u32::MAX.into()
            });
            edges(d, inet6, lo, hi);
            format!("{} - {}", show(inet6, lo), show(inet6, hi))
        }
        _ => format!("{not}{}", prefix(d, inet6, kind, bits)),
    }
}

/// A prefix whose base is chosen by `kind`'s low bits and varied by `bits`.
fn prefix(d: &mut Drawn, inet6: bool, kind: u8, bits: u16) -> String {
    let a = addr(inet6, kind, bits);
    let (len, width) = if inet6 {
        (LEN6[usize::from(bits >> 12) % LEN6.len()], 128)
    } else {
        (LEN4[usize::from(bits >> 12) % LEN4.len()], 32)
    };
    let host = (1u128 << (width - u32::from(len))) - 1;
    let lo = a & !host & if inet6 { u128::MAX } else { u32::MAX.into() };
    edges(d, inet6, lo, lo | host);
    format!("{}/{len}", show(inet6, lo))
}

/// An address near one of the family's bases.
fn addr(inet6: bool, kind: u8, bits: u16) -> u128 {
    let low = u128::from(bits & 0x0fff);
    if inet6 {
        let base = BASE6[usize::from(kind & 0xf) % BASE6.len()];
        u128::from(base) << 64 | low << 52 | low << 8 | u128::from(kind & 0xf)
    } else {
        let base = BASE4[usize::from(kind & 0xf) % BASE4.len()];
        u128::from(base | (u32::from(bits & 0x0fff) << 4) | u32::from(kind & 0xf))
    }
}

fn edges(d: &mut Drawn, inet6: bool, lo: u128, hi: u128) {
    let v = if inet6 { &mut d.v6 } else { &mut d.v4 };
    v.extend([lo, hi]);
}

fn show(inet6: bool, a: u128) -> String {
    if inet6 {
        std::net::Ipv6Addr::from(a).to_string()
    } else {
        std::net::Ipv4Addr::from(a as u32).to_string()
    }
}

/// Nothing, one port, a range, a list or an operator; the edges go to `d`.
fn ports(d: &mut Drawn, kind: u8, v: u8) -> String {
    let p = u16::from(kind & 0x1f) << 11 | u16::from(v) << 3 | u16::from(kind >> 5);
    let q = p.saturating_add(u16::from(v) * 7 + 1);
    d.ports.extend([p, q]);
    match kind % 7 {
        0 | 1 => String::new(),
        2 => format!(" port {p}"),
        3 => format!(" port {p}:{q}"),
        4 => format!(" port {{ {p}, {q}, 80 }}"),
        5 => format!(" port != {p}"),
        _ => format!(" port {p} >< {q}"),
    }
}

/// A key whose fields come from `r`: addresses and ports at the edges (or one off), both
/// families, directions and interfaces.
fn key(d: &Drawn, r: u64) -> PacketKey {
    let inet6 = r & 1 != 0;
    let (all, max) = if inet6 { (&d.v6, u128::MAX) } else { (&d.v4, u128::from(u32::MAX)) };
    let off = |x: u64| [0u128, 1, u128::MAX][(x % 3) as usize];
    let addr = |x: u64| all[(x >> 2) as usize % all.len()].wrapping_add(off(x)) & max;
    let port = |x: u64| d.ports[(x >> 2) as usize % d.ports.len()].wrapping_add(off(x) as u16);
    PacketKey {
        af: if inet6 { Af::Inet6 } else { Af::Inet },
        dir: if r & 2 != 0 { Dir::Out } else { Dir::In },
        iface: (r >> 2 & 1) as u16,
        proto: [6u8, 17, 1][(r >> 3) as usize % 3],
        src: addr(r >> 5),
        dst: addr(r >> 19),
        src_port: port(r >> 33),
        dst_port: port(r >> 47),
        tcp_flags: 0x02,
        len: 60,
        ..PacketKey::ZERO
    }
}
