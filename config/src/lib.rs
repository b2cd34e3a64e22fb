//! sluice's configuration, layered (later wins):
//!
//! 1. `config/default.toml`, embedded in the binary (alone, it is
//!    [`Config::default`]),
//! 2. the `--config FILE` file (TOML),
//! 3. `SLUICE_*` environment variables, `__` separating sections
//!    (`SLUICE_MEMPOOL__MAX_TXS=100000`),
//! 4. command-line flags, passed as [`Overrides`].
//!
//! Unknown keys are errors, so a typo never silently falls back to a default.
//! Every limit has its unit in its name.

use std::{net::SocketAddr, path::PathBuf};

use serde::{Deserialize, Serialize};

/// The embedded default configuration file.
pub const DEFAULT_TOML: &str = include_str!("../default.toml");

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source could not be read or a value has the wrong type.
    #[error("configuration error: {0}")]
    Load(#[from] config::ConfigError),
    /// Values parse but make no sense together.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// The BIP-39 mnemonic anvil, hardhat and sluice fund dev accounts from
/// by default. It is published: whoever reaches a node funding its accounts
/// can spend their ether.
pub const TEST_MNEMONIC: &str = "test test test test test test test test test test test junk";

/// The machine's cores (1 if unknown): the thread pools' size where the
/// configuration leaves it out.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The fewest blocks a full node keeps (`store.block_retention_blocks`):
/// BLOCKHASH reads the last 256 blocks' hashes while executing (the store
/// holds the same bound).
pub const MIN_BLOCK_RETENTION: u64 = 256;

/// EVM rule set (defined in `sluice-messages`, shared by every stage).
pub use sluice_messages::Spec;

mod sections;
pub mod threads;

pub use sections::*;
use threads::Pool;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Chain parameters and genesis.
    pub chain: ChainConfig,
    /// JSON-RPC server.
    pub rpc: RpcConfig,
    /// Prometheus exporter.
    pub metrics: MetricsConfig,
    /// Mempool limits.
    pub mempool: MempoolConfig,
    /// Block production.
    pub producer: ProducerConfig,
    /// Mailboxes and workers between stages.
    pub pipeline: PipelineConfig,
    /// Chain data.
    pub store: StoreConfig,
    /// Fault injection (tests and drills).
    pub faults: FaultsConfig,
    /// Panic containment and escalation.
    pub supervision: SupervisionConfig,
    /// Validator mode.
    pub consensus: ConsensusConfig,
    /// Follower mode.
    pub follower: FollowerConfig,
}

/// Values given on the command line; `None` leaves the layers below alone.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
    /// `--rpc-addr`.
    pub rpc_addr: Option<SocketAddr>,
    /// `--metrics-addr`.
    pub metrics_addr: Option<SocketAddr>,
    /// `--chain-id`.
    pub chain_id: Option<u64>,
    /// `--block-time-ms`.
    pub block_time_ms: Option<u64>,
    /// `--max-block-txs`.
    pub max_block_txs: Option<usize>,
    /// `--idle-block-interval-ms`.
    pub idle_block_interval_ms: Option<u64>,
    /// `--block-gas-limit`.
    pub block_gas_limit: Option<u64>,
    /// `--dev-accounts`.
    pub dev_accounts: Option<u32>,
    /// `--genesis`.
    pub genesis_file: Option<PathBuf>,
    /// `--follow`.
    pub follow: Option<bool>,
}

/// The embedded `config/default.toml`, the one place the defaults are
/// written, so the file operators read and the values a bare `Config`
/// holds cannot disagree.
impl Default for Config {
    fn default() -> Self {
        // `Default` cannot fail, and need not: the text is compiled into
        // the binary, so whether it parses is settled when the crate is
        // built, not by the machine or the user running it. The unit test
        // `the_embedded_default_toml_parses_and_validates` runs this very
        // parse, so a build whose tests pass cannot panic here.
        Config::embedded().expect("the embedded default.toml parses (unit-tested)")
    }
}

