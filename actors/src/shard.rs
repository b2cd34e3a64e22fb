//! A mempool shard: a FIFO of admitted transactions for the senders that
//! map to it, so each sender's transactions keep their order.
//!
//! Capacity is taken by the nonce actor before a transaction is forwarded
//! here and released when the producer takes it, so the shard never refuses
//! an insert and the pool as a whole never exceeds its limits.

use std::{sync::Arc, time::Instant};

use actix::prelude::*;
use sluice_txpool::{MempoolShard, PoolCounters};

use crate::{
    mailbox::MailboxReceiver,
    metrics::{self as m, ActorMetrics},
    protocol::ShardMsg,
};

/// One mempool shard actor.
pub struct ShardActor {
    index: usize,
    pool: MempoolShard,
    counters: Arc<PoolCounters>,
    rx: Option<MailboxReceiver<ShardMsg>>,
    metrics: ActorMetrics,
    depth: metrics::Gauge,
}

impl ShardActor {
    /// Shard number `index` around its mailbox.
    pub fn new(index: usize, counters: Arc<PoolCounters>, rx: MailboxReceiver<ShardMsg>) -> Self {
        ShardActor {
            index,
            pool: MempoolShard::new(),
            counters,
            rx: Some(rx),
            metrics: ActorMetrics::new("mempool_shard"),
            depth: metrics::gauge!(m::MEMPOOL_SHARD_TXS, "shard" => index.to_string()),
        }
    }
}

impl Actor for ShardActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(rx) = self.rx.take() {
            ctx.add_stream(rx.into_stream());
        }
    }
}

impl StreamHandler<ShardMsg> for ShardActor {
    fn handle(&mut self, msg: ShardMsg, _ctx: &mut Context<Self>) {
        let start = Instant::now();
        match msg {
            ShardMsg::Insert { tx } => {
                if let Err(e) = self.pool.push(tx) {
                    // Unreachable while capacity is taken before forwarding;
                    // logged rather than lost silently.
                    tracing::error!(shard = self.index, error = %e, "mempool shard refused an admitted transaction");
                }
            }
            ShardMsg::Take { max_txs, gas_budget, max_bytes, reply } => {
                let txs = self.pool.take(max_txs, gas_budget, max_bytes);
                let bytes = txs.iter().map(|t| t.raw.len()).sum();
                self.counters.release(txs.len(), bytes);
                if let Err(txs) = reply.send(txs) {
                    // The producer went away mid-request (shutdown): put the
                    // transactions back in front, in order.
                    tracing::warn!(
                        shard = self.index,
                        n = txs.len(),
                        "block producer dropped a take; restoring"
                    );
                    let n = txs.len();
                    let bytes: usize = txs.iter().map(|t| t.raw.len()).sum();
                    self.pool.restore_front(txs);
                    self.counters.force_acquire(n, bytes);
                }
            }
        }
        self.depth.set(self.pool.len() as f64);
        self.metrics.handled(start);
    }
}
