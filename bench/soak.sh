#!/usr/bin/env bash
# Sustained load against the node's own burst rate, in one run: a fresh
# release node takes a BURST of pre-signed transfers as fast as it admits
# them (4 connections, batches of 100); a second fresh node then takes
# RATE tx/s offered for DURATION_S seconds over 64 connections, batches of
# 100, every transfer to a fresh recipient (the state grows by one account
# per transaction). Both use a 10,000-sender genesis, 200 ms blocks and
# 150M block gas. Prints what issue 35 asks of it: included TPS in the
# first and last minute, the run's average against the burst rate, the
# committed height's largest lag behind the producer, and lost (admitted,
# never included).
#
# Usage: bench/soak.sh
# Environment: RATE (30000), DURATION_S (180), BURST (40000), WORKLOAD
#   (transfer), OUT (bench/results/soak), SKIP_BUILD=1 to use the existing
#   release binary, DATA (where data dirs go; default a temp dir).
# Everything listens on 127.0.0.1 only; every run is bounded in time.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. "$ROOT/bench/lib.sh"
RATE="${RATE:-30000}"
DURATION_S="${DURATION_S:-180}"
BURST="${BURST:-40000}"
WORKLOAD="${WORKLOAD:-transfer}"
OUT="${OUT:-bench/results/soak}"
mkdir -p "$OUT"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
SLUICE="$ROOT/target/release/sluice"

WORK="${DATA:-$(mktemp -d /tmp/sluice-soak.XXXXXX)}"
mkdir -p "$WORK"
NODE_PID=""
cleanup() {
    stop_node
    [ -n "${DATA:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

GENESIS="$WORK/genesis.json"
"$SLUICE" load genesis --accounts 10000 --seed 1 --out "$GENESIS"

start_node() { # name -> sets NODE_PID, URL, MURL
    local port mport
    port="$(free_port)"
    mport="$(free_port)"
    URL="http://127.0.0.1:$port"
    MURL="http://127.0.0.1:$mport/metrics"
    rm -rf "$WORK/data-$1"
    RUST_LOG=warn "$SLUICE" node --data-dir "$WORK/data-$1" --rpc-addr "127.0.0.1:$port" \
        --metrics-addr "127.0.0.1:$mport" --chain-id 31337 --block-time-ms 200 \
        --block-gas-limit 150000000 --genesis "$GENESIS" >>"$WORK/sluice-$1.log" 2>&1 &
    NODE_PID=$!
    wait_rpc "$URL" 60
}

echo "=== burst: $BURST transfers" >&2
start_node burst
"$SLUICE" load --url "$URL" --label "burst" --workload "$WORKLOAD" --accounts 10000 --seed 1 \
    --count "$BURST" --connections 4 --batch 100 --drain-timeout-s 60 \
    --node-pid "$NODE_PID" --metrics-url "$MURL" \
    --json "$OUT/burst-$BURST.json" 2>"$OUT/burst.progress.log" | tee "$OUT/burst-$BURST.txt" >&2
stop_node

echo "=== soak: $RATE tx/s for $DURATION_S s" >&2
start_node soak
"$SLUICE" load --url "$URL" --label "soak" --workload "$WORKLOAD" --accounts 10000 --seed 1 \
    --tps "$RATE" --duration-s "$DURATION_S" --txs $((RATE * DURATION_S * 2 / 3)) --connections 64 --batch 100 \
    --drain-timeout-s 60 --node-pid "$NODE_PID" --metrics-url "$MURL" \
    --json "$OUT/soak-$RATE-${DURATION_S}s.json" --plot "$OUT/soak-$RATE-${DURATION_S}s.svg" \
    2>"$OUT/soak.progress.log" | tee "$OUT/soak-$RATE-${DURATION_S}s.txt" >&2
curl -sf "$MURL" >"$OUT/soak-metrics-after.txt" || true
du -sb "$WORK/data-soak" | cut -f1 >"$OUT/soak-disk.txt"
stop_node

python3 - "$OUT/burst-$BURST.json" "$OUT/soak-$RATE-${DURATION_S}s.json" "$OUT/soak-disk.txt" <<'EOF'
import json, sys
burst, soak = (json.load(open(p)) for p in sys.argv[1:3])
disk = int(open(sys.argv[3]).read())
line = [t for t in soak["timeline"] if t["t_s"] <= soak["send_window_s"]]
def minute(ts):
    return sum(t["included_tps"] for t in ts) / max(len(ts), 1)
first = minute([t for t in line if 0 < t["t_s"] <= 60])
last = minute([t for t in line if t["t_s"] > soak["send_window_s"] - 60])
lags = [p[0] - p[3] for t in line if (p := t.get("pipeline"))]
print("| measure | value |")
print("|---|---|")
print(f"| burst ({burst['scheduled']:,} transfers): included tx/s | {burst['included_tps']:,.0f} (lost {burst['admitted_not_included']}) |")
print(f"| soak offered / admitted / included tx/s | {soak['offered_tps']:,.0f} / {soak['admitted_tps']:,.0f} / {soak['included_tps']:,.0f} |")
print(f"| soak included, first / last minute | {first:,.0f} / {last:,.0f} ({last / max(first, 1):.2f}x; goal >= 0.85x) |")
print(f"| soak average / burst | {soak['included_tps'] / max(burst['included_tps'], 1):.2f}x (goal >= 0.8x) |")
print(f"| committed height behind the producer, max (sampled each second) | {max(lags, default=0)} blocks (pipeline_max_lag {soak['pipeline_max_lag']}) |")
print(f"| lost (admitted, never included) | {soak['admitted_not_included']} of {soak['admitted']:,} |")
node = soak.get("node") or {}
print(f"| node CPU, peak RSS | {node.get('cpu_cores_avg', 0):.2f} cores, {node.get('peak_rss_mib', 0):,.0f} MiB |")
print(f"| data dir after the soak | {disk / 2**20:,.0f} MiB ({disk / max(soak['included'], 1):,.0f} B per included transfer) |")
EOF
