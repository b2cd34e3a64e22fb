//! Assembling one validator's consensus: simplex (votes), marshal (block
//! dissemination, ordering, persistence, backfill), the application, the
//! sink and the forwarder.
//!
//! Generic over the runtime context and the network, so that production
//! (tokio, authenticated TCP) and the deterministic simulation (virtual
//! time, simulated links) run exactly this code.

use std::{
    num::{NonZeroU16, NonZeroU64, NonZeroUsize},
    path::PathBuf,
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
use commonware_p2p::{Blocker, Provider, Receiver, Recipients, Sender};
use commonware_parallel::Sequential;
use commonware_runtime::{buffer::paged::CacheRef, Clock, Handle, Metrics, Spawner, Storage};
use commonware_storage::archive::prunable;
use commonware_utils::{ordered::Set, NZDuration, NZUsize, NZU16, NZU64};
use parking_lot::Mutex;
use rand_core::CryptoRng;
use sluice_messages::SealedBlock;
use sluice_state::Halt;

use crate::{
    app::SluiceApp,
    archives,
    backend::Backend,
    block::{digest_of, ChainBlock},
    proposals::OwnProposals,
    rules::Rules,
    sink::{self, Observed, Sink},
};

/// The storage page: the OS page, so a cached page is one read.
pub(crate) const PAGE_SIZE: NonZeroU16 = NZU16!(4096);
/// 4 MiB of archive pages cached, shared by every archive: consensus reads
/// an old block or certificate only to serve a peer catching up, once.
pub(crate) const PAGE_CACHE_PAGES: NonZeroUsize = NZUsize!(1024);
/// Each journal's read and write buffer: 64 KiB turns a block's many small
/// appends into few system calls, and the dozen journals' buffers together
/// stay under 1 MiB.
pub(crate) const IO_BUFFER: NonZeroUsize = NZUsize!(1 << 16);
/// Commonware actors' mailboxes: a view is a few messages per validator, so
/// 1,024 holds many views' worth; a stalled actor then makes its senders
/// wait instead of growing memory.
pub(crate) const MAILBOX: NonZeroUsize = NZUsize!(1024);
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
    /// Publish finalized blocks with their certificates to the node's
    /// feed ([`crate::feed`]). Off in the simulation, whose pipeline
    /// serves no RPC (and whose schedules an extra task would change).
    pub(crate) publish_feed: bool,
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

/// Why consensus could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The key is not one of the validator set's.
    #[error("this validator's key is not in the validator set")]
    NotAValidator,
    /// A follower was given a validator's key: it would connect as that
    /// validator (and be refused as a duplicate, or displace it).
    #[error(
        "a follower's key must not be a validator's: give the follower its own key (consensus.key_file)"
    )]
    FollowerIsAValidator,
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
        /// One partition of the immutable archives found there.
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

/// Marshal's mailbox, as this chain instantiates it.
pub(crate) type MarshalMailbox =
    marshal::core::Mailbox<ed25519::Scheme, marshal::standard::Standard<ChainBlock>>;

/// What [`start_marshal`] hands to the node's head (simplex on a
/// validator, the certificate feeder on a follower).
pub(crate) struct Marshaled {
    /// The tasks started so far.
    pub(crate) handles: Vec<Handle<()>>,
    /// Marshal's mailbox: finalizations are reported to it.
    pub(crate) marshal: MarshalMailbox,
    /// This node's own proposals, resolved as blocks are finalized.
    pub(crate) proposals: Arc<Mutex<OwnProposals>>,
    /// The (single) epoch's bounds.
    pub(crate) epocher: FixedEpocher,
    /// The storage page cache shared by every journal and archive.
    pub(crate) page_cache: CacheRef,
}

