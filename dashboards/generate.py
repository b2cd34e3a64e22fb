#!/usr/bin/env python3
"""Generates sluice's Grafana dashboards (dashboards/grafana/*.json).

This file is the source of the dashboards: edit it, then run
`python3 dashboards/generate.py`. `dashboards/check.sh` fails when the
committed JSON differs from what this script writes (`--check`).

Every panel queries the `datasource` template variable and filters on the
`instance` variable; rate windows are `$__rate_interval`; quantiles come
from histogram buckets.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "grafana")

DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"
I = 'instance=~"$instance"'


def sel(extra=""):
    """A label selector on the chosen instance, plus `extra` matchers."""
    return "{" + I + (", " + extra if extra else "") + "}"


def rate(metric, extra="", by=None):
    inner = f"rate({metric}{sel(extra)}[{RI}])"
    return f"sum by ({by}) ({inner})" if by else inner


def quantile(q, metric, by=None):
    labels = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, sum by ({labels}) (rate({metric}_bucket{sel()}[{RI}])))"


def avg_per(metric):
    """Mean observation of a histogram over the window."""
    return f"rate({metric}_sum{sel()}[{RI}]) / rate({metric}_count{sel()}[{RI}])"


def t(expr, legend="", instant=False):
    return {"expr": expr, "legend": legend, "instant": instant}


GREEN, YELLOW, RED = "green", "#EAB839", "red"


def thresholds(*steps):
    """steps: (value, color) pairs after the green base."""
    out = [{"color": GREEN, "value": None}]
    out += [{"color": c, "value": v} for v, c in steps]
    return {"mode": "absolute", "steps": out}


class Dashboard:
    def __init__(self, uid, title, description):
        self.uid, self.title, self.description = uid, title, description
        self.panels = []
        self.next_id = 1
        self.x = 0
        self.y = 0
        self.row_h = 0

    def _place(self, w, h):
        if self.x + w > 24:
            self.x, self.y = 0, self.y + self.row_h
            self.row_h = 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title):
        if self.x:
            self.x, self.y = 0, self.y + self.row_h
        self.row_h = 0
        self.panels.append({
            "id": self._id(), "type": "row", "title": title, "collapsed": False, "panels": [],
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
        })
        self.y += 1

    def panel(self, kind, title, description, targets, unit, w=12, h=8, defaults=None, options=None,
              custom=None, overrides=None):
        fd = {"unit": unit, "color": {"mode": "palette-classic"}}
        if kind == "timeseries":
            fd["custom"] = {
                "drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
                "spanNulls": False, "axisSoftMin": 0,
                "stacking": {"mode": "none", "group": "A"},
            }
            fd["custom"].update(custom or {})
        else:
            fd["color"] = {"mode": "thresholds"}
            fd["thresholds"] = thresholds()
        fd.update(defaults or {})
        reduce = {"calcs": ["lastNotNull"], "fields": "", "values": False}
        if kind == "timeseries":
            opts = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "desc"}}
        elif kind == "stat":
            opts = {"reduceOptions": reduce, "colorMode": "background", "graphMode": "area",
                    "justifyMode": "auto", "orientation": "auto", "textMode": "auto"}
        elif kind == "gauge":
            opts = {"reduceOptions": reduce, "showThresholdLabels": False, "showThresholdMarkers": True,
                    "orientation": "auto"}
        elif kind == "bargauge":
            opts = {"reduceOptions": reduce, "displayMode": "gradient", "orientation": "horizontal",
                    "showUnfilled": True, "minVizHeight": 10, "minVizWidth": 0, "valueMode": "color"}
        else:
            raise ValueError(kind)
        opts.update(options or {})
        tgts = []
        for i, tg in enumerate(targets):
            tgts.append({
                "datasource": DS, "refId": chr(ord("A") + i), "expr": tg["expr"],
                "legendFormat": tg["legend"] or "__auto", "range": not tg["instant"],
                "instant": tg["instant"], "editorMode": "code",
            })
        self.panels.append({
            "id": self._id(), "type": kind, "title": title, "description": description,
            "datasource": DS, "gridPos": self._place(w, h),
            "fieldConfig": {"defaults": fd, "overrides": overrides or []},
            "options": opts, "targets": tgts,
        })

    def ts(self, title, description, targets, unit, **kw):
        self.panel("timeseries", title, description, targets, unit, **kw)

    def json(self):
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["sluice"],
            "timezone": "browser",
            "editable": True,
            "graphTooltip": 1,
            "schemaVersion": 39,
            "version": 1,
            "refresh": "10s",
            "time": {"from": "now-15m", "to": "now"},
            "timepicker": {},
            "fiscalYearStartMonth": 0,
            "liveNow": False,
            "weekStart": "",
            "annotations": {"list": [{
                "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
                "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts",
                "type": "dashboard",
            }]},
            "links": [{
                "type": "dashboards", "tags": ["sluice"], "asDropdown": False, "includeVars": True,
                "keepTime": True, "title": "sluice dashboards", "icon": "external link", "targetBlank": False,
                "tooltip": "", "url": "",
            }],
            "templating": {"list": [
                {
                    "name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
                    "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [],
                    "refresh": 1, "regex": "", "skipUrlSync": False,
                },
                {
                    "name": "instance", "label": "Node", "type": "query", "datasource": DS,
                    "query": "label_values(sluice_build_info, instance)",
                    "definition": "label_values(sluice_build_info, instance)",
                    "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [],
                    "refresh": 2, "regex": "", "skipUrlSync": False, "sort": 1,
                },
            ]},
            "panels": self.panels,
        }


BLOCKS = "suffix:blocks"
TXPS = "suffix:tx/s"
BLOCKPS = "suffix:blocks/s"
STAGES = ["produced", "prepared", "executed", "committed"]


def height(stage):
    return f"sluice_pipeline_{stage}_height{sel()}"


def lag(a, b):
    return f"{height(a)} - {height(b)}"


def pipeline():
    d = Dashboard("sluice-pipeline", "sluice / Pipeline",
                  "Which stage is the bottleneck, how far execution is behind, and the block pipeline "
                  "from producer to store commit.")

    d.row("Bottleneck: which stage is behind?")
    lag_help = ("Blocks the {b} stage is behind the {a} stage. A lag that keeps growing means {b} is "
                "the bottleneck; a steady lag up to the mailbox bound between them is normal.")
    for a, b in zip(STAGES, STAGES[1:]):
        d.panel("gauge", f"Lag {a} → {b}", lag_help.format(a=a, b=b), [t(lag(a, b), f"{a} → {b}")], BLOCKS,
                w=4, h=6, defaults={"min": 0, "max": 20, "thresholds": thresholds((3, YELLOW), (10, RED))})
    d.panel("stat", "Execution behind head",
            "Blocks sealed by the producer but not yet executed (produced − executed height).",
            [t(lag("produced", "executed"), "blocks")], BLOCKS, w=4, h=6,
            defaults={"thresholds": thresholds((5, YELLOW), (20, RED))})
    d.panel("stat", "Execution behind head (time)",
            "Execution lag in blocks times the mean block interval: roughly how old the newest "
            "executed state is compared with the newest sealed block.",
            [t(f"({lag('produced', 'executed')}) * ({avg_per('sluice_block_interval_seconds')})", "behind")],
            "s", w=4, h=6, defaults={"thresholds": thresholds((1, YELLOW), (5, RED))})
    d.panel("stat", "Scrape up", "1 when Prometheus's last scrape of the node succeeded.",
            [t(f"up{sel()}", "up")], "none", w=2, h=6,
            defaults={"thresholds": {"mode": "absolute", "steps": [{"color": RED, "value": None},
                                                                    {"color": GREEN, "value": 1}]},
                      "mappings": [{"type": "value", "options": {"0": {"text": "DOWN"}, "1": {"text": "UP"}}}]},
            options={"graphMode": "none"})
    d.panel("stat", "Store halted", "1 after a failed commit: the store refuses further blocks.",
            [t(f"sluice_store_halted{sel()}", "halted")], "none", w=2, h=6,
            defaults={"thresholds": thresholds((1, RED)),
                      "mappings": [{"type": "value", "options": {"0": {"text": "OK"}, "1": {"text": "HALTED"}}}]},
            options={"graphMode": "none"})
    d.panel("bargauge", "Mailbox fill (peak depth / capacity)",
            "Peak messages waiting in each stage's mailbox over the window, as a share of its bound. "
            "A full mailbox means the stage reading it is the bottleneck and the stage before it waits. "
            "The mempool shards share one label: their value is the last shard sampled.",
            [t(f"max_over_time(sluice_mailbox_depth{sel()}[{RI}]) / sluice_mailbox_capacity{sel()}",
               "{{actor}}")],
            "percentunit", w=8, h=8, defaults={"min": 0, "max": 1,
                                               "thresholds": thresholds((0.5, YELLOW), (0.9, RED))})
    d.panel("bargauge", "Stage busy (handle time per second)",
            "Share of wall time each actor spends handling messages. The stage closest to 100% is "
            "the bottleneck. Shards are summed (several actors).",
            [t(rate("sluice_actor_handle_seconds_sum", by="actor"), "{{actor}}")],
            "percentunit", w=8, h=8, defaults={"min": 0, "max": 1,
                                               "thresholds": thresholds((0.6, YELLOW), (0.9, RED))})
    d.panel("stat", "Busiest stage",
            "The actor with the most handle time per second right now, and its busy share.",
            [t(f"topk(1, {rate('sluice_actor_handle_seconds_sum', by='actor')})", "{{actor}}", instant=True)],
            "percentunit", w=8, h=8, defaults={"thresholds": thresholds((0.6, YELLOW), (0.9, RED))},
            options={"textMode": "value_and_name", "graphMode": "none"})

    d.row("Pipeline")
    d.ts("Heights", "Height of the last block each stage finished.",
         [t(height(s), s) for s in STAGES], "none", custom={"fillOpacity": 0})
    d.ts("Lag between adjacent stages", "Blocks between each stage and the next.",
         [t(lag(a, b), f"{a} → {b}") for a, b in zip(STAGES, STAGES[1:])], BLOCKS)
    d.ts("Stage throughput", "Blocks per second each stage completes (slope of its height).",
         [t(f"deriv({height(s)}[{RI}])", s) for s in STAGES], BLOCKPS, custom={"fillOpacity": 0})
    d.ts("Included TPS", "Transactions applied in committed blocks per second.",
         [t(rate("sluice_txs_included_total"), "included")], TXPS)
    d.ts("Skipped transactions", "Transactions that could not be applied at their position in a block "
         "(nonce, funds, gas left): skipped deterministically, never breaking the block.",
         [t(rate("sluice_txs_skipped_total"), "skipped")], TXPS)
    d.ts("Transactions per block", "Transactions in each sealed block.",
         [t(quantile(0.5, "sluice_block_txs"), "p50"), t(quantile(0.99, "sluice_block_txs"), "p99"),
          t(avg_per("sluice_block_txs"), "mean")], "short")
    d.ts("Block interval", "Time between consecutive sealed blocks.",
         [t(quantile(0.5, "sluice_block_interval_seconds"), "p50"),
          t(quantile(0.99, "sluice_block_interval_seconds"), "p99"),
          t(avg_per("sluice_block_interval_seconds"), "mean")], "s")
    phases = [("prepare", "sluice_prepare_block_seconds"), ("execute", "sluice_execute_block_seconds"),
              ("commit", "sluice_store_commit_seconds")]
    d.ts("Ordered path time per block by phase (mean, stacked)",
         "Mean time per block in each ordered stage; the stack is the path a block takes after sealing.",
         [t(avg_per(m), p) for p, m in phases], "s", custom={"stacking": {"mode": "normal", "group": "A"},
                                                             "fillOpacity": 40})
    d.ts("Ordered path time per block by phase (p99)", "99th percentile time per block in each stage.",
         [t(quantile(0.99, m), p) for p, m in phases], "s", custom={"fillOpacity": 0})
    d.ts("Gas per block", "Gas used per executed block.",
         [t(quantile(0.5, "sluice_block_gas_used"), "p50"), t(avg_per("sluice_block_gas_used"), "mean")], "short")

    d.row("Preparation")
    d.ts("Prepared-tx cache hit ratio",
         "Share of transactions whose sender preparation found in the cache (recovered at admission).",
         [t(f"{rate('sluice_prepared_cache_hits_total')} / ({rate('sluice_prepared_cache_hits_total')} + "
            f"{rate('sluice_prepared_cache_misses_total')})", "hit ratio")], "percentunit", w=6,
         defaults={"min": 0, "max": 1})
    d.ts("Prepared-tx cache", "Entries held, and evictions per second.",
         [t(f"sluice_prepared_cache_entries{sel()}", "entries"),
          t(rate("sluice_prepared_cache_evictions_total"), "evictions/s")], "short", w=6,
         overrides=[{"matcher": {"id": "byName", "options": "evictions/s"},
                     "properties": [{"id": "unit", "value": "cps"}, {"id": "custom.axisPlacement", "value": "right"}]}])
    d.ts("Preparation time by phase (p99)", "Hashing, cache lookup and sender recovery per block.",
         [t(quantile(0.99, "sluice_prepare_phase_seconds", by="phase"), "{{phase}}")], "s", w=6)
    d.ts("Prepared ahead of execution", "Prepared blocks waiting for the execution stage "
         "(bounded by pipeline.prepare_ahead_blocks). At the bound, execution is the bottleneck; "
         "at 0 under load, preparation is.",
         [t(f"sluice_prepare_blocks_ahead{sel()}", "blocks ahead")], BLOCKS, w=6)

    d.row("Executor")
    d.ts("Blocks by execution path", "Blocks by the path that executed them: scheduled transfers and "
         "lanes (parallel), the one journal (in order, and whatever the parallel paths give up on).",
         [t(rate("sluice_occ_blocks_total", by="path"), "{{path}}")], BLOCKPS, w=8,
         custom={"stacking": {"mode": "normal", "group": "A"}})
    d.ts("In-order share", "Share of blocks run in order, by why: small blocks, one worker, "
         "the chooser, what the parallel paths do not model, contention.",
         [t(rate("sluice_occ_blocks_total", extra='reason!=""', by="reason")
            + " / ignoring(reason) group_left sum(" + rate("sluice_occ_blocks_total") + ")", "{{reason}}")],
         "percentunit", w=8,
         defaults={"min": 0, "max": 1})
    d.ts("Reruns and settles", "Transactions executed again on lanes because a chunk before theirs "
         "changed what they read; times the one journal settled within a block (after a creation, "
         "a self-destruct or an existing empty account, around an EIP-7702 transaction).",
         [t(f"sum({rate('sluice_occ_reruns_total')})", "reruns"),
          t(f"sum({rate('sluice_occ_settles_total')})", "settles")], "cps", w=8)
    d.ts("Parallel phase time (p99)", "Speculate, validate and merge time per block (scheduled "
         "transfers and lanes).",
         [t(quantile(0.99, "sluice_occ_phase_seconds", by="phase"), "{{phase}}")], "s", w=24)

    d.row("Store")
    d.ts("Commit latency", "Time to commit one block (database write, sync and in-memory apply).",
         [t(quantile(0.5, "sluice_store_commit_seconds"), "p50"),
          t(quantile(0.99, "sluice_store_commit_seconds"), "p99")], "s", w=6)
    d.ts("Sync time", "Time to write and sync one block to the database (synced commits only).",
         [t(quantile(0.5, "sluice_store_sync_seconds"), "p50"),
          t(quantile(0.99, "sluice_store_sync_seconds"), "p99")], "s", w=6)
    d.ts("Database size", "Size of the database file.",
         [t(f"sluice_store_db_bytes{sel()}", "database")], "bytes", w=6)
    d.ts("App hash height", "Height of the last app hash recorded, against the committed height.",
         [t(f"sluice_store_app_hash_height{sel()}", "app hash"), t(height("committed"), "committed")],
         "none", w=6, custom={"fillOpacity": 0})
    d.ts("Table bytes", "Bytes on disk of each of the store's tables: which one grows. In full mode "
         "(store.mode) the block tables stay flat once the retention is reached.",
         [t(f"sluice_store_table_bytes{sel()}", "{{table}}")], "bytes", w=12,
         custom={"stacking": {"mode": "normal", "group": "A"}})
    d.ts("Oldest block and state kept", "The oldest block kept (store.block_retention_blocks; 0 in "
         "archive mode) and the oldest block whose state can be read (store.history_blocks), against "
         "the committed height.",
         [t(f"sluice_store_oldest_block{sel()}", "oldest block"),
          t(f"sluice_store_oldest_state{sel()}", "oldest state"), t(height("committed"), "committed")],
         "none", w=12, custom={"fillOpacity": 0})
    return d


def admission():
    d = Dashboard("sluice-admission", "sluice / Admission & mempool",
                  "JSON-RPC traffic, transaction admission outcomes, nonce reservation and mempool occupancy.")
    d.row("JSON-RPC")
    d.ts("Requests by method", "JSON-RPC calls per second by method.",
         [t(rate("sluice_rpc_requests_total", by="method"), "{{method}}")], "reqps",
         custom={"stacking": {"mode": "normal", "group": "A"}})
    d.ts("Errors by code", "JSON-RPC error answers per second by error code.",
         [t(rate("sluice_rpc_errors_total", by="code"), "{{code}}")], "reqps")
    d.ts("Latency by method (p50)", "Median JSON-RPC call latency by method.",
         [t(quantile(0.5, "sluice_rpc_request_seconds", by="method"), "{{method}}")], "s")
    d.ts("Latency by method (p99)", "99th percentile JSON-RPC call latency by method.",
         [t(quantile(0.99, "sluice_rpc_request_seconds", by="method"), "{{method}}")], "s")
    d.ts("Call pool", "Calls that run the EVM for a caller (eth_call, estimates, access lists, traces) "
         "running on the call workers (rpc.call_workers) and waiting for one (rpc.call_queue_calls).",
         [t(f"sluice_rpc_calls_running{sel()}", "running"), t(f"sluice_rpc_calls_queued{sel()}", "waiting")],
         "short")
    d.ts("Calls refused and timed out", "Calls refused with -32005 because every call worker was busy "
         "and the queue full, calls answered at their deadline (execution aborted), and HTTP requests "
         "whose body did not arrive within rpc.read_timeout_ms (408).",
         [t(f"sum({rate('sluice_rpc_calls_refused_total')})", "refused"),
          t(f"sum({rate('sluice_rpc_calls_timed_out_total')})", "timed out"),
          t(f"sum({rate('sluice_http_timed_out_total')})", "bodies timed out")], "reqps")

    d.row("Transactions")
    d.ts("Admission outcomes by result", "Transactions offered to eth_sendRawTransaction, by outcome "
         "(ok, or the refusal reason).",
         [t(rate("sluice_tx_admission_total", by="result"), "{{result}}")], TXPS, w=10,
         custom={"stacking": {"mode": "normal", "group": "A"}})
    d.panel("stat", "Admitted share", "Share of offered transactions admitted over the window.",
            [t("sum(" + rate("sluice_tx_admission_total", extra='result="ok"') + ") / sum("
               + rate("sluice_tx_admission_total") + ")", "admitted")], "percentunit", w=4,
            defaults={"thresholds": {"mode": "absolute", "steps": [
                {"color": RED, "value": None}, {"color": YELLOW, "value": 0.5}, {"color": GREEN, "value": 0.9}]}})
    d.ts("Per-sender limit and pool-full refusals",
         "Transactions refused because their sender already has mempool.max_txs_per_sender admitted "
         "(sender_limit), or because the pool is full (txpool_full).",
         [t(rate("sluice_tx_admission_total", extra='result=~"sender_limit|txpool_full"', by="result"),
            "{{result}}")], TXPS, w=10)
    d.ts("Nonce reservation latency", "Time from submission to nonce reservation (the serialized step).",
         [t(quantile(0.5, "sluice_nonce_reserve_seconds"), "p50"),
          t(quantile(0.99, "sluice_nonce_reserve_seconds"), "p99")], "s")
    d.ts("Senders tracked", "Senders with admitted, unexecuted transactions.",
         [t(f"sluice_nonce_tracked_senders{sel()}", "senders")], "short")

    d.row("Mempool")
    d.ts("Mempool transactions", "Transactions waiting in the mempool.",
         [t(f"sluice_mempool_txs{sel()}", "transactions")], "short", w=8)
    d.ts("Mempool bytes", "Raw bytes waiting in the mempool.",
         [t(f"sluice_mempool_bytes{sel()}", "bytes")], "bytes", w=8)
    d.ts("Occupancy per shard", "Transactions waiting in each mempool shard (a sender maps to one shard).",
         [t(f"sluice_mempool_shard_txs{sel()}", "shard {{shard}}")], "short", w=8,
         custom={"stacking": {"mode": "normal", "group": "A"}})

    d.row("WebSocket")
    d.ts("Connections and subscriptions", "Open WebSocket connections and live subscriptions.",
         [t(f"sluice_ws_connections{sel()}", "connections"), t(f"sluice_ws_subscriptions{sel()}", "subscriptions")],
         "short", w=8)
    d.ts("Notifications sent", "Subscription notifications sent per second.",
         [t(rate("sluice_ws_notifications_total"), "notifications")], "cps", w=8)
    d.ts("Connections refused and dropped", "Handshakes refused at rpc.ws_max_connections, and connections "
         "the node closed by reason (lagging, send_timeout, silent, protocol, shutdown).",
         [t(rate("sluice_ws_refused_total"), "refused"),
          t(rate("sluice_ws_dropped_total", by="reason"), "dropped: {{reason}}")], "cps", w=8)
    return d


def actors():
    d = Dashboard("sluice-actors", "sluice / Actors & process",
                  "Per-actor mailboxes, handling time, rejections, restarts and injected faults; "
                  "the node process's CPU, memory, file descriptors and threads.")
    d.row("Mailboxes")
    d.ts("Mailbox depth", "Messages waiting in each actor's mailbox (sampled every 500 ms).",
         [t(f"sluice_mailbox_depth{sel()}", "{{actor}}")], "short")
    d.ts("Mailbox fill (depth / capacity)", "Each mailbox's depth as a share of its bound.",
         [t(f"sluice_mailbox_depth{sel()} / sluice_mailbox_capacity{sel()}", "{{actor}}")], "percentunit",
         defaults={"min": 0, "max": 1})
    d.panel("bargauge", "High-water mark / capacity",
            "The most messages ever seen waiting in each mailbox, as a share of its bound.",
            [t(f"sluice_mailbox_high_water{sel()} / sluice_mailbox_capacity{sel()}", "{{actor}}")],
            "percentunit", defaults={"min": 0, "max": 1, "thresholds": thresholds((0.5, YELLOW), (0.9, RED))})
    d.ts("Messages rejected because full", "Messages refused without waiting because the mailbox was full.",
         [t(rate("sluice_mailbox_rejected_total", by="actor"), "{{actor}}")], "cps")

    d.row("Handling")
    d.ts("Messages handled", "Messages each actor handles per second.",
         [t(rate("sluice_actor_messages_total", by="actor"), "{{actor}}")], "cps")
    d.ts("Busy share", "Share of wall time each actor spends handling messages (100% = saturated).",
         [t(rate("sluice_actor_handle_seconds_sum", by="actor"), "{{actor}}")], "percentunit",
         defaults={"min": 0})
    d.ts("Handle duration (p50)", "Median time to handle one message, per actor.",
         [t(quantile(0.5, "sluice_actor_handle_seconds", by="actor"), "{{actor}}")], "s")
    d.ts("Handle duration (p99)", "99th percentile time to handle one message, per actor.",
         [t(quantile(0.99, "sluice_actor_handle_seconds", by="actor"), "{{actor}}")], "s")

    d.row("Supervision")
    d.ts("Restarts", "Actor restarts after a failure, per actor.",
         [t(f"sum by (actor) (increase(sluice_actor_restarts_total{sel()}[{RI}]))", "{{actor}}")], "short",
         custom={"drawStyle": "bars", "fillOpacity": 80})
    d.ts("Injected faults", "Faults injected for testing, per actor and action.",
         [t(f"sum by (actor, action) (increase(sluice_faults_injected_total{sel()}[{RI}]))",
            "{{actor}} {{action}}")], "short", custom={"drawStyle": "bars", "fillOpacity": 80})

    d.row("Process")
    d.panel("stat", "Version", "The running build (sluice_build_info).",
            [t(f"sluice_build_info{sel()}", "{{version}}", instant=True)], "none", w=4, h=8,
            options={"textMode": "name", "colorMode": "none", "graphMode": "none"})
    d.ts("CPU", "CPU time used by the node per second of wall time (100% = one core).",
         [t(f"rate(sluice_process_cpu_seconds_total{sel()}[{RI}])", "cpu")], "percentunit", w=5)
    d.ts("Resident memory", "Resident set size of the node process.",
         [t(f"sluice_process_resident_memory_bytes{sel()}", "rss")], "bytes", w=5)
    d.ts("Open file descriptors", "Open file descriptors, and the soft limit (right axis).",
         [t(f"sluice_process_open_fds{sel()}", "open"), t(f"sluice_process_max_fds{sel()}", "limit")], "short",
         w=5, overrides=[{"matcher": {"id": "byName", "options": "limit"},
                          "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                                         {"id": "custom.axisPlacement", "value": "right"}]}])
    d.ts("Threads", "Threads in the node process.",
         [t(f"sluice_process_threads{sel()}", "threads")], "short", w=5)
    return d


def consensus():
    d = Dashboard("sluice-consensus", "sluice / Consensus",
                  "Validator mode: views, finality, how far execution trails finality, verify verdicts, "
                  "proposals put back or made empty, peers. A single node exports none of these.")
    d.row("Consensus")
    d.ts("View and finalized height", "The latest view entered, and the highest finalized height.",
         [t(f"sluice_consensus_view{sel()}", "view"),
          t(f"sluice_consensus_finalized_height{sel()}", "finalized")], "none", w=8, custom={"fillOpacity": 0})
    d.ts("Finalized, not yet committed", "Blocks agreed on by the validators but not yet executed and "
         "committed here (the seed system's received vs executed).",
         [t(f"sluice_consensus_lag_blocks{sel()}", "lag")], BLOCKS, w=8)
    d.ts("Notarized to finalized", "Time from a view's notarization to its finalization, seen here.",
         [t(quantile(0.5, "sluice_consensus_notarized_to_finalized_seconds"), "p50"),
          t(quantile(0.99, "sluice_consensus_notarized_to_finalized_seconds"), "p99")], "s", w=8)
    d.ts("Verify verdicts", "Other validators' proposals this one accepted or refused.",
         [t(rate("sluice_consensus_verify_total", by="verdict"), "{{verdict}}")], "cps", w=8)
    d.ts("Transactions put back", "Transactions of this validator's proposals that lost their height, "
         "put back at the front of its mempool.",
         [t(f"sum({rate('sluice_consensus_requeued_txs_total')})", "put back")], TXPS, w=8)
    d.ts("Empty proposals", "Proposals made empty on purpose: execution too far behind (exec_lag), or an "
         "own proposal unresolved on another branch (unresolved).",
         [t(rate("sluice_consensus_empty_proposals_total", by="reason"), "{{reason}}")], BLOCKPS, w=8)
    d.ts("Views nullified", "Views that ended without a block (leader slow, down or cut off), per second.",
         [t(f"sum({rate('sluice_consensus_nullified_views_total')})", "nullified")], "cps", w=8)
    d.panel("stat", "Since the last finalized block", "Seconds since this validator last saw a block "
            "finalized: more than a few block times means the network, or this validator, is stalled.",
            [t(f"time() - sluice_consensus_last_finalized_timestamp_seconds{sel()}", "seconds")], "s", w=8, h=6)
    d.panel("stat", "Peers connected", "Other validators this one is connected to.",
            [t(f"sluice_consensus_peers_connected{sel()}", "peers")], "none", w=8, h=6)
    d.panel("stat", "Followers connected", "Followers (consensus.followers_file) connected to this "
            "validator: they receive its blocks and certificates and never vote. On a follower: 0.",
            [t(f"sluice_consensus_followers_connected{sel()}", "followers")], "none", w=8, h=6)
    d.ts("Finalizations a follower verified", "On a follower: finalizations received and verified against "
         "the validator set (accepted), and those that did not verify (forged: the sender is blocked). "
         "Zero on a validator.",
         [t(rate("sluice_follower_finalizations_total", by="outcome"), "{{outcome}}")], "cps", w=8, h=6)
    d.ts("Peer links dropped as dead", "Peer connections that brought nothing, not even a ping, for "
         "consensus.p2p_idle_timeout_ms and were dropped and redialled: a cut link or partition. Zero "
         "on a healthy network.", [t(f"sum({rate('sluice_p2p_idle_disconnects_total')})", "dropped")],
         "cps", w=8, h=6)
    d.ts("Evidence of equivocation", "Conflicting votes a validator signed, verified by simplex and "
         "logged at warn with the proof (both signed votes): any non-zero value is a faulty or malicious "
         "validator.", [t(rate("sluice_consensus_evidence_total", by="kind"), "{{kind}}")], "cps", w=8, h=6)
    d.ts("Transactions between validators", "What this validator's clients sent it, sent on to the "
         "others (sent); what the others sent it (received), and how its admission answered each "
         "(already_known: a copy it had); batches dropped over a limit or malformed (refused).",
         [t(f"sum({rate('sluice_gossip_sent_txs_total')})", "sent"),
          t(f"sum({rate('sluice_gossip_received_txs_total')})", "received"),
          t(rate("sluice_gossip_admitted_total", by="result"), "admitted: {{result}}"),
          t(f"sum({rate('sluice_gossip_refused_batches_total')})", "refused batches")], TXPS, w=24, h=6)
    d.ts("Verified and committed height", "The highest height whose app hash a finalized block's state "
         "reference confirmed, against the committed height, and the oldest height consensus's archives "
         "keep (full mode: about store.block_retention_blocks below the committed one).",
         [t(f"sluice_verified_height{sel()}", "verified"), t(height("committed"), "committed"),
          t(f"sluice_consensus_archive_oldest_height{sel()}", "archive oldest")],
         "none", w=16, h=6, custom={"fillOpacity": 0})
    d.ts("Consensus archive bytes", "Bytes on disk of marshal's finalized archives (blocks and their "
         "certificates, consensus's own copy): flat once the retention is reached in full mode.",
         [t(f"sluice_consensus_archive_bytes{sel()}", "archives")], "bytes", w=8, h=6)
    return d


DASHBOARDS = [pipeline, admission, actors, consensus]


def render():
    return {f"{d.uid}.json": json.dumps(d.json(), indent=2, ensure_ascii=False) + "\n"
            for d in (make() for make in DASHBOARDS)}


def main():
    files = render()
    if sys.argv[1:] == ["--check"]:
        stale = [n for n, text in files.items()
                 if not os.path.exists(os.path.join(OUT, n)) or open(os.path.join(OUT, n)).read() != text]
        extra = sorted(set(f for f in os.listdir(OUT) if f.endswith(".json")) - set(files)) \
            if os.path.isdir(OUT) else []
        for n in stale:
            print(f"dashboards/grafana/{n} differs from generate.py: run python3 dashboards/generate.py")
        for n in extra:
            print(f"dashboards/grafana/{n} is not generated by generate.py")
        sys.exit(1 if stale or extra else 0)
    os.makedirs(OUT, exist_ok=True)
    for n, text in files.items():
        with open(os.path.join(OUT, n), "w") as f:
            f.write(text)
        print(f"wrote dashboards/grafana/{n}")


if __name__ == "__main__":
    main()
