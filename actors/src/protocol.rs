//! The envelopes that cross mailboxes: one enum per actor, each variant a
//! named-field message. Payloads are `sluice-messages` data; replies travel
//! on a oneshot channel carried by the request, so a caller that gave up
//! (a closed HTTP connection) costs the actor nothing.

// Transactions travel by value: boxing them would add an allocation per
// transaction on the hottest path, while a mailbox slot of ~500 bytes times
// a bounded capacity is a small, fixed cost.
#![allow(clippy::large_enum_variant)]

use std::{sync::Arc, time::Instant};

use alloy_primitives::{Address, U256};
use sluice_messages::{ExecutedBlock, PreparedBlock, RecoveredTx, SealedBlock};
use sluice_txpool::TxError;
use tokio::sync::oneshot;

/// A sender's committed account as admission read it, outside the nonce
/// actor's serialized section.
#[derive(Debug, Clone, Copy)]
pub struct CommittedAccount {
    /// Committed height the values were read at.
    pub height: u64,
    /// Committed nonce.
    pub nonce: u64,
    /// Committed balance.
    pub balance: U256,
}

/// Messages to the nonce reservation actor.
#[derive(Debug)]
pub enum NonceMsg {
    /// Admit a statelessly valid transaction: reserve its nonce, take pool
    /// capacity, forward it to its mempool shard.
    Admit {
        /// The transaction, sender recovered.
        tx: RecoveredTx,
        /// The sender's committed account, read before sending.
        committed: CommittedAccount,
        /// When admission received it (for the reservation latency metric).
        received: Instant,
        /// Ok once the transaction is in its shard's mailbox.
        reply: oneshot::Sender<Result<(), TxError>>,
    },
    /// A block was committed: these senders have fewer transactions in
    /// flight.
    Executed {
        /// The committed height.
        height: u64,
        /// Each sender of the block.
        senders: Vec<SenderProgress>,
    },
    /// An admitted transaction was lost before any block carried it (an
    /// injected `drop` in a mempool shard): it no longer holds its
    /// reservation.
    Dropped {
        /// Its sender.
        address: Address,
        /// Its nonce.
        nonce: u64,
    },
    /// The next nonce a sender can use (`eth_getTransactionCount pending`).
    PendingNonce {
        /// The sender.
        address: Address,
        /// `None` when the sender has nothing in flight (use the committed nonce).
        reply: oneshot::Sender<Option<u64>>,
    },
}

/// What one block did for one sender.
#[derive(Debug, Clone, Copy)]
pub struct SenderProgress {
    /// The sender.
    pub address: Address,
    /// Its transactions in the block, applied or skipped.
    pub count: u32,
    /// Its nonce after the block.
    pub nonce: u64,
}

/// Messages to a mempool shard.
#[derive(Debug)]
pub enum ShardMsg {
    /// Append an admitted transaction (capacity was already taken).
    Insert {
        /// The transaction.
        tx: RecoveredTx,
    },
    /// Take transactions from the front for a block.
    Take {
        /// At most this many.
        max_txs: usize,
        /// Whose gas limits sum to at most this.
        gas_budget: u64,
        /// Whose raw sizes sum to at most this.
        max_bytes: usize,
        /// The transactions, in shard order.
        reply: oneshot::Sender<Vec<RecoveredTx>>,
    },
}

/// Messages to the block producer.
#[derive(Debug)]
pub enum ProducerMsg {
    /// The mempool holds a full block: seal now rather than at the next tick.
    Wake,
    /// Shutdown: seal everything left in the mempool, then stop.
    Flush {
        /// Answered when the last block has been handed to preparation.
        reply: oneshot::Sender<()>,
    },
}

/// Messages to block preparation.
#[derive(Debug)]
pub struct PrepareMsg {
    /// The sealed block to prepare.
    pub block: Arc<SealedBlock>,
    /// When it was sealed.
    pub sealed_at: Instant,
}

/// Messages to the finalizer.
#[derive(Debug)]
pub struct ExecuteMsg {
    /// The prepared block to execute next.
    pub block: PreparedBlock,
}

/// Messages to store commit.
#[derive(Debug)]
pub struct CommitMsg {
    /// The executed block to make durable.
    pub block: ExecutedBlock,
    /// The block's senders, for the nonce actor.
    pub senders: Vec<SenderProgress>,
}
