//! JSON shapes of blocks, transactions, receipts and logs, as geth returns
//! them (hex quantities, checksummed addresses, every field clients parse).

use alloy_consensus::{Header, Transaction, TxEnvelope, EMPTY_OMMER_ROOT_HASH, EMPTY_ROOT_HASH};
use alloy_eips::Typed2718;
use alloy_primitives::{Bloom, Bytes, B256, B64, U256};
use serde_json::{json, Map, Value};
use sluice_messages::{Log, Receipt, RecoveredTx};
use sluice_store::{LogEntry, StoredBlock};

/// A quantity as `0x`-hex without leading zeros.
pub fn hex_u64(v: u64) -> Value {
    Value::String(format!("{v:#x}"))
}

/// A 128-bit quantity.
pub fn hex_u128(v: u128) -> Value {
    Value::String(format!("{v:#x}"))
}

/// A 256-bit quantity.
pub fn hex_u256(v: U256) -> Value {
    Value::String(format!("{v:#x}"))
}

/// Where a transaction sits, when it is in a committed block.
#[derive(Debug, Clone, Copy)]
pub struct TxPosition {
    /// Block hash.
    pub block_hash: B256,
    /// Block height.
    pub block_number: u64,
    /// Index among the block's applied transactions.
    pub index: u32,
    /// The block's base fee, for `gasPrice` of EIP-1559 transactions.
    pub base_fee: u64,
    /// The block's timestamp (`blockTimestamp`, added to the
    /// execution-apis transaction object in 2026; geth and reth serve it).
    pub timestamp: u64,
}

/// A transaction object; `at` is `None` while it is pending.
pub fn transaction(tx: &RecoveredTx, at: Option<TxPosition>) -> Value {
    let env: &TxEnvelope = &tx.tx;
    let sig = env.signature();
    let mut o = Map::new();
    o.insert("hash".into(), json!(tx.hash));
    o.insert("type".into(), hex_u64(u64::from(env.ty())));
    o.insert("nonce".into(), hex_u64(env.nonce()));
    o.insert("from".into(), json!(tx.sender));
    o.insert("to".into(), env.to().map_or(Value::Null, |a| json!(a)));
    o.insert("value".into(), hex_u256(env.value()));
    o.insert("gas".into(), hex_u64(env.gas_limit()));
    o.insert("input".into(), json!(env.input()));
    o.insert("r".into(), hex_u256(sig.r()));
    o.insert("s".into(), hex_u256(sig.s()));
    let parity = u64::from(sig.v());
    match env {
        TxEnvelope::Legacy(_) => {
            let v = env.chain_id().map_or(27 + parity, |id| id * 2 + 35 + parity);
            o.insert("v".into(), hex_u64(v));
            o.insert("gasPrice".into(), hex_u128(env.max_fee_per_gas()));
        }
        _ => {
            o.insert("v".into(), hex_u64(parity));
            o.insert("yParity".into(), hex_u64(parity));
            o.insert("accessList".into(), json!(env.access_list().cloned().unwrap_or_default()));
            if env.is_dynamic_fee() {
                o.insert("maxFeePerGas".into(), hex_u128(env.max_fee_per_gas()));
                o.insert(
                    "maxPriorityFeePerGas".into(),
                    hex_u128(env.max_priority_fee_per_gas().unwrap_or_default()),
                );
                // Mined: the price actually paid; pending: the cap (geth).
                let price = at.map_or(env.max_fee_per_gas(), |p| env.effective_gas_price(Some(p.base_fee)));
                o.insert("gasPrice".into(), hex_u128(price));
            } else {
                o.insert("gasPrice".into(), hex_u128(env.max_fee_per_gas()));
            }
            if let Some(auths) = env.authorization_list() {
                o.insert("authorizationList".into(), json!(auths));
            }
        }
    }
    if let Some(id) = env.chain_id() {
        o.insert("chainId".into(), hex_u64(id));
    }
    match at {
        Some(p) => {
            o.insert("blockHash".into(), json!(p.block_hash));
            o.insert("blockNumber".into(), hex_u64(p.block_number));
            o.insert("transactionIndex".into(), hex_u64(u64::from(p.index)));
            o.insert("blockTimestamp".into(), hex_u64(p.timestamp));
        }
        None => {
            o.insert("blockHash".into(), Value::Null);
            o.insert("blockNumber".into(), Value::Null);
            o.insert("transactionIndex".into(), Value::Null);
            o.insert("blockTimestamp".into(), Value::Null);
        }
    }
    Value::Object(o)
}

