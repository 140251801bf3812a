#!/usr/bin/env bash
# The lab on a machine with many CPUs (the library's 16-CPU device machine): generator, DUT
# and receiver each on CPUs of their own. Labs, in this order: `overload` (kernel and
# linerate at full speed, then paced at 1x-3x of that), `backends` (the kernel, linerate
# over AF_PACKET and over generic XDP, each flooded and paced at 0.5x-3x: no livelock on
# any backend), `paced` (kernel and linerate paced at 0.5x-3x in bursts of up to 256 and
# of up to 64 frames, with every run's counters: where paced frames are lost), `default`
# (the default lab, one worker), `tcp` (scripts/tcp-through.sh), `workers2` and `workers4`
# (kernel and linerate with 2 and 4 workers: the veths get that many queues). About 4.5
# minutes for `default`, 1 for `tcp` (3 rounds), 45 s each for `workers2` and `workers4`,
# 2.5 for `backends` (2026-11-28).
#
#   scripts/lab-16cpu.sh [BINARY]     BINARY: target/release/linerate by default
#
# OUT: results folder (default results/<date>-16cpu); each lab's folder is packed into
# OUT/labs.tar.gz and its summary copied to OUT/<lab>-summary.txt as it ends.
# LR_DEBS: a folder of Debian packages (iproute2, ethtool, nftables, iputils-ping, procps
# and their libraries) for a bare machine: a tool the machine lacks runs from them, through
# the dynamic loader with their libraries, so nothing on the machine changes.
# LR_FORCE_DEBS=1 uses them even for tools the machine has (to test this script).
# LR_CPUS="G D R": first CPUs of generator, DUT and receiver (default "2 6 10");
# LR_LABS: which labs to run (default "overload workers2 workers4 default"; `backends` and
# `paced`, `idle` and `tcp` on request).
# LR_COMPARE: another linerate binary; the overload lab runs again with it (`overload-b`).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/linerate}")
out=${OUT:-results/$(date +%F)-16cpu}
mkdir -p "$out"
log() { echo "== $(date +%T) $*"; }

# Unpacks every .deb in $1 into $2 (python, so that neither dpkg nor ar is needed).
unpack_debs() {
    python3 - "$1" "$2" <<'EOF'
import io, pathlib, sys, tarfile
src, dst = pathlib.Path(sys.argv[1]), sys.argv[2]
for deb in sorted(src.glob("*.deb")):
    data = deb.read_bytes()
    assert data[:8] == b"!<arch>\n", deb
    off = 8
    while off + 60 <= len(data):
        name, size = data[off:off + 16].decode().strip().rstrip("/"), int(data[off + 48:off + 58])
        body = data[off + 60:off + 60 + size]
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body)) as t:
                t.extractall(dst, filter="tar") if hasattr(tarfile, "data_filter") else t.extractall(dst)
        off += 60 + size + (size & 1)
EOF
}

if [ -n "${LR_DEBS:-}" ]; then
    root=/tmp/lr-tools
    rm -rf "$root" && mkdir -p "$root/wrap"
    unpack_debs "$LR_DEBS" "$root" || log "unpacking $LR_DEBS failed"
    libs="$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu"
    loader=$(ls /lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -1)
    for t in ip ethtool nft ping sysctl kill chrt iperf3 taskset; do
        if [ -z "${LR_FORCE_DEBS:-}" ] && command -v "$t" >/dev/null; then continue; fi
        for d in usr/sbin sbin usr/bin bin; do
            if [ -x "$root/$d/$t" ]; then
                # --library-path applies to this program only, not to what it runs
                # (`ip netns exec` starts linerate, sh, ethtool with the machine's libraries).
                printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$loader" "$libs" "$root/$d/$t" >"$root/wrap/$t"
                chmod +x "$root/wrap/$t"
                break
            fi
        done
    done
    export PATH="$root/wrap:$PATH"
fi

log "machine: $(nproc) CPUs, kernel $(uname -r), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}")"
log "cores: $(cat /sys/devices/system/cpu/cpu{0..15}/topology/thread_siblings_list 2>/dev/null | tr '\n' ' ')"
for t in ip ethtool nft ping sysctl kill chrt iperf3 taskset; do
    printf '%s: %s (%s)\n' "$t" "$(command -v $t || echo MISSING)" "$($t -V 2>&1 | head -1 || true)"
done

# One lab: name, timeout in seconds, then linerate lab's arguments. A name ending in -b runs
# the LR_COMPARE binary. /proc/stat and the NAPI and worker threads' CPU times are sampled
# meanwhile (cpustat.txt: which CPUs were saturated, and by what).
lab() {
    local name=$1 limit=$2 exe=$bin
    shift 2
    [ "${name%-b}" != "$name" ] && exe=$(realpath "$LR_COMPARE")
    case " ${LR_LABS:-overload workers2 workers4 default} " in *" ${name%-b} "*) ;; *) return ;; esac
    log "lab $name ($exe): $*"
    mkdir -p "$out/$name"
    (while :; do echo "t $(date +%s.%N)"; grep '^cpu[0-9]' /proc/stat; ps -eLo tid,comm,psr,ni,time | grep -E 'napi/lr|lr-worker'; sleep 1; done >"$out/$name/cpustat.txt") &
    local sampler=$!
    timeout -s INT "$limit" "$exe" lab "$@" --out "$out/$name" 2>&1 | tr '\r' '\n' | grep -v '^\[' || log "lab $name failed or timed out"
    kill "$sampler"
    cp "$out/$name/summary.txt" "$out/$name-summary.txt" 2>/dev/null
    tar -C "$out" -czf "$out/labs.tar.gz" $(cd "$out" && ls -d */ 2>/dev/null)
}

