//! Assembling one validator's consensus: simplex (votes), marshal (block
//! dissemination, ordering, persistence, backfill), the application, the
//! sink and the forwarder.
//!
//! Generic over the runtime context and the network, so that production
//! (tokio, authenticated TCP) and the deterministic simulation (virtual
//! time, simulated links) run exactly this code.

use std::{
    num::{NonZeroU16, NonZeroU64, NonZeroUsize},
    path::{Path, PathBuf},
    sync::{atomic::AtomicU64, Arc},
    time::Duration,
};

use alloy_primitives::{Address, B256};
use commonware_broadcast::buffered;
use commonware_consensus::{
    marshal::{
        self, core::Actor as Marshal, resolver::p2p as marshal_resolver, standard::Inline, Identifier,
    },
    simplex::{
        self,
        config::{Floor, ForwardPolicy, SkipBudget, SkipPolicy},
        elector::RoundRobin,
        scheme::ed25519,
    },
    types::{Epoch, FixedEpocher, Height, ViewDelta},
};
use commonware_cryptography::{
    certificate::{ConstantProvider, Verifier as _},
    ed25519::{PrivateKey, PublicKey},
    sha256::Sha256,
    Digested,
};
use commonware_macros::select;
use commonware_p2p::{Blocker, Provider, Receiver, Sender};
use commonware_parallel::Sequential;
use commonware_runtime::{buffer::paged::CacheRef, Clock, Handle, Metrics, Spawner, Storage};
use commonware_storage::{archive::prunable, translator::EightCap};
use commonware_utils::{ordered::Set, NZDuration, NZUsize, NZU16, NZU64};
use parking_lot::Mutex;
use rand_core::CryptoRng;
use sluice_messages::SealedBlock;

use crate::behind::CatchUp;
use crate::{
    app::SluiceApp,
    backend::Backend,
    block::{digest_of, ChainBlock},
    proposals::OwnProposals,
    rules::Rules,
    sink::{self, Observed, Sink},
};

/// The storage page: the OS page, so a cached page is one read.
const PAGE_SIZE: NonZeroU16 = NZU16!(4096);
/// 4 MiB of archive pages cached, shared by every archive: consensus reads
/// an old block or certificate only to serve a peer catching up, once.
const PAGE_CACHE_PAGES: NonZeroUsize = NZUsize!(1024);
/// Each journal's read and write buffer: 64 KiB turns a block's many small
/// appends into few system calls, and the dozen journals' buffers together
/// stay under 1 MiB.
const IO_BUFFER: NonZeroUsize = NZUsize!(1 << 16);
/// Commonware actors' mailboxes: a view is a few messages per validator, so
/// 1,024 holds many views' worth; a stalled actor then makes its senders
/// wait instead of growing memory.
const MAILBOX: NonZeroUsize = NZUsize!(1024);
/// How soon a block or certificate asked of a peer is asked again: half a
/// 200 ms block time, so a validator catching up loses at most a block's
/// time to one lost answer.
const FETCH_RETRY: Duration = Duration::from_millis(100);
/// Views kept after finalization, for late votes and peers a few views
/// behind: 10 views are 2 s at the default block time.
const VIEW_RETENTION: u64 = 10;
/// Blocks the broadcast buffer keeps per sender: more than the views kept
/// ([`VIEW_RETENTION`]), so a block still voted on is still served.
const BROADCAST_DEQUE: usize = 16;
/// Marshal's prunable archives (notarized blocks not yet finalized) keep
/// this many heights per section: pruning drops whole sections, and
/// finalization lags notarization by a view or two.
const PRUNABLE_PER_SECTION: u64 = 10;
/// Gaps marshal repairs at once: a restarted validator fetches at most 10
/// missing blocks concurrently, so catching up does not flood its peers.
const MAX_REPAIR: usize = 10;
/// One epoch for the life of the chain: the validator set does not change.
const EPOCH_LENGTH: u64 = 1 << 40;

