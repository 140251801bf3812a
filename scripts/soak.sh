#!/usr/bin/env bash
# The soak (issue 46): everything at once through one linerate for DURATION seconds (default
# 3600), then a report of memory, drops and failed TCP connections. The test itself is
# crates/linerate/tests/soak.rs (its short version, 150 s, runs in ./test.sh).
#   scripts/soak.sh [DURATION] [FRAMES_PER_SECOND]
# Needs root. Pins nothing itself: linerate's worker on CPU 1, generator and receiver on 0.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-3600}"
pps="${2:-20000}"
source scripts/setup.sh
LINERATE_SOAK_SECS="$secs" LINERATE_SOAK_PPS="$pps" \
    cargo test --release -p linerate --test soak -- --nocapture 2>&1 |
    grep -vE '^ +([0-9]+: |at )|^ *(Compiling|Finished|Running) '
