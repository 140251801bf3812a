#![no_main]
use libfuzzer_sys::fuzz_target;
use wire::ArpPacket;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = ArpPacket::new_checked(data) {
        let _ = (a.operation(), a.hardware_type(), a.protocol_type());
        let _ = (a.hardware_len(), a.protocol_len());
        let _ = (a.sender_hw_addr(), a.sender_proto_addr());
        let _ = (a.target_hw_addr(), a.target_proto_addr());
    }
});
