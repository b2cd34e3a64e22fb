#!/usr/bin/env bash
# Client compatibility suite: foundry's cast, anvil (forking sluice; traces compared with sluice's) and forge (script --broadcast), ethers v6, viem (also in headless chromium) and web3.py
# drive a real sluice node, unchanged, over HTTP and WebSocket.
#
#   bash tests/clients/run.sh            build sluice (debug), install the
#                                        pinned clients if needed, run all
#   SUITE_SLUICE_BIN=path/to/sluice bash ...  use that binary, do not build
#   (not SLUICE_*: the node reads every SLUICE_* variable as configuration)
#   bash tests/clients/run.sh ethers     only some clients (cast forge traces differential schema
#                                        ethers viem web3py artifact)
#
# Needs node (>= 20), npm, python3 (>= 3.9, with venv), pip and chromium
# (/usr/bin/chromium, or SUITE_CHROMIUM); everything
# else is installed from the pinned package-lock.json and requirements.txt
# into node_modules/ and .venv/ here (git-ignored), and reinstalled only when
# a lock file changes. Each client gets a fresh node (its own data dir and
# ports), stopped with SIGTERM afterwards: a clean exit is part of the check.
#
# Prints one PASS/FAIL line per flow and ends with "N passed, N failed";
# exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")"
HERE=$(pwd)
ROOT=$(cd ../.. && pwd)
CLIENTS=("$@")
[ ${#CLIENTS[@]} -eq 0 ] && CLIENTS=(artifact cast forge traces differential schema ethers viem browser web3py)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-clients.XXXXXX")
RESULTS="$WORK/results"
: >"$RESULTS"
NODE_PID=""
cleanup() {
  if [ -n "$NODE_PID" ]; then kill "$NODE_PID" 2>/dev/null; wait "$NODE_PID" 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

say() { printf '== %s\n' "$*"; }
record() { printf '%s %s\n' "$1" "$2" >>"$RESULTS"; printf '%-4s  %s\n' "$1" "$2"; }
stamp() { sha256sum "$1" | cut -d' ' -f1; }

# --- the node binary ----------------------------------------------------------
if [ -z "${SUITE_SLUICE_BIN:-}" ]; then
  say "building sluice (cargo build --bin sluice)"
  (cd "$ROOT" && cargo build --quiet --bin sluice) || { echo "cargo build failed"; echo "0 passed, 1 failed"; exit 1; }
  SUITE_SLUICE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/sluice"
fi
[ -x "$SUITE_SLUICE_BIN" ] || { echo "no sluice binary at $SUITE_SLUICE_BIN"; echo "0 passed, 1 failed"; exit 1; }

# --- pinned clients -------------------------------------------------------------
install_js() {
  if [ "$(cat node_modules/.sluice-lock 2>/dev/null)" != "$(stamp package-lock.json)" ]; then
    say "npm ci (package-lock.json)"
    npm ci --no-audit --no-fund --loglevel=error || return 1
    stamp package-lock.json >node_modules/.sluice-lock
  fi
}
install_py() {
  if [ "$(cat .venv/.sluice-lock 2>/dev/null)" != "$(stamp requirements.txt)" ]; then
    say "python3 -m venv .venv && pip install -r requirements.txt"
    rm -rf .venv
    python3 -m venv .venv || return 1
    # Every package is pinned in requirements.txt, transitive ones too:
    # --no-deps installs exactly that set and `pip check` proves it complete.
    .venv/bin/pip install --quiet --disable-pip-version-check --no-deps -r requirements.txt || return 1
    .venv/bin/pip check --disable-pip-version-check || return 1
    stamp requirements.txt >.venv/.sluice-lock
  fi
}
need_js=0
need_py=0
for c in "${CLIENTS[@]}"; do
  case "$c" in
    artifact | cast | forge | traces | differential | schema | ethers | viem | browser) need_js=1 ;;
    web3py) need_py=1 ;;
    *) echo "unknown client $c (cast forge traces differential schema ethers viem browser web3py artifact)"; exit 2 ;;
  esac
done
if [ $need_js = 1 ] && ! install_js; then record FAIL "install: npm ci"; need_js=failed; fi
if [ $need_py = 1 ] && ! install_py; then record FAIL "install: pip install -r requirements.txt"; need_py=failed; fi

