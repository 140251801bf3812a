#![no_main]
//! The rule parser on arbitrary UTF-8: it must return Ok or Err, never panic. Table files
//! named by the input resolve under a directory that does not exist. Small parsed rule sets
//! are also compiled by both engines (RFC where it fits, and the tree with its leaf filters)
//! and classify keys drawn from the input as the reference evaluator does.
use fw::classifier::{BuildOptions, Classifier, Engine};
use fw::packet::{Af, Dir, PacketKey};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ifaces = |name: &str| match name {
        "em0" => Some(0),
        "em1" => Some(1),
        _ => None,
    };
    let addresses = [
        (
            "em0".to_string(),
            vec![("192.0.2.1".parse().unwrap(), 24), ("2001:db8::1".parse().unwrap(), 64)],
        ),
        ("em1".to_string(), vec![("10.0.0.1".parse().unwrap(), 8)]),
    ];
    let path = Path::new("/nonexistent/fuzz.conf");
    // Without the interfaces' addresses `self`, `(if)` and `antispoof` are errors: that
    // path too must not panic.
    let _ = fw::rules::parse(text, path, &ifaces);
    let Ok(rs) = fw::rules::parse_with_addresses(text, path, &ifaces, &addresses) else { return };
    if rs.rules.len() > 8 {
        return;
    }
    let keys = keys(data);
    for engine in [Engine::Auto, Engine::Tree] {
        let opts = BuildOptions {
            memory_budget: 64 << 20,
            engine,
            leaf_pairs_from: 0,
            ..Default::default()
        };
        let Ok(cl) = Classifier::build_with(&rs, &opts) else { continue };
        for key in &keys {
            assert_eq!(cl.classify(key), fw::reference::evaluate(&rs, key), "{engine:?} {key:?}");
        }
    }
});

/// Sixteen keys, IPv4 and IPv6, both directions and interfaces, their fields drawn from
/// values rule sets name (the interfaces' networks, common ports) and from the input's hash.
fn keys(data: &[u8]) -> Vec<PacketKey> {
    let mut s = data
        .iter()
        .fold(0x9e37_79b9_7f4a_7c15u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let v4 = [0xc000_0201u128, 0xc000_0202, 0x0a00_0001, 0x0a01_0203, 0, 0xffff_ffff, 0x7f00_0001];
    let v6 =
        [0x2001_0db8_u128 << 96 | 1, 0x2001_0db8_u128 << 96 | 2, 0xfe80 << 112 | 1, 0, u128::MAX];
    let ports = [80u16, 22, 53, 443, 1234, 0, 65535, 1024];
    let protos = [6u8, 17, 1, 58, 47, 0];
    (0..16)
        .map(|i| {
            let r = next();
            let af = if i % 2 == 0 { Af::Inet } else { Af::Inet6 };
            let addr = |r: u64| match af {
                Af::Inet if r.is_multiple_of(4) => u128::from(r as u32 >> 8),
                Af::Inet => v4[(r >> 2) as usize % v4.len()],
                _ if r.is_multiple_of(4) => u128::from(r) << 64 | 0x2001_0db8 << 96,
                _ => v6[(r >> 2) as usize % v6.len()],
            };
            let port = |r: u64| {
                if r.is_multiple_of(3) {
                    (r >> 8) as u16
                } else {
                    ports[(r >> 2) as usize % ports.len()]
                }
            };
            PacketKey {
                af,
                dir: if r & 1 == 0 { Dir::In } else { Dir::Out },
                iface: ((r >> 1) & 1) as u16,
                proto: protos[(r >> 3) as usize % protos.len()],
                src: addr(next()),
                dst: addr(next()),
                src_port: port(next()),
                dst_port: port(next()),
                tcp_flags: (r >> 16) as u8,
                len: 40 + (r >> 24) as u16 % 1500,
                icmp_id: (r >> 40) as u16,
                ip_opts: (r >> 56) & 7 == 0,
                route: ((r >> 59) & 3) as u8,
                tag: ((r >> 61) & 1) as u8,
            }
        })
        .collect()
}
