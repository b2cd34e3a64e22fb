//! Assembling the pipeline: genesis, store, actors, mailboxes, the RPC
//! server, and the order of shutdown.
//!
//! Threads: the light actors (nonce reservation, mempool shards, block
//! producer) share one arbiter; preparation, the execution stage and store commit
//! each have an arbiter of their own, because their handlers are CPU work;
//! the HTTP server has its own worker threads; metrics are served from the
//! exporter's thread.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use actix::prelude::*;
use alloy_primitives::U256;
use sluice_config::Config;
use sluice_executor::{ExecConfig, OccExecutor};
use sluice_txpool::{dev_accounts, AdmissionRules, PoolCounters, PreparedTxCache};
use tokio::sync::oneshot;

use sluice_store::{
    ChainEvents, DurableOptions, Genesis, GenesisAccount, Halt, StateReader, Store, SyncPolicy,
};
use sluice_txpool::PendingTxs;

use crate::admission::Admission;
use crate::{
    committer::Committer,
    executor::Executor,
    journal::{Entry, Journal},
    journal_writer::{JournalWriter, PendingFilter},
    mailbox::{mailbox, mailbox_indexed, MailboxProbe, MailboxSender},
    metrics as m,
    nonce::{NonceActor, NonceDeps},
    port::{Peers, ValidatorPort},
    preparer::Preparer,
    producer::{Parent, Producer, ProducerMode, ProducerSettings},
    protocol::ProducerMsg,
    recovery::Recovery,
    shard::ShardActor,
};