impl Config {
    /// The first layer, the embedded `default.toml`: [`Config::load`]
    /// builds on it and [`Config::default`] is it alone.
    fn defaults() -> config::ConfigBuilder<config::builder::DefaultState> {
        use config::{File, FileFormat};
        config::Config::builder().add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml))
    }

    /// The embedded `default.toml` alone, parsed the way [`Config::load`]
    /// parses it (not validated: `load` validates what the layers make).
    fn embedded() -> Result<Config, ConfigError> {
        Ok(Config::defaults().build()?.try_deserialize()?)
    }

    /// Loads the layers: embedded defaults, then `file`, then the environment
    /// (`env`: pairs such as `("SLUICE_RPC__ADDR", "...")`, normally
    /// `std::env::vars()`), then `overrides`.
    pub fn load(
        file: Option<&std::path::Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        use config::{Environment, File, FileFormat};
        let env_map: std::collections::HashMap<String, String> =
            env.into_iter().filter(|(k, _)| k.starts_with("SLUICE_")).collect();
        let mut builder = Config::defaults();
        if let Some(path) = file {
            builder = builder.add_source(File::from(path).format(FileFormat::Toml).required(true));
        }
        builder = builder.add_source(
            Environment::with_prefix("SLUICE")
                .prefix_separator("_")
                .separator("__")
                .try_parsing(true)
                .source(Some(env_map)),
        );
        let mut cfg: Config = builder.build()?.try_deserialize()?;
        cfg.apply(overrides);
        cfg.validate()?;
        cfg.share_threads();
        Ok(cfg)
    }

    /// Sizes every pool left unsized from `pipeline.thread_budget`, if one
    /// is set, so that whoever reads a pool's size from its own section
    /// (the RPC server, the consensus runtime) sees the budget.
    fn share_threads(&mut self) {
        let Some(budget) = self.pipeline.thread_budget else { return };
        let p = &mut self.pipeline;
        for (size, pool) in [
            (&mut self.rpc.workers, Pool::Http),
            (&mut p.recovery_workers, Pool::Recovery),
            (&mut p.prepare_workers, Pool::Prepare),
            (&mut p.execute_workers, Pool::Execute),
            (&mut self.consensus.worker_threads, Pool::Consensus),
        ] {
            size.get_or_insert_with(|| threads::share(pool, budget));
        }
    }

    fn apply(&mut self, o: &Overrides) {
        if let Some(v) = &o.data_dir {
            self.store.data_dir = v.clone();
        }
        if let Some(v) = o.rpc_addr {
            self.rpc.addr = v;
        }
        if let Some(v) = o.metrics_addr {
            self.metrics.addr = v;
        }
        if let Some(v) = o.chain_id {
            self.chain.chain_id = v;
        }
        if let Some(v) = o.block_time_ms {
            self.producer.block_time_ms = v;
        }
        if let Some(v) = o.max_block_txs {
            self.producer.max_block_txs = v;
        }
        if let Some(v) = o.idle_block_interval_ms {
            self.producer.idle_block_interval_ms = v;
        }
        if let Some(v) = o.block_gas_limit {
            self.chain.block_gas_limit = v;
        }
        if let Some(v) = o.dev_accounts {
            self.chain.dev_accounts = v;
        }
        if let Some(v) = o.follow {
            self.follower.enabled = v;
        }
        if let Some(v) = &o.genesis_file {
            self.chain.genesis_file = v.clone();
        }
    }

    /// Rejects values that parse but cannot work: zero-sized bounds (a bound
    /// of zero would deadlock the pipeline or refuse everything) and limits
    /// that contradict each other.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive: [(&str, u64); 60] = [
            ("store.sync_every_blocks", u64::from(self.store.sync_every_blocks)),
            ("store.cache_blocks", self.store.cache_blocks as u64),
            ("store.db_cache_bytes", self.store.db_cache_bytes as u64),
            ("store.db_write_buffer_bytes", self.store.db_write_buffer_bytes),
            ("store.db_worker_threads", self.store.db_worker_threads as u64),
            ("store.account_cache_bytes", self.store.account_cache_bytes),
            ("store.storage_cache_bytes", self.store.storage_cache_bytes),
            ("store.code_cache_bytes", self.store.code_cache_bytes),
            ("chain.chain_id", self.chain.chain_id),
            ("chain.block_gas_limit", self.chain.block_gas_limit),
            ("rpc.workers", self.rpc.workers() as u64),
            ("rpc.max_request_body_bytes", self.rpc.max_request_body_bytes as u64),
            ("rpc.max_batch_len", self.rpc.max_batch_len as u64),
            ("rpc.max_response_bytes", self.rpc.max_response_bytes as u64),
            ("rpc.max_connections_per_worker", self.rpc.max_connections_per_worker as u64),
            ("rpc.keep_alive_ms", self.rpc.keep_alive_ms),
            ("rpc.client_request_timeout_ms", self.rpc.client_request_timeout_ms),
            ("rpc.read_timeout_ms", self.rpc.read_timeout_ms),
            ("rpc.write_timeout_ms", self.rpc.write_timeout_ms),
            ("rpc.ws_max_connections", self.rpc.ws_max_connections as u64),
            ("rpc.ots_max_page_txs", self.rpc.ots_max_page_txs),
            ("rpc.trace_filter_max_blocks", self.rpc.trace_filter_max_blocks),
            ("rpc.send_sync_timeout_ms", self.rpc.send_sync_timeout_ms),
            ("rpc.pending_feed_txs", self.rpc.pending_feed_txs as u64),
            ("rpc.finalized_feed_blocks", self.rpc.finalized_feed_blocks as u64),
            ("rpc.send_sync_max_timeout_ms", self.rpc.send_sync_max_timeout_ms),
            ("rpc.ws_max_subscriptions_per_connection", self.rpc.ws_max_subscriptions_per_connection as u64),
            ("rpc.ws_max_lag_blocks", self.rpc.ws_max_lag_blocks),
            ("rpc.ws_send_timeout_ms", self.rpc.ws_send_timeout_ms),
            ("rpc.ws_ping_interval_ms", self.rpc.ws_ping_interval_ms),
            ("rpc.max_filters", self.rpc.max_filters as u64),
            ("rpc.max_filters_per_client", self.rpc.max_filters_per_client as u64),
            ("rpc.ws_max_connections_per_client", self.rpc.ws_max_connections_per_client as u64),
            ("rpc.filter_timeout_ms", self.rpc.filter_timeout_ms),
            ("rpc.trace_timeout_ms", self.rpc.trace_timeout_ms),
            ("rpc.trace_max_timeout_ms", self.rpc.trace_max_timeout_ms),
            ("rpc.trace_max_bytes", self.rpc.trace_max_bytes as u64),
            ("rpc.gas_cap", self.rpc.gas_cap),
            ("rpc.evm_timeout_ms", self.rpc.evm_timeout_ms),
            ("rpc.evm_memory_limit_bytes", self.rpc.evm_memory_limit_bytes),
            ("rpc.call_workers", self.rpc.call_workers() as u64),
            ("rpc.call_queue_calls", self.rpc.call_queue_calls as u64),
            ("rpc.batch_timeout_ms", self.rpc.batch_timeout_ms),
            ("mempool.shards", self.mempool.shards as u64),
            ("mempool.max_txs", self.mempool.max_txs as u64),
            ("mempool.max_txs_per_sender", u64::from(self.mempool.max_txs_per_sender)),
            // geth raises a bump below 1 to its default: a replacement
            // must always cost more.
            ("mempool.price_bump_percent", self.mempool.price_bump_percent),
            // 0 would drop every held transaction at the next sweep; hold
            // none with mempool.max_future_txs_per_sender = 0 instead.
            ("mempool.future_tx_lifetime_ms", self.mempool.future_tx_lifetime_ms),
            ("mempool.journal_max_bytes", self.mempool.journal_max_bytes),
            ("producer.block_time_ms", self.producer.block_time_ms),
            ("producer.max_block_txs", self.producer.max_block_txs as u64),
            ("pipeline.admission_mailbox_msgs", self.pipeline.admission_mailbox_msgs as u64),
            ("pipeline.shard_mailbox_msgs", self.pipeline.shard_mailbox_msgs as u64),
            ("pipeline.prepare_ahead_blocks", self.pipeline.prepare_ahead_blocks as u64),
            ("pipeline.commit_mailbox_blocks", self.pipeline.commit_mailbox_blocks as u64),
            ("pipeline.thread_budget", self.pipeline.thread_budget.unwrap_or(1) as u64),
            ("pipeline.prepare_workers", self.pipeline.prepare_workers() as u64),
            ("pipeline.recovery_workers", self.pipeline.recovery_workers() as u64),
            ("pipeline.execute_workers", self.pipeline.execute_workers() as u64),
            ("pipeline.recovery_queue_txs", self.pipeline.recovery_queue_txs as u64),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("{name} must be greater than 0")));
            }
        }
        if self.pipeline.prepare_mailbox_blocks == 0 || self.pipeline.producer_mailbox_msgs == 0 {
            return Err(ConfigError::Invalid("pipeline mailboxes must be greater than 0".into()));
        }
        if self.mempool.max_tx_size_bytes > self.mempool.max_bytes
            || self.mempool.max_tx_size_bytes > self.producer.max_block_bytes
        {
            return Err(ConfigError::Invalid(
                "mempool.max_tx_size_bytes exceeds mempool.max_bytes or producer.max_block_bytes".into(),
            ));
        }
        // The journal refuses new transactions while pending ones take half
        // of it: half must hold at least the largest transaction.
        if self.mempool.journal_max_bytes / 2 < self.mempool.max_tx_size_bytes as u64 + 64 {
            return Err(ConfigError::Invalid(format!(
                "mempool.journal_max_bytes ({}) must hold twice mempool.max_tx_size_bytes ({}) and its record headers",
                self.mempool.journal_max_bytes, self.mempool.max_tx_size_bytes
            )));
        }
        // Admitted transactions evicted from the cache before their block is
        // prepared get their senders recovered again on the ordered path.
        if self.pipeline.prepared_cache_txs < self.mempool.max_txs {
            return Err(ConfigError::Invalid(format!(
                "pipeline.prepared_cache_txs ({}) must hold at least mempool.max_txs ({})",
                self.pipeline.prepared_cache_txs, self.mempool.max_txs
            )));
        }
        // Negative would raise calls above the chain (and needs privilege).
        if !(0..=19).contains(&self.rpc.call_workers_nice) {
            return Err(ConfigError::Invalid(format!(
                "rpc.call_workers_nice must be 0-19, not {}",
                self.rpc.call_workers_nice
            )));
        }
        if self.supervision.window_ms == 0 {
            return Err(ConfigError::Invalid("supervision.window_ms must be greater than 0".into()));
        }
        // The debug_ namespace can arm a panic anywhere: never reachable
        // from another host.
        if self.faults.debug_rpc && !self.rpc.addr.ip().is_loopback() {
            return Err(ConfigError::Invalid(format!(
                "faults.debug_rpc needs a loopback rpc.addr, not {}",
                self.rpc.addr
            )));
        }
        // Free gas makes spam free: anyone could fill every block and the
        // mempool at no cost to themselves.
        if self.chain.base_fee_wei == 0 {
            return Err(ConfigError::Invalid(
                "chain.base_fee_wei must be greater than 0: with no base fee, transactions cost nothing, \
                 so anyone can fill blocks and the mempool for free"
                    .into(),
            ));
        }
        let risks = self.public_bind_risks();
        if !risks.is_empty() && !self.rpc.allow_unsafe_public_bind {
            return Err(ConfigError::Invalid(format!(
                "rpc.addr {} is not a loopback address, so other hosts can reach this node, and {}. Fix that, \
                 bind rpc.addr to 127.0.0.1, or set rpc.allow_unsafe_public_bind = true to serve anyway",
                self.rpc.addr,
                risks.join("; and ")
            )));
        }
        self.validate_store()?;
        self.validate_consensus()?;
        if self.chain.block_gas_limit < 21_000 {
            return Err(ConfigError::Invalid("chain.block_gas_limit is below 21000".into()));
        }
        Ok(())
    }
}

