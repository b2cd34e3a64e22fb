//! The sections of [`crate::Config`], one struct each, as they appear in
//! `config/default.toml`.

use std::{net::SocketAddr, path::PathBuf};

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};

use crate::Spec;

/// Fault injection: failpoints and the `debug_` namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsConfig {
    /// Failpoints armed at start: `site=action[*K]` entries separated by
    /// `;` (see FAULTS.md); empty for none.
    pub failpoints: String,
    /// Serve the `debug_` JSON-RPC namespace (failpoints at run time);
    /// only allowed with a loopback `rpc.addr`.
    pub debug_rpc: bool,
}

/// Panic containment and escalation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisionConfig {
    /// Failures of one actor tolerated within `window_ms`; one more halts
    /// the node.
    pub max_failures: u32,
    /// The window failures are counted over.
    pub window_ms: u64,
    /// A stage on its own thread waits n times this before its n-th retry.
    pub retry_backoff_ms: u64,
}

/// Chain parameters and genesis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// EVM rules.
    pub spec: Spec,
    /// Receives priority fees.
    pub coinbase: Address,
    /// Constant base fee per gas, in wei.
    pub base_fee_wei: u64,
    /// Gas per block.
    pub block_gas_limit: u64,
    /// Optional geth-style genesis JSON; empty for none.
    pub genesis_file: PathBuf,
    /// Number of dev accounts derived from `mnemonic` and funded.
    pub dev_accounts: u32,
    /// Balance of each dev account, in ether.
    pub dev_balance_eth: u64,
    /// BIP-39 mnemonic of the dev accounts.
    pub mnemonic: String,
    /// Synthetic accounts funded at genesis with `dev_balance_eth` each,
    /// at addresses anyone can compute (state-size benchmarks).
    pub synthetic_accounts: u64,
}

impl ChainConfig {
    /// Whether genesis funds accounts whose keys everyone has: dev accounts
    /// derived from the published [`crate::TEST_MNEMONIC`].
    pub fn funds_public_keys(&self) -> bool {
        self.dev_accounts > 0 && self.mnemonic == crate::TEST_MNEMONIC
    }
}