/// The bloom of a set of logs.
pub fn bloom<'a>(logs: impl IntoIterator<Item = &'a Log>) -> Bloom {
    let mut b = Bloom::ZERO;
    for l in logs {
        b.accrue_raw_log(l.address, &l.topics);
    }
    b
}

/// A log object.
pub fn log(e: &LogEntry) -> Value {
    json!({
        "address": e.log.address,
        "topics": e.log.topics,
        "data": e.log.data,
        "blockNumber": hex_u64(e.block_number),
        "blockHash": e.block_hash,
        "transactionHash": e.tx_hash,
        "transactionIndex": hex_u64(u64::from(e.tx_index)),
        "logIndex": hex_u64(u64::from(e.log_index)),
        "removed": false,
    })
}

/// A receipt object. `first_log_index` is the block-wide index of its
/// first log.
pub fn receipt(block: &StoredBlock, r: &Receipt, first_log_index: u32) -> Value {
    let number = block.block.header.number;
    let logs: Vec<Value> = r
        .logs
        .iter()
        .enumerate()
        .map(|(i, l)| {
            log(&LogEntry {
                log: l.clone(),
                block_number: number,
                block_hash: block.block.hash,
                tx_hash: r.tx_hash,
                tx_index: r.index,
                log_index: first_log_index + i as u32,
            })
        })
        .collect();
    json!({
        "transactionHash": r.tx_hash,
        "transactionIndex": hex_u64(u64::from(r.index)),
        "blockHash": block.block.hash,
        "blockNumber": hex_u64(number),
        "from": r.from,
        "to": r.to,
        "cumulativeGasUsed": hex_u64(r.cumulative_gas_used),
        "gasUsed": hex_u64(r.gas_used),
        "effectiveGasPrice": hex_u128(r.effective_gas_price),
        "contractAddress": r.contract_address,
        "logs": logs,
        "logsBloom": bloom(&r.logs),
        "status": hex_u64(u64::from(r.success)),
        "type": hex_u64(u64::from(r.tx_type)),
    })
}

/// All receipts of a block.
pub fn receipts(block: &StoredBlock) -> Value {
    let mut first = 0u32;
    let out: Vec<Value> = block
        .receipts
        .iter()
        .map(|r| {
            let v = receipt(block, r, first);
            first += r.logs.len() as u32;
            v
        })
        .collect();
    Value::Array(out)
}

/// The block-wide index of the first log of receipt `index`.
pub fn first_log_index(block: &StoredBlock, index: usize) -> u32 {
    block.receipts[..index].iter().map(|r| r.logs.len() as u32).sum()
}

/// The Ethereum header of a committed block, with the fields
/// `eth_getBlockByNumber` reports (the block object and
/// `debug_getRawHeader` are both built from it, so they cannot disagree).
///
/// Its RLP does not hash to the block's hash: sluice's block hash is the
/// keccak of its own header's protobuf encoding (what consensus signs), and
/// the roots here are sluice's (`stateRoot` is the app hash,
/// `transactionsRoot` and `receiptsRoot` digests), not trie roots.
pub fn header(b: &StoredBlock) -> Header {
    Header {
        state_root: b.app_hash,
        transactions_root: b.block.header.tx_root,
        receipts_root: if b.receipts.is_empty() { EMPTY_ROOT_HASH } else { receipts_digest(b) },
        logs_bloom: bloom(b.receipts.iter().flat_map(|r| r.logs.iter())),
        ..header_of(&b.block.header, b.gas_used)
    }
}