/// Starts everything a node that executes finalized blocks needs besides
/// the way it learns of finalizations: marshal (ordering, archives,
/// backfill), the broadcast buffer it finds blocks in, transaction
/// dissemination of this node's own clients' transactions to `gossip_to`,
/// the sink and forwarder into the pipeline, and the archive keeper.
/// `scheme` is a signer on a validator and a verifier on a follower:
/// marshal checks the certificates it backfills with it.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn start_marshal<E, B, S, R, P, K>(
    ctx: &E,
    setup: &Setup<B>,
    scheme: ed25519::Scheme,
    backfill: (S, R),
    broadcast_channel: (S, R),
    txs: (S, R),
    gossip_to: (Recipients<PublicKey>, bool),
    peers: P,
    blocker: K,
) -> Result<Marshaled, EngineError>
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
    let page_cache = CacheRef::new(PAGE_SIZE, PAGE_CACHE_PAGES);
    let prefix = setup.partition.clone();
    // Before anything opens a partition: the immutable archives' metadata
    // partitions would otherwise be read as the prunable archives'.
    archives::refuse_immutable_archives(ctx, &prefix, setup.storage_dir.as_deref()).await?;
    let limits = setup.rules.limits();

    let resolver = marshal_resolver::init(
        ctx.child("marshal_resolver"),
        marshal_resolver::Config {
            public_key: me.clone(),
            peer_provider: peers.clone(),
            blocker,
            mailbox_size: MAILBOX,
            fetch_timeout: NZDuration!(setup.timeouts.fetch),
            fetch_retry_delay: FETCH_RETRY,
            priority_requests: false,
            priority_responses: false,
        },
        backfill,
    );
    let (broadcast, buffer) = buffered::Engine::new(
        ctx.child("broadcast"),
        buffered::Config {
            public_key: me,
            mailbox_size: MAILBOX,
            deque_size: BROADCAST_DEQUE,
            priority: false,
            codec_config: limits,
            peer_provider: peers,
            strategy: Sequential,
        },
    );
    let mut handles = vec![broadcast.start(broadcast_channel)];
    {
        let (sender, receiver) = txs;
        let (backend, limits) = (setup.backend.clone(), setup.gossip);
        handles.push(
            ctx.child("gossip_send")
                .spawn(move |ctx| crate::gossip::send_loop(ctx, backend, sender, gossip_to, limits)),
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
        archives::archive_config(
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
        archives::archive_config(&prefix, "blocks", section, &page_cache, limits),
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
            provider: ConstantProvider::new(scheme),
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
    let feed = setup.publish_feed.then(|| {
        let (tx, rx) = flume::bounded(crate::feed::PUBLISH_QUEUE);
        let (marshal, backend) = (marshal.clone(), setup.backend.clone());
        handles.push(ctx.child("feed_publisher").spawn(move |_| crate::feed::publish(rx, marshal, backend)));
        tx
    });
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
            ctx.child("forwarder")
                .spawn(move |_| sink::forward(rx, backend, proposals, processed, fetch, feed)),
        );
    }
    handles.push(marshal_actor.start(sink, buffer, resolver));
    // Nothing to prune and no disk to measure (the simulation keeping
    // everything): no task, since even an idle one would change the
    // deterministic schedule, and so what each seed of such a run replays.
    if setup.archive_retention_blocks.is_some() || setup.storage_dir.is_some() {
        let (marshal, backend) = (marshal.clone(), setup.backend.clone());
        let keeper = archives::ArchiveKeeper {
            committed: setup.backend.committed(),
            tip,
            retention: setup.archive_retention_blocks,
            section,
            prefix,
            dir: setup.storage_dir.clone(),
        };
        handles.push(ctx.child("archive_pruner").spawn(move |ctx| {
            keeper.run(ctx, move |h| marshal.prune(h), move |cause| backend.halt(Halt::Consensus { cause }))
        }));
    }
    Ok(Marshaled { handles, marshal, proposals, epocher, page_cache })
}

/// What a node is in the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Votes, proposes when it leads, executes what is finalized.
    Validator,
    /// Executes what the validators finalize, verifying each finalization
    /// (`follower.rs`); never votes.
    Follower,
}

/// Starts one node's consensus on `ctx`: marshal and, as `role` says,
/// simplex (a validator) or the certificate feeder (a follower, whose
/// `setup.key` is its own p2p identity, never a validator's). Returns the
/// handles of its tasks (any of them ending means the node stopped).
pub(crate) async fn start<E, B, S, R, P, K>(
    ctx: E,
    setup: Setup<B>,
    channels: Channels<S, R>,
    peers: P,
    blocker: K,
    role: Role,
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
    let member = setup.participants.position(&me).is_some();
    let (scheme, gossip_to) = match role {
        Role::Validator => {
            let scheme =
                ed25519::Scheme::signer(&setup.namespace, setup.participants.clone(), setup.key.clone())
                    .ok_or(EngineError::NotAValidator)?;
            // This node's clients' transactions go to the other validators
            // only: followers learn of them in blocks, so the validators'
            // egress does not grow with the number of followers.
            let others = setup.participants.iter().filter(|p| **p != me).cloned().collect();
            (scheme, (Recipients::Some(others), false))
        }
        Role::Follower if member => return Err(EngineError::FollowerIsAValidator),
        // A follower dials validators only: every connection is one.
        // It never proposes what it admits: a batch must reach someone.
        Role::Follower => {
            (ed25519::Scheme::verifier(&setup.namespace, setup.participants.clone()), (Recipients::All, true))
        }
    };
    let marshaled = start_marshal(
        &ctx,
        &setup,
        scheme.clone(),
        channels.backfill,
        channels.broadcast,
        channels.txs,
        gossip_to,
        peers,
        blocker.clone(),
    )
    .await?;
    if role == Role::Follower {
        let (votes, certificates, resolver) =
            (channels.votes.1, channels.certificates.1, channels.resolver.1);
        let receivers = crate::follower::Receivers { votes, certificates, resolver };
        return Ok(crate::follower::start(&ctx, scheme, marshaled, receivers, blocker));
    }
    let Marshaled { mut handles, marshal, proposals, epocher, page_cache } = marshaled;
    let prefix = setup.partition.clone();
    let genesis_digest = digest_of(&setup.genesis.hash);
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
