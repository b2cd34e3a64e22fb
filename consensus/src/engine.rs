//! Assembling one validator's consensus: simplex (votes), marshal (block
//! dissemination, ordering, persistence, backfill), the application, the
//! sink and the forwarder.
//!
//! Generic over the runtime context and the network, so that production
//! (tokio, authenticated TCP) and the deterministic simulation (virtual
//! time, simulated links) run exactly this code.

use std::{
    num::{NonZeroU16, NonZeroUsize},
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
use commonware_p2p::{Blocker, Provider, Receiver, Sender};
use commonware_parallel::Sequential;
use commonware_runtime::{buffer::paged::CacheRef, Clock, Handle, Metrics, Spawner, Storage};
use commonware_storage::archive::immutable;
use commonware_utils::{ordered::Set, NZDuration, NZUsize, NZU16, NZU64};
use parking_lot::Mutex;
use rand_core::CryptoRng;
use sluice_messages::SealedBlock;

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

/// A finalized archive (blocks or certificates by height). Sized for a
/// long-lived chain: the freezer's table starts at 64k entries and grows
/// in 4k-entry chunks every 4 resizes, values go in 256 MiB files, and the
/// height index in sections of 4,096 heights (one file each).
fn archive_config<C>(
    prefix: &str,
    name: &str,
    page_cache: &CacheRef,
    codec_config: C,
) -> immutable::Config<C> {
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
        codec_config,
        replay_buffer: IO_BUFFER,
        freezer_key_write_buffer: IO_BUFFER,
        freezer_value_write_buffer: IO_BUFFER,
        ordinal_write_buffer: IO_BUFFER,
    }
}

/// Why consensus could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The key is not one of the validator set's.
    #[error("this validator's key is not in the validator set")]
    NotAValidator,
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

    let finalizations = immutable::Archive::init(
        ctx.child("finalizations_by_height"),
        archive_config(
            &prefix,
            "finalizations",
            &page_cache,
            ed25519::Scheme::certificate_codec_config_unbounded(),
        ),
    )
    .await
    .map_err(|source| EngineError::Storage { archive: "finalizations", source })?;
    let blocks = immutable::Archive::init(
        ctx.child("finalized_blocks"),
        archive_config(&prefix, "blocks", &page_cache, limits),
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
    let sink = Sink {
        tx,
        finalized: Arc::new(AtomicU64::new(0)),
        backend: setup.backend.clone(),
        catching_up: Arc::default(),
    };
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
