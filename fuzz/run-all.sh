#!/bin/sh
# Run every fuzz target for N seconds (default 30). Needs cargo-fuzz
# (`cargo install cargo-fuzz`); RUSTC_BOOTSTRAP=1 lets it use -Z flags on stable. Writes
# the starting corpora first (seeds.py).
set -eu
secs="${1:-30}"
cd "$(dirname "$0")"
unset CARGO_TARGET_DIR
./seeds.py
for t in fuzz_ethernet fuzz_arp fuzz_ipv4 fuzz_ipv6 fuzz_icmpv4 fuzz_icmpv6 fuzz_udp fuzz_tcp fuzz_ndisc \
         fuzz_rules fuzz_classes fuzz_rtnetlink_route fuzz_rtnetlink_nexthop fuzz_routefile fuzz_pcap fuzz_ha_decode fuzz_pipeline; do
    echo "=== $t (${secs}s)"
    RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" -- -max_total_time="$secs"
done
