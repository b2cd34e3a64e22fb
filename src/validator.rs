//! Validator mode at the binary's edge: checks a validator's configuration
//! against the shared validator set, joins the pipeline (actors) to
//! consensus through [`ActorBackend`], and `sluice testnet init`.

use std::{net::IpAddr, path::PathBuf, sync::Arc, time::Duration};

use alloy_primitives::{Bytes, B256};
use anyhow::{bail, Context as _};
use clap::Args;
use sluice_actors::ValidatorPort;
use sluice_config::Config;
use sluice_consensus::{
    testnet::{self, TestnetSpec},
    validators::{load_key, public_key_of, FollowerSet, ValidatorSet},
    Backend, BuildRequest, Built, GossipLimits, LinkTimeouts, OnCommit, PipelineClosed, Rules, Timeouts,
    ValidatorConfig,
};
use sluice_messages::{RecoveredTx, SealedBlock};
use sluice_store::Halt;
use tokio::sync::watch;

/// The actor pipeline as consensus sees it.
#[derive(Clone)]
pub(crate) struct ActorBackend(pub(crate) ValidatorPort);

impl Backend for ActorBackend {
    async fn build(&self, req: BuildRequest) -> Option<Built> {
        self.0.build(req.parent, req.timestamp, Some(req.state_ref), req.exclude).await
    }

    async fn restore(&self, txs: Vec<RecoveredTx>) {
        self.0.restore(txs).await;
    }

    async fn deliver(&self, block: Arc<SealedBlock>, on_commit: OnCommit) -> Result<(), PipelineClosed> {
        self.0.deliver(block, on_commit).await
    }

    fn committed(&self) -> watch::Receiver<u64> {
        self.0.committed()
    }

    async fn outbound(&self, max_txs: usize, max_bytes: usize) -> Vec<Bytes> {
        self.0.outbound(max_txs, max_bytes).await
    }

    async fn admit_from_peer(&self, txs: Vec<Bytes>) {
        self.0.admit_from_peer(txs).await;
    }

    fn committed_block(&self, height: u64) -> Option<(B256, B256)> {
        let store = self.0.store();
        if height > store.head() {
            return None;
        }
        store.block(height).map(|b| (b.block.hash, b.app_hash))
    }

    fn halted(&self) -> Option<Halt> {
        self.0.store().halted()
    }

    fn halt(&self, halt: Halt) {
        match halt.wrong_from() {
            Some(height) => tracing::error!(height, reason = %halt, "halting: this node's state is wrong"),
            None => tracing::error!(reason = %halt, "halting"),
        }
        self.0.store().halt(halt);
    }

    fn finalized(&self, height: u64) {
        self.0.finalized(height);
    }

    fn publish_finalized(&self, item: sluice_consensus::FinalizedItem) {
        self.0.publish_finalized(item);
    }
}

/// The shared rules this node's config implies.
fn rules_of(cfg: &Config) -> Rules {
    Rules {
        block_gas_limit: cfg.chain.block_gas_limit,
        base_fee_wei: cfg.chain.base_fee_wei,
        max_block_txs: cfg.producer.max_block_txs,
        max_block_bytes: cfg.producer.max_block_bytes,
        max_tx_size_bytes: cfg.mempool.max_tx_size_bytes,
        max_timestamp_drift_s: 2,
    }
}

/// A validator's set, key and consensus settings, checked against its
/// node config: everything that would make it disagree with the others is
/// refused here, at start, with what differs.
pub(crate) struct Prepared {
    /// Consensus settings (genesis filled in once the store is open).
    pub(crate) consensus: ValidatorConfig,
    /// The data-dir identity of this network.
    pub(crate) network: String,
}