# A lab file: its comment ($1), the runs and traffic every lab here uses, then its sets
# (standard input).
labfile() {
    printf '# %s\nruns = 3\nseconds = 4\n[traffic]\nflows = 2000\nframe_size = 60\n' "$1"
    cat
}

labfile "Full speed, then paced at 1x-3x of that rate (the overload sweep), and 5 pings, kernel and linerate." >"$out/overload.toml" <<'EOF'
[[set]]
name = "kernel"
dut = "kernel"
overload = [1, 2, 3]
ping = 5
[[set]]
name = "linerate"
dut = "linerate"
overload = [1, 2, 3]
ping = 5
EOF

labfile "Every backend under overload: full speed, then paced at 0.5x-3x of each set's rate." >"$out/backends.toml" <<'EOF'
[[set]]
name = "kernel"
dut = "kernel"
overload = [0.5, 1, 2, 3]
[[set]]
name = "linerate-af_packet"
dut = "linerate"
backend = "af_packet"
overload = [0.5, 1, 2, 3]
[[set]]
name = "linerate-xdp-generic"
dut = "linerate"
backend = "af_xdp"
overload = [0.5, 1, 2, 3]
EOF

labfile "Where paced frames are lost: kernel and linerate paced at 0.5x-3x, in bursts of up to 256 frames (veth's ring) and of up to 64; counters.txt has every run's counters." >"$out/paced.toml" <<'EOF'
[[set]]
name = "kernel"
dut = "kernel"
overload = [0.5, 1, 2, 3]
[[set]]
name = "linerate"
dut = "linerate"
overload = [0.5, 1, 2, 3]
[[set]]
name = "kernel-step64"
dut = "kernel"
overload = [0.5, 1, 2, 3]
traffic = { paced_step = 64 }
[[set]]
name = "linerate-step64"
dut = "linerate"
overload = [0.5, 1, 2, 3]
traffic = { paced_step = 64 }
EOF

labfile "Kernel and linerate paced at 0.5x-2x (the idle lab runs it with the DUT CPU's idle states on, then off)." >"$out/idle.toml" <<'EOF'
[[set]]
name = "kernel"
dut = "kernel"
overload = [0.5, 1, 2]
[[set]]
name = "linerate"
dut = "linerate"
overload = [0.5, 1, 2]
EOF

labfile "Kernel and linerate forwarding with several workers (\`--workers N\`)." >"$out/workers.toml" <<'EOF'
[[set]]
name = "kernel"
dut = "kernel"
[[set]]
name = "linerate"
dut = "linerate"
EOF

read -r g d r <<<"${LR_CPUS:-2 6 10}"
cpus=(--gen-cpu "$g" --dut-cpu "$d" --rcv-cpu "$r")
lab overload 140 "$out/overload.toml" "${cpus[@]}"
[ -n "${LR_COMPARE:-}" ] && lab overload-b 140 "$out/overload.toml" "${cpus[@]}"
lab backends 220 "$out/backends.toml" "${cpus[@]}"
lab paced 300 "$out/paced.toml" --runs 2 "${cpus[@]}"

# `idle`: the paced sweep with the DUT CPU's idle states as the machine has them, then with
# every state but polling disabled on that CPU: are paced frames lost while the DUT's CPU
# wakes from idle (a burst fills veth's 256-frame ring meanwhile)? Restored after.
idle_states() { ls -d /sys/devices/system/cpu/cpu"$1"/cpuidle/state* 2>/dev/null; }
case " ${LR_LABS:-} " in *" idle "*)
    log "cpuidle: driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null), governor $(cat /sys/devices/system/cpu/cpuidle/current_governor 2>/dev/null)"
    for st in $(idle_states "$d"); do log "cpu$d $(basename "$st"): $(cat "$st"/name) exit latency $(cat "$st"/latency) us, disabled $(cat "$st"/disable)"; done
    LR_LABS="$LR_LABS idle-on idle-off"
    lab idle-on 120 "$out/idle.toml" --runs 2 "${cpus[@]}"
    for st in $(idle_states "$d"); do [ "$(cat "$st"/name)" = POLL ] || echo 1 >"$st"/disable; done
    lab idle-off 120 "$out/idle.toml" --runs 2 "${cpus[@]}"
    for st in $(idle_states "$d"); do echo 0 >"$st"/disable; done
;; esac
lab default 450 --runs 3 --seconds 4 "${cpus[@]}"
# `tcp`: iperf3 through the kernel, linerate and linerate's pipeline alone (veth offloads on),
# client, DUT and server on the generator's, DUT's and receiver's CPUs.
case " ${LR_LABS:-} " in *" tcp "*)
    log "tcp: client / DUT / server on CPUs $g / $d / $r"
    CLIENT_CPU=$g SERVER_CPU=$r DUT_CPU=$d BIN=$bin ROUNDS=${TCP_ROUNDS:-2} timeout 120 scripts/tcp-through.sh 2>&1 | tee "$out/tcp.txt"
;; esac
lab workers2 110 "$out/workers.toml" --workers 2 "${cpus[@]}"
lab workers4 110 "$out/workers.toml" --workers 4 "${cpus[@]}"
log done
