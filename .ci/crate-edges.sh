#!/usr/bin/env bash
# Fails when a crate depends (directly or not, normal dependencies) on a
# sluice crate it must not: crates point one way (ARCHITECTURE.md).
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
# crate | sluice crates it must not depend on
while read -r crate forbidden; do
  deps=$(cargo tree --offline -q -e normal -p "$crate" --prefix none 2>/dev/null | awk '{print $1}' | sort -u)
  for f in ${forbidden//,/ }; do
    if grep -qx "$f" <<<"$deps"; then
      echo "crate edge broken: $crate depends on $f"
      fail=1
    fi
  done
done <<'EDGES'
sluice-messages sluice-state,sluice-config,sluice-store,sluice-executor,sluice-txpool,sluice-rpc,sluice-actors,sluice-load,sluice-consensus
sluice-state sluice-messages,sluice-config,sluice-store,sluice-executor,sluice-txpool,sluice-actors,sluice-load,sluice-consensus
sluice-executor sluice-store,sluice-txpool,sluice-rpc,sluice-actors,sluice-config,sluice-load,sluice-consensus
sluice-store sluice-executor,sluice-txpool,sluice-rpc,sluice-actors,sluice-load,sluice-consensus
sluice-txpool sluice-rpc,sluice-actors,sluice-load,sluice-consensus
sluice-load sluice-actors,sluice-consensus,sluice-store,sluice-executor
sluice-rpc sluice-actors,sluice-consensus,sluice-load
sluice-actors sluice-consensus,sluice-load
EDGES
# Commonware's APIs change between releases: one crate holds them.
for crate in $(cargo metadata --offline --no-deps --format-version 1 | grep -o '"name":"sluice[a-z-]*"' | cut -d'"' -f4 | sort -u); do
  [ "$crate" = sluice-consensus ] && continue
  if cargo tree --offline -q -e normal,dev,build -p "$crate" --depth 1 --prefix none 2>/dev/null | grep -q '^commonware-'; then
    echo "crate edge broken: $crate depends on a commonware crate (only sluice-consensus may)"
    fail=1
  fi
done
[ "$fail" = 0 ] && echo "crate edges hold"
exit "$fail"
