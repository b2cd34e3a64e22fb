//! KECCAK256 with a memo of recent 64-byte preimages.
//!
//! Solidity derives a mapping entry's storage slot as `keccak256(key .
//! slot)`, a 64-byte preimage, and an ERC-20 transfer computes two of them.
//! A Keccak-f[1600] permutation costs ~0.35 us on this project's machines,
//! a quarter of such a transfer's execution, and a block recomputes the
//! same slots over and over: every transfer of a popular token to or from
//! the same holder, and a contract reading then writing the same entry.
//! So the executors' EVMs (the oracle's excepted, which stays plain revm)
//! replace the instruction with one that remembers the last hashes of
//! 64-byte inputs per thread. The memo is exact (the whole preimage is
//! compared) and bounded: [`MEMO_ENTRIES`] entries, ~770 KiB per thread.

use std::cell::RefCell;

use alloy_primitives::{keccak256, B256};
use revm::{
    context_interface::{cfg::GasParams, Host},
    interpreter::{
        as_usize_or_fail, gas,
        instructions::system,
        interpreter::{resize_memory, EthInterpreter},
        popn_top, Instruction, InstructionContext, InstructionExecResult,
    },
};

/// Entries in each thread's memo, in sets of [`WAYS`]: enough for the
/// distinct slots of a few thousand holders (~770 KiB, within a core's L2
/// cache).
pub const MEMO_ENTRIES: usize = 8192;

/// Entries per set. With one (direct-mapped), two hot preimages that hash
/// to the same entry evict each other on every use: among 1,000 holders
/// ~20% of them share an entry and ~10% of lookups missed. Two ways, the
/// most recent first (and twice the entries), measured 5-9% faster for
/// the one journal and 3-8% for two lanes on ERC-20 blocks.
const WAYS: usize = 2;

/// Sets in the memo (a power of two).
const SETS: usize = MEMO_ENTRIES / WAYS;
const _: () = assert!(SETS.is_power_of_two());

/// A set of remembered preimages and their hashes, the most recently used
/// first. An all-zero hash marks an empty way (a preimage that hashes to
/// zero is simply never remembered).
#[derive(Clone, Copy)]
struct Set([([u8; 64], B256); WAYS]);

thread_local! {
    static MEMO: RefCell<Vec<Set>> = const { RefCell::new(Vec::new()) };
}

/// Where `preimage` may be remembered: a multiplicative hash of its words
/// (mapping preimages differ in a 20-byte key and a small slot number).
fn index(preimage: &[u8; 64]) -> usize {
    let mut h = 0u64;
    for word in preimage.chunks_exact(8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    // The top bits are the best mixed; the sets are a power of two.
    (h >> (64 - SETS.trailing_zeros())) as usize
}

/// `keccak256(preimage)`, from this thread's memo when it was recently
/// computed here.
pub fn keccak256_64(preimage: &[u8; 64]) -> B256 {
    MEMO.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return keccak256(preimage);
        };
        if memo.is_empty() {
            memo.resize(SETS, Set([([0; 64], B256::ZERO); WAYS]));
        }
        let Set(ways) = &mut memo[index(preimage)];
        if let Some(way) = ways.iter().position(|(p, hash)| *hash != B256::ZERO && p == preimage) {
            let hash = ways[way].1;
            ways[..=way].rotate_right(1);
            return hash;
        }
        let hash = keccak256(preimage);
        ways.rotate_right(1);
        ways[0] = (*preimage, hash);
        hash
    })
}

/// The KECCAK256 instruction: revm's, except that 64-byte preimages go
/// through the memo. Gas, memory expansion and failures are revm's.
fn keccak256_instruction<H: Host + ?Sized>(
    context: InstructionContext<'_, H, EthInterpreter>,
) -> InstructionExecResult {
    let interpreter = context.interpreter;
    let Ok(len) = interpreter.stack.peek(1) else {
        return system::keccak256(InstructionContext { interpreter, host: context.host });
    };
    if len != alloy_primitives::U256::from(64) {
        return system::keccak256(InstructionContext { interpreter, host: context.host });
    }
    popn_top!([offset], top, interpreter);
    let params: &GasParams = context.host.gas_params();
    gas!(interpreter, params.keccak256_cost(64));
    let from = as_usize_or_fail!(interpreter, offset);
    resize_memory(&mut interpreter.gas, &mut interpreter.memory, params, from, 64)?;
    let mut preimage = [0u8; 64];
    preimage.copy_from_slice(&interpreter.memory.slice_len(from, 64));
    *top = keccak256_64(&preimage).into();
    Ok(())
}

/// Installs the memoizing KECCAK256 in an EVM's instruction table.
pub(crate) fn install<H: Host>(
    instructions: &mut revm::handler::instructions::EthInstructions<EthInterpreter, H>,
) {
    instructions.insert_instruction(
        0x20,
        Instruction::new(keccak256_instruction::<H>),
        revm::interpreter::instructions::gas::KECCAK256 as u16,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_equals_keccak_including_colliding_entries() {
        // Far more preimages than entries, each hashed twice: many share
        // an entry and evict each other.
        let preimages: Vec<[u8; 64]> = (0..3 * MEMO_ENTRIES as u64)
            .map(|i| {
                let mut p = [0u8; 64];
                p[12..20].copy_from_slice(&i.wrapping_mul(0x1234_5678_9abc_def1).to_be_bytes());
                p[63] = (i % 7) as u8;
                p
            })
            .collect();
        for _ in 0..2 {
            for p in &preimages {
                assert_eq!(keccak256_64(p), keccak256(p));
            }
        }
        assert_eq!(keccak256_64(&[0; 64]), keccak256([0u8; 64]));
    }
}
