//! A minimal ERC-20-like token, assembled by hand (no solc).
//!
//! Balances live in a mapping at slot 0 (`keccak256(pad32(holder) ++
//! pad32(0))`, Solidity's layout). The only entry point is
//! `transfer(address,uint256)`: it reverts when the caller's balance is too
//! low, otherwise moves the amount, emits `Transfer(from, to, amount)` and
//! returns `true`. Any other call reverts.

use alloy_primitives::{keccak256, Address, Bytes, B256, U256};

/// `transfer(address,uint256)`.
pub const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];

/// `keccak256("Transfer(address,address,uint256)")`.
pub fn transfer_topic() -> B256 {
    keccak256("Transfer(address,address,uint256)")
}

/// The storage slot holding `holder`'s balance.
pub fn balance_slot(holder: Address) -> U256 {
    let mut buf = [0u8; 64];
    buf[12..32].copy_from_slice(holder.as_slice());
    U256::from_be_bytes(keccak256(buf).0)
}

/// Calldata of `transfer(to, amount)`.
pub fn transfer_call(to: Address, amount: u64) -> Bytes {
    let mut data = TRANSFER_SELECTOR.to_vec();
    let mut word = [0u8; 32];
    word[12..].copy_from_slice(to.as_slice());
    data.extend_from_slice(&word);
    data.extend_from_slice(&U256::from(amount).to_be_bytes::<32>());
    data.into()
}

/// A tiny assembler: bytes plus forward jumps patched once labels are known.
struct Asm {
    code: Vec<u8>,
    /// (position of a PUSH1 operand, label)
    jumps: Vec<(usize, &'static str)>,
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    fn op(&mut self, bytes: &[u8]) -> &mut Self {
        self.code.extend_from_slice(bytes);
        self
    }
    fn push_label(&mut self, label: &'static str) -> &mut Self {
        self.code.push(0x60); // PUSH1
        self.jumps.push((self.code.len(), label));
        self.code.push(0);
        self
    }
    fn label(&mut self, label: &'static str) -> &mut Self {
        self.labels.push((label, self.code.len()));
        self.code.push(0x5b); // JUMPDEST
        self
    }
    fn finish(mut self) -> Bytes {
        for (at, name) in &self.jumps {
            let target = self.labels.iter().find(|(l, _)| l == name).expect("label").1;
            self.code[*at] = u8::try_from(target).expect("small contract");
        }
        self.code.into()
    }
}

/// The token's runtime bytecode.
pub fn runtime() -> Bytes {
    const PUSH1: u8 = 0x60;
    let mut a = Asm { code: Vec::new(), jumps: Vec::new(), labels: Vec::new() };
    // Dispatch on the selector.
    a.op(&[PUSH1, 0x00, 0x35, PUSH1, 0xe0, 0x1c]); // CALLDATALOAD(0) >> 224
    a.op(&[0x63]).op(&TRANSFER_SELECTOR).op(&[0x14]); // PUSH4 selector; EQ
    a.push_label("transfer").op(&[0x57]); // JUMPI
    a.label("fail").op(&[PUSH1, 0x00, 0x80, 0xfd]); // REVERT(0, 0)
    a.label("transfer");
    // kf = keccak(caller . 0)
    a.op(&[0x33, PUSH1, 0x00, 0x52]); // MSTORE(0, CALLER)
    a.op(&[PUSH1, 0x00, PUSH1, 0x20, 0x52]); // MSTORE(32, 0)
    a.op(&[PUSH1, 0x40, PUSH1, 0x00, 0x20]); // [kf]
    a.op(&[0x80, 0x54]); // [kf, bf]
    a.op(&[PUSH1, 0x24, 0x35]); // [kf, bf, amt]
    a.op(&[0x80, 0x82, 0x10]); // [kf, bf, amt, bf < amt]
    a.push_label("fail").op(&[0x57]); // JUMPI
    a.op(&[0x90, 0x81, 0x90, 0x03]); // [kf, amt, bf - amt]
    a.op(&[0x82, 0x55]); // SSTORE(kf, bf - amt) -> [kf, amt]
                         // kt = keccak(to . 0); balance[to] += amt
    a.op(&[PUSH1, 0x04, 0x35, PUSH1, 0x00, 0x52]); // MSTORE(0, to)
    a.op(&[PUSH1, 0x40, PUSH1, 0x00, 0x20]); // [kf, amt, kt]
    a.op(&[0x80, 0x54, 0x82, 0x01]); // [kf, amt, kt, bt + amt]
    a.op(&[0x90, 0x55]); // SSTORE(kt, bt + amt) -> [kf, amt]
                         // LOG3(0, 32, Transfer, caller, to) with amt in memory
    a.op(&[PUSH1, 0x00, 0x52]); // MSTORE(0, amt) -> [kf]
    a.op(&[PUSH1, 0x04, 0x35, 0x33]); // [kf, to, caller]
    a.op(&[0x7f]).op(transfer_topic().as_slice()); // PUSH32 topic
    a.op(&[PUSH1, 0x20, PUSH1, 0x00, 0xa3]); // LOG3
                                             // return true
    a.op(&[PUSH1, 0x01, PUSH1, 0x00, 0x52, PUSH1, 0x20, PUSH1, 0x00, 0xf3]);
    a.finish()
}
