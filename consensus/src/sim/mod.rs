//! Deterministic simulation: N validators running this crate's engine
//! (the real block codec, application, sink, forwarder and own proposals, on real
//! simplex and marshal) on commonware's deterministic runtime and
//! simulated network, in virtual time, from a seed.
//!
//! Only the actor pipeline is replaced: [`SimBackend`] builds blocks from
//! an in-process FIFO, prepares, executes (the sequential executor, the
//! oracle the node's executors are tested against) and commits (an
//! in-memory store) synchronously in the forwarder's task. The real
//! pipeline behind the same trait is covered by the process tests. A
//! crashed validator loses its store and mempool, as a process would, and
//! is rebuilt from genesis by marshal's redelivery and backfill.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod follower_tests;
mod tests;
mod verify_tests;

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use commonware_cryptography::{
    ed25519::{PrivateKey, PublicKey},
    Signer as _,
};
use commonware_p2p::simulated::{self, Link, Oracle};
use commonware_runtime::{deterministic, Handle, Quota, Runner as _, Spawner as _, Supervisor as _};
use commonware_utils::{ordered::Set, NZUsize, NZU32};
use parking_lot::Mutex;
use sluice_executor::{BlockExecutor as _, ExecConfig, SequentialExecutor};
use sluice_messages::{BlockHeader, ExecutedBlock, PreparedBlock, RecoveredTx, SealedBlock};
use sluice_store::{Genesis, GenesisAccount, Halt, StateReader as _, Store};
use sluice_txpool::{PreparedTxCache, Signer};
use tokio::sync::watch;

use crate::{
    backend::{Backend, BuildRequest, Built, OnCommit, PipelineClosed},
    block::tx_root,
    engine::{self, channel, Channels, Setup, Timeouts},
    rules::Rules,
};

pub(crate) const CHAIN_ID: u64 = 31337;
const BASE_FEE: u64 = 1_000_000_000;
const GAS_LIMIT: u64 = 30_000_000;
pub(crate) const QUOTA: Quota = Quota::per_second(NZU32!(10_000));
/// Transaction dissemination as the default config bounds it.
pub(crate) const GOSSIP: crate::gossip::GossipLimits = crate::gossip::GossipLimits {
    batch_max_txs: 2_000,
    batch_max_bytes: 1 << 20,
    max_tx_bytes: 1 << 16,
    interval: Duration::from_millis(5),
};
/// Heights per section of marshal's archives here: small, so that a run of
/// a few thousand heights prunes many sections.
pub(crate) const ARCHIVE_SECTION: std::num::NonZeroU64 = commonware_utils::NZU64!(32);
/// The default config's skip timeout.
pub(crate) const SKIP_TIMEOUT: Duration = Duration::from_millis(2500);

pub(crate) fn rules() -> Rules {
    Rules {
        block_gas_limit: GAS_LIMIT,
        base_fee_wei: BASE_FEE,
        max_block_txs: 200,
        max_block_bytes: 1 << 20,
        max_tx_size_bytes: 1 << 16,
        max_timestamp_drift_s: 2,
    }
}

/// Funded senders: one per validator and index.
pub(crate) fn sender(i: usize) -> Signer {
    let mut secret = [0u8; 32];
    secret[24..].copy_from_slice(&(1000 + i as u64).to_be_bytes());
    Signer::from_bytes(&B256::from(secret)).expect("valid key")
}

pub(crate) fn genesis(senders: usize) -> Genesis {
    let mut g = Genesis {
        chain_id: CHAIN_ID,
        timestamp: 0,
        gas_limit: GAS_LIMIT,
        base_fee: BASE_FEE,
        coinbase: Address::ZERO,
        alloc: Default::default(),
        synthetic: Default::default(),
    };
    for i in 0..senders {
        let balance = U256::from(10u128.pow(24));
        g.alloc.insert(sender(i).address(), GenesisAccount { balance, ..Default::default() });
    }
    g
}

/// The unsigned transfer every simulation sends (1 wei at nonce `nonce`).
pub(crate) fn transfer_tx(nonce: u64) -> TxEip1559 {
    TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 2 * u128::from(BASE_FEE),
        max_priority_fee_per_gas: 1,
        to: TxKind::Call(Address::repeat_byte(0x77)),
        value: U256::from(1),
        ..Default::default()
    }
}

