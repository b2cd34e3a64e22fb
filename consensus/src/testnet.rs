//! `sluice testnet init`: a validator set, its followers, and one config
//! per node.
//!
//! Writes `DIR/validators.toml` (shared, identical everywhere) and, for
//! each validator `i`, `DIR/v{i}/sluice.toml` and `DIR/v{i}/validator.key`;
//! with followers, `DIR/followers.toml` (read by the validators) and, for
//! each follower `j`, `DIR/f{j}/sluice.toml` and `DIR/f{j}/follower.key`.
//! Ports are taken from a base upward: node `n` (validators first, then
//! followers) uses `base + 3n` for p2p, `base + 3n + 1` for JSON-RPC and
//! `base + 3n + 2` for metrics.

use std::{
    fmt::Write as _,
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
};

use alloy_primitives::B256;
use commonware_cryptography::{ed25519::PrivateKey, Signer as _};

use crate::{
    rules::Rules,
    validators::{public_key_hex, save_key, FollowerSet, SetError, ValidatorEntry, ValidatorSet},
};

/// What to write.
#[derive(Debug, Clone)]
pub struct TestnetSpec {
    /// Number of validators.
    pub validators: usize,
    /// The output directory.
    pub dir: PathBuf,
    /// First port.
    pub base_port: u16,
    /// One address per validator (defaults to 127.0.0.1 for all).
    pub hosts: Vec<IpAddr>,
    /// Number of followers.
    pub followers: usize,
    /// One address per follower (defaults to 127.0.0.1 for all).
    pub follower_hosts: Vec<IpAddr>,
    /// Deterministic keys from this seed (tests only: anyone can derive
    /// them); `None`: keys from the OS's entropy.
    pub seed: Option<u64>,
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The hash of block 0, as every validator will build it.
    pub genesis_hash: B256,
    /// The app hash after block 0.
    pub genesis_app_hash: B256,
    /// The shared block rules.
    pub rules: Rules,
    /// Lines added to every validator's `[chain]` section (genesis file,
    /// dev accounts): identical on all, or genesis differs.
    pub chain_section: String,
    /// `producer.block_time_ms` for every validator.
    pub block_time_ms: u64,
    /// Dev accounts `chain_section` funds from the public test mnemonic
    /// (0: none). A validator on a non-loopback host serving them needs
    /// `rpc.allow_unsafe_public_bind`, which is then written with a warning.
    pub public_dev_accounts: u32,
}

/// What was written.
#[derive(Debug)]
pub struct Written {
    /// `DIR/validators.toml`.
    pub set_file: PathBuf,
    /// Each validator's config file.
    pub configs: Vec<PathBuf>,
    /// Each validator's JSON-RPC address.
    pub rpc_addrs: Vec<SocketAddr>,
    /// Each follower's config file.
    pub follower_configs: Vec<PathBuf>,
    /// Each follower's JSON-RPC address.
    pub follower_rpc_addrs: Vec<SocketAddr>,
}

