"""A short, deterministic load for a fresh sluice dev node (stdlib only).

It exists so dashboards/check.py can make every dashboard panel show data:
steady transfers from several senders (single calls and batches), a sender
that bursts past `mempool.max_txs_per_sender`, two senders that spend their
whole balance and then send once more (the second transaction is admitted
against the committed balance and skipped at execution), a reader cycling
through the read methods plus a few refusals (unknown method, malformed and
stale transactions), and, when the node serves WebSocket, a `newHeads`
subscriber, a silent connection the node drops, and one connection past
`rpc.ws_max_connections` that it refuses.

Transactions are signed here (lib/ethtx.py) with the test mnemonic's dev
keys, so the node must be fresh (nonces start at 0).
"""

import base64
import collections
import http.client
import json
import os
import select
import socket
import struct
import threading
import time
import urllib.parse

import ethtx

CHAIN_ID = 31337
GAS_PRICE = 2_000_000_000  # the dev node's base fee is 1 gwei
SINK = bytes.fromhex("000000000000000000000000000000000000dEaD".lower())


class Rpc:
    """JSON-RPC over one keep-alive HTTP connection."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.conn = None
        self.next_id = 1

    def _post(self, body):
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                self.conn.request("POST", "/", body=json.dumps(body), headers={"Content-Type": "application/json"})
                resp = self.conn.getresponse()
                data = resp.read()
                return json.loads(data)
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt:
                    raise
        return None

    def call(self, method, params):
        self.next_id += 1
        return self._post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})

    def batch(self, calls):
        body = []
        for method, params in calls:
            self.next_id += 1
            body.append({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        by_id = {r.get("id"): r for r in self._post(body)}
        return [by_id.get(c["id"], {"error": {"message": "missing answer"}}) for c in body]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def outcome(self, answer):
        if "result" in answer:
            self.add("tx ok")
        else:
            msg = answer.get("error", {}).get("message", "?")
            self.add("tx refused: " + msg.split(":")[0][:40])


class Sender:
    """One dev account; signs transactions by nonce, caching them (RFC 6979 makes
    a resend byte-identical)."""

    def __init__(self, index):
        self.key = ethtx.DEV_KEYS[index]
        self.address = "0x" + ethtx.address(self.key).hex()
        self.nonce = 0
        self.signed = {}

    def tx(self, nonce, value=1, to=SINK):
        raw = self.signed.get((nonce, value, to))
        if raw is None:
            raw = "0x" + ethtx.legacy_tx(self.key, CHAIN_ID, nonce, GAS_PRICE, 21_000, to, value).hex()
            self.signed[(nonce, value, to)] = raw
        return raw

    def send_batch(self, rpc, stats, n):
        """Sends nonces [nonce, nonce+n) in one batch; advances past the admitted prefix."""
        answers = rpc.batch([("eth_sendRawTransaction", [self.tx(self.nonce + i)]) for i in range(n)])
        admitted = 0
        for a in answers:
            stats.outcome(a)
        for a in answers:
            if "result" not in a:
                break
            admitted += 1
        self.nonce += admitted
        return answers


def steady(url, index, deadline, stats, stop, hashes):
    rpc, s = Rpc(url), Sender(index)
    i = 0
    while time.time() < deadline and not stop.is_set():
        if i % 4 == 0:
            a = rpc.call("eth_sendRawTransaction", [s.tx(s.nonce)])
            stats.outcome(a)
            if "result" in a:
                s.nonce += 1
                hashes.append(a["result"])
        else:
            s.send_batch(rpc, stats, 8)
        i += 1
        time.sleep(0.15)


def burst(url, index, deadline, stats, stop, max_per_sender):
    """Bursts past the per-sender limit: the excess is refused (sender_limit)."""
    rpc, s = Rpc(url), Sender(index)
    while time.time() < deadline and not stop.is_set():
        s.send_batch(rpc, stats, max_per_sender + 16)
        time.sleep(0.6)


def drain_then_skip(url, index, start_at, stats, stop):
    """Spends the whole balance, then sends once more in the same batch: both are
    admitted (each against the committed balance), the second is skipped at
    execution for lack of funds."""
    while time.time() < start_at:
        if stop.wait(0.05):
            return
    rpc, s = Rpc(url), Sender(index)
    balance = int(rpc.call("eth_getBalance", [s.address, "latest"])["result"], 16)
    all_in = s.tx(0, value=balance - 21_000 * GAS_PRICE)
    answers = rpc.batch([("eth_sendRawTransaction", [all_in]), ("eth_sendRawTransaction", [s.tx(1)])])
    for a in answers:
        stats.outcome(a)
    stats.add("drain-then-skip pairs sent")


def reader(url, deadline, stats, stop, hashes):
    rpc = Rpc(url)
    stale = Sender(0).tx(0)  # nonce 0 of sender 0: committed early, so refused later
    first = "0x" + ethtx.address(ethtx.DEV_KEYS[0]).hex()
    i = 0
    while time.time() < deadline and not stop.is_set():
        calls = [
            ("eth_blockNumber", []),
            ("eth_chainId", []),
            ("eth_getBalance", [first, "latest"]),
            ("eth_getTransactionCount", [first, "pending"]),
            ("eth_getBlockByNumber", ["latest", False]),
            ("eth_gasPrice", []),
            ("eth_call", [{"to": "0x" + SINK.hex(), "data": "0x"}, "latest"]),
            ("eth_feeHistory", ["0x4", "latest", [50]]),
            ("eth_getLogs", [{"fromBlock": "latest", "toBlock": "latest"}]),
        ]
        name, params = calls[i % len(calls)]
        rpc.call(name, params)
        if hashes and i % 3 == 0:
            rpc.call("eth_getTransactionReceipt", [hashes[-1]])
        if i % 20 == 5:
            rpc.call("sluice_noSuchMethod", [])
            stats.outcome(rpc.call("eth_sendRawTransaction", ["0x00"]))
            stats.outcome(rpc.call("eth_sendRawTransaction", [stale]))
        i += 1
        time.sleep(0.03)


class WsConn:
    """A minimal RFC 6455 client: enough for eth_subscribe and pings."""

    def __init__(self, url, timeout=5):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET / HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                break
            head += chunk
        self.status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
        self.buf = b""

    def send(self, payload, opcode=0x1):
        data = payload.encode() if isinstance(payload, str) else payload
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        self.sock.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, wait):
        """The next text message, answering pings; None if nothing came within `wait`."""
        if not self.buf and not select.select([self.sock], [], [], wait)[0]:
            return None
        parts = []
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            payload = self._exact(n)
            opcode = b0 & 0x0F
            if opcode == 0x9:
                self.send(payload, 0xA)
                continue
            if opcode == 0x8:
                raise ConnectionError("closed by the node")
            if opcode in (0x1, 0x2, 0x0):
                parts.append(payload)
                if b0 & 0x80:
                    return b"".join(parts).decode()
                continue
            if not parts:
                return ""

    def close(self):
        try:
            self.send(b"\x03\xe8", 0x8)
        except OSError:
            pass
        self.sock.close()


def websocket(url, deadline, stats, stop):
    """A newHeads subscriber, then a silent connection (dropped by the node) and one
    past the connection limit (refused)."""
    sub = WsConn(url)
    if sub.status != 101:
        stats.add(f"ws handshake HTTP {sub.status}")
        return
    sub.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}))
    silent = WsConn(url)
    stats.add(f"ws silent connection HTTP {silent.status}")
    extra = WsConn(url)
    stats.add(f"ws connection past the limit HTTP {extra.status}")
    extra.sock.close()
    last_req = 0.0
    try:
        while time.time() < deadline and not stop.is_set():
            msg = sub.recv(0.1)
            if msg and '"eth_subscription"' in msg:
                stats.add("ws notifications")
            if time.time() - last_req > 0.5:
                sub.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber", "params": []}))
                last_req = time.time()
    except (OSError, ConnectionError) as e:
        stats.add(f"ws subscriber ended: {e}")
    sub.close()
    silent.sock.close()


def run(url, seconds, max_per_sender, with_ws):
    """Runs the load for `seconds`; returns a Counter of what happened."""
    stats, stop, hashes, errors = Stats(), threading.Event(), [], []
    now = time.time()
    deadline = now + seconds

    def spawn(fn, *args):
        def guarded():
            try:
                fn(*args)
            except Exception as e:  # a failed load must fail the check, not hang it
                errors.append(f"{fn.__name__}: {e!r}")
                stop.set()
        th = threading.Thread(target=guarded, daemon=True)
        th.start()
        return th

    jobs = [spawn(steady, url, i, deadline, stats, stop, hashes) for i in range(5)]
    jobs.append(spawn(burst, url, 5, deadline, stats, stop, max_per_sender))
    jobs.append(spawn(drain_then_skip, url, 6, now + 2, stats, stop))
    jobs.append(spawn(drain_then_skip, url, 7, now + seconds / 2, stats, stop))
    jobs.append(spawn(reader, url, deadline, stats, stop, hashes))
    if with_ws:
        jobs.append(spawn(websocket, url, deadline, stats, stop))
    for j in jobs:
        j.join(seconds + 30)
    if errors:
        raise RuntimeError("load failed: " + "; ".join(errors))
    return stats.counts


def run_network(urls, seconds):
    """Steady transfers to each validator of a fresh network for `seconds`: dev
    sender i sends to validator i only (a validator proposes what it admitted,
    when it leads). Returns a Counter of what happened."""
    stats, stop, hashes, errors = Stats(), threading.Event(), [], []
    deadline = time.time() + seconds

    def guarded(url, index):
        try:
            steady(url, index, deadline, stats, stop, hashes)
        except Exception as e:  # a failed load must fail the check, not hang it
            errors.append(f"steady to {url}: {e!r}")
            stop.set()

    jobs = [threading.Thread(target=guarded, args=(u, i), daemon=True) for i, u in enumerate(urls)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(seconds + 30)
    if errors:
        raise RuntimeError("load failed: " + "; ".join(errors))
    return stats.counts
