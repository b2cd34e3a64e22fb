//! The end-of-run summary: what to print, and the JSON `--json` writes.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{
    monitor::Row,
    stats::{Latency, Tally},
};

/// Resource use of the node process over the run (from /proc).
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeUsage {
    /// CPU seconds (user + system) used during the run.
    pub cpu_s: f64,
    /// Average cores busy over the run.
    pub cpu_cores_avg: f64,
    /// Peak resident memory (VmHWM), MiB.
    pub peak_rss_mib: f64,
    /// RSS about 60 s into the run, MiB.
    pub rss_at_60s_mib: Option<f64>,
    /// RSS about 300 s into the run, MiB.
    pub rss_at_300s_mib: Option<f64>,
    /// RSS at the end, MiB.
    pub rss_end_mib: Option<f64>,
}

/// Everything a run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// The target's name.
    pub label: String,
    /// The workload.
    pub workload: String,
    /// Sender keys used.
    pub senders: usize,
    /// Connections.
    pub connections: usize,
    /// Transactions per batch.
    pub batch: usize,
    /// Offered rate (None: unthrottled).
    pub offered_rate_tps: Option<f64>,
    /// Slots scheduled.
    pub scheduled: u64,
    /// Slots not sent (in-flight bound, or no transaction ready).
    pub dropped: u64,
    /// Transactions admitted.
    pub admitted: u64,
    /// Refusals, all classes.
    pub rejected: u64,
    /// Refusals by class.
    pub rejected_by_class: BTreeMap<String, u64>,
    /// scheduled == dropped + admitted + rejected.
    pub accounting_balanced: bool,
    /// Admitted transactions found in blocks.
    pub included: u64,
    /// Admitted transactions not found in a block before the drain ended.
    pub admitted_not_included: u64,
    /// Answers whose hash was not the keccak of the bytes sent.
    pub hash_mismatches: u64,
    /// Sampled receipts with status 1, and how many were checked.
    pub receipts_ok_sampled: (usize, usize),
    /// From the first slot to the last answer, seconds.
    pub send_window_s: f64,
    /// Slots scheduled per second of the send window.
    pub offered_tps: f64,
    /// Admitted per second of the send window.
    pub admitted_tps: f64,
    /// Included per second, from the start to the last inclusion.
    pub included_tps: f64,
    /// The best one-second included rate.
    pub included_tps_peak_1s: f64,
    /// From the start to the last inclusion, seconds.
    pub inclusion_window_s: f64,
    /// Answer time minus scheduled time.
    pub admission_latency: Latency,
    /// Time first seen in a block minus scheduled time.
    pub inclusion_latency: Latency,
    /// `eth_blockNumber` round trips during the run (the node keeps
    /// answering reads under load).
    pub read_latency: Latency,
    /// `eth_blockNumber` polls that failed.
    pub failed_reads: usize,
    /// Pre-signed transactions.
    pub presigned: u64,
    /// Seconds to pre-sign them (all cores).
    pub presign_s: f64,
    /// Single-threaded libsecp256k1 sender recovery, microseconds each.
    pub recovery_us_per_sig: Option<f64>,
    /// Cores of this machine.
    pub cores: usize,
    /// cores / recovery cost: the admission ceiling if every core did
    /// nothing but recover senders.
    pub recovery_ceiling_tps: Option<f64>,
    /// The node's resource use, when its pid was given.
    pub node: Option<NodeUsage>,
    /// This load generator's own CPU use over the run, in cores (it shares
    /// the machine with the node).
    pub loadgen_cpu_cores_avg: Option<f64>,
    /// Largest lag behind the producer seen (prepared, executed, committed).
    pub pipeline_max_lag: Option<[u64; 3]>,
    /// The first transport error, if any.
    pub first_error: Option<String>,
    /// One row per second.
    pub timeline: Vec<Row>,
}

impl Summary {
    /// Fills the counts from a tally.
    pub fn set_tally(&mut self, t: &Tally) {
        self.scheduled = t.scheduled;
        self.dropped = t.dropped;
        self.admitted = t.admitted;
        self.rejected = t.rejected_total();
        self.rejected_by_class = t.rejected.iter().map(|(c, n)| (c.label().to_string(), *n)).collect();
        self.accounting_balanced = t.balanced();
    }

    /// The largest lag per stage over the timeline.
    pub fn max_lag(rows: &[Row]) -> Option<[u64; 3]> {
        rows.iter().filter_map(|r| r.pipeline).fold(None, |acc, p| {
            let lag = [p[0].saturating_sub(p[1]), p[0].saturating_sub(p[2]), p[0].saturating_sub(p[3])];
            Some(match acc {
                None => lag,
                Some(a) => [a[0].max(lag[0]), a[1].max(lag[1]), a[2].max(lag[2])],
            })
        })
    }

