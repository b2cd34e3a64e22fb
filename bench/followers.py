#!/usr/bin/env python3
"""Followers on one machine: what each costs the validators and how close to
the head it stays. Run by bench/followers.sh (which builds the release
binary); see there for the environment.

Each round starts 4 release validators (200 ms blocks) from `sluice testnet
init --followers 2` and offers RATE transfers a second across them for
DURATION_S seconds, once without followers and once with f0 (a p2p
follower) and f1 (following f0's finalized-block feed), alternating. During
each run every node's head is sampled every 100 ms: a follower's lag is the
validators' highest head minus its own. Reported per round:
  - the load's inclusion latency (submitted to included, p50/p99: what a
    user waits for finality) and the validators' notarized-to-finalized
    time (mean and bucket p99 of
    sluice_consensus_notarized_to_finalized_seconds, over the run), with and
    without followers, and their ratios;
  - each follower's head lag p50 / p99 / max, in blocks;
  - bytes each follower received per block (its TCP sockets, from ss);
  - transactions lost (admitted, never included): must be 0.
NICE_FOLLOWERS (0) runs the followers at that CPU priority: at 19 they get
only the cores the validators leave, as on machines of their own.
Then, with followers, two drills under the same load:
  - kill -9 of f0 for KILL_S seconds: time from its restart until its head
    reaches the validators' head at the restart;
  - an eth_call flood at f0 (FLOOD_CLIENTS clients, as fast as answered, for
    FLOOD_S seconds): its head lag, calls answered, calls shed with -32005.
"""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLUICE = os.path.join(ROOT, "target", "release", "sluice")
RATE = int(os.environ.get("RATE", "2000"))
DURATION_S = int(os.environ.get("DURATION_S", "60"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
KILL_S = int(os.environ.get("KILL_S", "60"))
FLOOD_S = int(os.environ.get("FLOOD_S", "30"))
FLOOD_CLIENTS = int(os.environ.get("FLOOD_CLIENTS", "32"))
OUT = os.environ.get("OUT", os.path.join(ROOT, "bench", "results", "followers"))
# Followers' CPU priority (nice): on one machine a follower's execution
# takes the validators' cores; at 19 it gets only what they leave, as on a
# machine of its own (0: equal priority, full contention).
NICE_FOLLOWERS = int(os.environ.get("NICE_FOLLOWERS", "0"))
# CPU pinning (taskset lists, "" for none): F0_CPUS gives the follower f0 cores
# of its own and OTHER_CPUS holds everything else (validators, f1, the load),
# so f0's catch-up is measured as on a machine of its own.
F0_CPUS = os.environ.get("F0_CPUS", "")
OTHER_CPUS = os.environ.get("OTHER_CPUS", "")
# ALONE=0 skips the runs without followers (the drills need followers).
ALONE = os.environ.get("ALONE", "1") != "0"
os.makedirs(OUT, exist_ok=True)


def rpc(port, method, params, timeout=2.0):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def head(port):
    try:
        return int(rpc(port, "eth_blockNumber", [])["result"], 16)
    except Exception:
        return None


def metrics(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()
    except Exception:
        return ""


def histogram(text, name):
    """(count, sum, [(le, cumulative)]) of a Prometheus histogram."""
    count = total = 0.0
    buckets = []
    for line in text.splitlines():
        if line.startswith(name + "_count"):
            count = float(line.split()[-1])
        elif line.startswith(name + "_sum"):
            total = float(line.split()[-1])
        elif line.startswith(name + "_bucket"):
            le = re.search(r'le="([^"]+)"', line).group(1)
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
    return count, total, sorted(buckets)


def minus(a, b):
    """Histogram a - b (over a window)."""
    return a[0] - b[0], a[1] - b[1], [(le, c - dict(b[2]).get(le, 0.0)) for le, c in a[2]]


def quantile(h, q):
    count, _, buckets = h
    if count <= 0:
        return float("nan")
    want, prev_le, prev_c = q * count, 0.0, 0.0
    for le, c in buckets:
        if c >= want:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (want - prev_c) / max(c - prev_c, 1e-9)
        prev_le, prev_c = le, c
    return prev_le


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def received_bytes(pid):
    """Bytes received on every TCP socket of process `pid` (ss -tip)."""
    out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True).stdout
    total, mine = 0, False
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            mine = f"pid={pid}," in line
        elif mine:
            m = re.search(r"bytes_received:(\d+)", line)
            if m:
                total += int(m.group(1))
    return total


class Net:
    def __init__(self, followers):
        self.work = tempfile.mkdtemp(prefix="sluice-followers.")
        self.base = random.randrange(20000, 60000)
        self.procs = {}
        genesis = os.path.join(self.work, "genesis.json")
        subprocess.run([SLUICE, "load", "genesis", "--accounts", "1000", "--seed", "1", "--out", genesis], check=True)
        subprocess.run([SLUICE, "testnet", "init", "--validators", "4", "--followers", "2", "--dir",
                        os.path.join(self.work, "net"), "--base-port", str(self.base), "--genesis", genesis,
                        "--dev-accounts", "10", "--block-time-ms", "200"], check=True, capture_output=True)
        for i in range(4):
            self.start(f"v{i}")
        for i in range(4):
            self.wait_peers(i)
        if followers:
            self.start("f0")
            self.start("f1", {"SLUICE_FOLLOWER__UPSTREAMS": f"ws://127.0.0.1:{self.rpc_port(4)}"})
            for n in (4, 5):
                deadline = time.time() + 60
                while (head(self.rpc_port(n)) or 0) < 2:
                    assert time.time() < deadline, f"follower {n} not following"
                    time.sleep(0.2)

    def node(self, name):
        return 4 + int(name[1]) if name[0] == "f" else int(name[1])

    def rpc_port(self, n):
        return self.base + 3 * n + 1

    def metrics_port(self, n):
        return self.base + 3 * n + 2

    def start(self, name, env=None):
        e = dict(os.environ, **{"RUST_LOG": "warn", **(env or {})})
        log = open(os.path.join(self.work, f"{name}.log"), "a")
        nice = ["nice", "-n", str(NICE_FOLLOWERS)] if name.startswith("f") and NICE_FOLLOWERS else []
        self.procs[name] = (subprocess.Popen(pin(F0_CPUS if name == "f0" else OTHER_CPUS) + nice + [SLUICE, "node", "--config", os.path.join(self.work, "net", name, "sluice.toml")],
                                             stdout=subprocess.DEVNULL, stderr=log, env=e), env)
        deadline = time.time() + 60
        while head(self.rpc_port(self.node(name))) is None:
            assert self.procs[name][0].poll() is None, f"{name} exited; see {self.work}/{name}.log"
            assert time.time() < deadline, f"{name} not answering"
            time.sleep(0.1)

    def wait_peers(self, i):
        deadline = time.time() + 120
        while "sluice_consensus_peers_connected 3" not in metrics(self.metrics_port(i)):
            assert time.time() < deadline, f"v{i} not connected"
            time.sleep(0.3)

    def kill9(self, name):
        p, _ = self.procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait()

    def validator_head(self):
        return max(h for h in (head(self.rpc_port(i)) for i in range(4)) if h is not None)

    def stop(self):
        for p, _ in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p, _ in self.procs.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.work, ignore_errors=True)


def pin(cpus):
    return ["taskset", "-c", cpus] if cpus else []


def load(net, tag, rate, duration):
    urls = ",".join(f"http://127.0.0.1:{net.rpc_port(i)}" for i in range(4))
    out = os.path.join(OUT, f"{tag}.load.json")
    p = subprocess.Popen(pin(OTHER_CPUS) + [SLUICE, "load", "--url", urls, "--label", tag, "--workload", "transfer", "--accounts", "1000",
                          "--seed", "1", "--tps", str(rate), "--duration-s", str(duration),
                          "--txs", str(rate * duration), "--connections", "8", "--batch", "50",
                          "--drain-timeout-s", "120", "--json", out],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, f"{tag}.load.log"), "w"))
    return p, out


