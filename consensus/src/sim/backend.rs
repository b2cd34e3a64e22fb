//! [`SimBackend`]: the in-process pipeline behind one simulated validator,
//! in place of the node's actors (see the module doc of `sim`).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
    time::Duration,
};

use alloy_primitives::{Address, Bytes, B256};
use commonware_runtime::deterministic;
use parking_lot::Mutex;
use sluice_executor::{BlockExecutor as _, ExecConfig, SequentialExecutor};
use sluice_messages::{BlockHeader, ExecutedBlock, PreparedBlock, RecoveredTx, SealedBlock};
use sluice_store::{Genesis, Halt, StateReader as _, Store};
use sluice_txpool::PreparedTxCache;
use tokio::sync::watch;

use super::{
    chain::{rules, BASE_FEE, CHAIN_ID, GAS_LIMIT},
    checks::Recorder,
};
use crate::{
    backend::{Backend, BuildRequest, Built, FinalizedItem, OnCommit, PipelineClosed},
    block::tx_root,
};

/// The in-process pipeline behind one simulated validator.
#[derive(Clone)]
pub(crate) struct SimBackend {
    node: usize,
    ctx: Arc<deterministic::Context>,
    /// How long building a proposal takes, as the producer fills a block
    /// for up to `producer.block_time_ms` (zero: at once).
    block_time: Duration,
    mempool: Arc<Mutex<VecDeque<RecoveredTx>>>,
    /// Admitted and not yet committed (in the pool or a proposal): what
    /// the actors' in-flight index makes `already known`.
    pending: Arc<Mutex<HashSet<B256>>>,
    /// Each sender's next nonce as this node's admission knows it.
    next_nonce: Arc<Mutex<HashMap<Address, u64>>>,
    /// What this node's clients sent, for the other validators.
    outbound: (flume::Sender<Bytes>, flume::Receiver<Bytes>),
    pub(super) store: Arc<Store>,
    heads: Arc<watch::Sender<u64>>,
    recorder: Recorder,
    exec: ExecConfig,
}

impl SimBackend {
    /// Node `node`'s pipeline on a fresh store from `genesis`; with
    /// `diverge_at`, its execution disagrees from that height on.
    pub(super) fn new(
        node: usize,
        ctx: deterministic::Context,
        block_time: Duration,
        genesis: &Genesis,
        recorder: Recorder,
        diverge_at: Option<u64>,
    ) -> Self {
        let (heads, _) = watch::channel(0);
        SimBackend {
            node,
            ctx: Arc::new(ctx),
            block_time,
            mempool: Arc::default(),
            pending: Arc::default(),
            next_nonce: Arc::default(),
            outbound: flume::unbounded(),
            // As if this node's execution disagreed from that height on.
            store: Arc::new(Store::new(genesis).with_divergence_at(diverge_at.unwrap_or(0))),
            heads: Arc::new(heads),
            recorder,
            exec: ExecConfig { chain_id: CHAIN_ID, spec: sluice_messages::Spec::Osaka },
        }
    }

    /// Admits a transaction from this node's client into its mempool,
    /// and queues it for the other validators.
    pub(crate) fn submit(&self, tx: RecoveredTx) {
        if !self.pending.lock().insert(tx.hash) {
            return;
        }
        let mut next = self.next_nonce.lock();
        let after = next.get(&tx.sender).copied().unwrap_or(0).max(tx.nonce() + 1);
        next.insert(tx.sender, after);
        drop(next);
        let _ = self.outbound.0.send(tx.raw.clone());
        self.mempool.lock().push_back(tx);
    }

    fn execute(&self, block: &Arc<SealedBlock>) -> Option<(ExecutedBlock, B256)> {
        let cache = PreparedTxCache::new(16);
        let txs = sluice_txpool::prepare_block(&block.txs, &cache, CHAIN_ID, 1);
        let prepared = PreparedBlock { block: Arc::clone(block), txs };
        let outcome = SequentialExecutor::new(self.exec).execute(&*self.store, &prepared).ok()?;
        let positions: HashMap<B256, u32> =
            prepared.txs.iter().enumerate().map(|(i, t)| (t.hash(), i as u32)).collect();
        let raw_index =
            outcome.receipts.iter().map(|r| positions.get(&r.tx_hash).copied().unwrap_or(0)).collect();
        let executed = ExecutedBlock {
            block: Arc::clone(block),
            receipts: outcome.receipts,
            raw_index,
            skipped: outcome.skipped,
            gas_used: outcome.gas_used,
            changes: Arc::new(outcome.changes),
            app_hash: B256::ZERO,
        };
        match self.store.commit(&executed) {
            Ok(info) => Some((executed, info.app_hash)),
            Err(_) => None,
        }
    }
}