/// Consensus timing, from config.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// How long to wait for the leader's proposal.
    pub leader: Duration,
    /// How long to wait for a notarized proposal to be certified.
    pub certification: Duration,
    /// How often to retry a view that timed out.
    pub retry: Duration,
    /// A leader silent this long (while a quorum is not) is skipped at
    /// once.
    pub skip: Duration,
    /// How long to wait for a block or certificate fetched from a peer.
    pub fetch: Duration,
}

/// Everything one validator's consensus needs besides the network.
pub(crate) struct Setup<B: Backend> {
    pub(crate) backend: B,
    pub(crate) key: PrivateKey,
    pub(crate) participants: Set<PublicKey>,
    pub(crate) namespace: Vec<u8>,
    pub(crate) rules: Rules,
    pub(crate) coinbase: Address,
    pub(crate) genesis: Arc<SealedBlock>,
    pub(crate) genesis_app_hash: B256,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_exec_lag_blocks: u64,
    pub(crate) max_pending_acks: NonZeroUsize,
    /// Prefix of every storage partition (journals, archives).
    pub(crate) partition: String,
    /// Transaction dissemination's bounds.
    pub(crate) gossip: crate::gossip::GossipLimits,
    /// EIP-155 chain id every transaction of a proposal must carry.
    pub(crate) chain_id: u64,
    /// The EVM spec the chain runs (intrinsic gas of a proposal's
    /// transactions).
    pub(crate) spec: sluice_messages::Spec,
    /// Threads recovering a proposal's senders.
    pub(crate) verify_workers: usize,
    /// Finalized heights marshal's archives keep below the committed
    /// height, for peers catching up (they backfill from them) and for
    /// replaying blocks the store lost; older sections are pruned as the
    /// store commits. `None` keeps every block (the node's archive mode).
    pub(crate) archive_retention_blocks: Option<NonZeroU64>,
    /// Heights per section of the finalized archives
    /// ([`ARCHIVE_ITEMS_PER_SECTION`]; smaller in the simulation, so that
    /// a short run prunes). Fixed for the life of the archives' data.
    pub(crate) archive_items_per_section: NonZeroU64,
    /// Where the runtime keeps partitions on disk (one directory each),
    /// for the messages and the archive-size metric; `None` in the
    /// simulation's in-memory storage.
    pub(crate) storage_dir: Option<PathBuf>,
}

/// The six channels a validator uses, each a (sender, receiver) pair.
pub(crate) struct Channels<S, R> {
    pub(crate) votes: (S, R),
    pub(crate) certificates: (S, R),
    pub(crate) resolver: (S, R),
    pub(crate) broadcast: (S, R),
    pub(crate) backfill: (S, R),
    /// Transaction batches (see `gossip.rs`).
    pub(crate) txs: (S, R),
}

/// Channel numbers on the wire.
pub(crate) mod channel {
    pub(crate) const VOTES: u64 = 0;
    pub(crate) const CERTIFICATES: u64 = 1;
    pub(crate) const RESOLVER: u64 = 2;
    pub(crate) const BROADCAST: u64 = 3;
    pub(crate) const BACKFILL: u64 = 4;
    pub(crate) const TXS: u64 = crate::gossip::CHANNEL;
}

/// The largest message any channel carries.
pub(crate) fn max_message_size(rules: &Rules, validators: usize) -> u32 {
    let size = marshal::max_payload_size::<marshal::standard::Standard<ChainBlock>, ed25519::Scheme>(
        validators as u32,
        &rules.limits(),
    );
    u32::try_from(size).unwrap_or(u32::MAX)
}

/// Heights per section of marshal's finalized archives (blocks and
/// certificates by height) in archive mode (no retention). Every section
/// is a key file and a value file held open, with an in-memory index of 8
/// bytes per height plus each key's: 16,384 heights is about 55 minutes at
/// a 200 ms block time, so a node keeping everything opens four files (two
/// per archive) per ~55 minutes of chain rather than per minute. With a
/// retention, pruning drops whole sections (a retention of R heights keeps
/// between R and R + a section): see [`PRUNED_ARCHIVE_ITEMS_PER_SECTION`].
pub(crate) const ARCHIVE_ITEMS_PER_SECTION: NonZeroU64 = NZU64!(1 << 14);
/// Heights per section while a retention is kept (full mode): pruning
/// keeps at most this many heights beyond the retention (~3.4 minutes of
/// 200 ms blocks), so the archives' bytes flatten soon after the
/// retention is reached.
pub(crate) const PRUNED_ARCHIVE_ITEMS_PER_SECTION: NonZeroU64 = NZU64!(1 << 10);

