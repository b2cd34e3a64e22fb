//! One load run, from keys to summary.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use alloy_primitives::{Address, B256};
use sluice_txpool::Signer;

use crate::{
    cli::{RunArgs, WorkloadKind},
    contracts,
    engine::{Admitted, Worker, WorkerConfig, WorkerResult},
    keys,
    monitor::{self, Monitor},
    plot,
    report::{NodeUsage, Summary},
    rpc::Rpc,
    scanner::Scanner,
    schedule::Schedule,
    setup,
    stats::{Counters, Latency},
    workload::{presign, Fees, SenderTxs, Workload},
    LoadError,
};

const GWEI: u128 = 1_000_000_000;
/// Receipts checked after the run (status 1 proves contract calls worked).
const RECEIPT_SAMPLE: usize = 20;

fn check(args: &RunArgs) -> Result<(), LoadError> {
    let urls = args.urls();
    if urls.is_empty() {
        return Err(LoadError::Args("--url names no endpoint".into()));
    }
    for url in urls.iter().chain(args.scan_url.iter()) {
        setup::check_loopback(url)?;
    }
    // Senders are pinned to URLs through their connections.
    if args.connections < urls.len() {
        return Err(LoadError::Args(format!(
            "--connections ({}) must be at least the number of --url endpoints ({})",
            args.connections,
            urls.len()
        )));
    }
    if let Some(m) = &args.metrics_url {
        setup::check_loopback(m)?;
    }
    if args.duration_s.is_none() && args.count.is_none() {
        return Err(LoadError::Args("give --duration-s or --count".into()));
    }
    if args.tps.is_none() && args.count.is_none() && args.txs.is_none() {
        return Err(LoadError::Args("an unthrottled duration run needs --txs (how many to pre-sign)".into()));
    }
    // Written so NaN is refused too.
    if args.tps.is_some_and(|r| r.is_nan() || r <= 0.0) {
        return Err(LoadError::Args("--tps must be positive".into()));
    }
    if !(0.0..=1.0).contains(&args.conflict_rate) {
        return Err(LoadError::Args("--conflict-rate must be within 0 and 1".into()));
    }
    if args.batch == 0 || args.connections == 0 || args.max_in_flight < args.connections {
        return Err(LoadError::Args("--batch, --connections and --max-in-flight must be positive".into()));
    }
    Ok(())
}