/// Reads and checks the validator set and key named by `cfg`.
pub(crate) fn prepare(cfg: &Config) -> anyhow::Result<Prepared> {
    let c = &cfg.consensus;
    let (set, set_hash) = ValidatorSet::load(&c.validators_file)?;
    let key = load_key(&c.key_file)?;
    let follow = cfg.is_follower();
    let name = match (set.entry_of(&key), follow) {
        (Some(v), false) => v.name.clone(),
        (None, true) => format!("follower {}", public_key_of(&key)),
        (None, false) => bail!(
            "the key in {} is not one of the validators in {} (to follow the chain without voting, run with \
             --follow)",
            c.key_file.display(),
            c.validators_file.display()
        ),
        (Some(v), true) => bail!(
            "follower.enabled, but the key in {} is validator {}'s: a follower needs its own key (`sluice testnet \
             init --followers N` writes one)",
            c.key_file.display(),
            v.name
        ),
    };
    // A validator accepts the followers listed; a follower dials the
    // validators and needs no list.
    let followers = if follow || c.followers_file.as_os_str().is_empty() {
        Vec::new()
    } else {
        FollowerSet::load(&c.followers_file, &set)?.follower
    };
    if set.chain_id != cfg.chain.chain_id {
        bail!(
            "{} is for chain id {}, but chain.chain_id is {}",
            c.validators_file.display(),
            set.chain_id,
            cfg.chain.chain_id
        );
    }
    let mine = rules_of(cfg);
    let shared = Rules { max_timestamp_drift_s: mine.max_timestamp_drift_s, ..set.rules };
    if mine != shared {
        bail!(
            "this node's block rules differ from the validator set's: config has {mine:?}, {} has {:?}",
            c.validators_file.display(),
            set.rules
        );
    }
    let genesis = sluice_actors::build_genesis(cfg)?;
    let (genesis_block, genesis_app_hash) = sluice_store::genesis_sealed(&genesis);
    let genesis_hash = genesis_block.hash;
    if genesis_hash != set.genesis_hash || genesis_app_hash != set.genesis_app_hash {
        bail!(
            "this node's genesis (block {genesis_hash}, app hash {genesis_app_hash}) differs from the validator set's \
             (block {}, app hash {}): check chain.genesis_file and chain.dev_accounts",
            set.genesis_hash,
            set.genesis_app_hash
        );
    }
    // A port in use is said here, clearly, rather than by the p2p stack.
    // A follower over the feed has no p2p.
    if !follow || cfg.follower.upstream_list().is_empty() {
        std::net::TcpListener::bind(c.p2p_listen).with_context(|| {
            format!("cannot listen for validators on {} (consensus.p2p_listen)", c.p2p_listen)
        })?;
    }
    let mode = if follow { "follower mode" } else { "validator mode" };
    tracing::info!(node = %name, validators = set.validator.len(), followers = followers.len(), set = %set_hash, "{mode}");
    let consensus = ValidatorConfig {
        key,
        set_hash,
        p2p_listen: c.p2p_listen,
        storage_dir: cfg.store.data_dir.join("consensus"),
        timeouts: Timeouts {
            leader: Duration::from_millis(c.leader_timeout_ms),
            certification: Duration::from_millis(c.certification_timeout_ms),
            retry: Duration::from_millis(c.timeout_retry_ms),
            skip: Duration::from_millis(c.skip_timeout_ms),
            fetch: Duration::from_millis(c.fetch_timeout_ms),
        },
        links: LinkTimeouts {
            ping_interval: Duration::from_millis(c.p2p_ping_interval_ms),
            idle: Duration::from_millis(c.p2p_idle_timeout_ms),
            dial: Duration::from_millis(c.p2p_dial_timeout_ms),
            reconnect_cooldown: Duration::from_millis(c.p2p_reconnect_cooldown_ms),
        },
        max_exec_lag_blocks: c.max_exec_lag_blocks,
        max_pending_acks: c.max_pending_acks,
        worker_threads: c.worker_threads(),
        coinbase: cfg.chain.coinbase,
        genesis: genesis_block,
        genesis_app_hash,
        votes_per_second: c.votes_per_second_per_peer,
        blocks_per_second: c.blocks_per_second_per_peer,
        gossip_batches_per_second: c.gossip_batches_per_second_per_peer,
        gossip: GossipLimits {
            batch_max_txs: c.gossip_batch_max_txs,
            batch_max_bytes: c.gossip_batch_max_bytes,
            max_tx_bytes: cfg.mempool.max_tx_size_bytes,
            interval: Duration::from_millis(c.gossip_interval_ms),
        },
        spec: cfg.chain.spec,
        verify_workers: cfg.pipeline.prepare_workers(),
        // Consensus keeps as many finalized blocks as the store: what a
        // validator down for less than the retention catches up from.
        archive_retention_blocks: std::num::NonZeroU64::new(cfg.store.kept_blocks()),
        follow,
        followers,
        followers_file: (!c.followers_file.as_os_str().is_empty()).then(|| c.followers_file.clone()),
        upstreams: if follow { cfg.follower.upstream_list() } else { Vec::new() },
        set,
    };
    Ok(Prepared { consensus, network: format!("validators:{set_hash}") })
}

