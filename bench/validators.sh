#!/usr/bin/env bash
# Side by side in one run: the same pre-signed transfers from the same
# senders against one sluice node, then against 4 validators (4 processes on
# this machine's cores, so every transaction's sender is recovered by every
# validator, and every block executed and committed 4 times). Every sender
# talks to validator 0 only (SPREAD=1: senders spread over the four URLs);
# the validators pass transactions on to each other, so every leader
# proposes them. Inclusion is measured on validator 0. Then the network
# again at half the rate it just reached, for HALF_S seconds: admission and
# inclusion latency below saturation.
#
# Prints each run's load summary, then one table: included TPS, the ratio
# network / single node, CPU per included transaction per process,
# latencies at half rate, and the network's notarized-to-finalized latency
# p50/p99 (from validator 0's histogram). Every run asserts nothing was
# lost (the load tool's own check) and that all validators end on the same
# block hash and stateRoot.
#
# Usage: bench/validators.sh
# Environment: TXS (40000), ACCOUNTS (1000), CONNECTIONS (4), BATCH (100),
#   BLOCK_TIME_MS (200), SPREAD (0), HALF_S (20),
#   OUT (bench/results/validators), SKIP_BUILD=1.
# Everything listens on 127.0.0.1 only; every run is bounded in time.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
TXS="${TXS:-40000}"
ACCOUNTS="${ACCOUNTS:-1000}"
CONNECTIONS="${CONNECTIONS:-4}"
BATCH="${BATCH:-100}"
BLOCK_TIME_MS="${BLOCK_TIME_MS:-200}"
SPREAD="${SPREAD:-0}"
HALF_S="${HALF_S:-20}"
OUT="${OUT:-bench/results/validators}"
mkdir -p "$OUT"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
SLUICE="$ROOT/target/release/sluice"

WORK="$(mktemp -d /tmp/sluice-validators.XXXXXX)"
PIDS=()
stop_all() {
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
}
cleanup() { stop_all; rm -rf "$WORK"; }
trap cleanup EXIT

free_base() { # a base port with 12 free ports above it
    python3 - <<'EOF'
import random, socket
for _ in range(200):
    base = random.randrange(20000, 60000)
    socks = []
    try:
        for k in range(12):
            s = socket.socket(); s.bind(("127.0.0.1", base + k)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
EOF
}

rpc() { # url method params
    curl -sf -m 5 -H 'content-type: application/json' \
        --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$2\",\"params\":$3}" "$1"
}

wait_rpc() { # url seconds
    local deadline=$((SECONDS + $2))
    until rpc "$1" eth_blockNumber '[]' >/dev/null; do
        if [ $SECONDS -ge $deadline ]; then echo "node at $1 did not answer in $2 s" >&2; return 1; fi
        sleep 0.2
    done
}

cpu_ticks() { # pid -> utime+stime in clock ticks
    awk '{print $14 + $15}' "/proc/$1/stat"
}

GENESIS="$WORK/genesis.json"
"$SLUICE" load genesis --accounts "$ACCOUNTS" --seed 1 --out "$GENESIS"
LOAD_ARGS=(--workload transfer --accounts "$ACCOUNTS" --seed 1 --count "$TXS" --batch "$BATCH"
    --connections "$CONNECTIONS" --drain-timeout-s 120)

# --- one node
BASE="$(free_base)"
URL="http://127.0.0.1:$((BASE + 1))"
RUST_LOG=warn "$SLUICE" node --data-dir "$WORK/single" --rpc-addr "127.0.0.1:$((BASE + 1))" \
    --metrics-addr "127.0.0.1:$((BASE + 2))" --block-time-ms "$BLOCK_TIME_MS" \
    --genesis "$GENESIS" >"$WORK/single.log" 2>&1 &
PIDS=($!)
wait_rpc "$URL" 120
t0="$(cpu_ticks "${PIDS[0]}")"
echo "=== one node: $TXS transfers from $ACCOUNTS senders ===" >&2
"$SLUICE" load --url "$URL" --label single "${LOAD_ARGS[@]}" --node-pid "${PIDS[0]}" \
    --json "$OUT/single.json" 2>"$OUT/single.progress.log" | tee "$OUT/single.txt" >&2
single_cpu=$(( $(cpu_ticks "${PIDS[0]}") - t0 ))
stop_all

# --- four validators
BASE="$(free_base)"
"$SLUICE" testnet init --validators 4 --dir "$WORK/net" --base-port "$BASE" \
    --genesis "$GENESIS" --dev-accounts 10 --block-time-ms "$BLOCK_TIME_MS" >"$WORK/init.txt"
URLS=()
for i in 0 1 2 3; do
    RUST_LOG=warn "$SLUICE" node --config "$WORK/net/v$i/sluice.toml" >"$WORK/v$i.log" 2>&1 &
    PIDS+=($!)
    URLS+=("http://127.0.0.1:$((BASE + 3 * i + 1))")
done
for u in "${URLS[@]}"; do wait_rpc "$u" 120; done
# Every validator connected to the three others before any load: a batch
# sent to a peer not yet connected is dropped (p2p sends are unreliable),
# and the gaps it leaves make that peer refuse the senders' later nonces.
for i in 0 1 2 3; do
    deadline=$((SECONDS + 60))
    until curl -sf "http://127.0.0.1:$((BASE + 3 * i + 2))/metrics" | grep -q '^sluice_consensus_peers_connected 3'; do
        if [ $SECONDS -ge $deadline ]; then echo "validator $i not connected to the others in 60 s" >&2; exit 1; fi
        sleep 0.2
    done
done
T0=()
for pid in "${PIDS[@]}"; do T0+=("$(cpu_ticks "$pid")"); done
if [ "$SPREAD" = 1 ]; then
    URL_LIST="$(IFS=,; echo "${URLS[*]}")"
    echo "=== 4 validators: the same $TXS transfers, senders spread over 4 URLs ===" >&2
else
    URL_LIST="${URLS[0]}"
    echo "=== 4 validators: the same $TXS transfers, every sender on validator 0 ===" >&2
fi
"$SLUICE" load --url "$URL_LIST" --label validators "${LOAD_ARGS[@]}" --node-pid "${PIDS[0]}" \
    --metrics-url "http://127.0.0.1:$((BASE + 2))/metrics" \
    --json "$OUT/validators.json" 2>"$OUT/validators.progress.log" | tee "$OUT/validators.txt" >&2
CPU=()
for k in 0 1 2 3; do CPU+=($(( $(cpu_ticks "${PIDS[$k]}") - ${T0[$k]} ))); done
for i in 0 1 2 3; do curl -sf "http://127.0.0.1:$((BASE + 3 * i + 2))/metrics" >"$OUT/v$i.metrics"; done

# Below saturation: half the rate the network just reached.
HALF_TPS="$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["included_tps"] / 2))' "$OUT/validators.json")"
echo "=== 4 validators at half that rate: $HALF_TPS tx/s for $HALF_S s ===" >&2
"$SLUICE" load --url "$URL_LIST" --label validators-half --workload transfer --accounts "$ACCOUNTS" --seed 1 \
    --tps "$HALF_TPS" --duration-s "$HALF_S" --batch "$BATCH" --connections "$CONNECTIONS" \
    --drain-timeout-s 120 --json "$OUT/validators-half.json" \
    2>"$OUT/validators-half.progress.log" | tee "$OUT/validators-half.txt" >&2

# Agreement: every validator's head block is the same block.
sleep 2
top=$(for u in "${URLS[@]}"; do rpc "$u" eth_blockNumber '[]' | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["result"],16))'; done | sort -n | head -1)
hex=$(printf '0x%x' "$top")
ids=$(for u in "${URLS[@]}"; do rpc "$u" eth_getBlockByNumber "[\"$hex\",false]" | python3 -c 'import json,sys; b=json.load(sys.stdin)["result"]; print(b["hash"], b["stateRoot"])'; done | sort -u | wc -l)
if [ "$ids" != 1 ]; then echo "FAIL: validators disagree at height $top" >&2; exit 1; fi
echo "all 4 validators agree at height $top" >&2
stop_all

