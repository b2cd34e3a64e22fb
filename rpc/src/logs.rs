//! Log queries: `eth_getLogs`, and the filter object and limits that log
//! filters (`eth_newFilter`, [`super::filters`]) and the `logs`
//! subscription share with it. Limits, from config: the widest block range
//! (`rpc.max_logs_block_range`) and the most logs per answer
//! (`rpc.max_logs_results`), both answered -32005 as geth words them.

use alloy_primitives::B256;
use serde_json::{Map, Value};
use sluice_messages::LogCriteria;
use sluice_store::LogFilter;

use super::{
    error::{RpcError, LIMIT_EXCEEDED, SERVER_ERROR},
    format,
    params::{self, BlockId},
    RpcState,
};

/// One end of a block range. `latest` is kept as [`End::Head`] and resolved
/// when the query runs, so a filter made with it follows the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The committed head when the query runs (`latest`, `pending`, absent).
    Head,
    /// The oldest block kept when the query runs (`earliest`: 0 until a
    /// full node prunes, as geth's history cutoff).
    Earliest,
    /// A height.
    Number(u64),
}

impl End {
    fn at(self, head: u64, oldest: u64) -> u64 {
        match self {
            End::Head => head,
            End::Earliest => oldest,
            End::Number(n) => n,
        }
    }
}

/// The blocks a log filter covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocks {
    /// `fromBlock` ..= `toBlock`.
    Range {
        /// First block.
        from: End,
        /// Last block.
        to: End,
    },
    /// The one block named by `blockHash`.
    Hash(B256),
}

/// A parsed log filter object (`{fromBlock, toBlock, blockHash, address,
/// topics}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogQuery {
    /// Which blocks.
    pub(crate) blocks: Blocks,
    /// Which logs of those blocks.
    pub(crate) criteria: LogCriteria,
}

impl LogQuery {
    /// Parses parameter `arg`, refusing what geth refuses.
    pub(crate) fn parse(filter: &Value, arg: usize) -> Result<Self, RpcError> {
        let o = filter.as_object().ok_or_else(|| RpcError::invalid_arg(arg, "expected a filter object"))?;
        let end = |v: Option<&Value>| -> Result<End, RpcError> {
            match v.filter(|v| !v.is_null()) {
                None => Ok(End::Head),
                Some(v) => match params::block_id(v).map_err(|e| RpcError::invalid_arg(arg, e))? {
                    BlockId::Latest | BlockId::Pending => Ok(End::Head),
                    BlockId::Earliest => Ok(End::Earliest),
                    BlockId::Number(n) => Ok(End::Number(n)),
                    BlockId::Hash(_) => Err(RpcError::invalid_arg(arg, "use blockHash for a block hash")),
                },
            }
        };
        let blocks = if let Some(h) = o.get("blockHash").filter(|v| !v.is_null()) {
            if o.contains_key("fromBlock") || o.contains_key("toBlock") {
                return Err(RpcError::invalid_arg(
                    arg,
                    "cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other",
                ));
            }
            Blocks::Hash(params::hash(h).map_err(|e| RpcError::invalid_arg(arg, e))?)
        } else {
            Blocks::Range { from: end(o.get("fromBlock"))?, to: end(o.get("toBlock"))? }
        };
        if let Blocks::Range { from: End::Number(from), to: End::Number(to) } = blocks {
            if from > to {
                return Err(RpcError::invalid_arg(arg, "invalid block range params"));
            }
        }
        Ok(LogQuery { blocks, criteria: log_criteria(o, arg)? })
    }

    /// The heights covered now, `from ..= to`.
    pub(crate) fn range(&self, s: &RpcState) -> Result<(u64, u64), RpcError> {
        let (head, oldest) = (s.store.head(), s.store.oldest_block());
        let (from, to) = match self.blocks {
            Blocks::Range { from, to } => (from.at(head, oldest), to.at(head, oldest)),
            Blocks::Hash(hash) => {
                let b = s
                    .store
                    .block_by_hash(&hash)
                    .ok_or_else(|| RpcError::new(SERVER_ERROR, "unknown block"))?;
                (b.block.header.number, b.block.header.number)
            }
        };
        if from > to {
            return Err(RpcError::invalid_arg(0, "invalid block range params"));
        }
        Ok((from, to))
    }

