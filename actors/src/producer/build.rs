//! The producer's work on the mempool shards, as plain async functions:
//! taking one block's transactions, sealing a header over them, and putting
//! transactions back.

use std::{
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use alloy_primitives::map::B256Set;

use sluice_messages::{BlockHeader, Parent, RecoveredTx, SealedBlock, StateRef};
use sluice_txpool::{select, BlockBudget, Pooled, Selection, RESTORED_SEQ_LIMIT};
use tokio::sync::oneshot;

use super::ProducerSettings;
use crate::{mailbox::MailboxSender, nonce::NonceActor, protocol::ShardMsg};

/// Takes one block of transactions from the shards, in geth's order
/// (effective tip, then admission order, each sender's nonces in order:
/// `sluice_txpool::order`). Every shard offers up to a full block; what the
/// block does not take goes back to the front of its shard, in its order.
/// Transactions in `exclude` (already in the blocks the new one builds on)
/// leave the shards on the way.
pub(super) async fn take_block(
    shards: &[MailboxSender<ShardMsg>],
    s: &ProducerSettings,
    exclude: &Arc<B256Set>,
) -> Vec<RecoveredTx> {
    let budget = BlockBudget {
        max_txs: s.max_block_txs,
        gas: s.block_gas_limit,
        bytes: s.max_block_bytes,
        rlp_bytes: s.max_block_rlp_bytes,
    };
    // Asked all at once: each shard answers on its own thread.
    let mut asked = Vec::with_capacity(shards.len());
    for shard in shards {
        let (reply, rx) = oneshot::channel();
        let take = ShardMsg::Take {
            max_txs: budget.max_txs,
            gas_budget: budget.gas,
            max_bytes: budget.bytes,
            exclude: Arc::clone(exclude),
            reply,
        };
        asked.push(match shard.send(take).await {
            Ok(()) => Some(rx),
            Err(_) => None,
        });
    }
    let mut offered = Vec::with_capacity(shards.len());
    for rx in asked {
        offered.push(match rx {
            Some(rx) => rx.await.unwrap_or_default(),
            None => Vec::new(),
        });
    }
    let Selection { block, leftovers } = select(offered, budget, s.base_fee);
    for (shard, txs) in shards.iter().zip(leftovers) {
        restore(shard, txs).await;
    }
    block
}

/// Puts a shard's transactions back at its front, in their order. Waits
/// for room: a shard never waits on the producer, so this ends.
async fn restore(shard: &MailboxSender<ShardMsg>, txs: Vec<Pooled>) {
    if txs.is_empty() {
        return;
    }
    let n = txs.len();
    if shard.send(ShardMsg::Restore { txs }).await.is_err() {
        tracing::error!(n, "mempool shard stopped; restored transactions lost");
    }
}

/// Puts a block's transactions back at the front of their senders'
/// shards (a proposal that lost its height, a block nobody wants): numbered
/// by their block position, below every admitted number, so the next block
/// takes them first, in their order.
pub(super) async fn restore_to_shards(shards: &[MailboxSender<ShardMsg>], txs: Vec<RecoveredTx>) {
    if shards.is_empty() || txs.is_empty() {
        return;
    }
    let mut split: Vec<Vec<Pooled>> = vec![Vec::new(); shards.len()];
    for (seq, tx) in txs.into_iter().enumerate() {
        let seq = (seq as u64).min(RESTORED_SEQ_LIMIT - 1);
        split[NonceActor::shard_of(&tx.sender, shards.len())].push(Pooled { seq, tx });
    }
    for (shard, txs) in shards.iter().zip(split) {
        restore(shard, txs).await;
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
