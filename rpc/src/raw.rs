//! The simple getters today's tools call beside the block and receipt
//! objects: the raw (RLP / EIP-2718) forms of headers, blocks, receipts and
//! transactions (`debug_getRaw*`), `eth_getAccount`, `txpool_inspect` and
//! `txpool_contentFrom`, and `eth_getProof`'s refusal. Shapes, codes and
//! messages follow geth (`internal/ethapi/api.go`); `eth_getAccount`, which
//! geth does not serve, follows reth and the execution-apis proposal.

use std::collections::BTreeMap;

use alloy_consensus::{
    Eip658Value, Receipt as EthReceipt, ReceiptEnvelope, ReceiptWithBloom, TxType, EMPTY_ROOT_HASH,
};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Address, Bytes};
use alloy_rlp::Encodable;
use serde_json::{json, Map, Value};
use sluice_messages::{Receipt, RecoveredTx};
use sluice_store::StoredBlock;

use super::{
    error::{RpcError, INTERNAL_ERROR, SERVER_ERROR},
    format::{self, hex_u256, hex_u64},
    params::{BlockId, Params},
    selector::{find_block, state_at},
    RpcState,
};

/// The methods served here: one list, so the dispatch table and the metric
/// labels gain one entry each.
pub const METHODS: &[&str] = &[
    "debug_getRawHeader",
    "debug_getRawBlock",
    "debug_getRawReceipts",
    "debug_getRawTransaction",
    "eth_getAccount",
    "eth_getProof",
    "txpool_inspect",
    "txpool_contentFrom",
];

/// What `eth_getProof` answers: there is nothing to prove against.
pub const NO_PROOFS: &str =
    "eth_getProof is not supported: this chain's stateRoot is an app hash, not a Merkle-Patricia trie root";

/// Answers one of [`METHODS`].
pub async fn call(s: &RpcState, method: &str, p: &Params<'_>) -> Result<Value, RpcError> {
    match method {
        "debug_getRawHeader" => {
            let id = p.block(0)?;
            Ok(match block_or_missing(s, id, "header")? {
                Some(b) => json!(raw_header(&b)),
                // geth answers an empty byte string for a number it lacks.
                None => json!(Bytes::new()),
            })
        }
        "debug_getRawBlock" => {
            let id = p.block(0)?;
            Ok(match block_or_missing(s, id, "block")? {
                Some(b) => json!(raw_block(&b)),
                None => json!(Bytes::new()),
            })
        }
        "debug_getRawReceipts" => {
            crate::sync::state_readable(&s.store)?;
            let id = p.block(0)?;
            match find_block(s, id)? {
                Some(b) => Ok(json!(raw_receipts(&b)?)),
                // geth: a hash it lacks has no receipts (`[]`), a number
                // it lacks no answer at all (`null`).
                None if matches!(id, BlockId::Hash(_)) => Ok(json!([])),
                None => Ok(Value::Null),
            }
        }
        "debug_getRawTransaction" => {
            let hash = p.hash(0)?;
            if let Some((b, i)) = s.store.try_transaction(&hash)? {
                return Ok(b.raw_tx(i).map_or(Value::Null, |raw| json!(raw)));
            }
            if let Some(tx) = s.pending.get(&hash) {
                return Ok(json!(tx.raw));
            }
            // Held for a nonce gap: in geth's pool too (its queue).
            let queued = s.pipeline.queued().await?;
            // Unknown: `null`, as the execution-apis tests, reth, Nethermind
            // and Besu answer; geth answers "0x" (a nil `hexutil.Bytes`).
            Ok(queued.iter().find(|tx| tx.hash == hash).map_or(Value::Null, |tx| json!(tx.raw)))
        }
        "eth_getAccount" => {
            let address = p.address(0)?;
            let at = state_at(s, p.block(1)?)?;
            Ok(at.reader(s).account(&address)?.map_or(Value::Null, |a| {
                // sluice keeps no storage trie, so no account has a storage
                // root. The empty root is exact for an account without
                // storage (every account without code, nearly), and wrong
                // for a contract with storage: there is no exact answer.
                json!({
                    "codeHash": a.code_hash,
                    "storageRoot": EMPTY_ROOT_HASH,
                    "balance": hex_u256(a.balance),
                    "nonce": hex_u64(a.nonce),
                })
            }))
        }
        "eth_getProof" => {
            // The parameters are checked first, as geth checks them.
            p.address(0)?;
            let _: Vec<String> = p.typed(1)?.unwrap_or_default();
            p.block(2)?;
            Err(RpcError::new(SERVER_ERROR, NO_PROOFS))
        }
        "txpool_inspect" => {
            let queued = s.pipeline.queued().await?;
            Ok(json!({"pending": inspect(s.pending.snapshot()), "queued": inspect(queued)}))
        }
        "txpool_contentFrom" => {
            let sender = p.address(0)?;
            let mut queued = s.pipeline.queued().await?;
            queued.retain(|tx| tx.sender == sender);
            let mut pending = s.pending.snapshot();
            pending.retain(|tx| tx.sender == sender);
            Ok(json!({"pending": by_nonce(pending), "queued": by_nonce(queued)}))
        }
        _ => Err(RpcError::method_not_found(method)),
    }
}