/// Why the node could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The genesis file could not be read or parsed.
    #[error("genesis: {0}")]
    Genesis(String),
    /// Dev account keys could not be derived.
    #[error(transparent)]
    Derive(#[from] dev_accounts::DeriveError),
    /// The RPC address could not be bound.
    #[error("cannot serve JSON-RPC on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The data directory could not be created.
    #[error("data dir {path}: {source}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The store halted (a failed commit, a wrong state, supervision gave
    /// up); the node stopped with it.
    #[error("store halted: {0}")]
    Halted(Halt),
    /// The data dir could not be opened (another chain, corrupt, I/O).
    #[error(transparent)]
    Store(#[from] sluice_store::StoreError),
    /// `faults.failpoints` could not be parsed.
    #[error("faults.failpoints: {0}")]
    Faults(#[from] crate::faults::FaultError),
    /// The pending-transaction journal could not be opened, rewritten or
    /// its writer started.
    #[error("transaction journal {path}: {source}")]
    Journal {
        /// The journal file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A stage's threads could not be started.
    #[error("cannot start the {stage} threads: {source}")]
    Threads {
        /// The stage.
        stage: &'static str,
        /// The cause.
        source: std::io::Error,
    },
}

/// The store options the config asks for.
pub fn durable_options(cfg: &Config) -> DurableOptions {
    DurableOptions {
        dir: cfg.store.data_dir.clone(),
        spec: cfg.chain.spec.name().into(),
        sync: match cfg.store.sync_every_blocks {
            0 | 1 => SyncPolicy::EveryBlock,
            n => SyncPolicy::EveryNBlocks(n),
        },
        cache_blocks: cfg.store.cache_blocks,
        db_limits: sluice_store::DbLimits {
            cache_bytes: cfg.store.db_cache_bytes as u64,
            write_buffer_bytes: cfg.store.db_write_buffer_bytes,
            worker_threads: cfg.store.db_worker_threads,
        },
        state_cache: sluice_store::CacheBytes {
            accounts: cfg.store.account_cache_bytes,
            storage: cfg.store.storage_cache_bytes,
            code: cfg.store.code_cache_bytes,
        },
        history_blocks: cfg.store.kept_history_blocks(),
        block_retention_blocks: cfg.store.kept_blocks(),
        address_index: cfg.store.address_index,
        fail_commit_at: cfg.store.inject_commit_failure_at_height,
        // Not configurable: the store's own tests inject read failures.
        fail_read_at: 0,
        diverge_at: cfg.store.inject_app_hash_divergence_at_height,
        // A single node's data dir; a validator network names its own.
        network: String::new(),
    }
}

/// Wei per ether.
const WEI_PER_ETH: u128 = 1_000_000_000_000_000_000;

/// Builds genesis from config: the geth-style file (if any) plus the dev
/// accounts derived from the mnemonic.
pub fn build_genesis(cfg: &Config) -> Result<Genesis, NodeError> {
    let mut genesis = Genesis {
        chain_id: cfg.chain.chain_id,
        timestamp: 0,
        gas_limit: cfg.chain.block_gas_limit,
        base_fee: cfg.chain.base_fee_wei,
        coinbase: cfg.chain.coinbase,
        alloc: Default::default(),
        synthetic: Default::default(),
    };
    if !cfg.chain.genesis_file.as_os_str().is_empty() {
        let path = &cfg.chain.genesis_file;
        let text = std::fs::read_to_string(path)
            .map_err(|e| NodeError::Genesis(format!("{}: {e}", path.display())))?;
        genesis = Genesis::from_geth_json(&text, &genesis).map_err(|e| NodeError::Genesis(e.to_string()))?;
        if genesis.chain_id != cfg.chain.chain_id {
            return Err(NodeError::Genesis(format!(
                "genesis chainId {} differs from the configured chain id {}",
                genesis.chain_id, cfg.chain.chain_id
            )));
        }
    }
    let balance = U256::from(cfg.chain.dev_balance_eth) * U256::from(WEI_PER_ETH);
    genesis.synthetic = sluice_store::Synthetic { count: cfg.chain.synthetic_accounts, balance };
    for signer in dev_accounts::derive(&cfg.chain.mnemonic, cfg.chain.dev_accounts)? {
        genesis.alloc.entry(signer.address()).or_insert(GenesisAccount { balance, ..Default::default() });
    }
    Ok(genesis)
}

/// A running node.
pub struct Node {
    /// Where JSON-RPC is served.
    pub rpc_addr: SocketAddr,
    /// The committed chain.
    pub store: Arc<Store>,
    rpc: Arc<sluice_rpc::RpcState>,
    admission: Arc<Admission>,
    server: actix_web::dev::ServerHandle,
    producer: MailboxSender<ProducerMsg>,
    done: oneshot::Receiver<()>,
    arbiters: Vec<Arbiter>,
}

impl Node {
    /// Starts every stage and the RPC server. Must run inside an actix
    /// system.
    pub async fn start(cfg: Config) -> Result<Node, NodeError> {
        // The port is let go at once: only the producer feeds preparation.
        Self::start_in(cfg, ProducerMode::Timer, String::new()).await.map(|(node, _port)| node)
    }

    /// Starts a validator: every stage as in [`Node::start`], but the
    /// producer builds blocks only when consensus asks through the port, and
    /// consensus delivers the decided blocks. [`Node::shutdown`] drains the
    /// pipeline once the port and all its clones are gone.
    /// `network` names the validator set in the data dir's identity, so a
    /// single node's data dir, or another network's, is refused.
    pub async fn start_validator(cfg: Config, network: String) -> Result<(Node, ValidatorPort), NodeError> {
        Self::start_in(cfg, ProducerMode::OnRequest, network).await
    }

    async fn start_in(
        cfg: Config,
        mode: ProducerMode,
        network: String,
    ) -> Result<(Node, ValidatorPort), NodeError> {
        let dir = &cfg.store.data_dir;
        std::fs::create_dir_all(dir).map_err(|source| NodeError::DataDir { path: dir.clone(), source })?;
        let genesis = build_genesis(&cfg)?;
        let store = Arc::new(Store::open(&genesis, &DurableOptions { network, ..durable_options(&cfg) })?);
        if store.repaired_at_open() {
            tracing::warn!(
                data_dir = %dir.display(),
                "the data dir was not closed cleanly (a crash or a kill): its database replayed its journal; \
                 after a power loss, blocks after the last sync, if syncs are grouped, are gone"
            );
        }
        // A start that fails from here on closes the file it opened, or the
        // next start would have to repair it (the stages started so far
        // hold the store as the process exits).
        let started = Self::start_on(cfg, genesis, Arc::clone(&store), mode).await;
        if started.is_err() {
            let _ = close(&store);
        }
        started
    }

    /// Starts the stages and the RPC server on an open store.
    async fn start_on(
        cfg: Config,
        genesis: Genesis,
        store: Arc<Store>,
        mode: ProducerMode,
    ) -> Result<(Node, ValidatorPort), NodeError> {
        install_faults(&cfg, &store)?;
        let head = store.head_block();
        // Every stage is at the store's head until its first block: the
        // dashboards show that, not "No data".
        let at = head.block.header.number as f64;
        for height in [m::PRODUCED_HEIGHT, m::PREPARED_HEIGHT, m::EXECUTED_HEIGHT, m::COMMITTED_HEIGHT] {
            metrics::gauge!(height).set(at);
        }
        metrics::gauge!(m::STORE_APP_HASH_HEIGHT).set(at);
        let exec = ExecConfig { chain_id: cfg.chain.chain_id, spec: cfg.chain.spec };
        let mut rules = AdmissionRules::new(
            cfg.chain.chain_id,
            cfg.chain.block_gas_limit,
            u128::from(cfg.chain.base_fee_wei),
        );
        rules.max_tx_size_bytes = cfg.mempool.max_tx_size_bytes;
        rules.spec = cfg.chain.spec;
        rules.allow_eip7702 = cfg.chain.spec.has_eip7702();

        let p = &cfg.pipeline;
        let counters = Arc::new(PoolCounters::new(cfg.mempool.max_txs as u64, cfg.mempool.max_bytes as u64));
        let cache = Arc::new(PreparedTxCache::new(p.prepared_cache_txs));
        let pending = Arc::new(PendingTxs::default());
        let committed = Arc::new(AtomicU64::new(head.block.header.number));
        let mut probes: Vec<MailboxProbe> = Vec::new();

        let (nonce_tx, nonce_rx) = mailbox("nonce", p.admission_mailbox_msgs);
        let (producer_tx, producer_rx) = mailbox("producer", p.producer_mailbox_msgs);
        let (prepare_tx, prepare_rx) = mailbox("preparer", p.prepare_mailbox_blocks);
        let (execute_tx, execute_rx) = mailbox("executor", p.prepare_ahead_blocks);
        let (commit_tx, commit_rx) = mailbox("committer", p.commit_mailbox_blocks);
        probes.extend([
            nonce_rx.probe(),
            producer_rx.probe(),
            prepare_rx.probe(),
            execute_rx.probe(),
            commit_rx.probe(),
        ]);

        let light = Arbiter::new();
        let mut shard_txs = Vec::with_capacity(cfg.mempool.shards);
        for i in 0..cfg.mempool.shards {
            let (tx, rx) = mailbox_indexed("mempool_shard", i, p.shard_mailbox_msgs);
            probes.push(rx.probe());
            let (c, lost) = (Arc::clone(&counters), (Arc::clone(&pending), nonce_tx.clone()));
            ShardActor::start_in_arbiter(&light.handle(), move |_| {
                ShardActor::new(i, c, rx).with_loss_reporting(lost.0, lost.1)
            });
            shard_txs.push(tx);
        }

        let (done_tx, done) = oneshot::channel();
        let commit_arbiter = Arbiter::new();
        // Committed heights, for WebSocket subscriptions.
        let chain_events = ChainEvents::new(head.block.header.number, cfg.rpc.pending_feed_txs);
        {
            let (store, committed, pending, nonce) =
                (Arc::clone(&store), Arc::clone(&committed), Arc::clone(&pending), nonce_tx.clone());
            let events = chain_events.clone();
            // Only a validator's pool holds transactions that blocks of
            // others include.
            let pool = (mode == ProducerMode::OnRequest).then(|| shard_txs.clone());
            Committer::start_in_arbiter(&commit_arbiter.handle(), move |_| {
                let committer = Committer::new(store, committed, pending, nonce, commit_rx, done_tx);
                match pool {
                    Some(shards) => committer.with_pool(shards),
                    None => committer,
                }
                .with_events(events)
            });
        }
        let recovery_taken = crate::recovery::Taken::default();
        let execute_arbiter = Arbiter::new();
        {
            let (store, committed) = (Arc::clone(&store), Arc::clone(&committed));
            let (workers, min_txs) = (p.execute_workers(), p.occ_min_block_txs);
            // Blocks of contract calls run in order while admission works,
            // unless configured otherwise (see `occ/rule.rs`).
            let load = (!p.occ_lanes_while_admitting)
                .then(|| Arc::new(recovery_taken.clone()) as Arc<dyn sluice_executor::Load>);
            Executor::start_in_arbiter(&execute_arbiter.handle(), move |_| {
                // The OCC executor runs small blocks in order itself and
                // equals the sequential executor on every block.
                let occ = OccExecutor::new(exec, workers, min_txs).with_load(load);
                Executor::new(Box::new(occ), store, committed, commit_tx, execute_rx)
            });
        }
        let prepare_arbiter = Arbiter::new();
        {
            let (cache, chain_id, workers) = (Arc::clone(&cache), cfg.chain.chain_id, p.prepare_workers());
            let store = Arc::clone(&store);
            Preparer::start_in_arbiter(&prepare_arbiter.handle(), move |_| {
                Preparer::new(cache, store, chain_id, workers, execute_tx, prepare_rx)
            });
        }
        {
            let settings = ProducerSettings {
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
            };
            let parent = Parent {
                number: head.block.header.number,
                hash: head.block.hash,
                timestamp: head.block.header.timestamp,
            };
            let (shards, counters, prepare_tx) =
                (shard_txs.clone(), Arc::clone(&counters), prepare_tx.clone());
            Producer::start_in_arbiter(&light.handle(), move |_| {
                Producer::new(settings, shards, prepare_tx, counters, parent, producer_rx)
            });
        }
        // Validator mode: what this node's clients send queues here for the
        // other validators (consensus takes it through the port).
        let (peers_tx, peers_rx) = match mode {
            ProducerMode::OnRequest => {
                let (tx, rx) = flume::bounded(cfg.consensus.gossip_queue_txs.max(1));
                (Some(tx), Some(rx))
            }
            ProducerMode::Timer => (None, None),
        };
        {
            let deps = NonceDeps {
                store: Arc::clone(&store),
                counters: Arc::clone(&counters),
                pending: Arc::clone(&pending),
                cache: Arc::clone(&cache),
                shards: shard_txs,
                producer: producer_tx.clone(),
                max_txs_per_sender: cfg.mempool.max_txs_per_sender,
                events: chain_events.clone(),
                future: sluice_txpool::FutureLimits {
                    per_sender: cfg.mempool.max_future_txs_per_sender as usize,
                    total: cfg.mempool.max_future_txs as usize,
                    lifetime: Duration::from_millis(cfg.mempool.future_tx_lifetime_ms),
                    price_bump: cfg.mempool.price_bump_percent,
                },
                max_block_txs: cfg.producer.max_block_txs as u64,
                peers: peers_tx,
            };
            NonceActor::start_in_arbiter(&light.handle(), move |_| NonceActor::new(deps, nonce_rx));
        }

        let (recovery, recovery_probe) =
            Recovery::start(p.recovery_workers(), p.recovery_queue_txs, rules.clone(), recovery_taken)
                .map_err(|source| NodeError::Threads { stage: crate::recovery::ACTOR, source })?;
        probes.push(recovery_probe);
        let sync = Arc::new(sluice_rpc::sync::SyncStatus::default());
        let (journal, journaled) = open_journal(&cfg, &store)?;
        let admission = Arc::new(Admission {
            store: Arc::clone(&store),
            nonce: nonce_tx,
            recovery,
            pool: Arc::clone(&counters),
            accepting: AtomicBool::new(true),
            journal,
        });
        // Before the RPC server opens: what was answered before a kill is
        // pending again before anything new arrives (a client resending
        // it gets `already known`).
        if !journaled.is_empty() {
            let offered = journaled.len();
            let admitted = crate::admission::replay_journal(&admission, journaled).await;
            tracing::info!(offered, admitted, "transaction journal offered again");
        }
        let pipeline = Arc::clone(&admission) as Arc<dyn sluice_rpc::Pipeline>;
        let rpc = Arc::new(sluice_rpc::RpcState {
            pending,
            sync: Arc::clone(&sync),
            ..sluice_rpc::RpcState::new(
                Arc::clone(&store),
                pipeline,
                rules,
                exec,
                cfg.rpc.clone(),
                chain_events.clone(),
            )
        });
        let peers = Peers {
            outbound: peers_rx,
            admission: Arc::clone(&admission),
            sync: Arc::clone(&sync),
            finalized: Arc::clone(&rpc.finalized),
        };
        let port = ValidatorPort::new(
            producer_tx.clone(),
            prepare_tx,
            chain_events.heads(),
            Arc::clone(&store),
            peers,
        );
        let (rpc_addr, server) = sluice_rpc::server::start(Arc::clone(&rpc))
            .map_err(|source| NodeError::Bind { addr: cfg.rpc.addr, source })?;
        spawn_sampler(probes, counters, Arc::clone(&store), Arc::clone(&rpc.pending));
        tracing::info!(%rpc_addr, chain_id = cfg.chain.chain_id, accounts = genesis.alloc.len(), "sluice node started");
        let node = Node {
            rpc_addr,
            store,
            rpc,
            admission,
            server,
            producer: producer_tx,
            done,
            arbiters: vec![light, prepare_arbiter, execute_arbiter, commit_arbiter],
        };
        Ok((node, port))
    }

    /// Shuts down in pipeline order: admission stops taking transactions
    /// and the RPC server finishes its requests; the producer seals
    /// everything left in the mempool (a validator's seals nothing); each
    /// later stage drains its mailbox and stops when the stage before it
    /// has (preparation's senders are the producer and, for a validator,
    /// the port: it must be dropped first); the last block is committed
    /// before this returns.
    pub async fn shutdown(self) -> Result<(), NodeError> {
        self.admission.accepting.store(false, Ordering::Release);
        // WebSocket connections close, so the server's graceful stop does not
        // wait on them.
        self.rpc.events.close();
        self.server.stop(true).await;
        let (reply, flushed) = oneshot::channel();
        if self.producer.send(ProducerMsg::Flush { reply }).await.is_ok() {
            let _ = flushed.await;
        }
        tracing::debug!("mempool flushed into blocks");
        drop(self.producer);
        let _ = self.done.await;
        tracing::debug!("store commit drained");
        for a in &self.arbiters {
            a.stop();
        }
        // Closed here rather than when the last holder drops it: the
        // arbiters' threads are still winding down, and the process may exit
        // first, leaving the file to be repaired at the next start.
        let closed = close(&self.store);
        tracing::info!(height = self.store.head(), "sluice node stopped; last block committed");
        match self.store.halted() {
            Some(reason) => Err(NodeError::Halted(reason)),
            None => Ok(closed?),
        }
    }
}

/// The journal file in the data dir.
pub const JOURNAL_FILE: &str = "txjournal";

/// Opens the pending-transaction journal (unless `mempool.journal` is
/// off) and starts its writer: the writer, and the raw transactions to
/// offer again, those not committed yet. The committed ones are counted
/// (`result="committed"`) and compacted away here, so the file holds only
/// what may still be pending.
fn open_journal(
    cfg: &Config,
    store: &Arc<Store>,
) -> Result<(Option<JournalWriter>, Vec<alloy_primitives::Bytes>), NodeError> {
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

/// Closes the store's file, logging a failure.
fn close(store: &Store) -> Result<(), sluice_store::StoreError> {
    let closed = store.close();
    if let Err(e) = &closed {
        tracing::error!(error = %e, "closing the database failed; the next start repairs it");
    }
    closed
}

/// Arms the configured failpoints and sets up supervision: an actor that
/// escalates halts the node through the store's latch (held weakly, so the
/// process-wide hook never keeps the store open).
fn install_faults(cfg: &Config, store: &Arc<Store>) -> Result<(), NodeError> {
    crate::faults::install(&cfg.faults.failpoints, cfg.faults.debug_rpc)?;
    let s = &cfg.supervision;
    let policy = crate::supervise::Policy {
        max_failures: s.max_failures,
        window: Duration::from_millis(s.window_ms),
        retry_backoff: Duration::from_millis(s.retry_backoff_ms),
    };
    let weak = Arc::downgrade(store);
    crate::supervise::install(policy, move |halt| {
        if let Some(store) = weak.upgrade() {
            store.halt(halt);
        }
        metrics::gauge!(m::STORE_HALTED).set(1.0);
    });
    Ok(())
}

/// Samples mailbox depths and pool occupancy into gauges once a second.
/// While the store is halted it also reports every admitted transaction
/// lost (whatever halted it: a failed commit, a damaged read, supervision),
/// including any admitted in the race with the halt.
fn spawn_sampler(
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

#[cfg(test)]
#[path = "validator_tests.rs"]
mod validator_tests;