impl Backend for SimBackend {
    async fn build(&self, req: BuildRequest) -> Option<Built> {
        if !self.block_time.is_zero() {
            use commonware_runtime::Clock as _;
            self.ctx.sleep(self.block_time).await;
        }
        let txs: Vec<RecoveredTx> = {
            // As the actors' shards do: what the chain being extended
            // already holds is passed over and kept (the ancestry may lose
            // its height).
            let mut pool = self.mempool.lock();
            let mut taken = Vec::new();
            pool.retain(|tx| {
                let take = taken.len() < rules().max_block_txs && !req.exclude.contains(&tx.hash);
                if take {
                    taken.push(tx.clone());
                }
                !take
            });
            taken
        };
        let raws: Vec<Bytes> = txs.iter().map(|t| t.raw.clone()).collect();
        let header = BlockHeader {
            number: req.parent.number + 1,
            parent_hash: req.parent.hash,
            timestamp: req.timestamp,
            coinbase: Address::ZERO,
            gas_limit: GAS_LIMIT,
            base_fee: BASE_FEE,
            tx_root: tx_root(&raws),
            state_ref: Some(req.state_ref),
        };
        let block = Arc::new(SealedBlock { hash: header.hash(), header, txs: raws });
        Some(Built { block, txs })
    }

    async fn restore(&self, txs: Vec<RecoveredTx>) {
        let mut pool = self.mempool.lock();
        for tx in txs.into_iter().rev() {
            pool.push_front(tx);
        }
    }

    async fn deliver(&self, block: Arc<SealedBlock>, on_commit: OnCommit) -> Result<(), PipelineClosed> {
        if self.store.halted().is_some() {
            return Err(PipelineClosed);
        }
        if let Some((executed, app_hash)) = self.execute(&block) {
            // As the actors' committer does: a committed transaction
            // leaves this pool wherever it is queued.
            let done: HashSet<B256> = executed
                .receipts
                .iter()
                .map(|r| r.tx_hash)
                .chain(executed.skipped.iter().map(|(h, _)| *h))
                .collect();
            self.mempool.lock().retain(|tx| !done.contains(&tx.hash));
            self.pending.lock().retain(|h| !done.contains(h));
            self.recorder.committed(self.node, &executed, app_hash);
            self.heads.send_replace(block.header.number);
            on_commit();
        }
        Ok(())
    }

    fn committed(&self) -> watch::Receiver<u64> {
        self.heads.subscribe()
    }

    async fn outbound(&self, max_txs: usize, max_bytes: usize) -> Vec<Bytes> {
        let Ok(first) = self.outbound.1.recv_async().await else { return Vec::new() };
        let mut bytes = first.len() + 4;
        let mut batch = vec![first];
        // Unbounded here: a transaction that would not fit waits at the
        // front by being taken only when it fits (sizes are uniform).
        while batch.len() < max_txs && bytes + 200 <= max_bytes {
            let Ok(tx) = self.outbound.1.try_recv() else { break };
            bytes += tx.len() + 4;
            batch.push(tx);
        }
        batch
    }

    async fn admit_from_peer(&self, txs: Vec<Bytes>) {
        for raw in txs {
            let Ok(tx) = sluice_txpool::recover_raw(raw) else { continue };
            let committed = self.store.account(&tx.sender).ok().flatten().map_or(0, |a| a.nonce);
            // As the nonce actor does for a peer's transactions: a gap
            // (an earlier nonce this node never got) is refused, not held.
            let mut next = self.next_nonce.lock();
            let expected = next.get(&tx.sender).copied().unwrap_or(0).max(committed);
            if tx.nonce() < committed || tx.nonce() > expected || !self.pending.lock().insert(tx.hash) {
                continue;
            }
            next.insert(tx.sender, expected.max(tx.nonce() + 1));
            self.mempool.lock().push_back(tx);
        }
    }

    fn committed_block(&self, height: u64) -> Option<(B256, B256)> {
        if height > self.store.head() {
            return None;
        }
        self.store.block(height).map(|b| (b.block.hash, b.app_hash))
    }

    fn halted(&self) -> Option<Halt> {
        self.store.halted()
    }

    fn halt(&self, halt: Halt) {
        self.store.halt(halt);
    }

    fn finalized(&self, _height: u64) {}

    fn publish_finalized(&self, _item: FinalizedItem) {}
}