/// Runs a load as `args` says; prints progress and the summary.
pub fn run(args: &RunArgs) -> Result<Summary, LoadError> {
    check(args)?;
    let rpc = Rpc::new(&args.scan_url(), Duration::from_millis(args.request_timeout_ms));
    let chain_id = setup::chain_id(&rpc)?;
    let signers: Vec<Signer> = match (args.accounts, args.mnemonic_accounts) {
        (Some(n), _) => keys::seeded_keys(args.seed, n as usize),
        (None, Some(n)) => keys::mnemonic_keys(n)?,
        (None, None) => keys::mnemonic_keys(10)?,
    };
    if signers.is_empty() {
        return Err(LoadError::Args("no sender keys".into()));
    }
    let fees = Fees {
        chain_id,
        max_fee_wei: u128::from(args.max_fee_gwei) * GWEI,
        tip_wei: u128::from(args.tip_gwei) * GWEI,
    };
    // The token workloads: a token, and every sender minted (a holder).
    let token_setup = || -> Result<Address, LoadError> {
        let token = setup::deploy(&rpc, &fees, &signers[0], &contracts::token_runtime())?;
        eprintln!("setup: token at {token}; minting for {} senders", signers.len());
        setup::mint_all(&rpc, &fees, token, &signers)?;
        Ok(token)
    };
    let workload = match args.workload {
        WorkloadKind::Transfer => Workload::Transfer,
        WorkloadKind::Conflict => Workload::Conflict { rate: args.conflict_rate },
        WorkloadKind::Existing => {
            if args.existing_accounts == 0 {
                return Err(LoadError::Args("--existing-accounts must be at least 1".into()));
            }
            Workload::Existing { accounts: args.existing_accounts }
        }
        WorkloadKind::Counter => {
            let counter = setup::deploy(&rpc, &fees, &signers[0], &contracts::counter_runtime())?;
            eprintln!("setup: counter at {counter}");
            Workload::Counter { counter }
        }
        WorkloadKind::Erc20 => Workload::Erc20 { token: token_setup()? },
        WorkloadKind::Erc20Holders => Workload::Erc20Holders { token: token_setup()? },
        WorkloadKind::Mixed => Workload::Mixed { token: token_setup()? },
    };
    let addrs: Vec<Address> = signers.iter().map(Signer::address).collect();
    let nonces = setup::pending_nonces(&rpc, &addrs)?;
    let slots = match (args.count, args.tps, args.duration_s) {
        (Some(c), _, _) => c,
        (None, Some(r), Some(d)) => (r * d).ceil() as u64,
        _ => u64::MAX,
    };
    let presigned = args.txs.unwrap_or(slots);
    eprintln!("pre-signing {presigned} transactions for {} senders on all cores", signers.len());
    let sign_start = Instant::now();
    let txs = presign(&workload, &fees, args.seed, &signers, &nonces, presigned);
    let presign_s = sign_start.elapsed().as_secs_f64();
    let sample: Vec<_> = txs.iter().flat_map(|s| s.txs.iter()).take(args.recovery_sample).collect();
    let recovery_us = setup::recovery_cost_us(&sample);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!(
        "pre-signed in {presign_s:.1} s; sender recovery {} us/sig",
        recovery_us.map_or("-".into(), |u| format!("{u:.1}"))
    );

    let start_block = setup::block_number(&rpc)?;
    let counters = Arc::new(Counters::default());
    let pid = args.node_pid;
    let cpu_before = pid.and_then(monitor::proc_cpu_seconds);
    let own_cpu_before = monitor::proc_cpu_seconds(std::process::id());
    let mut mon = Monitor::new(args.metrics_url.clone(), pid);
    mon.sample(&counters, 0.0);
    let t0 = Instant::now();
    let scanner = Scanner::start(&args.scan_url(), start_block, t0, counters.clone());
    let schedule_end = args.duration_s.map(Duration::from_secs_f64);
    let nominal = schedule_end.or_else(|| args.tps.map(|r| Duration::from_secs_f64(slots as f64 / r)));
    let deadline = nominal.unwrap_or_default() + Duration::from_secs(args.overrun_s);
    let workers = spawn_workers(args, txs, &addrs, slots, schedule_end, deadline, &counters, t0);

    // Sending phase: a progress line a second until every thread is done.
    let mut next_tick = Duration::from_secs(1);
    while !workers.iter().all(|h| h.is_finished()) {
        tick(&mut mon, &counters, t0, &mut next_tick);
    }
    let results: Vec<WorkerResult> = workers.into_iter().filter_map(|h| h.join().ok()).collect();
    let send_window = results.iter().map(|r| r.last_answer).max().unwrap_or_default();

    // Drain: wait for admitted transactions to show up in blocks.
    let admitted: Vec<Admitted> = results.iter().flat_map(|r| r.admitted.iter().copied()).collect();
    let mut remaining: HashSet<B256> = admitted.iter().map(|a| a.hash).collect();
    let drain_end = t0.elapsed() + Duration::from_secs(args.drain_timeout_s);
    loop {
        {
            let seen = scanner.seen.lock();
            remaining.retain(|h| !seen.contains_key(h));
        }
        if remaining.is_empty() || t0.elapsed() >= drain_end {
            break;
        }
        tick(&mut mon, &counters, t0, &mut next_tick);
    }
    let end_t = t0.elapsed().as_secs_f64();
    if mon.rows.last().is_none_or(|r| end_t - r.t_s > 0.2) {
        eprintln!("{}", mon.sample(&counters, end_t));
    }
    let (seen, reads) = scanner.stop();
    let seen = seen.lock();

    let mut summary = Summary {
        label: args.label.clone(),
        workload: args.workload.name(),
        senders: signers.len(),
        connections: args.connections,
        batch: args.batch,
        offered_rate_tps: args.tps,
        presigned,
        presign_s,
        recovery_us_per_sig: recovery_us,
        cores,
        recovery_ceiling_tps: recovery_us.map(|us| cores as f64 * 1e6 / us),
        ..Default::default()
    };
    summary.set_tally(&counters.tally());
    let mut inclusion_us: Vec<u32> = Vec::with_capacity(admitted.len());
    let mut last_inclusion_us = 0u64;
    let mut included_hashes = Vec::new();
    for a in &admitted {
        if let Some(&at) = seen.get(&a.hash) {
            inclusion_us.push(at.saturating_sub(a.scheduled_us).min(u64::from(u32::MAX)) as u32);
            last_inclusion_us = last_inclusion_us.max(at);
            if included_hashes.len() < RECEIPT_SAMPLE {
                included_hashes.push(a.hash);
            }
        }
    }
    summary.included = inclusion_us.len() as u64;
    summary.admitted_not_included = summary.admitted - summary.included;
    summary.hash_mismatches = results.iter().map(|r| r.hash_mismatches).sum();
    summary.receipts_ok_sampled = setup::sample_receipts(&rpc, &included_hashes);
    summary.send_window_s = send_window.as_secs_f64();
    let per_s = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    // Offered: over the schedule's own span when it has one, so a slow
    // target does not make the offered rate look lower than it was.
    let span = nominal.map_or(summary.send_window_s, |d| d.as_secs_f64());
    summary.offered_tps = per_s(summary.scheduled, span);
    summary.admitted_tps = per_s(summary.admitted, summary.send_window_s);
    summary.inclusion_window_s = last_inclusion_us as f64 / 1e6;
    summary.included_tps = per_s(summary.included, summary.inclusion_window_s);
    summary.included_tps_peak_1s = mon.rows.iter().map(|r| r.included_tps).fold(0.0, f64::max);
    let mut admission_us: Vec<u32> = results.iter().flat_map(|r| r.admission_us.iter().copied()).collect();
    summary.admission_latency = Latency::from_micros(&mut admission_us);
    summary.inclusion_latency = Latency::from_micros(&mut inclusion_us);
    let mut reads = std::mem::take(&mut *reads.lock());
    summary.failed_reads = reads.iter().filter(|&&r| r == u32::MAX).count();
    reads.retain(|&r| r != u32::MAX);
    summary.read_latency = Latency::from_micros(&mut reads);
    summary.first_error = results.iter().find_map(|r| r.first_error.clone());
    summary.pipeline_max_lag = Summary::max_lag(&mon.rows);
    summary.node = pid.map(|p| node_usage(p, cpu_before, end_t, &mon));
    summary.loadgen_cpu_cores_avg = match (monitor::proc_cpu_seconds(std::process::id()), own_cpu_before) {
        (Some(a), Some(b)) if end_t > 0.0 => Some((a - b) / end_t),
        _ => None,
    };
    summary.timeline = std::mem::take(&mut mon.rows);
    print!("{}", summary.text());
    write_outputs(args, &summary)?;
    Ok(summary)
}

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
fn spawn_workers(
    args: &RunArgs,
    txs: Vec<SenderTxs>,
    addrs: &[Address],
    slots: u64,
    schedule_end: Option<Duration>,
    deadline: Duration,
    counters: &Arc<Counters>,
    t0: Instant,
) -> Vec<std::thread::JoinHandle<WorkerResult>> {
    let n = args.connections;
    let mut groups: Vec<Vec<(Address, SenderTxs)>> = (0..n).map(|_| Vec::new()).collect();
    for s in txs {
        groups[s.sender % n].push((addrs[s.sender], s));
    }
    let schedules = Schedule::split(args.tps, slots, n);
    let urls = args.urls();
    groups
        .into_iter()
        .zip(schedules)
        .enumerate()
        .filter_map(|(i, (group, schedule))| {
            let cfg = WorkerConfig {
                // Connection i (and so every sender in its group) talks to
                // one endpoint only.
                url: urls.get(i % urls.len().max(1)).cloned().unwrap_or_else(|| args.url.clone()),
                batch: args.batch,
                batch_wait: Duration::from_millis(args.batch_wait_ms),
                max_in_flight: (args.max_in_flight / n).max(1),
                schedule_end,
                deadline,
                request_timeout: Duration::from_millis(args.request_timeout_ms),
            };
            let worker = Worker::new(cfg, schedule, group, counters.clone());
            std::thread::Builder::new().name(format!("load-sender-{i}")).spawn(move || worker.run(t0)).ok()
        })
        .collect()
}