/// The block a selector names for the raw getters: `None` for a number
/// past the head (geth answers it with nothing), geth's error for a hash
/// it does not know (`what` is "header" or "block").
fn block_or_missing(
    s: &RpcState,
    id: BlockId,
    what: &str,
) -> Result<Option<std::sync::Arc<StoredBlock>>, RpcError> {
    match (find_block(s, id)?, id) {
        (Some(b), _) => Ok(Some(b)),
        // geth prints the hash with %d (a list of bytes); here it is hex.
        (None, BlockId::Hash(h)) => Err(RpcError::new(SERVER_ERROR, format!("{what} #{h} not found"))),
        (None, _) => Ok(None),
    }
}

/// The RLP of a block's header ([`format::header`]).
pub fn raw_header(b: &StoredBlock) -> Bytes {
    alloy_rlp::encode(format::header(b)).into()
}

/// The RLP of a block as geth stores it after Shanghai: `[header,
/// transactions, uncles, withdrawals]`, with the applied transactions in
/// order (those `eth_getBlockByNumber` lists; a transaction sealed but not
/// applicable is in no block's body). Each transaction is its exact raw
/// bytes: a legacy one inline (it is an RLP list), a typed one as an RLP
/// string of its EIP-2718 bytes, so nothing is decoded or re-encoded.
pub fn raw_block(b: &StoredBlock) -> Bytes {
    let header = format::header(b);
    let txs: Vec<&Bytes> = (0..b.receipts.len()).filter_map(|i| b.raw_tx(i)).collect();
    let typed = |raw: &Bytes| raw.first().is_some_and(|&first| first < 0xc0);
    let txs_len: usize = txs
        .iter()
        .map(|raw| {
            if typed(raw) {
                alloy_rlp::Header { list: false, payload_length: raw.len() }.length() + raw.len()
            } else {
                raw.len()
            }
        })
        .sum();
    // Empty lists: no uncles, no withdrawals.
    let empty = alloy_rlp::Header { list: true, payload_length: 0 };
    let txs_header = alloy_rlp::Header { list: true, payload_length: txs_len };
    let payload = header.length() + txs_header.length() + txs_len + 2 * empty.length();
    let mut out = Vec::with_capacity(payload + 9);
    alloy_rlp::Header { list: true, payload_length: payload }.encode(&mut out);
    header.encode(&mut out);
    txs_header.encode(&mut out);
    for raw in txs {
        if typed(raw) {
            alloy_rlp::Header { list: false, payload_length: raw.len() }.encode(&mut out);
        }
        out.extend_from_slice(raw);
    }
    empty.encode(&mut out);
    empty.encode(&mut out);
    out.into()
}

/// The EIP-2718 encoding of each of a block's receipts, as geth's
/// `MarshalBinary`: status, cumulative gas, bloom, logs.
pub fn raw_receipts(b: &StoredBlock) -> Result<Vec<Bytes>, RpcError> {
    b.receipts.iter().map(raw_receipt).collect()
}

fn raw_receipt(r: &Receipt) -> Result<Bytes, RpcError> {
    let ty = TxType::try_from(r.tx_type).map_err(|e| {
        RpcError::new(
            INTERNAL_ERROR,
            format!("receipt of {}: transaction type {}: {e}", r.tx_hash, r.tx_type),
        )
    })?;
    let logs = r
        .logs
        .iter()
        .map(|l| alloy_primitives::Log::new_unchecked(l.address, l.topics.clone(), l.data.clone()))
        .collect();
    let receipt = EthReceipt {
        status: Eip658Value::Eip658(r.success),
        cumulative_gas_used: r.cumulative_gas_used,
        logs,
    };
    let envelope =
        ReceiptEnvelope::from_typed(ty, ReceiptWithBloom { receipt, logs_bloom: format::bloom(&r.logs) });
    Ok(envelope.encoded_2718().into())
}

/// geth's `txpool_inspect` line for one transaction: `to: value wei + gas
/// gas × price wei`, the price being the fee cap of a dynamic-fee one.
pub fn inspect_line(tx: &RecoveredTx) -> String {
    use alloy_consensus::Transaction;
    let env = &tx.tx;
    let to = env.to().map_or_else(|| "contract creation".to_string(), |a| a.to_checksum(None));
    format!("{to}: {} wei + {} gas × {} wei", env.value(), env.gas_limit(), env.max_fee_per_gas())
}

