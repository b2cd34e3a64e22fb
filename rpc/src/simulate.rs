//! `eth_simulateV1`, as geth serves it: the parameters are decoded here,
//! the blocks simulated by [`sluice_executor::simulate`] (on the call pool,
//! within the call's deadline and memory limit, all calls together within
//! `rpc.gas_cap`), and each simulated block answered as a block object
//! with its `calls`.
//!
//! A simulated block's hash is the keccak of its Ethereum header's RLP, and
//! each block's `parentHash` the previous one's (the first's, the base
//! block's hash). Its `transactionsRoot` and `receiptsRoot` are the tries
//! of its calls (as unsigned EIP-1559 transactions, geth's choice) and
//! their receipts; its `stateRoot` is zero: sluice keeps no state trie.

use alloy_consensus::{
    proofs::{calculate_receipt_root, calculate_transaction_root},
    Header, Receipt as EthReceipt, ReceiptEnvelope, ReceiptWithBloom, SignableTransaction, Signed, TxEip1559,
    TxEnvelope, EMPTY_ROOT_HASH,
};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Signature, TxKind, B256, U256};
use alloy_rlp::Encodable;
use serde_json::{json, Map, Value};
use sluice_executor::{
    simulate::{call_error, simulate, SimBlock, SimOptions, SimulatedBlock},
    CallLimits,
};
use sluice_messages::RecoveredTx;
use sluice_store::LogEntry;

use super::{
    error::RpcError,
    format::{self, block_object, bloom, hex_u64, log, transaction, TxPosition},
    params::{call_request, ParamError, Params},
    selector::state_at,
    RpcState,
};

/// The methods served here.
pub const METHODS: &[&str] = &["eth_simulateV1"];

/// What the first parameter asks.
struct Request {
    blocks: Vec<SimBlock>,
    opts: SimOptions,
    full: bool,
}

/// Answers `eth_simulateV1` on this thread (a call worker), within `limits`.
pub(crate) fn call(s: &RpcState, p: &Params<'_>, limits: &CallLimits) -> Result<Value, RpcError> {
    p.at_most(2)?;
    let mut req = request(p.req(0)?).map_err(|e| RpcError::invalid_arg(0, e))?;
    req.opts.gas_cap = s.limits.gas_cap;
    let at = state_at(s, p.block(1)?)?;
    let base = at.block(s);
    let simulated = simulate(at.reader(s), &s.exec, limits, &base.block.header, &req.blocks, &req.opts)
        .map_err(|e| RpcError::new(e.code, e.message))?;
    let mut parent = base.block.hash;
    let mut out = Vec::with_capacity(simulated.len());
    for b in &simulated {
        let (answer, hash) = block(s, b, parent, req.full);
        out.push(answer);
        parent = hash;
    }
    Ok(Value::Array(out))
}

/// Decodes `{blockStateCalls, traceTransfers?, validation?,
/// returnFullTransactions?}`.
fn request(v: &Value) -> Result<Request, ParamError> {
    let o = v.as_object().ok_or_else(|| ParamError::wrong_type("an object", v))?;
    let flag = |name: &str| match o.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ParamError::wrong_type("a boolean", other).of(name)),
    };
    let opts =
        SimOptions { validation: flag("validation")?, trace_transfers: flag("traceTransfers")?, gas_cap: 0 };
    let full = flag("returnFullTransactions")?;
    let mut blocks = Vec::new();
    match o.get("blockStateCalls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, b) in list.iter().enumerate() {
                blocks.push(sim_block(b).map_err(|e| e.of(format!("blockStateCalls[{i}]")))?);
            }
        }
        Some(other) => return Err(ParamError::wrong_type("an array", other).of("blockStateCalls")),
    }
    Ok(Request { blocks, opts, full })
}

/// One `{blockOverrides?, stateOverrides?, calls?}`.
fn sim_block(v: &Value) -> Result<SimBlock, ParamError> {
    let o = v.as_object().ok_or_else(|| ParamError::wrong_type("an object", v))?;
    let field = |name: &str| o.get(name).filter(|v| !v.is_null());
    let mut b = SimBlock::default();
    if let Some(v) = field("blockOverrides") {
        b.block_overrides = serde_json::from_value(v.clone())
            .map_err(|e| ParamError::Decode(e.to_string()).of("blockOverrides"))?;
    }
    if let Some(v) = field("stateOverrides") {
        b.state_overrides = serde_json::from_value(v.clone())
            .map_err(|e| ParamError::Decode(e.to_string()).of("stateOverrides"))?;
    }
    if let Some(v) = field("calls") {
        let list = v.as_array().ok_or_else(|| ParamError::wrong_type("an array", v).of("calls"))?;
        for (j, c) in list.iter().enumerate() {
            b.calls.push(call_request(c).map_err(|e| e.of(format!("calls[{j}]")))?);
        }
    }
    Ok(b)
}