    /// The matching logs of blocks `from ..= to`, within the `eth_getLogs`
    /// limits.
    pub(crate) fn logs(&self, s: &RpcState, from: u64, to: u64) -> Result<Value, RpcError> {
        if to - from >= s.limits.max_logs_block_range {
            return Err(RpcError::new(
                LIMIT_EXCEEDED,
                format!("query exceeds max block range {}", s.limits.max_logs_block_range),
            ));
        }
        // A range reaching below the oldest block kept is refused whole, as
        // geth refuses one below its history cutoff: an answer without the
        // pruned blocks' logs would look complete.
        let oldest = s.store.oldest_block();
        // `earliest` follows the window: it may have moved since the range
        // was resolved.
        let from = match self.blocks {
            Blocks::Range { from: End::Earliest, .. } => from.max(oldest),
            _ => from,
        };
        if from < oldest {
            return Err(sluice_store::StoreError::HistoryPruned { block: from, oldest }.into());
        }
        let limit = s.limits.max_logs_results;
        let filter = LogFilter { from, to, criteria: self.criteria.clone() };
        match s.store.logs(&filter, limit) {
            Some(entries) => Ok(Value::Array(entries.iter().map(format::log).collect())),
            None => Err(RpcError::new(LIMIT_EXCEEDED, format!("query returned more than {limit} results"))),
        }
    }
}

/// `eth_getLogs`.
pub(crate) fn get_logs(s: &RpcState, filter: &Value) -> Result<Value, RpcError> {
    let query = LogQuery::parse(filter, 0)?;
    let (from, to) = query.range(s)?;
    query.logs(s, from, to)
}

/// Most addresses a log filter may name (geth's `maxAddresses`).
pub(crate) const MAX_ADDRESSES: usize = 1000;
/// Most topic positions (`LOG4`'s four; geth's `maxTopics`).
pub(crate) const MAX_TOPICS: usize = 4;
/// Most alternatives at one topic position (geth's `maxSubTopics`).
pub(crate) const MAX_SUB_TOPICS: usize = 1000;

/// The `address` and `topics` of a log filter object, parameter `arg`,
/// within geth's bounds and with its messages: more than
/// [`MAX_ADDRESSES`] addresses, [`MAX_TOPICS`] positions or
/// [`MAX_SUB_TOPICS`] alternatives at a position are refused before any
/// is parsed.
pub(crate) fn log_criteria(o: &Map<String, Value>, arg: usize) -> Result<LogCriteria, RpcError> {
    let addresses = match o.get("address").filter(|v| !v.is_null()) {
        None => vec![],
        Some(Value::Array(list)) => {
            if list.len() > MAX_ADDRESSES {
                return Err(RpcError::new(SERVER_ERROR, "exceed max addresses"));
            }
            list.iter()
                .map(params::address)
                .collect::<Result<_, _>>()
                .map_err(|e| RpcError::invalid_arg(arg, e))?
        }
        Some(v) => vec![params::address(v).map_err(|e| RpcError::invalid_arg(arg, e))?],
    };
    let mut topics = Vec::new();
    if let Some(t) = o.get("topics").filter(|v| !v.is_null()) {
        let list = t.as_array().ok_or_else(|| RpcError::invalid_arg(arg, "topics must be an array"))?;
        if list.len() > MAX_TOPICS {
            return Err(RpcError::new(SERVER_ERROR, "exceed max topics"));
        }
        for pos in list {
            topics.push(match pos {
                Value::Null => vec![],
                Value::Array(alts) if alts.len() > MAX_SUB_TOPICS => {
                    return Err(RpcError::new(
                        SERVER_ERROR,
                        "exceed max addresses or topics per search position",
                    ))
                }
                Value::Array(alts) => alts
                    .iter()
                    .map(params::hash)
                    .collect::<Result<_, _>>()
                    .map_err(|e| RpcError::invalid_arg(arg, e))?,
                v => vec![params::hash(v).map_err(|e| RpcError::invalid_arg(arg, e))?],
            });
        }
    }
    Ok(LogCriteria::new(addresses, topics))
}
