#!/usr/bin/env bash
# Consensus's copy of the chain stays bounded: 4 release validators in full
# mode (store.block_retention_blocks = RETENTION, store.history_blocks =
# HISTORY) on this machine, offered RATE transfers a second for DURATION_S
# seconds (senders on validator 0). Every SAMPLE_S seconds each validator's
# marshal archive bytes (sluice_consensus_archive_bytes), the oldest height
# they keep, and its chain/ and consensus/ dirs' sizes (du) are recorded.
# Prints per validator: the archive bytes' mean over the middle and the last
# third of the run and their ratio (flat: ~1), the largest seen, and the
# data dir's; asserts nothing was lost and all four end on one block hash.
#
# Usage: bench/validators-disk.sh
# Environment: RATE (500), DURATION_S (600), RETENTION (512), HISTORY (128),
#   SAMPLE_S (20), OUT (bench/results/validators-disk), SKIP_BUILD=1.
# Everything listens on 127.0.0.1 only; every run is bounded in time.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
RATE="${RATE:-500}"
DURATION_S="${DURATION_S:-600}"
RETENTION="${RETENTION:-512}"
HISTORY="${HISTORY:-128}"
SAMPLE_S="${SAMPLE_S:-20}"
OUT="${OUT:-bench/results/validators-disk}"
mkdir -p "$OUT"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
SLUICE="$ROOT/target/release/sluice"

WORK="$(mktemp -d /tmp/sluice-validators-disk.XXXXXX)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

BASE="$(python3 -c 'import random; print(random.randrange(20000, 60000))')"
GENESIS="$WORK/genesis.json"
"$SLUICE" load genesis --accounts 1000 --seed 1 --out "$GENESIS"
"$SLUICE" testnet init --validators 4 --dir "$WORK/net" --base-port "$BASE" \
    --genesis "$GENESIS" --dev-accounts 10 --block-time-ms 200 >"$WORK/init.txt"
for i in 0 1 2 3; do
    SLUICE_STORE__BLOCK_RETENTION_BLOCKS="$RETENTION" SLUICE_STORE__HISTORY_BLOCKS="$HISTORY" \
        RUST_LOG=warn "$SLUICE" node --config "$WORK/net/v$i/sluice.toml" >"$WORK/v$i.log" 2>&1 &
    PIDS+=($!)
done
metrics() { curl -sf -m 5 "http://127.0.0.1:$((BASE + 3 * $1 + 2))/metrics" || true; }
for i in 0 1 2 3; do
    deadline=$((SECONDS + 120))
    until metrics "$i" | grep -q '^sluice_consensus_peers_connected 3'; do
        if [ $SECONDS -ge $deadline ]; then echo "validator $i not connected in 120 s" >&2; exit 1; fi
        sleep 0.5
    done
done
data_dir() { grep -m1 '^data_dir' "$WORK/net/v$1/sluice.toml" | sed -E 's/.*"(.*)"/\1/'; }

echo "=== 4 validators, retention $RETENTION: $RATE tx/s for $DURATION_S s" >&2
"$SLUICE" load --url "http://127.0.0.1:$((BASE + 1))" --label validators --workload transfer --accounts 1000 \
    --seed 1 --tps "$RATE" --duration-s "$DURATION_S" --txs $((RATE * DURATION_S)) --connections 8 --batch 50 \
    --drain-timeout-s 120 --json "$OUT/load.json" 2>"$OUT/load.progress.log" >"$OUT/load.txt" &
LOAD=$!
SAMPLES="$OUT/samples.csv"
echo "t_s,validator,committed,archive_bytes,archive_oldest,consensus_du,chain_du" >"$SAMPLES"
start_s=$SECONDS
while kill -0 "$LOAD" 2>/dev/null; do
    for i in 0 1 2 3; do
        m="$(metrics "$i")"
        val() { grep -m1 "^$1 " <<<"$m" | awk '{print $2}'; }
        d="$(data_dir "$i")"
        echo "$((SECONDS - start_s)),$i,$(val sluice_pipeline_committed_height),$(val sluice_consensus_archive_bytes),$(val sluice_consensus_archive_oldest_height),$(du -sb "$d/consensus" | cut -f1),$(du -sb "$d/chain" | cut -f1)" >>"$SAMPLES"
    done
    sleep "$SAMPLE_S"
done
wait "$LOAD" || { echo "the load run failed (see $OUT/load.progress.log)" >&2; exit 1; }
# All four on one block hash, at a height every one has and keeps (block
# 16 is long pruned).
rpc() { curl -sf -m 5 -H 'content-type: application/json' \
    --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$2\",\"params\":$3}" "http://127.0.0.1:$((BASE + 3 * $1 + 1))"; }
CHECK="$(for i in 0 1 2 3; do rpc "$i" eth_blockNumber '[]' | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["result"], 16))'; done | sort -n | head -1)"
CHECK=$((CHECK - 5))
for i in 0 1 2 3; do
    rpc "$i" eth_getBlockByNumber "[\"$(printf '0x%x' "$CHECK")\",false]" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["hash"])'
done | sort -u | wc -l | grep -qx 1 || { echo "validators disagree on block $CHECK" >&2; exit 1; }

python3 - "$SAMPLES" "$OUT/load.json" "$RETENTION" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
load = json.load(open(sys.argv[2]))
assert load["admitted_not_included"] == 0, f"{load['admitted_not_included']} admitted transfers lost"
f = lambda x, k: float(x[k] or 0)
end = max(int(x["t_s"]) for x in rows)
print(f"included {load['included_tps']:,.0f} tx/s, lost {load['admitted_not_included']}, retention {sys.argv[3]} blocks")
print()
print("| validator | committed at end | archive oldest height | archive MiB, middle / last third | last / middle | archive MiB, largest | consensus dir MiB, largest | chain dir MiB, last third |")
print("|---|---|---|---|---|---|---|---|")
for v in "0123":
    r = [x for x in rows if x["validator"] == v]
    third = lambda a, b, k: [f(x, k) for x in r if a * end / 3 < int(x["t_s"]) <= b * end / 3]
    mean = lambda s: sum(s) / max(len(s), 1)
    mid, last = mean(third(1, 2, "archive_bytes")), mean(third(2, 3, "archive_bytes"))
    print(f"| v{v} | {r[-1]['committed']} | {r[-1]['archive_oldest']} | {mid / 2**20:,.1f} / {last / 2**20:,.1f} | "
          f"{last / max(mid, 1):.2f} | {max(f(x, 'archive_bytes') for x in r) / 2**20:,.1f} | "
          f"{max(f(x, 'consensus_du') for x in r) / 2**20:,.1f} | {mean(third(2, 3, 'chain_du')) / 2**20:,.0f} |")
PY
