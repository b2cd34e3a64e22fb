//! A node restarted on its data dir resumes at the last committed height
//! with the same blocks, receipts, balances and nonces, keeps building on
//! it, and a data dir from another chain is refused with a clear message.

use serde_json::json;

use crate::support::*;

#[test]
fn restart_resumes_with_the_same_chain_and_state() {
    // The exact head is compared across the restart and the next block
    // must be head + 1: the chain moves only with transactions here (empty
    // blocks across a restart: idle_chain_seals_empty_blocks).
    let mut node =
        TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0")], &["--block-time-ms", "50"]);
    let to = random_signer().address();
    let mut hashes = Vec::new();
    for n in 0..3 {
        for i in 0..2 {
            hashes.push(node.send(&transfer(&dev(i), n, to, 10 + n)).unwrap());
        }
    }
    let receipts: Vec<_> = hashes.iter().map(|h| node.receipt(h)).collect();
    let head = node.ok("eth_blockNumber", json!([]));
    let head_block = node.ok("eth_getBlockByNumber", json!([head, true]));
    let balances: Vec<_> =
        [dev(0).address(), dev(1).address(), to].iter().map(|a| node.balance(*a)).collect();
    assert!(node.terminate().success());

    node.restart().unwrap();
    assert_eq!(node.ok("eth_blockNumber", json!([])), head);
    assert_eq!(node.ok("eth_getBlockByNumber", json!([head, true])), head_block);
    for (h, r) in hashes.iter().zip(&receipts) {
        assert_eq!(&node.ok("eth_getTransactionReceipt", json!([h])), r);
    }
    let after: Vec<_> = [dev(0).address(), dev(1).address(), to].iter().map(|a| node.balance(*a)).collect();
    assert_eq!(after, balances);
    assert_eq!(node.nonce(dev(0).address(), "pending"), 3);

    // It keeps building on the restored head.
    let r = node.receipt(&node.send(&transfer(&dev(0), 3, to, 1)).unwrap());
    let block = node.ok("eth_getBlockByHash", json!([r["blockHash"], false]));
    assert_eq!(parse_u64(&block["number"]), parse_u64(&head) + 1);
    assert_eq!(block["parentHash"], head_block["hash"]);
}

#[test]
fn a_data_dir_of_another_chain_is_refused() {
    let mut node = TestNode::dev();
    assert!(node.terminate().success());
    node.args.extend(["--chain-id".to_string(), "5".to_string()]);
    let log = node.restart().expect_err("must refuse another chain's data dir");
    assert!(log.contains("belongs to chain id 31337"), "{log}");
    assert!(log.contains("configured for chain id 5"), "{log}");
}

#[test]
fn a_damaged_database_is_refused_at_start_and_by_replay() {
    let mut node = TestNode::dev();
    for n in 0..3 {
        node.receipt(&node.send(&transfer(&dev(0), n, random_signer().address(), 1)).unwrap());
    }
    assert!(node.terminate().success());
    // A clean stop leaves every table in its files (fjall's LSM tree:
    // sorted tables, a journal, a version file naming the tables).
    let chain = node.data_dir().join("chain");
    let good = db_files(&chain);
    assert!(good.len() > 3, "{good:?}");
    // Exactly these files: a start may have added others (a journal,
    // tables of idle blocks).
    let restore = |files: &[(std::path::PathBuf, Vec<u8>)]| {
        let _ = std::fs::remove_dir_all(&chain);
        for (path, bytes) in files {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    };
    let mut refused = 0;
    // Each file in turn cut in half, then overwritten with garbage: the
    // node refuses with a clear error or starts on what it can read;
    // replay re-executes what it reads or fails with an error. Never a
    // panic.
    for (i, (path, bytes)) in good.iter().enumerate() {
        for bad in [bytes[..bytes.len() / 2].to_vec(), vec![0x5a; bytes.len()]] {
            restore(&good);
            std::fs::write(path, &bad).unwrap();
            let damaged = db_files(&chain);
            match node.restart() {
                Err(log) => {
                    assert!(log.contains("Error"), "a clear error, file {i}:\n{log}");
                    assert!(!log.contains("panicked"), "file {i}:\n{log}");
                    refused += 1;
                }
                Ok(()) => node.kill9(),
            }
            // Replay on the same damage (a start may have rewritten it).
            restore(&damaged);
            let (_, out) = node.replay();
            assert!(!out.contains("panicked"), "replay, file {}:\n{out}", path.display());
        }
    }
    assert!(refused > 0, "no damage was found at start over {} files", good.len());
}

/// Every file of the database under `dir`, with its bytes.
fn db_files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    fn walk(p: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
        for e in std::fs::read_dir(p).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path, bytes));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

#[test]
fn a_data_dir_of_the_older_engine_is_refused_with_what_to_do() {
    let mut node = TestNode::dev();
    assert!(node.terminate().success());
    std::fs::remove_dir_all(node.data_dir()).unwrap();
    std::fs::create_dir_all(node.data_dir()).unwrap();
    std::fs::write(node.data_dir().join("chain.redb"), b"an older sluice's chain").unwrap();
    let log = node.restart().expect_err("a redb data dir must be refused");
    assert!(log.contains("chain.redb") && log.contains("another --data-dir"), "{log}");
    let (ok, out) = node.replay();
    assert!(!ok && out.contains("chain.redb"), "{out}");
}

/// What the node logs when it starts on a data dir left open.
const NOT_CLEAN: &str = "was not closed cleanly";

#[test]
fn only_a_kill_leaves_the_data_dir_to_be_repaired_not_a_failed_start() {
    let mut node = TestNode::dev();
    assert!(node.terminate().success());
    // A first start that fails once it has written genesis: its RPC port
    // is taken.
    std::fs::remove_dir_all(node.data_dir()).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["node", "--data-dir"])
        .arg(node.data_dir())
        .args(["--rpc-addr", &taken.local_addr().unwrap().to_string(), "--metrics-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("cannot serve JSON-RPC"), "{stderr}");
    // The file it left needs no repair.
    node.restart().unwrap();
    assert!(!node.log().contains(NOT_CLEAN), "{}", node.log());
    // After a kill with commits since the start, the node says it
    // repaired the file (restart kills), and lost nothing synced.
    node.receipt(&node.send(&transfer(&dev(0), 0, random_signer().address(), 1)).unwrap());
    node.restart().unwrap();
    assert!(node.log().contains(NOT_CLEAN), "{}", node.log());
    assert_eq!(node.nonce(dev(0).address(), "latest"), 1);
}
