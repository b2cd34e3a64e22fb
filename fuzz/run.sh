#!/usr/bin/env bash
# Runs each fuzz target for a bounded time (default 60 s each) on the
# committed corpus. cargo-fuzz needs nightly features; on a stable
# toolchain RUSTC_BOOTSTRAP=1 unlocks them. Debug profile (--dev) so it
# never competes with release benchmarks for long.
#   bash fuzz/run.sh [SECONDS] [TARGET...]
# FUZZ_SEED=N fixes libFuzzer's seed (CI does, so a run it fails can be
# repeated here); unset, each run explores anew.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(tx_decode rpc_body block_exec)
command -v cargo-fuzz >/dev/null || cargo install --locked --debug cargo-fuzz@0.13.1
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  RUSTC_BOOTSTRAP=1 cargo fuzz run --dev --sanitizer none "$t" "corpus/$t" -- \
    -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    ${FUZZ_SEED:+-seed="$FUZZ_SEED"}
done