def finished(out):
    """A load's results; every transfer it offered was admitted and included."""
    res = json.load(open(out))
    assert res["rejected"] == 0 and res["dropped"] == 0, f"{out}: {res['rejected']} rejected, {res['dropped']} dropped"
    assert res["admitted_not_included"] == 0, f"{out}: {res['admitted_not_included']} admitted transfers lost"
    return res


def sample_lags(net, followers, stop, lags):
    while not stop.is_set():
        top = net.validator_head()
        for f in followers:
            h = head(net.rpc_port(net.node(f)))
            if h is not None:
                lags.setdefault(f, []).append(max(top - h, 0))
        time.sleep(0.1)


def run(tag, followers):
    net = Net(followers)
    try:
        names = ["f0", "f1"] if followers else []
        fin = "sluice_consensus_notarized_to_finalized_seconds"
        before = [histogram(metrics(net.metrics_port(i)), fin) for i in range(4)]
        bytes0 = {f: received_bytes(net.procs[f][0].pid) for f in names}
        h0 = net.validator_head()
        stop, lags = threading.Event(), {}
        sampler = threading.Thread(target=sample_lags, args=(net, names, stop, lags))
        sampler.start()
        p, out = load(net, tag, RATE, DURATION_S)
        p.wait()
        stop.set()
        sampler.join()
        blocks = max(net.validator_head() - h0, 1)
        after = [histogram(metrics(net.metrics_port(i)), fin) for i in range(4)]
        windows = [minus(a, b) for a, b in zip(after, before)]
        merged = (sum(w[0] for w in windows), sum(w[1] for w in windows),
                  [(le, sum(dict(w[2]).get(le, 0.0) for w in windows)) for le, _ in windows[0][2]])
        res = finished(out)
        r = {"tag": tag, "followers": followers, "included_tps": res["included_tps"],
             "lost": res["admitted_not_included"], "blocks": blocks,
             "inclusion_p50_ms": res["inclusion_latency"]["p50_ms"], "inclusion_p99_ms": res["inclusion_latency"]["p99_ms"],
             "finalize_mean_ms": 1000 * merged[1] / max(merged[0], 1), "finalize_p99_ms": 1000 * quantile(merged, 0.99)}
        for f in names:
            r[f] = {"lag_p50": pct(lags.get(f, []), 0.5), "lag_p99": pct(lags.get(f, []), 0.99),
                    "lag_max": max(lags.get(f, [0])), "samples": len(lags.get(f, [])),
                    "bytes_per_block": (received_bytes(net.procs[f][0].pid) - bytes0[f]) / blocks}
        if followers:
            r["kill"] = kill_drill(net, tag)
            r["flood"] = flood_drill(net, tag)
        json.dump(r, open(os.path.join(OUT, f"{tag}.json"), "w"), indent=1)
        print(json.dumps(r), flush=True)
        assert r["lost"] == 0, f"{r['lost']} transfers lost"
        return r
    finally:
        net.stop()