/// sender (checksummed, as geth's keys) -> nonce (decimal) -> summary line.
fn inspect(txs: Vec<RecoveredTx>) -> Value {
    let mut out: BTreeMap<Address, Map<String, Value>> = BTreeMap::new();
    for tx in txs {
        out.entry(tx.sender).or_default().insert(tx.nonce().to_string(), json!(inspect_line(&tx)));
    }
    Value::Object(out.into_iter().map(|(a, m)| (a.to_checksum(None), Value::Object(m))).collect())
}

/// nonce (decimal) -> transaction object, for one sender.
fn by_nonce(txs: Vec<RecoveredTx>) -> Value {
    let mut out: BTreeMap<u64, Value> = BTreeMap::new();
    for tx in txs {
        out.insert(tx.nonce(), format::transaction(&tx, None));
    }
    Value::Object(out.into_iter().map(|(n, tx)| (n.to_string(), tx)).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use alloy_consensus::{Block, Header, TxEip1559, TxEnvelope, TxLegacy, TypedTransaction};
    use alloy_eips::eip2718::Decodable2718;
    use alloy_primitives::{Address, TxKind, B256, U256};
    use alloy_rlp::Decodable;
    use sluice_messages::{BlockHeader, Log, SealedBlock};
    use sluice_txpool::Signer;

    use super::*;

    fn signer() -> Signer {
        Signer::from_bytes(&B256::repeat_byte(7)).unwrap()
    }

    fn legacy(nonce: u64, to: Option<Address>) -> Bytes {
        signer().sign_raw(TypedTransaction::Legacy(TxLegacy {
            chain_id: Some(1),
            nonce,
            gas_price: 7,
            gas_limit: 21_000,
            to: to.map_or(TxKind::Create, TxKind::Call),
            value: U256::from(5),
            input: Bytes::new(),
        }))
    }

    fn dynamic(nonce: u64) -> Bytes {
        signer().sign_raw(TypedTransaction::Eip1559(TxEip1559 {
            chain_id: 1,
            nonce,
            gas_limit: 50_000,
            max_fee_per_gas: 9,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(Address::repeat_byte(2)),
            value: U256::from(3),
            ..Default::default()
        }))
    }

    fn receipt(raw: &Bytes, index: u32, ty: u8, logs: Vec<Log>) -> Receipt {
        Receipt {
            tx_hash: sluice_messages::keccak256(raw),
            tx_type: ty,
            index,
            from: signer().address(),
            to: None,
            contract_address: None,
            success: index == 0,
            gas_used: 21_000,
            cumulative_gas_used: 21_000 * u64::from(index + 1),
            effective_gas_price: 7,
            logs,
            output: Bytes::new(),
        }
    }

    /// A block of three sealed transactions, the middle one not applied.
    fn block() -> StoredBlock {
        let txs =
            vec![legacy(0, Some(Address::repeat_byte(1))), Bytes::from_static(&[0x02, 0x01]), dynamic(1)];
        let log =
            Log { address: Address::repeat_byte(3), topics: vec![B256::repeat_byte(4)], data: Bytes::new() };
        let header = BlockHeader {
            number: 9,
            parent_hash: B256::repeat_byte(5),
            timestamp: 1_700_000_000,
            coinbase: Address::repeat_byte(6),
            gas_limit: 30_000_000,
            base_fee: 1,
            tx_root: B256::repeat_byte(8),
            state_ref: None,
        };
        let receipts = vec![receipt(&txs[0], 0, 0, vec![]), receipt(&txs[2], 1, 2, vec![log])];
        StoredBlock {
            block: Arc::new(SealedBlock { hash: header.hash(), header, txs }),
            receipts,
            raw_index: vec![0, 2],
            gas_used: 42_000,
            app_hash: B256::repeat_byte(9),
        }
    }

    #[test]
    fn raw_header_decodes_to_what_the_block_object_reports() {
        let b = block();
        let header = Header::decode(&mut raw_header(&b).as_ref()).unwrap();
        let object = format::block(&b, vec![]);
        assert_eq!(json!(header.state_root), object["stateRoot"]);
        assert_eq!(json!(header.receipts_root), object["receiptsRoot"]);
        assert_eq!(json!(header.logs_bloom), object["logsBloom"]);
        assert_eq!(json!(header.parent_hash), object["parentHash"]);
        assert_eq!(hex_u64(header.number), object["number"]);
        assert_eq!(hex_u64(header.gas_used), object["gasUsed"]);
        assert_eq!(header.base_fee_per_gas.map(hex_u64), Some(object["baseFeePerGas"].clone()));
        assert_eq!(header, format::header(&b));
        // The object's constant fields, as they were before it was built
        // from the header.
        assert_eq!(object["nonce"], "0x0000000000000000");
        assert_eq!(
            object["sha3Uncles"],
            "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347"
        );
        assert_eq!(
            object["withdrawalsRoot"],
            "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"
        );
        assert_eq!((&object["extraData"], &object["difficulty"]), (&json!("0x"), &json!("0x0")));
        assert_eq!((&object["blobGasUsed"], &object["excessBlobGas"]), (&json!("0x0"), &json!("0x0")));
        assert_eq!(object["parentBeaconBlockRoot"], json!(B256::ZERO));
    }

    #[test]
    fn raw_block_holds_the_applied_transactions_byte_for_byte() {
        let b = block();
        let raw = raw_block(&b);
        let decoded = Block::<TxEnvelope>::decode(&mut raw.as_ref()).unwrap();
        assert_eq!(decoded.header, format::header(&b));
        assert_eq!(decoded.body.transactions.len(), 2, "the unapplied one is left out");
        for (tx, i) in decoded.body.transactions.iter().zip([0usize, 2]) {
            assert_eq!(Bytes::from(tx.encoded_2718()), b.block.txs[i]);
        }
        assert!(decoded.body.ommers.is_empty());
        assert_eq!(decoded.body.withdrawals.as_ref().map(|w| w.len()), Some(0));
        assert_eq!(alloy_rlp::encode(&decoded), raw.to_vec(), "alloy encodes it the same");
    }

    #[test]
    fn raw_block_of_an_empty_block_has_empty_lists() {
        let mut b = block();
        let mut sealed = (*b.block).clone();
        sealed.txs.clear();
        b.block = Arc::new(sealed);
        b.receipts.clear();
        b.raw_index.clear();
        let raw = raw_block(&b);
        let decoded = Block::<TxEnvelope>::decode(&mut raw.as_ref()).unwrap();
        assert!(decoded.body.transactions.is_empty());
        assert_eq!(alloy_rlp::encode(&decoded), raw.to_vec());
        assert!(raw_receipts(&b).unwrap().is_empty());
    }

    #[test]
    fn raw_receipts_are_eip_2718() {
        let b = block();
        let raw = raw_receipts(&b).unwrap();
        assert_eq!(raw.len(), 2);
        assert!(raw[0][0] >= 0xc0, "a legacy receipt is a bare RLP list");
        assert_eq!(raw[1][0], 2, "a dynamic-fee receipt is typed");
        let second = ReceiptEnvelope::decode_2718(&mut raw[1].as_ref()).unwrap();
        let r = second.as_receipt_with_bloom().unwrap();
        assert_eq!(r.receipt.cumulative_gas_used, 42_000);
        assert_eq!(r.receipt.status, Eip658Value::Eip658(false));
        assert_eq!(r.logs_bloom, format::bloom(&b.receipts[1].logs));
        assert_eq!(r.receipt.logs[0].address, Address::repeat_byte(3));
        let first = ReceiptEnvelope::decode_2718(&mut raw[0].as_ref()).unwrap();
        assert!(matches!(first, ReceiptEnvelope::Legacy(_)), "{first:?}");
        assert_eq!(first.as_receipt_with_bloom().unwrap().receipt.status, Eip658Value::Eip658(true));
        let mut odd = b.receipts[0].clone();
        odd.tx_type = 0x7f;
        assert_eq!(raw_receipt(&odd).unwrap_err().code, INTERNAL_ERROR);
    }

    #[test]
    fn inspect_lines_follow_geth() {
        let tx = |raw: Bytes| {
            let hash = sluice_messages::keccak256(&raw);
            let env = sluice_txpool::decode_envelope(&raw, hash).unwrap();
            RecoveredTx { hash, raw, tx: env, sender: signer().address() }
        };
        let to = Address::repeat_byte(0xab);
        assert_eq!(
            inspect_line(&tx(legacy(0, Some(to)))),
            format!("{}: 5 wei + 21000 gas × 7 wei", to.to_checksum(None))
        );
        assert_eq!(inspect_line(&tx(legacy(0, None))), "contract creation: 5 wei + 21000 gas × 7 wei");
        assert!(inspect_line(&tx(dynamic(1))).ends_with(": 3 wei + 50000 gas × 9 wei"), "the fee cap");
        let view = inspect(vec![tx(dynamic(1)), tx(legacy(0, Some(to)))]);
        let sender = signer().address().to_checksum(None);
        assert_eq!(view[&sender].as_object().map(|m| m.len()), Some(2), "{view}");
        assert!(view[&sender]["0"].as_str().unwrap().starts_with(&to.to_checksum(None)));
        let from = by_nonce(vec![tx(dynamic(1)), tx(legacy(0, Some(to)))]);
        assert_eq!(from["1"]["nonce"], "0x1", "{from}");
        assert_eq!(from["0"]["type"], "0x0", "{from}");
    }
}