/// Sleeps a little; prints a progress line when a second has passed.
fn tick(mon: &mut Monitor, counters: &Counters, t0: Instant, next_tick: &mut Duration) {
    std::thread::sleep(Duration::from_millis(50));
    let now = t0.elapsed();
    if now >= *next_tick {
        eprintln!("{}", mon.sample(counters, now.as_secs_f64()));
        *next_tick += Duration::from_secs(1);
    }
}

fn node_usage(pid: u32, cpu_before: Option<f64>, end_t: f64, mon: &Monitor) -> NodeUsage {
    let cpu_s = match (monitor::proc_cpu_seconds(pid), cpu_before) {
        (Some(a), Some(b)) => a - b,
        _ => 0.0,
    };
    let rss_near = |t: f64| mon.rows.iter().filter(|r| (r.t_s - t).abs() <= 1.5).find_map(|r| r.node_rss_mib);
    NodeUsage {
        cpu_s,
        cpu_cores_avg: if end_t > 0.0 { cpu_s / end_t } else { 0.0 },
        peak_rss_mib: monitor::proc_status_kib(pid, "VmHWM:").map_or(0.0, |k| k as f64 / 1024.0),
        rss_at_60s_mib: rss_near(60.0),
        rss_at_300s_mib: rss_near(300.0),
        rss_end_mib: mon.rows.iter().rev().find_map(|r| r.node_rss_mib),
    }
}

