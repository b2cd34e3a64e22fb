//! What a validator's consensus and its pipeline hand each other when a
//! block is proposed and delivered: plain data that both reach without
//! depending on each other.

use std::{fmt, sync::Arc};

use alloy_primitives::B256;

use crate::{RecoveredTx, SealedBlock};

/// The block a proposal builds on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    /// Its height.
    pub number: u64,
    /// Its hash.
    pub hash: B256,
    /// Its timestamp, seconds.
    pub timestamp: u64,
}

/// A sealed proposal.
#[derive(Debug, Clone)]
pub struct Built {
    /// The block.
    pub block: Arc<SealedBlock>,
    /// Its transactions with their senders, in block order: put back in
    /// the mempool if the proposal loses its height.
    pub txs: Vec<RecoveredTx>,
}

/// A finalized block with its finalization certificate, as consensus
/// encodes both: what every node serves on its finalized-block feed, so
/// that a follower can check the certificate against the validator set and
/// the block against the certificate without trusting the node that served
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizedItem {
    /// The block's height.
    pub height: u64,
    /// The finalization certificate (consensus's encoding).
    pub finalization: alloy_primitives::Bytes,
    /// The block (consensus's encoding).
    pub block: alloy_primitives::Bytes,
}

/// Called once, when a delivered block is committed by the store and
/// published (durable per the sync policy, served by RPC).
pub type OnCommit = Box<dyn FnOnce() + Send>;

/// The pipeline stopped: nothing more can be delivered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineClosed;

impl fmt::Display for PipelineClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the execution pipeline stopped")
    }
}

impl std::error::Error for PipelineClosed {}