/// JSON-RPC server limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcConfig {
    /// Listen address.
    pub addr: SocketAddr,
    /// HTTP worker threads; absent: one per core, or a share of
    /// `pipeline.thread_budget` (see [`RpcConfig::workers`]).
    pub workers: Option<usize>,
    /// Largest request body.
    pub max_request_body_bytes: usize,
    /// Most calls per batch.
    pub max_batch_len: usize,
    /// Largest response body.
    pub max_response_bytes: usize,
    /// Concurrent connections per worker.
    pub max_connections_per_worker: usize,
    /// Keep-alive timeout.
    pub keep_alive_ms: u64,
    /// Time allowed for a client to send its request head.
    pub client_request_timeout_ms: u64,
    /// Time allowed for a request's body once its head arrived; past it
    /// HTTP 408 and the connection is closed (geth's read timeout, 30 s).
    pub read_timeout_ms: u64,
    /// Time the node's writes may go unacknowledged by a client that does
    /// not read; past it the connection is dropped (geth's write timeout,
    /// 30 s).
    pub write_timeout_ms: u64,
    /// Names the node answers to in a request's `Host` (comma-separated,
    /// `*` any); other names get HTTP 403, requests by IP address pass
    /// (geth's `--http.vhosts`, against DNS rebinding).
    pub vhosts: String,
    /// Widest `eth_getLogs` block range.
    pub max_logs_block_range: u64,
    /// Most logs per `eth_getLogs` answer.
    pub max_logs_results: usize,
    /// Most blocks per `eth_feeHistory` answer.
    pub max_fee_history_blocks: u64,
    /// Most transactions one `ots_searchTransactionsBefore`/`After` page
    /// asks for (its `pageSize`; Otterscan asks for 25); a larger page is
    /// refused, as erigon refuses it. A page may hold a few more, to
    /// finish its last block.
    pub ots_max_page_txs: u64,
    /// Most blocks one `trace_filter` request re-traces (`fromBlock` to
    /// `toBlock`, both counted; reth's default, 100); a longer range is
    /// refused.
    pub trace_filter_max_blocks: u64,
    /// Open WebSocket connections, across workers; a handshake past it is
    /// answered HTTP 503.
    pub ws_max_connections: usize,
    /// Live `eth_subscribe` subscriptions on one WebSocket connection.
    pub ws_max_subscriptions_per_connection: usize,
    /// A subscriber this many committed blocks behind the head is dropped
    /// (a slow consumer is disconnected, never buffered for).
    pub ws_max_lag_blocks: u64,
    /// A WebSocket message (reply or notification) that cannot be queued to
    /// the socket within this time drops the connection.
    pub ws_send_timeout_ms: u64,
    /// The node pings each WebSocket this often; a peer that sent nothing
    /// (not even a pong) for a whole interval is dropped.
    pub ws_ping_interval_ms: u64,
    /// Origins a browser page may call the node from, comma-separated:
    /// `*` any (the default), empty none; see [`RpcConfig::cors_allows`].
    pub cors_origins: String,
    /// Transactions entering the mempool kept for pending-transaction
    /// filters and `newPendingTransactions` subscribers to read; one that
    /// falls further behind loses what it missed.
    pub pending_feed_txs: usize,
    /// Finalized blocks (with their certificates) the finalized-block feed
    /// keeps for `consensus_getFinalized` and for subscribers resuming from
    /// a height (network mode only).
    pub finalized_feed_blocks: usize,
    /// `consensus_subscribe(["finalized"])` subscribers at once, across
    /// connections; past it: -32005. Each costs a block's bytes per block.
    pub finalized_feed_max_subscribers: usize,
    /// `eth_sendRawTransactionSync` waits this long for the receipt when
    /// the call names no timeout (EIP-7966 recommends 2 s).
    pub send_sync_timeout_ms: u64,
    /// The longest wait a call may ask for; above it (or 0), the default.
    pub send_sync_max_timeout_ms: u64,
    /// Installed polling filters (`eth_newFilter` and the rest), across
    /// clients; past it: -32005.
    pub max_filters: usize,
    /// Installed polling filters from one client address; past it: -32005
    /// (one client cannot take `max_filters` whole).
    pub max_filters_per_client: usize,
    /// Open WebSocket connections from one client address; a handshake past
    /// it is answered HTTP 503 (one client cannot take `ws_max_connections`
    /// whole).
    pub ws_max_connections_per_client: usize,
    /// A filter not polled with `eth_getFilterChanges` for this long is
    /// removed (geth: 5 minutes).
    pub filter_timeout_ms: u64,
    /// A `debug_trace*` call runs at most this long when it names no
    /// `timeout` (geth: 5 s); past it: "execution timeout".
    pub trace_timeout_ms: u64,
    /// The longest `timeout` a trace call may ask for; above it, this.
    pub trace_max_timeout_ms: u64,
    /// A trace whose output would exceed this many bytes (the struct
    /// logger's steps, or a `trace_*` call's frames and `vmTrace` steps,
    /// estimated while it runs) is stopped with an error instead of being
    /// collected.
    pub trace_max_bytes: usize,
    /// Gas a call run for a caller (`eth_call`, `eth_estimateGas`,
    /// `eth_createAccessList`, `debug_traceCall`; `eth_simulateV1`'s calls
    /// together) may use, whatever it asks for (geth's `--rpc.gascap`, 50M).
    pub gas_cap: u64,
    /// Wall time such a call may run (an estimate's whole search); past it
    /// geth's `execution aborted (timeout = 5s)` (geth's `--rpc.evmtimeout`).
    pub evm_timeout_ms: u64,
    /// EVM memory, all frames together, such a call or a traced call may
    /// use; past it the frame runs out of gas.
    pub evm_memory_limit_bytes: u64,
    /// Threads running the calls that execute the EVM or read many blocks
    /// for a caller, off the HTTP workers; absent: half the cores, at
    /// least one (see [`RpcConfig::call_workers`]).
    pub call_workers: Option<usize>,
    /// Such calls waiting for a call worker; past it (workers all busy and
    /// the queue full) a new one is refused at once with -32005.
    pub call_queue_calls: usize,
    /// The call workers' scheduling niceness (0-19; Linux): when the cores
    /// are busy the chain's threads run first, and calls take what is
    /// left; on an idle machine calls run at full speed.
    pub call_workers_nice: i32,
    /// Run the call workers in Linux's `SCHED_IDLE` class instead (their
    /// niceness then does not matter): they get only CPU the chain leaves,
    /// and a waking chain thread preempts them at once.
    pub call_workers_sched_idle: bool,
    /// Wall time for one HTTP request or WebSocket message, a batch's calls
    /// together; a call it has no time left for answers -32002 `request
    /// timed out`.
    pub batch_timeout_ms: u64,
    /// Namespaces served (`eth`, `net`, `web3`, `txpool`, `debug`, `trace`,
    /// `ots`, `erigon`),
    /// comma-separated, as geth's `--http.api`; a method of another answers
    /// -32601.
    pub apis: String,
    /// Serve on a non-loopback `addr` even though the configuration would
    /// open the node to whoever reaches it: CORS `*`, dev accounts of the
    /// public test mnemonic, or the `debug` namespace (see
    /// [`crate::Config::public_bind_risks`]). Off, such a configuration is
    /// refused at start; on, every risk is logged as a warning at start.
    pub allow_unsafe_public_bind: bool,
}

