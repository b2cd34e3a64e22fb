//! Offered load far above capacity for a bounded time: the node keeps
//! answering `eth_blockNumber` and balance reads quickly (p99 measured and
//! bounded), sheds transactions with `-32003 txpool is full` and nothing
//! else, keeps its memory bounded, and once the load stops includes every
//! admitted transaction and serves as before.
//!
//! Capacity is pinned by an injected executor delay (every block takes at
//! least 100 ms, 50 transactions each: at most 500 tx/s), so the offered
//! load is well above it on any machine.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use alloy_primitives::{keccak256, Bytes, B256};
use serde_json::{json, Value};

use crate::{backpressure_txpool_full::genesis_for, support::*};

const LOAD: Duration = Duration::from_secs(3);

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() * 99 / 100).copied().unwrap_or_default()
}

/// Offers batches from `queue` until `stop`; refused transactions go back
/// to the queue. Returns the admitted hashes.
fn offer(
    url: String,
    queue: Arc<Mutex<VecDeque<Bytes>>>,
    stop: Arc<AtomicBool>,
    shed: Arc<AtomicU64>,
) -> Vec<B256> {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let mut admitted = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let batch: Vec<Bytes> = {
            let mut q = queue.lock().unwrap();
            let n = q.len().min(50);
            q.drain(..n).collect()
        };
        let calls: Vec<Value> = batch
            .iter()
            .enumerate()
            .map(|(i, raw)| json!({"jsonrpc": "2.0", "id": i, "method": "eth_sendRawTransaction", "params": [raw]}))
            .collect();
        let text = agent
            .post(&url)
            .set("content-type", "application/json")
            .send_string(&Value::Array(calls).to_string())
            .unwrap()
            .into_string()
            .unwrap();
        let answers: Value = serde_json::from_str(&text).unwrap();
        for a in answers.as_array().unwrap() {
            let raw = &batch[a["id"].as_u64().unwrap() as usize];
            match a.get("error") {
                None => admitted.push(keccak256(raw)),
                Some(e) => {
                    assert_eq!(
                        (e["code"].as_i64(), e["message"].as_str()),
                        (Some(-32003), Some("txpool is full"))
                    );
                    shed.fetch_add(1, Ordering::Relaxed);
                    queue.lock().unwrap().push_back(raw.clone());
                }
            }
        }
    }
    admitted
}

