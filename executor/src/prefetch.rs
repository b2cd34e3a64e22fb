//! Software prefetch of the transactions an in-order loop runs next.
//!
//! A block's transactions are each in their own allocation (an
//! `Arc<RecoveredTx>`), and each one's calldata in another, so running
//! transaction `i` starts with two dependent cache misses: the decoded
//! transaction, then its calldata. In profiles of ERC-20 blocks the first
//! read of the calldata (revm's intrinsic-gas count) was half of the
//! samples of that function. The loop knows what comes next, so it asks
//! for it early: transaction `i + 2`'s lines, and the calldata of `i + 1`
//! (whose transaction was asked for one step before).

use std::sync::Arc;

use alloy_consensus::Transaction as _;
use sluice_messages::{PreparedTx, RecoveredTx};

/// Cache line size on the machines sluice runs on.
const LINE: usize = 64;

/// Bytes of calldata asked for at most: a token call's selector and
/// arguments (a long calldata is read in a stream, which the hardware
/// prefetcher follows on its own).
const CALLDATA_BYTES: usize = 2 * LINE;

/// Asks the cache for what running `txs[i + 1]` and `txs[i + 2]` first
/// reads, before running `txs[i]`. A hint: no effect on results.
#[inline]
pub(crate) fn ahead(txs: &[PreparedTx], i: usize) {
    if let Some(PreparedTx::Ready(tx)) = txs.get(i + 2) {
        lines(Arc::as_ptr(tx).cast(), size_of::<RecoveredTx>());
    }
    if let Some(PreparedTx::Ready(tx)) = txs.get(i + 1) {
        let input = tx.tx.input();
        lines(input.as_ptr(), input.len().min(CALLDATA_BYTES));
    }
}

/// Prefetches the cache lines of `len` bytes from `from`.
#[inline]
fn lines(from: *const u8, len: usize) {
    let mut offset = 0;
    while offset < len {
        line(from.wrapping_add(offset));
        offset += LINE;
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn line(at: *const u8) {
    // SAFETY: the instruction needs SSE, which every x86_64 CPU has, and
    // it never faults, whatever the address: it is a hint, not a read.
    unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast()) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn line(_: *const u8) {}