    /// The human-readable summary.
    pub fn text(&self) -> String {
        let classes: Vec<String> = self.rejected_by_class.iter().map(|(c, n)| format!("{c}={n}")).collect();
        let rate = self.offered_rate_tps.map_or("unthrottled".to_string(), |r| format!("{r:.0}/s"));
        let mut s = format!(
            "summary {} ({}, {} senders, {} connections, batch {}, offered {})\n",
            self.label, self.workload, self.senders, self.connections, self.batch, rate
        );
        s += &format!(
            "  scheduled {} = dropped {} + admitted {} + rejected {}{} [{}]\n",
            self.scheduled,
            self.dropped,
            self.admitted,
            self.rejected,
            if classes.is_empty() { String::new() } else { format!(" ({})", classes.join(" ")) },
            if self.accounting_balanced { "balanced" } else { "NOT BALANCED" }
        );
        s += &format!(
            "  included {} of {} admitted ({} not included); receipts ok {}/{} sampled; hash mismatches {}\n",
            self.included,
            self.admitted,
            self.admitted_not_included,
            self.receipts_ok_sampled.0,
            self.receipts_ok_sampled.1,
            self.hash_mismatches
        );
        s += &format!(
            "  offered {:.0} tx/s, admitted {:.0} tx/s over {:.1} s; included {:.0} tx/s over {:.1} s (peak 1 s: {:.0})\n",
            self.offered_tps,
            self.admitted_tps,
            self.send_window_s,
            self.included_tps,
            self.inclusion_window_s,
            self.included_tps_peak_1s
        );
        let lat =
            |l: &Latency| format!("p50 {:.1} ms p99 {:.1} ms max {:.1} ms", l.p50_ms, l.p99_ms, l.max_ms);
        s += &format!("  admission latency {}\n", lat(&self.admission_latency));
        s += &format!("  inclusion latency {}\n", lat(&self.inclusion_latency));
        s += &format!(
            "  read latency (eth_blockNumber, {} polls, {} failed) {}\n",
            self.read_latency.count,
            self.failed_reads,
            lat(&self.read_latency)
        );
        s += &format!("  pre-signed {} txs in {:.1} s", self.presigned, self.presign_s);
        if let (Some(us), Some(ceiling)) = (self.recovery_us_per_sig, self.recovery_ceiling_tps) {
            s += &format!(
                "; sender recovery {us:.1} us/sig -> ceiling {ceiling:.0} tx/s on {} cores; included = {:.0}% of it",
                self.cores,
                100.0 * self.included_tps / ceiling
            );
        }
        s.push('\n');
        if let Some(n) = &self.node {
            s += &format!(
                "  node: {:.1} CPU s ({:.2} cores avg), peak RSS {:.0} MiB",
                n.cpu_s, n.cpu_cores_avg, n.peak_rss_mib
            );
            for (name, v) in
                [("60 s", n.rss_at_60s_mib), ("300 s", n.rss_at_300s_mib), ("end", n.rss_end_mib)]
            {
                if let Some(v) = v {
                    s += &format!(", RSS at {name} {v:.0} MiB");
                }
            }
            s.push('\n');
        }
        if let Some(l) = self.loadgen_cpu_cores_avg {
            s += &format!("  load generator: {l:.2} cores avg\n");
        }
        if let Some([p, e, c]) = self.pipeline_max_lag {
            s +=
                &format!("  max lag behind the producer: prepared {p}, executed {e}, committed {c} blocks\n");
        }
        if let Some(e) = &self.first_error {
            s += &format!("  first transport error: {e}\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ErrorClass;

    #[test]
    fn summary_carries_the_balance_and_prints_it() {
        let t = Tally { scheduled: 10, dropped: 1, admitted: 7, rejected: vec![(ErrorClass::TxpoolFull, 2)] };
        let mut s = Summary { label: "x".into(), ..Default::default() };
        s.set_tally(&t);
        assert!(s.accounting_balanced);
        assert_eq!(s.rejected_by_class.get("txpool_full"), Some(&2));
        let text = s.text();
        assert!(
            text.contains("scheduled 10 = dropped 1 + admitted 7 + rejected 2 (txpool_full=2) [balanced]"),
            "{text}"
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["scheduled"], 10);
    }

    #[test]
    fn max_lag_is_per_stage() {
        let rows = vec![
            Row { pipeline: Some([10, 9, 5, 4]), ..Default::default() },
            Row { pipeline: Some([20, 17, 18, 16]), ..Default::default() },
            Row::default(),
        ];
        assert_eq!(Summary::max_lag(&rows), Some([3, 5, 6]));
        assert_eq!(Summary::max_lag(&[]), None);
    }
}
