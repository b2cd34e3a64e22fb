//! A data file damaged while the node runs is found when a block is read
//! from it: the call gets an error naming the damage, the store halts as
//! after a failed commit, and nothing panics.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

#[test]
fn a_block_read_from_a_damaged_file_is_an_error_and_halts_the_store() {
    // One block in memory and a 4 KiB page cache: older blocks are read
    // from the file when asked for. No idle blocks: the chain moves only
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
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    let first = node.ok("eth_getBlockByNumber", json!(["0x1", false]));
    assert_eq!(first["number"], "0x1");
    // Every page but the file's header, overwritten under the node.
    let db = node.data_dir().join("chain.redb");
    let len = std::fs::metadata(&db).unwrap().len() as usize;
    {
        use std::io::{Seek, Write};
        let mut file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
        file.seek(std::io::SeekFrom::Start(4096)).unwrap();
        file.write_all(&vec![0x5a; len - 4096]).unwrap();
    }
    let e = node.call("eth_getBlockByNumber", json!(["0x1", false])).unwrap_err();
    assert_eq!(e["code"], -32603, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("block 1 could not be read") && message.contains("chain.redb"), "{e}");
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