/// Times reads until `stop`: (eth_blockNumber, eth_getBalance) latencies.
fn read_latencies(url: &str, stop: &AtomicBool) -> (Vec<Duration>, Vec<Duration>) {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let (mut heads, mut balances) = (Vec::new(), Vec::new());
    let who = dev(1).address();
    while !stop.load(Ordering::Relaxed) {
        for (method, params, into) in [
            ("eth_blockNumber", json!([]), &mut heads),
            ("eth_getBalance", json!([who, "latest"]), &mut balances),
        ] {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
            let t = Instant::now();
            let text = agent
                .post(url)
                .set("content-type", "application/json")
                .send_string(&body)
                .unwrap()
                .into_string()
                .unwrap();
            into.push(t.elapsed());
            assert!(text.contains("\"result\""), "{method}: {text}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (heads, balances)
}

#[test]
fn overload_sheds_with_txpool_full_keeps_reads_fast_and_recovers() {
    let senders: Vec<_> = (0..2500).map(|_| random_signer()).collect();
    let dir = std::env::temp_dir().join(format!("sluice-overload-{}", std::process::id()));
    let genesis = genesis_for(&dir, &senders);
    let node = TestNode::start(
        &[
            ("SLUICE_MEMPOOL__MAX_TXS", "300"),
            ("SLUICE_FAULTS__FAILPOINTS", "executor=delay(100)"),
            ("SLUICE_FAULTS__DEBUG_RPC", "true"),
        ],
        &["--block-time-ms", "50", "--max-block-txs", "50", "--genesis", genesis.to_str().unwrap()],
    );
    let sink = random_signer().address();
    let queue: Arc<Mutex<VecDeque<Bytes>>> =
        Arc::new(Mutex::new(senders.iter().map(|s| transfer(s, 0, sink, 1)).collect()));
    std::thread::sleep(Duration::from_millis(600));
    let rss_before = node.metric("sluice_process_resident_memory_bytes").unwrap_or(0.0);

    let stop = Arc::new(AtomicBool::new(false));
    let shed = Arc::new(AtomicU64::new(0));
    let offerers: Vec<_> = (0..4)
        .map(|_| {
            let (url, q, stop, shed) =
                (node.url.clone(), Arc::clone(&queue), Arc::clone(&stop), Arc::clone(&shed));
            std::thread::spawn(move || offer(url, q, stop, shed))
        })
        .collect();
    let reader = {
        let (url, stop) = (node.url.clone(), Arc::clone(&stop));
        std::thread::spawn(move || read_latencies(&url, &stop))
    };
    let start = Instant::now();
    let mut rss_peak: f64 = 0.0;
    while start.elapsed() < LOAD {
        std::thread::sleep(Duration::from_millis(250));
        rss_peak = rss_peak.max(node.metric("sluice_process_resident_memory_bytes").unwrap_or(0.0));
    }
    stop.store(true, Ordering::Relaxed);
    let admitted: Vec<B256> = offerers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let (heads, balances) = reader.join().unwrap();
    let shed = shed.load(Ordering::Relaxed);
    let offered = admitted.len() as u64 + shed;
    let (p99_head, p99_balance) = (p99(heads.clone()), p99(balances.clone()));
    println!(
        "offered {offered} in {LOAD:?} ({:.0}/s), admitted {}, shed {shed}; reads: {} blockNumber p99 {p99_head:?}, {} getBalance p99 {p99_balance:?}; RSS {:.0} MiB -> peak {:.0} MiB",
        offered as f64 / LOAD.as_secs_f64(),
        admitted.len(),
        heads.len(),
        balances.len(),
        rss_before / 1048576.0,
        rss_peak / 1048576.0
    );
    assert!(shed > offered / 2, "most of an overload must be shed: {shed} of {offered}");
    assert!(heads.len() > 20, "reads kept being answered during the overload");
    assert!(p99_head < Duration::from_millis(500), "eth_blockNumber p99 {p99_head:?}");
    assert!(p99_balance < Duration::from_millis(500), "eth_getBalance p99 {p99_balance:?}");
    assert!(
        rss_peak < rss_before + 256.0 * 1048576.0,
        "memory grew without bound: {rss_before} -> {rss_peak}"
    );

    // Load gone, capacity back: everything admitted is included.
    node.ok("debug_clearFailpoints", json!([]));
    for chunk in admitted.chunks(200) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let calls: Vec<Value> = chunk
                .iter()
                .map(|h| json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionReceipt", "params": [h]}))
                .collect();
            let answers = node.post(&Value::Array(calls));
            if answers.as_array().unwrap().iter().all(|a| a["result"]["status"] == "0x1") {
                break;
            }
            assert!(Instant::now() < deadline, "admitted transactions never included after the overload");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // And it serves as before: a new transaction is admitted and included
    // promptly, and reads are fast again.
    let t = Instant::now();
    let h = node.send(&transfer(&dev(2), 0, sink, 1)).unwrap();
    node.receipt(&h);
    assert!(t.elapsed() < Duration::from_secs(3), "inclusion after the overload took {:?}", t.elapsed());
    let quiet: Vec<Duration> = (0..50)
        .map(|_| {
            let t = Instant::now();
            node.ok("eth_blockNumber", json!([]));
            t.elapsed()
        })
        .collect();
    assert!(p99(quiet.clone()) < Duration::from_millis(100), "reads after the overload: {:?}", p99(quiet));
    assert_eq!(node.metric("sluice_store_halted"), Some(0.0));
    let _ = std::fs::remove_dir_all(dir);
}
