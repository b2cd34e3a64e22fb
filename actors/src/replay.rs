//! `sluice replay`: re-executes every stored block from genesis into a
//! fresh in-memory state and checks every app hash against the hash vault
//! (and every receipt against the stored one). It proves a data dir is
//! what its blocks say it is.

use std::{path::Path, time::Instant};

use sluice_executor::{BlockExecutor, ExecConfig, SequentialExecutor};
use sluice_messages::{ExecutedBlock, PreparedBlock};
use sluice_store::{db::Db, Genesis, GenesisAccount, Store, StoreError};
use sluice_txpool::{prepare_block, PreparedTxCache};

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The data dir could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Re-execution produced something other than what was recorded.
    #[error("divergence at height {height}: {what}")]
    Diverged {
        /// The height.
        height: u64,
        /// What differs.
        what: String,
    },
    /// Execution itself failed.
    #[error("execution of block {height} failed: {reason}")]
    Execution {
        /// The height.
        height: u64,
        /// Why.
        reason: String,
    },
}

/// What a successful replay covered.
#[derive(Debug, Clone)]
pub struct ReplaySummary {
    /// Blocks re-executed (after genesis).
    pub blocks: u64,
    /// Transactions applied.
    pub txs: u64,
    /// The final app hash, equal to the vault's.
    pub app_hash: alloy_primitives::B256,
    /// Wall time.
    pub elapsed: std::time::Duration,
}

/// Replays the data dir at `dir`, calling `progress(height, head)` about
/// once a second.
pub fn replay(
    dir: &Path,
    workers: usize,
    progress: impl FnMut(u64, u64),
) -> Result<ReplaySummary, ReplayError> {
    // Every read of the data dir is guarded: a database library may
    // panic on some damage.
    sluice_store::guard::guarded(&dir.join(sluice_store::db::DB_DIR), || {
        replay_unguarded(dir, workers, progress)
    })
}

fn replay_unguarded(
    dir: &Path,
    workers: usize,
    mut progress: impl FnMut(u64, u64),
) -> Result<ReplaySummary, ReplayError> {
    let start = Instant::now();
    let (db, id, head) = Db::open_existing(dir)?;
    let diverged = |height: u64, what: String| ReplayError::Diverged { height, what };
    // Replay re-executes from genesis: a full node's data dir no longer
    // has the blocks.
    let kept_from = db.blocks_from();
    if kept_from > 0 {
        return Err(ReplayError::Store(StoreError::HistoryPruned { block: 0, oldest: kept_from }));
    }
    let block0 = db.block(0)?.ok_or_else(|| diverged(0, "genesis block missing".into()))?;
    let alloc_changes = db.changes(0)?.ok_or_else(|| diverged(0, "genesis allocation missing".into()))?;
    let h = &block0.block.header;
    let mut genesis = Genesis {
        chain_id: id.chain_id,
        timestamp: h.timestamp,
        gas_limit: h.gas_limit,
        base_fee: h.base_fee,
        coinbase: h.coinbase,
        alloc: Default::default(),
        synthetic: db.synthetic()?,
    };
    for a in &alloc_changes.accounts {
        genesis.alloc.insert(
            a.address,
            GenesisAccount {
                balance: a.balance,
                nonce: a.nonce,
                code: a.code.as_ref().map(|c| c.code.clone()).unwrap_or_default(),
                storage: a.storage.iter().copied().collect(),
            },
        );
    }
    if genesis.fingerprint() != id.genesis {
        return Err(diverged(
            0,
            format!("genesis fingerprint {} != recorded {}", genesis.fingerprint(), id.genesis),
        ));
    }
    let store = Store::new(&genesis);
    let recorded0 = db.vault(0)?.ok_or_else(|| diverged(0, "hash vault has no genesis".into()))?;
    if store.head_block().app_hash != recorded0 {
        return Err(diverged(0, format!("app hash {} != vault {}", store.head_block().app_hash, recorded0)));
    }
    let spec = sluice_executor::Spec::from_name(&id.spec)
        .ok_or_else(|| diverged(0, format!("unknown fork {:?} in the store's chain identity", id.spec)))?;
    let mut executor = SequentialExecutor::new(ExecConfig { chain_id: id.chain_id, spec });
    let cache = PreparedTxCache::new(1);
    let mut txs = 0u64;
    let mut last_report = Instant::now();
    let mut app_hash = recorded0;
    for height in 1..=head {
        let stored = db.block(height)?.ok_or_else(|| diverged(height, "block missing".into()))?;
        let prepared = PreparedBlock {
            txs: prepare_block(&stored.block.txs, &cache, id.chain_id, workers),
            block: stored.block.clone(),
        };
        let outcome = executor
            .execute(&store, &prepared)
            .map_err(|e| ReplayError::Execution { height, reason: e.to_string() })?;
        if outcome.receipts != stored.receipts {
            return Err(diverged(height, "receipts differ from the stored ones".into()));
        }
        txs += outcome.receipts.len() as u64;
        let executed = ExecutedBlock {
            block: stored.block.clone(),
            raw_index: stored.raw_index.clone(),
            receipts: outcome.receipts,
            skipped: outcome.skipped,
            gas_used: outcome.gas_used,
            changes: std::sync::Arc::new(outcome.changes),
            app_hash: Default::default(),
        };
        let info = store.commit(&executed)?;
        let recorded = db.vault(height)?.ok_or_else(|| diverged(height, "hash vault has no entry".into()))?;
        if info.app_hash != recorded {
            return Err(diverged(
                height,
                format!(
                    "app hash mismatch: the hash vault recorded {recorded}, replay produced {}",
                    info.app_hash
                ),
            ));
        }
        app_hash = recorded;
        if last_report.elapsed().as_secs() >= 1 {
            progress(height, head);
            last_report = Instant::now();
        }
    }
    Ok(ReplaySummary { blocks: head, txs, app_hash, elapsed: start.elapsed() })
}
