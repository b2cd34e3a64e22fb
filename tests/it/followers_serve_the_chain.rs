//! A follower process beside four validator processes, from `sluice
//! testnet init --followers 1`: it connects to all four as a p2p peer that
//! never votes, executes exactly the blocks they finalize (same block hash
//! and `stateRoot` at every height), takes transfers from its own clients
//! and gets them included (receipt on the follower and on a validator),
//! catches up after a SIGKILL, and a follower given a validator's key is
//! refused at start. Validators and followers serve the finalized-block
//! feed (by height and as a bounded subscription).

use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256};
use serde_json::json;

use crate::{
    support::*,
    validators_agree_and_rejoin::{
        block_ids, height, receipt_within, start_validator, testnet_init, transfers, wait_height,
        wait_network_up,
    },
    ws_client::{ws_url, Ws},
};

#[test]
fn a_follower_executes_the_chain_and_forwards_writes() {
    let dir = std::env::temp_dir().join(format!("sluice-net-follow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let configs = testnet_init(&dir, 4, &["--followers", "1"]);
    // v1's finalized-block feed takes one subscriber.
    let one = [("SLUICE_RPC__FINALIZED_FEED_MAX_SUBSCRIBERS", "1")];
    let mut validators: Vec<TestNode> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| start_validator(c, if i == 1 { &one } else { &[] }))
        .collect();
    let mut follower = start_validator(&dir.join("f0").join("sluice.toml"), &[]);
    wait_network_up(&validators);
    let deadline = Instant::now() + Duration::from_secs(120);
    while height(&follower) < 2 || follower.metric("sluice_consensus_peers_connected ") != Some(4.0) {
        assert!(Instant::now() < deadline, "follower not following; log:\n{}", follower.log());
        std::thread::sleep(Duration::from_millis(100));
    }

    // Writes through the follower: admitted there (its pending nonce counts
    // them), sent on to the validators, included, receipts on both sides.
    let s = dev(3);
    let to = Address::repeat_byte(0x77);
    let hashes: Vec<B256> = (0..5)
        .map(|nonce| follower.send(&transfer(&s, nonce, to, 1)).unwrap_or_else(|e| panic!("send: {e}")))
        .collect();
    assert_eq!(follower.nonce(s.address(), "pending"), 5, "the follower's pending nonce counts what it took");
    for h in &hashes {
        let on_follower = receipt_within(&follower, h, Duration::from_secs(90));
        let on_validator = receipt_within(&validators[1], h, Duration::from_secs(30));
        assert_eq!(on_follower["blockHash"], on_validator["blockHash"], "{h}");
    }
    // Validators' own traffic reaches the follower in blocks.
    let receipts = transfers(&validators[2], 2, 3);
    for r in &receipts {
        let hash = r["transactionHash"].as_str().unwrap_or_default();
        let on_follower = receipt_within(&follower, &hash.parse().expect("a hash"), Duration::from_secs(30));
        assert_eq!(on_follower["blockHash"], r["blockHash"]);
    }
    // It counted the finalizations it verified; none was forged.
    assert!(
        follower.metric("sluice_follower_finalizations_total{outcome=\"accepted\"}").unwrap_or(0.0) > 0.0
    );
    assert_eq!(follower.metric("sluice_follower_finalizations_total{outcome=\"forged\"}"), Some(0.0));

    // The finalized-block feed, served by validators and followers alike:
    // by height, and as a subscription from a height, in order.
    let latest = validators[0].ok("consensus_getFinalized", json!(["latest"]));
    let h = parse_u64(&latest["height"]);
    assert!(h > 0, "{latest}");
    assert_eq!(validators[0].ok("consensus_getFinalized", json!([latest["height"]])), latest);
    for part in ["finalization", "block"] {
        assert!(latest[part].as_str().is_some_and(|b| b.len() > 64), "{part}: {latest}");
    }
    let from = parse_u64(&follower.ok("consensus_getFinalized", json!(["latest"]))["height"]) - 1;
    let mut ws = Ws::connect(&follower);
    let id = ws.call("consensus_subscribe", json!(["finalized", format!("{from:#x}")])).expect("subscribed");
    transfers(&validators[0], 0, 2);
    for expected in from..from + 3 {
        let (sub, item) = ws.next_note(Duration::from_secs(30)).expect("a finalized block");
        assert_eq!(json!(sub), id);
        assert_eq!(parse_u64(&item["height"]), expected, "{item}");
        assert_eq!(
            item,
            follower.ok("consensus_getFinalized", json!([item["height"]])),
            "as the getter has it"
        );
    }
    // Bounded: v1 takes one subscriber.
    let mut first = Ws::connect(&validators[1]);
    first.call("consensus_subscribe", json!(["finalized"])).expect("the one slot");
    let refused = Ws::connect(&validators[1]).call("consensus_subscribe", json!(["finalized"])).unwrap_err();
    assert_eq!(refused["code"], -32005, "{refused}");
    drop(first);

    // Killed, the chain goes on without it; restarted, it catches up.
    follower.kill9();
    let down_at = height(&validators[0]);
    while height(&validators[0]) < down_at + 15 {
        transfers(&validators[0], 0, 3);
    }
    let target = height(&validators[0]);
    let restarted = Instant::now();
    follower.restart().unwrap_or_else(|log| panic!("the follower did not restart: {log}"));
    wait_height(&follower, target, "follower catching up");
    eprintln!("follower back at {target} {:?} after its restart", restarted.elapsed());

    let top = height(&follower).min(height(&validators[3]));
    for h in 0..=top {
        assert_eq!(block_ids(&follower, h), block_ids(&validators[3], h), "follower differs at height {h}");
    }

    // A follower given a validator's key is refused, naming the fix.
    let v0 = configs[0].to_str().expect("utf-8 path");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "node",
            "--config",
            v0,
            "--follow",
            "--rpc-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .output()
        .expect("run sluice");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("is validator v0's"), "{err}");

    for node in validators.iter_mut().chain(std::iter::once(&mut follower)) {
        let status = node.terminate();
        assert!(status.success(), "a node did not exit cleanly: {status}; log:\n{}", node.log());
    }
    follower.assert_replay_matches_vault("follower f0");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A follower over the finalized-block feed rather than p2p: its first
/// upstream is dead (it waits and moves on), it follows another follower's
/// feed, checks every block against the validator set, forwards its
/// clients' transfers to its upstream, fails over to a validator's feed
/// when that follower dies, and catches up after its own SIGKILL.
#[test]
fn a_follower_follows_a_followers_feed_and_fails_over() {
    let dir = std::env::temp_dir().join(format!("sluice-net-feed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let configs = testnet_init(&dir, 4, &["--followers", "2"]);
    let mut validators: Vec<TestNode> = configs.iter().map(|c| start_validator(c, &[])).collect();
    wait_network_up(&validators);
    // Started late, f0 backfills the first blocks, some without a
    // certificate of their own to serve (a certified descendant's proves
    // them final: `upstream.rs`'s unit tests).
    wait_height(&validators[0], 6, "the validators' first blocks");
    let mut f0 = start_validator(&dir.join("f0").join("sluice.toml"), &[]);
    wait_height(&f0, height(&validators[0]), "f0 following");

    let dead = format!("ws://127.0.0.1:{}", free_port());
    let upstreams = format!("{dead},{},{}", ws_url(&f0), ws_url(&validators[2]));
    let mut f1 =
        start_validator(&dir.join("f1").join("sluice.toml"), &[("SLUICE_FOLLOWER__UPSTREAMS", &upstreams)]);
    wait_height(&f1, height(&validators[0]), "f1 following f0's feed");
    assert_eq!(
        f1.metric("sluice_follower_upstream_failures_total "),
        Some(1.0),
        "only the dead upstream was left: f0's feed served every block from 1; log:\n{}",
        f1.log()
    );

    // Writes through the feed follower reach the validators.
    let s = dev(1);
    let hashes: Vec<B256> = (0..3)
        .map(|nonce| {
            f1.send(&transfer(&s, nonce, Address::repeat_byte(0x71), 1)).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    for h in &hashes {
        let on_f1 = receipt_within(&f1, h, Duration::from_secs(90));
        let on_v1 = receipt_within(&validators[1], h, Duration::from_secs(30));
        assert_eq!(on_f1["blockHash"], on_v1["blockHash"], "{h}");
    }
    assert!(f1.metric("sluice_follower_forwarded_txs_total ").unwrap_or(0.0) >= 3.0);

    // Its upstream dies: it moves on to the validator's feed.
    f0.kill9();
    transfers(&validators[0], 0, 3);
    wait_height(&f1, height(&validators[0]), "f1 after f0 died");
    assert!(f1.metric("sluice_follower_upstream_failures_total ").unwrap_or(0.0) >= 2.0, "dead, then f0");

    // Killed and restarted, it resumes from its committed head.
    f1.kill9();
    let down_at = height(&validators[0]);
    while height(&validators[0]) < down_at + 10 {
        transfers(&validators[0], 0, 3);
    }
    let target = height(&validators[0]);
    let restarted = Instant::now();
    f1.restart().unwrap_or_else(|log| panic!("f1 did not restart: {log}"));
    wait_height(&f1, target, "f1 catching up");
    eprintln!("feed follower back at {target} {:?} after its restart", restarted.elapsed());

    let top = height(&f1).min(height(&validators[3]));
    for h in 0..=top {
        assert_eq!(block_ids(&f1, h), block_ids(&validators[3], h), "f1 differs at height {h}");
    }
    for node in validators.iter_mut().chain(std::iter::once(&mut f1)) {
        let status = node.terminate();
        assert!(status.success(), "a node did not exit cleanly: {status}; log:\n{}", node.log());
    }
    f1.assert_replay_matches_vault("feed follower f1");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A transfer sent to a follower while it reaches no validator (it started
/// before them) is held and sent on once one connects: a follower never
/// proposes what it admitted, so a batch nobody took would be lost.
#[test]
fn a_follower_holds_writes_until_a_validator_takes_them() {
    let dir = std::env::temp_dir().join(format!("sluice-net-hold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let configs = testnet_init(&dir, 4, &["--followers", "1"]);
    let mut follower = start_validator(&dir.join("f0").join("sluice.toml"), &[]);
    let hash =
        follower.send(&transfer(&dev(2), 0, Address::repeat_byte(0x72), 1)).unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_secs(1));
    let mut validators: Vec<TestNode> = configs.iter().map(|c| start_validator(c, &[])).collect();
    wait_network_up(&validators);
    let on_validator = receipt_within(&validators[0], &hash, Duration::from_secs(90));
    let on_follower = receipt_within(&follower, &hash, Duration::from_secs(30));
    assert_eq!(on_follower["blockHash"], on_validator["blockHash"]);
    for node in validators.iter_mut().chain(std::iter::once(&mut follower)) {
        let status = node.terminate();
        assert!(status.success(), "a node did not exit cleanly: {status}; log:\n{}", node.log());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A follower added to the validators' followers file while they run is
/// accepted within seconds, without restarting them.
#[test]
fn a_follower_joins_without_restarting_the_validators() {
    let dir = std::env::temp_dir().join(format!("sluice-net-join-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let configs = testnet_init(&dir, 4, &["--followers", "1"]);
    let file = dir.join("followers.toml");
    let listed = std::fs::read_to_string(&file).expect("followers.toml");
    std::fs::write(&file, "").expect("empty the followers file");
    let mut validators: Vec<TestNode> = configs.iter().map(|c| start_validator(c, &[])).collect();
    wait_network_up(&validators);
    let mut follower = start_validator(&dir.join("f0").join("sluice.toml"), &[]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(follower.metric("sluice_consensus_peers_connected "), Some(0.0), "not listed: refused");
    assert_eq!(height(&follower), 0);

    std::fs::write(&file, listed).expect("list the follower");
    wait_height(&follower, height(&validators[0]), "the follower once listed");
    let deadline = Instant::now() + Duration::from_secs(30);
    while validators[0].metric("sluice_consensus_followers_connected ") != Some(1.0) {
        assert!(Instant::now() < deadline, "v0 does not count the follower");
        std::thread::sleep(Duration::from_millis(100));
    }
    for node in validators.iter_mut().chain(std::iter::once(&mut follower)) {
        let status = node.terminate();
        assert!(status.success(), "a node did not exit cleanly: {status}; log:\n{}", node.log());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
