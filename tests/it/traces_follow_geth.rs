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

#[test]
fn traces_are_bounded_in_time_and_output() {
    let node = TestNode::start(
        &[("SLUICE_RPC__TRACE_MAX_BYTES", "65536"), ("SLUICE_RPC__TRACE_MAX_TIMEOUT_MS", "300")],
        &["--block-time-ms", "50"],
    );
    // Initcode that loops for ever (JUMPDEST PUSH1 0 JUMP), with a billion
    // gas: hundreds of millions of steps.
    let spin = json!({"data": "0x5b600056", "gas": "0x3b9aca00"});
    let message = |e: &serde_json::Value| e["message"].as_str().unwrap_or_default().to_string();

    // The struct logger collects a step at a time: stopped at 64 KiB (a
    // few hundred steps: well inside the 300 ms deadline even on a debug
    // build sharing two busy cores, where 1 MiB once was not).
    let e = node.call("debug_traceCall", json!([spin, "latest"])).unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    assert!(message(&e).contains("rpc.trace_max_bytes (65536 bytes)"), "{e}");

    // callTracer's output is per call: the deadline stops it, and a
    // `timeout` above rpc.trace_max_timeout_ms gets the maximum.
    let started = std::time::Instant::now();
    let e = node
        .call("debug_traceCall", json!([spin, "latest", {"tracer": "callTracer", "timeout": "1h"}]))
        .unwrap_err();
    assert_eq!((e["code"].clone(), message(&e)), (json!(-32000), "execution timeout".to_string()), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "took {:?}", started.elapsed());
    let e = node
        .call("debug_traceCall", json!([spin, "latest", {"tracer": "noopTracer", "timeout": "10ms"}]))
        .unwrap_err();
    assert_eq!(message(&e), "execution timeout", "{e}");

    // A timeout that is not a Go duration is refused as geth refuses it.
    let e = node.call("debug_traceCall", json!([spin, "latest", {"timeout": "soon"}])).unwrap_err();
    assert_eq!(message(&e), "time: invalid duration \"soon\"", "{e}");

    // A bounded call still traces, and the node still answers.
    let ok = node.ok("debug_traceCall", json!([{"data": "0x600160005500", "gas": "0x30000"}, "latest"]));
    assert_eq!(ok["failed"], false, "{ok}");
    assert!(node.call("eth_blockNumber", json!([])).is_ok());
}

/// geth 1.16's `prestateTracer` (`eth/tracers/native/prestate.go`, since
/// go-ethereum#31855): accounts that were empty before the transaction are
/// left out, in both modes, unless `includeEmpty` asks for every account
/// looked up (sender, recipient and coinbase at the start of the
/// transaction, then each one execution reaches), as `{"balance": "0x0"}`.
#[test]
fn prestate_leaves_out_empty_accounts_unless_asked_as_geth_does() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let sender = dev(0);
    let prestate = |hash: &alloy_primitives::B256, config: serde_json::Value| {
        node.ok("debug_traceTransaction", json!([hash, {"tracer": "prestateTracer", "tracerConfig": config}]))
    };
    let key = |a: Address| a.to_string().to_lowercase();
    // A transfer to an account that does not exist yet.
    let fresh = random_signer().address();
    let hash = node.send(&transfer(&sender, 0, fresh, 5)).unwrap();
    let r = node.receipt(&hash);
    let pre = prestate(&hash, json!({}));
    assert!(pre.get(key(fresh)).is_none(), "empty before: left out {pre}");
    assert!(pre.get(key(sender.address())).is_some(), "{pre}");
    let all = prestate(&hash, json!({"includeEmpty": true}));
    assert_eq!(all[key(fresh)], json!({"balance": "0x0"}), "{all}");
    let block = node.ok("eth_getBlockByHash", json!([r["blockHash"], false]));
    let miner = block["miner"].as_str().unwrap().to_lowercase();
    assert!(all.get(&miner).is_some(), "the coinbase {miner} is looked up: {all}");
    let diff = prestate(&hash, json!({"diffMode": true}));
    assert!(diff["pre"].get(key(fresh)).is_none(), "empty before: not in pre {diff}");
    assert_eq!(diff["post"][key(fresh)], json!({"balance": "0x5"}), "{diff}");
    let refused = node
        .call("debug_traceTransaction", json!([hash, {"tracer": "prestateTracer", "tracerConfig": {"diffMode": true, "includeEmpty": true}}]))
        .expect_err("geth refuses the pair");
    assert!(
        refused["message"].as_str().unwrap().contains("cannot use diffMode with includeEmpty"),
        "{refused}"
    );

    // Nothing sent to an empty account: looked up, empty, unchanged.
    let empty = random_signer().address();
    let hash = node.send(&transfer(&sender, 1, empty, 0)).unwrap();
    node.receipt(&hash);
    assert!(prestate(&hash, json!({})).get(key(empty)).is_none());
    assert_eq!(prestate(&hash, json!({"includeEmpty": true}))[key(empty)], json!({"balance": "0x0"}));
    let diff = prestate(&hash, json!({"diffMode": true}));
    assert!(diff["pre"].get(key(empty)).is_none() && diff["post"].get(key(empty)).is_none(), "{diff}");

    // A creation: the created account was empty before.
    let hash =
        node.send(&eip1559(&sender, 2, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap();
    let created = node.receipt(&hash)["contractAddress"].as_str().unwrap().to_lowercase();
    assert!(prestate(&hash, json!({"includeEmpty": true})).get(&created).is_none());
    let diff = prestate(&hash, json!({"diffMode": true}));
    assert!(diff["pre"].get(&created).is_none() && diff["post"].get(&created).is_some(), "{diff}");
}

#[test]
fn the_struct_logger_words_errors_as_geth() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let owner = dev(0);
    let r = node.receipt(
        &node.send(&eip1559(&owner, 0, TxKind::Create, U256::ZERO, counter_initcode(), 200_000)).unwrap(),
    );
    let counter: Address = r["contractAddress"].as_str().unwrap().parse().unwrap();
    let error_of = |hash: &alloy_primitives::B256| {
        let t = node.ok("debug_traceTransaction", json!([hash]));
        assert_eq!(t["failed"], true, "{t}");
        let logs = t["structLogs"].as_array().unwrap().clone();
        logs.iter().filter_map(|l| l.get("error").cloned()).collect::<Vec<_>>()
    };
    // Gas for the call's intrinsic cost and a little: the counter's
    // storage write runs out (geth: "out of gas").
    let hash =
        node.send(&eip1559(&owner, 1, TxKind::Call(counter), U256::ZERO, Bytes::new(), 23_000)).unwrap();
    assert_eq!(node.receipt(&hash)["status"], "0x0");
    assert_eq!(error_of(&hash), vec![json!("out of gas")]);
    // Init code that is the designated invalid instruction (0xfe).
    let hash =
        node.send(&eip1559(&owner, 2, TxKind::Create, U256::ZERO, Bytes::from(vec![0xfe]), 100_000)).unwrap();
    assert_eq!(node.receipt(&hash)["status"], "0x0");
    assert_eq!(error_of(&hash), vec![json!("invalid opcode: INVALID")]);
}
