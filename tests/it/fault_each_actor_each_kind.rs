//! Every actor survives every fault kind: for each actor (admission, nonce,
//! mempool shard, producer, preparer, executor, store commit) and each
//! action (panic, error, delay, drop, stall), under load, a failpoint is
//! armed over the `debug_` namespace for the next K hits; the pipeline
//! resumes, every admitted transaction is included (or, for a lost mempool
//! insert, its drop is reported with its hash), the metrics show each fired
//! fault and each restart, and no committed block changes. Then one actor is
//! made to panic for good: the node halts cleanly (admission refuses, reads
//! work, exit non-zero), and `sluice replay` re-executes the whole chain and
//! matches every app hash in the vault.
//!
//! K, delays, shards, the case order and the escalating actor come from a
//! printed seed; set FAULT_TEST_SEED to replay a failure.

use std::time::{Duration, Instant};

use alloy_primitives::{keccak256, Bytes, B256};
use rand::{seq::SliceRandom, Rng, SeedableRng};
use serde_json::{json, Value};
use sluice_txpool::Signer;

use crate::{backpressure_txpool_full::genesis_for, support::*};

const SITES: [&str; 7] =
    ["admission", "nonce", "mempool_shard", "producer", "preparer", "executor", "committer"];
const ACTIONS: [&str; 5] = ["panic", "error", "delay", "drop", "stall"];

/// Funded fresh senders, handed out one at a time.
struct Senders {
    left: Vec<Signer>,
}

impl Senders {
    fn next(&mut self) -> Signer {
        self.left.pop().expect("enough funded senders")
    }
}

/// A metric's value (0 when absent).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

fn debug(node: &TestNode, method: &str, params: Value) -> Value {
    node.call(method, params).unwrap_or_else(|e| panic!("{method}: {e}"))
}