impl Config {
    /// What would open this node to whoever reaches it, if its `rpc.addr`
    /// is not a loopback address (empty if it is, or if nothing would):
    /// CORS `*` (any web page a browser opens, anywhere, could drive it),
    /// dev accounts from the public [`TEST_MNEMONIC`] (anyone has their
    /// keys) and the `debug`, `trace` and `ots` namespaces (the heaviest
    /// calls there are, open to all). Refused unless
    /// `rpc.allow_unsafe_public_bind`; logged as warnings at start when
    /// allowed.
    pub fn public_bind_risks(&self) -> Vec<String> {
        let mut risks = Vec::new();
        if self.rpc.addr.ip().is_loopback() {
            return risks;
        }
        if self.rpc.cors_allows_any() {
            risks.push(
                "rpc.cors_origins allows any origin (\"*\"): any web page, opened by anyone who can reach \
                 this node, could drive it; list the origins that may call it, or \"\" for none"
                    .to_string(),
            );
        }
        if self.chain.funds_public_keys() {
            risks.push(format!(
                "chain.dev_accounts funds {} accounts of the public test mnemonic (\"test test ... junk\"): \
                 everyone has their keys and can spend their ether; set chain.mnemonic to one of your own, \
                 or chain.dev_accounts = 0",
                self.chain.dev_accounts
            ));
        }
        let traces: Vec<&str> =
            ["debug", "trace", "ots"].into_iter().filter(|api| self.rpc.serves(&format!("{api}_"))).collect();
        if !traces.is_empty() {
            let served = traces.join(" and ");
            risks.push(format!(
                "rpc.apis serves {served}: debug_trace*, trace_* and ots_* (which re-execute transactions \
                 and search the state history) are the heaviest calls there are, and anyone could run \
                 them; remove {served} from rpc.apis"
            ));
        }
        risks
    }

