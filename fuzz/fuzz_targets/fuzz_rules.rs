#![no_main]
//! The rule parser on arbitrary UTF-8: it must return Ok or Err, never panic. Table files
//! named by the input resolve under a directory that does not exist.
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let ifaces = |name: &str| match name {
            "em0" => Some(0),
            "em1" => Some(1),
            _ => None,
        };
        if let Ok(rs) = fw::rules::parse(text, Path::new("/nonexistent/fuzz.conf"), &ifaces) {
            // Small parsed rule sets also go through the compiler and the evaluators.
            if rs.rules.len() <= 8 {
                let opts = fw::classifier::BuildOptions {
                    memory_budget: 64 << 20,
                    ..Default::default()
                };
                if let Ok(cl) = fw::classifier::Classifier::build_with(&rs, &opts) {
                    let key = fw::packet::PacketKey {
                        af: fw::packet::Af::Inet,
                        dir: fw::packet::Dir::In,
                        iface: 0,
                        proto: 6,
                        src: 0x0a00_0001,
                        dst: 0xc000_0201,
                        src_port: 1234,
                        dst_port: 80,
                        tcp_flags: 0x02,
                        len: 60,
                        icmp_id: 0,
                        ip_opts: false,
                    };
                    assert_eq!(cl.classify(&key), fw::reference::evaluate(&rs, &key));
                }
            }
        }
    }
});
