//! Four real validator processes from `sluice testnet init`, talking over
//! real TCP on 127.0.0.1: transfers sent to each validator are included
//! whichever validator leads; a validator killed with SIGKILL leaves the
//! other three going; restarted on its data dir it catches up, and its own
//! transfers are included again (it proposes); every height has the same
//! block hash and `stateRoot` on all four; SIGTERM stops each with exit 0;
//! `sluice replay` passes on a validator's data dir.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use alloy_primitives::{Address, B256};
use serde_json::{json, Value};

use crate::support::*;

/// Settings that keep four debug processes on two cores live: one thread
/// per stage, and views long enough to survive starvation.
pub(crate) const CI_ENV: [(&str, &str); 9] = [
    ("SLUICE_RPC__WORKERS", "1"),
    ("SLUICE_PIPELINE__RECOVERY_WORKERS", "1"),
    ("SLUICE_PIPELINE__PREPARE_WORKERS", "1"),
    ("SLUICE_PIPELINE__EXECUTE_WORKERS", "1"),
    ("SLUICE_CONSENSUS__WORKER_THREADS", "1"),
    ("SLUICE_CONSENSUS__LEADER_TIMEOUT_MS", "2000"),
    ("SLUICE_CONSENSUS__CERTIFICATION_TIMEOUT_MS", "4000"),
    ("SLUICE_CONSENSUS__TIMEOUT_RETRY_MS", "1000"),
    ("SLUICE_CONSENSUS__SKIP_TIMEOUT_MS", "5000"),
];

/// A base port with `n` free ports above it.
fn free_range(n: u16) -> u16 {
    for _ in 0..200 {
        let base = 20_000 + (rand::random::<u16>() % 40_000);
        let all_free = (0..n).all(|k| TcpListener::bind(("127.0.0.1", base + k)).is_ok());
        if all_free {
            return base;
        }
    }
    panic!("no range of {n} free ports");
}

