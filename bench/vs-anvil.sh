#!/usr/bin/env bash
# Side-by-side: the same load, from the same pre-signed keys, against anvil
# and against sluice, one node at a time on this machine, at several offered
# rates. Prints one table (offered / admitted / included TPS, latency
# percentiles, node CPU and peak RSS, sluice/anvil ratios) and keeps every
# run's JSON summary and SVG plot (and sluice's metrics at the end) under
# $OUT.
#
# Equivalent settings on both: chain id 31337, the same genesis (seeded
# sender keys from `sluice load genesis`), 200 ms block time, 150M block
# gas (7,142 transfers), base fee 1 gwei. Each run starts a fresh node.
#
# Usage: bench/vs-anvil.sh [RATE...]        (default rates: 5000 10000 20000 40000)
# Environment: DURATION_S (15), ACCOUNTS (10000), CONNECTIONS (4), BATCH (100),
#   WORKLOAD (transfer), TARGETS ("anvil sluice"), OUT (bench/results/vs-anvil),
#   SKIP_BUILD=1 to use the existing release binary, BASE=path/to/sluice to
#   add target "base" (another sluice build, same settings: a before/after
#   in one run, e.g. TARGETS="base sluice base sluice"), PERF_S=N to record
#   each sluice run's CPU profile for N s from PERF_DELAY_S (40) into the run
#   ($OUT/*.perf.data, git-ignored; best with `cargo build --profile profiling`
#   copied over target/release/sluice).
# Everything listens on 127.0.0.1 only; every run is bounded in time.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. "$ROOT/bench/lib.sh"
RATES=("$@")
[ ${#RATES[@]} -eq 0 ] && RATES=(5000 10000 20000 40000)
DURATION_S="${DURATION_S:-15}"
ACCOUNTS="${ACCOUNTS:-10000}"
CONNECTIONS="${CONNECTIONS:-4}"
BATCH="${BATCH:-100}"
WORKLOAD="${WORKLOAD:-transfer}"
TARGETS="${TARGETS:-anvil sluice}"
OUT="${OUT:-bench/results/vs-anvil}"
ANVIL_VERSION="1.7.1"
mkdir -p "$OUT"

# anvil: the prebuilt binary from npm, into a git-ignored folder. The
# platform package's binary is run directly (not the node wrapper), so the
# pid we sample in /proc is anvil's own.
ANVIL="bench/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
if [ ! -x "$ANVIL" ]; then
    echo "installing anvil $ANVIL_VERSION from npm into bench/node_modules" >&2
    npm install --prefix bench --no-save --no-package-lock --no-audit --no-fund \
        "@foundry-rs/anvil@$ANVIL_VERSION" >&2
fi
"$ANVIL" --version | head -1 >&2

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
SLUICE="$ROOT/target/release/sluice"


WORK="$(mktemp -d /tmp/sluice-vs-anvil.XXXXXX)"
NODE_PID=""
cleanup() {
    if [ -n "$NODE_PID" ] && kill -0 "$NODE_PID" 2>/dev/null; then
        kill -TERM "$NODE_PID" 2>/dev/null || true
        wait "$NODE_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

GENESIS="$WORK/genesis.json"
"$SLUICE" load genesis --accounts "$ACCOUNTS" --seed 1 --out "$GENESIS"

start_node() { # target -> sets NODE_PID, URL, METRICS_ARGS
    local port; port="$(free_port)"
    URL="http://127.0.0.1:$port"
    METRICS_ARGS=()
    case "$1" in
    anvil)
        "$ANVIL" --host 127.0.0.1 --port "$port" --chain-id 31337 --block-time 0.2 \
            --gas-limit 150000000 --base-fee 1000000000 --init "$GENESIS" --silent \
            >"$WORK/anvil.log" 2>&1 &
        NODE_PID=$!
        ;;
    sluice|base)
        local mport bin="$SLUICE"; mport="$(free_port)"
        [ "$1" = base ] && bin="${BASE:?BASE=path/to/sluice is needed for target base}"
        rm -rf "$WORK/data"
        RUST_LOG=warn "$bin" node --data-dir "$WORK/data" --rpc-addr "127.0.0.1:$port" \
            --metrics-addr "127.0.0.1:$mport" --chain-id 31337 --block-time-ms 200 \
            --block-gas-limit 150000000 --genesis "$GENESIS" >"$WORK/sluice.log" 2>&1 &
        NODE_PID=$!
        METRICS_ARGS=(--metrics-url "http://127.0.0.1:$mport/metrics")
        ;;
    esac
    wait_rpc "$URL" 120
}

for rate in "${RATES[@]}"; do
    declare -A round=()
    for target in $TARGETS; do
        # A target named twice runs twice: its runs are numbered (-2, -3).
        round[$target]=$(( ${round[$target]:-0} + 1 ))
        run="$target"; [ "${round[$target]}" -gt 1 ] && run="$target-${round[$target]}"
        echo "=== $run at $rate tx/s offered for $DURATION_S s ===" >&2
        start_node "$target"
        if [ -n "${PERF_S:-}" ] && [ "$target" != anvil ]; then
            # A CPU profile of the node while the load runs (after the load
            # tool's pre-signing): read with `perf report -i FILE`.
            (sleep "${PERF_DELAY_S:-40}"
             perf record -q -F 99 --call-graph dwarf,16384 -p "$NODE_PID" \
                 -o "$OUT/$run-$WORKLOAD-$rate.perf.data" -- sleep "$PERF_S" >/dev/null 2>&1) &
        fi
        "$SLUICE" load --url "$URL" --label "$target" --workload "$WORKLOAD" \
            --accounts "$ACCOUNTS" --seed 1 --tps "$rate" --duration-s "$DURATION_S" \
            --connections "$CONNECTIONS" --batch "$BATCH" --drain-timeout-s 30 \
            --node-pid "$NODE_PID" "${METRICS_ARGS[@]}" \
            --json "$OUT/$run-$WORKLOAD-$rate.json" --plot "$OUT/$run-$WORKLOAD-$rate.svg" \
            2>"$OUT/$run-$WORKLOAD-$rate.progress.log" | tee "$OUT/$run-$WORKLOAD-$rate.txt" >&2
        # The node's own counters at the end of the run (where refusals
        # came from, what each stage handled), for reading beside the table.
        if [ ${#METRICS_ARGS[@]} -gt 0 ]; then
            curl -sf "${METRICS_ARGS[1]}" >"$OUT/$run-$WORKLOAD-$rate.metrics" || true
        fi
        stop_node
    done
done

python3 - "$OUT" "$WORKLOAD" "${RATES[@]}" <<'EOF'
import json, os, sys
out, workload, rates = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(t, r):
    p = os.path.join(out, f"{t}-{workload}-{r}.json")
    return json.load(open(p)) if os.path.exists(p) else None
def runs(t, r):
    """Every run of target t at rate r (t, t-2, t-3, ...)."""
    found, k = [], 1
    while True:
        s = load(t if k == 1 else f"{t}-{k}", r)
        if not s: return found
        found.append(s); k += 1
hdr = ("| target | offered rate | offered | admitted | included | lost | rejected | dropped "
       "| adm p50/p99 ms | incl p50/p99 ms | node CPU cores | CPU us per included tx | peak RSS MiB |")
print(hdr); print("|" + "---|" * (hdr.count("|") - 1))
best = {}
for r in rates:
    for t in ("anvil", "base", "sluice"):
      for s in runs(t, r):
        n = s.get("node") or {}
        best[t] = max(best.get(t, 0), s["included_tps"])
        cores = n.get('cpu_cores_avg', 0)
        us = 1e6 * cores / s["included_tps"] if s["included_tps"] else 0
        print(f"| {t} | {r} | {s['offered_tps']:.0f} | {s['admitted_tps']:.0f} | {s['included_tps']:.0f} "
              f"| {s['admitted_not_included']} | {s['rejected']} | {s['dropped']} "
              f"| {s['admission_latency']['p50_ms']:.1f} / {s['admission_latency']['p99_ms']:.1f} "
              f"| {s['inclusion_latency']['p50_ms']:.0f} / {s['inclusion_latency']['p99_ms']:.0f} "
              f"| {cores:.2f} | {us:.0f} | {n.get('peak_rss_mib', 0):.0f} |")
print()
print("| offered rate | included sluice/anvil | admitted sluice/anvil |")
print("|---|---|---|")
for r in rates:
    a, s = load("anvil", r), load("sluice", r)
    if a and s and a["included_tps"] > 0 and a["admitted_tps"] > 0:
        print(f"| {r} | {s['included_tps']/a['included_tps']:.2f} | {s['admitted_tps']/a['admitted_tps']:.2f} |")
if "base" in best and "sluice" in best and best["base"] > 0:
    print(f"\nbest included TPS: sluice {best['sluice']:.0f}, base {best['base']:.0f}, "
          f"ratio {best['sluice']/best['base']:.2f}")
if "anvil" in best and "sluice" in best and best["anvil"] > 0:
    print(f"\nbest included TPS: sluice {best['sluice']:.0f}, anvil {best['anvil']:.0f}, "
          f"ratio {best['sluice']/best['anvil']:.2f}")
s = [x for r in rates for x in runs("sluice", r) if x.get("recovery_ceiling_tps")]
if s:
    top = max(s, key=lambda x: x["included_tps"])
    print(f"sluice best included {top['included_tps']:.0f} tx/s = "
          f"{100*top['included_tps']/top['recovery_ceiling_tps']:.0f}% of the sender-recovery ceiling "
          f"({top['recovery_ceiling_tps']:.0f} tx/s = {top['cores']} cores / {top['recovery_us_per_sig']:.1f} us)")
EOF
