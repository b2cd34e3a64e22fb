//! The application consensus drives: how this validator proposes, and how
//! it checks the proposals of others.
//!
//! Proposing seals a block from this validator's own mempool (the
//! producer, on request). Verifying is deterministic and needs no state:
//! header rules, the timestamp, every transaction decoded, recovered and
//! held to admission's stateless rules with their declared gas within the
//! block, and the state reference; no execution. Execution
//! happens only for finalized blocks, after consensus (see `sink.rs`), and
//! its results are agreed on later, through the state reference a later
//! header carries.

use std::{
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use alloy_primitives::{map::B256Set, Address, B256};
use commonware_consensus::{
    marshal::ancestry::Ancestry,
    simplex::{scheme::ed25519, types::Context},
    Application,
};
use commonware_cryptography::{ed25519::PublicKey, keccak256::Digest, Digested};
use commonware_runtime::Clock;
use futures::StreamExt as _;
use parking_lot::Mutex;
use sluice_messages::{BlockHeader, SealedBlock, StateRef};
use sluice_txpool::{check_proposal_txs, AdmissionRules, ProposalError};

use crate::{
    backend::{Backend, BuildRequest, Parent},
    block::{tx_root, ChainBlock},
    metrics as m,
    proposals::OwnProposals,
    rules::Rules,
};

/// This validator's application: the proposer and the verifier.
#[derive(Clone)]
pub(crate) struct SluiceApp<B: Backend> {
    pub(crate) backend: B,
    pub(crate) proposals: Arc<Mutex<OwnProposals>>,
    pub(crate) rules: Rules,
    /// Fee recipient of this validator's proposals.
    pub(crate) coinbase: Address,
    /// A proposal more than this many heights ahead of the committed
    /// height is empty: execution is behind.
    pub(crate) max_exec_lag_blocks: u64,
    /// The app hash after genesis: the reference of a chain's first block.
    pub(crate) genesis_app_hash: B256,
    /// The stateless rules every transaction of a proposal keeps: the
    /// shared chain rules, as this node's admission applies them.
    pub(crate) tx_rules: AdmissionRules,
    /// Threads recovering a proposal's senders.
    pub(crate) verify_workers: usize,
}

/// Why a follower refused a proposal; its label counts it.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Gas limit, base fee or sizes break the rules.
    Header,
    /// Earlier than its parent.
    Timestamp,
    /// Missing, backwards, or not this node's app hash.
    StateRef,
    /// A transaction breaks a stateless rule, or the declared gas limits
    /// sum past the block's (boxed: admission's errors carry balances, and
    /// the other refusals stay small).
    Txs(Box<ProposalError>),
}

impl Refusal {
    /// The `reason` label of [`m::PROPOSALS_REFUSED`].
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Refusal::Header => "header",
            Refusal::Timestamp => "timestamp",
            Refusal::StateRef => "state_ref",
            Refusal::Txs(e) => e.reason(),
        }
    }
}

