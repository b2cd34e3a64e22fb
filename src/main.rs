//! This file is the entry point of the `sluice` binary: it parses the
//! command line, loads the layered configuration, installs logging and the
//! metrics exporter, and runs the node until Ctrl-C or SIGTERM.
//!
//! `anyhow` is used here and only here, at the binary's edge.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sluice_actors::Node;
use sluice_config::{Config, Overrides};

mod fdlimit;
mod validator;

/// Blocks allocate on one thread (workers, HTTP) and free on another
/// (committer): mimalloc frees across threads without glibc's arena locks
/// and keeps freed memory for reuse instead of faulting in fresh pages for
/// every block (see PERFORMANCE.md, issue 4).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// sluice: an EVM-only Ethereum node built as a pipeline of actors with
/// bounded mailboxes.
#[derive(Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node (JSON-RPC on 127.0.0.1:8545 and metrics on
    /// 127.0.0.1:9545 by default).
    Node(NodeArgs),
    /// Print the effective configuration (after every layer) as JSON and
    /// exit; the mnemonic is shown redacted.
    Config(NodeArgs),
    /// Re-execute every stored block from genesis into a fresh state and
    /// verify every app hash against the hash vault.
    Replay(ReplayArgs),
    /// Offer load to a JSON-RPC node (sluice, anvil, ...) on 127.0.0.1, or
    /// write a genesis funding the load's sender keys.
    Load(sluice_load::LoadCommand),
    /// A network of validators on one machine or several.
    #[command(subcommand)]
    Testnet(TestnetCommand),
}

#[derive(Subcommand)]
enum TestnetCommand {
    /// Write a validator set (DIR/validators.toml) and each validator's
    /// config and key (DIR/v{i}/), and print the commands that start them.
    Init(validator::InitArgs),
}

/// Flags override, in order: built-in defaults < config/default.toml
/// (embedded) < --config FILE < SLUICE_* environment variables < flags.
#[derive(Args, Clone)]
struct NodeArgs {
    /// A TOML config file layered over the embedded defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Directory for chain data.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// JSON-RPC listen address (port 0 picks a free port).
    #[arg(long, value_name = "HOST:PORT")]
    rpc_addr: Option<SocketAddr>,
    /// Prometheus metrics listen address (serves /metrics).
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<SocketAddr>,
    /// EIP-155 chain id.
    #[arg(long, value_name = "N")]
    chain_id: Option<u64>,
    /// A non-empty block is sealed at least this often, in milliseconds.
    #[arg(long, value_name = "N")]
    block_time_ms: Option<u64>,
    /// Most transactions per block [default: 5000].
    #[arg(long, value_name = "N")]
    max_block_txs: Option<usize>,
    /// A block, empty if nothing waits, when none was sealed for this many
    /// milliseconds; 0: never [default: 1000].
    #[arg(long, value_name = "N")]
    idle_block_interval_ms: Option<u64>,
    /// Gas per block.
    #[arg(long, value_name = "N")]
    block_gas_limit: Option<u64>,
    /// Number of dev accounts derived from the mnemonic and funded
    /// (m/44'/60'/0'/0/i, 10,000 ETH each by default).
    #[arg(long, value_name = "N")]
    dev_accounts: Option<u32>,
    /// A geth-style genesis JSON (config.chainId, alloc with balance, nonce,
    /// code, storage); dev accounts are added to its allocation.
    #[arg(long, value_name = "FILE")]
    genesis: Option<PathBuf>,
    /// Follow the validators of consensus.validators_file without voting
    /// (follower.enabled): execute what they finalize and serve it.
    #[arg(long)]
    follow: bool,
}

impl NodeArgs {
    fn load(&self) -> anyhow::Result<Config> {
        let overrides = Overrides {
            data_dir: self.data_dir.clone(),
            rpc_addr: self.rpc_addr,
            metrics_addr: self.metrics_addr,
            chain_id: self.chain_id,
            block_time_ms: self.block_time_ms,
            max_block_txs: self.max_block_txs,
            idle_block_interval_ms: self.idle_block_interval_ms,
            block_gas_limit: self.block_gas_limit,
            dev_accounts: self.dev_accounts,
            genesis_file: self.genesis.clone(),
            follow: self.follow.then_some(true),
        };
        Ok(Config::load(self.config.as_deref(), std::env::vars(), &overrides)?)
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Config(args) => {
            // The mnemonic is every dev account's key: shown redacted.
            println!("{}", serde_json::to_string_pretty(&args.load()?.redacted())?);
            Ok(())
        }
        Command::Node(args) => run_node(args.load()?),
        Command::Replay(args) => run_replay(&args),
        Command::Load(cmd) => Ok(sluice_load::main(cmd)?),
        Command::Testnet(TestnetCommand::Init(args)) => validator::init(&args),
    }
}