/// Sends `raw` until admitted; faults at admission and nonce refuse with
/// -32603 and are retried. Returns the hash.
fn admit(node: &TestNode, raw: &Bytes, case: &str) -> B256 {
    for _ in 0..200 {
        match node.send(raw) {
            Ok(h) => return h,
            Err(e) if e["message"] == "already known" => return keccak256(raw),
            Err(e) if e["code"] == -32603 => {
                let msg = e["message"].as_str().unwrap_or_default();
                assert!(msg.contains("inject") || msg.contains("internal error"), "{case}: {e}");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("{case}: unexpected refusal {e}"),
        }
    }
    panic!("{case}: never admitted");
}

/// Waits until every hash has a receipt or a logged drop; returns the
/// receipts' block hashes and the dropped hashes.
fn settle(node: &TestNode, hashes: &[B256], case: &str) -> (Vec<(u64, B256)>, Vec<B256>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut included = Vec::new();
    let mut dropped = Vec::new();
    let mut waiting: Vec<B256> = hashes.to_vec();
    while !waiting.is_empty() {
        let log = node.log();
        let mut still = Vec::new();
        for h in waiting {
            let r = node.ok("eth_getTransactionReceipt", json!([h]));
            if !r.is_null() {
                assert_eq!(r["status"], "0x1", "{case}: {r}");
                included
                    .push((parse_u64(&r["blockNumber"]), r["blockHash"].as_str().unwrap().parse().unwrap()));
            } else if log.lines().any(|l| l.contains(&format!("{h}")) && l.contains("dropped")) {
                dropped.push(h);
            } else {
                still.push(h);
            }
        }
        waiting = still;
        if !waiting.is_empty() {
            assert!(
                Instant::now() < deadline,
                "{case}: never included nor reported: {waiting:?}\n{}",
                node.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    (included, dropped)
}

/// Two senders with two transactions each.
fn burst(node: &TestNode, senders: &mut Senders, case: &str) -> Vec<B256> {
    let to = random_signer().address();
    let mut out = Vec::new();
    for _ in 0..2 {
        let s = senders.next();
        for nonce in 0..2 {
            out.push(admit(node, &transfer(&s, nonce, to, 1), case));
        }
    }
    out
}

fn armed(node: &TestNode) -> bool {
    !debug(node, "debug_listFailpoints", json!([])).as_object().unwrap().is_empty()
}

#[allow(clippy::too_many_arguments)]
fn run_case(
    node: &TestNode,
    senders: &mut Senders,
    rng: &mut rand::rngs::StdRng,
    site: &str,
    action: &str,
    blocks: &mut Vec<(u64, B256)>,
    seed: u64,
) {
    let k: u64 = rng.random_range(1..=2);
    let spec = match action {
        "delay" | "stall" => format!("{action}({})*{k}", rng.random_range(20..=60)),
        _ => format!("{action}*{k}"),
    };
    let target = if site == "mempool_shard" && rng.random_bool(0.5) {
        format!("mempool_shard.{}", rng.random_range(0..4))
    } else {
        site.to_string()
    };
    let case = format!("seed {seed} case {target}={spec}");
    let started = Instant::now();
    let before = node.metrics();
    let mut hashes = burst(node, senders, &case);
    debug(node, "debug_setFailpoint", json!([target, spec]));
    // Load until every one of the K hits has fired.
    let to = random_signer().address();
    let deadline = Instant::now() + Duration::from_secs(15);
    while armed(node) {
        assert!(Instant::now() < deadline, "{case}: the failpoint never fired K times");
        hashes.push(admit(node, &transfer(&senders.next(), 0, to, 1), &case));
        std::thread::sleep(Duration::from_millis(5));
    }
    hashes.extend(burst(node, senders, &case));
    let (included, dropped) = settle(node, &hashes, &case);
    let after = node.metrics();
    let delta = |series: &str| metric(&after, series) - metric(&before, series);
    let fired = delta(&format!("sluice_faults_injected_total{{actor=\"{site}\",action=\"{action}\"}}"));
    assert_eq!(fired, k as f64, "{case}: faults counted");
    let restarts = delta(&format!("sluice_actor_restarts_total{{actor=\"{site}\"}}"));
    assert_eq!(restarts, if action == "panic" { k as f64 } else { 0.0 }, "{case}: restarts counted");
    assert_eq!(metric(&after, "sluice_store_halted"), 0.0, "{case}: the node must not halt");
    if !(site == "mempool_shard" && action == "drop") {
        assert!(dropped.is_empty(), "{case}: nothing may be lost: {dropped:?}");
    }
    for h in &dropped {
        assert!(
            node.ok("eth_getTransactionByHash", json!([h])).is_null(),
            "{case}: a dropped tx is forgotten"
        );
    }
    let reported =
        delta("sluice_txs_dropped_total{reason=\"fault_drop\"}") + delta("sluice_txs_skipped_total");
    assert!(reported >= dropped.len() as f64, "{case}: every drop is counted");
    blocks.extend(included);
    println!(
        "{case}: {} included, {} dropped, {:?}",
        hashes.len() - dropped.len(),
        dropped.len(),
        started.elapsed()
    );
}

/// One actor panics for good: the node halts cleanly.
fn escalate(node: &mut TestNode, senders: &mut Senders, site: &str, seed: u64) {
    let case = format!("seed {seed} escalation {site}=panic");
    debug(node, "debug_setFailpoint", json!([site, "panic"]));
    let to = random_signer().address();
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.metric("sluice_store_halted").unwrap_or(0.0) < 1.0 {
        assert!(Instant::now() < deadline, "{case}: never halted; log:\n{}", node.log());
        let _ = node.send(&transfer(&senders.next(), 0, to, 1));
        std::thread::sleep(Duration::from_millis(10));
    }
    let log = node.log();
    assert!(log.contains("too many failures; halting the node"), "{case}: no clear error");
    assert!(
        log.contains(&format!("supervision gave up on actor {site}: failed")),
        "{case}: the reason names the actor"
    );
    let e = node.send(&transfer(&senders.next(), 0, to, 1)).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("store halted"), "{case}: {e}");
    assert!(node.call("eth_blockNumber", json!([])).is_ok(), "{case}: reads keep working");
}

#[test]
fn every_actor_survives_every_fault_kind_and_escalates_to_a_clean_halt() {
    let seed: u64 =
        std::env::var("FAULT_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("fault test seed {seed}; replay with FAULT_TEST_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let funded: Vec<Signer> = (0..900).map(|_| random_signer()).collect();
    let dir = std::env::temp_dir().join(format!("sluice-faults-{}", std::process::id()));
    let genesis = genesis_for(&dir, &funded);
    let mut node = TestNode::start(
        &[
            ("SLUICE_FAULTS__DEBUG_RPC", "true"),
            ("SLUICE_SUPERVISION__MAX_FAILURES", "20"),
            ("SLUICE_SUPERVISION__WINDOW_MS", "120000"),
        ],
        &["--block-time-ms", "20", "--genesis", genesis.to_str().unwrap()],
    );
    let mut senders = Senders { left: funded };
    let mut cases: Vec<(&str, &str)> =
        SITES.iter().flat_map(|s| ACTIONS.iter().map(move |a| (*s, *a))).collect();
    cases.shuffle(&mut rng);
    // FAULT_TEST_ONLY=site:action[,...] runs (repeats of) only those cases.
    if let Ok(only) = std::env::var("FAULT_TEST_ONLY") {
        let wanted: Vec<&str> = only.split(',').collect();
        cases.retain(|(s, a)| wanted.contains(&format!("{s}:{a}").as_str()));
        let repeat: usize = std::env::var("FAULT_TEST_REPEAT").ok().and_then(|r| r.parse().ok()).unwrap_or(1);
        cases = cases.iter().cycle().take(cases.len() * repeat).copied().collect();
    }
    let mut blocks = Vec::new();
    for (site, action) in cases {
        run_case(&node, &mut senders, &mut rng, site, action, &mut blocks, seed);
    }
    // No committed block was lost or changed by any fault.
    for (number, hash) in &blocks {
        let b = node.ok("eth_getBlockByNumber", json!([format!("{number:#x}"), false]));
        let now: B256 = b["hash"].as_str().unwrap().parse().unwrap();
        assert_eq!(&now, hash, "seed {seed}: block {number} changed");
    }
    let halting = ["nonce", "mempool_shard", "producer", "preparer", "executor", "committer"];
    let site = halting[rng.random_range(0..halting.len())];
    escalate(&mut node, &mut senders, site, seed);
    assert!(!node.terminate().success(), "seed {seed}: a halted node exits non-zero");
    node.assert_replay_matches_vault(&format!("seed {seed}"));
    let _ = std::fs::remove_dir_all(dir);
}