/// The file in the consensus storage dir recording the archives' section
/// size: fixed for the life of their data (a section is a blob named by
/// its first height), whatever the mode of later starts.
const SECTION_FILE: &str = "archive-items-per-section";

/// The section size of the archives in `dir`: the recorded one, or, for new
/// archives, [`PRUNED_ARCHIVE_ITEMS_PER_SECTION`] with a retention and
/// [`ARCHIVE_ITEMS_PER_SECTION`] without, recorded for the next start.
pub(crate) fn archive_section(dir: &Path, retention: Option<NonZeroU64>) -> std::io::Result<NonZeroU64> {
    let file = dir.join(SECTION_FILE);
    match std::fs::read_to_string(&file) {
        Ok(text) => text.trim().parse::<NonZeroU64>().map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", file.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let section = if retention.is_some() {
                PRUNED_ARCHIVE_ITEMS_PER_SECTION
            } else {
                ARCHIVE_ITEMS_PER_SECTION
            };
            std::fs::create_dir_all(dir)?;
            std::fs::write(&file, section.to_string())?;
            Ok(section)
        }
        Err(e) => Err(e),
    }
}

/// How often the archive metrics are refreshed between prunes: they move
/// only as blocks are appended, so a few seconds is current enough.
const ARCHIVE_METRICS_INTERVAL: Duration = Duration::from_secs(5);
/// The finalized archives, by the name their partitions carry.
pub(crate) const ARCHIVES: [&str; 2] = ["finalizations", "blocks"];
/// The partitions an older sluice's immutable archives wrote, by suffix
/// after `{prefix}-{archive}-`: any of them holding a blob means the data
/// dir is of that layout.
const IMMUTABLE_PARTITIONS: [&str; 5] =
    ["freezer-table", "freezer-key", "freezer-value", "ordinal", "metadata"];
/// The kinds of partition of one prunable archive.
const PRUNABLE_PARTITIONS: [&str; 3] = ["metadata", "key", "value"];

/// The partition of `archive`'s `kind` (metadata, key, value). Named apart
/// from the immutable archives' partitions (`{prefix}-{archive}-metadata`
/// among them), so the two layouts never share a partition.
pub(crate) fn archive_partition(prefix: &str, archive: &str, kind: &str) -> String {
    format!("{prefix}-{archive}-prunable-{kind}")
}

/// A finalized archive (blocks or certificates by height), pruned by
/// section of [`ARCHIVE_ITEMS_PER_SECTION`] heights (the simulation uses
/// smaller ones). Keys are block digests (keccak: uniform), so the first 8
/// bytes index them.
fn archive_config<C>(
    prefix: &str,
    name: &str,
    items_per_section: NonZeroU64,
    page_cache: &CacheRef,
    codec_config: C,
) -> prunable::Config<EightCap, C> {
    prunable::Config {
        translator: EightCap,
        metadata_partition: archive_partition(prefix, name, "metadata"),
        key_partition: archive_partition(prefix, name, "key"),
        key_page_cache: page_cache.clone(),
        value_partition: archive_partition(prefix, name, "value"),
        compression: None,
        codec_config,
        items_per_section,
        key_write_buffer: IO_BUFFER,
        value_write_buffer: IO_BUFFER,
        replay_buffer: IO_BUFFER,
    }
}

/// Refuses storage holding an older sluice's immutable archives: this build
/// cannot read them, and would otherwise start empty archives beside them
/// (the old ones never read again, never removed). `dir` names the storage
/// for the message.
pub(crate) async fn refuse_immutable_archives<E: Storage>(
    ctx: &E,
    prefix: &str,
    dir: Option<&Path>,
) -> Result<(), EngineError> {
    for archive in ARCHIVES {
        for kind in IMMUTABLE_PARTITIONS {
            let partition = format!("{prefix}-{archive}-{kind}");
            match ctx.scan(&partition).await {
                Ok(blobs) if !blobs.is_empty() => {
                    let dir = dir.map_or_else(|| "(in memory)".to_string(), |d| d.display().to_string());
                    return Err(EngineError::OlderArchives { dir, partition });
                }
                // Missing or empty: nothing of the old layout here.
                Ok(_) | Err(commonware_runtime::Error::PartitionMissing(_)) => {}
                Err(e) => return Err(EngineError::Scan { partition, source: e }),
            }
        }
    }
    Ok(())
}

