//! Calls and traces run for a caller are bounded in gas (`rpc.gas_cap`),
//! time (`rpc.evm_timeout_ms`, a batch's `rpc.batch_timeout_ms`), EVM
//! memory (`rpc.evm_memory_limit_bytes`) and output (`rpc.trace_max_bytes`,
//! counting return data and storage snapshots), and run on a pool of their
//! own: with it full, cheap reads still answer and a new heavy call is
//! refused at once. The hostile requests are those of issue 55, scaled to
//! run here.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

/// Resident memory of the node's process, in MiB.
fn rss_mib(node: &TestNode) -> u64 {
    let pid = node.pid().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb / 1024
}

fn message(e: &Value) -> String {
    e["message"].as_str().unwrap_or_default().to_string()
}

/// Initcode that loops for ever: JUMPDEST PUSH1 0 JUMP.
const SPIN: &str = "0x5b600056";

/// An `eth_call` to the blake2f precompile running `rounds` rounds (a
/// round costs one gas, and runs inside the precompile, where no step
/// hook sees it).
fn blake2f(rounds: u32) -> Value {
    let input = format!("0x{rounds:08x}{}01", "00".repeat(208));
    json!({"to": "0x0000000000000000000000000000000000000009", "data": input, "gas": "0x2faf080"})
}

#[test]
fn a_trace_cannot_ask_for_unbounded_gas_or_memory() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let before = rss_mib(&node);
    // MSTORE(2^40, 1) with all the gas there is: the allocator was asked
    // for 1 TiB and the process died. Now capped at 50M gas: out of gas.
    let huge = json!({"gas": "0xffffffffffffffff", "input": "0x6001650100000000005200"});
    for tracer in [json!({"tracer": "callTracer"}), json!({})] {
        let t = node.ok("debug_traceCall", json!([huge, "latest", tracer]));
        // Past the EVM memory limit before the gas: "out of gas: reach
        // memory limit" in callTracer's words.
        let failed =
            t["failed"] == json!(true) || t["error"].as_str().is_some_and(|e| e.starts_with("out of gas"));
        assert!(failed, "{t}");
    }
    let e = node.call("eth_call", json!([huge, "latest"])).unwrap_err();
    assert_eq!(message(&e), "out of gas", "{e}");
    // MSTORE(2^30, 1): 1 GiB for one request before.
    let gib = json!({"gas": "0xffffffffffffffff", "input": "0x600163400000005200"});
    node.ok("debug_traceCall", json!([gib, "latest", {"tracer": "callTracer"}]));
    // A traced call gets the cap too: callTracer reports the gas it had.
    let t = node.ok("debug_traceCall", json!([{"gas": "0xffffffffffffffff", "input": SPIN}, "latest", {"tracer": "callTracer", "timeout": "30s"}]));
    assert_eq!(t["gas"], json!("0x2faf080"), "rpc.gas_cap (50M) applies to debug_traceCall: {t}");
    // An estimate stops below both rpc.gas_cap and, on Osaka, EIP-7825's
    // per-transaction cap (2^24), as geth's gasestimator.
    let e = node.call("eth_estimateGas", json!([{"input": SPIN}, "latest"])).unwrap_err();
    assert_eq!(message(&e), "gas required exceeds allowance (16777216)", "{e}");
    let grown = rss_mib(&node).saturating_sub(before);
    assert!(grown < 200, "RSS grew by {grown} MiB");
    assert!(node.call("eth_blockNumber", json!([])).is_ok());
}

#[test]
fn evm_memory_is_bounded_whatever_the_gas() {
    // A cap that would pay for gigabytes of memory, and a 1 MiB limit.
    let node = TestNode::start(
        &[("SLUICE_RPC__GAS_CAP", "100000000000"), ("SLUICE_RPC__EVM_MEMORY_LIMIT_BYTES", "1048576")],
        &["--block-time-ms", "50"],
    );
    // MSTORE(2^18, 1): 256 KiB, within the limit.
    let small = json!({"gas": "0x3b9aca00", "input": "0x6001620400005200"});
    assert!(node.call("eth_call", json!([small, "latest"])).is_ok());
    // MSTORE(2^22, 1): 4 MiB, payable with this cap (about 34M gas), past
    // the limit: out of gas, as revm's memory limit answers.
    let big = json!({"gas": "0x3b9aca00", "input": "0x6001624000005200"});
    let e = node.call("eth_call", json!([big, "latest"])).unwrap_err();
    assert_eq!(message(&e), "out of gas", "{e}");
    let t = node.ok("debug_traceCall", json!([big, "latest", {"tracer": "callTracer"}]));
    assert_eq!(t["error"], json!("out of gas: reach memory limit"), "{t}");
}

#[test]
fn the_struct_logger_counts_return_data_and_storage_as_it_records() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let before = rss_mib(&node);
    let message_of = |r: Result<Value, Value>| message(&r.expect_err("stopped"));
    // A callee returning 16 KiB, and a caller that calls it once and then
    // loops: every step keeps the 16 KiB of return data (2 GB of JSON
    // built before -32005 before).
    let callee = "0x00000000000000000000000000000000000000bb";
    let caller = "0x00000000000000000000000000000000000000aa";
    let overrides = json!({
        callee: {"code": "0x6140006000f3"},
        caller: {"code": "0x600060006000600060007300000000000000000000000000000000000000bb5af1505b602256"},
    });
    let m = message_of(node.call(
        "debug_traceCall",
        json!([{"to": caller, "gas": "0x20000"}, "latest", {"stateOverrides": overrides, "disableStack": true, "enableReturnData": true}]),
    ));
    assert!(m.contains("rpc.trace_max_bytes"), "{m}");
    // 2,000 distinct SLOADs: the logger snapshots the contract's whole
    // storage map at each one (quadratic output).
    let reader = json!({caller: {"code": "0x6107d05b805450600190038060035700"}});
    let slots = json!([{"to": caller, "gas": "0x2000000"}, "latest", {"stateOverrides": reader, "disableStack": true}]);
    let m = message_of(node.call("debug_traceCall", slots.clone()));
    assert!(m.contains("rpc.trace_max_bytes"), "{m}");
    // Without storage snapshots the same trace fits.
    let mut without = slots;
    without[2]["disableStorage"] = json!(true);
    let t = node.ok("debug_traceCall", without);
    assert_eq!(t["failed"], json!(false));
    let grown = rss_mib(&node).saturating_sub(before);
    assert!(grown < 300, "RSS grew by {grown} MiB");
}

