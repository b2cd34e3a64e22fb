//! Validators in full mode keep a window of blocks, consensus's own copy
//! included. A validator down for less than the retention catches up from
//! its peers' pruned archives; one down for longer than they keep can
//! never catch up from them (there is no state sync yet): restarted, it
//! halts (`sluice_store_halted`) with an error naming the oldest block its
//! peers serve, and the others go on.

use std::time::{Duration, Instant};

use crate::{
    support::*,
    validators_agree_and_rejoin::{height, start_validator, testnet_init, wait_network_up},
};

/// Waits until `done` holds, at most `limit`, naming `what` and showing
/// `node`'s log when it does not.
fn wait(node: &TestNode, what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_validator_down_longer_than_the_retention_halts_naming_the_oldest_block_served() {
    let dir = std::env::temp_dir().join(format!("sluice-net-window-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The smallest retention there is, and empty blocks as fast as
    // consensus agrees on them: the window moves within the test.
    let env = [
        ("SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "256"),
        ("SLUICE_STORE__HISTORY_BLOCKS", "64"),
        ("SLUICE_PRODUCER__BLOCK_TIME_MS", "10"),
        ("SLUICE_CONSENSUS__EMPTY_BLOCK_WAIT_MS", "0"),
    ];
    let mut nodes: Vec<TestNode> =
        testnet_init(&dir, 4, &[]).iter().map(|c| start_validator(c, &env)).collect();
    wait_network_up(&nodes);

    // Down for less than the retention: back at the others' height.
    nodes[3].kill9();
    let at = height(&nodes[0]);
    wait(&nodes[0], "no progress without v3", Duration::from_secs(120), || height(&nodes[0]) >= at + 100);
    nodes[3].restart().unwrap_or_else(|log| panic!("v3 did not restart: {log}"));
    let target = height(&nodes[0]);
    wait(&nodes[3], "v3 did not catch up", Duration::from_secs(120), || height(&nodes[3]) >= target);

    // Down until every peer's archives start past the block it needs next.
    let stopped = height(&nodes[3]);
    nodes[3].kill9();
    for peer in &nodes[..3] {
        wait(peer, "the peers' archives never moved past v3's next block", Duration::from_secs(600), || {
            peer.metric("sluice_consensus_archive_oldest_height ").unwrap_or(0.0) > (stopped + 1) as f64
        });
    }
    nodes[3].restart().unwrap_or_else(|log| panic!("v3 did not restart: {log}"));
    wait(&nodes[3], "v3 neither halted nor caught up", Duration::from_secs(180), || {
        nodes[3].metric("sluice_store_halted ") == Some(1.0)
    });
    let log = nodes[3].log();
    assert!(
        log.contains("the oldest block the others still serve is about") && log.contains("state sync"),
        "halted without naming the oldest block served; log:\n{log}"
    );
    // The others go on.
    let h = height(&nodes[0]);
    wait(&nodes[1], "the others stopped", Duration::from_secs(60), || height(&nodes[1]) > h + 5);
    assert!(!nodes[3].terminate().success(), "a halted validator exits non-zero");
    for node in &mut nodes[..3] {
        assert!(node.terminate().success(), "a validator did not exit cleanly; log:\n{}", node.log());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
