#!/usr/bin/env bash
# Quick start, main job: set up, build, and run the built-in default lab (kernel forwarding
# vs linerate vs kernel + 1000 nftables rules vs linerate + the same rules, in network
# namespaces on this machine).
# Needs root. Extra arguments go to `linerate lab` (see `linerate lab --help`).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
cargo build --release --locked -p linerate
exec ./target/release/linerate lab "$@"
