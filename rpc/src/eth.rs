//! The JSON-RPC methods.

use std::sync::Arc;

use alloy_primitives::{Address, B256};
use serde_json::{json, Value};
use sluice_messages::RecoveredTx;
use sluice_store::{StateReader, StoredBlock};

use super::{
    error::{RpcError, SERVER_ERROR},
    format::{self, hex_u128, hex_u256, hex_u64, TxPosition},
    params::{self, BlockId, Params},
    selector::{find_block, state_at},
    CallContext, RpcState,
};

/// Methods served, as static strings for metric labels (an unknown name
/// from a client must not create a new time series).
const METHODS: &[&str] = &[
    "eth_chainId",
    "eth_config",
    "net_version",
    "net_listening",
    "net_peerCount",
    "web3_clientVersion",
    "web3_sha3",
    "eth_syncing",
    "consensus_getFinalized",
    "consensus_subscribe",
    "consensus_unsubscribe",
    "eth_mining",
    "eth_accounts",
    "eth_coinbase",
    "eth_blockNumber",
    "eth_getBlockByNumber",
    "eth_getBlockByHash",
    "eth_getBlockTransactionCountByNumber",
    "eth_getBlockTransactionCountByHash",
    "eth_getTransactionByBlockNumberAndIndex",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getUncleCountByBlockNumber",
    "eth_getUncleCountByBlockHash",
    "eth_getBalance",
    "eth_getTransactionCount",
    "eth_getCode",
    "eth_getStorageAt",
    "eth_gasPrice",
    "eth_maxPriorityFeePerGas",
    "eth_blobBaseFee",
    "eth_feeHistory",
    "eth_sendRawTransaction",
    "eth_sendRawTransactionSync",
    "eth_getTransactionByHash",
    "eth_getTransactionReceipt",
    "eth_getBlockReceipts",
    "eth_getLogs",
    "txpool_status",
    "txpool_content",
    "eth_getUncleByBlockNumberAndIndex",
    "eth_getUncleByBlockHashAndIndex",
    "eth_subscribe",
    "eth_unsubscribe",
    "debug_setFailpoint",
    "debug_clearFailpoints",
    "debug_listFailpoints",
];

/// The metric label for a method name.
pub fn metric_label(method: &str) -> &'static str {
    METHODS
        .iter()
        .chain(&super::filters::METHODS)
        .chain(super::calls::METHODS)
        .chain(super::trace::METHODS)
        .chain(super::parity::METHODS)
        .chain(super::simulate::METHODS)
        .chain(super::raw::METHODS)
        .chain(super::ots::METHODS)
        .chain(super::ots::CALL_METHODS)
        .copied()
        .find(|m| *m == method)
        .unwrap_or("unknown")
}

