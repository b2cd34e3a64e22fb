//! Once a second: sample the live counters, the target's pipeline heights
//! (sluice's Prometheus gauges) and the node process (/proc), print one
//! progress line and keep the row for the plot and the JSON summary.

use std::{sync::atomic::Ordering::Relaxed, time::Duration};

use serde::Serialize;

use crate::stats::{Counters, ErrorClass};

/// The pipeline gauges scraped from sluice's metrics.
pub const PIPELINE_GAUGES: [&str; 4] = [
    "sluice_pipeline_produced_height",
    "sluice_pipeline_prepared_height",
    "sluice_pipeline_executed_height",
    "sluice_pipeline_committed_height",
];

/// Linux clock ticks per second for /proc CPU times (USER_HZ is 100 on
/// every Linux ABI this runs on).
const CLOCK_TICKS_PER_S: f64 = 100.0;

/// One second of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// Seconds since the start.
    pub t_s: f64,
    /// Slots scheduled in this second (per second).
    pub offered_tps: f64,
    /// Admitted per second.
    pub admitted_tps: f64,
    /// Rejected per second, all classes.
    pub rejected_tps: f64,
    /// `txpool is full` per second.
    pub txpool_full_tps: f64,
    /// Dropped per second.
    pub dropped_tps: f64,
    /// Transactions in scanned blocks per second.
    pub included_tps: f64,
    /// Slots due or sent and not answered.
    pub in_flight: i64,
    /// Highest block scanned.
    pub head: u64,
    /// produced, prepared, executed, committed heights (sluice only).
    pub pipeline: Option<[u64; 4]>,
    /// Node CPU use in this second, in cores.
    pub node_cpu_cores: Option<f64>,
    /// Node resident memory, MiB.
    pub node_rss_mib: Option<f64>,
}

/// Samples everything once a second.
pub struct Monitor {
    metrics: Option<ureq::Agent>,
    metrics_url: Option<String>,
    pid: Option<u32>,
    last: Snapshot,
    last_cpu_ticks: Option<u64>,
    /// Every row so far.
    pub rows: Vec<Row>,
}

#[derive(Default, Clone, Copy)]
struct Snapshot {
    t: f64,
    scheduled: u64,
    admitted: u64,
    rejected: u64,
    txpool_full: u64,
    dropped: u64,
    block_txs: u64,
}

fn snapshot(c: &Counters, t: f64) -> Snapshot {
    Snapshot {
        t,
        scheduled: c.scheduled.load(Relaxed),
        admitted: c.admitted.load(Relaxed),
        rejected: ErrorClass::ALL.iter().map(|k| c.rejected(*k)).sum(),
        txpool_full: c.rejected(ErrorClass::TxpoolFull),
        dropped: c.dropped.load(Relaxed),
        block_txs: c.block_txs.load(Relaxed),
    }
}

impl Monitor {
    /// A monitor; `metrics_url` and `pid` are optional.
    pub fn new(metrics_url: Option<String>, pid: Option<u32>) -> Monitor {
        let metrics = metrics_url.as_ref().map(|_| {
            ureq::AgentBuilder::new().timeout(Duration::from_millis(800)).max_idle_connections(1).build()
        });
        let last_cpu_ticks = pid.and_then(proc_cpu_ticks);
        Monitor { metrics, metrics_url, pid, last: Snapshot::default(), last_cpu_ticks, rows: Vec::new() }
    }

