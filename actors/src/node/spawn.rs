//! One function per pipeline stage, called by `start_on` (in `mod.rs`) in
//! the order the stages start. Each takes the handles it needs and
//! returns those a later stage needs; none of them decides an order.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64},
        Arc,
    },
    time::Duration,
};

use actix::prelude::*;
use alloy_primitives::Bytes;
use sluice_config::Config;
use sluice_executor::{ExecConfig, ParallelExecutor};
use sluice_rpc::events::ChainEvents;
use sluice_store::{StateReader, Store, StoredBlock};
use sluice_txpool::{AdmissionRules, PendingTxs, PoolCounters, PreparedTxCache};
use tokio::sync::oneshot;

use super::NodeError;
use crate::{
    admission::Admission,
    committer::Committer,
    executor::Executor,
    journal::{Entry, Journal},
    journal_writer::{JournalWriter, PendingFilter},
    mailbox::{mailbox_indexed, MailboxProbe, MailboxReceiver, MailboxSender},
    metrics as m,
    nonce::{NonceActor, NonceDeps},
    port::{Peers, ValidatorPort},
    preparer::Preparer,
    producer::{Parent, Producer, ProducerMode, ProducerSettings},
    protocol::{CommitMsg, ExecuteMsg, NonceMsg, PrepareMsg, ProducerMsg, ShardMsg},
    recovery::{Recovery, Taken},
    shard::ShardActor,
};

/// The journal file in the data dir.
pub const JOURNAL_FILE: &str = "txjournal";

/// The handles several stages hold, made once before any stage starts.
pub(super) struct Shared {
    /// The committed chain.
    pub(super) store: Arc<Store>,
    /// Pool occupancy, bounded at nonce reservation, kept by the shards.
    pub(super) counters: Arc<PoolCounters>,
    /// Transactions recovered at admission, reused by preparation.
    pub(super) cache: Arc<PreparedTxCache>,
    /// Admitted transactions not committed yet (RPC's pending view).
    pub(super) pending: Arc<PendingTxs>,
    /// The last committed height, advanced by commit, read by execution.
    pub(super) committed: Arc<AtomicU64>,
}

impl Shared {
    /// Empty pool and caches over `store`, committed up to `head`.
    pub(super) fn new(cfg: &Config, store: Arc<Store>, head: u64) -> Self {
        let p = &cfg.pipeline;
        Shared {
            store,
            counters: Arc::new(PoolCounters::new(cfg.mempool.max_txs as u64, cfg.mempool.max_bytes as u64)),
            cache: Arc::new(PreparedTxCache::new(p.prepared_cache_txs)),
            pending: Arc::new(PendingTxs::default()),
            committed: Arc::new(AtomicU64::new(head)),
        }
    }
}

/// Sets every stage's height gauge to the store's head: until its first
/// block a stage is there, and the dashboards show that, not "No data".
pub(super) fn show_heads(head: u64) {
    let at = head as f64;
    for height in [m::PRODUCED_HEIGHT, m::PREPARED_HEIGHT, m::EXECUTED_HEIGHT, m::COMMITTED_HEIGHT] {
        metrics::gauge!(height).set(at);
    }
    metrics::gauge!(m::STORE_APP_HASH_HEIGHT).set(at);
}

/// What admission (and RPC's checks) refuse, from config.
pub(super) fn admission_rules(cfg: &Config) -> AdmissionRules {
    let mut rules = AdmissionRules::new(
        cfg.chain.chain_id,
        cfg.chain.block_gas_limit,
        u128::from(cfg.chain.base_fee_wei),
    );
    rules.max_tx_size_bytes = cfg.mempool.max_tx_size_bytes;
    rules.spec = cfg.chain.spec;
    rules.allow_eip7702 = cfg.chain.spec.has_eip7702();
    rules
}

