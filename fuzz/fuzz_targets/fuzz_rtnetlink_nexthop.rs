#![no_main]
//! A datagram from the kernel's route socket: every message in it parsed as a nexthop
//! message (`RTM_NEWNEXTHOP`), without a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for m in io::netlink::route::messages(data) {
        if let Ok(n) = io::netlink::nexthop::parse_nexthop(m) {
            let _ = (n.new, n.id, n.protocol, format!("{:?}", n.kind));
        }
    }
});
