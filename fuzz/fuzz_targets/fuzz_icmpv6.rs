#![no_main]
use core::net::Ipv6Addr;
use libfuzzer_sys::fuzz_target;
use wire::Icmpv6Packet;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        let _ = (p.msg_type(), p.msg_type().is_error(), p.msg_type().is_ndp());
        let _ = (p.code(), p.checksum(), p.echo_ident(), p.echo_seq());
        let _ = (p.mtu(), p.pointer(), p.rest_of_header(), p.data(), p.ndp_target_addr());
        let _ = p.verify_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::UNSPECIFIED);
    }
});
