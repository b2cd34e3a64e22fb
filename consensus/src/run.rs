//! A validator's consensus in production: its own OS thread running a
//! commonware tokio runtime (actix keeps its own), authenticated and
//! encrypted TCP between validators, and storage under the data dir.
//!
//! The pipeline is reached only through the [`Backend`], over bounded
//! flume mailboxes and tokio channels, which work across runtimes.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, thread::JoinHandle, time::Duration};

use alloy_primitives::{Address, B256};
use commonware_cryptography::ed25519::PublicKey;
use commonware_cryptography::{ed25519::PrivateKey, ChaCha20Poly1305};
use commonware_p2p::{
    authenticated::lookup, Address as PeerAddress, AddressableManager as _, AddressableTrackedPeers,
};
use commonware_runtime::{
    tokio as cw_tokio, Clock as _, Metrics as _, Quota, Runner as _, Spawner as _, Supervisor as _,
};
use commonware_stream::{
    cups::{self, Cups},
    sake::{self, Sake},
};
use commonware_utils::{ordered::Map, NZUsize, NZU32};
use futures::future::{select, Either};
use sluice_messages::SealedBlock;

use crate::{
    backend::Backend,
    engine::{self, channel, Channels, Role, Setup, Timeouts},
    idle_links::Idle,
    validators::{KeyError, ValidatorSet, ValidatorsError},
};

/// What one validator needs to join the network.
#[derive(Clone)]
pub struct ValidatorConfig {
    /// The shared validator set.
    pub set: ValidatorSet,
    /// Keccak of the set file's bytes (signed into every message).
    pub set_hash: B256,
    /// This validator's key.
    pub key: PrivateKey,
    /// Where to listen for other validators.
    pub p2p_listen: SocketAddr,
    /// Where consensus keeps its journals and archives.
    pub storage_dir: PathBuf,
    /// Consensus timing.
    pub timeouts: Timeouts,
    /// How peer connections are kept alive and redialled.
    pub links: LinkTimeouts,
    /// Propose empty blocks when this far ahead of execution.
    pub max_exec_lag_blocks: u64,
    /// Finalized blocks handed to the pipeline and not yet committed.
    pub max_pending_acks: usize,
    /// Threads of the consensus runtime.
    pub worker_threads: usize,
    /// Fee recipient of this validator's proposals.
    pub coinbase: Address,
    /// Block 0, as this node's store has it.
    pub genesis: Arc<SealedBlock>,
    /// The app hash after block 0.
    pub genesis_app_hash: B256,
    /// Messages per second per peer on the vote and certificate channels.
    pub votes_per_second: u32,
    /// Messages per second per peer on the block channels.
    pub blocks_per_second: u32,
    /// Transaction batches per second per peer on the transaction channel.
    pub gossip_batches_per_second: u32,
    /// Transaction dissemination's bounds (a batch's bytes are also held
    /// to the p2p network's largest message).
    pub gossip: crate::gossip::GossipLimits,
    /// The EVM spec the chain runs: a proposal's transactions must pay
    /// their intrinsic gas under it.
    pub spec: sluice_messages::Spec,
    /// Threads recovering the senders of another validator's proposal
    /// while checking it (as block preparation's `prepare_workers`).
    pub verify_workers: usize,
    /// Run as a follower: no vote, no proposals; finalizations verified
    /// against `set` and executed (`key` is then the follower's own p2p
    /// identity).
    pub follow: bool,
    /// The followers this validator accepts as p2p secondary peers (a
    /// follower ignores it: it dials the validators only).
    pub followers: Vec<crate::validators::ValidatorEntry>,
    /// Where `followers` came from: reread every few seconds, so that
    /// followers can be added (up to [`SPARE_FOLLOWER_SLOTS`] beyond those
    /// at start) or removed without restarting the validator.
    pub followers_file: Option<PathBuf>,
    /// A follower's upstreams: follow their finalized-block feeds
    /// (`ws://` URLs) instead of p2p. Empty: p2p.
    pub upstreams: Vec<String>,
    /// Finalized heights consensus keeps in its own archives below the
    /// store's committed height: peers catching up backfill from them, and
    /// a restart replays from them what the store had not kept. Older ones
    /// are pruned as the store commits, in whole sections of heights (so
    /// up to a section more is kept). `None` keeps every block: the
    /// node's archive mode, where the consensus data dir grows with the
    /// chain.
    pub archive_retention_blocks: Option<std::num::NonZeroU64>,
}

