#![no_main]
//! A pcap file (`linerate bench --pcap`, `linerate replay`) read from arbitrary bytes: its
//! records or an error, never a panic.
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(records) = io::pcap::parse(data, Path::new("fuzz.pcap")) {
        let _ = records.len();
    }
});
