# Helpers the bench scripts share (sourced, not run). A script using them
# keeps the pid of the node it started in NODE_PID.

# A free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits until the JSON-RPC node at $1 answers, at most $2 seconds; fails
# early if the node in NODE_PID exited.
wait_rpc() {
    local deadline=$((SECONDS + $2))
    until curl -sf -m 1 -H 'content-type: application/json' \
        --data '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "$1" >/dev/null; do
        if [ $SECONDS -ge $deadline ]; then echo "node at $1 did not answer in $2 s" >&2; return 1; fi
        if [ -n "${NODE_PID:-}" ] && ! kill -0 "$NODE_PID" 2>/dev/null; then echo "node exited" >&2; return 1; fi
        sleep 0.05
    done
}

# Stops the node in NODE_PID: SIGTERM, up to 60 s to exit, then SIGKILL.
stop_node() {
    if [ -n "${NODE_PID:-}" ]; then
        kill -TERM "$NODE_PID" 2>/dev/null || true
        for _ in $(seq 1 600); do kill -0 "$NODE_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$NODE_PID" 2>/dev/null || true
        wait "$NODE_PID" 2>/dev/null || true
        NODE_PID=""
    fi
}