/// Why consensus could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The key is not one of the validator set's.
    #[error("this validator's key is not in the validator set")]
    NotAValidator,
    /// The storage holds the immutable archives an older sluice wrote.
    #[error(
        "consensus data dir {dir} holds archives written by an older sluice (immutable archives, \
         partition {partition}); this build keeps pruned archives and cannot read them: stop the node and \
         remove {dir} (consensus storage only: the chain in the store stays, and consensus fetches \
         finalized blocks again from the other validators), or use another --data-dir"
    )]
    OlderArchives {
        /// The consensus storage directory.
        dir: String,
        /// One partition of the old layout found there.
        partition: String,
    },
    /// The storage could not be listed.
    #[error("consensus storage: listing partition {partition}: {source}")]
    Scan {
        /// The partition being listed.
        partition: String,
        /// What the runtime said.
        #[source]
        source: commonware_runtime::Error,
    },
    /// An archive could not be opened.
    #[error("consensus storage: {archive} archive: {source}")]
    Storage {
        /// Which archive (`finalizations`, `blocks`).
        archive: &'static str,
        /// What the storage said.
        #[source]
        source: commonware_storage::archive::Error,
    },
}

/// Starts one validator's consensus on `ctx`; returns the handles of its
/// tasks (any of them ending means the validator stopped).
pub(crate) async fn start<E, B, S, R, P, K>(
    ctx: E,
    setup: Setup<B>,
    channels: Channels<S, R>,
    peers: P,
    blocker: K,
) -> Result<Vec<Handle<()>>, EngineError>
where
    E: CryptoRng + Spawner + Metrics + Clock + Storage,
    B: Backend,
    S: Sender<PublicKey = PublicKey>,
    R: Receiver<PublicKey = PublicKey>,
    P: Provider<PublicKey = PublicKey> + Clone,
    K: Blocker<PublicKey = PublicKey> + Clone,
{
    use commonware_cryptography::Signer as _;
    let me = setup.key.public_key();
    let scheme = ed25519::Scheme::signer(&setup.namespace, setup.participants.clone(), setup.key.clone())
        .ok_or(EngineError::NotAValidator)?;
    let page_cache = CacheRef::new(PAGE_SIZE, PAGE_CACHE_PAGES);
    let prefix = setup.partition.clone();
    // Before anything opens a partition: the old layout's metadata
    // partitions would otherwise be read as the new archives'.
    refuse_immutable_archives(&ctx, &prefix, setup.storage_dir.as_deref()).await?;
    let limits = setup.rules.limits();

    let resolver = marshal_resolver::init(
        ctx.child("marshal_resolver"),
        marshal_resolver::Config {
            public_key: me.clone(),
            peer_provider: peers.clone(),
            blocker: blocker.clone(),
            mailbox_size: MAILBOX,
            fetch_timeout: NZDuration!(setup.timeouts.fetch),
            fetch_retry_delay: FETCH_RETRY,
            priority_requests: false,
            priority_responses: false,
        },
        channels.backfill,
    );
    let (broadcast, buffer) = buffered::Engine::new(
        ctx.child("broadcast"),
        buffered::Config {
            public_key: me.clone(),
            mailbox_size: MAILBOX,
            deque_size: BROADCAST_DEQUE,
            priority: false,
            codec_config: limits,
            peer_provider: peers.clone(),
            strategy: Sequential,
        },
    );
    let mut handles = vec![broadcast.start(channels.broadcast)];
    {
        let (sender, receiver) = channels.txs;
        let (backend, limits) = (setup.backend.clone(), setup.gossip);
        handles.push(
            ctx.child("gossip_send").spawn(move |ctx| crate::gossip::send_loop(ctx, backend, sender, limits)),
        );
        let backend = setup.backend.clone();
        handles.push(
            ctx.child("gossip_receive")
                .spawn(move |_| crate::gossip::receive_loop(backend, receiver, limits)),
        );
    }

    let section = setup.archive_items_per_section;
    let finalizations = prunable::Archive::init(
        ctx.child("finalizations_by_height"),
        archive_config(
            &prefix,
            "finalizations",
            section,
            &page_cache,
            ed25519::Scheme::certificate_codec_config_unbounded(),
        ),
    )
    .await
    .map_err(|source| EngineError::Storage { archive: "finalizations", source })?;
    let blocks = prunable::Archive::init(
        ctx.child("finalized_blocks"),
        archive_config(&prefix, "blocks", section, &page_cache, limits),
    )
    .await
    .map_err(|source| EngineError::Storage { archive: "blocks", source })?;

    let genesis_digest = digest_of(&setup.genesis.hash);
    let genesis = Digested::precomputed(ChainBlock(Arc::clone(&setup.genesis)), genesis_digest);
    let epocher = FixedEpocher::new(NZU64!(EPOCH_LENGTH));
    let (marshal_actor, marshal, floor) = Marshal::init(
        ctx.child("marshal"),
        finalizations,
        blocks,
        marshal::Config {
            provider: ConstantProvider::new(scheme.clone()),
            epocher: epocher.clone(),
            start: marshal::Start::Genesis(genesis),
            partition_prefix: format!("{prefix}-marshal"),
            mailbox_size: MAILBOX,
            view_retention: ViewDelta::new(VIEW_RETENTION),
            prunable_items_per_section: NZU64!(PRUNABLE_PER_SECTION),
            page_cache: page_cache.clone(),
            replay_buffer: IO_BUFFER,
            key_write_buffer: IO_BUFFER,
            value_write_buffer: IO_BUFFER,
            block_codec_config: limits,
            max_repair: NZUsize!(MAX_REPAIR),
            max_pending_acks: setup.max_pending_acks,
            strategy: Sequential,
        },
    )
    .await;

    let proposals = Arc::new(Mutex::new(OwnProposals::default()));
    let (tx, rx) = flume::bounded(setup.max_pending_acks.get());
    // The highest height finalized anywhere, as marshal learns it.
    let tip = Arc::new(AtomicU64::new(0));
    let sink =
        Sink { tx, finalized: Arc::clone(&tip), backend: setup.backend.clone(), catching_up: Arc::default() };
    let processed = floor.processed().map_or(0, |p| p.height().get());
    {
        let (backend, proposals, marshal) = (setup.backend.clone(), Arc::clone(&proposals), marshal.clone());
        let fetch = move |h: u64| {
            let marshal = marshal.clone();
            async move {
                marshal
                    .get_block(Identifier::Height(Height::new(h)))
                    .await
                    .map(|b: Digested<ChainBlock>| b.inner().clone())
            }
        };
        handles.push(
            ctx.child("forwarder").spawn(move |_| sink::forward(rx, backend, proposals, processed, fetch)),
        );
    }
    handles.push(marshal_actor.start(sink, buffer, resolver));
    // Nothing to prune and no disk to measure (the simulation keeping
    // everything): no task, so runs without a retention are scheduled
    // exactly as before it existed.
    if setup.archive_retention_blocks.is_some() || setup.storage_dir.is_some() {
        let (marshal, backend) = (marshal.clone(), setup.backend.clone());
        let keeper = ArchiveKeeper {
            committed: setup.backend.committed(),
            tip,
            retention: setup.archive_retention_blocks,
            section,
            prefix: prefix.clone(),
            dir: setup.storage_dir.clone(),
        };
        handles.push(
            ctx.child("archive_pruner")
                .spawn(move |ctx| keeper.run(ctx, move |h| marshal.prune(h), move |why| backend.halt(why))),
        );
    }

    let app = SluiceApp {
        backend: setup.backend.clone(),
        proposals,
        rules: setup.rules,
        coinbase: setup.coinbase,
        max_exec_lag_blocks: setup.max_exec_lag_blocks,
        genesis_app_hash: setup.genesis_app_hash,
        tx_rules: sluice_txpool::AdmissionRules::for_proposals(
            setup.chain_id,
            setup.spec,
            setup.rules.block_gas_limit,
            setup.rules.base_fee_wei,
            setup.rules.max_tx_size_bytes,
        ),
        verify_workers: setup.verify_workers.max(1),
    };
    let inline = Inline::new(ctx.child("application"), app, marshal, epocher);
    let engine = simplex::Engine::new(
        ctx.child("simplex"),
        simplex::config::Config {
            scheme,
            elector: RoundRobin::<Sha256>::default(),
            blocker,
            automaton: inline.clone(),
            relay: inline.clone(),
            reporter: Observed::new(inline, setup.participants.clone()),
            track_historical_votes: false,
            strategy: Sequential,
            partition: format!("{prefix}-simplex"),
            mailbox_size: MAILBOX,
            epoch: Epoch::zero(),
            floor: Floor::Genesis(genesis_digest),
            replay_buffer: IO_BUFFER,
            write_buffer: IO_BUFFER,
            page_cache,
            leader_timeout: setup.timeouts.leader,
            certification_timeout: setup.timeouts.certification,
            timeout_retry: setup.timeouts.retry,
            view_retention: ViewDelta::new(VIEW_RETENTION),
            skip: SkipPolicy::Enabled { timeout: setup.timeouts.skip, budget: SkipBudget::Participants },
            fetch_timeout: NZDuration!(setup.timeouts.fetch),
            fetch_retry_delay: FETCH_RETRY,
            forward: ForwardPolicy::Disabled,
        },
    );
    handles.push(engine.start(channels.votes, channels.certificates, channels.resolver));
    Ok(handles)
}

