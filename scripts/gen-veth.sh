#!/usr/bin/env bash
# `linerate gen` into a veth pair whose receiving end counts in the kernel (`linerate rcv
# --backend xdp-sink`), and the generator's and receiver's summaries. The receiving end has
# GRO on, so veth runs its NAPI; it runs where the generator is (CPU 0), or with `--threaded`
# in a kernel thread pinned to CPU 1. Run it under `flock /tmp/lr-bench.lock`.
# Usage: scripts/gen-veth.sh [--threaded] [gen options, e.g. --backend xdp-live -t 3]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/target/release/linerate
threaded=0
if [ "${1:-}" = --threaded ]; then threaded=1; shift; fi
g=lr$$gvg; r=lr$$gvr
out=$(mktemp)
trap 'ip netns del $g 2>/dev/null; ip netns del $r 2>/dev/null; rm -f "$out"' EXIT
ip netns add $g
ip netns add $r
ip link add lrg0 netns $g type veth peer name lrr0 netns $r
ip -n $g link set lrg0 address 02:00:00:00:0a:01 up
ip -n $r link set lrr0 address 02:00:00:00:0b:01 up
for ns in $g $r; do ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
ip netns exec $r ethtool -K lrr0 gro on
if [ $threaded = 1 ]; then
    before=" $(pgrep '^napi/lrr0' | tr '\n' ' ' || true) "
    ip netns exec $r sh -c 'echo 1 > /sys/class/net/lrr0/threaded'
    sleep 0.2
    for pid in $(pgrep '^napi/lrr0'); do
        case "$before" in *" $pid "*) ;; *) taskset -pc 1 "$pid" >/dev/null ;; esac
    done
fi
ip netns exec $r "$bin" rcv -i lrr0 --backend xdp-sink --cpu 1 -t 5 --json >"$out" &
rcv=$!
sleep 0.7
echo "gen: $(ip netns exec $g "$bin" gen -i lrg0 -D 02:00:00:00:0b:01 --cpu 0 --json -t 3 "$@" | tail -1)"
wait $rcv
echo "rcv: $(tail -1 "$out")"