/// How the p2p layer keeps its connections honest (see [`crate::idle_links`]).
#[derive(Debug, Clone, Copy)]
pub struct LinkTimeouts {
    /// How often each connection is pinged.
    pub ping_interval: Duration,
    /// A connection silent this long is dropped and redialled.
    pub idle: Duration,
    /// One dial (connect and handshake) is abandoned after this long.
    pub dial: Duration,
    /// The least time between two connection attempts with one peer.
    pub reconnect_cooldown: Duration,
}

/// Why consensus failed to start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ConsensusError {
    /// The config is unusable.
    #[error("consensus config: {0}")]
    Config(String),
    /// The validator or follower set is unusable.
    #[error("consensus config: {0}")]
    Set(#[from] ValidatorsError),
    /// A validator's key is unusable (the set's own check names the
    /// validator; this is the key alone).
    #[error("consensus config: {0}")]
    Key(#[from] KeyError),
    /// The engine could not start.
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    /// The consensus thread could not be started.
    #[error("consensus thread could not start: {0}")]
    Spawn(#[source] std::io::Error),
    /// The consensus thread panicked.
    #[error("consensus thread panicked")]
    Panicked,
    /// The consensus thread ended before saying it had started.
    #[error("consensus thread ended before starting")]
    EndedBeforeStarting,
    /// Consensus did not start; why went to the starter, as the error
    /// [`spawn`] returned. (The thread's own result, once joined.)
    #[error("consensus did not start (the error spawn returned says why)")]
    DidNotStart,
}

/// A running validator's consensus.
pub struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), ConsensusError>>>,
}

impl Running {
    /// Stops consensus: no more votes, no more blocks delivered. Returns
    /// once its thread has ended, having dropped its handle on the
    /// pipeline, so the pipeline can drain.
    pub fn stop(mut self) -> Result<(), ConsensusError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ConsensusError::Panicked),
            None => Ok(()),
        }
    }
}

/// Followers a validator can take on beyond those listed at its start,
/// when `followers.toml` is reread: the p2p layer sizes its mailboxes for
/// its largest peer set at start, so the room is fixed then.
pub const SPARE_FOLLOWER_SLOTS: usize = 8;
/// How often a validator rereads its followers file.
const FOLLOWERS_REREAD: Duration = Duration::from_secs(2);

/// Namespace of every vote and every p2p handshake: the chain and the
/// exact validator set file, so validators whose files differ cannot
/// agree on anything.
pub(crate) fn namespace(chain_id: u64, set_hash: &B256) -> Vec<u8> {
    format!("sluice/{chain_id}/{set_hash}").into_bytes()
}