def kill_drill(net, tag):
    """f0 down KILL_S seconds under load; seconds from its restart to the head."""
    p, out = load(net, f"{tag}-kill", RATE, KILL_S + 30)
    time.sleep(5)
    before = head(net.rpc_port(4)) or 0
    net.kill9("f0")
    time.sleep(KILL_S)
    target = net.validator_head()
    t0 = time.time()
    net.start("f0")
    started = time.time() - t0
    while (head(net.rpc_port(4)) or 0) < target:
        assert time.time() - t0 < 120, "f0 did not catch up"
        time.sleep(0.05)
    back = time.time() - t0
    p.wait()
    res = finished(out)
    # The transfers of the KILL_S seconds f0 missed, over the time it took to
    # execute them: the catch-up rate its cores give.
    return {"down_s": KILL_S, "behind_blocks": target - before,
            "rpc_up_s": round(started, 2), "at_head_s": round(back, 2),
            "catchup_tx_per_s": round(RATE * KILL_S / back),
            "lost": res["admitted_not_included"]}


def flood_drill(net, tag):
    """eth_call as fast as answered at f0 while the load runs."""
    p, out = load(net, f"{tag}-flood", RATE, FLOOD_S + 10)
    time.sleep(3)
    stop, lags, counts = threading.Event(), {}, {"ok": 0, "shed": 0, "other": 0}
    lock = threading.Lock()
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_call",
                       "params": [{"to": "0x" + "11" * 20, "data": "0x"}, "latest"]}).encode()

    def client():
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", net.rpc_port(4), timeout=10)
        while not stop.is_set():
            try:
                c.request("POST", "/", call, {"content-type": "application/json"})
                v = json.loads(c.getresponse().read())
                k = "ok" if "result" in v else ("shed" if v.get("error", {}).get("code") == -32005 else "other")
            except Exception:
                k = "other"
                c = http.client.HTTPConnection("127.0.0.1", net.rpc_port(4), timeout=10)
            with lock:
                counts[k] += 1

    threads = [threading.Thread(target=client) for _ in range(FLOOD_CLIENTS)]
    sampler = threading.Thread(target=sample_lags, args=(net, ["f0"], stop, lags))
    for t in threads + [sampler]:
        t.start()
    time.sleep(FLOOD_S)
    stop.set()
    for t in threads + [sampler]:
        t.join()
    p.wait()
    res = finished(out)
    return {"clients": FLOOD_CLIENTS, "seconds": FLOOD_S, "calls_per_s": counts["ok"] / FLOOD_S,
            "shed_per_s": counts["shed"] / FLOOD_S, "other": counts["other"],
            "lag_p50": pct(lags.get("f0", []), 0.5), "lag_p99": pct(lags.get("f0", []), 0.99),
            "lag_max": max(lags.get("f0", [0])), "lost": res["admitted_not_included"]}


