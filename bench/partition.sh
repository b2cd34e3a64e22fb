#!/usr/bin/env bash
# A validator cut off from the others for minutes under load, then healed:
# how long until it is at the others' head. Four validators, each in its own
# network namespace (needs root), p2p links on one bridge and JSON-RPC on
# another; the cut moves validator 3's p2p link to a second bridge (total,
# both ways; its open connections go silent). The load (`sluice load`,
# transfers from ACCOUNTS senders at LOAD_TPS) runs inside validator 0's
# namespace against its loopback address, from before the cut until
# SETTLE_S after the heal; nothing it had accepted may be lost.
#
# Catch-up replays what the network did while the validator was away:
# fetching the finalized blocks from peers (marshal backfill) and executing
# and committing them. With the network adding L tx/s and the validator able
# to execute C tx/s while it also keeps up, catch-up takes about
# ISOLATE_S * L / (C - L): this prints the blocks and transactions it was
# behind and the time, so the rate it caught up at can be read off.
#
# Usage: sudo bench/partition.sh
# Environment: ISOLATE_S (300), LOAD_TPS (200), ACCOUNTS (200),
#   SETTLE_S (30), BLOCK_TIME_MS (200), OUT (bench/results/partition),
#   SKIP_BUILD=1 (use target/release/sluice as built).
# Everything is removed on exit: namespaces, links, bridges, processes.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ISOLATE_S="${ISOLATE_S:-300}"
LOAD_TPS="${LOAD_TPS:-200}"
ACCOUNTS="${ACCOUNTS:-200}"
SETTLE_S="${SETTLE_S:-30}"
BLOCK_TIME_MS="${BLOCK_TIME_MS:-200}"
OUT="${OUT:-bench/results/partition}"
mkdir -p "$OUT"

if [ "$(id -u)" -ne 0 ]; then echo "needs root (network namespaces)" >&2; exit 1; fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
SLUICE="$ROOT/target/release/sluice"

TAG="$(printf '%04x' $(($$ & 0xffff)))"
NET=$((150 + $$ % 50))
WORK="$(mktemp -d /tmp/sluice-partition.XXXXXX)"
ns() { echo "slb-$TAG-$1"; }
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    sleep 1
    for i in 0 1 2 3; do
        for pid in $(ip netns pids "$(ns "$i")" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$(ns "$i")" 2>/dev/null || true
        ip link del "sb${TAG}p$i" 2>/dev/null || true
        ip link del "sb${TAG}r$i" 2>/dev/null || true
    done
    for b in A B R; do ip link del "sb${TAG}$b" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

for b in A B R; do ip link add "sb${TAG}$b" type bridge; ip link set "sb${TAG}$b" up; done
ip addr add "10.$NET.2.254/24" dev "sb${TAG}R"
for i in 0 1 2 3; do
    ip netns add "$(ns "$i")"
    ip link add "sb${TAG}p$i" type veth peer name p2p netns "$(ns "$i")"
    ip link add "sb${TAG}r$i" type veth peer name rpc netns "$(ns "$i")"
    ip link set "sb${TAG}p$i" master "sb${TAG}A" up
    ip link set "sb${TAG}r$i" master "sb${TAG}R" up
    ip -n "$(ns "$i")" addr add "10.$NET.1.$((i + 1))/24" dev p2p
    ip -n "$(ns "$i")" addr add "10.$NET.2.$((i + 1))/24" dev rpc
    for d in p2p rpc lo; do ip -n "$(ns "$i")" link set "$d" up; done
done

GENESIS="$WORK/genesis.json"
"$SLUICE" load genesis --accounts "$ACCOUNTS" --seed 1 --out "$GENESIS"
"$SLUICE" testnet init --validators 4 --dir "$WORK/net" --genesis "$GENESIS" --dev-accounts 10 \
    --block-time-ms "$BLOCK_TIME_MS" --hosts "10.$NET.1.1,10.$NET.1.2,10.$NET.1.3,10.$NET.1.4" >/dev/null
RPC=()
METRICS=()
for i in 0 1 2 3; do
    rpc_port=$((26651 + 3 * i))
    # JSON-RPC and metrics on every address of the namespace: the host
    # reaches them over the RPC bridge, the load over loopback.
    sed -i "s/^addr = \"10\.$NET\.1\.$((i + 1)):/addr = \"0.0.0.0:/" "$WORK/net/v$i/sluice.toml"
    RUST_LOG=info ip netns exec "$(ns "$i")" "$SLUICE" node --config "$WORK/net/v$i/sluice.toml" \
        >"$WORK/v$i.log" 2>&1 &
    PIDS+=($!)
    RPC+=("http://10.$NET.2.$((i + 1)):$rpc_port")
    METRICS+=("http://10.$NET.2.$((i + 1)):$((rpc_port + 1))/metrics")
done

rpc() { # url method params
    curl -sf -m 5 -H 'content-type: application/json' \
        --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$2\",\"params\":$3}" "$1"
}
height() { rpc "$1" eth_blockNumber '[]' | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["result"],16))'; }

