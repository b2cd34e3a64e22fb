//! What a block selector (`latest`, a number, a hash, ...) names: a
//! committed block, or the state at its end. Shared by the `eth_` and
//! `debug_trace` methods.

use std::sync::Arc;

use sluice_store::{StateAt, StateReader, StoredBlock};

use super::{
    error::{RpcError, INTERNAL_ERROR, SERVER_ERROR},
    params::BlockId,
    RpcState,
};

/// Resolves a block selector against the committed chain.
pub(crate) fn find_block(s: &RpcState, id: BlockId) -> Result<Option<Arc<StoredBlock>>, RpcError> {
    if id == BlockId::Earliest {
        return earliest_block(s);
    }
    find_numbered(s, id)
}

/// `earliest` never answers "pruned": a full node prunes at every commit,
/// so the oldest block kept may go between reading its number and reading
/// it; the new oldest is then read, a bounded number of times (a commit
/// takes far longer than a read, so a second try almost always holds).
fn earliest_block(s: &RpcState) -> Result<Option<Arc<StoredBlock>>, RpcError> {
    const TRIES: usize = 8;
    let mut last = None;
    for _ in 0..TRIES {
        match find_numbered(s, BlockId::Earliest) {
            Err(e) if e.code == crate::error::PRUNED_HISTORY => last = Some(e),
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| RpcError::new(INTERNAL_ERROR, "the oldest block kept could not be read")))
}

fn find_numbered(s: &RpcState, id: BlockId) -> Result<Option<Arc<StoredBlock>>, RpcError> {
    let number = match id {
        BlockId::Latest | BlockId::Pending => return Ok(Some(s.store.head_block())),
        BlockId::Hash(h) => return Ok(s.store.try_block_by_hash(&h)?),
        // geth: the history cutoff, the oldest block kept.
        BlockId::Earliest => s.store.oldest_block(),
        BlockId::Number(n) => n,
    };
    // The head first: it only grows, so a block at or below it exists.
    if number > s.store.head() {
        return Ok(None);
    }
    // A failed read answers this request with its error (the store is
    // not halted for it).
    let read = s.store.try_block(number).map_err(|e| match e {
        // Pruned state or blocks are the caller's to hear as geth words it.
        e @ (sluice_store::StoreError::StateUnavailable { .. }
        | sluice_store::StoreError::HistoryPruned { .. }) => RpcError::from(e),
        e => RpcError::new(INTERNAL_ERROR, format!("block {number} could not be read: {e}")),
    })?;
    match read {
        Some(block) => Ok(Some(block)),
        // Committed, yet not there: the store halted or is closing. Say
        // so, rather than answer that the block does not exist.
        None => Err(RpcError::new(
            INTERNAL_ERROR,
            format!(
                "block {number} could not be read: {}",
                s.store.halted().map_or_else(|| "the store is closed".into(), |h| h.to_string())
            ),
        )),
    }
}

/// Where a state read is answered: at the head (`latest`, `pending`: the
/// current state, through the store's state cache), or at the end of a named block, through the
/// store's history, however far the chain has moved since.
pub(crate) enum StateView<'a> {
    Head,
    At(StateAt<'a>, Arc<StoredBlock>),
}

impl<'a> StateView<'a> {
    /// The state to read.
    pub(crate) fn reader(&self, s: &'a RpcState) -> &dyn StateReader {
        match self {
            StateView::Head => s.store.as_ref(),
            StateView::At(state, _) => state,
        }
    }

    /// The block whose end state this is (calls run in its environment).
    pub(crate) fn block(&self, s: &RpcState) -> Arc<StoredBlock> {
        match self {
            StateView::Head => s.store.head_block(),
            StateView::At(_, block) => Arc::clone(block),
        }
    }
}

/// The state a block selector names: geth's "header not found" past the
/// head, and the store's "missing trie node" before its history.
pub(crate) fn state_at(s: &RpcState, id: BlockId) -> Result<StateView<'_>, RpcError> {
    crate::sync::state_readable(&s.store)?;
    if matches!(id, BlockId::Latest | BlockId::Pending) {
        return Ok(StateView::Head);
    }
    let block = match id {
        BlockId::Hash(h) => s
            .store
            .try_block_by_hash(&h)?
            .ok_or_else(|| RpcError::new(SERVER_ERROR, format!("header for hash {h} not found")))?,
        _ => find_block(s, id)?.ok_or_else(|| RpcError::new(SERVER_ERROR, "header not found"))?,
    };
    let state = s.store.state_at(block.block.header.number)?;
    Ok(StateView::At(state, block))
}
