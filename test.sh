#!/usr/bin/env bash
# Quick start, test suite: set up, build and run every test of the workspace.
# LPM_PROPTEST_ADDRS=N raises the number of random addresses the LPM property tests compare.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
# Style gate: no clippy warning anywhere (tests, benches and examples included).
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked "$@"