/// Starts the mempool shards on the light arbiter, one mailbox each. A
/// shard that loses transactions reports them to nonce reservation, which
/// frees their nonces.
pub(super) fn spawn_shards(
    cfg: &Config,
    shared: &Shared,
    light: &Arbiter,
    nonce: &MailboxSender<NonceMsg>,
    probes: &mut Vec<MailboxProbe>,
) -> Vec<MailboxSender<ShardMsg>> {
    let mut shard_txs = Vec::with_capacity(cfg.mempool.shards);
    for i in 0..cfg.mempool.shards {
        let (tx, rx) = mailbox_indexed("mempool_shard", i, cfg.pipeline.shard_mailbox_msgs);
        probes.push(rx.probe());
        let (c, lost) = (Arc::clone(&shared.counters), (Arc::clone(&shared.pending), nonce.clone()));
        ShardActor::start_in_arbiter(&light.handle(), move |_| {
            ShardActor::new(i, c, rx).with_loss_reporting(lost.0, lost.1)
        });
        shard_txs.push(tx);
    }
    shard_txs
}

/// What the commit stage hands on.
pub(super) struct Commit {
    /// Its own thread.
    pub(super) arbiter: Arbiter,
    /// Answered when commit stops, its mailbox drained: the end of a
    /// clean shutdown.
    pub(super) done: oneshot::Receiver<()>,
    /// Committed heights, for WebSocket subscriptions and the port.
    pub(super) events: ChainEvents,
}

/// Starts store commit on an arbiter of its own.
pub(super) fn spawn_commit(
    cfg: &Config,
    shared: &Shared,
    mode: ProducerMode,
    head: u64,
    shards: &[MailboxSender<ShardMsg>],
    nonce: &MailboxSender<NonceMsg>,
    rx: MailboxReceiver<CommitMsg>,
) -> Commit {
    let (done_tx, done) = oneshot::channel();
    let arbiter = Arbiter::new();
    let chain_events = ChainEvents::new(head, cfg.rpc.pending_feed_txs);
    let (store, committed, pending, nonce) = (
        Arc::clone(&shared.store),
        Arc::clone(&shared.committed),
        Arc::clone(&shared.pending),
        nonce.clone(),
    );
    let events = chain_events.clone();
    // Only a validator's pool holds transactions that blocks of others
    // include.
    let pool = (mode == ProducerMode::OnRequest).then(|| shards.to_vec());
    Committer::start_in_arbiter(&arbiter.handle(), move |_| {
        let committer = Committer::new(store, committed, pending, nonce, rx, done_tx);
        match pool {
            Some(shards) => committer.with_pool(shards),
            None => committer,
        }
        .with_events(events)
    });
    Commit { arbiter, done, events: chain_events }
}

/// Starts the execution stage on an arbiter of its own.
pub(super) fn spawn_execute(
    cfg: &Config,
    shared: &Shared,
    exec: ExecConfig,
    recovery_taken: &Taken,
    commit: MailboxSender<CommitMsg>,
    rx: MailboxReceiver<ExecuteMsg>,
) -> Arbiter {
    let p = &cfg.pipeline;
    let arbiter = Arbiter::new();
    let (store, committed) = (Arc::clone(&shared.store), Arc::clone(&shared.committed));
    let (workers, min_txs) = (p.execute_workers(), p.occ_min_block_txs);
    // Blocks of contract calls run in order while admission works, unless
    // configured otherwise (see `parallel/rule.rs`).
    let load = (!p.occ_lanes_while_admitting)
        .then(|| Arc::new(recovery_taken.clone()) as Arc<dyn sluice_executor::Load>);
    Executor::start_in_arbiter(&arbiter.handle(), move |_| {
        // The parallel executor runs small blocks in order itself and equals
        // the sequential executor on every block.
        let parallel = ParallelExecutor::new(exec, workers, min_txs).with_load(load);
        Executor::new(Box::new(parallel), store, committed, commit, rx)
    });
    arbiter
}

/// Starts block preparation on an arbiter of its own.
pub(super) fn spawn_prepare(
    cfg: &Config,
    shared: &Shared,
    execute: MailboxSender<ExecuteMsg>,
    rx: MailboxReceiver<PrepareMsg>,
) -> Arbiter {
    let arbiter = Arbiter::new();
    let (cache, chain_id, workers) =
        (Arc::clone(&shared.cache), cfg.chain.chain_id, cfg.pipeline.prepare_workers());
    let store = Arc::clone(&shared.store);
    Preparer::start_in_arbiter(&arbiter.handle(), move |_| {
        Preparer::new(cache, store, chain_id, workers, execute, rx)
    });
    arbiter
}