impl RpcConfig {
    /// HTTP worker threads: as configured, else one per core (a loaded
    /// [`crate::Config`] with a `pipeline.thread_budget` has its share
    /// filled in).
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or_else(crate::cores)
    }

    /// Call worker threads: as configured, else half the cores (at least
    /// one), so heavy calls never take the whole machine from the chain.
    pub fn call_workers(&self) -> usize {
        self.call_workers.unwrap_or_else(|| (crate::cores() / 2).max(1))
    }

    /// Whether the namespace of `method` (the part before its first `_`)
    /// is served.
    pub fn serves(&self, method: &str) -> bool {
        let namespace = method.split('_').next().unwrap_or_default();
        self.apis.split(',').map(str::trim).any(|api| api == namespace)
    }

    /// Whether a page served from `origin` may call the node (CORS on HTTP,
    /// the `Origin` of a WebSocket handshake).
    pub fn cors_allows(&self, origin: &str) -> bool {
        self.cors_origins.split(',').map(str::trim).any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
    }

    /// Whether any origin may call the node (`*` among the origins).
    pub fn cors_allows_any(&self) -> bool {
        self.cors_origins.split(',').map(str::trim).any(|o| o == "*")
    }

    /// The configured origins (empty: browsers may not call the node).
    pub fn cors_list(&self) -> Vec<&str> {
        self.cors_origins.split(',').map(str::trim).filter(|o| !o.is_empty()).collect()
    }
}

/// Prometheus exporter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Listen address of `/metrics`.
    pub addr: SocketAddr,
}

/// Mempool limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MempoolConfig {
    /// Number of shards.
    pub shards: usize,
    /// Transactions waiting, across shards.
    pub max_txs: usize,
    /// Raw bytes waiting, across shards.
    pub max_bytes: usize,
    /// Transactions of one sender admitted but not executed.
    pub max_txs_per_sender: u32,
    /// Transactions of one sender held for a nonce gap (geth: 64); 0
    /// refuses a nonce above the sender's next one instead.
    pub max_future_txs_per_sender: u32,
    /// Transactions held for nonce gaps, in all (geth: 1,024).
    pub max_future_txs: u32,
    /// How long a held transaction waits for its gap to fill before it is
    /// dropped and reported (geth: 3 h).
    pub future_tx_lifetime_ms: u64,
    /// The fee bump, in percent, a same-sender same-nonce transaction needs
    /// on both its fee cap and its tip to replace a pending or held one
    /// (geth's `txpool.pricebump`, 10).
    pub price_bump_percent: u64,
    /// Largest raw transaction.
    pub max_tx_size_bytes: usize,
    /// Whether every transaction answered with its hash is first written
    /// and synced to the pending-transaction journal (`<data_dir>/txjournal`),
    /// and the journal offered again at start, so a kill loses none of
    /// them. Off: answered from memory (faster; for measuring).
    pub journal: bool,
    /// The journal's size at which it is rewritten with only the
    /// transactions still pending; while those alone take more than half
    /// of it, new transactions are refused (`txpool is full`).
    pub journal_max_bytes: u64,
}

