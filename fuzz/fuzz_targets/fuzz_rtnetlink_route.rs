#![no_main]
use libfuzzer_sys::fuzz_target;

// A datagram from the kernel's route socket: every message in it parsed as a route message.
fuzz_target!(|data: &[u8]| {
    for m in io::netlink::route::messages(data) {
        if let Ok(r) = io::netlink::route::parse_route(m) {
            let _ = (r.dst, r.dst_len, r.next_hops.len(), r.unsupported);
        }
    }
});
