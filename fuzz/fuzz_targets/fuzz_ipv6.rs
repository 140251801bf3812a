#![no_main]
use libfuzzer_sys::fuzz_target;
use wire::Ipv6Packet;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let _ = (p.version(), p.traffic_class(), p.flow_label(), p.payload_len());
        let _ = (p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr());
        let _ = (p.dst_addr_u128(), p.payload());
        if let Ok((_, off)) = p.upper_layer() {
            assert!(off >= 40 && off <= 40 + usize::from(p.payload_len()));
        }
    }
});