/// A signed transfer as admission would hand it over.
pub(crate) fn transfer(from: &Signer, nonce: u64) -> RecoveredTx {
    let raw = from.sign_raw(TypedTransaction::Eip1559(transfer_tx(nonce)));
    sluice_txpool::recover_raw(raw).expect("a valid transaction")
}

/// What every node committed: (node, height) -> (block hash, app hash),
/// and each node's receipts by transaction hash.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
}

#[derive(Default)]
struct RecorderInner {
    blocks: BTreeMap<(usize, u64), (B256, B256)>,
    receipts: HashMap<usize, HashMap<B256, u64>>,
    /// Entries executed as skipped (nonce already taken), per node.
    skipped: HashMap<usize, u64>,
    heads: HashMap<usize, u64>,
}

impl Recorder {
    fn committed(&self, node: usize, block: &ExecutedBlock, app_hash: B256) {
        let mut r = self.inner.lock();
        let number = block.block.header.number;
        if let Some((hash, app)) = r.blocks.get(&(node, number)) {
            // A rebuilt node must commit exactly what it did before.
            assert_eq!(
                (*hash, *app),
                (block.block.hash, app_hash),
                "node {node} changed its mind at {number}"
            );
        }
        r.blocks.insert((node, number), (block.block.hash, app_hash));
        let receipts = r.receipts.entry(node).or_default();
        for rc in &block.receipts {
            let prev = receipts.insert(rc.tx_hash, number);
            assert!(prev.is_none_or(|p| p == number), "node {node}: tx {} included twice", rc.tx_hash);
        }
        *r.skipped.entry(node).or_default() += block.skipped.len() as u64;
        r.heads.insert(node, number);
    }

    /// Entries `node` executed as skipped so far.
    pub(crate) fn skipped(&self, node: usize) -> u64 {
        self.inner.lock().skipped.get(&node).copied().unwrap_or(0)
    }

    /// Forgets a crashed node's head (its store is gone).
    fn crashed(&self, node: usize) {
        self.inner.lock().heads.insert(node, 0);
    }

    pub(crate) fn head(&self, node: usize) -> u64 {
        self.inner.lock().heads.get(&node).copied().unwrap_or(0)
    }

    /// Every block committed by every node in `nodes` at heights
    /// `1..=upto` is the same block with the same app hash.
    pub(crate) fn assert_identical(&self, nodes: &[usize], upto: u64) {
        let r = self.inner.lock();
        for h in 1..=upto {
            let first =
                r.blocks.get(&(nodes[0], h)).unwrap_or_else(|| panic!("node {} has no block {h}", nodes[0]));
            for n in &nodes[1..] {
                let other = r.blocks.get(&(*n, h)).unwrap_or_else(|| panic!("node {n} has no block {h}"));
                assert_eq!(first, other, "nodes {} and {n} disagree at height {h}", nodes[0]);
            }
        }
    }

    /// The height of `hash`'s receipt on `node`, if it has one.
    pub(crate) fn receipt_height(&self, node: usize, hash: &B256) -> Option<u64> {
        self.inner.lock().receipts.get(&node)?.get(hash).copied()
    }

    /// Every transaction in `sent` has exactly one receipt on `node`.
    pub(crate) fn assert_receipts(&self, node: usize, sent: &[B256]) {
        let r = self.inner.lock();
        let receipts = r.receipts.get(&node).expect("node committed nothing");
        for h in sent {
            assert!(receipts.contains_key(h), "node {node}: no receipt for {h}");
        }
    }
}

/// The in-process pipeline behind one simulated validator.
#[derive(Clone)]
pub(crate) struct SimBackend {
    node: usize,
    ctx: Arc<deterministic::Context>,
    /// How long building a proposal takes, as the producer fills a block
    /// for up to `producer.block_time_ms` (zero: at once).
    block_time: Duration,
    mempool: Arc<Mutex<VecDeque<RecoveredTx>>>,
    /// Admitted and not yet committed (in the pool or a proposal): what
    /// the actors' in-flight index makes `already known`.
    pending: Arc<Mutex<std::collections::HashSet<B256>>>,
    /// Each sender's next nonce as this node's admission knows it.
    next_nonce: Arc<Mutex<HashMap<Address, u64>>>,
    /// What this node's clients sent, for the other validators.
    outbound: (flume::Sender<Bytes>, flume::Receiver<Bytes>),
    store: Arc<Store>,
    heads: Arc<watch::Sender<u64>>,
    recorder: Recorder,
    exec: ExecConfig,
}