/// Why a testnet could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TestnetError {
    /// Bad arguments.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be written.
    #[error(transparent)]
    Set(#[from] SetError),
    /// A directory could not be created.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

fn port(spec: &TestnetSpec, i: usize, k: usize) -> Result<u16, TestnetError> {
    let p = u32::from(spec.base_port) + 3 * i as u32 + k as u32;
    u16::try_from(p).map_err(|_| {
        TestnetError::Invalid(format!(
            "--base-port {} leaves no room for {} validators and {} followers",
            spec.base_port, spec.validators, spec.followers
        ))
    })
}

/// Writes the testnet.
pub fn init(spec: &TestnetSpec) -> Result<Written, TestnetError> {
    if spec.validators == 0 {
        return Err(TestnetError::Invalid("--validators must be at least 1".into()));
    }
    let hosts = hosts_of(&spec.hosts, spec.validators, "--hosts", "validators")?;
    let follower_hosts = hosts_of(&spec.follower_hosts, spec.followers, "--follower-hosts", "followers")?;
    // Checked before anything is written: a rerun on a used directory
    // must not leave a new set beside old keys, nor replace a key.
    let validator_keys = (0..spec.validators).map(|i| spec.dir.join(format!("v{i}")).join("validator.key"));
    let follower_keys = (0..spec.followers).map(|j| spec.dir.join(format!("f{j}")).join("follower.key"));
    for key_file in validator_keys.chain(follower_keys) {
        if key_file.exists() {
            return Err(TestnetError::Invalid(format!(
                "{} already exists: testnet init never overwrites a validator key; remove {} or choose another --dir",
                key_file.display(),
                spec.dir.display()
            )));
        }
    }
    let mut keys = Vec::with_capacity(spec.validators + spec.followers);
    for i in 0..spec.validators + spec.followers {
        keys.push(match spec.seed {
            // Insecure by design: anyone who knows the seed has the keys.
            Some(seed) => PrivateKey::from_seed(seed.wrapping_add(i as u64)),
            None => {
                use commonware_math::algebra::Random as _;
                PrivateKey::random(commonware_utils::sys_rng())
            }
        });
    }
    let mut entries = Vec::with_capacity(spec.validators);
    let mut rpc_addrs = Vec::with_capacity(spec.validators);
    for (i, key) in keys[..spec.validators].iter().enumerate() {
        let rpc = SocketAddr::new(hosts[i], port(spec, i, 1)?);
        rpc_addrs.push(rpc);
        entries.push(ValidatorEntry {
            name: format!("v{i}"),
            public_key: public_key_hex(&key.public_key()),
            p2p_addr: SocketAddr::new(hosts[i], port(spec, i, 0)?),
            rpc_addr: rpc,
        });
    }
    let set = ValidatorSet {
        chain_id: spec.chain_id,
        genesis_hash: spec.genesis_hash,
        genesis_app_hash: spec.genesis_app_hash,
        rules: spec.rules,
        validator: entries,
    };
    mkdir(&spec.dir)?;
    let set_file = spec.dir.join("validators.toml");
    set.save(&set_file)?;
    let set_abs = absolute(&set_file);
    let mut followers = FollowerSet::default();
    for (j, key) in keys[spec.validators..].iter().enumerate() {
        let n = spec.validators + j;
        followers.follower.push(ValidatorEntry {
            name: format!("f{j}"),
            public_key: public_key_hex(&key.public_key()),
            p2p_addr: SocketAddr::new(follower_hosts[j], port(spec, n, 0)?),
            rpc_addr: SocketAddr::new(follower_hosts[j], port(spec, n, 1)?),
        });
    }
    let followers_file = (spec.followers > 0).then(|| spec.dir.join("followers.toml"));
    if let Some(file) = &followers_file {
        followers.save(file)?;
    }
    let followers_abs = followers_file.as_deref().map(absolute);
    let mut configs = Vec::with_capacity(spec.validators);
    for (i, key) in keys[..spec.validators].iter().enumerate() {
        let node = Node { entry: &set.validator[i], n: i, follower: false };
        configs.push(write_node(spec, &set, node, key, &set_abs, followers_abs.as_deref())?);
    }
    let mut follower_configs = Vec::with_capacity(spec.followers);
    for (j, key) in keys[spec.validators..].iter().enumerate() {
        let node = Node { entry: &followers.follower[j], n: spec.validators + j, follower: true };
        follower_configs.push(write_node(spec, &set, node, key, &set_abs, None)?);
    }
    let follower_rpc_addrs = followers.follower.iter().map(|f| f.rpc_addr).collect();
    Ok(Written { set_file, configs, rpc_addrs, follower_configs, follower_rpc_addrs })
}

/// `given` addresses for `count` nodes, or 127.0.0.1 for all.
fn hosts_of(given: &[IpAddr], count: usize, flag: &str, what: &str) -> Result<Vec<IpAddr>, TestnetError> {
    match given.len() {
        0 => Ok(vec![IpAddr::from([127, 0, 0, 1]); count]),
        n if n == count => Ok(given.to_vec()),
        n => Err(TestnetError::Invalid(format!("{flag} gives {n} addresses for {count} {what}"))),
    }
}

/// One node to write a config for.
struct Node<'a> {
    /// Its name and addresses.
    entry: &'a ValidatorEntry,
    /// Its place among all nodes (its ports).
    n: usize,
    /// A follower rather than a validator.
    follower: bool,
}

/// Writes the node's directory (`DIR/v{i}/` or `DIR/f{j}/`, named as its
/// entry) with its key and config; returns the config's path.
fn write_node(
    spec: &TestnetSpec,
    set: &ValidatorSet,
    node: Node<'_>,
    key: &PrivateKey,
    set_file: &Path,
    followers_file: Option<&Path>,
) -> Result<PathBuf, TestnetError> {
    let dir = spec.dir.join(&node.entry.name);
    mkdir(&dir)?;
    let key_file = dir.join(if node.follower { "follower.key" } else { "validator.key" });
    save_key(&key_file, key)?;
    let cfg = dir.join("sluice.toml");
    let paths = Paths {
        set_file,
        key_file: &absolute(&key_file),
        data_dir: &absolute(&dir.join("data")),
        followers_file,
    };
    let text = node_config(spec, set, &node, &paths)?;
    std::fs::write(&cfg, text)
        .map_err(|source| TestnetError::Io { path: cfg.display().to_string(), source })?;
    Ok(cfg)
}

