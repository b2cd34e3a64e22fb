#!/usr/bin/env python3
"""Checks sluice's Grafana dashboards against a real node and a real Prometheus.

Run through dashboards/check.sh (which builds the node and installs
Prometheus if missing). Steps:

1. Static checks of dashboards/grafana/*.json: the JSON is what generate.py
   writes; unique dashboard uids, panel ids and panel titles; every panel and
   target on the `datasource` variable; no `__inputs` / `${DS_...}`; a unit
   on every panel; rate windows are `$__rate_interval`; `_bucket` series only
   inside `histogram_quantile` by `le`; every selector filters on
   `$instance`; no overlapping panels.
2. `promtool check config` on dashboards/prometheus/prometheus.yml.
3. Starts the node (fresh data dir, 100 ms blocks), and Prometheus (its own
   temp data dir) scraping it every second with a config derived from
   prometheus.yml; runs lib/load.py's load; waits for the last scrapes.
4. `promtool check metrics` on a scrape of the loaded node.
5. Evaluates every target of every panel through Prometheus's
   /api/v1/query_range over the load window (`$__rate_interval` and
   `$instance` substituted). A target that errors fails the check; one with
   no finite value fails unless its panel is listed in expected-missing.txt.
   An allowlisted panel whose targets all have data fails too: shrink the
   list. The `instance` variable's query must find the node.
6. The consensus dashboard (validator mode; a single node exports none of
   its metrics) against a real network: `sluice testnet init --validators 4`
   on free ports, four validator processes (one worker per stage), a
   Prometheus scraping all four (one `instance` each), steady transfers to
   each validator (lib/load.py run_network); every validator must have
   finalized blocks, and every consensus panel's targets are evaluated on
   each validator with the rules of step 5. The validators are stopped at
   the end, also on failure.
"""

import argparse
import glob
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))

import load  # noqa: E402

DASHBOARD_DIR = os.path.join(HERE, "grafana")
ALLOWLIST = os.path.join(HERE, "expected-missing.txt")
PROM_CONFIG = os.path.join(HERE, "prometheus", "prometheus.yml")
DS = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "bargauge"}
INSTANCE_MATCHER = 'instance=~"$instance"'

problems = []


def problem(msg):
    problems.append(msg)
    print(f"FAIL  {msg}", flush=True)


T0 = time.time()


def step(msg):
    print(f"== [{time.time() - T0:5.1f}s] {msg}", flush=True)


# --- 1. static checks

def load_dashboards():
    out = []
    for path in sorted(glob.glob(os.path.join(DASHBOARD_DIR, "*.json"))):
        with open(path) as f:
            text = f.read()
        try:
            out.append((os.path.basename(path), text, json.loads(text)))
        except json.JSONDecodeError as e:
            problem(f"{path}: invalid JSON: {e}")
    if not out:
        problem(f"no dashboards in {DASHBOARD_DIR}")
    return out


