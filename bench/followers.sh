#!/usr/bin/env bash
# Followers on one machine: the validators' finalization time with and
# without two followers (f0 a p2p follower, f1 following f0's feed), each
# follower's head lag and bytes per block, a kill -9 of f0, and an eth_call
# flood at f0 (see bench/followers.py for what is measured and printed).
#
# Usage: bench/followers.sh
# Environment: RATE (2000), DURATION_S (60), ROUNDS (2), KILL_S (60),
#   FLOOD_S (30), FLOOD_CLIENTS (32), OUT (bench/results/followers),
#   NICE_FOLLOWERS (0), F0_CPUS and OTHER_CPUS (taskset lists; unset: no
#   pinning), ALONE (1; 0 skips the runs without followers), SKIP_BUILD=1. Everything listens on 127.0.0.1 only; every run is bounded.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
exec python3 bench/followers.py