impl SimBackend {
    fn new(
        node: usize,
        ctx: deterministic::Context,
        block_time: Duration,
        genesis: &Genesis,
        recorder: Recorder,
        diverge_at: Option<u64>,
    ) -> Self {
        let (heads, _) = watch::channel(0);
        SimBackend {
            node,
            ctx: Arc::new(ctx),
            block_time,
            mempool: Arc::default(),
            pending: Arc::default(),
            next_nonce: Arc::default(),
            outbound: flume::unbounded(),
            // As if this node's execution disagreed from that height on.
            store: Arc::new(Store::new(genesis).with_divergence_at(diverge_at.unwrap_or(0))),
            heads: Arc::new(heads),
            recorder,
            exec: ExecConfig { chain_id: CHAIN_ID, spec: sluice_messages::Spec::Osaka },
        }
    }

    /// Admits a transaction from this node's client into its mempool,
    /// and queues it for the other validators.
    pub(crate) fn submit(&self, tx: RecoveredTx) {
        if !self.pending.lock().insert(tx.hash) {
            return;
        }
        let mut next = self.next_nonce.lock();
        let after = next.get(&tx.sender).copied().unwrap_or(0).max(tx.nonce() + 1);
        next.insert(tx.sender, after);
        drop(next);
        let _ = self.outbound.0.send(tx.raw.clone());
        self.mempool.lock().push_back(tx);
    }

    fn execute(&self, block: &Arc<SealedBlock>) -> Option<(ExecutedBlock, B256)> {
        let cache = PreparedTxCache::new(16);
        let txs = sluice_txpool::prepare_block(&block.txs, &cache, CHAIN_ID, 1);
        let prepared = PreparedBlock { block: Arc::clone(block), txs };
        let outcome = SequentialExecutor::new(self.exec).execute(&*self.store, &prepared).ok()?;
        let positions: HashMap<B256, u32> =
            prepared.txs.iter().enumerate().map(|(i, t)| (t.hash(), i as u32)).collect();
        let raw_index =
            outcome.receipts.iter().map(|r| positions.get(&r.tx_hash).copied().unwrap_or(0)).collect();
        let executed = ExecutedBlock {
            block: Arc::clone(block),
            receipts: outcome.receipts,
            raw_index,
            skipped: outcome.skipped,
            gas_used: outcome.gas_used,
            changes: Arc::new(outcome.changes),
            app_hash: B256::ZERO,
        };
        match self.store.commit(&executed) {
            Ok(info) => Some((executed, info.app_hash)),
            Err(_) => None,
        }
    }
}

impl Backend for SimBackend {
    async fn build(&self, req: BuildRequest) -> Option<Built> {
        if !self.block_time.is_zero() {
            use commonware_runtime::Clock as _;
            self.ctx.sleep(self.block_time).await;
        }
        let txs: Vec<RecoveredTx> = {
            // As the actors' shards do: what the chain being extended
            // already holds is
            // passed over and kept (the ancestry may lose its height).
            let mut pool = self.mempool.lock();
            let mut taken = Vec::new();
            pool.retain(|tx| {
                let take = taken.len() < rules().max_block_txs && !req.exclude.contains(&tx.hash);
                if take {
                    taken.push(tx.clone());
                }
                !take
            });
            taken
        };
        let raws: Vec<Bytes> = txs.iter().map(|t| t.raw.clone()).collect();
        let header = BlockHeader {
            number: req.parent.number + 1,
            parent_hash: req.parent.hash,
            timestamp: req.timestamp,
            coinbase: Address::ZERO,
            gas_limit: GAS_LIMIT,
            base_fee: BASE_FEE,
            tx_root: tx_root(&raws),
            state_ref: Some(req.state_ref),
        };
        let block = Arc::new(SealedBlock { hash: header.hash(), header, txs: raws });
        Some(Built { block, txs })
    }

    async fn restore(&self, txs: Vec<RecoveredTx>) {
        let mut pool = self.mempool.lock();
        for tx in txs.into_iter().rev() {
            pool.push_front(tx);
        }
    }

    async fn deliver(&self, block: Arc<SealedBlock>, on_commit: OnCommit) -> Result<(), PipelineClosed> {
        if self.store.halted().is_some() {
            return Err(PipelineClosed);
        }
        if let Some((executed, app_hash)) = self.execute(&block) {
            // As the actors' committer does: a committed transaction
            // leaves this pool wherever it is queued.
            let done: std::collections::HashSet<B256> = executed
                .receipts
                .iter()
                .map(|r| r.tx_hash)
                .chain(executed.skipped.iter().map(|(h, _)| *h))
                .collect();
            self.mempool.lock().retain(|tx| !done.contains(&tx.hash));
            self.pending.lock().retain(|h| !done.contains(h));
            self.recorder.committed(self.node, &executed, app_hash);
            self.heads.send_replace(block.header.number);
            on_commit();
        }
        Ok(())
    }