def all_panels(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # panels inside collapsed rows


def check_expr(where, expr):
    for window in re.findall(r"\[([^\]]*)\]", expr):
        if window != "$__rate_interval":
            problem(f"{where}: range [{window}] should be [$__rate_interval]: {expr}")
    if "_bucket" in expr:
        if "histogram_quantile(" not in expr or not re.search(r"by \([^)]*\ble\b[^)]*\)", expr):
            problem(f"{where}: _bucket series outside histogram_quantile(..., sum by (le) ...): {expr}")
    for matchers in re.findall(r"\{([^}]*)\}", expr):
        if INSTANCE_MATCHER not in matchers:
            problem(f"{where}: selector {{{matchers}}} does not filter on {INSTANCE_MATCHER}")
    if not re.search(r"\{[^}]*\}", expr):
        problem(f"{where}: no label selector (must filter on {INSTANCE_MATCHER}): {expr}")


def static_checks(dashboards):
    uids = {}
    for name, text, d in dashboards:
        if "__inputs" in d or "DS_" in text:
            problem(f"{name}: exported with __inputs / ${{DS_...}}; use the datasource variable")
        uid = d.get("uid")
        if not uid:
            problem(f"{name}: no uid")
        elif uid in uids:
            problem(f"{name}: uid {uid} also used by {uids[uid]}")
        uids[uid] = name
        variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
        dsv = variables.get("datasource")
        if not dsv or dsv.get("type") != "datasource" or dsv.get("query") != "prometheus":
            problem(f"{name}: no `datasource` template variable of type datasource (query prometheus)")
        inst = variables.get("instance")
        if not inst or inst.get("datasource") != DS:
            problem(f"{name}: no `instance` variable on the datasource variable")
        ids, titles, boxes = {}, {}, []
        for p in all_panels(d):
            where = f"{name} panel {p.get('id')} {p.get('title')!r}"
            if p.get("id") in ids:
                problem(f"{where}: id also used by {ids[p.get('id')]!r}")
            ids[p.get("id")] = p.get("title")
            if p.get("title") in titles:
                problem(f"{where}: title not unique in the dashboard (expected-missing.txt names panels by title)")
            titles[p.get("title")] = p.get("id")
            if p.get("type") not in PANEL_TYPES:
                problem(f"{where}: unexpected panel type {p.get('type')}")
            g = p.get("gridPos", {})
            box = (g.get("x", 0), g.get("y", 0), g.get("w", 0), g.get("h", 0))
            for other, ob in boxes:
                if box[0] < ob[0] + ob[2] and ob[0] < box[0] + box[2] and box[1] < ob[1] + ob[3] \
                        and ob[1] < box[1] + box[3]:
                    problem(f"{where}: overlaps panel {other!r}")
            boxes.append((p.get("title"), box))
            if p.get("type") == "row":
                continue
            if p.get("datasource") != DS:
                problem(f"{where}: datasource is {p.get('datasource')}, not the datasource variable")
            if not p.get("fieldConfig", {}).get("defaults", {}).get("unit"):
                problem(f"{where}: no unit")
            targets = p.get("targets") or []
            if not targets:
                problem(f"{where}: no targets")
            refs = set()
            for tg in targets:
                if tg.get("datasource") != DS:
                    problem(f"{where} target {tg.get('refId')}: not on the datasource variable")
                if tg.get("refId") in refs:
                    problem(f"{where}: refId {tg.get('refId')} twice")
                refs.add(tg.get("refId"))
                check_expr(f"{where} target {tg.get('refId')}", tg.get("expr", ""))
    gen = subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), "--check"],
                         capture_output=True, text=True)
    if gen.returncode:
        problem("committed dashboards differ from generate.py:\n" + gen.stdout + gen.stderr)


def read_allowlist(dashboards):
    """{(uid, title): reason}; entries must name existing panels."""
    titles = {(d["uid"], p.get("title")) for _, _, d in dashboards for p in all_panels(d) if p.get("type") != "row"}
    out = {}
    with open(ALLOWLIST) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [x.strip() for x in line.split("|", 2)]
            if len(parts) != 3 or not parts[2]:
                problem(f"expected-missing.txt:{n}: want `dashboard uid | panel title | reason`")
                continue
            key = (parts[0], parts[1])
            if key not in titles:
                problem(f"expected-missing.txt:{n}: no panel {parts[1]!r} in dashboard {parts[0]!r}")
            out[key] = parts[2]
    return out


# --- processes

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_for(what, fn, timeout):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            v = fn()
            if v:
                return v
        except OSError as e:  # not up yet (connection refused, HTTP 503, ...)
            last = e
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what} ({last})")


def supported(node, env):
    """Whether the node's config accepts these SLUICE_* overrides (unknown keys are refused)."""
    r = subprocess.run([node, "config"], env={**os.environ, **env}, capture_output=True)
    return r.returncode == 0


def start_node(node, tmp, env):
    log = open(os.path.join(tmp, "node.log"), "w")
    metrics_port = free_port()
    proc = subprocess.Popen(
        [node, "node", "--rpc-addr", "127.0.0.1:0", "--metrics-addr", f"127.0.0.1:{metrics_port}",
         "--data-dir", os.path.join(tmp, "data"), "--block-time-ms", "100"],
        stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, **env})
    found = {}

    def read():
        for line in proc.stdout:
            m = re.search(r"JSON-RPC listening on (http://\S+)", line)
            if m:
                found["url"] = m.group(1)

    threading.Thread(target=read, daemon=True).start()
    url = wait_for("the node's RPC address", lambda: found.get("url") or (proc.poll() is not None and
                                                                            _died("node", tmp, "node.log")), 60)
    return proc, url, f"127.0.0.1:{metrics_port}"


