//! Starting, crashing and restarting the nodes of a [`Sim`]: honest
//! validators and followers on this crate's engine, or a validator as
//! commonware's equivocating mock.

use std::time::Duration;

use alloy_primitives::Address;
use commonware_runtime::Spawner as _;
use commonware_runtime::Supervisor as _;
use commonware_utils::NZUsize;

use super::{
    backend::SimBackend,
    chain::{rules, ARCHIVE_SECTION, CHAIN_ID, GOSSIP, QUOTA, SKIP_TIMEOUT},
    network::Sim,
};
use crate::engine::{self, channel, Channels, Setup, Timeouts};

impl Sim {
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

    /// Running node `i`'s pipeline.
    pub(crate) fn backend(&self, i: usize) -> &SimBackend {
        &self.nodes[i].as_ref().expect("running").0
    }
}
