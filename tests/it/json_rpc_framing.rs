//! JSON-RPC 2.0 framing and its limits: batches, notifications, malformed
//! input, unknown methods, oversized bodies and batches.

use serde_json::{json, Value};

use crate::support::*;

#[test]
fn batches_notifications_and_errors_follow_json_rpc_2() {
    let node = TestNode::start(
        &[("SLUICE_RPC__MAX_BATCH_LEN", "5"), ("SLUICE_RPC__MAX_REQUEST_BODY_BYTES", "4096")],
        &[],
    );

    let resp = node.post(&json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"},
        {"jsonrpc": "2.0", "id": "two", "method": "net_version"},
        {"jsonrpc": "2.0", "method": "eth_blockNumber"},
        {"jsonrpc": "2.0", "id": 4, "method": "nope_nothing"},
        42
    ]));
    let arr = resp.as_array().unwrap();
    assert_eq!(arr.len(), 4, "the notification gets no answer: {resp}");
    assert_eq!(arr[0]["result"], "0x7a69");
    assert_eq!(arr[1]["id"], "two");
    assert_eq!(arr[1]["result"], "31337");
    assert_eq!(arr[2]["error"]["code"], -32601);
    assert_eq!(arr[2]["error"]["message"], "the method nope_nothing does not exist/is not available");
    assert_eq!(arr[3]["error"]["code"], -32600);

    let empty = node.post(&json!([]));
    assert_eq!(empty["error"]["code"], -32600);
    let too_many: Vec<Value> =
        (0..6).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "eth_chainId"})).collect();
    let resp = node.post(&Value::Array(too_many));
    assert_eq!(resp["error"]["code"], -32600);
    assert!(resp["error"]["message"].as_str().unwrap().starts_with("batch too large"));

    let (status, body) = node.post_raw("{\"jsonrpc\": \"2.0\", \"id\": 1, ");
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32700);

    let deep = "[".repeat(3_000);
    let (_, body) = node.post_raw(&deep);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32700, "deep nesting is a parse error");

    let wrong_version = node.post(&json!({"jsonrpc": "1.0", "id": 1, "method": "eth_chainId"}));
    assert_eq!(wrong_version["error"]["code"], -32600);
    let bad_params =
        node.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": ["0x12"]}));
    assert_eq!(bad_params["error"]["code"], -32602);
    assert!(bad_params["error"]["message"].as_str().unwrap().starts_with("invalid argument 0"));
    let bad_params =
        node.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": {"a": 1}}));
    assert_eq!(bad_params["error"]["code"], -32602);

    let (status, _) = node.post_raw(&format!("\"{}\"", "x".repeat(5000)));
    assert_eq!(status, 413, "bodies over the limit are refused before parsing");

    // The node is still fine.
    assert_eq!(node.ok("eth_chainId", json!([])), "0x7a69");
}

#[test]
fn read_methods_answer_like_geth() {
    // The answers checked are those of a chain at genesis (every tag is
    // block 0, block 5 does not exist): no empty blocks may move it.
    let node =
        TestNode::start(&[("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0")], &["--block-time-ms", "50"]);
    assert_eq!(node.ok("eth_syncing", json!([])), false);
    assert!(node.ok("web3_clientVersion", json!([])).as_str().unwrap().starts_with("sluice/"));
    assert_eq!(node.ok("eth_gasPrice", json!([])), "0x77359400");
    assert_eq!(node.ok("eth_maxPriorityFeePerGas", json!([])), "0x3b9aca00");
    let b = node.ok("eth_getBlockByNumber", json!(["latest", false]));
    for tag in ["pending", "safe", "finalized", "earliest"] {
        assert_eq!(node.ok("eth_getBlockByNumber", json!([tag, false]))["number"], "0x0");
    }
    assert_eq!(b["baseFeePerGas"], "0x3b9aca00");
    assert!(node.ok("eth_getBlockByNumber", json!(["0x99", false])).is_null());
    assert!(node.ok("eth_getTransactionReceipt", json!([alloy_primitives::B256::ZERO])).is_null());
    assert!(node.ok("eth_getTransactionByHash", json!([alloy_primitives::B256::ZERO])).is_null());
    let fh = node.ok("eth_feeHistory", json!(["0x4", "latest", [25.0, 75.0]]));
    assert_eq!(fh["oldestBlock"], "0x0");
    assert_eq!(fh["baseFeePerGas"].as_array().unwrap().len(), 2);
    assert_eq!(fh["reward"].as_array().unwrap().len(), 1);
    let e = node.call("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "0x5000"}])).unwrap_err();
    assert_eq!(e["code"], -32005);
    let e = node.call("eth_getBalance", json!([dev(0).address(), "0x5"])).unwrap_err();
    assert_eq!(e["message"], "header not found");
}

/// A batch's submissions are read by a shortcut when they have the usual
/// shape; every other spelling of the same call must be answered as it was
/// before the shortcut: an escaped hex string is still the transaction, a
/// wrongly typed id or bad hex still gets JSON-RPC's and geth's errors.
#[test]
fn batch_submissions_in_any_spelling_are_answered_alike() {
    let node = TestNode::start(&[], &["--block-time-ms", "200"]);
    let (a, b) = (dev(0), dev(1));
    let to = random_signer().address();
    let (a0, b0) = (transfer(&a, 0, to, 1), transfer(&b, 0, to, 1));
    let hex = |raw: &alloy_primitives::Bytes| alloy_primitives::hex::encode(raw);
    // "\u0030x" is "0x" escaped: the same string to any JSON reader.
    let body = format!(
        r#"[{{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x{}"]}},
            {{"params":["\u0030x{}"],"method":"eth_sendRawTransaction","id":"two","jsonrpc":"2.0"}},
            {{"jsonrpc":"2.0","id":3,"method":"eth_sendRawTransaction","params":["0x123"]}},
            {{"jsonrpc":"2.0","id":[4],"method":"eth_sendRawTransaction","params":["0x{}"]}},
            {{"jsonrpc":"2.0","id":5,"method":"eth_sendRawTransaction","params":["0x{}", 1]}}]"#,
        hex(&a0),
        hex(&b0),
        hex(&a0),
        hex(&a0)
    );
    let (status, reply) = node.post_raw(&body);
    assert_eq!(status, 200);
    let answers: Value = serde_json::from_str(&reply).unwrap();
    let answers = answers.as_array().expect("a batch answer");
    assert_eq!(answers.len(), 5, "{answers:?}");
    assert_eq!(answers[0]["result"], json!(alloy_primitives::keccak256(&a0)));
    assert_eq!(answers[1]["id"], "two");
    assert_eq!(answers[1]["result"], json!(alloy_primitives::keccak256(&b0)));
    assert_eq!(answers[2]["error"]["code"], -32602, "{}", answers[2]);
    let odd = answers[2]["error"]["message"].as_str().unwrap_or_default();
    assert!(odd.starts_with("invalid argument 0: json: cannot unmarshal hex string of odd length"), "{odd}");
    assert_eq!(answers[3]["error"]["code"], -32600, "an array id is an invalid request");
    assert_eq!(answers[3]["id"], Value::Null);
    // Extra params are ignored, as geth does: the transaction is known.
    assert_eq!(answers[4]["error"]["message"], "already known", "{}", answers[4]);
    for raw in [&a0, &b0] {
        assert_eq!(node.receipt(&alloy_primitives::keccak256(raw))["status"], "0x1");
    }
}