/// Arguments of `sluice replay`.
#[derive(Args)]
struct ReplayArgs {
    /// The data dir to verify (the node must not be running on it).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Threads for sender recovery.
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

fn run_replay(args: &ReplayArgs) -> anyhow::Result<()> {
    let summary = sluice_actors::replay::replay(&args.data_dir, args.workers, |height, head| {
        eprintln!("replay: block {height} of {head}");
    })
    .with_context(|| format!("replay of {} failed", args.data_dir.display()))?;
    println!(
        "replay ok: {} blocks, {} transactions, every app hash equals the hash vault; head app hash {} ({:.1} s)",
        summary.blocks,
        summary.txs,
        summary.app_hash,
        summary.elapsed.as_secs_f64()
    );
    Ok(())
}

/// Default log filter: sluice at info; the consensus engine's own crates
/// only from warn (at info they log every archive they open per view).
const DEFAULT_LOG: &str = "info,commonware_consensus=warn,commonware_p2p=warn,commonware_runtime=warn,\
commonware_storage=warn,commonware_broadcast=warn,commonware_resolver=warn,commonware_stream=warn";

fn run_node(mut cfg: Config) -> anyhow::Result<()> {
    // Logs go to stderr (stdout carries the one "listening" line scripts
    // wait for), without colour codes unless stderr is a terminal.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| DEFAULT_LOG.into()),
        )
        .init();
    // Before the store opens: it sizes its file cache within this limit,
    // and sockets get the rest.
    fdlimit::raise_and_fit(&mut cfg.rpc);
    // Installed before the actor system so the exporter gets its own
    // thread and a scrape never waits on a busy pipeline thread.
    sluice_actors::metrics::install(cfg.metrics.addr)
        .with_context(|| format!("cannot serve metrics on {}", cfg.metrics.addr))?;
    tracing::info!(metrics = %cfg.metrics.addr, "serving Prometheus metrics at /metrics");
    // Only an explicit rpc.allow_unsafe_public_bind gets here with risks:
    // said at every start, so nobody runs an open node without knowing.
    for risk in cfg.public_bind_risks() {
        tracing::warn!(rpc = %cfg.rpc.addr, "rpc.allow_unsafe_public_bind: {risk}");
    }
    // Checked before anything starts: a validator whose set, key, rules or
    // genesis disagree with the others' is refused at once.
    let prepared = if cfg.in_network() { Some(validator::prepare(&cfg)?) } else { None };
    let system = actix_rt::System::new();
    let result: anyhow::Result<()> = system.block_on(async move {
        let mut signals = Signals::install();
        let Some(prepared) = prepared else {
            let node = Node::start(cfg).await?;
            // The line tests and scripts wait for: the bound address (the
            // configured port may be 0).
            println!("sluice: JSON-RPC listening on http://{}", node.rpc_addr);
            signals.wait().await;
            tracing::info!("shutting down: admission first, then the pipeline in order");
            node.shutdown().await?;
            return Ok(());
        };
        let (node, port) = Node::start_validator(cfg, prepared.network).await?;
        sluice_consensus::describe_metrics();
        let consensus = match sluice_consensus::spawn(prepared.consensus, validator::ActorBackend(port)) {
            Ok(c) => c,
            Err(e) => {
                let _ = node.shutdown().await;
                return Err(e.into());
            }
        };
        println!("sluice: JSON-RPC listening on http://{}", node.rpc_addr);
        signals.wait().await;
        tracing::info!("shutting down: consensus first, then admission, then the pipeline in order");
        // Consensus holds the pipeline's port: it must let go before the
        // pipeline can drain.
        let stopped = actix_rt::task::spawn_blocking(move || consensus.stop()).await;
        if let Ok(Err(e)) = &stopped {
            tracing::error!(error = %e, "consensus stopped with an error");
        }
        node.shutdown().await?;
        Ok(())
    });
    result
}

/// SIGINT and SIGTERM, registered before the node announces itself so a
/// signal sent right after the "listening" line is never handled by the
/// default action (which would kill the process without a clean shutdown).
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Signals { term: signal(SignalKind::terminate()).ok(), int: signal(SignalKind::interrupt()).ok() }
        }
        #[cfg(not(unix))]
        {
            Signals {}
        }
    }

    async fn wait(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = recv(&mut self.term) => {}
                _ = recv(&mut self.int) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