fn write_outputs(args: &RunArgs, summary: &Summary) -> Result<(), LoadError> {
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(summary)?;
        std::fs::write(path, text).map_err(|e| LoadError::io(path, e))?;
    }
    if let Some(path) = &args.plot {
        let rate = args.tps.map_or("unthrottled".to_string(), |r| format!("{r:.0} tx/s offered"));
        let title = format!("{}: {} workload, {rate}", args.label, summary.workload);
        std::fs::write(path, plot::svg(&title, &summary.timeline)).map_err(|e| LoadError::io(path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn arguments_are_checked_before_anything_is_sent() {
        let parse =
            |a: &[&str]| Cli::try_parse_from(std::iter::once("load").chain(a.iter().copied())).unwrap().run;
        assert!(check(&parse(&["--count", "10"])).is_ok());
        assert!(check(&parse(&[])).is_err(), "needs a duration or a count");
        assert!(check(&parse(&["--duration-s", "5"])).is_err(), "unthrottled duration needs --txs");
        assert!(check(&parse(&["--count", "1", "--url", "http://192.168.1.1:8545"])).is_err());
        assert!(check(&parse(&["--count", "1", "--conflict-rate", "1.5"])).is_err());
        assert!(check(&parse(&["--count", "1", "--tps", "0"])).is_err());
        // Several endpoints: each must be on loopback, and each needs a
        // connection of its own.
        let four = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3,http://127.0.0.1:4";
        let args = parse(&["--count", "1", "--url", four]);
        assert!(check(&args).is_ok());
        assert_eq!(args.urls().len(), 4);
        assert_eq!(args.scan_url(), "http://127.0.0.1:1");
        assert!(check(&parse(&["--count", "1", "--url", four, "--connections", "2"])).is_err());
        let bad = "http://127.0.0.1:1,http://10.0.0.1:2";
        assert!(check(&parse(&["--count", "1", "--url", bad, "--connections", "2"])).is_err());
        let scan = parse(&["--count", "1", "--url", four, "--scan-url", "http://127.0.0.1:9"]);
        assert_eq!(scan.scan_url(), "http://127.0.0.1:9");
    }

    #[test]
    fn workloads_are_named_as_typed() {
        let parse =
            |a: &[&str]| Cli::try_parse_from(std::iter::once("load").chain(a.iter().copied())).unwrap().run;
        for name in ["transfer", "erc20", "erc20-holders", "mixed"] {
            assert_eq!(parse(&["--count", "1", "--workload", name]).workload.name(), name);
        }
        assert_eq!(parse(&["--count", "1"]).workload, WorkloadKind::Transfer);
    }
}