# --- one node per client -----------------------------------------------------
NODE_LOG=""
start_node() {
  local dir="$WORK/$1"
  mkdir -p "$dir"
  NODE_LOG="$dir/node.log"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$SUITE_SLUICE_BIN" node --rpc-addr 127.0.0.1:0 --metrics-addr "127.0.0.1:$port" \
    --data-dir "$dir/data" --block-time-ms 100 >"$dir/stdout" 2>"$NODE_LOG" &
  NODE_PID=$!
  local i
  for i in $(seq 1 300); do
    SUITE_RPC_URL=$(sed -n 's/^sluice: JSON-RPC listening on //p' "$dir/stdout")
    if [ -n "$SUITE_RPC_URL" ]; then export SUITE_RPC_URL; return 0; fi
    kill -0 "$NODE_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "sluice did not start; log:"; tail -20 "$NODE_LOG"
  NODE_PID=""
  return 1
}
stop_node() {
  [ -n "$NODE_PID" ] || return 0
  kill -TERM "$NODE_PID"
  local status=0
  wait "$NODE_PID" || status=$?
  NODE_PID=""
  if [ $status -ne 0 ]; then
    record FAIL "$1: node exits cleanly on SIGTERM (exit $status)"
    tail -20 "$NODE_LOG"
  else
    record PASS "$1: node exits cleanly on SIGTERM"
  fi
}

# Parses node's TAP output into PASS/FAIL lines (top-level tests only).
tap_results() {
  local n=0 line
  while IFS= read -r line; do
    case "$line" in
      "ok "*) record PASS "${line#ok * - }"; n=$((n + 1)) ;;
      "not ok "*) record FAIL "${line#not ok * - }"; n=$((n + 1)) ;;
    esac
  done <"$1"
  [ $n -gt 0 ]
}

run_js() {
  local name=$1 file=$2
  if [ "$need_js" = failed ]; then record FAIL "$name: not run (install failed)"; return; fi
  say "$name ($file)"
  if ! start_node "$name"; then record FAIL "$name: node did not start"; return; fi
  timeout 300 node --test --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$WORK/$name.tap" "$file"
  local status=$?
  tap_results "$WORK/$name.tap" || record FAIL "$name: no test ran (exit $status)"
  if [ $status -ne 0 ] && ! grep -q '^not ok' "$WORK/$name.tap"; then
    record FAIL "$name: runner exited $status"
  fi
  if grep -q '^not ok' "$WORK/$name.tap"; then echo "-- node log (tail)"; tail -15 "$NODE_LOG"; fi
  stop_node "$name"
}

run_py() {
  local name=web3py
  if [ "$need_py" = failed ]; then record FAIL "$name: not run (install failed)"; return; fi
  say "$name (test_web3.py)"
  if ! start_node "$name"; then record FAIL "$name: node did not start"; return; fi
  timeout 300 .venv/bin/python -m pytest -q -rA -p no:cacheprovider test_web3.py | tee "$WORK/$name.out"
  local status=${PIPESTATUS[0]} n=0 line
  while IFS= read -r line; do
    case "$line" in
      "PASSED "*) record PASS "web3.py: ${line#PASSED test_web3.py::}"; n=$((n + 1)) ;;
      "FAILED "* | "ERROR "*) local t=${line#* test_web3.py::}; record FAIL "web3.py: ${t%% - *}"; n=$((n + 1)) ;;
    esac
  done <"$WORK/$name.out"
  [ $n -gt 0 ] || record FAIL "$name: no test ran (pytest exit $status)"
  if [ $status -ne 0 ]; then echo "-- node log (tail)"; tail -15 "$NODE_LOG"; fi
  stop_node "$name"
}

START=$(date +%s)
for c in "${CLIENTS[@]}"; do
  case "$c" in
    artifact)
      if [ "$need_js" = failed ]; then record FAIL "solc: artifact check not run (install failed)"; continue; fi
      say "artifact (recompile contracts/SluiceToken.sol with solcjs)"
      if node compile.mjs --check; then
        record PASS "solc: contracts/SluiceToken.json matches a fresh compile of SluiceToken.sol"
      else
        record FAIL "solc: contracts/SluiceToken.json matches a fresh compile of SluiceToken.sol"
      fi
      ;;
    cast) run_js cast cast.test.mjs ;;
    forge) run_js forge forge.test.mjs ;;
    traces) run_js traces traces.test.mjs ;;
    differential) run_js differential differential.test.mjs ;;
    schema) run_js schema schema.test.mjs ;;
    ethers) run_js ethers ethers.test.mjs ;;
    viem) run_js viem viem.test.mjs ;;
    browser) run_js browser browser.test.mjs ;;
    web3py) run_py ;;
  esac
done

passed=$(grep -c '^PASS' "$RESULTS")
failed=$(grep -c '^FAIL' "$RESULTS")
echo
say "client suite: $(($(date +%s) - START)) s"
grep '^FAIL' "$RESULTS" | sed 's/^/  /'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
