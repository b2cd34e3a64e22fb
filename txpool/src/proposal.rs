//! The stateless checks a validator applies to every transaction of a
//! proposal before voting for it.
//!
//! A block's transactions are raw EIP-2718 bytes the proposer chose; a
//! Byzantine proposer could fill one with 16 MiB of bytes that do not
//! decode, are not signed, are for another chain or cannot pay their
//! intrinsic gas, which every validator would then store and skip. Such a
//! block is refused here, as geth and CometBFT refuse a block with an
//! invalid transaction. State (nonce, balance) is not looked at: it is not
//! final until execution, which skips what state makes inapplicable.
//!
//! An honest proposal always passes: its proposer admitted each of its
//! transactions with [`admit_stateless`](crate::admit_stateless) under the
//! same chain rules ([`AdmissionRules::for_proposals`] are the node's
//! admission rules), and [`select`](crate::select) packs a block by declared
//! gas limit, never past the block gas limit.

use alloy_consensus::{Transaction, TxEnvelope};
use alloy_primitives::Bytes;
use sluice_messages::block_size::{block_rlp_size, MAX_RLP_BLOCK_SIZE};

use crate::{
    cache::{par_map, MIN_RECOVERIES_PER_WORKER},
    error::TxError,
    recover::{decode_envelope, recover_sender},
    validate::{check_decoded, AdmissionRules},
};

/// Why a proposal's transactions are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalError {
    /// One transaction breaks a stateless admission rule.
    #[error("transaction {index}: {error}")]
    Tx {
        /// Its position in the block.
        index: usize,
        /// The rule it breaks, as admission words it.
        error: TxError,
    },
    /// The declared gas limits of the transactions up to `index` already
    /// sum past the block gas limit.
    #[error("transactions 0..={index} declare {declared} gas, over the block gas limit {limit}")]
    GasOverBlock {
        /// The first transaction that no longer fits.
        index: usize,
        /// The declared gas of the transactions up to it.
        declared: u64,
        /// The block gas limit.
        limit: u64,
    },
    /// The same transaction (by hash) twice: an honest proposer's pool
    /// holds each once, and every copy after the first would be stored and
    /// skipped by every validator.
    #[error("transaction {index} repeats transaction {first}")]
    Duplicate {
        /// The repeat's position in the block.
        index: usize,
        /// The first copy's position.
        first: usize,
    },
    /// The block's RLP size is past EIP-7934's cap (Osaka on).
    #[error("block RLP-encoded size {size} exceeds maximum {limit}")]
    BlockOversized {
        /// The block's size as [`block_rlp_size`] counts it.
        size: usize,
        /// [`MAX_RLP_BLOCK_SIZE`].
        limit: usize,
    },
}

impl ProposalError {
    /// A short label for the refusal metric: admission's outcome label of
    /// the transaction's error, or `block_gas`.
    pub fn reason(&self) -> &'static str {
        match self {
            ProposalError::Tx { error, .. } => error.outcome(),
            ProposalError::GasOverBlock { .. } => "block_gas",
            ProposalError::BlockOversized { .. } => "block_size",
            ProposalError::Duplicate { .. } => "duplicate",
        }
    }
}

/// Every label [`ProposalError::reason`] can answer (for zeroed metrics).
pub const PROPOSAL_REFUSAL_REASONS: [&str; 13] = [
    "oversized",
    "invalid",
    "type_not_supported",
    "unprotected",
    "chain_id",
    "gas_limit",
    "intrinsic_gas",
    "tip_above_cap",
    "underpriced",
    "invalid_sender",
    "block_gas",
    "block_size",
    "duplicate",
];

/// Checks a proposal's transactions in block order: each decodes exactly
/// (no trailing bytes, no blob or unknown type) and keeps every stateless
/// admission rule under `rules` (size, type, EIP-155 chain id, gas limit
/// and intrinsic gas with its floor, init code size, tip and fee cap),
/// their declared gas limits sum to at most the block gas limit, the block
/// is within EIP-7934's RLP size cap (Osaka on), and every sender recovers.
///
/// Cheap checks run first over the whole block, so junk costs no
/// recovery; the senders (~40 us each) are then recovered over up to
/// `workers` threads, as block preparation recovers them.
pub fn check_proposal_txs(
    raws: &[Bytes],
    rules: &AdmissionRules,
    workers: usize,
) -> Result<(), ProposalError> {
    if rules.spec.has_osaka_caps() {
        // The producer packs within the same count (`select`), so an
        // honest proposal is never refused here.
        let size = block_rlp_size(raws.iter().map(|raw| raw.as_ref()));
        if size > MAX_RLP_BLOCK_SIZE {
            return Err(ProposalError::BlockOversized { size, limit: MAX_RLP_BLOCK_SIZE });
        }
    }
    let mut decoded: Vec<TxEnvelope> = Vec::with_capacity(raws.len());
    let mut seen: alloy_primitives::map::B256Map<usize> = Default::default();
    let mut declared = 0u64;
    for (index, raw) in raws.iter().enumerate() {
        let tx = check_unsigned(raw, rules).map_err(|error| ProposalError::Tx { index, error })?;
        if let Some(&first) = seen.get(tx.tx_hash()) {
            return Err(ProposalError::Duplicate { index, first });
        }
        seen.insert(*tx.tx_hash(), index);
        declared = declared.saturating_add(tx.gas_limit());
        if declared > rules.block_gas_limit {
            return Err(ProposalError::GasOverBlock { index, declared, limit: rules.block_gas_limit });
        }
        decoded.push(tx);
    }
    let senders = par_map(&decoded, workers, MIN_RECOVERIES_PER_WORKER, recover_sender);
    match senders.into_iter().enumerate().find_map(|(index, s)| s.err().map(|error| (index, error))) {
        Some((index, error)) => Err(ProposalError::Tx { index, error }),
        None => Ok(()),
    }
}

/// Size, exact decoding and the rules that need no sender.
fn check_unsigned(raw: &Bytes, rules: &AdmissionRules) -> Result<TxEnvelope, TxError> {
    if raw.len() > rules.max_tx_size_bytes {
        return Err(TxError::Oversized { size: raw.len(), limit: rules.max_tx_size_bytes });
    }
    let tx = decode_envelope(raw, sluice_messages::keccak256(raw))?;
    check_decoded(&tx, rules)?;
    Ok(tx)
}

#[cfg(test)]
#[path = "proposal_tests.rs"]
mod tests;
