#!/usr/bin/env bash
# Full-table churn through netlink: how fast routes reach linerate's FIB from the kernel's
# table (`[router.kernel_routes]`), and whether packets to routes that do not change keep
# flowing meanwhile.
#
# Lab: A (lrchurna) -> D (lrchurnd, `linerate run`) -> B (lrchurnb), AF_PACKET. Three phases:
#  1. dump: a netlink writer adds V4 IPv4 /24s and V6 IPv6 /48s via B to the kernel's table
#     through linerate's TAP (made persistent beforehand), then linerate starts: its initial
#     dump and FIB load, as linerate logs it;
#  2. withdraw, 3. load: with linerate running, the writer deletes them all, then adds them
#     again (the kernel sends linerate one RTM_DELROUTE / RTM_NEWROUTE each).
# Meanwhile (2, 3) `linerate gen` in A sends RATE pps to a static route (10.97.0.0/16 via B)
# that no change touches; B counts. Reports the kernel's time (the writer's), the time until
# linerate's FIB holds (or has dropped) every route, routes/s, and the packets lost.
#
# Usage: scripts/route-churn.sh [V4 [V6 [RATE]]]   (default 1000000 200000 5000)
# Needs root. Run it under `flock /tmp/lr-bench.lock`. Everything is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
v4=${1:-1000000}
v6=${2:-200000}
rate=${3:-5000}
bin=$(realpath "${LINERATE_BIN:-./target/release/linerate}")
tag=lrchurn
dir=$(mktemp -d /tmp/lr-churn.XXXXXX)
pid=
cleanup() {
    [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    ip netns exec ${tag}d ip tuntap del dev lrhcd1 mode tap 2>/dev/null || true
    for h in a d b; do ip netns del "$tag$h" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
for h in a d b; do ip netns add "$tag$h"; done
nsx() { local ns=$1; shift; ip netns exec "$tag$ns" "$@"; }
ip link add lrca0 netns ${tag}a address 02:00:00:00:0a:01 type veth peer name lrcd0 netns ${tag}d address 02:00:00:00:0d:00
ip link add lrcd1 netns ${tag}d address 02:00:00:00:0d:01 type veth peer name lrcb0 netns ${tag}b address 02:00:00:00:0b:01
for x in a:lrca0 d:lrcd0 d:lrcd1 b:lrcb0; do nsx "${x%%:*}" ip link set "${x#*:}" up; done
nsx a ip addr add 198.18.0.2/24 dev lrca0
nsx b ip addr add 198.19.0.2/24 dev lrcb0
nsx b ip addr add 2001:db8:b::2/64 dev lrcb0 nodad
nsx d sysctl -qw net.ipv4.ip_forward=0
cat >"$dir/router.toml" <<EOF
[router]
control_socket = "$dir/control.sock"
[router.kernel_routes]
table = "main"
protocols = ["static"]
[[interface]]
name = "lrcd0"
addresses = ["198.18.0.1/24"]
backend = "af_packet"
[[interface]]
name = "lrcd1"
addresses = ["198.19.0.1/24", "2001:db8:b::1/64"]
backend = "af_packet"
[[route]]
prefix = "10.97.0.0/16"
via = "198.19.0.2"
EOF
# The route messages, built before the clock starts: RTM_NEWROUTE / RTM_DELROUTE (rtnetlink(7)),
# no ACK asked (the kernel answers only failures), sent many per datagram by a netlink
# writer (one `ip` call per route would measure iproute2: about 20k routes/s here).
# linerate's TAP for lrcd1 (lrh + the name without "lr"), made persistent now so that the
# routes can be in the kernel before linerate starts (linerate attaches to it).
nsx d ip tuntap add dev lrhcd1 mode tap
nsx d ip link set lrhcd1 up
nsx d ip addr add 198.19.0.1/24 dev lrhcd1
nsx d ip addr add 2001:db8:b::1/64 dev lrhcd1 nodad
oif=$(nsx d cat /sys/class/net/lrhcd1/ifindex)
python3 - "$v4" "$v6" "$oif" "$dir" <<'PY'
import socket, struct, sys
v4, v6, oif, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def attr(ty, payload):
    return struct.pack("=HH", 4 + len(payload), ty) + payload
def msg(ty, flags, family, dst, plen, gw, seq):
    new = ty == 24
    body = struct.pack("=BBBBBBBBI", family, plen, 0, 0, 254, 4 if new else 0, 0 if new else 255, 1 if new else 0, 0)
    body += attr(1, dst)
    if new:
        body += attr(5, gw) + attr(4, struct.pack("=I", oif))
    return struct.pack("=IHHII", 16 + len(body), ty, flags, seq, 0) + body
gw4 = socket.inet_pton(socket.AF_INET, "198.19.0.2")
gw6 = socket.inet_pton(socket.AF_INET6, "2001:db8:b::2")
for name, ty, flags in (("add", 24, 0x601), ("del", 25, 0x1)):
    out = []
    for i in range(v4):
        out.append(msg(ty, flags, socket.AF_INET, struct.pack("!I", 0x20000000 + (i << 8)), 24, gw4, i))
    for i in range(v6):
        dst = struct.pack("!HHH", 0x2a00, i >> 16, i & 0xffff) + bytes(10)
        out.append(msg(ty, flags, socket.AF_INET6, dst, 48, gw6, v4 + i))
    open(f"{d}/{name}", "wb").write(b"".join(out))
PY
cat >"$dir/push.py" <<'PY'
import socket, struct, sys
data = open(sys.argv[1], "rb").read()
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
at, failed = 0, 0
def drain():
    global failed
    while True:
        try:
            r = s.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        i = 0
        while i + 20 <= len(r):
            n, ty = struct.unpack_from("=IH", r, i)
            if ty == 2 and struct.unpack_from("=i", r, i + 16)[0] != 0:
                failed += 1
            i += (n + 3) & ~3
while at < len(data):
    end = at
    while end < len(data) and end - at < 60000:
        end += struct.unpack_from("=I", data, end)[0]
    s.send(data[at:end])
    at = end
    drain()
drain()
if failed:
    print(f"push: the kernel refused {failed} messages", file=sys.stderr)
import resource
r = resource.getrusage(resource.RUSAGE_SELF)
# /proc/self/schedstat: time on a CPU, time runnable but waiting for one (ns).
wait = int(open("/proc/self/schedstat").read().split()[1]) / 1e9
open(sys.argv[2], "w").write(f"user {r.ru_utime:.2f} s, system {r.ru_stime:.2f} s, waiting for a CPU {wait:.2f} s")
PY
total=$((v4 + v6))
t0=$(date +%s.%N)
nsx d python3 "$dir/push.py" "$dir/add" "$dir/writer.cpu"
t1=$(date +%s.%N)
python3 -c "print(f'kernel alone: {$total} routes added in {$t1 - $t0:.2f} s = {$total / ($t1 - $t0):,.0f} routes/s; the writer\'s CPU: $(cat "$dir/writer.cpu")')"
ip netns exec ${tag}d "$bin" run -c "$dir/router.toml" --cpu 1 >"$dir/run.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -qs "forwarding with" "$dir/run.log" && break; sleep 0.1; done
grep -q "forwarding with" "$dir/run.log" || { cat "$dir/run.log"; exit 1; }
for _ in $(seq 1200); do grep -q "dumped" "$dir/run.log" && break; sleep 0.1; done
echo "dump: $(grep -o 'table.*dumped.*' "$dir/run.log")"
stats() {
    python3 - "$dir/control.sock" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"stats\n")
data = b""
while not data.endswith(b"\n"):
    chunk = s.recv(1 << 16)
    if not chunk:
        break
    data += chunk
v = json.loads(data)
k = v["kernel_routes"]
print(k["routes"], k["pending"], k["dumps"], k["overruns"], v["drops"]["no_route"], sum(i["rx_drops"] for i in v["interfaces"]))
EOF
}
now() { date +%s.%N; }
# CPU seconds (user + system) of each of linerate's threads, by name, as one line.
thread_cpu() {
    python3 - "$pid" <<'EOF'
import glob, os, sys
tick = os.sysconf("SC_CLK_TCK")
cpu = {}
for t in glob.glob(f"/proc/{sys.argv[1]}/task/*"):
    try:
        name = open(f"{t}/comm").read().strip()
        f = open(f"{t}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    cpu[name] = cpu.get(name, 0) + (int(f[11]) + int(f[12])) / tick
print(" ".join(f"{k}={v:.2f}" for k, v in sorted(cpu.items())))
EOF
}
# Wait until linerate holds `want` kernel routes with nothing pending; prints the time.
wait_for() {
    local want=$1
    while :; do
        read -r routes pending _ _ _ < <(stats)
        [[ $routes -eq $want && $pending -eq 0 ]] && { now; return; }
        sleep 0.05
    done
}
# Resolve B first, then the steady flow.
nsx a "$bin" gen -i lrca0 -D 02:00:00:00:0d:00 -s 198.18.0.10-198.18.0.29 -d 10.97.0.1-10.97.0.50 -n 100 >/dev/null 2>&1
sleep 0.5
rx() { nsx b cat /sys/class/net/lrcb0/statistics/rx_packets; }
# What left A (gen's own count includes frames still in its ring when it stops).
tx() { nsx a cat /sys/class/net/lrca0/statistics/tx_packets; }
phase() {
    local name=$1 file=$2 want=$3 secs=$4
    local b0 t0 t1 t2 sent got
    b0=$(rx)
    a0=$(tx)
    read -r _ _ _ _ no_route0 rx_drops0 < <(stats)
    local cpu0
    cpu0=$(thread_cpu)
    nsx a "$bin" gen -i lrca0 -D 02:00:00:00:0d:00 -s 198.18.0.10-198.18.0.29 -d 10.97.0.1-10.97.0.50 -R "$rate" -n $((rate * secs)) >"$dir/gen.log" 2>&1 &
    local gen=$!
    sleep 1
    t0=$(now)
    nsx d python3 "$dir/push.py" "$file" "$dir/writer.cpu"
    t1=$(now)
    t2=$(wait_for "$want")
    wait "$gen"
    sleep 0.3
    sent=$(( $(tx) - a0 ))
    [[ -n ${CHURN_DEBUG:-} ]] && tail -5 "$dir/gen.log" >&2
    got=$(( $(rx) - b0 ))
    read -r _ _ dumps overruns no_route rx_drops < <(stats)
    no_route=$((no_route - no_route0)); rx_drops=$((rx_drops - rx_drops0))
    python3 -c "
a = dict(x.split('=') for x in '$cpu0'.split())
b = dict(x.split('=') for x in '$(thread_cpu)'.split())
print('$name: the writer\'s CPU: $(cat "$dir/writer.cpu"); linerate\'s CPU seconds per thread:', ', '.join(f'{k} {float(v) - float(a.get(k, 0)):.2f}' for k, v in b.items() if float(v) - float(a.get(k, 0)) >= 0.01))"
    python3 -c "
t0, t1, t2 = $t0, $t1, $t2
print(f'$name: {$total} routes: kernel (netlink writer) {t1 - t0:.2f} s, linerate FIB done {t2 - t0:.2f} s after the first (= {$total / (t2 - t0):,.0f} routes/s, {t2 - t1:.2f} s after the kernel); steady flow {$sent} sent, {$got} received, lost {max(0, $sent - $got)}; dumps $dumps, overruns $overruns; linerate dropped: no_route $no_route, rx (ring full, CPU busy) $rx_drops')"
}
phase withdraw "$dir/del" 0 40
phase load "$dir/add" "$total" 40
grep -E "overrun|lost|not mirrored" "$dir/run.log" || true
ps -o rss= -p "$pid" | awk '{printf "linerate RSS after the churn: %.0f MiB\n", $1 / 1024}'
