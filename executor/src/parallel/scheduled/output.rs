//! A scheduled block's output: the receipts, and the changes of every
//! touched account in address order.
//!
//! Sorting is split between the workers by the first byte of the address:
//! each worker hands every other the keys of the accounts it touched that
//! fall in that worker's range (while its own list is in its cache), then
//! each sorts its range, and the ranges only need concatenating.

use std::sync::OnceLock;

use alloy_primitives::Address;
use sluice_messages::{AccountChange, PreparedBlock, PreparedTx, Receipt};

use super::{plan::Schedule, Touched};
use crate::parallel::transfer::{Rules, TRANSFER_GAS};

/// Where a touched account's entry is: its address's first eight bytes (as
/// an integer in the same order), then the worker and the position in
/// that worker's list.
pub(super) type Key = (u64, u32, u32);

/// Bits of an address that the counting sort places by (see
/// [`sort_share`]): 4,096 buckets over all addresses.
const BUCKET_BITS: u32 = 12;

/// An address's first eight bytes, as an integer in the same order.
fn prefix(a: &Address) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&a[..8]);
    u64::from_be_bytes(b)
}

/// The worker that sorts the accounts whose address starts with `byte`.
fn sorter(byte: u8, workers: usize) -> usize {
    usize::from(byte) * workers / 256
}

/// The keys of one worker's touched accounts (`owner`'s `list`), split by
/// the worker that sorts them.
pub(super) fn partition(list: &[(Address, Touched)], owner: u32, workers: usize) -> Vec<Vec<Key>> {
    let room = list.len() / workers + list.len() / 16 + 16;
    let mut keys: Vec<Vec<Key>> = (0..workers).map(|_| Vec::with_capacity(room)).collect();
    for (at, (address, _)) in (0u32..).zip(list) {
        keys[sorter(address[0], workers)].push((prefix(address), owner, at));
    }
    keys
}

/// Worker `w`'s keys, handed over by every worker (`handed`), in address
/// order. `lists` are the workers' touched accounts, which the keys point
/// into.
pub(super) fn sort_share(
    handed: &[OnceLock<Vec<Vec<Key>>>],
    lists: &[&[(Address, Touched)]],
    w: usize,
    workers: usize,
) -> Vec<Key> {
    let mine = || handed.iter().filter_map(|h| h.get()?.get(w));
    let Some(first) = (0..=255u8).find(|b| sorter(*b, workers) == w) else {
        return Vec::new();
    };
    let bytes = (first..=255u8).take_while(|b| sorter(*b, workers) == w).count();
    // A counting sort on the top bits of the prefix, then each bucket by
    // comparison: a few keys each when addresses are hashes; all of them,
    // no worse than a comparison sort, when they are not.
    let base = usize::from(first) << (BUCKET_BITS - 8);
    let bucket = |k: &Key| ((k.0 >> (64 - BUCKET_BITS)) as usize).saturating_sub(base);
    let mut starts = vec![0u32; (bytes << (BUCKET_BITS - 8)) + 1];
    for k in mine().flatten() {
        if let Some(count) = starts.get_mut(bucket(k) + 1) {
            *count += 1;
        }
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut next = starts.clone();
    let mut sorted = vec![(0, 0, 0); starts.last().map_or(0, |n| *n as usize)];
    for k in mine().flatten() {
        if let Some(at) = next.get_mut(bucket(k)) {
            sorted[*at as usize] = *k;
            *at += 1;
        }
    }
    let address = |k: &Key| &lists[k.1 as usize][k.2 as usize].0;
    for b in starts.windows(2) {
        if b[1] - b[0] > 1 {
            sorted[b[0] as usize..b[1] as usize]
                .sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| address(x).cmp(address(y))));
        }
    }
    sorted
}

/// The block's account changes: every touched account in address order
/// (`orders`, the workers' sorted shares), with the coinbase's in its place.
pub(super) fn changes(
    lists: &[&[(Address, Touched)]],
    orders: &[OnceLock<Vec<Key>>],
    coinbase: Option<&AccountChange>,
) -> Vec<AccountChange> {
    let total = orders.iter().filter_map(OnceLock::get).map(Vec::len).sum::<usize>() + 1;
    let mut changes = Vec::with_capacity(total);
    let mut coinbase = coinbase;
    for (_, owner, at) in orders.iter().filter_map(OnceLock::get).flatten().copied() {
        let (address, t) = &lists[owner as usize][at as usize];
        if let Some(c) = coinbase.take_if(|c| c.address < *address) {
            changes.push(c.clone());
        }
        // What the sequential executor's block state records for an account that plain
        // transfers changed (see `Touched`).
        changes.push(AccountChange {
            address: *address,
            deleted: false,
            balance: t.balance,
            nonce: t.nonce,
            code: None,
            storage_cleared: false,
            storage: Vec::new(),
        });
    }
    changes.extend(coinbase.cloned());
    changes
}

/// Every transaction's receipt (they depend on the transactions alone).
pub(super) fn receipts(rules: &Rules, block: &PreparedBlock, schedule: &Schedule<'_>) -> Vec<Receipt> {
    let mut receipts = Vec::with_capacity(block.txs.len());
    for (i, ptx) in block.txs.iter().enumerate() {
        if let PreparedTx::Ready(tx) = ptx {
            let mut receipt = schedule.plan(i).receipt(tx, rules.base_fee);
            receipt.index = i as u32;
            receipt.cumulative_gas_used = TRANSFER_GAS * (i as u64 + 1);
            receipts.push(receipt);
        }
    }
    receipts
}