/// Keeps marshal's finalized archives bounded: prunes them behind the
/// committed height as the store commits, and keeps the archive metrics
/// current.
struct ArchiveKeeper {
    /// The store's committed height, as it moves.
    committed: tokio::sync::watch::Receiver<u64>,
    /// The highest height finalized anywhere (marshal's tip).
    tip: Arc<AtomicU64>,
    /// Heights kept below the committed one; `None` keeps everything.
    retention: Option<NonZeroU64>,
    /// Heights per archive section (pruning's granularity).
    section: NonZeroU64,
    /// Prefix of the archives' partitions.
    prefix: String,
    /// Where the partitions are on disk, if they are (the size metric).
    dir: Option<PathBuf>,
}

impl ArchiveKeeper {
    /// Runs for the life of the validator (never returns: its handle
    /// ending would mean the validator stopped). `prune` asks marshal to
    /// drop what is below a height; `halt` stops the node when it fell
    /// further behind than its peers keep ([`crate::behind`]).
    async fn run<E: Clock + Storage>(mut self, ctx: E, prune: impl Fn(Height), halt: impl Fn(String)) {
        let mut pruned_at = None;
        let mut watching = true;
        let mut refresh_at = ctx.current();
        let start = *self.committed.borrow();
        let mut catch_up =
            self.retention.map(|r| CatchUp::new(r, crate::behind::CATCH_UP_PATIENCE, start, ctx.current()));
        loop {
            let committed = *self.committed.borrow_and_update();
            let tip = self.tip.load(std::sync::atomic::Ordering::Acquire);
            if let Some(why) = catch_up.as_mut().and_then(|c| c.check(committed, tip, ctx.current())) {
                tracing::error!(reason = %why, "too far behind to catch up");
                halt(why);
            }
            if let Some(keep) = prune_target(committed, self.retention, self.section, pruned_at) {
                tracing::debug!(committed, keep, "pruning consensus archives");
                prune(Height::new(keep));
                pruned_at = Some(committed);
                // Marshal prunes on its own time: the refresh below shows
                // the previous prune, the next one this.
                refresh_at = ctx.current();
            }
            if ctx.current() >= refresh_at {
                self.refresh_metrics(&ctx).await;
                refresh_at = ctx.current() + ARCHIVE_METRICS_INTERVAL;
            }
            if watching {
                select! {
                    changed = self.committed.changed() => {
                        // The store stopped: nothing more to prune, but the
                        // metrics stay current until the validator stops.
                        watching = changed.is_ok();
                    },
                    _ = ctx.sleep_until(refresh_at) => {},
                }
            } else {
                ctx.sleep_until(refresh_at).await;
            }
        }
    }

