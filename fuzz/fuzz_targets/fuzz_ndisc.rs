#![no_main]
//! An IPv6 packet read as neighbour discovery (RFC 4861): a solicitation or advertisement, a
//! router solicitation, and the link-layer address options, all without a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(m)) = wire::ndisc::parse_nd(data) {
        let _ = (
            m.kind,
            m.src,
            m.dst,
            m.target,
            m.solicited(),
            m.override_flag(),
            m.source_ll,
            m.target_ll,
        );
    }
    if let Ok(Some(rs)) = wire::router_advert::parse_router_solicit(data) {
        let _ = (rs.src, rs.source_ll);
    }
    for opt in [1, 2] {
        let _ = wire::ndisc::ndp_option_mac(data, opt);
    }
});
