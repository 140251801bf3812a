#!/usr/bin/env bash
# Quick start, main job: set up, build, and run linerate's built-in default benchmark.
# Extra arguments go to `linerate bench` (see `linerate bench --help`).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
cargo build --release --locked -p linerate
exec ./target/release/linerate bench "$@"