/// Block production.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProducerConfig {
    /// Longest wait before sealing a non-empty block.
    pub block_time_ms: u64,
    /// Most transactions per block.
    pub max_block_txs: usize,
    /// Most raw bytes per block.
    pub max_block_bytes: usize,
    /// A block is sealed, empty if nothing waits, when none was sealed for
    /// this long; 0: never (the chain moves only with transactions).
    pub idle_block_interval_ms: u64,
}

/// Mailboxes and workers between stages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Nonce reservation mailbox, in admissions (one message is one
    /// JSON-RPC batch's transactions).
    pub admission_mailbox_msgs: usize,
    /// Each mempool shard's mailbox, in inserts (one message is what one
    /// admission batch brought the shard).
    pub shard_mailbox_msgs: usize,
    /// Block producer mailbox.
    pub producer_mailbox_msgs: usize,
    /// Sealed blocks waiting for preparation.
    pub prepare_mailbox_blocks: usize,
    /// Prepared blocks waiting for execution.
    pub prepare_ahead_blocks: usize,
    /// Executed blocks waiting for commit.
    pub commit_mailbox_blocks: usize,
    /// Threads the node's CPU pools share (HTTP, recovery, preparation,
    /// execution, consensus): each pool not sized explicitly gets its
    /// weight's share, at least one (see `threads.rs`); absent: no budget,
    /// each pool one thread per core.
    pub thread_budget: Option<usize>,
    /// Hashing and recovery threads; absent: one per core, or a
    /// share of `thread_budget`.
    pub prepare_workers: Option<usize>,
    /// Threads checking submitted transactions and recovering their
    /// senders (admission's recovery stage); absent: one per core, or
    /// a share of `pipeline.thread_budget`.
    pub recovery_workers: Option<usize>,
    /// Submitted transactions waiting for recovery; past it submissions are
    /// answered `txpool is full`.
    pub recovery_queue_txs: usize,
    /// Prepared-transaction cache entries.
    pub prepared_cache_txs: usize,
    /// Parallel executor worker threads; absent: one per core, or a
    /// share of `thread_budget` (with one, blocks of contract calls run in order).
    pub execute_workers: Option<usize>,
    /// Smallest block executed in parallel.
    pub occ_min_block_txs: usize,
    /// With 2+ workers, blocks of contract calls run on lanes even while
    /// admission recovers senders; false: in order then (its threads hold
    /// the cores lanes would hand chunks between).
    pub occ_lanes_while_admitting: bool,
}

impl PipelineConfig {
    /// Block preparation's hashing and recovery threads: as configured
    /// (a loaded [`crate::Config`] has a budget's share filled in), else
    /// one per core.
    pub fn prepare_workers(&self) -> usize {
        self.prepare_workers.unwrap_or_else(crate::cores)
    }

    /// Admission's recovery threads: as configured (or filled from the
    /// budget at load), else one per core.
    pub fn recovery_workers(&self) -> usize {
        self.recovery_workers.unwrap_or_else(crate::cores)
    }

    /// The parallel executor's threads: as configured (or filled from the
    /// budget at load), else one per core.
    pub fn execute_workers(&self) -> usize {
        self.execute_workers.unwrap_or_else(crate::cores)
    }
}

/// What a node keeps of its chain (`store.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreMode {
    /// A window: the last `store.block_retention_blocks` blocks and the
    /// last `store.history_blocks` blocks' state; the disk stays bounded.
    Full,
    /// Everything from genesis: every block and every block's state.
    Archive,
}

