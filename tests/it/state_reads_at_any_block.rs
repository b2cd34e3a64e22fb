//! Every state read takes a block: balances, nonces, code, storage and
//! `eth_call` at an older block (by number, by hash as EIP-1898 asks, and
//! `earliest`) answer as of the end of that block while the chain moves
//! on, and the same after a restart.

use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::{json, Value};

use crate::support::*;

/// What was true at the end of one block.
struct Seen {
    number: u64,
    hash: B256,
    /// The recipient's balance, the user's nonce, the counter's slot 0.
    balance: U256,
    nonce: u64,
    counter: U256,
}

fn hex(n: u64) -> String {
    format!("{n:#x}")
}

fn check(node: &TestNode, counter: Address, user: Address, to: Address, deployed: u64, seen: &[Seen]) {
    for s in seen {
        let by_number = json!(hex(s.number));
        let by_hash = json!({"blockHash": s.hash, "requireCanonical": true});
        for at in [&by_number, &by_hash] {
            let balance = parse_u256(&node.ok("eth_getBalance", json!([to, at])));
            assert_eq!(balance, s.balance, "balance at {at}");
            let nonce = parse_u64(&node.ok("eth_getTransactionCount", json!([user, at])));
            assert_eq!(nonce, s.nonce, "nonce at {at}");
            let slot = parse_u256(&node.ok("eth_getStorageAt", json!([counter, "0x0", at])));
            assert_eq!(slot, s.counter, "counter at {at}");
            // The counter returns its value plus one, as of that block.
            let out = parse_u256(&node.ok("eth_call", json!([{"to": counter}, at])));
            assert_eq!(out, s.counter + U256::from(1), "eth_call at {at}");
        }
    }
    // Before the deployment there is no code; from it on, the runtime.
    let before = node.ok("eth_getCode", json!([counter, hex(deployed - 1)]));
    assert_eq!(before, json!("0x"));
    let code = node.ok("eth_getCode", json!([counter, hex(deployed)]));
    assert_eq!(code, json!(Bytes::from(counter_runtime())));
    let earliest = parse_u256(&node.ok("eth_getBalance", json!([to, "earliest"])));
    assert_eq!(earliest, U256::ZERO, "the recipient is fresh at genesis");
    // Past the head: geth's wording, not a value.
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    let err = node.call("eth_getBalance", json!([to, hex(head + 1000)])).unwrap_err();
    assert_eq!((err["code"].as_i64(), err["message"].as_str()), (Some(-32000), Some("header not found")));
    let unknown: Value = json!({"blockHash": B256::repeat_byte(0xab)});
    let err = node.call("eth_getBalance", json!([to, unknown])).unwrap_err();
    assert!(err["message"].as_str().unwrap_or_default().starts_with("header for hash"), "{err}");
}

#[test]
fn balances_nonces_code_storage_and_calls_answer_at_older_blocks() {
    let mut node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let (owner, user) = (dev(0), dev(1));
    let to = random_signer().address();
    let raw = eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000);
    let r = node.receipt(&node.send(&raw).unwrap());
    assert_eq!(r["status"], "0x1", "{r}");
    let counter: Address = r["contractAddress"].as_str().unwrap().parse().unwrap();
    let deployed = parse_u64(&r["blockNumber"]);
    let mut seen = Vec::new();
    for k in 1..=4u64 {
        // One increment and one transfer per round, each in its own block
        // or together: what is recorded is the block the receipt names.
        let inc =
            node.send(&eip1559(&user, 2 * (k - 1), TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000));
        let pay = node.send(&transfer(&user, 2 * k - 1, to, 1_000));
        let last = node.receipt(&pay.unwrap());
        node.receipt(&inc.unwrap());
        let number = parse_u64(&last["blockNumber"]);
        let block = node.ok("eth_getBlockByNumber", json!([hex(number), false]));
        seen.push(Seen {
            number,
            hash: block["hash"].as_str().unwrap().parse().unwrap(),
            balance: U256::from(1_000 * k),
            nonce: 2 * k,
            counter: U256::from(k),
        });
        // Let the chain move past it (empty blocks are not sealed on an
        // idle chain, so wait for the next round's blocks instead).
    }
    check(&node, counter, user.address(), to, deployed, &seen);
    node.restart().expect("restarts");
    check(&node, counter, user.address(), to, deployed, &seen);
    assert!(node.terminate().success(), "log:\n{}", node.log());
    node.assert_replay_matches_vault("after reads at older blocks");
}

#[test]
fn reads_past_the_history_window_are_refused_naming_the_oldest_block() {
    let node = TestNode::start(&[("SLUICE_STORE__HISTORY_BLOCKS", "2")], &["--block-time-ms", "50"]);
    let user = dev(3);
    let to = random_signer().address();
    let mut blocks = Vec::new();
    for n in 0..6u64 {
        let r = node.receipt(&node.send(&transfer(&user, n, to, 7)).unwrap());
        blocks.push(parse_u64(&r["blockNumber"]));
    }
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    // The window: the head and the 2 blocks before it answer (the head
    // may have moved on since: idle blocks).
    let balance = parse_u256(&node.ok("eth_getBalance", json!([to, hex(head)])));
    assert_eq!(balance, U256::from(42));
    let err = node.call("eth_getBalance", json!([to, hex(blocks[0])])).unwrap_err();
    let message = err["message"].as_str().unwrap_or_default();
    assert_eq!(err["code"], -32000, "{err}");
    assert!(
        message.starts_with("missing trie node") && message.contains(&format!("block {}", blocks[0])),
        "{err} (head {head})"
    );
    // `earliest` is genesis: outside the window too.
    let err = node.call("eth_getBalance", json!([to, "earliest"])).unwrap_err();
    assert!(err["message"].as_str().unwrap_or_default().starts_with("missing trie node"), "{err}");
}
