//! A follower: a node with no vote and no producer that executes the
//! finalized chain and serves it (RPC), so readers need not land on
//! validators.
//!
//! It is marshal alone (commonware's "simplex-less marshal", as alto's and
//! Tempo's followers are), joined to the validators as a p2p *secondary*
//! peer: validators list it in `consensus.followers_file` (not part of the
//! validator set's hash, so adding one changes no vote) and accept its
//! connection; it dials them. What it receives:
//!
//! ```text
//!  CERTIFICATES ─▶ feeder: decode, keep finalizations, verify each against
//!                  the validator set ─▶ marshal.report(Finalization)
//!  BROADCAST    ─▶ broadcast buffer (blocks as leaders propose them)
//!  BACKFILL     ─▶ marshal's resolver (blocks and certificates it missed)
//!  marshal ──Update::Block(ack)──▶ Sink ──▶ forwarder ──▶ prepare → execute → commit
//! ```
//!
//! Marshal trusts what it is reported (simplex verified it on a
//! validator), so the feeder verifies every finalization before reporting
//! it; one that does not verify blocks its sender. The pipeline behind is
//! a validator's: a block whose `state_ref` disagrees with this node's own
//! app hash halts it exactly as it halts a validator. Its own clients'
//! transactions go to the validators it is connected to (the TXS channel),
//! where they are admitted as any validator's.

use commonware_codec::Decode as _;
use commonware_consensus::{
    simplex::{
        scheme::ed25519,
        types::{Activity, Certificate, Finalization},
    },
    types::View,
    Reporter as _, Viewable as _,
};
use commonware_cryptography::certificate::Verifier as _;
use commonware_cryptography::{ed25519::PublicKey, keccak256::Digest};
use commonware_p2p::{Blocker, Receiver};
use commonware_parallel::Sequential;
use commonware_runtime::{Handle, Metrics, Spawner};
use rand_core::CryptoRng;

use crate::{
    engine::{MarshalMailbox, Marshaled},
    metrics as m,
};

/// What a follower receives besides blocks (which go to marshal's
/// broadcast buffer and resolver).
pub(crate) struct Receivers<R> {
    /// Validators' votes, sent to every connection: a follower drops them.
    pub(crate) votes: R,
    /// Notarizations, nullifications and finalizations.
    pub(crate) certificates: R,
    /// Simplex's certificate requests (it asks participants only, so
    /// nothing comes; anything that did is dropped rather than left to
    /// fill its mailbox).
    pub(crate) resolver: R,
}

/// Starts a follower's head on top of marshal (`engine::start` with
/// [`crate::engine::Role::Follower`]): the feeder, and drains for what it
/// has no use for. `scheme` verifies against the validator set.
pub(crate) fn start<E, R, K>(
    ctx: &E,
    scheme: ed25519::Scheme,
    marshaled: Marshaled,
    receivers: Receivers<R>,
    blocker: K,
) -> Vec<Handle<()>>
where
    E: CryptoRng + Spawner + Metrics,
    R: Receiver<PublicKey = PublicKey>,
    K: Blocker<PublicKey = PublicKey>,
{
    let Marshaled { mut handles, marshal, .. } = marshaled;
    let Receivers { votes, certificates, resolver } = receivers;
    handles.push(ctx.child("feeder").spawn(move |ctx| feed(ctx, certificates, scheme, marshal, blocker)));
    for (name, receiver) in [("votes_drain", votes), ("resolver_drain", resolver)] {
        handles.push(ctx.child(name).spawn(move |_| drain(receiver)));
    }
    handles
}

/// What the feeder makes of one message on the certificate channel.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// A finalization newer than any reported, verified: report it.
    New(Box<Finalization<ed25519::Scheme, Digest>>),
    /// A finalization of a view already reported (every validator
    /// broadcasts the certificates it assembles): nothing to do.
    Stale,
    /// A notarization or nullification: a follower waits for finality.
    NotFinal,
    /// Undecodable, or a finalization whose signatures do not verify
    /// against the validator set: its sender is blocked.
    Forged(&'static str),
}

/// Judges one certificate message. `highest` is the view of the newest
/// finalization reported so far: an older one is not verified again (the
/// verification is the feeder's whole cost).
pub(crate) fn judge<Rng: CryptoRng>(
    rng: &mut Rng,
    scheme: &ed25519::Scheme,
    bytes: impl commonware_codec::Input,
    highest: Option<View>,
) -> Verdict {
    let certificate =
        match Certificate::<ed25519::Scheme, Digest>::decode_cfg(bytes, &scheme.certificate_codec_config()) {
            Ok(c) => c,
            Err(_) => return Verdict::Forged("undecodable certificate"),
        };
    let Certificate::Finalization(finalization) = certificate else { return Verdict::NotFinal };
    if highest.is_some_and(|h| finalization.view() <= h) {
        return Verdict::Stale;
    }
    if !finalization.verify(rng, scheme, &Sequential) {
        return Verdict::Forged("finalization does not verify against the validator set");
    }
    Verdict::New(Box::new(finalization))
}