/// Chain data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Data directory.
    pub data_dir: PathBuf,
    /// Sync every Nth block (1 = every block).
    pub sync_every_blocks: u32,
    /// Recent blocks kept in memory.
    pub cache_blocks: usize,
    /// The database's own block cache, in bytes.
    pub db_cache_bytes: usize,
    /// The database's write buffers (all memtables together), in bytes.
    pub db_write_buffer_bytes: u64,
    /// The database's background threads (flushes and compactions).
    pub db_worker_threads: usize,
    /// Current accounts kept in memory, in bytes (the rest are on disk).
    pub account_cache_bytes: u64,
    /// Current storage slots kept in memory, in bytes.
    pub storage_cache_bytes: u64,
    /// Contract code kept in memory, in bytes.
    pub code_cache_bytes: u64,
    /// What this node keeps of its chain: a window of it (`full`) or all
    /// of it (`archive`).
    pub mode: StoreMode,
    /// Full mode: state history kept: reads answer at the last this many
    /// blocks (like a geth full node's 128). Archive mode keeps every
    /// block's.
    pub history_blocks: u64,
    /// Full mode: blocks kept (bodies, receipts, transactions, logs and
    /// their indexes); older ones answer "pruned history unavailable" and
    /// leave the disk. Archive mode keeps every block.
    pub block_retention_blocks: u64,
    /// Write the address index (each address's transactions, for
    /// Otterscan's `ots_searchTransactionsBefore`/`After`) with every
    /// committed block. Off by default: a commit ~40% slower (PERFORMANCE.md).
    /// Blocks committed while it is off are never indexed.
    pub address_index: bool,
    /// Fault injection: the commit of this height fails (0 = never).
    pub inject_commit_failure_at_height: u64,
    /// Fault injection: this height's app hash is perturbed, and so every
    /// later one, as if this node's state had diverged (0 = never). Used to
    /// prove that validators catch and halt a diverged node.
    pub inject_app_hash_divergence_at_height: u64,
}

/// Running as a follower: no vote and no block production; executes what
/// the validators of `consensus.validators_file` finalize, verifying every
/// finalization against that set, and serves it over RPC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowerConfig {
    /// Follow instead of validate (`sluice node --follow`). Needs
    /// `consensus.validators_file`, `consensus.key_file` (the follower's
    /// own key) and `consensus.p2p_listen`; the validators list the
    /// follower in their `consensus.followers_file`.
    pub enabled: bool,
    /// Follow over the finalized-block feed of these nodes instead of p2p:
    /// comma-separated WebSocket URLs (`ws://host:port`) of validators or
    /// followers serving `consensus_subscribe`, tried in turn with backoff.
    /// Empty: a p2p secondary peer of the validators.
    pub upstreams: String,
}

impl FollowerConfig {
    /// The upstream URLs, in order.
    pub fn upstream_list(&self) -> Vec<String> {
        self.upstreams.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
    }
}

