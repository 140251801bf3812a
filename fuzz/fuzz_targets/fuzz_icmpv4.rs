#![no_main]
use libfuzzer_sys::fuzz_target;
use wire::Icmpv4Packet;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        let _ = (p.msg_type(), p.msg_type().is_error(), p.code(), p.checksum());
        let _ = (p.echo_ident(), p.echo_seq(), p.mtu(), p.pointer(), p.rest_of_header());
        let _ = (p.data(), p.verify_checksum());
    }
});