    /// Sets the archive gauges: the oldest section the block archive keeps
    /// (listing a partition reads no blob) and, on disk, the archives'
    /// bytes.
    async fn refresh_metrics<E: Storage>(&self, ctx: &E) {
        let blocks_key = archive_partition(&self.prefix, "blocks", "key");
        if let Some(oldest) = archive_sections(ctx, &blocks_key).await.first() {
            metrics::gauge!(crate::metrics::ARCHIVE_OLDEST_HEIGHT).set(*oldest as f64);
        }
        if let Some(dir) = &self.dir {
            let bytes = archive_bytes(dir, &self.prefix);
            metrics::gauge!(crate::metrics::ARCHIVE_BYTES).set(bytes as f64);
        }
    }
}

/// The height below which to prune marshal's archives now, if any: only
/// with a retention, only once the committed height is past it, and only
/// once the committed height moved by a section since the last prune
/// (pruning drops whole sections, so a prune per block would mostly do
/// nothing). Always below the committed height: the forwarder replays
/// from the committed height up, and peers backfill from what is kept.
fn prune_target(
    committed: u64,
    retention: Option<NonZeroU64>,
    section: NonZeroU64,
    pruned_at: Option<u64>,
) -> Option<u64> {
    let keep = committed.checked_sub(retention?.get()).filter(|k| *k > 0)?;
    match pruned_at {
        Some(at) if committed < at.saturating_add(section.get()) => None,
        _ => Some(keep),
    }
}