/// Starts consensus on its own thread.
pub fn spawn<B: Backend>(cfg: ValidatorConfig, backend: B) -> Result<Running, ConsensusError> {
    if cfg.follow && !cfg.upstreams.is_empty() {
        return spawn_upstream(cfg, backend);
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("consensus".into())
        .spawn(move || {
            let runtime = cw_tokio::Config::new()
                .with_worker_threads(cfg.worker_threads)
                .with_storage_directory(cfg.storage_dir.clone())
                .with_tcp_nodelay(Some(true))
                .with_catch_panics(false);
            cw_tokio::Runner::new(runtime)
                .start(|ctx| async move { run(ctx, cfg, backend, stop_rx, started_tx).await })
        })
        .map_err(ConsensusError::Spawn)?;
    match started_rx.recv() {
        Ok(Ok(())) => Ok(Running { stop: Some(stop_tx), thread: Some(thread) }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => match thread.join() {
            Ok(Err(e)) => Err(e),
            _ => Err(ConsensusError::EndedBeforeStarting),
        },
    }
}

/// A follower over its upstreams' feeds: no p2p, no marshal; one thread
/// ([`crate::upstream`]) that stops when asked or when the node halts.
fn spawn_upstream<B: Backend>(cfg: ValidatorConfig, backend: B) -> Result<Running, ConsensusError> {
    let participants = cfg.set.public_keys()?;
    let namespace = namespace(cfg.set.chain_id, &cfg.set_hash);
    let upstreams = crate::upstream::Upstreams {
        urls: cfg.upstreams.clone(),
        scheme: commonware_consensus::simplex::scheme::ed25519::Scheme::verifier(&namespace, participants),
        limits: cfg.set.rules.limits(),
        backend,
        max_tx_bytes: cfg.gossip.max_tx_bytes,
        highest: std::sync::atomic::AtomicU64::new(0),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Stopped once the sender fired or was dropped.
    let stop_rx = parking_lot::Mutex::new(stop_rx);
    let thread = std::thread::Builder::new()
        .name("upstream".into())
        .spawn(move || {
            tracing::info!(upstreams = ?upstreams.urls, set = %cfg.set_hash, "following over the finalized-block feed");
            use tokio::sync::oneshot::error::TryRecvError;
            upstreams.run(move || !matches!(stop_rx.lock().try_recv(), Err(TryRecvError::Empty)));
            Ok(())
        })
        .map_err(ConsensusError::Spawn)?;
    Ok(Running { stop: Some(stop_tx), thread: Some(thread) })
}

async fn run<B: Backend>(
    ctx: cw_tokio::Context,
    cfg: ValidatorConfig,
    backend: B,
    stop: tokio::sync::oneshot::Receiver<()>,
    started: std::sync::mpsc::Sender<Result<(), ConsensusError>>,
) -> Result<(), ConsensusError> {
    // Why it did not start goes to the starter, whole; the thread ends
    // with a marker rather than a second copy of it.
    let fail = |e: ConsensusError| {
        let _ = started.send(Err(e));
        ConsensusError::DidNotStart
    };
    let participants = cfg.set.public_keys().map_err(|e| fail(ConsensusError::Set(e)))?;
    let mut peers = Vec::with_capacity(cfg.set.validator.len());
    for v in &cfg.set.validator {
        let key =
            crate::validators::parse_public_key(&v.public_key).map_err(|e| fail(ConsensusError::Key(e)))?;
        peers.push((key, PeerAddress::Symmetric(v.p2p_addr)));
    }
    let peers = Map::from_iter_dedup(peers);
    // A validator accepts its followers' connections (secondary peers:
    // sent blocks and certificates, never asked to vote); a follower
    // dials the validators and is nobody's peer but theirs.
    let mut secondary = Vec::new();
    if !cfg.follow {
        for f in &cfg.followers {
            let key = crate::validators::parse_public_key(&f.public_key).map_err(|source| {
                fail(ConsensusError::Set(ValidatorsError::FollowerKey { name: f.name.clone(), source }))
            })?;
            secondary.push((key, PeerAddress::Symmetric(f.p2p_addr)));
        }
    }
    let secondary = Map::from_iter_dedup(secondary);
    // How the p2p layer labels a peer in its metrics: its key's Display.
    let follower_labels: std::collections::HashSet<String> =
        secondary.keys().iter().map(|k| k.to_string()).collect();
    // The p2p layer counts this node in its peer set whether or not it is
    // one of them (a follower is not); a validator keeps room for followers
    // added to its file later.
    let spare = if cfg.follow { 0 } else { SPARE_FOLLOWER_SLOTS };
    let tracked = participants.len() + secondary.len() + spare + 1;
    let namespace = namespace(cfg.set.chain_id, &cfg.set_hash);
    let p2p_namespace = [namespace.as_slice(), b"_P2P"].concat();
    let max_message = engine::max_message_size(&cfg.set.rules, participants.len());
    let handshake = Idle::new(
        Cups::<_, ChaCha20Poly1305>::new(
            Sake {
                signer: cfg.key.clone(),
                synchrony_bound: Duration::from_secs(5),
                max_handshake_age: Duration::from_secs(10),
                version: sake::Version::V1,
            },
            cups::Version::V1,
        ),
        cfg.links.idle,
        ctx.child("p2p_idle"),
    );
    let mut p2p_cfg = lookup::Config::local(
        handshake,
        &p2p_namespace,
        cfg.p2p_listen,
        NZUsize!(tracked),
        max_message,
        NZUsize!(1024),
    );
    // Validators restart (crash tests, upgrades) and paths heal: reconnect
    // quickly, and never wait long on one dial into a dead path.
    p2p_cfg.dial_frequency = Duration::from_millis(250);
    p2p_cfg.dial_timeout = cfg.links.dial;
    p2p_cfg.ping_frequency = cfg.links.ping_interval;
    p2p_cfg.peer_connection_cooldown = cfg.links.reconnect_cooldown;
    let (mut network, mut oracle) = lookup::Network::new(ctx.child("p2p"), p2p_cfg);
    let votes = Quota::per_second(NZU32!(cfg.votes_per_second.max(1)));
    let blocks = Quota::per_second(NZU32!(cfg.blocks_per_second.max(1)));
    let txs = Quota::per_second(NZU32!(cfg.gossip_batches_per_second.max(1)));
    let channels = Channels {
        votes: network.register(channel::VOTES, votes),
        certificates: network.register(channel::CERTIFICATES, votes),
        resolver: network.register(channel::RESOLVER, blocks),
        broadcast: network.register(channel::BROADCAST, blocks),
        backfill: network.register(channel::BACKFILL, blocks),
        txs: network.register(channel::TXS, txs),
    };
    let network_handle = network.start();
    let mut reload = cfg.followers_file.clone().filter(|_| !cfg.follow).map(|file| FollowersFile {
        text: std::fs::read_to_string(&file).unwrap_or_default(),
        file,
        set: cfg.set.clone(),
        validators: peers.clone(),
        oracle: oracle.clone(),
        id: 0,
        slots: secondary.len() + SPARE_FOLLOWER_SLOTS,
    });
    let _ = oracle.track(0, AddressableTrackedPeers::new(peers, secondary));

    let setup = Setup {
        backend: backend.clone(),
        key: cfg.key.clone(),
        participants,
        namespace,
        rules: cfg.set.rules,
        coinbase: cfg.coinbase,
        genesis: cfg.genesis,
        genesis_app_hash: cfg.genesis_app_hash,
        timeouts: cfg.timeouts,
        max_exec_lag_blocks: cfg.max_exec_lag_blocks,
        max_pending_acks: NZUsize!(cfg.max_pending_acks.max(1)),
        partition: "sluice".into(),
        gossip: crate::gossip::GossipLimits {
            // Room for the p2p layer's own framing.
            batch_max_bytes: cfg.gossip.batch_max_bytes.min(max_message as usize - 64),
            ..cfg.gossip
        },
        chain_id: cfg.set.chain_id,
        spec: cfg.spec,
        verify_workers: cfg.verify_workers,
        archive_retention_blocks: cfg.archive_retention_blocks,
        archive_items_per_section: crate::archives::archive_section(
            &cfg.storage_dir,
            cfg.archive_retention_blocks,
        )
        .map_err(|e| fail(ConsensusError::Config(format!("consensus archives' section size: {e}"))))?,
        storage_dir: Some(cfg.storage_dir.clone()),
        publish_feed: true,
    };
    let role = if cfg.follow { Role::Follower } else { Role::Validator };
    let mut handles = engine::start(ctx.child("node"), setup, channels, oracle.clone(), oracle, role)
        .await
        .map_err(|e| fail(e.into()))?;
    handles.push(network_handle);
    let _ = started.send(Ok(()));
    tracing::info!(listen = %cfg.p2p_listen, set = %cfg.set_hash, ?role, followers = cfg.followers.len(), "consensus started");

    // Runs until asked to stop or until the node halts: a halted node
    // stops voting (it abstains rather than sign what it cannot check).
    let halted = {
        let (backend, ctx) = (backend.clone(), ctx.child("halt_watch"));
        // A follower is connected to validators only; a validator counts
        // the others (its followers are not its peers for this).
        let others = if cfg.follow { cfg.set.validator.len() } else { cfg.set.validator.len() - 1 };
        let set_hash = cfg.set_hash;
        async move {
            let (mut alone, mut was) = (0u32, 0.0);
            let mut follower_labels = follower_labels;
            let mut reread_at = std::time::Instant::now() + FOLLOWERS_REREAD;
            loop {
                if let Some(reason) = backend.halted() {
                    return reason;
                }
                if let Some(reload) = reload.as_mut().filter(|_| std::time::Instant::now() >= reread_at) {
                    reread_at = std::time::Instant::now() + FOLLOWERS_REREAD;
                    if let Some(labels) = reload.check() {
                        follower_labels = labels;
                    }
                }
                let (peers, followers) = connected_peers(&ctx.encode(), &follower_labels);
                metrics::gauge!(crate::metrics::PEERS).set(peers);
                metrics::gauge!(crate::metrics::FOLLOWERS).set(followers);
                if peers != was {
                    tracing::info!(peers, of = others, "validators connected");
                    was = peers;
                }
                // A validator whose validators.toml differs signs its
                // handshakes under another namespace: every peer refuses
                // it, and the p2p stack says so only at debug level.
                alone = if peers == 0.0 && others > 0 { alone + 1 } else { 0 };
                if alone == 20 || (alone > 0 && alone.is_multiple_of(120)) {
                    tracing::warn!(
                        set = %set_hash,
                        "no other validator connected for {} s: check that every validator has the same \
                         validators.toml (this one hashes to {set_hash}) and that their p2p addresses are reachable",
                        alone / 2
                    );
                }
                ctx.sleep(Duration::from_millis(500)).await;
            }
        }
    };
    match select(stop, Box::pin(halted)).await {
        Either::Left(_) => tracing::debug!("consensus stopping"),
        Either::Right((reason, _)) => tracing::error!(%reason, "the node halted; consensus stops voting"),
    }
    drop(backend);
    for h in handles {
        h.abort();
    }
    let _ = ctx.stop(0, Some(Duration::from_secs(5))).await;
    Ok(())
}

/// A validator's followers file, reread so that followers come and go
/// without a restart: a changed, valid file becomes the next peer set
/// (same validators, its followers as secondary peers).
struct FollowersFile {
    file: PathBuf,
    /// The text last applied (or found invalid).
    text: String,
    set: ValidatorSet,
    validators: Map<PublicKey, PeerAddress>,
    oracle: lookup::Oracle<PublicKey>,
    /// The id of the peer set tracked last (ids must increase).
    id: u64,
    /// The most followers the p2p layer has room for.
    slots: usize,
}

impl FollowersFile {
    /// Rereads the file; when it changed and is valid, tracks the new peer
    /// set and returns its followers' metric labels.
    fn check(&mut self) -> Option<std::collections::HashSet<String>> {
        let text = std::fs::read_to_string(&self.file).ok()?;
        if text == self.text {
            return None;
        }
        self.text = text;
        let followers = match crate::validators::FollowerSet::load(&self.file, &self.set) {
            Ok(f) => f.follower,
            Err(e) => {
                tracing::warn!(error = %e, "followers file changed but is not valid: the previous followers stay");
                return None;
            }
        };
        if followers.len() > self.slots {
            tracing::warn!(
                followers = followers.len(),
                room = self.slots,
                "followers file lists more followers than this validator has room for until it restarts: \
                 the previous followers stay"
            );
            return None;
        }
        let mut secondary = Vec::with_capacity(followers.len());
        for f in &followers {
            // Checked by FollowerSet::load.
            let Ok(key) = crate::validators::parse_public_key(&f.public_key) else { return None };
            secondary.push((key, PeerAddress::Symmetric(f.p2p_addr)));
        }
        let secondary = Map::from_iter_dedup(secondary);
        let labels = secondary.keys().iter().map(|k| k.to_string()).collect();
        self.id += 1;
        let _ = self.oracle.track(self.id, AddressableTrackedPeers::new(self.validators.clone(), secondary));
        tracing::info!(followers = followers.len(), file = %self.file.display(), "followers reloaded");
        Some(labels)
    }
}

/// Validators and followers connected now, read off the p2p tracker's own
/// family of connected peers (one series per peer with a live connection,
/// labelled with its key) in the runtime's registry: commonware keeps its
/// metrics there, not in `metrics`. Its `reserved` gauge is not this: a
/// dial in progress holds a reservation too, so a validator cut off from
/// all its peers would still count them. A peer whose label is in
/// `followers` counts as a follower.
fn connected_peers(registry: &str, followers: &std::collections::HashSet<String>) -> (f64, f64) {
    let (mut peers, mut following) = (0.0, 0.0);
    for line in registry.lines() {
        let Some((name, rest)) = line.split_once('{') else { continue };
        if !(name.starts_with("p2p_tracker") && name.ends_with("_connected")) {
            continue;
        }
        let label = rest.split('"').nth(1).unwrap_or_default();
        if followers.contains(label) {
            following += 1.0;
        } else {
            peers += 1.0;
        }
    }
    (peers, following)
}

#[cfg(test)]
mod tests {
    #[test]
    fn connected_peers_counts_the_trackers_connected_family() {
        let text = "# HELP x\np2p_tracker_directory_tracked 3\np2p_tracker_directory_reserved 3\n\
                    p2p_tracker_directory_connected{peer=\"a1\"} 1796469801000\n\
                    p2p_tracker_directory_connected{peer=\"b2\"} 1796469802000\n";
        let none = std::collections::HashSet::new();
        assert_eq!(super::connected_peers(text, &none), (2.0, 0.0));
        assert_eq!(super::connected_peers("nothing 1\n", &none), (0.0, 0.0));
        let b2 = std::collections::HashSet::from(["b2".to_string()]);
        assert_eq!(super::connected_peers(text, &b2), (1.0, 1.0));
    }
}
