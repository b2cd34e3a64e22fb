//! geth's state and block overrides: `eth_call` (3rd and 4th parameters),
//! `eth_estimateGas` and `debug_traceCall` (`stateOverrides`,
//! `blockOverrides` beside the tracer's options) run as if accounts had
//! other balances, code or storage, or the block another number or time;
//! nothing is written.

use alloy_primitives::{Address, U256};
use serde_json::{json, Value};

use crate::support::*;

/// NUMBER and TIMESTAMP, returned as two words.
const NUMBER_AND_TIME: &str = "0x436000524260205260406000f3";
/// Storage slot 0, returned.
const SLOT_ZERO: &str = "0x60005460005260206000f3";
/// The contract's own balance, returned.
const SELF_BALANCE: &str = "0x4760005260206000f3";

fn word(v: &Value, i: usize) -> U256 {
    let hex = v.as_str().unwrap().trim_start_matches("0x");
    U256::from_str_radix(&hex[i * 64..(i + 1) * 64], 16).unwrap()
}

#[test]
fn calls_and_traces_run_on_overridden_state_and_blocks() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    let x = Address::repeat_byte(0x42);
    let call = json!({"to": x});
    let code = |c: &str| json!({ format!("{x:#x}"): {"code": c} });

    // Code and a block that are not the chain's.
    let out = node
        .ok("eth_call", json!([call, "latest", code(NUMBER_AND_TIME), {"number": "0x4d2", "time": "0x10"}]));
    assert_eq!((word(&out, 0), word(&out, 1)), (U256::from(1234), U256::from(16)), "{out}");

    // Storage: stateDiff keeps other slots, state replaces them all.
    let slot = |kind: &str, v: &str| json!({ format!("{x:#x}"): {"code": SLOT_ZERO, kind: { format!("{:#066x}", 0): v }} });
    let out = node.ok(
        "eth_call",
        json!([
            call,
            "latest",
            slot("stateDiff", "0x000000000000000000000000000000000000000000000000000000000000002a")
        ]),
    );
    assert_eq!(word(&out, 0), U256::from(42));
    let out = node.ok(
        "eth_call",
        json!([
            call,
            "latest",
            slot("state", "0x0000000000000000000000000000000000000000000000000000000000000007")
        ]),
    );
    assert_eq!(word(&out, 0), U256::from(7));

    // Balance.
    let rich = json!({ format!("{x:#x}"): {"code": SELF_BALANCE, "balance": "0x3e8"} });
    assert_eq!(word(&node.ok("eth_call", json!([call, "latest", rich])), 0), U256::from(1000));

    // eth_estimateGas runs the overridden code (more than a plain transfer).
    let gas = parse_u64(&node.ok("eth_estimateGas", json!([call, "latest", code(SLOT_ZERO)])));
    assert!(gas > 21_000, "{gas}");

    // debug_traceCall: the overrides beside the tracer's options.
    let traced = node.ok(
        "debug_traceCall",
        json!([call, "latest", {
            "tracer": "callTracer",
            "stateOverrides": code(NUMBER_AND_TIME),
            "blockOverrides": {"number": "0x7", "time": "0x9"},
        }]),
    );
    assert_eq!(
        (word(&traced["output"], 0), word(&traced["output"], 1)),
        (U256::from(7), U256::from(9)),
        "{traced}"
    );

    // Refused as geth refuses them.
    let both = json!({ format!("{x:#x}"): {"state": {}, "stateDiff": {}} });
    let e = node.call("eth_call", json!([call, "latest", both])).unwrap_err();
    assert_eq!(e["message"], json!(format!("account {x} has both 'state' and 'stateDiff'")), "{e}");
    let e = node.call("eth_call", json!([call, "latest", {}, {"difficulty": "0x1"}])).unwrap_err();
    assert_eq!(e["message"], "block override difficulty is not supported", "{e}");
    let e = node.call("eth_call", json!([call, "latest", "nope"])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");

    // Nothing was written.
    assert_eq!(node.ok("eth_getCode", json!([x, "latest"])), "0x");
    assert_eq!(node.balance(x), U256::ZERO);
}