/// The sections (their first heights, ascending) a prunable archive's
/// partition holds: each is one blob, named by its first height.
pub(crate) async fn archive_sections<E: Storage>(ctx: &E, partition: &str) -> Vec<u64> {
    let mut sections: Vec<u64> = match ctx.scan(partition).await {
        Ok(names) => names
            .iter()
            .filter_map(|n| <[u8; 8]>::try_from(n.as_slice()).ok())
            .map(u64::from_be_bytes)
            .collect(),
        Err(_) => Vec::new(),
    };
    sections.sort_unstable();
    sections
}

/// Bytes on disk of the finalized archives' partitions under `dir` (the
/// tokio runtime keeps a partition as a directory of that name, a blob as
/// a file in it). Unreadable entries count as 0: a metric, not a check.
fn archive_bytes(dir: &Path, prefix: &str) -> u64 {
    ARCHIVES
        .iter()
        .flat_map(|archive| {
            PRUNABLE_PARTITIONS.iter().map(move |kind| archive_partition(prefix, archive, kind))
        })
        .filter_map(|partition| std::fs::read_dir(dir.join(partition)).ok())
        .flatten()
        .filter_map(|entry| entry.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    #[test]
    fn the_section_size_is_chosen_once_per_data_dir() {
        let dir = std::env::temp_dir().join(format!("sluice-archive-section-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let retention = NonZeroU64::new(2_000);
        assert_eq!(archive_section(&dir, retention).unwrap(), PRUNED_ARCHIVE_ITEMS_PER_SECTION);
        // A later start in archive mode reads the archives it finds.
        assert_eq!(archive_section(&dir, None).unwrap(), PRUNED_ARCHIVE_ITEMS_PER_SECTION);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(archive_section(&dir, None).unwrap(), ARCHIVE_ITEMS_PER_SECTION);
        std::fs::write(dir.join(SECTION_FILE), "zero").unwrap();
        assert!(archive_section(&dir, retention).is_err(), "a damaged record is an error");
        let _ = std::fs::remove_dir_all(&dir);
    }

    use commonware_cryptography::{sha256::Digest, Hasher as _};
    use commonware_runtime::{deterministic, Runner as _, Supervisor as _};
    use commonware_storage::archive::{immutable, Archive as _};

    use super::*;

    /// The finalized archive an older sluice wrote (its config, as it was).
    fn immutable_config(prefix: &str, name: &str, page_cache: &CacheRef) -> immutable::Config<()> {
        immutable::Config {
            metadata_partition: format!("{prefix}-{name}-metadata"),
            freezer_table_partition: format!("{prefix}-{name}-freezer-table"),
            freezer_table_initial_size: 1 << 16,
            freezer_table_resize_frequency: 4,
            freezer_table_resize_chunk_size: 1 << 12,
            freezer_key_partition: format!("{prefix}-{name}-freezer-key"),
            freezer_key_page_cache: page_cache.clone(),
            freezer_value_partition: format!("{prefix}-{name}-freezer-value"),
            freezer_value_target_size: 1 << 28,
            freezer_value_compression: None,
            ordinal_partition: format!("{prefix}-{name}-ordinal"),
            items_per_section: NZU64!(1 << 12),
            codec_config: (),
            replay_buffer: IO_BUFFER,
            freezer_key_write_buffer: IO_BUFFER,
            freezer_value_write_buffer: IO_BUFFER,
            ordinal_write_buffer: IO_BUFFER,
        }
    }

    fn key(i: u64) -> Digest {
        Sha256::hash(&[&i.to_be_bytes()])
    }

    #[test]
    fn an_older_sluices_immutable_archives_are_refused_by_name() {
        deterministic::Runner::default().start(|ctx| async move {
            let page_cache = CacheRef::new(PAGE_SIZE, PAGE_CACHE_PAGES);
            let old = immutable::Archive::<_, Digest, u64>::init(
                ctx.child("old"),
                immutable_config("sluice", "finalizations", &page_cache),
            )
            .await
            .unwrap();
            old.put(1, key(1), &7).await.unwrap().sync().await.unwrap();

            let dir = Path::new("/var/lib/sluice/consensus");
            let err = refuse_immutable_archives(&ctx, "sluice", Some(dir)).await.unwrap_err();
            assert!(matches!(err, EngineError::OlderArchives { .. }), "{err:?}");
            let why = err.to_string();
            for part in
                ["older sluice", "immutable archives", "remove /var/lib/sluice/consensus", "--data-dir"]
            {
                assert!(why.contains(part), "{part:?} missing from: {why}");
            }
            // Another validator's prefix is not this one's storage.
            refuse_immutable_archives(&ctx, "v1", Some(dir)).await.unwrap();
        });
    }

    #[test]
    fn this_builds_prunable_archives_are_not_refused() {
        deterministic::Runner::default().start(|ctx| async move {
            let page_cache = CacheRef::new(PAGE_SIZE, PAGE_CACHE_PAGES);
            for name in ARCHIVES {
                let archive = prunable::Archive::<_, _, Digest, u64>::init(
                    ctx.child(name),
                    archive_config("sluice", name, NZU64!(4), &page_cache, ()),
                )
                .await
                .unwrap();
                let mut archive = archive;
                for h in 1..=9 {
                    archive = archive.put(h, key(h), &h).await.unwrap();
                }
                archive.sync().await.unwrap();
            }
            refuse_immutable_archives(&ctx, "sluice", None).await.unwrap();
            // Nine heights in sections of four: sections 0, 4 and 8.
            let key_partition = archive_partition("sluice", "blocks", "key");
            assert_eq!(archive_sections(&ctx, &key_partition).await, vec![0, 4, 8]);
        });
    }

    #[test]
    fn prunes_below_the_retention_once_per_section() {
        let (retention, section) = (NonZeroU64::new(100), NZU64!(32));
        // Nothing without a retention, nor until the committed height is past it.
        assert_eq!(prune_target(10_000, None, section, None), None);
        assert_eq!(prune_target(100, retention, section, None), None);
        assert_eq!(prune_target(101, retention, section, None), Some(1));
        // Then again only once the committed height moved a section.
        assert_eq!(prune_target(132, retention, section, Some(101)), None);
        assert_eq!(prune_target(133, retention, section, Some(101)), Some(33));
        // At once after a restart (no prune yet), always below committed.
        let keep = prune_target(5_000, NonZeroU64::new(1), section, None).unwrap();
        assert_eq!(keep, 4_999);
    }
}
