//! Otterscan's `ots_*` namespace at API level 8, as erigon and reth serve
//! it, and `erigon_getHeaderByNumber` (Otterscan calls it too): the
//! methods that need no index beyond what the store keeps.
//!
//! - Block pages: `ots_getBlockDetails(ByHash)` (the block without its
//!   transactions, their count, the issuance, which is zero here: sluice
//!   pays no block reward, and the fees) and `ots_getBlockTransactions`
//!   (one page of the block's transactions and receipts, pages counted
//!   from the block's end as erigon counts them).
//! - Transaction pages, re-executing a mined transaction on the state
//!   before its block as the traces do ([`crate::parity`]), on the call
//!   pool within a deadline and `rpc.trace_max_bytes`
//!   ([`CALL_METHODS`]): `ots_traceTransaction`,
//!   `ots_getInternalOperations`, `ots_getTransactionError`.
//! - Address pages: `ots_hasCode`, and, as erigon finds them, by binary
//!   search over the state history (the nonce, or the presence of code, at
//!   block N) and then one block: `ots_getTransactionBySenderAndNonce` and
//!   `ots_getContractCreator`. The search never leaves the history kept
//!   (`store.history_blocks`): an answer older than it is "missing trie
//!   node", as every other history read answers.
//!
//! - Address history: `ots_searchTransactionsBefore`/`After`, one page of
//!   an address's transactions from the store's address index
//!   ([`sluice_store::address_index`], `store.address_index`), which holds
//!   senders, call recipients and created contracts but not internal
//!   calls (erigon indexes those too). With the index off they answer
//!   -32000 naming `store.address_index`.

use alloy_primitives::{Address, KECCAK256_EMPTY, U256};
use serde_json::{json, Value};
use sluice_executor::{
    ots::{self as exec, MinedAt},
    trace_limits::TraceLimits,
    Deadline,
};
use std::sync::Arc;

use sluice_store::{AddressScan, StateReader, StoredBlock};

use super::{
    error::{RpcError, SERVER_ERROR},
    format::{self, hex_u256, hex_u64},
    params::{BlockId, Params},
    selector::{find_block, state_at},
    trace::applied,
    RpcState,
};

/// The API level served: Otterscan refuses a node below the level it
/// needs (8 since Otterscan 2.4).
pub const API_LEVEL: u64 = 8;

/// The methods answered on an HTTP worker (store reads only).
pub const METHODS: &[&str] = &[
    "ots_getApiLevel",
    "ots_hasCode",
    "ots_getBlockDetails",
    "ots_getBlockDetailsByHash",
    "ots_getBlockTransactions",
    "ots_getTransactionBySenderAndNonce",
    "ots_searchTransactionsBefore",
    "ots_searchTransactionsAfter",
    "erigon_getHeaderByNumber",
];

/// The methods that run the EVM: on the call pool, as the traces.
pub const CALL_METHODS: &[&str] = &[
    "ots_traceTransaction",
    "ots_getInternalOperations",
    "ots_getTransactionError",
    "ots_getContractCreator",
];

