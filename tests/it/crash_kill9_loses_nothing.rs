//! SIGKILL at random moments under load loses nothing that was reported
//! committed: after each restart the height is at least the highest block
//! a receipt was returned for, every receipt returned is still the same,
//! and finally `sluice replay` re-executes the whole chain and matches
//! every app hash in the hash vault. The seed is printed; set
//! CRASH_TEST_SEED to replay a failure, CRASH_TEST_CYCLES for more.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use alloy_primitives::B256;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::support::*;

/// Sends transfers from `sender` and polls their receipts until told to
/// stop or the node dies; records every receipt it was given.
fn drive(url: String, sender: usize, stop: Arc<AtomicBool>, seen: Arc<Mutex<HashMap<B256, Value>>>) {
    let s = dev(sender);
    let Ok(v) = rpc(&url, "eth_getTransactionCount", json!([s.address(), "pending"])) else { return };
    let Some(hex) = v["result"].as_str() else { return };
    let mut nonce = u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap_or(0);
    let to = random_signer().address();
    let mut waiting: Vec<B256> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let raw = transfer(&s, nonce, to, 1);
        match rpc(&url, "eth_sendRawTransaction", json!([raw])) {
            Ok(v) if v.get("result").is_some() => {
                nonce += 1;
                waiting.push(alloy_primitives::keccak256(&raw));
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return,
        }
        let mut still = Vec::new();
        for h in waiting.drain(..) {
            match rpc(&url, "eth_getTransactionReceipt", json!([h])) {
                Ok(v) if !v["result"].is_null() => {
                    seen.lock().unwrap().insert(h, v["result"].clone());
                }
                Ok(_) => still.push(h),
                Err(_) => return,
            }
        }
        waiting = still;
    }
}

#[test]
fn sigkill_at_random_moments_loses_nothing_reported_committed() {
    let seed: u64 =
        std::env::var("CRASH_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    let cycles: usize = std::env::var("CRASH_TEST_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(4);
    println!("crash test seed {seed} ({cycles} cycles); replay with CRASH_TEST_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut node = TestNode::start(&[], &["--block-time-ms", "10", "--max-block-txs", "8"]);
    let seen: Arc<Mutex<HashMap<B256, Value>>> = Arc::default();
    for cycle in 0..cycles {
        let stop = Arc::new(AtomicBool::new(false));
        let drivers: Vec<_> = (0..3)
            .map(|i| {
                let (url, stop, seen) = (node.url.clone(), Arc::clone(&stop), Arc::clone(&seen));
                std::thread::spawn(move || drive(url, i, stop, seen))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.random_range(100..600)));
        node.kill9();
        stop.store(true, Ordering::Relaxed);
        for d in drivers {
            d.join().unwrap();
        }
        node.restart().unwrap_or_else(|log| panic!("seed {seed} cycle {cycle}: restart failed:\n{log}"));
        let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
        let seen = seen.lock().unwrap();
        for (hash, receipt) in seen.iter() {
            let height = parse_u64(&receipt["blockNumber"]);
            assert!(head >= height, "seed {seed} cycle {cycle}: head {head} below a reported block {height}");
            let now = node.ok("eth_getTransactionReceipt", json!([hash]));
            assert_eq!(&now, receipt, "seed {seed} cycle {cycle}: receipt of {hash} changed");
        }
    }
    let checked = seen.lock().unwrap().len();
    assert!(checked > 0, "seed {seed}: the load produced no receipts at all");
    println!("seed {seed}: {checked} receipts survived {cycles} SIGKILLs unchanged");
    assert!(node.terminate().success());
    node.assert_replay_matches_vault(&format!("seed {seed}"));
}