/// Runs `sluice testnet init`; returns each validator's config file.
pub(crate) fn testnet_init(dir: &Path, n: usize, extra: &[&str]) -> Vec<PathBuf> {
    // Followers take the ports after the validators'.
    let followers: usize = extra
        .iter()
        .position(|a| *a == "--followers")
        .and_then(|i| extra.get(i + 1)?.parse().ok())
        .unwrap_or(0);
    let base = free_range(3 * (n + followers) as u16).to_string();
    let validators = n.to_string();
    // Deterministic keys unless the caller picks a seed of its own.
    let seed: &[&str] = if extra.contains(&"--seed") { &[] } else { &["--seed", "1"] };
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["testnet", "init", "--validators", &validators, "--base-port", &base])
        .args(seed)
        .args(["--block-time-ms", "100", "--dir"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("run testnet init");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "testnet init failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("sluice node --config"), "{stdout}");
    (0..n).map(|i| dir.join(format!("v{i}")).join("sluice.toml")).collect()
}

/// Starts one validator from its config.
pub(crate) fn start_validator(config: &Path, extra_env: &[(&str, &str)]) -> TestNode {
    let mut env: Vec<(&str, &str)> = CI_ENV.to_vec();
    env.extend_from_slice(extra_env);
    let config = config.to_str().expect("utf-8 path");
    TestNode::start(&env, &["--config", config])
}

pub(crate) fn height(node: &TestNode) -> u64 {
    parse_u64(&node.ok("eth_blockNumber", json!([])))
}

/// Four validators from `testnet init` in a fresh temp dir named for
/// `tag`, each started; returns the dir (remove it at the end) and them.
pub(crate) fn start_network(tag: &str) -> (PathBuf, Vec<TestNode>) {
    let dir = std::env::temp_dir().join(format!("sluice-net-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let nodes = testnet_init(&dir, 4, &[]).iter().map(|c| start_validator(c, &[])).collect();
    (dir, nodes)
}

/// Waits until every validator has blocks and is connected to all the
/// others (a transaction batch sent to a peer not yet connected is
/// dropped, as p2p sends are).
pub(crate) fn wait_network_up(nodes: &[TestNode]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let others = Some(nodes.len() as f64 - 1.0);
    for node in nodes {
        while height(node) < 2 || node.metric("sluice_consensus_peers_connected ") != others {
            assert!(Instant::now() < deadline, "network not up; log:\n{}", node.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

pub(crate) fn wait_height(node: &TestNode, h: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while height(node) < h {
        assert!(Instant::now() < deadline, "{what}: stuck below height {h}; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `count` transfers from dev account `sender` to `node`, then
/// waits for every receipt on that node.
pub(crate) fn transfers(node: &TestNode, sender: usize, count: u64) -> Vec<Value> {
    let s = dev(sender);
    let first = node.nonce(s.address(), "pending");
    let to = Address::repeat_byte(0x40 + sender as u8);
    let hashes: Vec<B256> = (first..first + count)
        .map(|nonce| node.send(&transfer(&s, nonce, to, 1)).unwrap_or_else(|e| panic!("send: {e}")))
        .collect();
    hashes.iter().map(|h| receipt_within(node, h, Duration::from_secs(90))).collect()
}

pub(crate) fn receipt_within(node: &TestNode, hash: &B256, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let r = node.ok("eth_getTransactionReceipt", json!([hash]));
        if !r.is_null() {
            assert_eq!(r["status"], "0x1", "{r}");
            return r;
        }
        assert!(Instant::now() < deadline, "no receipt for {hash}; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn block_ids(node: &TestNode, h: u64) -> (String, String) {
    let b = node.ok("eth_getBlockByNumber", json!([format!("0x{h:x}"), false]));
    (
        b["hash"].as_str().unwrap_or_default().to_string(),
        b["stateRoot"].as_str().unwrap_or_default().to_string(),
    )
}

fn assert_identical(nodes: &[&TestNode], upto: u64) {
    for h in 0..=upto {
        let first = block_ids(nodes[0], h);
        assert!(!first.0.is_empty(), "no block {h}");
        for n in &nodes[1..] {
            assert_eq!(block_ids(n, h), first, "validators disagree at height {h}");
        }
    }
}

#[test]
fn validators_agree_survive_a_kill_and_rejoin() {
    let (dir, mut nodes) = start_network("rejoin");

    // Each dev account sends to its own validator: inclusion needs that
    // validator to lead, so this proves every one of them proposes.
    for (i, node) in nodes.iter().enumerate() {
        let receipts = transfers(node, i, 5);
        assert_eq!(receipts.len(), 5);
    }

    // SIGKILL one: the other three are a quorum and go on.
    nodes[3].kill9();
    let before = height(&nodes[0]);
    for (i, node) in nodes.iter().enumerate().take(3) {
        transfers(node, i, 3);
    }
    let target = height(&nodes[0]);
    assert!(target > before, "no progress without v3");

    // Restarted on its data dir it catches up, then its own transfers are
    // included: it proposes again.
    nodes[3].restart().unwrap_or_else(|log| panic!("v3 did not restart: {log}"));
    wait_height(&nodes[3], target, "v3 catching up");
    transfers(&nodes[3], 3, 3);

    let top = nodes.iter().map(height).min().unwrap_or(0);
    let refs: Vec<&TestNode> = nodes.iter().collect();
    assert_identical(&refs, top);
    // The chain checks itself: later headers carry earlier app hashes.
    assert!(nodes[0].metric("sluice_verified_height").unwrap_or(0.0) >= 1.0);

    for node in nodes.iter_mut() {
        let status = node.terminate();
        assert!(status.success(), "a validator did not exit cleanly: {status}; log:\n{}", node.log());
    }
    nodes[1].assert_replay_matches_vault("validator v1");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A validator whose state diverges (its app hash perturbed from height 5,
/// as if its execution disagreed) halts when a finalized block's state
/// reference names that height, with a message naming the height and both
/// hashes; the other three go on agreeing; the diverged one exits non-zero.
#[test]
fn a_diverged_validator_halts_and_the_others_go_on() {
    let dir = std::env::temp_dir().join(format!("sluice-net-div-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let configs = testnet_init(&dir, 4, &[]);
    let mut nodes: Vec<TestNode> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let diverge: &[(&str, &str)] =
                if i == 2 { &[("SLUICE_STORE__INJECT_APP_HASH_DIVERGENCE_AT_HEIGHT", "5")] } else { &[] };
            start_validator(c, diverge)
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while nodes[2].metric("sluice_store_halted ") != Some(1.0) {
        assert!(Instant::now() < deadline, "v2 did not halt; log:\n{}", nodes[2].log());
        std::thread::sleep(Duration::from_millis(100));
    }
    // The first finalized block whose state reference names a height at or
    // above 5 halts it: which height that is depends on the reference's lag.
    let log = nodes[2].log();
    let named = log
        .split("app hash mismatch at height ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(named.is_some_and(|n| n >= 5), "halted naming {named:?}; log:\n{log}");
    // Its state is wrong: state reads and receipts answer the halt, not
    // stale values; the chain it has is still served.
    let said = |e: Value| e["message"].as_str().unwrap_or_default().to_string();
    let balance = nodes[2].call("eth_getBalance", json!([dev(0).address(), "latest"])).map_err(said);
    assert!(
        balance
            .as_ref()
            .is_err_and(|m| m.contains("its state is wrong from height") && m.contains("app hash")),
        "{balance:?}"
    );
    let receipt = nodes[2].call("eth_getTransactionReceipt", json!([B256::ZERO])).map_err(said);
    assert!(receipt.is_err_and(|m| m.contains("halted")));
    assert!(height(&nodes[2]) >= 1, "blocks are still served");
    // The others keep finalizing, including their senders' transfers.
    let h = height(&nodes[0]);
    transfers(&nodes[0], 0, 2);
    transfers(&nodes[1], 1, 2);
    wait_height(&nodes[3], h + 5, "v3 after v2 halted");
    let top = [0, 1, 3].iter().map(|&i| height(&nodes[i])).min().unwrap_or(0);
    assert_identical(&[&nodes[0], &nodes[1], &nodes[3]], top);
    let status = nodes[2].terminate();
    assert!(!status.success(), "a halted validator must exit non-zero");
    for i in [0, 1, 3] {
        assert!(nodes[i].terminate().success(), "v{i} did not exit cleanly; log:\n{}", nodes[i].log());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