fn unix_secs<E: Clock>(ctx: &E) -> u64 {
    ctx.current().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl<B: Backend> SluiceApp<B> {
    /// The reference a block on `parent` carries: the committed head's app
    /// hash if it is newer than the parent's reference, else the parent's.
    /// A proposer only claims hashes it computed itself, and a reference
    /// never moves backwards.
    fn state_ref_for(&self, parent: &SealedBlock) -> StateRef {
        let inherited = self.parent_ref(parent);
        let committed = (*self.backend.committed().borrow()).min(parent.header.number);
        if committed > inherited.height {
            if let Some((_, app_hash)) = self.backend.committed_block(committed) {
                return StateRef { height: committed, app_hash };
            }
        }
        inherited
    }

    /// The reference of `parent`, genesis standing for its own.
    fn parent_ref(&self, parent: &SealedBlock) -> StateRef {
        parent.header.state_ref.unwrap_or(StateRef { height: 0, app_hash: self.genesis_app_hash })
    }

    fn empty_block(&self, req: &BuildRequest) -> Arc<SealedBlock> {
        let header = BlockHeader {
            number: req.parent.number + 1,
            parent_hash: req.parent.hash,
            timestamp: req.timestamp,
            coinbase: self.coinbase,
            gas_limit: self.rules.block_gas_limit,
            base_fee: self.rules.base_fee_wei,
            tx_root: tx_root(&[]),
            state_ref: Some(req.state_ref),
        };
        Arc::new(SealedBlock { hash: header.hash(), header, txs: Vec::new() })
    }

    /// Walks `ancestry` (newest first, from `parent`) down to this node's
    /// committed height and to the lowest unresolved proposal of its own.
    /// `None` if one of those proposals is not an ancestor of `parent`;
    /// else the hashes of the transactions above the committed height.
    async fn walk_ancestry(
        &self,
        parent: &SealedBlock,
        committed: u64,
        ancestry: impl Ancestry<ChainBlock>,
    ) -> Option<B256Set> {
        let lowest = self.proposals.lock().lowest();
        if lowest.is_some_and(|l| l > parent.header.number) {
            return None;
        }
        let mut hashes = std::collections::BTreeMap::new();
        let mut txs = B256Set::default();
        let mut ancestry = std::pin::pin!(ancestry);
        while let Some(b) = ancestry.next().await {
            let block = &b.inner().0;
            let n = block.header.number;
            hashes.insert(n, block.hash);
            if n > committed {
                txs.extend(block.txs.iter().map(|raw| sluice_messages::keccak256(raw)));
            }
            if n <= committed && lowest.is_none_or(|l| n <= l) {
                break;
            }
        }
        let consistent = lowest.is_none()
            || self.proposals.lock().consistent_with(parent.header.number, |h| hashes.get(&h).copied());
        consistent.then_some(txs)
    }
}

impl<E, B> Application<E> for SluiceApp<B>
where
    E: Clock + Send + Sync + 'static,
    B: Backend,
{
    type SigningScheme = ed25519::Scheme;
    type Context = Context<Digest, PublicKey>;
    type Block = ChainBlock;
    type Input = ();

    async fn propose(
        &mut self,
        (ctx, _round): (E, Self::Context),
        ancestry: impl Ancestry<ChainBlock>,
        _input: (),
    ) -> Option<Digested<ChainBlock>> {
        if self.backend.halted().is_some() {
            return None;
        }
        let parent = Arc::clone(&ancestry.peek()?.inner().0);
        let mut req = BuildRequest {
            parent: Parent {
                number: parent.header.number,
                hash: parent.hash,
                timestamp: parent.header.timestamp,
            },
            timestamp: unix_secs(&ctx).max(parent.header.timestamp),
            state_ref: self.state_ref_for(&parent),
            exclude: Arc::default(),
        };
        let committed = *self.backend.committed().borrow();
        let lagging =
            parent.header.number + 1 - committed.min(parent.header.number) > self.max_exec_lag_blocks;
        let walked = if lagging { None } else { self.walk_ancestry(&parent, committed, ancestry).await };
        let block = if lagging {
            // Execution is behind: a full block would only deepen the lag.
            // Never wait for it (finality may need this very proposal).
            metrics::counter!(m::EMPTY_PROPOSALS, "reason" => "exec_lag").increment(1);
            self.empty_block(&req)
        } else if let Some(exclude) = walked {
            // Transactions of the blocks not yet committed here may still
            // be in this node's mempool (another validator proposed them):
            // the new block must not carry them again.
            req.exclude = Arc::new(exclude);
            let built = self.backend.build(req).await?;
            let block = built.block;
            self.proposals.lock().proposed(block.header.number, block.hash, built.txs);
            block
        } else {
            // An earlier proposal of ours is unresolved on another branch:
            // its transactions are out of the mempool and may yet be
            // finalized, so none may be proposed again until it resolves.
            metrics::counter!(m::EMPTY_PROPOSALS, "reason" => "unresolved").increment(1);
            self.empty_block(&req)
        };
        tracing::debug!(number = block.header.number, txs = block.txs.len(), "proposing");
        let digest = crate::block::digest_of(&block.hash);
        Some(Digested::precomputed(ChainBlock(block), digest))
    }

    async fn verify(
        &mut self,
        (ctx, _round): (E, Self::Context),
        ancestry: impl Ancestry<ChainBlock>,
    ) -> bool {
        let mut ancestry = std::pin::pin!(ancestry);
        let (Some(block), Some(parent)) = (ancestry.next().await, ancestry.next().await) else {
            return false;
        };
        let (block, parent) = (&block.inner().0, &parent.inner().0);
        let verdict = self.check(&ctx, block, parent).await;
        metrics::counter!(m::VERIFY_TOTAL, "verdict" => if verdict.is_ok() { "accept" } else { "reject" })
            .increment(1);
        if let Err(refusal) = &verdict {
            metrics::counter!(m::PROPOSALS_REFUSED, "reason" => refusal.reason()).increment(1);
            tracing::warn!(number = block.header.number, hash = %block.hash, ?refusal, "refused a proposal");
        }
        verdict.is_ok()
    }
}

impl<B: Backend> SluiceApp<B> {
    /// The follower's checks. Waits (never refuses) for what time or this
    /// node's own execution will settle; a halted node never answers.
    pub(crate) async fn check<E: Clock>(
        &self,
        ctx: &E,
        block: &SealedBlock,
        parent: &SealedBlock,
    ) -> Result<(), Refusal> {
        if self.backend.halted().is_some() {
            futures::future::pending::<()>().await;
        }
        let h = &block.header;
        if !self.rules.header_ok(h, block.txs.iter().map(|t| t.len())) {
            return Err(Refusal::Header);
        }
        if h.timestamp < parent.header.timestamp {
            return Err(Refusal::Timestamp);
        }
        // Junk a Byzantine leader packed (undecodable, unsigned, for another
        // chain, unable to pay its intrinsic gas, or more declared gas than
        // the block holds) would be stored by every validator and skipped by
        // every execution: refuse it before voting. Sizes are bounded by
        // the header rules above; recovery is spread over scoped threads as
        // block preparation spreads it (about 250 ms for 5,000 transfers on
        // one core, see txpool's proposal tests).
        check_proposal_txs(&block.txs, &self.tx_rules, self.verify_workers)
            .map_err(|e| Refusal::Txs(Box::new(e)))?;
        // A timestamp from the future is clock skew, not a fault: wait.
        let limit = unix_secs(ctx) + self.rules.max_timestamp_drift_s;
        if h.timestamp > limit {
            ctx.sleep(Duration::from_secs(h.timestamp - limit)).await;
        }
        let Some(claim) = h.state_ref else { return Err(Refusal::StateRef) };
        let inherited = self.parent_ref(parent);
        if claim == inherited {
            return Ok(());
        }
        if claim.height < inherited.height || claim.height >= h.number {
            return Err(Refusal::StateRef);
        }
        // The proposer had committed that height, so it is finalized and
        // this node will commit it too: wait for it, then compare.
        let mut committed = self.backend.committed();
        while *committed.borrow_and_update() < claim.height {
            if committed.changed().await.is_err() {
                futures::future::pending::<()>().await;
            }
        }
        match self.backend.committed_block(claim.height) {
            Some((_, mine)) if mine == claim.app_hash => Ok(()),
            Some((_, mine)) => {
                tracing::warn!(
                    height = claim.height,
                    claimed = %claim.app_hash,
                    computed = %mine,
                    "a proposal claims another app hash than this node computed"
                );
                Err(Refusal::StateRef)
            }
            None => Err(Refusal::StateRef),
        }
    }
}
