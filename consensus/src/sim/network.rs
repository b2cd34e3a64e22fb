//! [`Sim`]: the simulated network of validators and followers, every pair
//! linked, and the partitions scenarios make by cutting links and healing
//! them.

use std::time::Duration;

use commonware_cryptography::{
    ed25519::{PrivateKey, PublicKey},
    Signer as _,
};
use commonware_p2p::simulated::{self, Link, Oracle};
use commonware_runtime::{deterministic, Handle, Supervisor as _};
use commonware_utils::{ordered::Set, NZUsize};
use sluice_store::Genesis;

use super::{backend::SimBackend, chain::genesis, checks::Recorder};

/// The simulated network of `n` validators.
pub(crate) struct Sim {
    /// The runtime context scenarios run and wait in.
    pub(crate) ctx: deterministic::Context,
    /// The simulated network's control: links, channels, blocked peers.
    pub(crate) oracle: Oracle<PublicKey, deterministic::Context>,
    /// Every node's key, validators first.
    pub(crate) keys: Vec<PrivateKey>,
    /// The validators' public keys.
    pub(crate) participants: Set<PublicKey>,
    /// What every node committed.
    pub(crate) recorder: Recorder,
    /// The genesis every node starts from.
    pub(crate) genesis: Genesis,
    /// Each running node's pipeline and task (`None`: not started or crashed).
    pub(crate) nodes: Vec<Option<(SimBackend, Handle<()>)>>,
    /// How long a leader takes to build its proposal (see [`SimBackend`]).
    pub(crate) block_time: Duration,
    /// What validators started from now on keep of marshal's archives
    /// below their committed height (`None`: everything).
    pub(crate) archive_retention: Option<std::num::NonZeroU64>,
}

impl Sim {
    /// `n` validators, every pair linked by `link`, none started yet.
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

    /// Node `i`'s public key.
    pub(crate) fn pk(&self, i: usize) -> PublicKey {
        self.keys[i].public_key()
    }

    /// Links every pair of nodes by `link` (a heal, after [`Sim::cut`]).
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
