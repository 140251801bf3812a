#!/usr/bin/env bash
# Quick start, test suite: set up, build and run every test of the workspace.
# LPM_PROPTEST_ADDRS=N raises the number of random addresses the LPM property tests compare.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
# Style gates: the code as rustfmt writes it (rustfmt.toml; the fuzz crate is a workspace of
# its own), and no clippy warning anywhere (tests, benches and examples included).
cargo fmt --all -- --check
(cd fuzz && cargo fmt --all -- --check)
cargo clippy --workspace --all-targets --locked -- -D warnings
# No import cycle between the modules of a crate (the layers of issue 47).
scripts/import-cycles.py
# As root, with every tool installed, a test that cannot run fails instead of skipping.
if [[ $(id -u) -eq 0 ]]; then export LINERATE_NO_SKIP=1; fi
cargo test --workspace --locked "$@"
