#!/usr/bin/env bash
# Instructions per forwarded packet of the bench's fast path, counted by callgrind: repeatable
# on a noisy shared VM where wall-clock figures vary by +-15%. Arguments go to `linerate bench`.
# Example: scripts/instructions-per-packet.sh --routes 10000
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${LINERATE_BIN:-./target/release/linerate}
out=$(mktemp)
trap 'rm -f "$out" "$out.log"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='bench::measure::measure' \
    "$bin" bench --runs 1 --seconds 2 --warmup-ms 0 --json "$@" >"$out.log" 2>/dev/null
rx=$(tail -1 "$out.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rx"])')
ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1}')
python3 -c "print(f'{$ir/$rx:.1f} instructions per packet ({$ir} Ir over $rx packets)')"