    fn committed(&self) -> watch::Receiver<u64> {
        self.heads.subscribe()
    }

    async fn outbound(&self, max_txs: usize, max_bytes: usize) -> Vec<Bytes> {
        let Ok(first) = self.outbound.1.recv_async().await else { return Vec::new() };
        let mut bytes = first.len() + 4;
        let mut batch = vec![first];
        // Unbounded here: a transaction that would not fit waits at the
        // front by being taken only when it fits (sizes are uniform).
        while batch.len() < max_txs && bytes + 200 <= max_bytes {
            let Ok(tx) = self.outbound.1.try_recv() else { break };
            bytes += tx.len() + 4;
            batch.push(tx);
        }
        batch
    }

    async fn admit_from_peer(&self, txs: Vec<Bytes>) {
        for raw in txs {
            let Ok(tx) = sluice_txpool::recover_raw(raw) else { continue };
            let committed = self.store.account(&tx.sender).ok().flatten().map_or(0, |a| a.nonce);
            // As the nonce actor does for a peer's transactions: a gap
            // (an earlier nonce this node never got) is refused, not held.
            let mut next = self.next_nonce.lock();
            let expected = next.get(&tx.sender).copied().unwrap_or(0).max(committed);
            if tx.nonce() < committed || tx.nonce() > expected || !self.pending.lock().insert(tx.hash) {
                continue;
            }
            next.insert(tx.sender, expected.max(tx.nonce() + 1));
            self.mempool.lock().push_back(tx);
        }
    }

    fn committed_block(&self, height: u64) -> Option<(B256, B256)> {
        if height > self.store.head() {
            return None;
        }
        self.store.block(height).map(|b| (b.block.hash, b.app_hash))
    }

    fn halted(&self) -> Option<Halt> {
        self.store.halted()
    }

    fn halt(&self, halt: Halt) {
        self.store.halt(halt);
    }

    fn finalized(&self, _height: u64) {}

    fn publish_finalized(&self, _item: crate::backend::FinalizedItem) {}
}

/// The simulated network of `n` validators.
pub(crate) struct Sim {
    pub(crate) ctx: deterministic::Context,
    pub(crate) oracle: Oracle<PublicKey, deterministic::Context>,
    pub(crate) keys: Vec<PrivateKey>,
    pub(crate) participants: Set<PublicKey>,
    pub(crate) recorder: Recorder,
    pub(crate) genesis: Genesis,
    pub(crate) nodes: Vec<Option<(SimBackend, Handle<()>)>>,
    /// How long a leader takes to build its proposal (see [`SimBackend`]).
    pub(crate) block_time: Duration,
    /// What validators started from now on keep of marshal's archives
    /// below their committed height (`None`: everything).
    pub(crate) archive_retention: Option<std::num::NonZeroU64>,
}

impl Sim {
    pub(crate) async fn new(ctx: deterministic::Context, n: usize, link: Link) -> Sim {
        Sim::with_followers(ctx, n, 0, link).await
    }

    /// `n` validators (nodes `0..n`) and `followers` followers (nodes
    /// `n..n + followers`, p2p secondary peers), every pair linked.
    pub(crate) async fn with_followers(
        ctx: deterministic::Context,
        n: usize,
        followers: usize,
        link: Link,
    ) -> Sim {
        let keys: Vec<PrivateKey> = (0..(n + followers) as u64).map(PrivateKey::from_seed).collect();
        let participants = Set::from_iter_dedup(keys[..n].iter().map(|k| k.public_key()));
        let config = simulated::Config {
            max_size: 1 << 22,
            max_peers_per_set: NZUsize!(n + followers),
            disconnect_on_block: true,
            tracked_peer_sets: NZUsize!(1),
        };
        let (network, oracle) = if followers == 0 {
            simulated::Network::new_with_peers(ctx.child("network"), config, participants.iter().cloned())
                .await
        } else {
            let secondary: Vec<PublicKey> = keys[n..].iter().map(|k| k.public_key()).collect();
            simulated::Network::new_with_split_peers(
                ctx.child("network"),
                config,
                participants.iter().cloned(),
                secondary,
            )
            .await
        };
        network.start();
        let sim = Sim {
            ctx,
            oracle,
            keys,
            participants,
            recorder: Recorder::default(),
            genesis: genesis(n * 4),
            nodes: (0..n + followers).map(|_| None).collect(),
            block_time: Duration::ZERO,
            archive_retention: None,
        };
        sim.link_all(link).await;
        sim
    }

