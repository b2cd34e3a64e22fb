//! What consensus needs of the node: one trait, so that the production
//! pipeline (actors) and the simulation's in-process pipeline are
//! interchangeable behind the same engine.

use std::{future::Future, sync::Arc};

use alloy_primitives::{map::B256Set, Bytes, B256};
pub use sluice_messages::{Built, FinalizedItem, OnCommit, Parent, PipelineClosed};
use sluice_messages::{RecoveredTx, SealedBlock, StateRef};
use sluice_state::Halt;
use tokio::sync::watch;

/// A request to seal a proposal.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// The parent.
    pub parent: Parent,
    /// The proposal's timestamp (never before the parent's).
    pub timestamp: u64,
    /// The state reference the header carries.
    pub state_ref: StateRef,
    /// Hashes of the transactions in the blocks from the parent down to
    /// (not including) this node's committed head: already on the chain
    /// the proposal extends, so never proposed again, and dropped from
    /// the mempool (a committed block's transactions leave it on commit).
    pub exclude: Arc<B256Set>,
}

/// The node behind a validator.
pub trait Backend: Clone + Send + Sync + 'static {
    /// Seals a proposal from the mempool; `None` if the producer stopped.
    fn build(&self, req: BuildRequest) -> impl Future<Output = Option<Built>> + Send;
    /// Puts transactions of a proposal that lost its height back at the
    /// front of the mempool, in order, waiting for room: they must be back
    /// before the next proposal is built, or a later nonce could be
    /// proposed before an earlier one.
    fn restore(&self, txs: Vec<RecoveredTx>) -> impl Future<Output = ()> + Send;
    /// Hands a finalized block to preparation -> execution -> commit,
    /// waiting for room; `on_commit` runs once it is committed.
    fn deliver(
        &self,
        block: Arc<SealedBlock>,
        on_commit: OnCommit,
    ) -> impl Future<Output = Result<(), PipelineClosed>> + Send;
    /// The committed height, as it moves.
    fn committed(&self) -> watch::Receiver<u64>;
    /// The committed block at `height`: its hash and the app hash after it.
    fn committed_block(&self, height: u64) -> Option<(B256, B256)>;
    /// Waits for transactions this node's own clients sent that the other
    /// validators were not sent yet; answers up to `max_txs` of them whose
    /// raw sizes plus 4 bytes each sum to at most `max_bytes` (at least
    /// one). Empty once the node stopped: nothing more will come.
    fn outbound(&self, max_txs: usize, max_bytes: usize) -> impl Future<Output = Vec<Bytes>> + Send;
    /// Admits transactions another validator sent, in order, as this
    /// node's own RPC would (duplicates are `already known`), never sending
    /// them on; returns once each was admitted or refused.
    fn admit_from_peer(&self, txs: Vec<Bytes>) -> impl Future<Output = ()> + Send;
    /// Why the node halted, if it did.
    fn halted(&self) -> Option<Halt>;
    /// Halts the node: the pipeline cannot take what consensus decided
    /// (a [`Halt::Consensus`]), or this node's state is wrong (a
    /// [`Halt::Forked`]: it answers no state reads any more).
    fn halt(&self, halt: Halt);
    /// Consensus has seen blocks finalized up to `height` (this node may
    /// not have committed them yet: `eth_syncing` reports the gap).
    fn finalized(&self, height: u64);
    /// A finalized block and its certificate, in height order, as marshal
    /// delivers it (before execution): for the node's finalized-block feed
    /// (`consensus_subscribe`, `consensus_getFinalized`). Must not block.
    fn publish_finalized(&self, item: FinalizedItem);
}