#[test]
fn heavy_calls_never_starve_cheap_reads_and_are_refused_past_the_pool() {
    let node = TestNode::start(
        &[
            ("SLUICE_RPC__CALL_WORKERS", "1"),
            ("SLUICE_RPC__CALL_QUEUE_CALLS", "1"),
            ("SLUICE_RPC__EVM_TIMEOUT_MS", "3000"),
        ],
        &["--block-time-ms", "50"],
    );
    // Two 49M-round blake2f calls: one runs, one waits.
    let heavy: Vec<_> = (0..2)
        .map(|_| {
            let url = node.url.clone();
            let h = std::thread::spawn(move || rpc(&url, "eth_call", json!([blake2f(49_000_000), "latest"])));
            std::thread::sleep(Duration::from_millis(100));
            h
        })
        .collect();
    // The pool is full: a third is refused at once.
    let start = Instant::now();
    let e = node.call("eth_call", json!([blake2f(49_000_000), "latest"])).unwrap_err();
    assert_eq!(e["code"], json!(-32005), "{e}");
    assert!(message(&e).contains("rpc.call_workers"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(1), "refused at once, took {:?}", start.elapsed());
    // Cheap reads and submissions answer meanwhile (they took 2 s with
    // calls on the HTTP workers).
    for i in 0..5 {
        let start = Instant::now();
        node.ok("eth_blockNumber", json!([]));
        node.ok("eth_getBalance", json!([dev(0).address(), "latest"]));
        let hash = node.send(&transfer(&dev(1), i, random_signer().address(), 1)).unwrap();
        assert!(!hash.is_zero());
        assert!(start.elapsed() < Duration::from_secs(1), "cheap calls took {:?}", start.elapsed());
    }
    for h in heavy {
        // Each either finished or hit its 3 s deadline; neither hangs.
        let out = h.join().unwrap().expect("an answer");
        match out.get("result") {
            Some(r) => assert!(r.as_str().is_some_and(|s| s.len() == 130), "{out}"),
            None => assert_eq!(message(&out["error"]), "execution aborted (timeout = 3s)", "{out}"),
        }
    }
    assert!(node.metric("sluice_rpc_calls_refused_total").unwrap_or_default() >= 1.0);
}

#[test]
fn calls_stop_at_their_deadline_even_inside_a_precompile() {
    let node = TestNode::start(
        &[("SLUICE_RPC__EVM_TIMEOUT_MS", "50"), ("SLUICE_RPC__BATCH_TIMEOUT_MS", "400")],
        &["--block-time-ms", "50"],
    );
    let spin = json!({"input": SPIN});
    for method in ["eth_call", "eth_estimateGas", "eth_createAccessList"] {
        let e = node.call(method, json!([spin, "latest"])).unwrap_err();
        assert_eq!(
            (e["code"].clone(), message(&e)),
            (json!(-32000), "execution aborted (timeout = 50ms)".into())
        );
    }
    // A 49M-round blake2f runs for about half a second inside the
    // precompile: the caller is answered at the deadline all the same.
    let start = Instant::now();
    let e = node.call("eth_call", json!([blake2f(49_000_000), "latest"])).unwrap_err();
    assert_eq!(message(&e), "execution aborted (timeout = 50ms)", "{e}");
    assert!(start.elapsed() < Duration::from_millis(2_000), "answered after {:?}", start.elapsed());
    // A batch shares one budget: calls it has no time left for are not run.
    let call = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let spin_trace = json!([spin, "latest", {"tracer": "callTracer", "timeout": "10s"}]);
    let batch = json!([
        call(1, "debug_traceCall", spin_trace.clone()),
        call(2, "eth_blockNumber", json!([])),
        call(3, "debug_traceCall", spin_trace),
    ]);
    let answers = node.post(&batch);
    let by_id = |id: u64| answers.as_array().unwrap().iter().find(|a| a["id"] == json!(id)).cloned().unwrap();
    assert_eq!(message(&by_id(1)["error"]), "execution timeout", "{answers}");
    assert_eq!(by_id(2)["error"], json!({"code": -32002, "message": "request timed out"}), "{answers}");
    assert_eq!(by_id(3)["error"]["code"], json!(-32002), "{answers}");
}

#[test]
fn namespaces_outside_rpc_apis_do_not_exist() {
    let node = TestNode::start(&[("SLUICE_RPC__APIS", "eth,net,web3")], &["--block-time-ms", "50"]);
    for (method, params) in [
        ("debug_traceCall", json!([{"input": "0x00"}, "latest"])),
        ("txpool_status", json!([])),
        ("debug_traceBlockByNumber", json!(["latest"])),
    ] {
        let e = node.call(method, params).unwrap_err();
        assert_eq!(e["code"], json!(-32601), "{e}");
        assert_eq!(message(&e), format!("the method {method} does not exist/is not available"));
    }
    node.ok("eth_chainId", json!([]));
    node.ok("net_version", json!([]));
}