/// Reports every new verified finalization on `certificates` to marshal,
/// which then finds the block (broadcast buffer, or backfill) and hands it
/// to the pipeline in height order. Ends when the network stops.
async fn feed<E: CryptoRng, R: Receiver<PublicKey = PublicKey>, K: Blocker<PublicKey = PublicKey>>(
    mut ctx: E,
    mut certificates: R,
    scheme: ed25519::Scheme,
    mut marshal: MarshalMailbox,
    mut blocker: K,
) {
    let mut highest = None;
    while let Ok((peer, msg)) = certificates.recv().await {
        match judge(&mut ctx, &scheme, msg, highest) {
            Verdict::New(finalization) => {
                highest = Some(finalization.view());
                metrics::counter!(m::FOLLOWER_FINALIZATIONS, "outcome" => "accepted").increment(1);
                let _ = marshal.report(Activity::Finalization(*finalization));
            }
            Verdict::Stale | Verdict::NotFinal => {}
            Verdict::Forged(why) => {
                tracing::warn!(%peer, why, "forged certificate: blocking its sender");
                metrics::counter!(m::FOLLOWER_FINALIZATIONS, "outcome" => "forged").increment(1);
                let _ = blocker.block(peer);
            }
        }
    }
}

/// Receives and drops everything on a channel a follower has no use for.
async fn drain<R: Receiver>(mut receiver: R) {
    while receiver.recv().await.is_ok() {}
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use commonware_codec::Encode as _;
    use commonware_consensus::{
        simplex::types::{Finalize, Proposal},
        types::{Epoch, Round},
    };
    use commonware_cryptography::{ed25519::PrivateKey, Signer as _};
    use commonware_utils::{non_empty, ordered::Set, TestRng};

    use super::*;

    /// A finalization of `payload` at `view` signed by the first three of
    /// `keys` under `namespace`, encoded as the certificate channel carries
    /// it; with `tamper`, its payload is swapped afterwards (real
    /// signatures over another block: a forgery).
    pub(crate) fn finalization(
        keys: &[PrivateKey],
        namespace: &[u8],
        view: u64,
        payload: [u8; 32],
        tamper: bool,
    ) -> Vec<u8> {
        let participants = Set::from_iter_dedup(keys.iter().map(|k| k.public_key()));
        let proposal =
            Proposal::new(Round::new(Epoch::zero(), View::new(view)), View::new(view - 1), Digest(payload));
        let votes: Vec<Finalize<ed25519::Scheme, Digest>> = keys[..3]
            .iter()
            .map(|k| {
                let scheme = ed25519::Scheme::signer(namespace, participants.clone(), k.clone()).unwrap();
                Finalize::sign(&scheme, proposal.clone()).unwrap()
            })
            .collect();
        let scheme = ed25519::Scheme::verifier(namespace, participants);
        let mut f = Finalization::from_finalizes(&scheme, non_empty![@&votes], &Sequential).unwrap();
        if tamper {
            f.proposal.payload = Digest([0xee; 32]);
        }
        Certificate::Finalization(f).encode().to_vec()
    }

    fn setup() -> (Vec<PrivateKey>, ed25519::Scheme) {
        let keys: Vec<PrivateKey> = (0..4).map(PrivateKey::from_seed).collect();
        let participants = Set::from_iter_dedup(keys.iter().map(|k| k.public_key()));
        (keys, ed25519::Scheme::verifier(b"ns", participants))
    }

    #[test]
    fn a_quorums_finalization_is_new_once() {
        let (keys, scheme) = setup();
        let mut rng = TestRng::new(1);
        let bytes = finalization(&keys, b"ns", 7, [1; 32], false);
        let Verdict::New(f) = judge(&mut rng, &scheme, bytes.clone(), None) else { panic!("not new") };
        assert_eq!(f.view(), View::new(7));
        assert!(matches!(judge(&mut rng, &scheme, bytes.clone(), Some(View::new(7))), Verdict::Stale));
        assert!(matches!(judge(&mut rng, &scheme, bytes, Some(View::new(6))), Verdict::New(_)));
    }

    #[test]
    fn forgeries_and_garbage_are_refused() {
        let (keys, scheme) = setup();
        let mut rng = TestRng::new(2);
        let tampered = finalization(&keys, b"ns", 9, [1; 32], true);
        assert!(matches!(judge(&mut rng, &scheme, tampered, None), Verdict::Forged(_)));
        // Signed by the validators' keys, but for another chain.
        let elsewhere = finalization(&keys, b"another chain", 9, [1; 32], false);
        assert!(matches!(judge(&mut rng, &scheme, elsewhere, None), Verdict::Forged(_)));
        // Signed by a quorum of keys that are not the validators'.
        let strangers: Vec<PrivateKey> = (10..14).map(PrivateKey::from_seed).collect();
        let outsiders = finalization(&strangers, b"ns", 9, [1; 32], false);
        assert!(matches!(judge(&mut rng, &scheme, outsiders, None), Verdict::Forged(_)));
        assert!(matches!(judge(&mut rng, &scheme, vec![2u8, 0, 1], None), Verdict::Forged(_)));
        assert!(matches!(judge(&mut rng, &scheme, Vec::new(), None), Verdict::Forged(_)));
    }
}