/// The Ethereum header of a block with sluice header `h` that used
/// `gas_used`, but for its roots and bloom (each caller's own): the fields
/// sluice sets alike for every block, stored or simulated (no ommers, no
/// difficulty, no blobs, no beacon root).
pub fn header_of(h: &sluice_messages::BlockHeader, gas_used: u64) -> Header {
    Header {
        parent_hash: h.parent_hash,
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        beneficiary: h.coinbase,
        difficulty: U256::ZERO,
        number: h.number,
        gas_limit: h.gas_limit,
        gas_used,
        timestamp: h.timestamp,
        extra_data: Bytes::new(),
        // No randomness beacon here; the parent hash stands in (the
        // executor's PREVRANDAO; as before this header existed, the block
        // object reported it).
        mix_hash: h.parent_hash,
        nonce: B64::ZERO,
        base_fee_per_gas: Some(h.base_fee),
        withdrawals_root: Some(EMPTY_ROOT_HASH),
        blob_gas_used: Some(0),
        excess_blob_gas: Some(0),
        parent_beacon_block_root: Some(B256::ZERO),
        ..Header::default()
    }
}

/// A block object; `txs` are the applied transactions in order (decoded,
/// when `full`), or only their hashes.
pub fn block(b: &StoredBlock, txs: Vec<Value>) -> Value {
    let size: usize = 600 + b.block.txs.iter().map(|t| t.len()).sum::<usize>();
    block_object(&header(b), b.block.hash, size as u64, txs)
}

/// The block object of header `h`, whose hash is `hash` and size (bytes)
/// `size`, with `txs` (objects or hashes): `eth_getBlockByNumber`'s shape,
/// shared with `eth_simulateV1`'s simulated blocks.
pub fn block_object(h: &Header, hash: B256, size: u64, txs: Vec<Value>) -> Value {
    json!({
        "number": hex_u64(h.number),
        "hash": hash,
        "parentHash": h.parent_hash,
        "nonce": h.nonce,
        "sha3Uncles": h.ommers_hash,
        "logsBloom": h.logs_bloom,
        "transactionsRoot": h.transactions_root,
        "stateRoot": h.state_root,
        "receiptsRoot": h.receipts_root,
        "miner": h.beneficiary,
        "difficulty": hex_u256(h.difficulty),
        "totalDifficulty": "0x0",
        "extraData": h.extra_data,
        "size": hex_u64(size),
        "gasLimit": hex_u64(h.gas_limit),
        "gasUsed": hex_u64(h.gas_used),
        "timestamp": hex_u64(h.timestamp),
        "mixHash": h.mix_hash,
        "baseFeePerGas": h.base_fee_per_gas.map(hex_u64),
        "withdrawals": [],
        "withdrawalsRoot": h.withdrawals_root,
        "blobGasUsed": h.blob_gas_used.map(hex_u64),
        "excessBlobGas": h.excess_blob_gas.map(hex_u64),
        "parentBeaconBlockRoot": h.parent_beacon_block_root,
        "uncles": [],
        "transactions": txs,
    })
}

/// A digest committing to the block's receipts (not an Ethereum receipt
/// trie root: sluice has no trie; clients only display it).
fn receipts_digest(b: &StoredBlock) -> B256 {
    let mut buf = Vec::with_capacity(b.receipts.len() * 41);
    for r in &b.receipts {
        buf.extend_from_slice(r.tx_hash.as_slice());
        buf.push(u8::from(r.success));
        buf.extend_from_slice(&r.gas_used.to_be_bytes());
    }
    sluice_messages::keccak256(&buf)
}