/// Running as one of N validators (empty `validators_file`: a single node,
/// exactly as without this section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsensusConfig {
    /// The validator set file (`sluice testnet init` writes it), identical
    /// on every validator; empty: single-node mode.
    pub validators_file: PathBuf,
    /// This validator's ed25519 key (hex), readable by its owner only (a
    /// follower's own key: its p2p identity, never a validator's).
    pub key_file: PathBuf,
    /// Where to listen for the other validators.
    pub p2p_listen: SocketAddr,
    /// The followers this validator accepts as p2p peers that receive
    /// blocks and certificates but never vote (`sluice testnet init
    /// --followers N` writes it). Not part of the validator set's hash:
    /// adding a follower changes no vote. Empty: none.
    pub followers_file: PathBuf,
    /// How long a view waits for its leader's proposal.
    pub leader_timeout_ms: u64,
    /// How long a view waits for a notarized proposal to be certified
    /// (greater than `leader_timeout_ms`).
    pub certification_timeout_ms: u64,
    /// How often a timed-out view is retried.
    pub timeout_retry_ms: u64,
    /// A leader no vote has been seen from for this long, while a quorum
    /// voted, has its views skipped at once instead of waiting out
    /// `leader_timeout_ms` (greater than `certification_timeout_ms` and
    /// `timeout_retry_ms`, as simplex requires).
    pub skip_timeout_ms: u64,
    /// How long to wait for a block or certificate fetched from a peer.
    pub fetch_timeout_ms: u64,
    /// How often this validator pings each peer's connection, so that the
    /// peer can tell a quiet link from a dead one. Keep equal on every
    /// validator: a peer drops pings faster than half its own interval.
    pub p2p_ping_interval_ms: u64,
    /// A peer connection that brings no byte (not even a ping) for this
    /// long is dropped and redialled: a path that went dead (a cut link, a
    /// partition) would otherwise resume only at TCP's next backed-off
    /// retransmission, up to tens of seconds after it heals. At least 2x
    /// `p2p_ping_interval_ms`.
    pub p2p_idle_timeout_ms: u64,
    /// How long one dial of a peer (connect and handshake) may take before
    /// it is abandoned and tried afresh: a dial sent into a dead path
    /// waits on the kernel's SYN backoff, so a long one would outlast the
    /// heal by seconds.
    pub p2p_dial_timeout_ms: u64,
    /// The least time between two connection attempts with one peer (its
    /// dials and its accepts alike). While it runs, the peer's own dial to
    /// this validator is refused, so two validators redialling each other
    /// after a heal collide until their attempts drift apart: short is fast.
    pub p2p_reconnect_cooldown_ms: u64,
    /// A leader whose mempool is empty waits up to this long for a first
    /// transaction before proposing an empty block (below
    /// `leader_timeout_ms`); 0: it proposes after `producer.block_time_ms`.
    pub empty_block_wait_ms: u64,
    /// A proposal more than this many blocks ahead of this node's committed
    /// height is empty: execution is behind, and full blocks would only
    /// deepen the lag.
    pub max_exec_lag_blocks: u64,
    /// Finalized blocks handed to execution and not yet committed.
    pub max_pending_acks: usize,
    /// Threads of the consensus runtime; absent: one per core, or
    /// a share of `pipeline.thread_budget`.
    pub worker_threads: Option<usize>,
    /// Messages per second from one peer on the vote and certificate
    /// channels.
    pub votes_per_second_per_peer: u32,
    /// Messages per second from one peer on the block channels.
    pub blocks_per_second_per_peer: u32,
    /// Transaction batches per second from one peer (the transaction
    /// channel); at least `1000 / gossip_interval_ms`, so that every
    /// batch a validator sends fits its peers' quota.
    pub gossip_batches_per_second_per_peer: u32,
    /// At least this long between two transaction batches a validator
    /// sends to the others.
    pub gossip_interval_ms: u64,
    /// Transactions in one batch, sent or accepted.
    pub gossip_batch_max_txs: usize,
    /// Encoded bytes of one batch, sent or accepted (at most the p2p
    /// network's largest message).
    pub gossip_batch_max_bytes: usize,
    /// Transactions admitted here and waiting to be sent to the others;
    /// past it a transaction is not sent (it is still proposed when this
    /// validator leads), counted in `sluice_gossip_unsent_txs_total`.
    pub gossip_queue_txs: usize,
}

impl ConsensusConfig {
    /// Threads of the consensus runtime: as configured, else one per core
    /// (a loaded [`crate::Config`] with a `pipeline.thread_budget` has its
    /// share filled in).
    pub fn worker_threads(&self) -> usize {
        self.worker_threads.unwrap_or_else(crate::cores)
    }
}

impl StoreConfig {
    /// State history kept, in blocks, as the store takes it (0: all).
    pub fn kept_history_blocks(&self) -> u64 {
        match self.mode {
            StoreMode::Full => self.history_blocks,
            StoreMode::Archive => 0,
        }
    }

    /// Blocks kept, as the store takes it (0: all).
    pub fn kept_blocks(&self) -> u64 {
        match self.mode {
            StoreMode::Full => self.block_retention_blocks,
            StoreMode::Archive => 0,
        }
    }
}