for i in 0 1 2 3; do
    deadline=$((SECONDS + 120))
    until curl -sf -m 2 "${METRICS[$i]}" | grep -q '^sluice_consensus_peers_connected 3'; do
        if [ $SECONDS -ge $deadline ]; then echo "validator $i not connected in 120 s" >&2; tail -20 "$WORK/v$i.log" >&2; exit 1; fi
        sleep 0.5
    done
done
echo "=== 4 validators up; load $LOAD_TPS tx/s on validator 0; validator 3 cut off for $ISOLATE_S s ===" >&2

LOAD_S=$((20 + ISOLATE_S + SETTLE_S))
ip netns exec "$(ns 0)" "$SLUICE" load --url "http://127.0.0.1:26651" --label partition --workload transfer \
    --accounts "$ACCOUNTS" --seed 1 --tps "$LOAD_TPS" --duration-s "$LOAD_S" --batch 20 --connections 2 \
    --drain-timeout-s 120 --json "$OUT/load.json" 2>"$OUT/load.progress.log" >"$OUT/load.txt" &
LOAD_PID=$!

sleep 20
ip link set "sb${TAG}p3" master "sb${TAG}B"
cut_at=$SECONDS
sleep "$ISOLATE_S"
head="$(height "${RPC[0]}")"
behind_at="$(height "${RPC[3]}")"
txs_behind="$(python3 - "${RPC[0]}" "$behind_at" "$head" <<'EOF'
import json, sys, urllib.request
url, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 0
for h in range(lo + 1, hi + 1):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockTransactionCountByNumber", "params": [hex(h)]}).encode()
    req = urllib.request.Request(url, body, {"content-type": "application/json"})
    n += int(json.load(urllib.request.urlopen(req, timeout=5))["result"], 16)
print(n)
EOF
)"
ip link set "sb${TAG}p3" master "sb${TAG}A"
healed=$(date +%s.%N)
until [ "$(height "${RPC[3]}")" -ge "$head" ]; do
    if [ "$(python3 -c "import time; print(int(time.time() - $healed))")" -ge 600 ]; then
        echo "FAIL: validator 3 not at the head $head within 600 s of the heal" >&2; exit 1
    fi
    sleep 0.1
done
took="$(python3 -c "import time; print(f'{time.time() - $healed:.2f}')")"
echo "validator 3 was $((head - behind_at)) blocks ($txs_behind transactions) behind after $ISOLATE_S s; at the head $took s after the heal" >&2

wait "$LOAD_PID"
cat "$OUT/load.txt" >&2
python3 - "$OUT/load.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
if d["admitted_not_included"] != 0 or not d["accounting_balanced"] or d["hash_mismatches"]:
    sys.exit(f"FAIL: the load lost {d['admitted_not_included']} transactions (or its accounting does not balance)")
EOF
sleep 2
top=$(for u in "${RPC[@]}"; do height "$u"; done | sort -n | head -1)
hex=$(printf '0x%x' "$top")
ids=$(for u in "${RPC[@]}"; do rpc "$u" eth_getBlockByNumber "[\"$hex\",false]" | python3 -c 'import json,sys; b=json.load(sys.stdin)["result"]; print(b["hash"], b["stateRoot"])'; done | sort -u | wc -l)
if [ "$ids" != 1 ]; then echo "FAIL: validators disagree at height $top" >&2; exit 1; fi
for i in 0 1 2 3; do curl -sf "${METRICS[$i]}" >"$OUT/v$i.metrics" || true; done
grep -h "catching up\|caught up\|validators connected" "$WORK/v3.log" | tail -6 >"$OUT/v3.catchup.log" || true
echo "| isolated | behind at the heal | at the head after | catch-up rate |"
echo "|---|---|---|---|"
python3 -c "
b, t, s = $((head - behind_at)), $txs_behind, $took
print(f'| $ISOLATE_S s at $LOAD_TPS tx/s | {b} blocks, {t} txs | {s:.1f} s | {b / s:.0f} blocks/s, {t / s:.0f} tx/s |')"
