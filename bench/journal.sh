#!/usr/bin/env bash
# The latency cost of the pending-transaction journal: eth_sendRawTransaction
# with mempool.journal off and on, side by side in one run (alternating
# rounds, a fresh data dir each), so the machine's noise falls on both.
# Two loads per node start:
#   latency:    one transaction per request (--batch 1), RATE tx/s offered
#               over CONNECTIONS connections: each answer waits for its sync
#               (group commit shares one among the requests in flight);
#   throughput: unthrottled JSON-RPC batches of 100: tx/s admitted.
# Usage: bench/journal.sh  (env: SLUICE, ROUNDS, RATE, CONNECTIONS, DURATION_S,
# COUNT, ACCOUNTS, OUT). Needs a release build:
#   cargo build --release -p sluice
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SLUICE="${SLUICE:-target/release/sluice}"
ROUNDS="${ROUNDS:-2}"
RATE="${RATE:-1000}"
CONNECTIONS="${CONNECTIONS:-16}"
DURATION_S="${DURATION_S:-20}"
COUNT="${COUNT:-60000}"
ACCOUNTS="${ACCOUNTS:-2000}"
OUT="${OUT:-bench/results/journal-$(date +%Y%m%d-%H%M%S)}"
WORK="$(mktemp -d)"
NODE_PID=""
mkdir -p "$OUT"
trap 'stop_node; rm -rf "$WORK"' EXIT

"$SLUICE" load genesis --accounts "$ACCOUNTS" --seed 1 --out "$WORK/genesis.json"

start() { # journal (true|false) -> NODE_PID, URL, MURL
    local port mport; port="$(free_port)"; mport="$(free_port)"
    URL="http://127.0.0.1:$port"; MURL="http://127.0.0.1:$mport/metrics"
    rm -rf "$WORK/data"
    SLUICE_MEMPOOL__JOURNAL="$1" RUST_LOG=warn "$SLUICE" node --data-dir "$WORK/data" \
        --rpc-addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$mport" --chain-id 31337 \
        --block-time-ms 200 --block-gas-limit 150000000 --genesis "$WORK/genesis.json" \
        >"$OUT/node-$1.log" 2>&1 &
    NODE_PID=$!
    wait_rpc "$URL" 120
}

for round in $(seq 1 "$ROUNDS"); do
    for journal in false true; do
        run="r$round-journal-$journal"
        echo "=== $run ===" >&2
        # A fresh node (and data dir) per load: both use the genesis's
        # senders from nonce 0.
        start "$journal"
        "$SLUICE" load --url "$URL" --label "$run-latency" --accounts "$ACCOUNTS" --seed 1 \
            --tps "$RATE" --duration-s "$DURATION_S" --batch 1 --connections "$CONNECTIONS" \
            --drain-timeout-s 30 --node-pid "$NODE_PID" --metrics-url "$MURL" \
            --json "$OUT/$run-latency.json" 2>"$OUT/$run-latency.progress.log" >"$OUT/$run-latency.txt"
        curl -sf "$MURL" | grep '^sluice_txjournal' >"$OUT/$run-latency.txjournal.metrics" || true
        stop_node
        start "$journal"
        "$SLUICE" load --url "$URL" --label "$run-throughput" --accounts "$ACCOUNTS" --seed 1 \
            --count "$COUNT" --batch 100 --connections 4 --drain-timeout-s 30 \
            --node-pid "$NODE_PID" --metrics-url "$MURL" \
            --json "$OUT/$run-throughput.json" 2>"$OUT/$run-throughput.progress.log" \
            >"$OUT/$run-throughput.txt"
        curl -sf "$MURL" | grep '^sluice_txjournal' >"$OUT/$run-throughput.txjournal.metrics" || true
        stop_node
    done
done

python3 - "$OUT" <<'PY'
import json, sys, glob, os, statistics as st
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "r*-journal-*-*.json"))):
    name = os.path.basename(f)[:-5]
    j = json.load(open(f))
    mode = "on" if "journal-true" in name else "off"
    kind = name.rsplit("-", 1)[1]
    rows.setdefault((kind, mode), []).append(j)
print(f"{'load':<11}{'journal':<8}{'runs':>5}{'p50 ms':>9}{'p99 ms':>9}{'admitted tx/s':>15}{'included tx/s':>15}")
for kind in ["latency", "throughput"]:
    med = {}
    for mode in ["off", "on"]:
        js = rows.get((kind, mode), [])
        if not js:
            continue
        p50 = st.median(j["admission_latency"]["p50_ms"] for j in js)
        p99 = st.median(j["admission_latency"]["p99_ms"] for j in js)
        adm = st.median(j["admitted_tps"] for j in js)
        inc = st.median(j["included_tps"] for j in js)
        med[mode] = (p50, p99, adm, inc)
        print(f"{kind:<11}{mode:<8}{len(js):>5}{p50:>9.2f}{p99:>9.2f}{adm:>15.0f}{inc:>15.0f}")
    if len(med) == 2:
        r = [med["on"][i] / med["off"][i] if med["off"][i] else float("nan") for i in range(4)]
        print(f"{kind:<11}{'on/off':<8}{'':>5}{r[0]:>9.2f}{r[1]:>9.2f}{r[2]:>15.2f}{r[3]:>15.2f}")
PY