/// A simulated block's object and hash, its parent's hash being `parent`.
fn block(s: &RpcState, b: &SimulatedBlock, parent: B256, full: bool) -> (Value, B256) {
    let txs: Vec<RecoveredTx> = b.calls.iter().map(|c| unsigned_tx(s, &c.request)).collect();
    let mut cumulative = 0u64;
    let receipts: Vec<ReceiptEnvelope> = b
        .calls
        .iter()
        .map(|c| {
            cumulative = cumulative.saturating_add(c.outcome.gas_used);
            let logs: Vec<alloy_primitives::Log> = c
                .outcome
                .logs
                .iter()
                .map(|l| alloy_primitives::Log::new_unchecked(l.address, l.topics.clone(), l.data.clone()))
                .collect();
            let receipt =
                EthReceipt { status: c.outcome.success.into(), cumulative_gas_used: cumulative, logs };
            ReceiptEnvelope::Eip1559(ReceiptWithBloom::new(receipt, bloom(&c.outcome.logs)))
        })
        .collect();
    let envelopes: Vec<&TxEnvelope> = txs.iter().map(|t| &t.tx).collect();
    let h = &b.header;
    let header = Header {
        parent_hash: parent,
        state_root: B256::ZERO,
        transactions_root: if txs.is_empty() {
            EMPTY_ROOT_HASH
        } else {
            calculate_transaction_root(&envelopes)
        },
        receipts_root: if receipts.is_empty() { EMPTY_ROOT_HASH } else { calculate_receipt_root(&receipts) },
        logs_bloom: bloom(b.calls.iter().flat_map(|c| c.outcome.logs.iter())),
        ..format::header_of(h, b.gas_used)
    };
    let hash = header.hash_slow();
    let position = |index: usize| TxPosition {
        block_hash: hash,
        block_number: h.number,
        index: u32::try_from(index).unwrap_or(u32::MAX),
        base_fee: h.base_fee,
        timestamp: h.timestamp,
    };
    let tx_values: Vec<Value> = txs
        .iter()
        .enumerate()
        .map(|(i, t)| if full { transaction(t, Some(position(i))) } else { json!(t.hash) })
        .collect();
    let mut log_index = 0u32;
    let calls: Vec<Value> = b
        .calls
        .iter()
        .zip(&txs)
        .enumerate()
        .map(|(i, (c, t))| {
            let logs: Vec<Value> = c
                .outcome
                .logs
                .iter()
                .map(|l| {
                    let entry = LogEntry {
                        log: l.clone(),
                        block_number: h.number,
                        block_hash: hash,
                        tx_hash: t.hash,
                        tx_index: position(i).index,
                        log_index,
                    };
                    log_index = log_index.saturating_add(1);
                    log(&entry)
                })
                .collect();
            let mut o = Map::new();
            o.insert("returnData".into(), json!(c.outcome.output));
            o.insert("logs".into(), Value::Array(logs));
            o.insert("gasUsed".into(), hex_u64(c.outcome.gas_used));
            o.insert("status".into(), hex_u64(u64::from(c.outcome.success)));
            if let Some((code, message, data)) = call_error(&c.outcome) {
                let mut e = json!({"code": code, "message": message});
                if let Some(data) = data {
                    e["data"] = json!(data);
                }
                o.insert("error".into(), e);
            }
            Value::Object(o)
        })
        .collect();
    let size = header.length() + txs.iter().map(|t| t.raw.len()).sum::<usize>();
    let mut answer = block_object(&header, hash, size as u64, tx_values);
    answer["calls"] = Value::Array(calls);
    (answer, hash)
}

/// The call as geth puts it in a simulated block: an EIP-1559 transaction
/// with a zero signature, from the call's sender.
fn unsigned_tx(s: &RpcState, req: &sluice_executor::CallRequest) -> RecoveredTx {
    let tx = TxEip1559 {
        chain_id: s.exec.chain_id,
        nonce: req.nonce.unwrap_or(0),
        gas_limit: req.gas.unwrap_or(0),
        max_fee_per_gas: req.max_fee_per_gas.or(req.gas_price).unwrap_or(0),
        max_priority_fee_per_gas: req.max_priority_fee_per_gas.or(req.gas_price).unwrap_or(0),
        to: req.to.map_or(TxKind::Create, TxKind::Call),
        value: req.value.unwrap_or_default(),
        access_list: req.access_list.clone().unwrap_or_default(),
        input: req.input.clone(),
    };
    let signed: Signed<TxEip1559> = tx.into_signed(Signature::new(U256::ZERO, U256::ZERO, false));
    let envelope = TxEnvelope::Eip1559(signed);
    RecoveredTx {
        hash: *envelope.tx_hash(),
        raw: envelope.encoded_2718().into(),
        tx: envelope,
        sender: req.from.unwrap_or_default(),
    }
}