/// Starts the block producer on the light arbiter, building on `head`.
pub(super) fn spawn_producer(
    settings: ProducerSettings,
    shared: &Shared,
    head: &StoredBlock,
    light: &Arbiter,
    shards: &[MailboxSender<ShardMsg>],
    prepare: &MailboxSender<PrepareMsg>,
    rx: MailboxReceiver<ProducerMsg>,
) {
    let parent = Parent {
        number: head.block.header.number,
        hash: head.block.hash,
        timestamp: head.block.header.timestamp,
    };
    let (shards, counters, prepare_tx) = (shards.to_vec(), Arc::clone(&shared.counters), prepare.clone());
    Producer::start_in_arbiter(&light.handle(), move |_| {
        Producer::new(settings, shards, prepare_tx, counters, parent, rx)
    });
}

/// The producer's limits and pace, from config.
pub(super) fn producer_settings(cfg: &Config, mode: ProducerMode) -> ProducerSettings {
    ProducerSettings {
        block_time: Duration::from_millis(cfg.producer.block_time_ms),
        max_block_txs: cfg.producer.max_block_txs,
        block_gas_limit: cfg.chain.block_gas_limit,
        max_block_bytes: cfg.producer.max_block_bytes,
        max_block_rlp_bytes: if cfg.chain.spec.has_osaka_caps() {
            sluice_messages::block_size::MAX_RLP_BLOCK_SIZE
        } else {
            usize::MAX
        },
        idle_block_interval: match cfg.producer.idle_block_interval_ms {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        },
        coinbase: cfg.chain.coinbase,
        base_fee: cfg.chain.base_fee_wei,
        mode,
        empty_wait: match mode {
            ProducerMode::OnRequest => Duration::from_millis(cfg.consensus.empty_block_wait_ms),
            ProducerMode::Timer => Duration::ZERO,
        },
    }
}

/// Starts nonce reservation on the light arbiter. For a validator it
/// returns the queue of what this node's clients send, for the other
/// validators (consensus takes it through the port).
#[allow(clippy::too_many_arguments)] // one call site; each is a mailbox, a shared handle or the mode
pub(super) fn spawn_nonce(
    cfg: &Config,
    shared: &Shared,
    mode: ProducerMode,
    light: &Arbiter,
    shards: Vec<MailboxSender<ShardMsg>>,
    producer: &MailboxSender<ProducerMsg>,
    events: &ChainEvents,
    rx: MailboxReceiver<NonceMsg>,
) -> Option<flume::Receiver<Bytes>> {
    let (peers_tx, peers_rx) = match mode {
        ProducerMode::OnRequest => {
            let (tx, rx) = flume::bounded(cfg.consensus.gossip_queue_txs.max(1));
            (Some(tx), Some(rx))
        }
        ProducerMode::Timer => (None, None),
    };
    let deps = NonceDeps {
        store: Arc::clone(&shared.store),
        counters: Arc::clone(&shared.counters),
        pending: Arc::clone(&shared.pending),
        cache: Arc::clone(&shared.cache),
        shards,
        producer: producer.clone(),
        max_txs_per_sender: cfg.mempool.max_txs_per_sender,
        events: events.clone(),
        future: sluice_txpool::FutureLimits {
            per_sender: cfg.mempool.max_future_txs_per_sender as usize,
            total: cfg.mempool.max_future_txs as usize,
            lifetime: Duration::from_millis(cfg.mempool.future_tx_lifetime_ms),
            price_bump: cfg.mempool.price_bump_percent,
        },
        max_block_txs: cfg.producer.max_block_txs as u64,
        peers: peers_tx,
    };
    NonceActor::start_in_arbiter(&light.handle(), move |_| NonceActor::new(deps, rx));
    peers_rx
}