TICKS="$(getconf CLK_TCK)"
python3 - "$OUT" "$TICKS" "$single_cpu" "${CPU[@]}" <<'EOF'
import json, sys
out, ticks, single_cpu, cpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(c) for c in sys.argv[4:]]
s = json.load(open(f"{out}/single.json"))
v = json.load(open(f"{out}/validators.json"))
h = json.load(open(f"{out}/validators-half.json"))
def get(d, *keys):
    for k in keys:
        if k in d: return d[k]
    raise KeyError(f"none of {keys} in {sorted(d)}")
def included(d): return get(d, "included")
def tps(d): return get(d, "included_tps")
for name, d in (("single", s), ("validators", v), ("validators at half rate", h)):
    lost = get(d, "admitted_not_included")
    if lost != 0 or not d["accounting_balanced"] or d["hash_mismatches"]:
        sys.exit(f"FAIL: {name} lost {lost} transactions (or its accounting does not balance)")
    if included(d) != d["scheduled"] - d["dropped"] - d["rejected"]:
        sys.exit(f"FAIL: {name}: not every admitted transaction was included")
# Notarized-to-finalized latency from validator 0's histogram.
buckets = []
for line in open(f"{out}/v0.metrics"):
    if line.startswith("sluice_consensus_notarized_to_finalized_seconds_bucket"):
        le = line.split('le="')[1].split('"')[0]
        buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
def q(p):
    total = buckets[-1][1] if buckets else 0
    for le, c in buckets:
        if total and c >= p * total: return le
    return float("nan")
us = lambda ticks_used, n: 1e6 * ticks_used / ticks / max(n, 1)
print("| run | included | included tx/s | CPU per included tx, per process |")
print("|---|---|---|---|")
print(f"| one node | {included(s)} | {tps(s):.0f} | {us(single_cpu, included(s)):.0f} us |")
per = ", ".join(f"v{i} {us(c, included(v)):.0f} us" for i, c in enumerate(cpus))
print(f"| 4 validators | {included(v)} | {tps(v):.0f} | {per} (sum {us(sum(cpus), included(v)):.0f} us) |")
print(f"\nnetwork / one node: {tps(v) / tps(s):.2f}x")
lat = lambda l: f"p50 {l['p50_ms']:.0f} ms, p99 {l['p99_ms']:.0f} ms"
print(f"at half rate ({tps(h):.0f} tx/s included): admission {lat(h['admission_latency'])}; "
      f"inclusion {lat(h['inclusion_latency'])}")
print(f"notarized -> finalized (v0, histogram bucket bounds): p50 <= {q(0.5)} s, p99 <= {q(0.99)} s")
EOF