/// Runs one method within `ctx`: by `ctx.until` at the latest if it runs
/// the EVM (what is left of the request's time), counted against
/// `ctx.client`'s caps if it installs a filter. A method outside
/// `rpc.apis` does not exist for the caller.
pub async fn dispatch(
    state: &Arc<RpcState>,
    method: &str,
    params: Option<&Value>,
    ctx: &CallContext,
) -> Result<Value, RpcError> {
    if !state.limits.serves(method) {
        return Err(RpcError::method_not_found(method));
    }
    if super::calls::is_call(method) {
        return super::calls::dispatch(state, method, params, ctx.until).await;
    }
    let p = Params::new(params)?;
    let s = state.as_ref();
    match method {
        "eth_chainId" => Ok(hex_u64(s.rules.chain_id)),
        // Built per request (a few dozen entries) from values fixed at
        // startup: no store read.
        "eth_config" => Ok(super::eth_config::answer(s.exec.spec, s.rules.chain_id, &s.store.genesis_hash())),
        "net_version" => Ok(Value::String(s.rules.chain_id.to_string())),
        "net_listening" => Ok(Value::Bool(true)),
        "net_peerCount" => Ok(hex_u64(0)),
        "web3_clientVersion" => Ok(json!(format!("sluice/v{}/rust", env!("CARGO_PKG_VERSION")))),
        "web3_sha3" => Ok(json!(sluice_messages::keccak256(&p.bytes(0)?))),
        "eth_syncing" => Ok(s.sync.answer(s.store.head())),
        "consensus_getFinalized" => {
            let height = match p.req(0)? {
                Value::String(tag) if tag == "latest" => s.finalized.latest(),
                _ => p.u64(0)?,
            };
            Ok(s.finalized.get(height).map_or(Value::Null, |item| super::finalized::item_json(&item)))
        }
        "eth_mining" => Ok(Value::Bool(false)),
        "eth_accounts" => Ok(json!([])),
        "eth_coinbase" => Ok(json!(s.store.head_block().block.header.coinbase)),
        "eth_blockNumber" => Ok(hex_u64(s.store.head())),
        "eth_getBlockByNumber" | "eth_getBlockByHash" => {
            let id = if method == "eth_getBlockByHash" { BlockId::Hash(p.hash(0)?) } else { p.block(0)? };
            let full = p.opt(1).map(|_| p.bool(1)).transpose()?.unwrap_or(false);
            Ok(find_block(s, id)?.map_or(Value::Null, |b| block_json(&b, full)))
        }
        "eth_getBlockTransactionCountByNumber" | "eth_getBlockTransactionCountByHash" => {
            let id = if method.ends_with("ByHash") { BlockId::Hash(p.hash(0)?) } else { p.block(0)? };
            Ok(find_block(s, id)?.map_or(Value::Null, |b| hex_u64(b.receipts.len() as u64)))
        }
        "eth_getTransactionByBlockNumberAndIndex" | "eth_getTransactionByBlockHashAndIndex" => {
            let id = if method.contains("ByBlockHash") { BlockId::Hash(p.hash(0)?) } else { p.block(0)? };
            let index = p.u64(1)? as usize;
            Ok(find_block(s, id)?.and_then(|b| committed_tx(&b, index)).unwrap_or(Value::Null))
        }
        "eth_getUncleCountByBlockNumber" | "eth_getUncleCountByBlockHash" => Ok(hex_u64(0)),
        // No uncles after the merge, nor ever here; the block must parse.
        "eth_getUncleByBlockNumberAndIndex" => p.block(0).and(p.u64(1)).map(|_| Value::Null),
        "eth_getUncleByBlockHashAndIndex" => p.hash(0).and(p.u64(1)).map(|_| Value::Null),
        "eth_getBalance" => {
            let addr = p.address(0)?;
            let at = state_at(s, p.block(1)?)?;
            Ok(hex_u256(at.reader(s).account(&addr)?.map(|a| a.balance).unwrap_or_default()))
        }
        "eth_getTransactionCount" => {
            let addr = p.address(0)?;
            let block = p.block(1)?;
            let at = state_at(s, block)?;
            let committed = at.reader(s).account(&addr)?.map(|a| a.nonce).unwrap_or_default();
            if block == BlockId::Pending {
                if let Some(next) = pending_nonce(s, addr).await? {
                    return Ok(hex_u64(next.max(committed)));
                }
            }
            Ok(hex_u64(committed))
        }
        "eth_getCode" => {
            let addr = p.address(0)?;
            let at = state_at(s, p.block(1)?)?;
            let code = match at.reader(s).account(&addr)? {
                Some(a) => s.store.code(&a.code_hash)?,
                None => Default::default(),
            };
            Ok(json!(code))
        }
        "eth_getStorageAt" => {
            let addr = p.address(0)?;
            let slot = params::quantity(p.req(1)?).map_err(|e| RpcError::invalid_arg(1, e))?;
            let at = state_at(s, p.block(2)?)?;
            Ok(json!(B256::from(at.reader(s).storage(&addr, &slot)?)))
        }
        "eth_gasPrice" => Ok(hex_u128(u128::from(base_fee(s)) + s.suggested_tip_wei)),
        "eth_maxPriorityFeePerGas" => Ok(hex_u128(s.suggested_tip_wei)),
        "eth_blobBaseFee" => Ok(hex_u64(1)),
        "eth_feeHistory" => fee_history(s, &p),
        "eth_sendRawTransaction" => {
            let raw = p.bytes(0)?;
            Ok(json!(s.pipeline.admit_one(raw, true).await?))
        }
        "eth_sendRawTransactionSync" => send_sync(s, &p).await,
        "eth_getTransactionByHash" => {
            let hash = p.hash(0)?;
            if let Some((b, i)) = s.store.try_transaction(&hash)? {
                return Ok(committed_tx(&b, i).unwrap_or(Value::Null));
            }
            Ok(s.pending.get(&hash).map_or(Value::Null, |tx| format::transaction(&tx, None)))
        }
        "eth_getTransactionReceipt" => {
            let hash = p.hash(0)?;
            crate::sync::state_readable(&s.store)?;
            Ok(match s.store.try_transaction(&hash)? {
                // An index that points past its block's receipts (damage)
                // answers null, never a panic.
                Some((b, i)) => b
                    .receipts
                    .get(i)
                    .map_or(Value::Null, |r| format::receipt(&b, r, format::first_log_index(&b, i))),
                None => Value::Null,
            })
        }
        "eth_getBlockReceipts" => {
            crate::sync::state_readable(&s.store)?;
            Ok(find_block(s, p.block(0)?)?.map_or(Value::Null, |b| format::receipts(&b)))
        }
        "eth_getLogs" => super::logs::get_logs(s, p.req(0)?),
        "txpool_content" => {
            let queued = s.pipeline.queued().await?;
            Ok(json!({"pending": by_sender(s.pending.snapshot()), "queued": by_sender(queued)}))
        }
        "txpool_status" => {
            let (pending, queued) = s.pipeline.status().await?;
            Ok(json!({"pending": hex_u64(pending), "queued": hex_u64(queued)}))
        }
        // Raw getters, eth_getAccount, txpool_inspect / contentFrom and
        // eth_getProof's refusal (raw.rs).
        m if super::raw::METHODS.contains(&m) => super::raw::call(s, m, &p).await,
        // Otterscan's getters (ots.rs); its traces run on the call pool.
        m if super::ots::METHODS.contains(&m) => super::ots::call(s, m, &p),
        m if super::filters::METHODS.contains(&m) => super::filters::call(s, m, &p, ctx.client),
        // Unknown unless faults.debug_rpc is on (loopback only).
        m if m.starts_with("debug_") => s.pipeline.debug(m, params),
        _ => Err(RpcError::method_not_found(method)),
    }
}

