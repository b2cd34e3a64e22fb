//! Finalized blocks into the execution pipeline, in order, acknowledged to
//! marshal only once committed.
//!
//! Marshal reports each finalized block once it is durable in its archive,
//! in height order, with an acknowledgement; it keeps at most
//! `max_pending_acks` unacknowledged, and redelivers unacknowledged blocks
//! after a restart. The [`Sink`] (marshal's reporter, which must not
//! block) offers each into a mailbox of that capacity; the forwarder drains
//! it in order: it resolves the own proposals (putting back the transactions of
//! a proposal that lost its height), acknowledges a block already committed
//! (a redelivery), and hands the rest to preparation, waiting for room, so
//! a slow pipeline back-pressures marshal through the acknowledgement
//! window.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

use commonware_actor::Feedback;
use commonware_codec::Encode as _;
use commonware_consensus::{
    marshal::Update,
    simplex::{
        scheme::ed25519,
        types::{Activity, Attributable as _},
    },
    Reporter, Viewable,
};
use commonware_cryptography::{ed25519::PublicKey, keccak256::Digest, Digested};
use commonware_utils::{acknowledgement::Exact, ordered::Set, Acknowledgement, Participant};
use parking_lot::Mutex;

use sluice_state::Halt;

use crate::{backend::Backend, block::ChainBlock, metrics as m, proposals::OwnProposals};

/// A finalized block and marshal's acknowledgement for it.
pub(crate) type Finalized = (Digested<ChainBlock>, Exact);

/// Marshal's application reporter.
#[derive(Clone)]
pub(crate) struct Sink<B: Backend> {
    pub(crate) tx: flume::Sender<Finalized>,
    pub(crate) finalized: Arc<AtomicU64>,
    pub(crate) backend: B,
    /// Committed more than [`CATCH_UP_LAG_BLOCKS`] behind finalization
    /// (logged when it starts and ends).
    pub(crate) catching_up: Arc<std::sync::atomic::AtomicBool>,
}

/// Further behind finalization than this is catching up (as `eth_syncing`
/// says it: a validator under load trails by a few blocks).
const CATCH_UP_LAG_BLOCKS: u64 = 8;

impl<B: Backend> Reporter for Sink<B> {
    type Activity = Update<ChainBlock, Exact>;

    fn report(&mut self, activity: Self::Activity) -> Feedback {
        match activity {
            Update::Tip(_, height, _) => {
                let h = height.get();
                self.finalized.fetch_max(h, Ordering::AcqRel);
                self.backend.finalized(h);
                metrics::gauge!(m::FINALIZED_HEIGHT).set(h as f64);
                let committed = *self.backend.committed().borrow();
                let lag = h.saturating_sub(committed);
                metrics::gauge!(m::LAG_BLOCKS).set(lag as f64);
                let behind = lag > CATCH_UP_LAG_BLOCKS;
                if self.catching_up.swap(behind, Ordering::AcqRel) != behind {
                    if behind {
                        tracing::info!(finalized = h, committed, "catching up");
                    } else {
                        tracing::info!(finalized = h, committed, "caught up");
                    }
                }
            }
            Update::Block(block, ack) => {
                if let Err(e) = self.tx.try_send((block, ack)) {
                    // Marshal never has more than the mailbox's capacity
                    // unacknowledged, so this is a wiring fault. Dropping the
                    // acknowledgement would stall marshal silently: halt loudly.
                    let halt =
                        Halt::Consensus { cause: format!("finalized-block mailbox refused a block: {e}") };
                    tracing::error!(reason = %halt);
                    self.backend.halt(halt);
                }
            }
        }
        Feedback::Ok
    }
}

