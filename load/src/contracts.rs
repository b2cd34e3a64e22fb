//! The hand-assembled contracts of every workload and test: the load
//! generator's contract workloads, the integration tests and the
//! executor's tests and benchmarks all use these, with a two-pass
//! assembler for jump labels (no solc on these machines, and the code is
//! small enough to read).
//!
//! - Counter: every call does `slot0 += 1`, logs the new value under
//!   `Incremented(uint256)` and returns it; calldata starting with `0xff`
//!   reverts with `0xdeadbeef` instead (the fully contended workload, what
//!   the `mixed` workload deploys, and the tests' logs and reverts).
//! - Token: an ERC-20-like token. Balances live in a mapping at slot 0
//!   (`keccak256(pad32(holder) ++ pad32(0))`, Solidity's layout, so a
//!   transfer hashes two mapping slots as a real token does).
//!   `transfer(address,uint256)` reverts on insufficient balance, moves the
//!   amount, logs `Transfer(from, to, amount)` and returns `true`;
//!   `mint(address,uint256)` is open to anyone (a test token: each sender
//!   mints its own balance during setup); `balanceOf(address)`. Anything
//!   else reverts.

use alloy_primitives::{keccak256, Address, Bytes, B256, U256};

/// `transfer(address,uint256)`.
pub const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];
/// `mint(address,uint256)`.
pub const MINT_SELECTOR: [u8; 4] = [0x40, 0xc1, 0x0f, 0x19];
/// `balanceOf(address)`.
pub const BALANCE_OF_SELECTOR: [u8; 4] = [0x70, 0xa0, 0x82, 0x31];

/// `keccak256("Transfer(address,address,uint256)")`, the token's log topic.
pub fn transfer_topic() -> B256 {
    keccak256("Transfer(address,address,uint256)")
}

/// `keccak256("Incremented(uint256)")`, the counter's log topic.
pub fn counter_topic() -> B256 {
    keccak256("Incremented(uint256)")
}

/// The token's storage slot holding `holder`'s balance.
pub fn balance_slot(holder: Address) -> U256 {
    let mut buf = [0u8; 64];
    buf[12..32].copy_from_slice(holder.as_slice());
    U256::from_be_bytes(keccak256(buf).0)
}

