#!/bin/bash
# TCP through the kernel and through linerate, as a container's traffic crosses a router:
# iperf3 from namespace lrta to lrtb across lrtd, every veth offload at its default (TSO,
# checksum offload), alternating kernel forwarding, linerate (fast path on, AF_PACKET ports:
# the fast path at tc ingress), linerate-xdp (fast path on, AF_XDP ports: XDP) and linerate
# with `fast_path = false`, ROUNDS times (default 2), SECS seconds each (default 6).
# iperf3's client and server run on CPU 0, linerate's worker (and its NAPI) on CPU 1, or
# on the CPUs in CLIENT_CPU, SERVER_CPU and DUT_CPU (the 16-CPU machine: 2, 10 and 6).
# Prints one line per run: DUT and Gbit/s received. Needs root, iperf3 and a release build.
set -u
CLIENT_CPU=${CLIENT_CPU:-0}
SERVER_CPU=${SERVER_CPU:-0}
DUT_CPU=${DUT_CPU:-1}
BIN=${BIN:-$(dirname "$0")/../target/release/linerate}
ROUNDS=${ROUNDS:-2}
SECS=${SECS:-6}
DIR=$(mktemp -d /tmp/lr-tcp.XXXXXX)

cleanup() {
  [ -f "$DIR/pid" ] && kill "$(cat "$DIR/pid")" 2>/dev/null
  for n in lrta lrtd lrtb; do ip netns del $n 2>/dev/null; done
  rm -rf "$DIR"
}
trap cleanup EXIT

topology() {
  for n in lrta lrtd lrtb; do ip netns del $n 2>/dev/null; done
  for n in lrta lrtd lrtb; do ip netns add $n; ip -n $n link set lo up; done
  ip link add lra0 netns lrta address 02:00:00:00:0a:01 type veth peer name lrd0 netns lrtd address 02:00:00:00:0d:00
  ip link add lrd1 netns lrtd address 02:00:00:00:0d:01 type veth peer name lrb0 netns lrtb address 02:00:00:00:0b:01
  ip -n lrta link set lra0 up; ip -n lrtd link set lrd0 up; ip -n lrtd link set lrd1 up; ip -n lrtb link set lrb0 up
  ip -n lrta addr add 198.18.0.2/24 dev lra0; ip -n lrta route add default via 198.18.0.1
  ip -n lrtb addr add 198.19.0.2/24 dev lrb0; ip -n lrtb route add default via 198.19.0.1
  # GRO on the hosts' ends: XDP may redirect to a veth whose peer has it (and both DUTs get it).
  ip netns exec lrta ethtool -K lra0 gro on >/dev/null
  ip netns exec lrtb ethtool -K lrb0 gro on >/dev/null
}

gbits() {
  ip netns exec lrtb taskset -c "$SERVER_CPU" iperf3 -s -1 -D -p 5201 -B 198.19.0.2 >/dev/null
  sleep 0.5
  ip netns exec lrta taskset -c "$CLIENT_CPU" iperf3 -c 198.19.0.2 -t "$SECS" -J --connect-timeout 5000 |
    python3 -c 'import json,sys; j = json.load(sys.stdin); print("%.2f" % (j["end"]["sum_received"]["bits_per_second"] / 1e9) if "sum_received" in j.get("end", {}) else "failed: %s" % j.get("error"))'
}

kernel() {
  topology
  ip -n lrtd addr add 198.18.0.1/24 dev lrd0; ip -n lrtd addr add 198.19.0.1/24 dev lrd1
  ip netns exec lrtd sysctl -qw net.ipv4.ip_forward=1
  echo "kernel $(gbits)"
}

linerate() { # $1: lines for [router], $2: the name printed, $3: the ports' backend
  topology
  cat > "$DIR/router.toml" <<EOT
[router]
control_socket = "$DIR/control.sock"
host_stack = false
$1
[[interface]]
name = "lrd0"
addresses = ["198.18.0.1/24"]
backend = "$3"

[[interface]]
name = "lrd1"
addresses = ["198.19.0.1/24"]
backend = "$3"
EOT
  ip netns exec lrtd "$BIN" run -c "$DIR/router.toml" --cpu "$DUT_CPU" > "$DIR/run.log" 2>&1 &
  echo $! > "$DIR/pid"
  for _ in $(seq 50); do grep -q "forwarding with" "$DIR/run.log" && break; sleep 0.1; done
  ip netns exec lrta ping -c 1 -W 2 198.19.0.2 >/dev/null || { echo "$2: no ping through; its log:"; tail -5 "$DIR/run.log"; }
  echo "$2 $(gbits)"
  kill "$(cat "$DIR/pid")"; wait "$(cat "$DIR/pid")" 2>/dev/null; rm -f "$DIR/pid"
}

for _ in $(seq "$ROUNDS"); do
  kernel
  linerate "" linerate af_packet
  linerate "" linerate-xdp af_xdp
  linerate "fast_path = false" linerate-pipeline af_xdp
done