/// Drains finalized blocks into the pipeline, in order. First, catch-up:
/// blocks marshal had processed (acknowledged) that the store lost (a
/// crash after the acknowledgement, or grouped syncs) are fed again, read
/// from marshal's archive by `fetch`.
/// Each block marshal delivers is also handed to `feed` (when the node
/// serves the finalized-block feed), before the pipeline gets it.
pub(crate) async fn forward<B, F, Fut>(
    rx: flume::Receiver<Finalized>,
    backend: B,
    proposals: Arc<Mutex<OwnProposals>>,
    processed: u64,
    fetch: F,
    feed: Option<flume::Sender<Arc<sluice_messages::SealedBlock>>>,
) where
    B: Backend,
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Option<ChainBlock>>,
{
    let committed = *backend.committed().borrow();
    if committed < processed {
        tracing::info!(
            from = committed + 1,
            to = processed,
            "replaying finalized blocks the store had not kept"
        );
        for h in committed + 1..=processed {
            let Some(block) = fetch(h).await else {
                backend.halt(Halt::Consensus {
                    cause: format!("finalized block {h} is missing from the consensus archive"),
                });
                return;
            };
            if backend.deliver(block.0, Box::new(|| {})).await.is_err() {
                return;
            }
        }
    }
    while let Ok((block, ack)) = rx.recv_async().await {
        let block = Arc::clone(&block.inner().0);
        let (number, hash) = (block.header.number, block.hash);
        let resolved = proposals.lock().finalized(number, hash);
        if !resolved.restore.is_empty() {
            metrics::counter!(m::REQUEUED_TXS).increment(resolved.restore.len() as u64);
            tracing::info!(
                number,
                txs = resolved.restore.len(),
                "a proposal lost its height; its transactions go back"
            );
            backend.restore(resolved.restore).await;
        }
        if let Some(state_ref) = block.header.state_ref {
            metrics::gauge!(m::VERIFIED_HEIGHT).set(state_ref.height as f64);
        }
        if let Some(feed) = &feed {
            // Waits for room: a block left off would leave a gap that every
            // follower of this feed past it could only skip by another
            // upstream (a catch-up delivers blocks faster than steady
            // state, and filled a queue that dropped). Publishing is a
            // certificate read and an encoding, far quicker than execution.
            if feed.send_async(Arc::clone(&block)).await.is_err() {
                metrics::counter!(m::FEED_UNPUBLISHED, "reason" => "publisher_stopped").increment(1);
            }
        }
        match backend.committed_block(number) {
            Some((mine, _)) if mine == hash => {
                ack.acknowledge();
                continue;
            }
            Some((mine, _)) => {
                backend.halt(Halt::Forked { height: number, ours: mine, finalized: hash });
                return;
            }
            None => {}
        }
        if backend.deliver(block, Box::new(move || ack.acknowledge())).await.is_err() {
            tracing::debug!(
                number,
                "the pipeline stopped; finalized blocks are redelivered at the next start"
            );
            return;
        }
    }
}

/// Simplex's reporter: records view and finality metrics, logs and counts
/// evidence of equivocation, then hands the activity on (to marshal's
/// wrapper).
#[derive(Clone)]
pub(crate) struct Observed<R> {
    pub(crate) inner: R,
    notarized: Arc<Mutex<BTreeMap<u64, Instant>>>,
    /// The validator set, to name the signer of evidence.
    participants: Set<PublicKey>,
}

impl<R> Observed<R> {
    pub(crate) fn new(inner: R, participants: Set<PublicKey>) -> Self {
        Observed { inner, notarized: Arc::default(), participants }
    }

    /// Logs evidence of a validator signing two conflicting votes, with
    /// the proof (both signed votes, encoded as simplex encodes them: anyone
    /// holding the validator set can verify it), and counts it by kind.
    /// Simplex has already verified both signatures before reporting.
    fn evidence(&self, kind: &'static str, view: u64, signer: Participant, proof: &[u8]) {
        metrics::counter!(m::EVIDENCE_TOTAL, "kind" => kind).increment(1);
        let validator = self
            .participants
            .get(usize::from(signer))
            .map_or_else(|| format!("#{signer}"), |k| k.to_string());
        tracing::warn!(
            kind,
            view,
            signer = %signer,
            %validator,
            proof = %hex::encode(proof),
            "evidence: a validator signed conflicting votes"
        );
    }
}

impl<R> Reporter for Observed<R>
where
    R: Reporter<Activity = Activity<ed25519::Scheme, Digest>>,
{
    type Activity = Activity<ed25519::Scheme, Digest>;

    fn report(&mut self, activity: Self::Activity) -> Feedback {
        let view = activity.view().get();
        match &activity {
            Activity::Notarization(_) => {
                let mut seen = self.notarized.lock();
                seen.insert(view, Instant::now());
                // Bounded: views that never finalize are forgotten.
                while seen.len() > 256 {
                    seen.pop_first();
                }
                metrics::gauge!(m::VIEW).set(view as f64);
            }
            Activity::Finalization(_) => {
                let mut seen = self.notarized.lock();
                if let Some(at) = seen.remove(&view) {
                    metrics::histogram!(m::FINALIZE_SECONDS).record(at.elapsed().as_secs_f64());
                }
                seen.retain(|v, _| *v > view);
                metrics::gauge!(m::VIEW).set(view as f64);
                metrics::gauge!(m::LAST_FINALIZED_TIME).set(m::unix_now());
            }
            Activity::Nullification(_) => {
                metrics::counter!(m::NULLIFIED_VIEWS).increment(1);
                metrics::gauge!(m::VIEW).set(view as f64);
            }
            Activity::ConflictingNotarize(e) => {
                self.evidence("conflicting_notarize", view, e.signer(), &e.encode())
            }
            Activity::ConflictingFinalize(e) => {
                self.evidence("conflicting_finalize", view, e.signer(), &e.encode())
            }
            Activity::NullifyFinalize(e) => self.evidence("nullify_finalize", view, e.signer(), &e.encode()),
            _ => {}
        }
        self.inner.report(activity)
    }
}