def main():
    results = []
    for r in range(ROUNDS):
        for followers in [f for f in ([False, True] if r % 2 == 0 else [True, False]) if f or ALONE]:
            results.append(run(f"r{r + 1}-{'followers' if followers else 'alone'}", followers))
    json.dump(results, open(os.path.join(OUT, "all.json"), "w"), indent=1)
    alone = [x for x in results if not x["followers"]]
    withf = [x for x in results if x["followers"]]
    mean = lambda xs: sum(xs) / max(len(xs), 1)
    print()
    print(f"{RATE} transfers/s for {DURATION_S} s, 4 validators, 200 ms blocks, {ROUNDS} rounds (alternating), "
          f"followers at nice {NICE_FOLLOWERS}, f0 on cpus [{F0_CPUS}], the rest on [{OTHER_CPUS}]")
    print("| run | included tx/s | inclusion p50 / p99 ms | notarized-to-finalized mean / p99 ms | f0 (p2p) lag p50/p99/max | f1 (feed of f0) lag p50/p99/max | f0 / f1 bytes per block |")
    print("|---|---|---|---|---|---|---|")
    for x in results:
        f = lambda n: f"{x[n]['lag_p50']}/{x[n]['lag_p99']}/{x[n]['lag_max']}" if n in x else "-"
        b = f"{x['f0']['bytes_per_block']:,.0f} / {x['f1']['bytes_per_block']:,.0f}" if "f0" in x else "-"
        print(f"| {x['tag']} | {x['included_tps']:,.0f} | {x['inclusion_p50_ms']:.0f} / {x['inclusion_p99_ms']:.0f} | "
              f"{x['finalize_mean_ms']:.1f} / {x['finalize_p99_ms']:.0f} | {f('f0')} | {f('f1')} | {b} |")
    for key, what in (("inclusion_p50_ms", "inclusion p50 (submitted to included)"),
                      ("finalize_mean_ms", "notarized-to-finalized mean")) if alone else ():
        ratio = mean([x[key] for x in withf]) / mean([x[key] for x in alone])
        print(f"validators' {what} with followers / without: {ratio:.3f}")
    for x in withf:
        print(f"{x['tag']}: kill -9 of f0 for {x['kill']['down_s']} s ({x['kill']['behind_blocks']} blocks behind): RPC up {x['kill']['rpc_up_s']} s, "
              f"at the head {x['kill']['at_head_s']} s after restart (~{x['kill']['catchup_tx_per_s']:,} tx/s executed); lost {x['kill']['lost']}")
        fl = x["flood"]
        print(f"{x['tag']}: eth_call flood at f0 ({fl['clients']} clients): {fl['calls_per_s']:,.0f} answered/s, "
              f"{fl['shed_per_s']:,.0f} shed/s (-32005), other {fl['other']}; lag p50/p99/max "
              f"{fl['lag_p50']}/{fl['lag_p99']}/{fl['lag_max']}; lost {fl['lost']}")


if __name__ == "__main__":
    main()