fn base_fee(s: &RpcState) -> u64 {
    s.store.head_block().block.header.base_fee
}

async fn pending_nonce(s: &RpcState, address: Address) -> Result<Option<u64>, RpcError> {
    s.pipeline.pending_nonce(address).await
}

/// EIP-7966's timeout error: admitted, no receipt within the wait.
const SYNC_TIMEOUT: i64 = 4;
/// EIP-7966's nonce-gap error: not admitted, the expected nonce as data.
const SYNC_NONCE_GAP: i64 = 6;

/// `eth_sendRawTransactionSync` (EIP-7966): submits, refusing a nonce gap
/// (code 6, the expected nonce as data) rather than holding it, then waits
/// for the receipt until the call's timeout (milliseconds, a number or a
/// quantity; missing, zero or above `rpc.send_sync_max_timeout_ms`: the
/// default) and answers it, or code 4 with the hash.
async fn send_sync(s: &RpcState, p: &Params<'_>) -> Result<Value, RpcError> {
    let raw = p.bytes(0)?;
    let asked = match p.opt(1) {
        None => 0,
        Some(v) => {
            v.as_u64().map_or_else(|| params::quantity_u64(v), Ok).map_err(|e| RpcError::invalid_arg(1, e))?
        }
    };
    let ms = if asked == 0 || asked > s.limits.send_sync_max_timeout_ms {
        s.limits.send_sync_timeout_ms
    } else {
        asked
    };
    let hash = match s.pipeline.admit_one(raw, false).await {
        Ok(hash) => hash,
        Err(e @ sluice_txpool::TxError::NonceTooHigh { next, .. }) => {
            return Err(RpcError { code: SYNC_NONCE_GAP, message: e.to_string(), data: Some(hex_u64(next)) })
        }
        Err(e) => return Err(e.into()),
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(ms);
    let mut heads = s.events.heads();
    loop {
        if let Some((b, i)) = s.store.transaction(&hash) {
            if let Some(r) = b.receipts.get(i) {
                return Ok(format::receipt(&b, r, format::first_log_index(&b, i)));
            }
        }
        // Woken by each committed block (or the timeout): nothing polls.
        match tokio::time::timeout_at(deadline, heads.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(RpcError::new(SERVER_ERROR, "node is shutting down")),
            Err(_) => {
                return Err(RpcError {
                    code: SYNC_TIMEOUT,
                    message: format!(
                        "the transaction was added to the transaction pool but wasn't processed in {ms}ms"
                    ),
                    data: Some(json!(hash)),
                })
            }
        }
    }
}

/// The applied transaction at receipt index `i` of a committed block.
/// The applied transaction at `i` of a committed block, as a transaction
/// object (`None` past the block's end).
pub(crate) fn committed_tx(b: &StoredBlock, i: usize) -> Option<Value> {
    let r = b.receipts.get(i)?;
    let raw = b.raw_tx(i)?;
    let tx = sluice_txpool::decode_envelope(raw, r.tx_hash).ok()?;
    let recovered = RecoveredTx { hash: r.tx_hash, raw: raw.clone(), tx, sender: r.from };
    let at = TxPosition {
        block_hash: b.block.hash,
        block_number: b.block.header.number,
        index: r.index,
        base_fee: b.block.header.base_fee,
        timestamp: b.block.header.timestamp,
    };
    Some(format::transaction(&recovered, Some(at)))
}

fn block_json(b: &StoredBlock, full: bool) -> Value {
    let txs = if full {
        (0..b.receipts.len()).filter_map(|i| committed_tx(b, i)).collect()
    } else {
        b.receipts.iter().map(|r| json!(r.tx_hash)).collect()
    };
    format::block(b, txs)
}

fn fee_history(s: &RpcState, p: &Params<'_>) -> Result<Value, RpcError> {
    let count = params::quantity_u64(p.req(0)?).map_err(|e| RpcError::invalid_arg(0, e))?;
    let count = count.min(s.limits.max_fee_history_blocks);
    let head = s.store.head();
    let newest = match p.block(1)? {
        BlockId::Latest | BlockId::Pending => head,
        BlockId::Earliest => s.store.oldest_block(),
        BlockId::Number(n) if n <= head => n,
        BlockId::Number(_) => return Err(RpcError::new(SERVER_ERROR, "request beyond head block")),
        BlockId::Hash(h) => find_block(s, BlockId::Hash(h))?
            .map(|b| b.block.header.number)
            .ok_or_else(|| RpcError::new(SERVER_ERROR, "header not found"))?,
    };
    let percentiles: Option<Vec<f64>> = match p.opt(2) {
        None => None,
        Some(v) => {
            let list: Vec<f64> =
                serde_json::from_value(v.clone()).map_err(|e| RpcError::invalid_arg(2, e))?;
            if list.len() > 100
                || list.iter().any(|x| !(0.0..=100.0).contains(x))
                || list.windows(2).any(|w| w[0] > w[1])
            {
                return Err(RpcError::invalid_arg(2, "invalid reward percentiles"));
            }
            Some(list)
        }
    };
    if count == 0 {
        return Ok(json!({"oldestBlock": hex_u64(0), "baseFeePerGas": [], "gasUsedRatio": []}));
    }
    // Only kept blocks: a full node's window starts at its oldest.
    let oldest = newest.saturating_sub(count - 1).max(s.store.oldest_block().min(newest));
    let mut base_fees = Vec::new();
    let mut ratios = Vec::new();
    let mut rewards = Vec::new();
    let mut last_fee = base_fee(s);
    for n in oldest..=newest {
        let Some(b) = s.store.try_block(n)? else { break };
        let h = &b.block.header;
        last_fee = h.base_fee;
        base_fees.push(hex_u64(h.base_fee));
        ratios.push(json!(if h.gas_limit == 0 { 0.0 } else { b.gas_used as f64 / h.gas_limit as f64 }));
        if let Some(pcts) = &percentiles {
            rewards.push(Value::Array(block_rewards(&b, pcts)));
        }
    }
    // The next block's base fee: constant in sluice.
    base_fees.push(hex_u64(last_fee));
    let mut out = json!({"oldestBlock": hex_u64(oldest), "baseFeePerGas": base_fees, "gasUsedRatio": ratios});
    if percentiles.is_some() {
        out["reward"] = Value::Array(rewards);
    }
    Ok(out)
}

/// Tips at the given percentiles of gas used, as geth computes them.
fn block_rewards(b: &StoredBlock, pcts: &[f64]) -> Vec<Value> {
    let base = u128::from(b.block.header.base_fee);
    let mut tips: Vec<(u128, u64)> =
        b.receipts.iter().map(|r| (r.effective_gas_price.saturating_sub(base), r.gas_used)).collect();
    if tips.is_empty() {
        return pcts.iter().map(|_| hex_u64(0)).collect();
    }
    tips.sort_unstable();
    let total: u64 = tips.iter().map(|t| t.1).sum();
    let mut out = Vec::with_capacity(pcts.len());
    let (mut i, mut sum) = (0usize, tips[0].1);
    for pct in pcts {
        let threshold = (total as f64 * pct / 100.0) as u64;
        while sum < threshold && i + 1 < tips.len() {
            i += 1;
            sum += tips[i].1;
        }
        out.push(hex_u128(tips[i].0));
    }
    out
}

/// geth's `txpool_content` shape: sender -> nonce (decimal) -> transaction.
fn by_sender(txs: Vec<RecoveredTx>) -> Value {
    let mut out: std::collections::BTreeMap<Address, serde_json::Map<String, Value>> = Default::default();
    for tx in txs {
        out.entry(tx.sender).or_default().insert(tx.nonce().to_string(), format::transaction(&tx, None));
    }
    json!(out)
}