    pub(crate) fn pk(&self, i: usize) -> PublicKey {
        self.keys[i].public_key()
    }

    pub(crate) async fn link_all(&self, link: Link) {
        for a in 0..self.keys.len() {
            for b in 0..self.keys.len() {
                if a != b {
                    let _ = self.oracle.remove_link(self.pk(a), self.pk(b)).await;
                    self.oracle.add_link(self.pk(a), self.pk(b), link.clone()).await.expect("link");
                }
            }
        }
    }

    /// Cuts every link between the two groups.
    pub(crate) async fn cut(&self, left: &[usize], right: &[usize]) {
        for &a in left {
            for &b in right {
                let _ = self.oracle.remove_link(self.pk(a), self.pk(b)).await;
                let _ = self.oracle.remove_link(self.pk(b), self.pk(a)).await;
            }
        }
    }

    /// Starts node `i`, a validator or (from `participants.len()` on) a
    /// follower; again after a crash, on the same storage.
    pub(crate) async fn start(&mut self, i: usize, diverge_at: Option<u64>) {
        let backend = SimBackend::new(
            i,
            self.ctx.child("backend"),
            self.block_time,
            &self.genesis,
            self.recorder.clone(),
            diverge_at,
        );
        let control = self.oracle.control(self.pk(i));
        let mut reg = Vec::new();
        for ch in [
            channel::VOTES,
            channel::CERTIFICATES,
            channel::RESOLVER,
            channel::BROADCAST,
            channel::BACKFILL,
            channel::TXS,
        ] {
            reg.push(control.register(ch, QUOTA).await.expect("register"));
        }
        let mut reg = reg.into_iter();
        let mut next = || reg.next().expect("six channels");
        let channels = Channels {
            votes: next(),
            certificates: next(),
            resolver: next(),
            broadcast: next(),
            backfill: next(),
            txs: next(),
        };
        let (block, app) = sluice_store::genesis_sealed(&self.genesis);
        let setup = Setup {
            backend: backend.clone(),
            key: self.keys[i].clone(),
            participants: self.participants.clone(),
            namespace: b"sluice-sim".to_vec(),
            rules: rules(),
            coinbase: Address::ZERO,
            genesis: block,
            genesis_app_hash: app,
            timeouts: Timeouts {
                leader: Duration::from_secs(1),
                certification: Duration::from_secs(2),
                retry: Duration::from_secs(1),
                skip: SKIP_TIMEOUT,
                fetch: Duration::from_secs(1),
            },
            max_exec_lag_blocks: 8,
            max_pending_acks: NZUsize!(4),
            partition: format!("v{i}"),
            gossip: GOSSIP,
            chain_id: CHAIN_ID,
            spec: sluice_messages::Spec::Osaka,
            verify_workers: 1,
            archive_retention_blocks: self.archive_retention,
            archive_items_per_section: ARCHIVE_SECTION,
            storage_dir: None,
            publish_feed: false,
        };
        let (manager, blocker) = (self.oracle.manager(), control.clone());
        let role =
            if i >= self.participants.len() { engine::Role::Follower } else { engine::Role::Validator };
        let handle = self.ctx.child("validator").spawn(move |ctx| async move {
            let handles =
                engine::start(ctx, setup, channels, manager, blocker, role).await.expect("engine starts");
            // The node lives as long as its tasks; aborting this task
            // aborts them all (a crash).
            futures::future::join_all(handles).await;
        });
        self.nodes[i] = Some((backend, handle));
    }

    /// Runs validator `i` as commonware's conflicter mock instead of an
    /// honest engine: for every notarize or finalize it receives, it signs
    /// and sends two, for different blocks (equivocation, with its real
    /// key).
    pub(crate) async fn start_conflicter(&mut self, i: usize) {
        use commonware_consensus::simplex::{mocks::conflicter, scheme::ed25519};
        use commonware_cryptography::keccak256::Keccak256;
        let control = self.oracle.control(self.pk(i));
        let votes = control.register(channel::VOTES, QUOTA).await.expect("register");
        let scheme = ed25519::Scheme::signer(b"sluice-sim", self.participants.clone(), self.keys[i].clone())
            .expect("a participant");
        let mock = conflicter::Conflicter::<_, _, Keccak256>::new(
            self.ctx.child("conflicter"),
            conflicter::Config { scheme },
        );
        mock.start(votes);
    }

