//! A dev node runs Osaka by default, as anvil does: CLZ (EIP-7939) and
//! P256VERIFY (EIP-7951) answer through `eth_call`, an opcode no fork
//! defines is named as geth names it, and EIP-7825's 2^24 transaction gas
//! cap refuses a transaction over it at admission with geth's words while
//! one at the cap is mined.

use alloy_primitives::{address, Address, Bytes, TxKind, U256};
use serde_json::json;

use crate::support::*;

/// Returns CLZ of its 32-byte calldata word:
/// `PUSH1 0 CALLDATALOAD CLZ PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN`.
const CLZ_CODE: &str = "0x6000351e60005260206000f3";
const P256VERIFY: Address = address!("0000000000000000000000000000000000000100");
/// revm's first secp256r1 vector (hash, r, s, x, y): a valid signature.
const P256_VALID: &str = "0x4cee90eb86eaa050036147a12d49004b6b9c72bd725d39d4785011fe190f0b4da73bd4903f0ce3b639bbbf6e8e80d16931ff4bcf5993d58468e8fb19086e8cac36dbcd03009df8c59286b162af3bd7fcc0450c9aa81be5d10d312af6c66b1d604aebd3099c618202fcfe16ae7770b0c49ab5eadf74b754204a3bb6060e44eff37618b065f9832de4ca6ca971a7a1adc826d0f7c00181a5fb2ddf79ae00b4e10e";

fn word(v: u64) -> Bytes {
    Bytes::from(U256::from(v).to_be_bytes::<32>().to_vec())
}

#[test]
fn a_dev_node_runs_osaka() {
    let node = TestNode::dev();
    let at = Address::repeat_byte(0xc1);
    let code = json!({ at.to_string(): { "code": CLZ_CODE } });

    // CLZ, through a state override (no deployment needed).
    for (x, zeros) in [(1u64, 255u64), (0, 256)] {
        let out = node.ok("eth_call", json!([{"to": at, "data": word(x)}, "latest", code]));
        assert_eq!(parse_u256(&out), U256::from(zeros), "CLZ({x})");
    }
    // An opcode no fork defines: geth's words.
    let undefined = json!({ at.to_string(): { "code": "0x0c" } });
    let err = node.call("eth_call", json!([{"to": at}, "latest", undefined])).unwrap_err();
    assert_eq!(
        (err["code"].as_i64(), err["message"].as_str()),
        (Some(-32000), Some("invalid opcode: opcode 0xc not defined"))
    );

    // P256VERIFY at 0x100: 1 for a valid signature, empty for a wrong one.
    let out = node.ok("eth_call", json!([{"to": P256VERIFY, "data": P256_VALID}, "latest"]));
    assert_eq!(parse_u256(&out), U256::from(1));
    let wrong = format!("0x3{}", &P256_VALID[3..]);
    assert_eq!(node.ok("eth_call", json!([{"to": P256VERIFY, "data": wrong}, "latest"])), json!("0x"));

    // EIP-7825: 2^24 + 1 gas is refused at admission, 2^24 is mined.
    let (from, to) = (dev(0), dev(1).address());
    let over = eip1559(&from, 0, TxKind::Call(to), U256::from(1), Bytes::new(), (1 << 24) + 1);
    let err = node.send(&over).unwrap_err();
    assert_eq!(err["code"], -32000, "{err}");
    assert_eq!(err["message"], "transaction gas limit too high (cap: 16777216, tx: 16777217)");
    let at_cap = eip1559(&from, 0, TxKind::Call(to), U256::from(1), Bytes::new(), 1 << 24);
    let r = node.receipt(&node.send(&at_cap).unwrap());
    assert_eq!(r["status"], "0x1", "{r}");
    assert_eq!(r["gasUsed"], "0x5208");

    // eth_estimateGas stays within the cap; eth_call may exceed it.
    let spin = json!({ at.to_string(): { "code": "0x5b600056" } });
    let err = node.call("eth_estimateGas", json!([{"to": at}, "latest", spin])).unwrap_err();
    assert!(err["message"].as_str().unwrap().contains("16777216"), "{err}");
}