    /// Takes one sample at `t` seconds; returns the progress line.
    pub fn sample(&mut self, c: &Counters, t: f64) -> String {
        let now = snapshot(c, t);
        let dt = (now.t - self.last.t).max(1e-3);
        let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
        let pipeline = self.scrape();
        let cpu_ticks = self.pid.and_then(proc_cpu_ticks);
        let node_cpu_cores = match (cpu_ticks, self.last_cpu_ticks) {
            (Some(a), Some(b)) => Some(a.saturating_sub(b) as f64 / CLOCK_TICKS_PER_S / dt),
            _ => None,
        };
        self.last_cpu_ticks = cpu_ticks.or(self.last_cpu_ticks);
        let row = Row {
            t_s: t,
            offered_tps: per_s(now.scheduled, self.last.scheduled),
            admitted_tps: per_s(now.admitted, self.last.admitted),
            rejected_tps: per_s(now.rejected, self.last.rejected),
            txpool_full_tps: per_s(now.txpool_full, self.last.txpool_full),
            dropped_tps: per_s(now.dropped, self.last.dropped),
            included_tps: per_s(now.block_txs, self.last.block_txs),
            in_flight: c.in_flight.load(Relaxed),
            head: c.head.load(Relaxed),
            pipeline,
            node_cpu_cores,
            node_rss_mib: self.pid.and_then(|p| proc_status_kib(p, "VmRSS:")).map(|k| k as f64 / 1024.0),
        };
        self.last = now;
        let mut line = format!(
            "[{:>5.1}s] offered {:>6.0}/s admitted {:>6.0}/s rejected {:>6.0}/s",
            row.t_s, row.offered_tps, row.admitted_tps, row.rejected_tps
        );
        let classes: Vec<String> = ErrorClass::ALL
            .iter()
            .filter(|k| c.rejected(**k) > 0)
            .map(|k| format!("{}={}", k.label(), c.rejected(*k)))
            .collect();
        if !classes.is_empty() {
            line.push_str(&format!(" ({})", classes.join(" ")));
        }
        line.push_str(&format!(
            " dropped {:.0}/s included {:>6.0}/s in-flight {} head {}",
            row.dropped_tps, row.included_tps, row.in_flight, row.head
        ));
        if let Some([p, r, e, m]) = row.pipeline {
            line.push_str(&format!(
                " lag(prep {} exec {} commit {})",
                p - r.min(p),
                p - e.min(p),
                p - m.min(p)
            ));
        }
        if let (Some(cpu), Some(rss)) = (row.node_cpu_cores, row.node_rss_mib) {
            line.push_str(&format!(" node cpu {cpu:.2} rss {rss:.0}MiB"));
        }
        self.rows.push(row);
        line
    }

    fn scrape(&self) -> Option<[u64; 4]> {
        let (agent, url) = (self.metrics.as_ref()?, self.metrics_url.as_ref()?);
        let text = agent.get(url).call().ok()?.into_string().ok()?;
        parse_pipeline(&text)
    }
}

/// The four pipeline heights from Prometheus text (all must be present).
pub fn parse_pipeline(text: &str) -> Option<[u64; 4]> {
    let mut out = [0u64; 4];
    for (i, name) in PIPELINE_GAUGES.iter().enumerate() {
        let line = text.lines().find(|l| {
            l.strip_prefix(name).is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })?;
        out[i] = line.rsplit(' ').next()?.parse::<f64>().ok()? as u64;
    }
    Some(out)
}

/// utime + stime of a process, in clock ticks.
pub fn proc_cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after ')' are fixed.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line: 11 and 12 after ')'.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// CPU seconds a process has used.
pub fn proc_cpu_seconds(pid: u32) -> Option<f64> {
    proc_cpu_ticks(pid).map(|t| t as f64 / CLOCK_TICKS_PER_S)
}

/// A `/proc/PID/status` field in KiB (`VmRSS:`, `VmHWM:` = peak RSS).
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_gauges_parse_from_prometheus_text() {
        let text = "# HELP sluice_pipeline_produced_height x\nsluice_pipeline_produced_height 12\n\
                    sluice_pipeline_prepared_height 11\nsluice_pipeline_executed_height{a=\"b\"} 10\n\
                    sluice_pipeline_committed_height_other 1\nsluice_pipeline_committed_height 9\n";
        assert_eq!(parse_pipeline(text), Some([12, 11, 10, 9]));
        assert_eq!(parse_pipeline("sluice_pipeline_produced_height 1\n"), None);
    }

    #[test]
    fn own_process_is_readable_in_proc() {
        let me = std::process::id();
        assert!(proc_cpu_ticks(me).is_some());
        assert!(proc_status_kib(me, "VmHWM:").unwrap_or(0) > 0);
    }
}
