//! A data file damaged while the node runs is found when a block is read
//! from it: the call gets an error naming the damage, the store halts as
//! after a failed commit, and nothing panics.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

#[test]
fn a_block_read_from_a_damaged_file_is_an_error_and_halts_the_store() {
    // One block in memory and a 4 KiB block cache: older blocks are read
    // from the files when asked for. No idle blocks: the chain moves only
    // with the transfers.
    let mut node = TestNode::start(
        &[
            ("SLUICE_STORE__CACHE_BLOCKS", "1"),
            ("SLUICE_STORE__DB_CACHE_BYTES", "4096"),
            ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0"),
        ],
        &["--block-time-ms", "20"],
    );
    let to = random_signer().address();
    for n in 0..4 {
        node.receipt(&node.send(&transfer(&dev(0), n, to, 1)).unwrap());
    }
    // A clean stop writes everything to the database's table files (the
    // journal holds nothing more); after the restart, block 1 is read
    // from them. The recipient's account is read once so the state cache
    // holds it.
    assert!(node.terminate().success());
    node.restart().unwrap();
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    assert_eq!(node.balance(to), alloy_primitives::U256::from(4));
    // Every table file overwritten in place under the running node.
    let tables = table_files(&node.data_dir().join("chain"));
    assert!(!tables.is_empty(), "no table files under the data dir");
    for path in &tables {
        use std::io::Write;
        let len = std::fs::metadata(path).unwrap().len() as usize;
        let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all(&vec![0x5a; len]).unwrap();
    }
    let e = node.call("eth_getBlockByNumber", json!(["0x1", false])).unwrap_err();
    assert_eq!(e["code"], -32603, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("block 1 could not be read") && message.contains("corrupt store"), "{e}");
    // The store halted: writes refused, what is in memory still served.
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.metric("sluice_store_halted") != Some(1.0) {
        assert!(Instant::now() < deadline, "the halt never showed in metrics; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(node.log().contains("the store halted"), "{}", node.log());
    let refused = node.send(&transfer(&dev(1), 0, to, 1)).unwrap_err();
    assert!(refused["message"].as_str().unwrap().contains("store halted"), "{refused}");
    assert_eq!(parse_u64(&node.ok("eth_blockNumber", json!([]))), head);
    assert_eq!(node.balance(to), alloy_primitives::U256::from(4));
    // A block past the head is still simply not there.
    assert!(node.ok("eth_getBlockByNumber", json!([format!("{:#x}", head + 1), false])).is_null());
    let status = node.terminate();
    assert!(!status.success(), "a halted node exits non-zero");
    assert!(!node.log().contains("panicked"), "{}", node.log());
}

/// The LSM tree's sorted table files (`keyspaces/*/tables/*`) under `dir`.
fn table_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for keyspace in std::fs::read_dir(dir.join("keyspaces")).unwrap() {
        let tables = keyspace.unwrap().path().join("tables");
        if let Ok(entries) = std::fs::read_dir(&tables) {
            out.extend(entries.map(|e| e.unwrap().path()));
        }
    }
    out
}