    /// This configuration as it may be shown: the mnemonic replaced by
    /// `<redacted: N words>`. A mnemonic is every dev account's key, so it
    /// is never printed, whichever it is.
    pub fn redacted(&self) -> Config {
        let mut shown = self.clone();
        let words = self.chain.mnemonic.split_whitespace().count();
        shown.chain.mnemonic = format!("<redacted: {words} words>");
        shown
    }

    /// Whether this node runs as a validator.
    pub fn is_validator(&self) -> bool {
        self.in_network() && !self.follower.enabled
    }

    /// Whether this node runs as a follower.
    pub fn is_follower(&self) -> bool {
        self.follower.enabled
    }

    /// Whether this node is part of a network of validators (a validator
    /// or a follower of one), rather than a single node.
    pub fn in_network(&self) -> bool {
        !self.consensus.validators_file.as_os_str().is_empty()
    }

    /// A full node's windows: each bounded (0 would keep everything,
    /// which is archive mode, said by its name), and the blocks at least
    /// what execution reads back (BLOCKHASH: 256).
    fn validate_store(&self) -> Result<(), ConfigError> {
        if self.store.mode != StoreMode::Full {
            return Ok(());
        }
        if self.store.history_blocks == 0 {
            return Err(ConfigError::Invalid(
                "store.history_blocks must be greater than 0 in full mode; to keep every block's state, set \
                 store.mode = \"archive\""
                    .into(),
            ));
        }
        // Blocks reported committed but not yet synced (grouped syncs) may
        // be lost with power and replayed from consensus's archives, which
        // keep the same retention.
        if self.store.block_retention_blocks <= u64::from(self.store.sync_every_blocks) {
            return Err(ConfigError::Invalid(format!(
                "store.block_retention_blocks ({}) must exceed store.sync_every_blocks ({})",
                self.store.block_retention_blocks, self.store.sync_every_blocks
            )));
        }
        if self.store.block_retention_blocks < MIN_BLOCK_RETENTION {
            return Err(ConfigError::Invalid(format!(
                "store.block_retention_blocks must be at least {MIN_BLOCK_RETENTION} (execution reads the last 256 \
                 blocks' hashes), not {}; to keep every block, set store.mode = \"archive\"",
                self.store.block_retention_blocks
            )));
        }
        Ok(())
    }

