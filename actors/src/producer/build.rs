//! The producer's work on the mempool shards, as plain async functions:
//! taking one block's transactions, sealing a header over them, and putting
//! transactions back.

use std::time::{SystemTime, UNIX_EPOCH};

use sluice_messages::{BlockHeader, RecoveredTx, SealedBlock, StateRef};
use tokio::sync::oneshot;

use super::ProducerSettings;
use crate::{
    mailbox::MailboxSender,
    nonce::NonceActor,
    protocol::{Parent, ShardMsg},
};

/// Takes up to one block of transactions from the shards, visiting them
/// from `first` on.
pub(super) async fn take_block(
    shards: &[MailboxSender<ShardMsg>],
    first: usize,
    s: &ProducerSettings,
) -> Vec<RecoveredTx> {
    let mut txs: Vec<RecoveredTx> = Vec::with_capacity(s.max_block_txs.min(8192));
    let (mut gas, mut bytes) = (s.block_gas_limit, s.max_block_bytes);
    for k in 0..shards.len() {
        let room = s.max_block_txs - txs.len();
        if room == 0 {
            break;
        }
        let shard = &shards[(first + k) % shards.len()];
        let (reply, rx) = oneshot::channel();
        let take = ShardMsg::Take { max_txs: room, gas_budget: gas, max_bytes: bytes, reply };
        if shard.send(take).await.is_err() {
            continue;
        }
        if let Ok(got) = rx.await {
            for tx in &got {
                gas -= tx.gas_limit();
                bytes -= tx.raw.len();
            }
            txs.extend(got);
        }
    }
    txs
}

/// Puts transactions back at the front of their senders' shards, in order
/// (each shard's share keeps block order, which is its nonce order).
/// Waits for room: a shard never waits on the producer, so this ends.
pub(super) async fn restore_to_shards(shards: &[MailboxSender<ShardMsg>], txs: Vec<RecoveredTx>) {
    if shards.is_empty() || txs.is_empty() {
        return;
    }
    let mut split: Vec<Vec<RecoveredTx>> = vec![Vec::new(); shards.len()];
    for tx in txs {
        split[NonceActor::shard_of(&tx.sender, shards.len())].push(tx);
    }
    for (shard, txs) in shards.iter().zip(split) {
        if txs.is_empty() {
            continue;
        }
        let n = txs.len();
        if shard.send(ShardMsg::Restore { txs }).await.is_err() {
            tracing::error!(n, "mempool shard stopped; restored transactions lost");
        }
    }
}

/// The wall-clock timestamp for a block on `parent`: never before the
/// parent, even if the clock steps back.
pub(super) fn wall_clock_timestamp(parent: &Parent) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    now.max(parent.timestamp)
}

/// Seals a header over the transactions.
pub(super) fn build_block(
    parent: &Parent,
    s: &ProducerSettings,
    txs: &[RecoveredTx],
    timestamp: u64,
    state_ref: Option<StateRef>,
) -> SealedBlock {
    let mut hashes = Vec::with_capacity(txs.len() * 32);
    for tx in txs {
        hashes.extend_from_slice(tx.hash.as_slice());
    }
    let header = BlockHeader {
        number: parent.number + 1,
        parent_hash: parent.hash,
        timestamp,
        coinbase: s.coinbase,
        gas_limit: s.block_gas_limit,
        base_fee: s.base_fee,
        tx_root: sluice_messages::keccak256(&hashes),
        state_ref,
    };
    SealedBlock { hash: header.hash(), header, txs: txs.iter().map(|t| t.raw.clone()).collect() }
}
