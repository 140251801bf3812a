#!/usr/bin/env bash
# Start-up time of linerate with a large static route table (issue 18): how long
# `linerate check` takes, and how long `linerate run` takes from its start until a ping
# forwarded through one of the table's routes is answered.
#
#   scripts/start-time.sh [--routes N] [--toml] [--runs K] [--bin PATH] [--no-host-stack] [-v]
#
# --routes N   routes in the table (default 1000000): IPv4 /24s and /20s, all via host B.
# --toml       one [[route]] table per route in the config instead of router.route_file.
# --runs K     repeat K times and print each figure (default 3).
# --no-host-stack   router.host_stack = false (no TAPs, so no routes given to the kernel).
# -v           print linerate's start-up messages with the seconds since it started.
# Needs root: builds namespaces lrst<pid>{a,d,b} (A -> linerate in D -> B), removed on exit.
set -euo pipefail
routes=1000000 toml=0 runs=3 bin=target/release/linerate host_stack=true verbose=0
while [ $# -gt 0 ]; do
    case "$1" in
        --routes) routes=$2; shift 2 ;;
        --toml) toml=1; shift ;;
        --runs) runs=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --no-host-stack) host_stack=false; shift ;;
        -v) verbose=1; shift ;;
        *) echo "usage: $0 [--routes N] [--toml] [--runs K] [--bin PATH]" >&2; exit 2 ;;
    esac
done
bin=$(realpath "$bin")
tag=lrst$$
dir=$(mktemp -d /tmp/lr-start-time.XXXXXX)
cleanup() {
    [ -n "${lr_pid:-}" ] && kill "$lr_pid" 2>/dev/null && wait "$lr_pid" 2>/dev/null || true
    for h in a d b; do ip netns del "$tag$h" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
for h in a d b; do ip netns add "$tag$h"; ip -n "$tag$h" link set lo up; done
ip link add lrsta0 netns "${tag}a" type veth peer name lrstd0 netns "${tag}d"
ip link add lrstd1 netns "${tag}d" type veth peer name lrstb0 netns "${tag}b"
ip -n "${tag}a" link set lrsta0 up
ip -n "${tag}d" link set lrstd0 up
ip -n "${tag}d" link set lrstd1 up
ip -n "${tag}b" link set lrstb0 up
ip -n "${tag}a" addr add 198.18.0.2/24 dev lrsta0
ip -n "${tag}a" route add default via 198.18.0.1
ip -n "${tag}b" addr add 198.19.0.2/24 dev lrstb0
ip -n "${tag}b" addr add 100.64.0.1/32 dev lo
ip -n "${tag}b" route add default via 198.19.0.1
ip netns exec "${tag}d" sysctl -qw net.ipv4.ip_forward=0

# The table: N distinct prefixes from 1.0.0.0 up (every other /24; every 16th route the
# /20 around it instead), via B, the last one 100.64.0.0/24 (B's loopback address).
python3 - "$routes" "$toml" > "$dir/table" <<'PY'
import sys
n, toml = int(sys.argv[1]), sys.argv[2] == "1"
def line(p):
    if toml:
        sys.stdout.write('[[route]]\nprefix = "%s"\nvia = "198.19.0.2"\n' % p)
    else:
        sys.stdout.write("%s 198.19.0.2\n" % p)
for i in range(n - 1):
    a = 0x01000000 + i * 512
    if i % 16 == 0:
        a, length = a & ~0xfff, 20
    else:
        length = 24
    line("%d.%d.%d.0/%d" % (a >> 24, a >> 16 & 255, a >> 8 & 255, length))
line("100.64.0.0/24")
PY
if [ "$toml" = 1 ]; then
    routes_key=""
else
    mv "$dir/table" "$dir/routes.txt"
    routes_key='route_file = "routes.txt"'
fi
{
    cat <<TOML
[router]
control_socket = "$dir/control.sock"
host_stack = $host_stack
$routes_key

[[interface]]
name = "lrstd0"
addresses = ["198.18.0.1/24"]

[[interface]]
name = "lrstd1"
addresses = ["198.19.0.1/24"]

TOML
    [ "$toml" = 1 ] && cat "$dir/table"
} > "$dir/router.toml"
count=$( [ "$toml" = 1 ] && grep -c '^\[\[route\]\]' "$dir/router.toml" || wc -l < "$dir/routes.txt")
echo "routes: $count ($( [ "$toml" = 1 ] && echo "[[route]] tables" || echo "router.route_file"))"

for run in $(seq "$runs"); do
    t0=$(date +%s.%N)
    "$bin" check -c "$dir/router.toml" > /dev/null
    t1=$(date +%s.%N)
    t2=$(date +%s.%N)
    ip netns exec "${tag}d" "$bin" run -c "$dir/router.toml" --cpu 0 > "$dir/run.out" \
        2> >(while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done > "$dir/run.err") &
    lr_pid=$!
    until ip netns exec "${tag}a" ping -c 1 -W 0.2 -q 100.64.0.1 > /dev/null 2>&1; do
        kill -0 "$lr_pid" 2>/dev/null || { cat "$dir/run.err" >&2; exit 1; }
        t=$(date +%s.%N)
        if [ "$(echo "$t - $t2 > 120" | bc)" = 1 ]; then echo "no answer after 120 s" >&2; exit 1; fi
    done
    t3=$(date +%s.%N)
    kill "$lr_pid"; wait "$lr_pid" || true; lr_pid=
    if [ "$verbose" = 1 ]; then
        sleep 0.2
        awk -v t0="$t2" '{ printf "  %6.2f s  %s\n", $1 - t0, substr($0, index($0, " ") + 1) }' "$dir/run.err"
    fi
    printf 'run %d: check %.2f s, run until the first forwarded ping is answered %.2f s\n' "$run" "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)"
done
