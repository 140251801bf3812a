#![no_main]
use libfuzzer_sys::fuzz_target;
use wire::{EthernetFrame, VlanHeader, parse_l2};

fuzz_target!(|data: &[u8]| {
    if let Ok(l2) = parse_l2(data) {
        assert!(l2.l3_offset <= data.len());
    }
    if let Ok(f) = EthernetFrame::new_checked(data) {
        let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
        let _ =
            (f.dst_addr().is_broadcast(), f.dst_addr().is_multicast(), f.src_addr().to_string());
        if let Ok(v) = VlanHeader::new_checked(f.payload()) {
            let _ = (v.pcp(), v.dei(), v.vid(), v.inner_ethertype(), v.payload());
        }
    }
    if let Ok(s) = core::str::from_utf8(data) {
        let _ = s.parse::<wire::MacAddr>();
    }
});