/// Starts the signature-recovery workers (threads of their own); their
/// queue is probed with the mailboxes.
pub(super) fn spawn_recovery(
    cfg: &Config,
    rules: &AdmissionRules,
    taken: Taken,
    probes: &mut Vec<MailboxProbe>,
) -> Result<Recovery, NodeError> {
    let p = &cfg.pipeline;
    let (recovery, probe) = Recovery::start(p.recovery_workers(), p.recovery_queue_txs, rules.clone(), taken)
        .map_err(|source| NodeError::Threads { stage: crate::recovery::ACTOR, source })?;
    probes.push(probe);
    Ok(recovery)
}

/// Opens the transaction journal and builds admission, then offers the
/// journaled transactions again. This runs before the RPC server opens:
/// what was answered before a kill is pending again before anything new
/// arrives (a client resending it gets `already known`).
pub(super) async fn spawn_admission(
    cfg: &Config,
    shared: &Shared,
    nonce: MailboxSender<NonceMsg>,
    recovery: Recovery,
) -> Result<Arc<Admission>, NodeError> {
    let (journal, journaled) = open_journal(cfg, &shared.store)?;
    let admission = Arc::new(Admission {
        store: Arc::clone(&shared.store),
        nonce,
        recovery,
        pool: Arc::clone(&shared.counters),
        accepting: AtomicBool::new(true),
        journal,
    });
    if !journaled.is_empty() {
        let offered = journaled.len();
        let admitted = crate::admission::replay_journal(&admission, journaled).await;
        tracing::info!(offered, admitted, "transaction journal offered again");
    }
    Ok(admission)
}

/// RPC's state: it reads the store and submits through admission.
pub(super) fn rpc_state(
    cfg: &Config,
    shared: &Shared,
    admission: &Arc<Admission>,
    rules: AdmissionRules,
    exec: ExecConfig,
    events: &ChainEvents,
) -> Arc<sluice_rpc::RpcState> {
    let pipeline = Arc::clone(admission) as Arc<dyn sluice_rpc::Pipeline>;
    Arc::new(sluice_rpc::RpcState {
        pending: Arc::clone(&shared.pending),
        // What `eth_syncing` reports; the port's consensus feeds it the
        // finalized heights it hears of.
        sync: Arc::new(sluice_rpc::sync::SyncStatus::default()),
        ..sluice_rpc::RpcState::new(
            Arc::clone(&shared.store),
            pipeline,
            rules,
            exec,
            cfg.rpc.clone(),
            events.clone(),
        )
    })
}

/// Consensus's way in: it asks the producer for blocks, delivers decided
/// ones to preparation, and takes the gossip queue.
pub(super) fn validator_port(
    shared: &Shared,
    producer: &MailboxSender<ProducerMsg>,
    prepare: MailboxSender<PrepareMsg>,
    events: &ChainEvents,
    outbound: Option<flume::Receiver<Bytes>>,
    admission: &Arc<Admission>,
    rpc: &sluice_rpc::RpcState,
) -> ValidatorPort {
    let peers = Peers {
        outbound,
        admission: Arc::clone(admission),
        sync: Arc::clone(&rpc.sync),
        finalized: Arc::clone(&rpc.finalized),
    };
    ValidatorPort::new(producer.clone(), prepare, events.heads(), Arc::clone(&shared.store), peers)
}

/// Opens the JSON-RPC server on its own worker threads.
pub(super) fn spawn_rpc(
    cfg: &Config,
    rpc: &Arc<sluice_rpc::RpcState>,
) -> Result<(SocketAddr, actix_web::dev::ServerHandle), NodeError> {
    sluice_rpc::server::start(Arc::clone(rpc))
        .map_err(|source| NodeError::Bind { addr: cfg.rpc.addr, source })
}

