#![no_main]
use core::net::{Ipv4Addr, Ipv6Addr};
use libfuzzer_sys::fuzz_target;
use wire::TcpPacket;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = TcpPacket::new_checked(data) {
        let _ = (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number());
        let _ = (p.header_len(), p.flags(), p.window_len(), p.checksum(), p.urgent());
        let _ = (p.options(), p.payload(), p.mss());
        let _ = p.verify_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::BROADCAST);
        let _ = p.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::UNSPECIFIED);
    }
});