def _died(what, tmp, logname):
    with open(os.path.join(tmp, logname)) as f:
        tail = f.read()[-3000:]
    raise RuntimeError(f"{what} exited:\n{tail}")


def prometheus_config(targets):
    """prometheus.yml scraping `targets` every second."""
    with open(PROM_CONFIG) as f:
        text = f.read()
    for old, new in [("127.0.0.1:9545", '", "'.join(targets)), ("scrape_interval: 5s", "scrape_interval: 1s"),
                     ("evaluation_interval: 5s", "evaluation_interval: 1s")]:
        if text.count(old) != 1:
            raise RuntimeError(f"prometheus.yml: expected `{old}` exactly once")
        text = text.replace(old, new)
    return text


def start_prometheus(tmp, targets, name="prometheus"):
    cfg = os.path.join(tmp, f"{name}.yml")
    with open(cfg, "w") as f:
        f.write(prometheus_config(targets))
    port = free_port()
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(tmp, name + '-tsdb')}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def ready():
        if proc.poll() is not None:
            _died("prometheus", tmp, f"{name}.log")
        return http_get(base + "/-/ready")

    try:
        wait_for("Prometheus to be ready", ready, 60)
    except BaseException:
        stop_all([proc])
        raise
    return proc, base


def stop_all(procs, grace=15):
    """SIGTERM to every process still running, then SIGKILL to any left after `grace` seconds."""
    live = [p for p in procs if p and p.poll() is None]
    for p in live:
        p.terminate()
    end = time.time() + grace
    for p in live:
        try:
            p.wait(max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def stop(proc):
    stop_all([proc])


# --- Prometheus queries

def api(base, path, params):
    data = urllib.parse.urlencode(params).encode()
    try:
        with urllib.request.urlopen(base + path, data=data, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return json.loads(e.read())
        except ValueError:
            return {"status": "error", "error": f"HTTP {e.code}"}


def target_up(base, target):
    r = api(base, "/api/v1/query", {"query": f'up{{instance="{target}"}}'})
    res = r.get("data", {}).get("result", [])
    return bool(res) and res[0]["value"][1] == "1"


def evaluate(base, expr, start, end):
    """('error', msg) | ('nodata', why) | ('ok', summary)."""
    r = api(base, "/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "1"})
    if r.get("status") != "success":
        return "error", f"{r.get('errorType', '')}: {r.get('error', r)}"
    series = r["data"]["result"]
    if not series:
        return "nodata", "no series"
    finite = [float(v) for s in series for _, v in s["values"] if math.isfinite(float(v))]
    if not finite:
        return "nodata", f"{len(series)} series, no finite value"
    warn = f" warnings: {r['warnings']}" if r.get("warnings") else ""
    return "ok", f"{len(series)} series, max {max(finite):.4g}{warn}"


def check_instance_variable(base, since, targets):
    """The dashboards' `instance` variable, label_values(sluice_build_info, instance), must list every target."""
    r = api(base, "/api/v1/series", {"match[]": "sluice_build_info", "start": f"{since:.0f}"})
    found = {s.get("instance") for s in r.get("data", [])}
    for target in targets:
        if target not in found:
            problem(f"label_values(sluice_build_info, instance) = {sorted(found)}: no {target}")


def evaluate_panels(base, dashboards, uids, instances, allow, start, end, rate_interval):
    """Every target of every panel of the dashboards in `uids`, with `$instance` set to each
    of `instances` in turn. An error fails; no finite value (on any instance) fails unless
    the panel is allowlisted; an allowlisted panel with data everywhere fails (shrink the list)."""
    stale = []
    for _, _, d in dashboards:
        if d["uid"] not in uids:
            continue
        for p in all_panels(d):
            if p.get("type") == "row":
                continue
            key = (d["uid"], p["title"])
            allowed = key in allow
            every_ok = True
            for tg in p.get("targets", []):
                label = f"{d['uid']} / {p['title']} [{tg['refId']}]"
                results = []
                for inst in instances:
                    expr = tg["expr"].replace("$__rate_interval", rate_interval) \
                        .replace("$instance", re.escape(inst).replace("\\", "\\\\"))
                    status, detail = evaluate(base, expr, start, end)
                    results.append((inst, status, detail))
                    every_ok = every_ok and status == "ok"
                    where = f"{label} on {inst}" if len(instances) > 1 else label
                    if status == "error":
                        problem(f"{where}: query error: {detail}")
                    elif status == "nodata" and not allowed:
                        problem(f"{where}: no data ({detail})")
                if all(s != "error" and (s == "ok" or allowed) for _, s, _ in results):
                    if len(instances) == 1:
                        status, detail = results[0][1:]
                        print(f"ok    {label}: " + (f"no data, expected: {allow[key]}" if status == "nodata"
                                                    else detail))
                    else:
                        print(f"ok    {label}: " + "; ".join(
                            f"v{n} {'no data (expected)' if s == 'nodata' else det}"
                            for n, (_, s, det) in enumerate(results)))
            if allowed and every_ok:
                stale.append(key)
    for uid, title in stale:
        problem(f"{uid} / {title} has data now: remove it from dashboards/expected-missing.txt")


# --- 6. a 4-validator network

NETWORK_DASHBOARDS = {"sluice-consensus"}  # validator-only metrics: evaluated on the network, not the node
VALIDATORS = 4
# Four debug validators on two cores: one thread per stage, long views.
NETWORK_ENV = {
    "SLUICE_RPC__WORKERS": "1", "SLUICE_PIPELINE__RECOVERY_WORKERS": "1",
    "SLUICE_PIPELINE__PREPARE_WORKERS": "1", "SLUICE_PIPELINE__EXECUTE_WORKERS": "1",
    "SLUICE_CONSENSUS__WORKER_THREADS": "1", "SLUICE_CONSENSUS__LEADER_TIMEOUT_MS": "2000",
    "SLUICE_CONSENSUS__CERTIFICATION_TIMEOUT_MS": "4000", "SLUICE_CONSENSUS__SKIP_TIMEOUT_MS": "5000",
}


def free_range(n):
    """A base port with n consecutive free loopback ports from it, below the usual
    ephemeral range (32768+) so outgoing connections cannot take them meanwhile."""
    import random
    for _ in range(200):
        base = random.randrange(20000, 32768 - n)
        socks = []
        try:
            for k in range(n):
                so = socket.socket()
                so.bind(("127.0.0.1", base + k))
                socks.append(so)
            return base
        except OSError:
            pass
        finally:
            for so in socks:
                so.close()
    raise RuntimeError(f"no {n} free ports in a row")


def start_network(node, tmp, procs):
    """`testnet init` and its validators (appended to `procs` as they start, so the caller
    stops them even when a later one fails); returns (rpc urls, metrics targets).
    Validator i listens on base+3i (p2p), base+3i+1 (JSON-RPC), base+3i+2 (metrics)."""
    base = free_range(3 * VALIDATORS)
    net = os.path.join(tmp, "net")
    r = subprocess.run([node, "testnet", "init", "--validators", str(VALIDATORS), "--dir", net,
                        "--base-port", str(base), "--seed", "1", "--block-time-ms", "100"],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("testnet init failed: " + r.stdout + r.stderr)
    urls = [f"http://127.0.0.1:{base + 3 * i + 1}" for i in range(VALIDATORS)]
    targets = [f"127.0.0.1:{base + 3 * i + 2}" for i in range(VALIDATORS)]
    for i in range(VALIDATORS):
        log = open(os.path.join(tmp, f"v{i}.log"), "w")
        procs.append(subprocess.Popen([node, "node", "--config", os.path.join(net, f"v{i}", "sluice.toml")],
                                      stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **NETWORK_ENV}))
    for i, u in enumerate(urls):
        def up(i=i, u=u):
            if procs[i].poll() is not None:
                _died(f"validator {i}", tmp, f"v{i}.log")
            return load.Rpc(u).call("eth_blockNumber", []).get("result")
        wait_for(f"validator {i}'s JSON-RPC", up, 60)
    return urls, targets


def queried_families(dashboards, uids):
    """Every metric family the panels of dashboards `uids` query."""
    names = set()
    for _, _, d in dashboards:
        if d.get("uid") not in uids:
            continue
        for panel in all_panels(d):
            for t in panel.get("targets", []):
                names.update(re.findall(r"\b(sluice_[a-z0-9_]+)", t.get("expr", "")))
    return {re.sub(r"_(bucket|count|sum)$", "", n) for n in names}


def check_families_at_start(target, families, who):
    """Every family the dashboards query is in the first scrape of a fresh
    node (at zero), so its panels show 0, not "No data". No allowlist."""
    scrape = http_get(f"http://{target}/metrics").decode()
    present = set(re.findall(r"^# TYPE (\S+) ", scrape, re.M))
    missing = sorted(f for f in families if f not in present)
    for f in missing:
        problem(f"{who}: {f} is queried by a dashboard but not exported before its first event")
    print(f"   {len(families) - len(missing)} of {len(families)} queried families exported at start ({who})")


def query_by_instance(base, expr):
    r = api(base, "/api/v1/query", {"query": expr})
    return {s["metric"].get("instance"): float(s["value"][1]) for s in r.get("data", {}).get("result", [])}


def check_network(args, dashboards, allow, tmp):
    """Step 6: the consensus dashboard against four real validators."""
    procs = []
    try:
        step(f"starting {VALIDATORS} validators (sluice testnet init, one worker per stage)")
        urls, targets = start_network(args.node, tmp, procs)
        print(f"   rpc {', '.join(urls)}")
        step("every queried consensus family exported by each fresh validator")
        for i, tg in enumerate(targets):
            check_families_at_start(tg, queried_families(dashboards, NETWORK_DASHBOARDS), f"validator {i}")

        step("starting Prometheus scraping the validators (every 1s)")
        prom, base = start_prometheus(tmp, targets, "prometheus-net")
        procs.append(prom)
        for tg in targets:
            wait_for(f"the first scrape of {tg}", lambda tg=tg: target_up(base, tg), 30)
        print(f"   {base}, targets {', '.join(targets)}")

        step(f"transfers to each validator for {args.network_seconds:g}s")
        load_start = time.time()
        counts = load.run_network(urls, args.network_seconds)
        for k, v in sorted(counts.items()):
            print(f"   {v:6d}  {k}")
        for i, p in enumerate(procs[:VALIDATORS]):
            if p.poll() is not None:
                _died(f"validator {i}", tmp, f"v{i}.log")
        time.sleep(3)  # the last scrapes
        end = time.time()

        finalized = query_by_instance(base, "sluice_consensus_finalized_height")
        committed = query_by_instance(base, "sluice_pipeline_committed_height")
        included = query_by_instance(base, "sluice_txs_included_total")
        for i, tg in enumerate(targets):
            print(f"   v{i} {tg}: finalized {finalized.get(tg, 'none')}, committed {committed.get(tg, 'none')}, "
                  f"txs included {included.get(tg, 'none')}")
            if not finalized.get(tg):
                problem(f"validator {i} ({tg}) finalized nothing: the consensus panels would check a stalled network")

        step("template variable `instance` (network)")
        check_instance_variable(base, load_start, targets)

        step(f"every target of every consensus panel on each validator ($__rate_interval = {args.rate_interval})")
        evaluate_panels(base, dashboards, NETWORK_DASHBOARDS, targets, allow, load_start - 2, end,
                        args.rate_interval)
    finally:
        step("stopping Prometheus and the validators")
        stop_all(procs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    ap.add_argument("--node", default=os.path.join(target, "debug", "sluice"))
    ap.add_argument("--seconds", type=float, default=20, help="load duration (single node)")
    ap.add_argument("--network-seconds", type=float, default=20, help="transfers duration (validators)")
    ap.add_argument("--rate-interval", default="15s", help="what $__rate_interval becomes")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, TSDB)")
    args = ap.parse_args()
    began = time.time()
    # A SIGTERM (CI timeout) unwinds through the `finally`s below, which stop every process started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    step("static checks")
    dashboards = load_dashboards()
    static_checks(dashboards)
    allow = read_allowlist(dashboards)
    n_panels = sum(1 for _, _, d in dashboards for p in all_panels(d) if p.get("type") != "row")
    print(f"   {len(dashboards)} dashboards, {n_panels} panels, {len(allow)} expected-missing")

    step("promtool check config dashboards/prometheus/prometheus.yml")
    r = subprocess.run(["promtool", "check", "config", PROM_CONFIG], capture_output=True, text=True)
    if r.returncode:
        problem("promtool check config:\n" + r.stdout + r.stderr)

    tmp = tempfile.mkdtemp(prefix="sluice-dashboards-")
    node = prom = None
    try:
        # Small blocks still run on the parallel executor, and blocks of
        # contract calls on lanes while admission works, so the parallel
        # executor's panels have data under this light load (by default
        # blocks under 64 transactions run in order, and so do blocks of
        # contract calls admitted while they execute).
        env = {
            "SLUICE_MEMPOOL__MAX_TXS_PER_SENDER": "32",
            "SLUICE_PIPELINE__OCC_MIN_BLOCK_TXS": "2",
            "SLUICE_PIPELINE__OCC_LANES_WHILE_ADMITTING": "true",
        }
        ws_env = {"SLUICE_RPC__WS_MAX_CONNECTIONS": "2", "SLUICE_RPC__WS_PING_INTERVAL_MS": "1000"}
        with_ws = supported(args.node, {**env, **ws_env})
        if with_ws:
            env.update(ws_env)
        step(f"starting the node ({'with' if with_ws else 'without'} WebSocket)")
        node, url, target = start_node(args.node, tmp, env)
        print(f"   rpc {url}, metrics {target}, env {env}")
        single = {d["uid"] for _, _, d in dashboards} - NETWORK_DASHBOARDS
        step("every queried family exported by the fresh node, before any load")
        check_families_at_start(target, queried_families(dashboards, single), "the node")

        step("starting Prometheus (scrape every 1s)")
        prom, base = start_prometheus(tmp, [target])
        wait_for("the first scrape of the node", lambda: target_up(base, target), 30)
        print(f"   {base}")

        step(f"load for {args.seconds:g}s")
        load_start = time.time()
        counts = load.run(url, args.seconds, 32, with_ws)
        for k, v in sorted(counts.items()):
            print(f"   {v:6d}  {k}")
        if node.poll() is not None:
            _died("node", tmp, "node.log")
        time.sleep(3)  # the last scrapes
        end = time.time()

        step("promtool check metrics (a scrape of the loaded node)")
        scrape = http_get(f"http://{target}/metrics")
        r = subprocess.run(["promtool", "check", "metrics"], input=scrape, capture_output=True)
        out = (r.stdout + r.stderr).decode().strip()
        if r.returncode or out:
            problem("promtool check metrics:\n" + out)
        print(f"   {len(scrape)} bytes, {sum(1 for ln in scrape.splitlines() if ln and not ln.startswith(b'#'))} samples")

        step("template variable `instance`")
        check_instance_variable(base, load_start, [target])

        step(f"every target of every panel over the load window ($__rate_interval = {args.rate_interval})")
        evaluate_panels(base, dashboards, single, [target], allow, load_start - 2, end, args.rate_interval)

        step("stopping Prometheus and the node")
        stop_all([prom, node])
        prom = node = None

        check_network(args, dashboards, allow, tmp)
    except Exception as e:
        problem(f"{type(e).__name__}: {e}")
    finally:
        if prom or node:
            step("stopping Prometheus and the node")
            stop_all([prom, node])
        if args.keep or problems:
            print(f"   logs and data kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    took = time.time() - began
    step("done")
    if problems:
        print(f"\ndashboards check FAILED ({len(problems)} problems, {took:.0f}s)")
        sys.exit(1)
    print(f"\ndashboards check passed ({took:.0f}s)")


if __name__ == "__main__":
    main()