/// Opens the pending-transaction journal (unless `mempool.journal` is
/// off) and starts its writer: the writer, and the raw transactions to
/// offer again, those not committed yet. The committed ones are counted
/// (`result="committed"`) and compacted away here, so the file holds only
/// what may still be pending.
fn open_journal(cfg: &Config, store: &Arc<Store>) -> Result<(Option<JournalWriter>, Vec<Bytes>), NodeError> {
    if !cfg.mempool.journal {
        return Ok((None, Vec::new()));
    }
    let path = cfg.store.data_dir.join(JOURNAL_FILE);
    let failed = |source| NodeError::Journal { path: path.clone(), source };
    let (mut journal, entries) = Journal::open(&path).map_err(failed)?;
    let pending = pending_filter(Arc::clone(store));
    let total = entries.len();
    let raws: Vec<_> = entries.into_iter().filter(|e| pending(e)).map(|e| e.raw).collect();
    if raws.len() < total {
        metrics::counter!(m::TXJOURNAL_REPLAYED, "result" => "committed")
            .increment((total - raws.len()) as u64);
        journal.rewrite(&pending).map_err(failed)?;
    }
    let queue = cfg.pipeline.admission_mailbox_msgs;
    let writer =
        JournalWriter::start(journal, cfg.mempool.journal_max_bytes, queue, pending).map_err(failed)?;
    Ok((Some(writer), raws))
}

/// Whether a journaled transaction may still be pending: its nonce is not
/// below its sender's committed one. A failed read keeps it (replaying a
/// committed transaction costs a `nonce too low`; dropping a pending one
/// loses it).
fn pending_filter(store: Arc<Store>) -> PendingFilter {
    Box::new(move |e: &Entry| match store.account(&e.sender) {
        Ok(Some(account)) => e.nonce >= account.nonce,
        Ok(None) | Err(_) => true,
    })
}

/// Samples mailbox depths and pool occupancy into gauges twice a second.
/// While the store is halted it also reports every admitted transaction
/// lost (whatever halted it: a failed commit, a damaged read, supervision),
/// including any admitted in the race with the halt.
pub(super) fn spawn_sampler(
    probes: Vec<MailboxProbe>,
    counters: Arc<PoolCounters>,
    store: Arc<Store>,
    pending: Arc<PendingTxs>,
) {
    let process = metrics_process::Collector::new(m::PROCESS_PREFIX);
    process.describe();
    actix_rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut was_halted = false;
        loop {
            tick.tick().await;
            for p in &probes {
                p.record();
            }
            metrics::gauge!(m::MEMPOOL_TXS).set(counters.len() as f64);
            metrics::gauge!(m::MEMPOOL_BYTES).set(counters.bytes() as f64);
            let halted = store.halted();
            // Said once, whoever halted it: a read of a damaged file halts
            // the store from an RPC call, which has no one else to tell.
            if let (Some(reason), false) = (&halted, was_halted) {
                tracing::error!(%reason, "the store halted: writes stopped, reads of memory go on");
            }
            if let Some(reason) = &halted {
                crate::supervise::report_lost(&pending, &reason.to_string());
            }
            was_halted = halted.is_some();
            metrics::gauge!(m::STORE_HALTED).set(if was_halted { 1.0 } else { 0.0 });
            metrics::gauge!(m::STORE_DB_BYTES).set(store.db_bytes() as f64);
            for (table, bytes) in store.table_bytes() {
                metrics::gauge!(m::STORE_TABLE_BYTES, "table" => table).set(bytes as f64);
            }
            metrics::gauge!(m::STORE_OLDEST_BLOCK).set(store.oldest_block() as f64);
            if let Ok(oldest) = store.oldest_state() {
                metrics::gauge!(m::STORE_OLDEST_STATE).set(oldest as f64);
            }
            metrics::counter!(m::STORE_READ_ERRORS).absolute(store.read_errors());
            if let Some(c) = store.cache_stats() {
                metrics::gauge!(m::STATE_CACHE_BYTES).set(c.bytes as f64);
                let reads = [
                    ("account", "hit", c.account_hits),
                    ("account", "miss", c.account_misses),
                    ("storage", "hit", c.storage_hits),
                    ("storage", "miss", c.storage_misses),
                ];
                for (kind, result, n) in reads {
                    metrics::counter!(m::STATE_CACHE_READS, "kind" => kind, "result" => result).absolute(n);
                }
            }
            process.collect();
        }
    });
}
