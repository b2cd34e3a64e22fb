#!/usr/bin/env bash
# State beyond memory: the same transfer load against a node whose state
# holds SMALL accounts and one whose state holds LARGE (default 10,000 and
# 10,000,000 synthetic accounts funded at genesis, `chain.synthetic_accounts`),
# one after the other in one run. Each transfer sends 1 wei to a random
# existing synthetic account, so the state does not grow and reads spread
# over all of it. For each size it records: genesis creation time, restart
# time (SIGTERM, start again, until JSON-RPC answers), included TPS, peak
# RSS, database size; then the LARGE/SMALL TPS ratio.
#
# Usage: bench/state-size.sh
# Environment: SMALL (10000), LARGE (10000000), RATE (offered tx/s, 30000),
#   DURATION_S (30), ACCOUNTS (senders, 10000), CONNECTIONS (4), BATCH (100),
#   OUT (bench/results/state-size), SKIP_BUILD=1 to use the existing binary,
#   DATA (where the data dirs go; default a temp dir under /tmp).
# Everything listens on 127.0.0.1 only; every run is bounded in time.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
. "$ROOT/bench/lib.sh"
SMALL="${SMALL:-10000}"
LARGE="${LARGE:-10000000}"
RATE="${RATE:-30000}"
DURATION_S="${DURATION_S:-30}"
ACCOUNTS="${ACCOUNTS:-10000}"
CONNECTIONS="${CONNECTIONS:-4}"
BATCH="${BATCH:-100}"
OUT="${OUT:-bench/results/state-size}"
mkdir -p "$OUT"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --bin sluice >&2
fi
SLUICE="$ROOT/target/release/sluice"

WORK="${DATA:-$(mktemp -d /tmp/sluice-state-size.XXXXXX)}"
mkdir -p "$WORK"
NODE_PID=""
cleanup() {
    stop_node
    [ -n "${DATA:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

GENESIS="$WORK/genesis.json"
"$SLUICE" load genesis --accounts "$ACCOUNTS" --seed 1 --out "$GENESIS"

start_node() { # synthetic accounts, data dir -> sets NODE_PID, URL, MURL
    local port mport
    port="$(free_port)"
    mport="$(free_port)"
    URL="http://127.0.0.1:$port"
    MURL="http://127.0.0.1:$mport/metrics"
    SLUICE_CHAIN__SYNTHETIC_ACCOUNTS="$1" RUST_LOG=warn "$SLUICE" node --data-dir "$2" \
        --rpc-addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$mport" --chain-id 31337 \
        --block-time-ms 200 --block-gas-limit 150000000 --genesis "$GENESIS" >>"$WORK/sluice-$1.log" 2>&1 &
    NODE_PID=$!
}

now() { python3 -c 'import time; print(time.monotonic())'; }

for n in "$SMALL" "$LARGE"; do
    data="$WORK/data-$n"
    rm -rf "$data"
    echo "=== $n synthetic accounts: genesis" >&2
    t0="$(now)"
    start_node "$n" "$data"
    wait_rpc "$URL" 1200
    t1="$(now)"
    stop_node
    echo "=== $n: restart" >&2
    t2="$(now)"
    start_node "$n" "$data"
    wait_rpc "$URL" 600
    t3="$(now)"
    python3 -c "print(f'{$t1-$t0:.2f} {$t3-$t2:.2f}')" >"$OUT/times-$n.txt"
    echo "=== $n: load at $RATE tx/s for $DURATION_S s" >&2
    "$SLUICE" load --url "$URL" --label "state-$n" --workload existing --existing-accounts "$n" \
        --accounts "$ACCOUNTS" --seed 1 --tps "$RATE" --duration-s "$DURATION_S" \
        --connections "$CONNECTIONS" --batch "$BATCH" --drain-timeout-s 30 \
        --node-pid "$NODE_PID" --metrics-url "$MURL" \
        --json "$OUT/state-$n.json" 2>"$OUT/state-$n.progress.log" | tee "$OUT/state-$n.txt" >&2
    curl -sf "$MURL" | grep -E '^sluice_state_cache' >"$OUT/cache-$n.txt" || true
    du -sb "$data" | cut -f1 >"$OUT/disk-$n.txt"
    stop_node
done

python3 - "$OUT" "$SMALL" "$LARGE" <<'EOF'
import json, sys
out, sizes = sys.argv[1], sys.argv[2:]
print("| synthetic accounts | genesis s | restart s | offered | included tx/s | lost | peak RSS MiB | data dir MiB |")
print("|---|---|---|---|---|---|---|---|")
tps = {}
for n in sizes:
    s = json.load(open(f"{out}/state-{n}.json"))
    g, r = open(f"{out}/times-{n}.txt").read().split()
    disk = int(open(f"{out}/disk-{n}.txt").read()) / 2**20
    node = s.get("node") or {}
    tps[n] = s["included_tps"]
    print(f"| {int(n):,} | {g} | {r} | {s['offered_tps']:.0f} | {s['included_tps']:.0f} "
          f"| {s['admitted_not_included']} | {node.get('peak_rss_mib', 0):.0f} | {disk:.0f} |")
small, large = sizes
if tps[small] > 0:
    print(f"\nincluded TPS {int(large):,} / {int(small):,} accounts: {tps[large] / tps[small]:.2f}x")
EOF
