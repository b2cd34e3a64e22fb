//! Assembling the pipeline: genesis, store, actors, mailboxes, the RPC
//! server, and the order of shutdown. `start_on` reads as the pipeline;
//! `spawn.rs` holds one function per stage it calls.
//!
//! Threads: the light actors (nonce reservation, mempool shards, block
//! producer) share one arbiter; preparation, the execution stage and store commit
//! each have an arbiter of their own, because their handlers are CPU work;
//! the HTTP server has its own worker threads; metrics are served from the
//! exporter's thread.

mod spawn;

use std::{
    net::SocketAddr,
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use actix::prelude::*;
use alloy_primitives::U256;
use sluice_config::Config;
use sluice_executor::ExecConfig;
use sluice_store::{DurableOptions, Genesis, GenesisAccount, Halt, Store, SyncPolicy};
use sluice_txpool::dev_accounts;
use tokio::sync::oneshot;

pub use spawn::JOURNAL_FILE;

use crate::{
    admission::Admission,
    mailbox::{mailbox, MailboxProbe, MailboxSender},
    metrics as m,
    port::ValidatorPort,
    producer::ProducerMode,
    protocol::ProducerMsg,
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
    ///
    /// All mailboxes are made first, so every stage can be handed the
    /// senders it needs. The stages then start back to front, as they
    /// always have: when a stage starts, those it hands work to already
    /// run; the shards come first because commit (a validator's), the
    /// producer and nonce reservation all hold their senders; the RPC
    /// server, the pipeline's entry, opens last, after the journal's
    /// replay.
    async fn start_on(
        cfg: Config,
        genesis: Genesis,
        store: Arc<Store>,
        mode: ProducerMode,
    ) -> Result<(Node, ValidatorPort), NodeError> {
        install_faults(&cfg, &store)?;
        let head = store.head_block();
        let height = head.block.header.number;
        spawn::show_heads(height);
        let exec = ExecConfig { chain_id: cfg.chain.chain_id, spec: cfg.chain.spec };
        let rules = spawn::admission_rules(&cfg);
        let shared = spawn::Shared::new(&cfg, store, height);

        let p = &cfg.pipeline;
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
        // Nonce -> shards: reserved transactions wait here; lost ones are reported back to nonce.
        let shard_txs = spawn::spawn_shards(&cfg, &shared, &light, &nonce_tx, &mut probes);
        // Execute -> commit -> store; progressed senders -> nonce, a validator's included txs -> shards.
        let commit = spawn::spawn_commit(&cfg, &shared, mode, height, &shard_txs, &nonce_tx, commit_rx);
        let recovery_taken = crate::recovery::Taken::default();
        // Prepare -> execute: recovery's load decides whether contract blocks may run on lanes.
        let execute_arbiter =
            spawn::spawn_execute(&cfg, &shared, exec, &recovery_taken, commit_tx, execute_rx);
        // Producer (or a validator's port) -> prepare: sealed blocks are decoded, senders recovered.
        let prepare_arbiter = spawn::spawn_prepare(&cfg, &shared, execute_tx, prepare_rx);
        // Shards -> producer -> prepare: the pool's transactions are sealed into blocks.
        let settings = spawn::producer_settings(&cfg, mode);
        spawn::spawn_producer(settings, &shared, &head, &light, &shard_txs, &prepare_tx, producer_rx);
        // Admission -> nonce -> shards, nudging the producer; a validator's own ones queue for gossip.
        let gossip = spawn::spawn_nonce(
            &cfg,
            &shared,
            mode,
            &light,
            shard_txs,
            &producer_tx,
            &commit.events,
            nonce_rx,
        );
        // Admission <-> recovery: decoding and sender recovery, on threads of their own.
        let recovery = spawn::spawn_recovery(&cfg, &rules, recovery_taken, &mut probes)?;
        // RPC (and the journal's replay) -> admission -> nonce.
        let admission = spawn::spawn_admission(&cfg, &shared, nonce_tx, recovery).await?;
        // Store -> RPC reads; RPC submissions -> admission.
        let rpc = spawn::rpc_state(&cfg, &shared, &admission, rules, exec, &commit.events);
        // Consensus -> port -> producer (build) and prepare (decided blocks); gossip -> consensus.
        let port = spawn::validator_port(
            &shared,
            &producer_tx,
            prepare_tx,
            &commit.events,
            gossip,
            &admission,
            &rpc,
        );
        // Clients -> RPC server: opened last, once the whole pipeline runs.
        let (rpc_addr, server) = spawn::spawn_rpc(&cfg, &rpc)?;
        // Every mailbox, the pool and the store -> gauges.
        let store = shared.store;
        spawn::spawn_sampler(probes, shared.counters, Arc::clone(&store), Arc::clone(&rpc.pending));
        tracing::info!(%rpc_addr, chain_id = cfg.chain.chain_id, accounts = genesis.alloc.len(), "sluice node started");
        let node = Node {
            rpc_addr,
            store,
            rpc,
            admission,
            server,
            producer: producer_tx,
            done: commit.done,
            arbiters: vec![light, prepare_arbiter, execute_arbiter, commit.arbiter],
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

#[cfg(test)]
#[path = "../validator_tests.rs"]
mod validator_tests;