    /// Kills validator `i`: its tasks stop, its store and mempool are gone,
    /// its consensus storage (journals, archives) stays.
    pub(crate) fn crash(&mut self, i: usize) {
        if let Some((_, handle)) = self.nodes[i].take() {
            handle.abort();
        }
        self.recorder.crashed(i);
    }

    pub(crate) fn backend(&self, i: usize) -> &SimBackend {
        &self.nodes[i].as_ref().expect("running").0
    }

    /// Waits (virtual time) until every node in `nodes` has committed
    /// `height`; panics after `limit`.
    pub(crate) async fn reach(&self, nodes: &[usize], height: u64, limit: Duration) {
        use commonware_runtime::Clock as _;
        let start = self.ctx.current();
        while nodes.iter().any(|&i| self.recorder.head(i) < height) {
            let waited = self.ctx.current().duration_since(start).unwrap_or_default();
            let heads: Vec<u64> = nodes.iter().map(|&i| self.recorder.head(i)).collect();
            assert!(waited < limit, "nodes {nodes:?} stuck at {heads:?} below {height} after {waited:?}");
            self.ctx.sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn sleep(&self, d: Duration) {
        use commonware_runtime::Clock as _;
        self.ctx.sleep(d).await;
    }

    /// The sections (first heights) validator `i`'s finalized archives
    /// hold, by partition (each archive's keys and values): what pruning
    /// bounds. Listing a partition opens no blob, so the running
    /// validator's archives are not disturbed.
    pub(crate) async fn archive_sections(&self, i: usize) -> Vec<(String, Vec<u64>)> {
        let mut out = Vec::new();
        for archive in crate::archives::ARCHIVES {
            for kind in ["key", "value"] {
                let partition = crate::archives::archive_partition(&format!("v{i}"), archive, kind);
                let sections = crate::archives::archive_sections(&self.ctx, &partition).await;
                out.push((partition, sections));
            }
        }
        out
    }

    pub(crate) fn max_head(&self) -> u64 {
        (0..self.keys.len()).map(|i| self.recorder.head(i)).max().unwrap_or(0)
    }
}

/// Evidence counted by `sluice_consensus_evidence_total` of `kind` in this
/// process so far (a recorder installed on first use: no other test here
/// reports evidence).
pub(crate) fn evidence_counted(kind: &str) -> u64 {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
    static SNAPSHOTS: std::sync::OnceLock<Option<Snapshotter>> = std::sync::OnceLock::new();
    let snapshots = SNAPSHOTS.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::set_global_recorder(recorder).ok().map(|()| snapshotter)
    });
    let Some(snapshots) = snapshots else { return 0 };
    snapshots
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let key = key.key();
            key.name() == crate::metrics::EVIDENCE_TOTAL && key.labels().any(|l| l.value() == kind)
        })
        .map(|(.., value)| if let DebugValue::Counter(n) = value { n } else { 0 })
        .sum()
}

/// The seed of a run: `SIM_SEED` replays one; else `default`.
pub(crate) fn seed(default: u64) -> u64 {
    std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Runs `f` in the deterministic runtime, printing the seed first so a
/// failure names it.
pub(crate) fn run<F, Fut>(name: &str, default_seed: u64, f: F) -> Fut::Output
where
    F: FnOnce(deterministic::Context) -> Fut,
    Fut: std::future::Future,
{
    let seed = seed(default_seed);
    eprintln!("{name}: seed {seed} (replay with SIM_SEED={seed})");
    let cfg = deterministic::Config::new().with_seed(seed).with_timeout(Some(Duration::from_secs(3600)));
    deterministic::Runner::new(cfg).start(f)
}

/// A link delivering `percent_delivered` of its messages.
pub(crate) fn link(latency_ms: u64, jitter_ms: u64, percent_delivered: u64) -> Link {
    let success_rate = commonware_utils::Probability::new(percent_delivered, 100).expect("a percentage");
    Link {
        latency: Duration::from_millis(latency_ms),
        jitter: Duration::from_millis(jitter_ms),
        success_rate,
    }
}
