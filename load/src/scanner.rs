//! Inclusion, measured by scanning blocks: a thread follows the head with
//! `eth_blockNumber` and reads every new block's transaction hashes with
//! `eth_getBlockByNumber(n, false)`, noting when it first saw each. Send
//! results are never trusted for inclusion.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering::Relaxed},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use alloy_primitives::B256;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::{
    rpc::{quantity, Rpc},
    stats::Counters,
};

/// How often the head is polled (a 200 ms block time is seen within 10%).
const POLL: Duration = Duration::from_millis(20);
/// Most blocks fetched in one batch when catching up.
const BLOCKS_PER_BATCH: u64 = 16;

/// Hashes seen in blocks, with when (microseconds since the run's start).
pub type Seen = Arc<Mutex<HashMap<B256, u64>>>;

/// Round trips of the scanner's `eth_blockNumber` polls, microseconds: the
/// node's read latency under the load (a failed read counts as u32::MAX).
pub type ReadLatencies = Arc<Mutex<Vec<u32>>>;

/// A running block scanner.
pub struct Scanner {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    /// Every transaction hash seen in a block after the start block.
    pub seen: Seen,
    /// Read latencies observed while scanning.
    pub reads: ReadLatencies,
}

impl Scanner {
    /// Starts scanning blocks after `start_block`.
    pub fn start(url: &str, start_block: u64, t0: Instant, counters: Arc<Counters>) -> Scanner {
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Seen = Arc::new(Mutex::new(HashMap::new()));
        let reads: ReadLatencies = Arc::new(Mutex::new(Vec::new()));
        let rpc = Rpc::new(url, Duration::from_secs(10));
        let handle = {
            let (stop, seen, reads) = (stop.clone(), seen.clone(), reads.clone());
            std::thread::Builder::new()
                .name("load-scanner".into())
                .spawn(move || scan(rpc, start_block, t0, counters, stop, (seen, reads)))
                .ok()
        };
        Scanner { stop, handle, seen, reads }
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) -> (Seen, ReadLatencies) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        (self.seen, self.reads)
    }
}

fn scan(
    rpc: Rpc,
    start_block: u64,
    t0: Instant,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    (seen, reads): (Seen, ReadLatencies),
) {
    let mut next = start_block + 1;
    counters.head.store(start_block, Relaxed);
    while !stop.load(Relaxed) {
        let asked = Instant::now();
        let head = rpc.call("eth_blockNumber", json!([])).and_then(|v| quantity("eth_blockNumber", &v));
        let took = if head.is_ok() {
            asked.elapsed().as_micros().min(u128::from(u32::MAX)) as u32
        } else {
            u32::MAX
        };
        reads.lock().push(took);
        let Ok(head) = head else {
            std::thread::sleep(POLL);
            continue;
        };
        while next <= head && !stop.load(Relaxed) {
            let last = head.min(next + BLOCKS_PER_BATCH - 1);
            let calls: Vec<(&str, Value)> =
                (next..=last).map(|n| ("eth_getBlockByNumber", json!([format!("{n:#x}"), false]))).collect();
            let Ok(blocks) = rpc.batch("eth_getBlockByNumber", &calls) else { break };
            let now = t0.elapsed().as_micros() as u64;
            let mut got = 0;
            for block in blocks {
                // A block not yet readable (null) ends this pass; it is
                // fetched again on the next poll.
                let Some(Value::Array(txs)) =
                    block.ok().and_then(|mut b| b.get_mut("transactions").map(Value::take))
                else {
                    break;
                };
                let mut map = seen.lock();
                for h in txs.iter().filter_map(|h| h.as_str()?.parse::<B256>().ok()) {
                    map.entry(h).or_insert(now);
                }
                counters.block_txs.fetch_add(txs.len() as u64, Relaxed);
                got += 1;
            }
            next += got;
            counters.head.store(next - 1, Relaxed);
            if got == 0 {
                break;
            }
        }
        std::thread::sleep(POLL);
    }
}
