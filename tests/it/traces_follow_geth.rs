//! geth's tracers over JSON-RPC (revm-inspectors): a mined transaction is
//! replayed on the state before its block, a call on the state it names.

use alloy_primitives::{Address, Bytes, TxKind, U256};
use serde_json::json;

use crate::support::*;

#[test]
fn transactions_calls_and_blocks_trace_with_each_tracer() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let owner = dev(0);
    let r = node.receipt(
        &node.send(&eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap(),
    );
    let counter: Address = r["contractAddress"].as_str().unwrap().parse().unwrap();
    let hash =
        node.send(&eip1559(&owner, 1, TxKind::Call(counter), U256::ZERO, Bytes::new(), 100_000)).unwrap();
    let r = node.receipt(&hash);
    assert_eq!(r["status"], "0x1");

    // The struct logger: every opcode, the gas the receipt says.
    let t = node.ok("debug_traceTransaction", json!([hash]));
    assert_eq!(t["failed"], false, "{t}");
    assert_eq!(t["gas"], json!(parse_u64(&r["gasUsed"])));
    let logs = t["structLogs"].as_array().unwrap();
    assert!(logs.iter().any(|l| l["op"] == "SSTORE"), "the counter stores");
    assert!(logs[0]["stack"].is_array());
    let bare = node.ok("debug_traceTransaction", json!([hash, {"disableStack": true}]));
    assert!(bare["structLogs"][0].get("stack").is_none(), "{}", bare["structLogs"][0]);

    // callTracer: the top call to the counter, returning 1.
    let call = node.ok("debug_traceTransaction", json!([hash, {"tracer": "callTracer"}]));
    assert_eq!(call["type"], "CALL");
    assert_eq!(call["to"], json!(counter));
    assert_eq!(parse_u256(&call["output"]), U256::from(1));
    let with_log = node.ok(
        "debug_traceTransaction",
        json!([hash, {"tracer": "callTracer", "tracerConfig": {"withLog": true}}]),
    );
    assert_eq!(with_log["logs"].as_array().map(Vec::len), Some(1));

    // prestateTracer: slot 0 was 0 before (absent), 1 after in diff mode.
    let diff = node.ok(
        "debug_traceTransaction",
        json!([hash, {"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}}]),
    );
    let post = &diff["post"][format!("{counter:#x}")];
    assert_eq!(parse_u256(&post["storage"][format!("{:#066x}", 0)]), U256::from(1), "{diff}");
    let pre = node.ok("debug_traceTransaction", json!([hash, {"tracer": "prestateTracer"}]));
    assert!(pre.get(format!("{counter:#x}")).is_some(), "{pre}");

    assert!(node.ok("debug_traceTransaction", json!([hash, {"tracer": "4byteTracer"}])).is_object());
    assert_eq!(node.ok("debug_traceTransaction", json!([hash, {"tracer": "noopTracer"}])), json!({}));

    // A call on the state at the deploy's block: the counter was still 0.
    let at_latest = node.ok("debug_traceCall", json!([{"to": counter}, "latest", {"tracer": "callTracer"}]));
    assert_eq!(parse_u256(&at_latest["output"]), U256::from(2));
    let block = node.ok("debug_traceBlockByNumber", json!([r["blockNumber"], {"tracer": "callTracer"}]));
    let entry =
        block.as_array().unwrap().iter().find(|e| e["txHash"] == json!(hash)).cloned().expect("the tx");
    assert_eq!(entry["result"], call);
    let by_hash = node.ok("debug_traceBlockByHash", json!([r["blockHash"], {"tracer": "callTracer"}]));
    assert_eq!(by_hash, block);

    // Errors: an unknown transaction, an unknown tracer.
    let e = node.call("debug_traceTransaction", json!([alloy_primitives::B256::repeat_byte(7)])).unwrap_err();
    assert!(e["message"].as_str().unwrap_or_default().contains("not found"), "{e}");
    assert!(node.call("debug_traceTransaction", json!([hash, {"tracer": "nope"}])).is_err());
}
