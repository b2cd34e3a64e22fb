//! The `sluice load` command line.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

/// `sluice load`: run a load (the flags below) or write a genesis file.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoadCommand {
    /// Write a genesis instead of running a load.
    #[command(subcommand)]
    pub command: Option<LoadSubcommand>,
    /// The run's settings.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Subcommands of `sluice load`.
#[derive(Subcommand, Debug, Clone)]
pub enum LoadSubcommand {
    /// Write a geth-style genesis funding the seeded sender keys (for
    /// `sluice node --genesis FILE` or `anvil --init FILE`).
    Genesis(GenesisArgs),
}

/// `sluice load genesis`.
#[derive(Args, Debug, Clone)]
pub struct GenesisArgs {
    /// Sender keys to fund.
    #[arg(long, value_name = "N")]
    pub accounts: u64,
    /// Seed the keys derive from (the same seed must be given to the run).
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Output file (stdout if absent).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// `config.chainId`.
    #[arg(long, value_name = "N", default_value_t = 31337)]
    pub chain_id: u64,
    /// Block gas limit written into the genesis (anvil uses it).
    #[arg(long, value_name = "N", default_value_t = 150_000_000)]
    pub gas_limit: u64,
    /// Balance of every account, in ether.
    #[arg(long, value_name = "ETH", default_value_t = 1000)]
    pub balance_eth: u64,
}

/// What the transactions do.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Native transfers to distinct fresh recipients.
    Transfer,
    /// Native transfers; `--conflict-rate` of them go to the sender's pair
    /// partner (another busy sender).
    Conflict,
    /// ERC-20-like token transfers (token deployed and minted at setup).
    Erc20,
    /// Increments of one counter contract (fully contended).
    Counter,
    /// Native transfers to random existing accounts among
    /// `--existing-accounts` synthetic accounts funded at genesis (the
    /// node's `chain.synthetic_accounts`).
    Existing,
    /// ERC-20-like `transfer(holder, 1)` where the holder is another of the
    /// run's senders (token deployed and minted for every sender at setup):
    /// no new accounts or slots, so state does not grow.
    Erc20Holders,
    /// A mixed block, drawn per transaction from the seed: 0.5% (1 in 200)
    /// deploy a counter contract, 50% are token transfers among holders (as
    /// erc20-holders), 49.5% are native transfers to fresh recipients (as
    /// transfer).
    Mixed,
}

impl WorkloadKind {
    /// The name as typed on the command line (`erc20-holders`), for the
    /// summary and the plot's title.
    pub fn name(self) -> String {
        self.to_possible_value().map_or_else(|| format!("{self:?}").to_lowercase(), |v| v.get_name().into())
    }
}

/// The flags of a load run.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// JSON-RPC endpoint (loopback only), or several separated by commas
    /// (the validators of one network): each sender is pinned to one of
    /// them (through its connection), so its nonces stay on one validator,
    /// which proposes what its own RPC admitted.
    #[arg(long, value_name = "URL[,URL...]", default_value = "http://127.0.0.1:8545")]
    pub url: String,
    /// Where inclusion is measured (blocks scanned) and setup reads state;
    /// default: the first `--url`.
    #[arg(long, value_name = "URL")]
    pub scan_url: Option<String>,
    /// A name for the target in the summary and the plot.
    #[arg(long, value_name = "NAME", default_value = "target")]
    pub label: String,
    /// The workload.
    #[arg(long, value_enum, default_value_t = WorkloadKind::Transfer)]
    pub workload: WorkloadKind,
    /// For `--workload conflict`: the share (0 to 1) of transfers to the
    /// sender's pair partner.
    #[arg(long, value_name = "R", default_value_t = 0.1)]
    pub conflict_rate: f64,
    /// For `--workload existing`: how many synthetic accounts the chain
    /// funded at genesis (its `chain.synthetic_accounts`).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub existing_accounts: u64,
    /// Use N seeded sender keys (see `sluice load genesis`).
    #[arg(long, value_name = "N", conflicts_with = "mnemonic_accounts")]
    pub accounts: Option<u64>,
    /// Seed of the sender keys and recipients.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Use the first N accounts of the test mnemonic (anvil's and the dev
    /// node's funded accounts).
    #[arg(long, value_name = "N")]
    pub mnemonic_accounts: Option<u32>,
    /// Offered rate in transactions per second (absent: unthrottled, as
    /// fast as answers come, bounded by --max-in-flight).
    #[arg(long, value_name = "N")]
    pub tps: Option<f64>,
    /// Offer load for this many seconds.
    #[arg(long, value_name = "S", conflicts_with = "count")]
    pub duration_s: Option<f64>,
    /// Offer this many slots.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Transactions to pre-sign (default: one per slot). A refused
    /// transaction is re-sent from the same bytes, so fewer can do.
    #[arg(long, value_name = "N")]
    pub txs: Option<u64>,
    /// Transactions per JSON-RPC batch.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub batch: usize,
    /// Keep-alive connections (one sender thread each).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub connections: usize,
    /// Most slots due or sent and not answered, over all connections;
    /// with --tps, slots past it are dropped.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub max_in_flight: usize,
    /// A partial batch is sent once its oldest slot waited this long.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    pub batch_wait_ms: u64,
    /// After sending, wait at most this long for admitted transactions to
    /// appear in blocks.
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub drain_timeout_s: u64,
    /// Hard bound on the sending phase beyond the schedule's end.
    #[arg(long, value_name = "S", default_value_t = 60)]
    pub overrun_s: u64,
    /// Per-request HTTP timeout.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub request_timeout_ms: u64,
    /// max_fee_per_gas in gwei.
    #[arg(long, value_name = "GWEI", default_value_t = 20)]
    pub max_fee_gwei: u64,
    /// max_priority_fee_per_gas in gwei.
    #[arg(long, value_name = "GWEI", default_value_t = 1)]
    pub tip_gwei: u64,
    /// sluice's Prometheus endpoint, for pipeline lag.
    #[arg(long, value_name = "URL")]
    pub metrics_url: Option<String>,
    /// The node's pid, for CPU and RSS from /proc.
    #[arg(long, value_name = "PID")]
    pub node_pid: Option<u32>,
    /// Write the summary as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG of TPS (and pipeline lag) over time.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Signatures timed to measure sender-recovery cost (0: skip).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub recovery_sample: usize,
}

impl RunArgs {
    /// The targets `--url` names, in order.
    pub fn urls(&self) -> Vec<String> {
        self.url.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
    }

    /// Where blocks are scanned and setup reads state.
    pub fn scan_url(&self) -> String {
        self.scan_url.clone().or_else(|| self.urls().into_iter().next()).unwrap_or_else(|| self.url.clone())
    }
}
