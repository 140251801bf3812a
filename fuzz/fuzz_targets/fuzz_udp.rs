#![no_main]
use core::net::{Ipv4Addr, Ipv6Addr};
use libfuzzer_sys::fuzz_target;
use wire::UdpPacket;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = UdpPacket::new_checked(data) {
        let _ = (p.src_port(), p.dst_port(), p.len(), p.is_empty(), p.checksum());
        let _ = p.payload();
        let _ = p.verify_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::BROADCAST);
        let _ = p.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::UNSPECIFIED);
    }
});
