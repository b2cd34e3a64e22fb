//! Current state lives in the database behind a bounded cache: a node
//! started with 50,000 synthetic accounts and caches of a few KiB answers
//! their balances, pays into random ones, keeps within its cache budgets,
//! and finds the same after a restart; the cache misses went to disk.

use alloy_primitives::{Address, U256};
use serde_json::json;
use sluice_messages::synthetic_address;

use crate::support::*;

const SYNTHETIC: u64 = 50_000;
/// dev_balance_eth (the default 10,000) in wei.
fn funded() -> U256 {
    U256::from(10_000u64) * U256::from(10u64).pow(U256::from(18u64))
}

#[test]
fn state_beyond_the_cache_reads_pays_and_survives_a_restart() {
    let budget = 8192u64;
    let env = [
        ("SLUICE_CHAIN__SYNTHETIC_ACCOUNTS", "50000"),
        ("SLUICE_STORE__ACCOUNT_CACHE_BYTES", "8192"),
        ("SLUICE_STORE__STORAGE_CACHE_BYTES", "8192"),
        ("SLUICE_STORE__CODE_CACHE_BYTES", "8192"),
    ];
    let mut node = TestNode::start(&env, &["--block-time-ms", "50"]);
    let picks: Vec<Address> = (0..120u64).map(|i| synthetic_address(i * 397 % SYNTHETIC)).collect();
    for a in picks.iter().take(10) {
        assert_eq!(node.balance(*a), funded(), "synthetic account {a} funded at genesis");
    }
    let never = synthetic_address(SYNTHETIC);
    assert_eq!(node.balance(never), U256::ZERO, "index {SYNTHETIC} is past the last one");
    let payer = dev(0);
    let mut last = None;
    for (nonce, to) in picks.iter().enumerate() {
        last = Some(node.send(&transfer(&payer, nonce as u64, *to, 1 + nonce as u64)).expect("admitted"));
    }
    let r = node.receipt(&last.expect("sent"));
    assert_eq!(r["status"], "0x1", "{r}");
    let check = |node: &TestNode, label: &str| {
        for (nonce, to) in picks.iter().enumerate() {
            let want = funded() + U256::from(1 + nonce as u64);
            assert_eq!(node.balance(*to), want, "{label}: {to}");
        }
        assert_eq!(node.nonce(payer.address(), "latest"), picks.len() as u64, "{label}");
    };
    check(&node, "before restart");
    // Reads the executor made missed the tiny cache and went to disk, and
    // the cache stayed within its budgets (code: its bodies too).
    std::thread::sleep(std::time::Duration::from_millis(700));
    let misses =
        node.metric("sluice_state_cache_reads_total{kind=\"account\",result=\"miss\"}").unwrap_or(0.0);
    assert!(misses >= 100.0, "account reads that went to disk: {misses}");
    let bytes = node.metric("sluice_state_cache_bytes").unwrap_or(f64::MAX);
    assert!(bytes <= (3 * budget + 4096) as f64, "cache holds {bytes} bytes");
    node.restart().expect("restarts");
    check(&node, "after restart");
    let head = node.ok("eth_blockNumber", json!([]));
    assert_eq!(node.balance(synthetic_address(7)), funded(), "untouched synthetic account at {head}");
    assert!(node.terminate().success(), "clean shutdown");
    node.assert_replay_matches_vault("with synthetic accounts");
}

/// Threads of the node process named `name` (Linux: `/proc/PID/task`).
fn threads_named(pid: u32, name: &str) -> usize {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the node's threads");
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .count()
}

#[test]
fn the_database_runs_the_configured_background_threads() {
    // One by default (config/default.toml says why); the bound holds for
    // another value too.
    for (env, want) in [(vec![], 1), (vec![("SLUICE_STORE__DB_WORKER_THREADS", "3")], 3)] {
        let node = TestNode::start(&env, &[]);
        let pid = node.pid().expect("running");
        assert_eq!(threads_named(pid, "fjall:worker"), want, "{env:?}");
    }
}
