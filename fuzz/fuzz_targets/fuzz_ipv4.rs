#![no_main]
use libfuzzer_sys::fuzz_target;
use wire::Ipv4Packet;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = (p.version(), p.header_len(), p.dscp_ecn(), p.dscp(), p.ecn());
        let _ = (p.total_len(), p.ident(), p.dont_frag(), p.more_frags());
        let _ = (p.frag_offset(), p.is_fragment(), p.ttl(), p.protocol(), p.checksum());
        let _ = (p.src_addr(), p.dst_addr(), p.dst_addr_u32(), p.src_addr_u32());
        let _ = (p.options(), p.header_bytes(), p.payload(), p.verify_checksum());
        // The incremental TTL update must agree with a full recompute.
        let mut buf = data.to_vec();
        let mut m = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
        m.fill_checksum();
        m.decrement_ttl();
        let inc = m.checksum();
        m.fill_checksum();
        assert_eq!(inc, m.checksum());
        let _ = (m.payload_mut().len(), m.options_mut().len());
    }
});