/// The files a node's config names.
struct Paths<'a> {
    set_file: &'a Path,
    key_file: &'a Path,
    data_dir: &'a Path,
    followers_file: Option<&'a Path>,
}

fn node_config(
    spec: &TestnetSpec,
    set: &ValidatorSet,
    node: &Node<'_>,
    paths: &Paths<'_>,
) -> Result<String, TestnetError> {
    let v = node.entry;
    let metrics = SocketAddr::new(v.p2p_addr.ip(), port(spec, node.n, 2)?);
    let r = &set.rules;
    let mut s = String::new();
    if node.follower {
        let _ = writeln!(
            s,
            "# Follower {} of the {} validators: written by `sluice testnet init`.",
            v.name,
            set.validator.len()
        );
    } else {
        let _ = writeln!(
            s,
            "# Validator {} of {}: written by `sluice testnet init`.",
            v.name,
            set.validator.len()
        );
    }
    let _ = writeln!(s, "# The [chain] rules must match validators.toml on every validator.\n");
    let _ = writeln!(
        s,
        "[chain]\nchain_id = {}\nblock_gas_limit = {}\nbase_fee_wei = {}",
        set.chain_id, r.block_gas_limit, r.base_fee_wei
    );
    s.push_str(&spec.chain_section);
    // No debug or trace namespace on a validator: traces are the heaviest
    // calls there are, and its cores are the chain's (README, "Namespaces").
    // A follower's cores are its readers': it serves them all.
    if node.follower {
        let _ = writeln!(s, "\n[rpc]\naddr = \"{}\"", v.rpc_addr);
    } else {
        let _ = writeln!(s, "\n[rpc]\naddr = \"{}\"\napis = \"eth,net,web3,txpool,consensus\"", v.rpc_addr);
    }
    // Reachable from other hosts: the node refuses CORS "*" there (any web
    // page could drive it), and the public mnemonic's accounts unless told.
    if !v.rpc_addr.ip().is_loopback() {
        let _ = writeln!(
            s,
            "# Not loopback: no browser page may call this validator (list the origins\n\
             # of your dapps to allow them; \"*\" is refused here).\ncors_origins = \"\""
        );
        if spec.public_dev_accounts > 0 {
            let _ = writeln!(
                s,
                "# WARNING: [chain] funds {} dev accounts of the PUBLIC test mnemonic\n\
                 # (\"test test ... junk\"): everyone has their keys and can spend their ether\n\
                 # through this address. Fine for a private lab; for anything else, rerun\n\
                 # `sluice testnet init` with `--dev-accounts 0 --genesis FILE` and remove this.\n\
                 allow_unsafe_public_bind = true",
                spec.public_dev_accounts
            );
        }
    }
    let _ = writeln!(s, "\n[metrics]\naddr = \"{metrics}\"");
    let _ = writeln!(s, "\n[mempool]\nmax_tx_size_bytes = {}", r.max_tx_size_bytes);
    let _ = writeln!(
        s,
        "\n[producer]\nmax_block_txs = {}\nmax_block_bytes = {}\nblock_time_ms = {}",
        r.max_block_txs, r.max_block_bytes, spec.block_time_ms
    );
    let _ = writeln!(s, "\n[store]\ndata_dir = {:?}", paths.data_dir.display().to_string());
    let _ = writeln!(
        s,
        "\n[consensus]\nvalidators_file = {:?}\nkey_file = {:?}\np2p_listen = \"{}\"",
        paths.set_file.display().to_string(),
        paths.key_file.display().to_string(),
        v.p2p_addr
    );
    if let Some(file) = paths.followers_file {
        let _ = writeln!(s, "followers_file = {:?}", file.display().to_string());
    }
    if node.follower {
        let _ = writeln!(s, "\n[follower]\nenabled = true");
    }
    Ok(s)
}

fn mkdir(dir: &Path) -> Result<(), TestnetError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| TestnetError::Io { path: dir.display().to_string(), source })
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
