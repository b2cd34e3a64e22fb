#!/usr/bin/env bash
# Bounded disk, measured: two fresh release nodes side by side, one in full
# mode (store.block_retention_blocks = RETENTION, store.history_blocks =
# HISTORY) and one in archive mode, each offered RATE transfers a second for
# DURATION_S seconds between existing accounts (a 100,000-account synthetic
# genesis: the state does not grow, so what grows is history). Every
# SAMPLE_S seconds both data dirs' sizes (du) and each table's bytes
# (sluice_store_table_bytes) are recorded. Prints, per mode: the data dir's
# mean size over the middle and the last third of the run and their ratio
# (goal in full mode: within 5%), its growth per included transfer over the
# last two thirds, and the largest size seen.
#
# Usage: bench/disk.sh
# Environment: RATE (2000), DURATION_S (1800), RETENTION (2000), HISTORY
#   (500), SAMPLE_S (30), OUT (bench/results/disk), SKIP_BUILD=1 to use the
#   existing release binary, DATA (where data dirs go; default a temp dir).
# Everything listens on 127.0.0.1 only; every run is bounded in time.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. "$ROOT/bench/lib.sh"
RATE="${RATE:-2000}"
DURATION_S="${DURATION_S:-1800}"
RETENTION="${RETENTION:-2000}"
HISTORY="${HISTORY:-500}"
SAMPLE_S="${SAMPLE_S:-30}"
OUT="${OUT:-bench/results/disk}"
ACCOUNTS=100000
mkdir -p "$OUT"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
SLUICE="$ROOT/target/release/sluice"

WORK="${DATA:-$(mktemp -d /tmp/sluice-disk.XXXXXX)}"
mkdir -p "$WORK"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    [ -n "${DATA:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

GENESIS="$WORK/genesis.json"
"$SLUICE" load genesis --accounts 1000 --seed 1 --out "$GENESIS"

declare -A URL MURL
start() { # mode
    local port mport
    port="$(free_port)"
    mport="$(free_port)"
    URL[$1]="http://127.0.0.1:$port"
    MURL[$1]="http://127.0.0.1:$mport/metrics"
    rm -rf "$WORK/data-$1"
    SLUICE_STORE__MODE="$1" SLUICE_STORE__BLOCK_RETENTION_BLOCKS="$RETENTION" \
        SLUICE_STORE__HISTORY_BLOCKS="$HISTORY" SLUICE_CHAIN__SYNTHETIC_ACCOUNTS="$ACCOUNTS" \
        RUST_LOG=warn "$SLUICE" node --data-dir "$WORK/data-$1" --rpc-addr "127.0.0.1:$port" \
        --metrics-addr "127.0.0.1:$mport" --chain-id 31337 --block-time-ms 200 \
        --block-gas-limit 150000000 --genesis "$GENESIS" >>"$WORK/sluice-$1.log" 2>&1 &
    PIDS+=($!)
    NODE_PID=$! wait_rpc "${URL[$1]}" 120
}
start full
start archive

echo "=== $RATE tx/s for $DURATION_S s into each of full (retention $RETENTION, history $HISTORY) and archive" >&2
for mode in full archive; do
    "$SLUICE" load --url "${URL[$mode]}" --label "$mode" --workload existing --existing-accounts "$ACCOUNTS" \
        --accounts 1000 --seed 1 --tps "$RATE" --duration-s "$DURATION_S" --txs $((RATE * DURATION_S)) \
        --connections 16 --batch 100 --drain-timeout-s 60 --json "$OUT/load-$mode.json" \
        2>"$OUT/load-$mode.progress.log" >"$OUT/load-$mode.txt" &
    PIDS+=($!)
done
LOADS=("${PIDS[@]:2}")

SAMPLES="$OUT/samples.csv"
echo "t_s,mode,du_bytes,head,oldest_block,tables" >"$SAMPLES"
start_s=$SECONDS
while kill -0 "${LOADS[0]}" 2>/dev/null || kill -0 "${LOADS[1]}" 2>/dev/null; do
    for mode in full archive; do
        m="$(curl -sf -m 5 "${MURL[$mode]}" || true)"
        head="$(grep -m1 '^sluice_pipeline_committed_height ' <<<"$m" | awk '{print $2}')"
        oldest="$(grep -m1 '^sluice_store_oldest_block ' <<<"$m" | awk '{print $2}')"
        tables="$(grep '^sluice_store_table_bytes{' <<<"$m" | sed -E 's/.*table="([^"]+)".* (.*)/\1=\2/' | tr '\n' ' ')"
        echo "$((SECONDS - start_s)),$mode,$(du -sb "$WORK/data-$mode" | cut -f1),${head:-0},${oldest:-0},$tables" >>"$SAMPLES"
    done
    sleep "$SAMPLE_S"
done
for p in "${LOADS[@]}"; do wait "$p" || { echo "a load run failed (see $OUT/load-*.progress.log)" >&2; exit 1; }; done

python3 - "$SAMPLES" "$OUT/load-full.json" "$OUT/load-archive.json" "$RETENTION" "$HISTORY" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
loads = {m: json.load(open(p)) for m, p in (("full", sys.argv[2]), ("archive", sys.argv[3]))}
retention, history = sys.argv[4], sys.argv[5]
print(f"| mode | included tx/s | lost | head | oldest block kept | middle third MiB | last third MiB | last / middle | growth per transfer (last two thirds) | largest MiB |")
print("|---|---|---|---|---|---|---|---|---|---|")
for mode in ("full", "archive"):
    r = [x for x in rows if x["mode"] == mode]
    end = max(int(x["t_s"]) for x in r)
    third = lambda a, b: [int(x["du_bytes"]) for x in r if a * end / 3 < int(x["t_s"]) <= b * end / 3]
    mid, last = third(1, 2), third(2, 3)
    mean = lambda v: sum(v) / max(len(v), 1)
    load = loads[mode]
    # Bytes per transfer: the size's growth from the start of the middle
    # third to the end over the transfers included meanwhile.
    span = [x for x in r if int(x["t_s"]) > end / 3]
    grown = int(span[-1]["du_bytes"]) - int(span[0]["du_bytes"])
    secs = int(span[-1]["t_s"]) - int(span[0]["t_s"])
    per_tx = grown / max(load["included_tps"] * secs, 1)
    assert load["admitted_not_included"] == 0, f"{mode}: {load['admitted_not_included']} admitted transfers lost"
    print(f"| {mode}{f' (retention {retention}, history {history})' if mode == 'full' else ''} | "
          f"{load['included_tps']:,.0f} | {load['admitted_not_included']} | {r[-1]['head']} | {r[-1]['oldest_block']} | "
          f"{mean(mid) / 2**20:,.0f} | {mean(last) / 2**20:,.0f} | {mean(last) / max(mean(mid), 1):.3f} | "
          f"{per_tx:,.0f} B | {max(int(x['du_bytes']) for x in r) / 2**20:,.0f} |")
last = {x["mode"]: x["tables"] for x in rows}
for mode in ("full", "archive"):
    print(f"\n{mode}, tables at the end: {last[mode]}")
PY