    fn validate_consensus(&self) -> Result<(), ConfigError> {
        if self.follower.enabled && !self.in_network() {
            return Err(ConfigError::Invalid(
                "follower.enabled needs consensus.validators_file: the validator set whose finalizations the \
                 follower verifies"
                    .into(),
            ));
        }
        if let Some(bad) = self.follower.upstream_list().into_iter().find(|u| !u.starts_with("ws://")) {
            return Err(ConfigError::Invalid(format!(
                "follower.upstreams: {bad:?} is not a ws:// URL (a node's JSON-RPC address, as ws://host:port)"
            )));
        }
        if !self.in_network() {
            return Ok(());
        }
        let c = &self.consensus;
        if c.key_file.as_os_str().is_empty() {
            return Err(ConfigError::Invalid(
                "consensus.key_file is required with consensus.validators_file".into(),
            ));
        }
        let positive: [(&str, u64); 19] = [
            ("consensus.leader_timeout_ms", c.leader_timeout_ms),
            ("consensus.certification_timeout_ms", c.certification_timeout_ms),
            ("consensus.timeout_retry_ms", c.timeout_retry_ms),
            ("consensus.skip_timeout_ms", c.skip_timeout_ms),
            ("consensus.fetch_timeout_ms", c.fetch_timeout_ms),
            ("consensus.p2p_ping_interval_ms", c.p2p_ping_interval_ms),
            ("consensus.p2p_idle_timeout_ms", c.p2p_idle_timeout_ms),
            ("consensus.p2p_dial_timeout_ms", c.p2p_dial_timeout_ms),
            ("consensus.p2p_reconnect_cooldown_ms", c.p2p_reconnect_cooldown_ms),
            ("consensus.max_exec_lag_blocks", c.max_exec_lag_blocks),
            ("consensus.max_pending_acks", c.max_pending_acks as u64),
            ("consensus.worker_threads", c.worker_threads() as u64),
            ("consensus.votes_per_second_per_peer", u64::from(c.votes_per_second_per_peer)),
            ("consensus.blocks_per_second_per_peer", u64::from(c.blocks_per_second_per_peer)),
            ("consensus.gossip_batches_per_second_per_peer", u64::from(c.gossip_batches_per_second_per_peer)),
            ("consensus.gossip_interval_ms", c.gossip_interval_ms),
            ("consensus.gossip_batch_max_txs", c.gossip_batch_max_txs as u64),
            ("consensus.gossip_batch_max_bytes", c.gossip_batch_max_bytes as u64),
            ("consensus.gossip_queue_txs", c.gossip_queue_txs as u64),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("{name} must be greater than 0")));
            }
        }
        // The leader seals after up to one block time: a shorter view would
        // time out while its proposal is being sealed.
        if c.leader_timeout_ms <= self.producer.block_time_ms {
            return Err(ConfigError::Invalid(format!(
                "consensus.leader_timeout_ms ({}) must exceed producer.block_time_ms ({})",
                c.leader_timeout_ms, self.producer.block_time_ms
            )));
        }
        if c.certification_timeout_ms <= c.leader_timeout_ms {
            return Err(ConfigError::Invalid(
                "consensus.certification_timeout_ms must exceed consensus.leader_timeout_ms".into(),
            ));
        }
        // The leader's proposal must reach the others before they give up
        // on it: leave at least a fifth of the leader timeout for the
        // network.
        if c.empty_block_wait_ms > c.leader_timeout_ms * 4 / 5 {
            return Err(ConfigError::Invalid(format!(
                "consensus.empty_block_wait_ms ({}) must be at most 4/5 of consensus.leader_timeout_ms ({})",
                c.empty_block_wait_ms, c.leader_timeout_ms
            )));
        }
        // A validator sending faster than its peers accept would have its
        // batches dropped by their quota.
        if u64::from(c.gossip_batches_per_second_per_peer) * c.gossip_interval_ms < 1000 {
            return Err(ConfigError::Invalid(format!(
                "consensus.gossip_batches_per_second_per_peer ({}) must be at least 1000 / \
                 consensus.gossip_interval_ms ({})",
                c.gossip_batches_per_second_per_peer, c.gossip_interval_ms
            )));
        }
        // The largest transaction must fit a batch on its own.
        if c.gossip_batch_max_bytes < self.mempool.max_tx_size_bytes + 8 {
            return Err(ConfigError::Invalid(format!(
                "consensus.gossip_batch_max_bytes ({}) must hold one transaction of mempool.max_tx_size_bytes ({}) \
                 and 8 bytes of framing",
                c.gossip_batch_max_bytes, self.mempool.max_tx_size_bytes
            )));
        }
        // A live peer pings every interval: an idle timeout within two of
        // them would drop a connection for one late ping.
        if c.p2p_idle_timeout_ms < 2 * c.p2p_ping_interval_ms {
            return Err(ConfigError::Invalid(format!(
                "consensus.p2p_idle_timeout_ms ({}) must be at least 2x consensus.p2p_ping_interval_ms ({})",
                c.p2p_idle_timeout_ms, c.p2p_ping_interval_ms
            )));
        }
        // Simplex refuses a skip timeout that a certification or a retry
        // could outlast: a live leader would be skipped while it works.
        if c.skip_timeout_ms <= c.certification_timeout_ms.max(c.timeout_retry_ms) {
            return Err(ConfigError::Invalid(format!(
                "consensus.skip_timeout_ms ({}) must exceed consensus.certification_timeout_ms ({}) and \
                 consensus.timeout_retry_ms ({})",
                c.skip_timeout_ms, c.certification_timeout_ms, c.timeout_retry_ms
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env() -> Vec<(String, String)> {
        Vec::new()
    }

    /// What makes `Config::default`'s `expect` safe: the embedded file
    /// parses (it is the same text in every build of this crate), and it
    /// is a configuration the node accepts.
    #[test]
    fn the_embedded_default_toml_parses_and_validates() {
        let embedded = Config::embedded().unwrap();
        embedded.validate().unwrap();
        assert_eq!(embedded, Config::default());
        let cfg = Config::load(None, no_env(), &Overrides::default()).unwrap();
        assert_eq!(cfg, Config::default());
        // Spot checks that the file is the one the docs describe.
        assert_eq!((cfg.chain.chain_id, cfg.chain.mnemonic.as_str()), (31337, TEST_MNEMONIC));
        assert_eq!(cfg.rpc.addr, SocketAddr::from(([127, 0, 0, 1], 8545)));
    }

    #[test]
    fn layers_apply_in_order_file_env_flags() {
        let dir = std::env::temp_dir().join(format!("sluice-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(&file, "[mempool]\nmax_txs = 7\nshards = 3\n[producer]\nblock_time_ms = 50\n")
            .unwrap();
        let env = vec![
            ("SLUICE_MEMPOOL__MAX_TXS".to_string(), "9".to_string()),
            ("SLUICE_PRODUCER__BLOCK_TIME_MS".to_string(), "60".to_string()),
            ("OTHER".to_string(), "x".to_string()),
        ];
        let flags = Overrides { block_time_ms: Some(70), ..Default::default() };
        let cfg = Config::load(Some(&file), env, &flags).unwrap();
        assert_eq!(cfg.mempool.shards, 3, "file beats defaults");
        assert_eq!(cfg.mempool.max_txs, 9, "env beats file");
        assert_eq!(cfg.producer.block_time_ms, 70, "flags beat env");
        assert_eq!(cfg.mempool.max_txs_per_sender, 1024, "untouched keys keep defaults");
    }

    #[test]
    fn unknown_keys_and_zero_bounds_are_errors() {
        let dir = std::env::temp_dir().join(format!("sluice-cfg-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.toml");
        std::fs::write(&file, "[mempool]\nmax_txz = 7\n").unwrap();
        assert!(Config::load(Some(&file), no_env(), &Overrides::default()).is_err());
        let env = vec![("SLUICE_PIPELINE__COMMIT_MAILBOX_BLOCKS".to_string(), "0".to_string())];
        let err = Config::load(None, env, &Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("commit_mailbox_blocks"), "{err}");
        // A cache smaller than the mempool would send admitted transactions
        // back to sender recovery on the ordered path.
        let env = vec![("SLUICE_PIPELINE__PREPARED_CACHE_TXS".to_string(), "1000".to_string())];
        let err = Config::load(None, env, &Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("prepared_cache_txs"), "{err}");
        // A pool of no threads would never run anything.
        let env = vec![("SLUICE_PIPELINE__EXECUTE_WORKERS".to_string(), "0".to_string())];
        let err = Config::load(None, env, &Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("execute_workers"), "{err}");
    }

    fn env_of(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// The address index is off unless asked for, and Otterscan's search
    /// page is bounded (a bound of 0 would refuse every page).
    #[test]
    fn the_address_index_is_opt_in_and_the_search_page_is_bounded() {
        let cfg = Config::load(None, no_env(), &Overrides::default()).unwrap();
        assert!(!cfg.store.address_index);
        assert_eq!(cfg.rpc.ots_max_page_txs, 25, "Otterscan's page");
        let env = env_of(&[("SLUICE_STORE__ADDRESS_INDEX", "true"), ("SLUICE_RPC__OTS_MAX_PAGE_TXS", "100")]);
        let cfg = Config::load(None, env, &Overrides::default()).unwrap();
        assert!(cfg.store.address_index);
        assert_eq!(cfg.rpc.ots_max_page_txs, 100);
        let err = Config::load(None, env_of(&[("SLUICE_RPC__OTS_MAX_PAGE_TXS", "0")]), &Overrides::default())
            .unwrap_err();
        assert!(err.to_string().contains("rpc.ots_max_page_txs must be greater than 0"), "{err}");
    }

    /// `trace_filter`'s range is bounded (reth's 100 blocks); 0 would
    /// refuse every range.
    #[test]
    fn the_trace_filter_range_is_bounded() {
        let cfg = Config::load(None, no_env(), &Overrides::default()).unwrap();
        assert_eq!(cfg.rpc.trace_filter_max_blocks, 100, "reth's default");
        let env = env_of(&[("SLUICE_RPC__TRACE_FILTER_MAX_BLOCKS", "7")]);
        assert_eq!(Config::load(None, env, &Overrides::default()).unwrap().rpc.trace_filter_max_blocks, 7);
        let err = Config::load(
            None,
            env_of(&[("SLUICE_RPC__TRACE_FILTER_MAX_BLOCKS", "0")]),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("rpc.trace_filter_max_blocks must be greater than 0"), "{err}");
    }

    /// The transaction journal is on by default, can be turned off from
    /// the environment (for measuring), and must hold the largest
    /// transaction twice (it refuses new ones at half).
    #[test]
    fn the_transaction_journal_is_on_and_bounded() {
        let load = |pairs: &[(&str, &str)]| Config::load(None, env_of(pairs), &Overrides::default());
        let cfg = load(&[]).unwrap();
        assert!(cfg.mempool.journal);
        assert_eq!(cfg.mempool.journal_max_bytes, 256 << 20);
        let cfg =
            load(&[("SLUICE_MEMPOOL__JOURNAL", "false"), ("SLUICE_MEMPOOL__JOURNAL_MAX_BYTES", "1048576")])
                .unwrap();
        assert!(!cfg.mempool.journal);
        assert_eq!(cfg.mempool.journal_max_bytes, 1 << 20);
        let err = load(&[("SLUICE_MEMPOOL__JOURNAL_MAX_BYTES", "0")]).unwrap_err().to_string();
        assert!(err.contains("mempool.journal_max_bytes must be greater than 0"), "{err}");
        let err = load(&[("SLUICE_MEMPOOL__JOURNAL_MAX_BYTES", "262144")]).unwrap_err().to_string();
        assert!(err.contains("must hold twice mempool.max_tx_size_bytes"), "{err}");
    }

    /// A full node's windows are bounded (0 would keep everything: that is
    /// archive mode, asked for by name) and keep what execution reads
    /// back; archive mode ignores them.
    #[test]
    fn a_full_node_keeps_bounded_windows_and_an_archive_node_everything() {
        let cfg = Config::load(None, no_env(), &Overrides::default()).unwrap();
        assert_eq!(cfg.store.mode, StoreMode::Full);
        assert_eq!((cfg.store.kept_blocks(), cfg.store.kept_history_blocks()), (100_000, 10_064));
        let load = |pairs: &[(&str, &str)]| Config::load(None, env_of(pairs), &Overrides::default());
        let err = load(&[("SLUICE_STORE__HISTORY_BLOCKS", "0")]).unwrap_err().to_string();
        assert!(
            err.contains("store.history_blocks must be greater than 0") && err.contains("archive"),
            "{err}"
        );
        let err = load(&[("SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "255")]).unwrap_err().to_string();
        assert!(err.contains("store.block_retention_blocks must be at least 256"), "{err}");
        let err = load(&[
            ("SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "300"),
            ("SLUICE_STORE__SYNC_EVERY_BLOCKS", "300"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("must exceed store.sync_every_blocks"), "{err}");
        let cfg = load(&[("SLUICE_STORE__BLOCK_RETENTION_BLOCKS", "256")]).unwrap();
        assert_eq!(cfg.store.kept_blocks(), 256);
        let cfg = load(&[("SLUICE_STORE__MODE", "archive"), ("SLUICE_STORE__HISTORY_BLOCKS", "0")]).unwrap();
        assert_eq!((cfg.store.kept_blocks(), cfg.store.kept_history_blocks()), (0, 0));
        assert!(load(&[("SLUICE_STORE__MODE", "pruned")]).is_err(), "an unknown mode");
    }

    /// A timeout or interval of 0 would turn its guard off (actix has no
    /// head timeout at 0: slowloris) or make no sense; a base fee of 0
    /// makes spam free.
    #[test]
    fn zero_timeouts_and_a_free_base_fee_are_refused() {
        let zero_refused = [
            "rpc.keep_alive_ms",
            "rpc.client_request_timeout_ms",
            "rpc.read_timeout_ms",
            "rpc.write_timeout_ms",
            "rpc.ws_send_timeout_ms",
            "rpc.ws_ping_interval_ms",
            "rpc.send_sync_timeout_ms",
            "rpc.send_sync_max_timeout_ms",
            "rpc.filter_timeout_ms",
            "rpc.trace_timeout_ms",
            "rpc.trace_max_timeout_ms",
            "rpc.evm_timeout_ms",
            "rpc.batch_timeout_ms",
            "mempool.future_tx_lifetime_ms",
            "producer.block_time_ms",
            "supervision.window_ms",
        ];
        for name in zero_refused {
            let var = format!("SLUICE_{}", name.to_uppercase().replace('.', "__"));
            let err = Config::load(None, env_of(&[(&var, "0")]), &Overrides::default()).unwrap_err();
            assert!(err.to_string().contains(&format!("{name} must be greater than 0")), "{var}=0: {err}");
        }
        let err = Config::load(None, env_of(&[("SLUICE_CHAIN__BASE_FEE_WEI", "0")]), &Overrides::default())
            .unwrap_err();
        let said = err.to_string();
        assert!(
            said.contains("chain.base_fee_wei must be greater than 0") && said.contains("for free"),
            "{said}"
        );
        // 0 where it means "off" on purpose stays allowed.
        let env = env_of(&[
            ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "0"),
            ("SLUICE_MEMPOOL__MAX_FUTURE_TXS_PER_SENDER", "0"),
            ("SLUICE_CHAIN__BASE_FEE_WEI", "1"),
        ]);
        Config::load(None, env, &Overrides::default()).unwrap();
    }

    /// A non-loopback `rpc.addr` is refused while CORS `*`, the public
    /// mnemonic's dev accounts or the debug namespace would open the node
    /// to whoever reaches it, each named with its fix, unless opted in.
    #[test]
    fn a_public_rpc_addr_is_refused_while_the_node_would_be_open() {
        let public = Overrides { rpc_addr: Some("0.0.0.0:8545".parse().unwrap()), ..Default::default() };
        // The defaults have all three: each is named.
        let err = Config::load(None, no_env(), &public).unwrap_err().to_string();
        for said in [
            "rpc.addr 0.0.0.0:8545 is not a loopback address",
            "rpc.cors_origins allows any origin",
            "public test mnemonic",
            "rpc.apis serves debug",
            "rpc.allow_unsafe_public_bind = true",
        ] {
            assert!(err.contains(said), "{said:?} missing: {err}");
        }
        // With all three closed, a public address is fine.
        let closed = [
            ("SLUICE_RPC__CORS_ORIGINS", "https://app.example"),
            ("SLUICE_CHAIN__DEV_ACCOUNTS", "0"),
            ("SLUICE_RPC__APIS", "eth,net,web3,txpool"),
        ];
        let cfg = Config::load(None, env_of(&closed), &public).unwrap();
        assert!(cfg.public_bind_risks().is_empty());
        // Otterscan's namespace re-executes transactions as the traces do;
        // erigon's (one header getter) is no risk.
        let mut ots = closed.to_vec();
        ots[2] = ("SLUICE_RPC__APIS", "eth,ots");
        let err = Config::load(None, env_of(&ots), &public).unwrap_err().to_string();
        assert!(err.contains("rpc.apis serves ots:"), "{err}");
        ots[2] = ("SLUICE_RPC__APIS", "eth,erigon");
        assert!(Config::load(None, env_of(&ots), &public).unwrap().public_bind_risks().is_empty());
        // Each one alone is refused.
        for (i, said) in
            ["rpc.cors_origins allows any origin", "public test mnemonic", "rpc.apis serves debug"]
                .iter()
                .enumerate()
        {
            let mut env = closed.to_vec();
            env.remove(i);
            let err = Config::load(None, env_of(&env), &public).unwrap_err().to_string();
            assert!(err.contains(said) && !err.contains("; and "), "{said}: {err}");
        }
        // Dev accounts of a mnemonic of one's own are not public keys.
        let own =
            "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
        let mut env = closed.to_vec();
        env[1] = ("SLUICE_CHAIN__MNEMONIC", own);
        Config::load(None, env_of(&env), &public).unwrap();
        // The opt-in serves anyway, and the risks stay known (to be logged).
        let cfg =
            Config::load(None, env_of(&[("SLUICE_RPC__ALLOW_UNSAFE_PUBLIC_BIND", "true")]), &public).unwrap();
        assert_eq!(cfg.public_bind_risks().len(), 3);
        // ... but never opens the failpoints.
        let env = [("SLUICE_RPC__ALLOW_UNSAFE_PUBLIC_BIND", "true"), ("SLUICE_FAULTS__DEBUG_RPC", "true")];
        let err = Config::load(None, env_of(&env), &public).unwrap_err().to_string();
        assert!(err.contains("faults.debug_rpc needs a loopback rpc.addr"), "{err}");
        // Loopback, v4 or v6, keeps the dev defaults.
        for addr in ["127.0.0.1:8545", "[::1]:8545"] {
            let o = Overrides { rpc_addr: Some(addr.parse().unwrap()), ..Default::default() };
            assert!(Config::load(None, no_env(), &o).unwrap().public_bind_risks().is_empty());
        }
    }

    #[test]
    fn the_mnemonic_is_redacted_where_shown() {
        let cfg = Config::default();
        let shown = cfg.redacted();
        assert_eq!(shown.chain.mnemonic, "<redacted: 12 words>");
        assert_eq!(
            Config { chain: ChainConfig { mnemonic: cfg.chain.mnemonic.clone(), ..shown.chain }, ..shown },
            cfg
        );
    }

    #[test]
    fn thread_pools_are_one_per_core_or_share_a_budget() {
        let cfg = Config::load(None, no_env(), &Overrides::default()).unwrap();
        let cores = cores();
        assert_eq!(cfg.pipeline.thread_budget, None, "no budget by default");
        assert_eq!(cfg.rpc.workers(), cores);
        assert_eq!(cfg.pipeline.prepare_workers(), cores);
        assert_eq!(cfg.pipeline.recovery_workers(), cores);
        assert_eq!(cfg.pipeline.execute_workers(), cores);
        assert_eq!(cfg.consensus.worker_threads(), cores);
        let env = vec![
            ("SLUICE_PIPELINE__THREAD_BUDGET".to_string(), "18".to_string()),
            ("SLUICE_RPC__WORKERS".to_string(), "3".to_string()),
            ("SLUICE_PIPELINE__EXECUTE_WORKERS".to_string(), "5".to_string()),
        ];
        let cfg = Config::load(None, env, &Overrides::default()).unwrap();
        assert_eq!((cfg.rpc.workers(), cfg.pipeline.execute_workers()), (3, 5), "sized explicitly");
        // The others: their weight's share of 18 (recovery 3 of 9,
        // preparation and consensus 1), also where only the section is
        // read.
        assert_eq!(cfg.pipeline.recovery_workers(), 6);
        assert_eq!(cfg.pipeline.prepare_workers(), 2);
        assert_eq!(cfg.consensus.worker_threads(), 2);
        assert_eq!(cfg.consensus.worker_threads, Some(2));
        let zero = vec![("SLUICE_PIPELINE__THREAD_BUDGET".to_string(), "0".to_string())];
        let err = Config::load(None, zero, &Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("pipeline.thread_budget must be greater than 0"), "{err}");
    }

    #[test]
    fn follower_mode_needs_the_validator_set() {
        let follow = Overrides { follow: Some(true), ..Overrides::default() };
        let err = Config::load(None, Vec::new(), &follow).unwrap_err();
        assert!(err.to_string().contains("follower.enabled needs consensus.validators_file"), "{err}");
        let env = vec![
            ("SLUICE_CONSENSUS__VALIDATORS_FILE".to_string(), "/x/validators.toml".to_string()),
            ("SLUICE_CONSENSUS__KEY_FILE".to_string(), "/x/follower.key".to_string()),
        ];
        let cfg = Config::load(None, env.clone(), &follow).unwrap();
        assert!(cfg.is_follower() && cfg.in_network() && !cfg.is_validator());
        let cfg = Config::load(None, env.clone(), &Overrides::default()).unwrap();
        assert!(cfg.is_validator() && !cfg.is_follower());
        let mut upstreams = env.clone();
        upstreams
            .push(("SLUICE_FOLLOWER__UPSTREAMS".into(), "ws://10.0.0.1:8545, ws://10.0.0.2:8545".into()));
        let cfg = Config::load(None, upstreams.clone(), &follow).unwrap();
        assert_eq!(cfg.follower.upstream_list(), ["ws://10.0.0.1:8545", "ws://10.0.0.2:8545"]);
        upstreams.push(("SLUICE_FOLLOWER__UPSTREAMS".into(), "http://10.0.0.1:8545".into()));
        let err = Config::load(None, upstreams, &follow).unwrap_err();
        assert!(err.to_string().contains("not a ws:// URL"), "{err}");
    }

    #[test]
    fn validator_mode_needs_a_key_and_sane_timeouts() {
        let set = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            let mut v =
                vec![("SLUICE_CONSENSUS__VALIDATORS_FILE".to_string(), "/x/validators.toml".to_string())];
            v.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            v
        };
        let err = Config::load(None, set(&[]), &Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("key_file"), "{err}");
        let key = ("SLUICE_CONSENSUS__KEY_FILE", "/x/key");
        let cfg = Config::load(None, set(&[key]), &Overrides::default()).unwrap();
        assert!(cfg.is_validator());
        let refused = [
            ("SLUICE_CONSENSUS__LEADER_TIMEOUT_MS", "100", "leader_timeout_ms"),
            ("SLUICE_CONSENSUS__SKIP_TIMEOUT_MS", "2000", "skip_timeout_ms (2000) must exceed"),
            ("SLUICE_CONSENSUS__MAX_PENDING_ACKS", "0", "max_pending_acks"),
            (
                "SLUICE_CONSENSUS__EMPTY_BLOCK_WAIT_MS",
                "1201",
                "empty_block_wait_ms (1201) must be at most 4/5",
            ),
            (
                "SLUICE_CONSENSUS__GOSSIP_INTERVAL_MS",
                "2",
                "gossip_batches_per_second_per_peer (400) must be at least",
            ),
            (
                "SLUICE_CONSENSUS__GOSSIP_BATCH_MAX_BYTES",
                "1000",
                "gossip_batch_max_bytes (1000) must hold one",
            ),
            ("SLUICE_CONSENSUS__GOSSIP_QUEUE_TXS", "0", "gossip_queue_txs"),
            (
                "SLUICE_CONSENSUS__P2P_IDLE_TIMEOUT_MS",
                "999",
                "p2p_idle_timeout_ms (999) must be at least 2x consensus.p2p_ping_interval_ms (500)",
            ),
            ("SLUICE_CONSENSUS__P2P_PING_INTERVAL_MS", "0", "p2p_ping_interval_ms must be greater than 0"),
            ("SLUICE_CONSENSUS__P2P_DIAL_TIMEOUT_MS", "0", "p2p_dial_timeout_ms must be greater than 0"),
            (
                "SLUICE_CONSENSUS__P2P_RECONNECT_COOLDOWN_MS",
                "0",
                "p2p_reconnect_cooldown_ms must be greater than 0",
            ),
        ];
        for (var, value, said) in refused {
            let err = Config::load(None, set(&[key, (var, value)]), &Overrides::default()).unwrap_err();
            assert!(err.to_string().contains(said), "{var}={value}: {err}");
        }
        assert!(!Config::default().is_validator());
    }
}
