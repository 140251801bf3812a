#!/usr/bin/env bash
# The in-memory bench's ratios that the targets in docs/performance.md ("Current figures")
# are about, measured in rounds: each round runs every pair once, in alternating order, so
# that a pair's two sides share the machine's state of the moment; the summary gives each side's median and the ratio of each
# round. Then the worker scaling (`--workers N`, no firewall). Written for the library's
# 16-CPU device machine: about 3.5 minutes there with ROUNDS=3 and WORKERS="1 2 4 8 14".
#
#   scripts/bench-ratios.sh [BINARY]     BINARY: target/release/linerate by default
#
# OUT: results folder (default results/<date>-bench); ROUNDS (default 3); CPU: the CPU the
# single-worker benches are pinned to (default 6); WORKERS: worker counts (default "1 2 4 8").
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/linerate}")
out=${OUT:-results/$(date +%F)-bench}
rounds=${ROUNDS:-3}
cpu=${CPU:-6}
mkdir -p "$out"
log() { echo "== $(date +%T) $*"; }
log "machine: $(nproc) CPUs, kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

# Pairs: a name, the base's arguments, the other side's (the ratio is other / base).
pairs=(
    "keep-state||--rules 0 --states 2000"
    "keep-state-v6|--ipv6|--ipv6 --rules 0 --states 2000"
    "realistic-10k|--rules 10 --rule-shape realistic|--rules 10000 --rule-shape realistic"
    "realistic-10k-new-flows|--rules 10 --rule-shape realistic --flows 100000|--rules 10000 --rule-shape realistic --flows 100000"
    "nat|--rules 0 --states 0|--rules 0 --states 0 --nat"
)

# One bench: a label, then its arguments; appends its JSON line, labelled, to bench.jsonl.
bench() {
    local label=$1
    shift
    local line
    line=$("$bin" bench --runs 3 --seconds 1 --json "$@" 2>>"$out/stderr.txt" | tail -1)
    [ -n "$line" ] || { log "$label failed: $*"; return; }
    printf '{"label": "%s", "args": "%s", "result": %s}\n' "$label" "$*" "$line" >>"$out/bench.jsonl"
    log "$label: $(python3 -c 'import json,sys; print("%.2f Mpps" % json.loads(sys.argv[1])["mpps"])' "$line") ($*)"
}

: >"$out/bench.jsonl"
for r in $(seq 1 "$rounds"); do
    for p in "${pairs[@]}"; do
        IFS='|' read -r name base other <<<"$p"
        # shellcheck disable=SC2086 # the arguments are words
        if [ $((r % 2)) = 1 ]; then
            bench "$name/base/$r" --cpu "$cpu" $base
            bench "$name/other/$r" --cpu "$cpu" $other
        else
            bench "$name/other/$r" --cpu "$cpu" $other
            bench "$name/base/$r" --cpu "$cpu" $base
        fi
    done
done
for w in ${WORKERS:-1 2 4 8}; do
    [ "$w" -le "$(nproc)" ] && bench "workers/$w/1" --workers "$w"
done

python3 - "$out/bench.jsonl" >"$out/summary.txt" <<'EOF'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
mpps = collections.defaultdict(dict)
# The largest share of a run's CPU that other tasks or the hypervisor took, per pair.
other_work = collections.defaultdict(float)
for r in rows:
    name, side, rnd = r["label"].split("/")
    mpps[name][(side, rnd)] = r["result"]["mpps"]
    for i in r["result"].get("runs_interference", []):
        other_work[name] = max(other_work[name], i.get("waited") or 0, i.get("stolen") or 0)
for name, m in mpps.items():
    if name == "workers":
        one = m.get(("1", "1"))
        print("workers, no firewall: " + ", ".join(f"{s}: {v:.2f} Mpps" + (f" ({v / one:.2f}x)" if one else "") for (s, _), v in sorted(m.items(), key=lambda kv: int(kv[0][0]))))
        continue
    rounds = sorted({rnd for _, rnd in m})
    ratios = [m[("other", r)] / m[("base", r)] for r in rounds if ("other", r) in m and ("base", r) in m]
    med = lambda side: statistics.median(v for (s, _), v in m.items() if s == side)
    print(f"{name}: base {med('base'):.2f}, other {med('other'):.2f} Mpps (medians of {len(rounds)} rounds); ratio per round " + ", ".join(f"{x:.2f}" for x in ratios)
          + f"; other work on the CPU at most {100 * other_work[name]:.0f}% of a run")
EOF
cat "$out/summary.txt"
log done