/// Arguments of `sluice testnet init`.
#[derive(Args)]
pub(crate) struct InitArgs {
    /// Number of validators.
    #[arg(long, value_name = "N")]
    validators: usize,
    /// Directory to write validators.toml and v0/, v1/, ... into.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// First port: validator i uses P+3i (p2p), P+3i+1 (JSON-RPC) and
    /// P+3i+2 (metrics).
    #[arg(long, value_name = "P", default_value_t = 26650)]
    base_port: u16,
    /// One address per validator, comma-separated (one per machine or
    /// network namespace); default 127.0.0.1 for all. Validators on other
    /// than loopback get `rpc.cors_origins = ""` and, while they fund dev
    /// accounts of the public mnemonic, `rpc.allow_unsafe_public_bind`.
    #[arg(long, value_name = "H1,H2,...", value_delimiter = ',')]
    hosts: Vec<IpAddr>,
    /// Number of followers (nodes that execute and serve the chain without
    /// voting): DIR/followers.toml, read by every validator, and DIR/f{j}/.
    /// Follower j takes the ports after the validators'.
    #[arg(long, value_name = "F", default_value_t = 0)]
    followers: usize,
    /// One address per follower, comma-separated; default 127.0.0.1 for
    /// all.
    #[arg(long, value_name = "H1,H2,...", value_delimiter = ',')]
    follower_hosts: Vec<IpAddr>,
    /// Derive keys from this seed. FOR TESTS ONLY: anyone who knows the
    /// seed has every validator's key.
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// EIP-155 chain id.
    #[arg(long, value_name = "C", default_value_t = 31337)]
    chain_id: u64,
    /// Dev accounts funded at genesis (m/44'/60'/0'/0/i of the test
    /// mnemonic).
    #[arg(long, value_name = "K", default_value_t = 10)]
    dev_accounts: u32,
    /// A geth-style genesis JSON, copied into DIR and used by every
    /// validator.
    #[arg(long, value_name = "FILE")]
    genesis: Option<PathBuf>,
    /// Each validator's producer.block_time_ms: how long a leader fills its
    /// proposal.
    #[arg(long, value_name = "T", default_value_t = 200)]
    block_time_ms: u64,
}

/// `sluice testnet init`.
pub(crate) fn init(args: &InitArgs) -> anyhow::Result<()> {
    let mut cfg = Config::default();
    cfg.chain.chain_id = args.chain_id;
    cfg.chain.dev_accounts = args.dev_accounts;
    let mut chain_section = format!("dev_accounts = {}\n", args.dev_accounts);
    if let Some(file) = &args.genesis {
        std::fs::create_dir_all(&args.dir)
            .with_context(|| format!("cannot create {}", args.dir.display()))?;
        let copy = std::path::absolute(args.dir.join("genesis.json"))?;
        std::fs::copy(file, &copy).with_context(|| format!("cannot copy {}", file.display()))?;
        cfg.chain.genesis_file = copy.clone();
        chain_section.push_str(&format!("genesis_file = {:?}\n", copy.display().to_string()));
    }
    let genesis = sluice_actors::build_genesis(&cfg)?;
    let (genesis_block, genesis_app_hash) = sluice_store::genesis_sealed(&genesis);
    let spec = TestnetSpec {
        validators: args.validators,
        dir: args.dir.clone(),
        base_port: args.base_port,
        hosts: args.hosts.clone(),
        followers: args.followers,
        follower_hosts: args.follower_hosts.clone(),
        seed: args.seed,
        chain_id: args.chain_id,
        genesis_hash: genesis_block.hash,
        genesis_app_hash,
        rules: rules_of(&cfg),
        chain_section,
        block_time_ms: args.block_time_ms,
        public_dev_accounts: if cfg.chain.funds_public_keys() { args.dev_accounts } else { 0 },
    };
    let written = testnet::init(&spec)?;
    let rpcs = written.rpc_addrs.iter().chain(&written.follower_rpc_addrs);
    if spec.public_dev_accounts > 0 && rpcs.clone().any(|a| !a.ip().is_loopback()) {
        eprintln!(
            "WARNING: validators on --hosts other than loopback fund {} dev accounts of the PUBLIC test \
             mnemonic: anyone who reaches them can spend that ether. Their configs set \
             rpc.allow_unsafe_public_bind = true; for anything but a private lab use --dev-accounts 0 --genesis FILE.",
            spec.public_dev_accounts
        );
    }
    println!("wrote {}", written.set_file.display());
    for (cfg, rpc) in written.configs.iter().zip(&written.rpc_addrs) {
        println!("sluice node --config {}    # JSON-RPC http://{rpc}", cfg.display());
    }
    for (cfg, rpc) in written.follower_configs.iter().zip(&written.follower_rpc_addrs) {
        println!("sluice node --config {}    # follower, JSON-RPC http://{rpc}", cfg.display());
    }
    Ok(())
}