/// Answers one of [`METHODS`].
pub fn call(s: &RpcState, method: &str, p: &Params<'_>) -> Result<Value, RpcError> {
    match method {
        "ots_getApiLevel" => Ok(json!(API_LEVEL)),
        "ots_hasCode" => {
            let address = p.address(0)?;
            let at = state_at(s, p.block(1)?)?;
            Ok(json!(has_code(at.reader(s), address)?))
        }
        "erigon_getHeaderByNumber" => Ok(find_block(s, p.block(0)?)?.map_or(Value::Null, |b| header(&b))),
        "ots_getBlockDetails" | "ots_getBlockDetailsByHash" => {
            let id = if method.ends_with("ByHash") { BlockId::Hash(p.hash(0)?) } else { p.block(0)? };
            Ok(find_block(s, id)?.map_or(Value::Null, |b| block_details(&b)))
        }
        "ots_getBlockTransactions" => {
            let id = p.block(0)?;
            let (page, size) = (p.u64(1)?, p.u64(2)?);
            crate::sync::state_readable(&s.store)?;
            Ok(find_block(s, id)?.map_or(Value::Null, |b| block_transactions(&b, page, size)))
        }
        "ots_getTransactionBySenderAndNonce" => {
            let (sender, nonce) = (p.address(0)?, p.u64(1)?);
            crate::sync::state_readable(&s.store)?;
            transaction_by_sender_and_nonce(s, sender, nonce)
        }
        "ots_searchTransactionsBefore" | "ots_searchTransactionsAfter" => {
            let (address, number, size) = (p.address(0)?, p.u64(1)?, p.u64(2)?);
            let before = method.ends_with("Before");
            search_transactions(s, address, before, number, size)
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// What the searches answer while the store keeps no address index.
pub const NO_ADDRESS_INDEX: &str =
    "ots_searchTransactionsBefore/After need the address index, which is off: \
     start the node with store.address_index = true (SLUICE_STORE__ADDRESS_INDEX=true); blocks committed \
     while it was off are not indexed";

/// `ots_searchTransactionsBefore` (`before`: blocks below `number`, 0 from
/// the head, newest first) and `ots_searchTransactionsAfter` (blocks above
/// `number`, 0 from genesis, oldest first), as erigon answers them: the
/// page (`size` transactions, or a few more to finish the last block),
/// newest first in both, each transaction whole with its receipt and its
/// block's `timestamp` (a JSON number, as erigon's); `firstPage` when
/// the page holds the newest transaction, `lastPage` when it holds the
/// oldest (erigon's: Before from the head is the first page, After from
/// genesis the last).
fn search_transactions(
    s: &RpcState,
    address: Address,
    before: bool,
    number: u64,
    size: u64,
) -> Result<Value, RpcError> {
    if !s.store.indexes_addresses() {
        return Err(RpcError::new(SERVER_ERROR, NO_ADDRESS_INDEX));
    }
    let max = s.limits.ots_max_page_txs;
    if size > max {
        return Err(RpcError::new(
            SERVER_ERROR,
            format!("max allowed page size: {max} (pageSize {size}; rpc.ots_max_page_txs)"),
        ));
    }
    let scan = match (before, number) {
        (true, 0) => AddressScan::Before(u64::MAX),
        (true, n) => AddressScan::Before(n),
        (false, n) => AddressScan::After(n),
    };
    let page = s.store.address_transactions(&address, scan, usize::try_from(size).unwrap_or(usize::MAX))?;
    let mut found = page.found;
    if !before {
        found.reverse();
    }
    let (mut txs, mut receipts) = (Vec::with_capacity(found.len()), Vec::with_capacity(found.len()));
    let mut block: Option<Arc<StoredBlock>> = None;
    for (n, i) in found {
        let b = match block.take() {
            Some(b) if b.block.header.number == n => b,
            _ => match s.store.try_block(n)? {
                Some(b) => b,
                None => return Err(RpcError::new(SERVER_ERROR, format!("indexed block {n} not found"))),
            },
        };
        let i = i as usize;
        let (Some(r), Some(tx)) = (b.receipts.get(i), crate::eth::committed_tx(&b, i)) else {
            return Err(RpcError::new(
                SERVER_ERROR,
                format!("indexed transaction {i} of block {n} not found"),
            ));
        };
        let mut receipt = format::receipt(&b, r, format::first_log_index(&b, i));
        receipt["timestamp"] = json!(b.block.header.timestamp);
        txs.push(tx);
        receipts.push(receipt);
        block = Some(b);
    }
    let (first, last) = if before { (number == 0, !page.more) } else { (!page.more, number == 0) };
    Ok(json!({"txs": txs, "receipts": receipts, "firstPage": first, "lastPage": last}))
}

/// Answers one of [`CALL_METHODS`] on this thread (a call worker) by
/// `deadline`.
pub fn call_traced(
    s: &RpcState,
    method: &str,
    p: &Params<'_>,
    deadline: &Deadline,
) -> Result<Value, RpcError> {
    let limits = crate::trace::limits(s, deadline);
    if method == "ots_getContractCreator" {
        let address = p.address(0)?;
        crate::sync::state_readable(&s.store)?;
        return contract_creator(s, address, &limits);
    }
    let hash = p.hash(0)?;
    // An unknown transaction answers null, as reth answers.
    let Some((block, index)) = s.store.try_transaction(&hash)? else { return Ok(Value::Null) };
    let txs = applied(&block)?;
    // An index past its block (damage) is an error, never a panic.
    let (Some(before), Some(tx)) = (txs.get(..index), txs.get(index)) else {
        return Err(RpcError::new(SERVER_ERROR, "stored block without its transaction"));
    };
    let header = &block.block.header;
    let state = s.store.state_at(header.number.saturating_sub(1))?;
    let at = MinedAt { state: &state, header, before };
    match method {
        "ots_traceTransaction" => Ok(json!(exec::trace_transaction(at, &s.exec, tx, &limits)?)),
        "ots_getInternalOperations" => Ok(json!(exec::internal_operations(at, &s.exec, tx, &limits)?)),
        "ots_getTransactionError" => Ok(json!(exec::transaction_error(at, &s.exec, tx, &limits)?)),
        other => Err(RpcError::method_not_found(other)),
    }
}

/// Whether `address` has code in `state`.
fn has_code(state: &dyn StateReader, address: Address) -> Result<bool, RpcError> {
    Ok(state.account(&address)?.is_some_and(|a| a.code_hash != KECCAK256_EMPTY && !a.code_hash.is_zero()))
}

/// `erigon_getHeaderByNumber`: the block object's header fields, with its
/// hash.
pub fn header(b: &StoredBlock) -> Value {
    let mut o = format::block(b, vec![]);
    if let Some(m) = o.as_object_mut() {
        for key in ["transactions", "uncles", "withdrawals", "size", "totalDifficulty"] {
            m.remove(key);
        }
    }
    o
}

/// The block object as erigon's Otterscan methods report it: without its
/// transactions (unless `txs` are given), with `transactionCount` (a JSON
/// number) and a null `logsBloom`.
fn ots_block(b: &StoredBlock, txs: Option<Vec<Value>>) -> Value {
    let with = txs.is_some();
    let mut o = format::block(b, txs.unwrap_or_default());
    if let Some(m) = o.as_object_mut() {
        if !with {
            m.remove("transactions");
        }
        m.insert("transactionCount".into(), json!(b.receipts.len()));
        m.insert("logsBloom".into(), Value::Null);
    }
    o
}

/// `ots_getBlockDetails`: the block, its issuance (none: sluice pays no
/// block reward) and the fees its transactions paid.
pub fn block_details(b: &StoredBlock) -> Value {
    let zero = hex_u64(0);
    json!({
        "block": ots_block(b, None),
        "issuance": {"blockReward": zero, "uncleReward": zero, "issuance": zero},
        "totalFees": hex_u256(total_fees(b)),
    })
}

/// What a block's transactions paid: gas used times the price paid, summed.
pub fn total_fees(b: &StoredBlock) -> U256 {
    b.receipts.iter().fold(U256::ZERO, |sum, r| {
        sum.saturating_add(U256::from(r.gas_used).saturating_mul(U256::from(r.effective_gas_price)))
    })
}

/// Page `page` of `size` of a block's `len` transactions, as erigon and
/// reth count them: from the block's end (page 0 holds the last `size`),
/// as the range of indexes it covers (empty past the first transaction).
pub fn page_range(len: usize, page: u64, size: u64) -> std::ops::Range<usize> {
    let skip = usize::try_from(page.saturating_mul(size)).unwrap_or(usize::MAX);
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let end = len.saturating_sub(skip);
    end.saturating_sub(size)..end
}

/// `ots_getBlockTransactions`: the block with page `page` of `size` of its
/// transactions (each input cut to its first 4 bytes, the selector, as
/// erigon cuts it), and their receipts without logs or bloom.
pub fn block_transactions(b: &StoredBlock, page: u64, size: u64) -> Value {
    let range = page_range(b.receipts.len(), page, size);
    let txs: Vec<Value> = range
        .clone()
        .filter_map(|i| crate::eth::committed_tx(b, i))
        .map(|mut tx| {
            let cut = tx["input"].as_str().map(|input| input.chars().take(2 + 8).collect::<String>());
            if let Some(cut) = cut {
                tx["input"] = json!(cut);
            }
            tx
        })
        .collect();
    let receipts: Vec<Value> = range
        .filter_map(|i| {
            let r = b.receipts.get(i)?;
            let mut v = format::receipt(b, r, format::first_log_index(b, i));
            v["logs"] = Value::Null;
            v["logsBloom"] = Value::Null;
            v["timestamp"] = hex_u64(b.block.header.timestamp);
            Some(v)
        })
        .collect();
    json!({"fullblock": ots_block(b, Some(txs)), "receipts": receipts})
}

/// The first block in `lo..=hi` at whose end `reached` holds, given that
/// it holds at `hi` and, once it holds, holds at every later block: a
/// binary search, `log2(hi - lo)` reads.
pub fn first_reaching<E>(
    lo: u64,
    hi: u64,
    mut reached: impl FnMut(u64) -> Result<bool, E>,
) -> Result<u64, E> {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if reached(mid)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(hi)
}

/// Where, in the history kept, the block at whose end `reached` first
/// holds is: `None` if it does not hold at the head, or held from the
/// chain's start (no block made it so); "missing trie node" if it already
/// held at the oldest block kept after that.
fn first_block_where(
    s: &RpcState,
    mut reached: impl FnMut(&dyn StateReader) -> Result<bool, RpcError>,
) -> Result<Option<u64>, RpcError> {
    let head = s.store.head();
    let oldest = s.store.oldest_state()?.min(head);
    let mut at = |n: u64| -> Result<bool, RpcError> { reached(&s.store.state_at(n)?) };
    if !at(head)? {
        return Ok(None);
    }
    if at(oldest)? {
        if oldest == 0 {
            return Ok(None);
        }
        // Made so before the history kept: the store's own error.
        s.store.state_at(oldest - 1)?;
        return Err(RpcError::new(SERVER_ERROR, "missing trie node"));
    }
    first_reaching(oldest + 1, head, at).map(Some)
}

/// `ots_getTransactionBySenderAndNonce`: the hash of `sender`'s mined
/// transaction with `nonce`, or null.
fn transaction_by_sender_and_nonce(s: &RpcState, sender: Address, nonce: u64) -> Result<Value, RpcError> {
    let found = first_block_where(s, |state| Ok(state.account(&sender)?.is_some_and(|a| a.nonce > nonce)))?;
    let Some(number) = found else { return Ok(Value::Null) };
    let Some(block) = find_block(s, BlockId::Number(number))? else { return Ok(Value::Null) };
    // Its nonce moved in this block: by the transaction, or (EIP-7702) by
    // an authorization in another's, which answers null.
    Ok(applied(&block)?
        .iter()
        .find(|tx| tx.sender == sender && tx.nonce() == nonce)
        .map_or(Value::Null, |tx| json!(tx.hash)))
}

/// `ots_getContractCreator`: the transaction that created `address` and
/// its creator (the sender, or the contract whose `CREATE` did), or null
/// (no code, or code from genesis or from an EIP-7702 delegation).
fn contract_creator(s: &RpcState, address: Address, limits: &TraceLimits) -> Result<Value, RpcError> {
    let Some(number) = first_block_where(s, |state| has_code(state, address))? else {
        return Ok(Value::Null);
    };
    let Some(block) = find_block(s, BlockId::Number(number))? else { return Ok(Value::Null) };
    // Deployed by a transaction of its own: the receipt says so.
    if let Some(r) = block.receipts.iter().find(|r| r.contract_address == Some(address)) {
        return Ok(json!({"hash": r.tx_hash, "creator": r.from}));
    }
    // Else by a contract: re-execute the block to find the frame.
    let txs = applied(&block)?;
    let header = &block.block.header;
    let state = s.store.state_at(number.saturating_sub(1))?;
    Ok(match exec::find_creation(&state, &s.exec, header, &txs, address, limits)? {
        Some((hash, creator)) => json!({"hash": hash, "creator": creator}),
        None => Value::Null,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn pages_count_from_the_end_of_the_block() {
        assert_eq!(page_range(25, 0, 10), 15..25);
        assert_eq!(page_range(25, 1, 10), 5..15);
        assert_eq!(page_range(25, 2, 10), 0..5);
        assert!(page_range(25, 3, 10).is_empty());
        assert!(page_range(0, 0, 10).is_empty());
        assert_eq!(page_range(3, 0, 25), 0..3);
        assert!(page_range(3, u64::MAX, u64::MAX).is_empty(), "no overflow");
        assert_eq!(page_range(3, 0, u64::MAX), 0..3);
        assert!(page_range(3, 0, 0).is_empty());
    }

    #[test]
    fn the_search_finds_the_first_block_reached() {
        let nonces = [0u64, 0, 1, 1, 1, 3, 4];
        for target in 0..4 {
            let first = first_reaching::<()>(0, 6, |n| Ok(nonces[n as usize] > target)).unwrap();
            let expected = nonces.iter().position(|&n| n > target).unwrap() as u64;
            assert_eq!(first, expected, "nonce {target}");
        }
        let mut reads = 0;
        first_reaching::<()>(0, 1 << 20, |n| {
            reads += 1;
            Ok(n >= 12_345)
        })
        .unwrap();
        assert!(reads <= 21, "{reads} reads");
        assert_eq!(first_reaching::<()>(5, 5, |_| Ok(true)).unwrap(), 5);
        assert_eq!(first_reaching(0, 9, |_| Err("read failed")), Err("read failed"));
    }
}