enum Item {
    /// Raw bytes.
    Code(Vec<u8>),
    /// A jump destination (emits JUMPDEST).
    Label(&'static str),
    /// PUSH1 of a label's offset (every contract here is under 256 bytes).
    Push(&'static str),
}

use Item::{Code, Label, Push};

fn assemble(items: &[Item]) -> Vec<u8> {
    let mut labels = std::collections::HashMap::new();
    let mut pc = 0usize;
    for it in items {
        match it {
            Code(b) => pc += b.len(),
            Label(l) => {
                labels.insert(*l, pc);
                pc += 1;
            }
            Push(_) => pc += 2,
        }
    }
    let mut out = Vec::with_capacity(pc);
    for it in items {
        match it {
            Code(b) => out.extend_from_slice(b),
            Label(_) => out.push(0x5b),
            Push(l) => {
                // A missing label or one past 255 is a bug in this file; a
                // jump to 0 (not a JUMPDEST) would make it fail loudly.
                let at = labels.get(l).copied().unwrap_or(0);
                debug_assert!(at < 256 && labels.contains_key(l), "label {l}");
                out.extend_from_slice(&[0x60, at as u8]);
            }
        }
    }
    out
}

/// Initcode that deploys `runtime` unchanged: CODECOPY it to memory 0 and
/// RETURN it.
pub fn initcode(runtime: &[u8]) -> Bytes {
    let len = runtime.len();
    debug_assert!(len < 256);
    // PUSH1 len PUSH1 10 PUSH0 CODECOPY PUSH1 len PUSH0 RETURN (10 bytes).
    let mut code = vec![0x60, len as u8, 0x60, 10, 0x5f, 0x39, 0x60, len as u8, 0x5f, 0xf3];
    code.extend_from_slice(runtime);
    Bytes::from(code)
}

/// The counter's runtime (see the module documentation).
pub fn counter_runtime() -> Vec<u8> {
    let mut push32_topic = vec![0x7f];
    push32_topic.extend_from_slice(counter_topic().as_slice());
    assemble(&[
        Code(vec![0x5f, 0x35, 0x60, 0xf8, 0x1c]), // first calldata byte
        Code(vec![0x60, 0xff, 0x14]),             // == 0xff
        Push("revert"),
        Code(vec![0x57]),
        Code(vec![0x5f, 0x54, 0x60, 0x01, 0x01]), // v = sload(0) + 1
        Code(vec![0x80, 0x5f, 0x55]),             // v            sstore(0, v)
        Code(vec![0x5f, 0x52]),                   //              mstore(0, v)
        Code(push32_topic),
        Code(vec![0x60, 0x20, 0x5f, 0xa1]), // log1(0, 32, topic)
        Code(vec![0x60, 0x20, 0x5f, 0xf3]), // return(0, 32)
        Label("revert"),
        Code(vec![0x63, 0xde, 0xad, 0xbe, 0xef, 0x5f, 0x52]), // mstore(0, 0xdeadbeef)
        Code(vec![0x60, 0x04, 0x60, 0x1c, 0xfd]),             // revert(28, 4)
    ])
}

/// The token's runtime (see the module documentation).
pub fn token_runtime() -> Vec<u8> {
    let mut push32_topic = vec![0x7f];
    push32_topic.extend_from_slice(transfer_topic().as_slice());
    let sel = |s: [u8; 4]| vec![0x80, 0x63, s[0], s[1], s[2], s[3], 0x14];
    // k = keccak256(pad32(calldata word 1) ++ pad32(0)): the mapping slot
    // of the address argument.
    let slot_of_arg = vec![0x60, 0x04, 0x35, 0x5f, 0x52, 0x5f, 0x60, 0x20, 0x52, 0x60, 0x40, 0x5f, 0x20];
    let return_true = vec![0x60, 0x01, 0x5f, 0x52, 0x60, 0x20, 0x5f, 0xf3];
    // Stack comments: top on the right (the selector stays below).
    assemble(&[
        Code(vec![0x5f, 0x35, 0x60, 0xe0, 0x1c]), // selector
        Code(sel(TRANSFER_SELECTOR)),
        Push("transfer"),
        Code(vec![0x57]),
        Code(sel(MINT_SELECTOR)),
        Push("mint"),
        Code(vec![0x57]),
        Code(sel(BALANCE_OF_SELECTOR)),
        Push("balance_of"),
        Code(vec![0x57]),
        Label("revert"),
        Code(vec![0x5f, 0x80, 0xfd]), // revert(0, 0)
        Label("transfer"),
        Code(vec![0x33, 0x5f, 0x52, 0x5f, 0x60, 0x20, 0x52]), // mstore(0, caller); mstore(32, 0)
        Code(vec![0x60, 0x40, 0x5f, 0x20]),                   // kf
        Code(vec![0x80, 0x54]),                               // kf bf
        Code(vec![0x60, 0x24, 0x35]),                         // kf bf amt
        Code(vec![0x80, 0x82, 0x10]),                         // kf bf amt (bf < amt)
        Push("revert"),
        Code(vec![0x57]),
        Code(vec![0x90, 0x81, 0x90, 0x03]),       // kf amt (bf - amt)
        Code(vec![0x82, 0x55]),                   // kf amt            sstore(kf, bf - amt)
        Code(vec![0x60, 0x04, 0x35, 0x5f, 0x52]), //             mstore(0, to)
        Code(vec![0x60, 0x40, 0x5f, 0x20]),       // kf amt kt
        Code(vec![0x80, 0x54, 0x82, 0x01]),       // kf amt kt (bt + amt)
        Code(vec![0x90, 0x55]),                   // kf amt            sstore(kt, bt + amt)
        Code(vec![0x5f, 0x52]),                   // kf                mstore(0, amt)
        Code(vec![0x60, 0x04, 0x35, 0x33]),       // kf to caller
        Code(push32_topic),                       // kf to caller topic
        Code(vec![0x60, 0x20, 0x5f, 0xa3]),       // log3(0, 32, topic, caller, to)
        Code(return_true.clone()),
        Label("mint"),
        Code(slot_of_arg.clone()),                      // k
        Code(vec![0x80, 0x54, 0x60, 0x24, 0x35, 0x01]), // k (b + amt)
        Code(vec![0x90, 0x55]),                         //   sstore(k, b + amt)
        Code(return_true),
        Label("balance_of"),
        Code(slot_of_arg),
        Code(vec![0x54, 0x5f, 0x52, 0x60, 0x20, 0x5f, 0xf3]), // return sload(k)
    ])
}

/// Calldata for `selector(address, uint256)`.
pub fn call_address_amount(selector: [u8; 4], to: Address, amount: U256) -> Bytes {
    let mut data = Vec::with_capacity(68);
    data.extend_from_slice(&selector);
    data.extend_from_slice(&[0u8; 12]);
    data.extend_from_slice(to.as_slice());
    data.extend_from_slice(&amount.to_be_bytes::<32>());
    Bytes::from(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_land_on_jumpdests() {
        for code in [token_runtime(), counter_runtime()] {
            // Every PUSH1 that precedes a JUMPI points at a JUMPDEST.
            for w in code.windows(3) {
                if w[0] == 0x60 && w[2] == 0x57 {
                    assert_eq!(code[w[1] as usize], 0x5b, "jump target {} is not a JUMPDEST", w[1]);
                }
            }
            assert!(code.len() < 256);
            let init = initcode(&code);
            assert_eq!(&init[10..], &code[..]);
        }
    }

    #[test]
    fn calldata_is_abi_encoded() {
        let d = call_address_amount(TRANSFER_SELECTOR, Address::repeat_byte(0xaa), U256::from(5));
        assert_eq!(d.len(), 68);
        assert_eq!(&d[..4], &TRANSFER_SELECTOR);
        assert_eq!(d[16], 0xaa);
        assert_eq!(d[67], 5);
    }
}
