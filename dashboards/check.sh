#!/usr/bin/env bash
# Checks the Grafana dashboards against a real sluice node and a real
# Prometheus (see dashboards/check.py for what is checked):
#   bash dashboards/check.sh [--seconds N] [--keep]
# Installs Debian's prometheus package if prometheus/promtool are missing
# (needs root), without starting it as a service; builds the node.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    echo "== installing Prometheus (Debian package; not started as a service)"
    if [ "$(id -u)" -ne 0 ]; then
        echo "prometheus/promtool missing and not root: apt-get install prometheus first" >&2
        exit 1
    fi
    # policy-rc.d exit 101 stops the package's scripts from starting services.
    created_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        created_policy=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    if [ "$created_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi
prometheus --version 2>&1 | head -1

echo "== building the node"
cargo build --bin sluice

export PYTHONDONTWRITEBYTECODE=1
exec python3 dashboards/check.py "$@"
