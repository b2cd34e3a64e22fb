//! Committing executed blocks, the only writer of state, and the halts
//! that stop it: a failed commit, damage, or state this node computed
//! that a quorum disagrees with.

use std::sync::Arc;

use alloy_primitives::B256;
use sluice_messages::{ChangeSet, ExecutedBlock};

use super::Store;
use crate::{apphash::app_hash, tables::StoredBlock, write::Priors, Halt, StateReader, StoreError};

/// What a commit did, for metrics.
#[derive(Debug, Clone, Copy)]
pub struct CommitInfo {
    /// The block's app hash.
    pub app_hash: B256,
    /// Whether the write was synced to disk (false without a database, or
    /// between syncs of a grouped policy).
    pub synced: bool,
    /// Time spent writing (and syncing) the database.
    pub write: std::time::Duration,
}

impl Store {
    /// Commits an executed block: writes it durably (per the sync policy),
    /// then makes it visible to readers, chaining its app hash. Blocks must
    /// arrive in order. A failure is latched: every later commit fails.
    pub fn commit(&self, executed: &ExecutedBlock) -> Result<CommitInfo, StoreError> {
        let (prev, expected) = {
            let inner = self.inner.read();
            if let Some(halt) = &inner.halted {
                return Err(StoreError::Halted(halt.clone()));
            }
            let prev = match inner.recent.back() {
                Some(b) => b.app_hash,
                None => unreachable!("the store always holds its head block"),
            };
            (prev, inner.head + 1)
        };
        let (code_hashes, priors) = self.code_hashes_and_priors(&executed.changes)?;
        let number = executed.block.header.number;
        if number != expected {
            return Err(StoreError::OutOfOrder { expected, got: number });
        }
        self.check_state_ref(executed)?;
        let mut app = app_hash(&prev, number, &executed.block.hash, executed.gas_used, &executed.changes);
        if self.diverge_at != 0 && number == self.diverge_at {
            app.0[0] ^= 0xff;
        }
        let stored = Arc::new(StoredBlock {
            block: Arc::clone(&executed.block),
            receipts: executed.receipts.clone(),
            raw_index: executed.raw_index.clone(),
            gas_used: executed.gas_used,
            app_hash: app,
        });
        let start = std::time::Instant::now();
        let mut synced = false;
        if let Some(db) = &self.db {
            let result = if number == self.fail_commit_at {
                Err(StoreError::Io(std::io::Error::other(format!(
                    "injected commit failure at height {number}"
                ))))
            } else {
                let db = db.read_recursive();
                match db.as_ref().map(|db| (db.vault(number), db)) {
                    None => Err(StoreError::Closed),
                    Some((Ok(Some(recorded)), _)) if recorded != app => Err(StoreError::Corrupt(format!(
                        "app hash mismatch at height {number}: the hash vault recorded {recorded}, this node produced {app}"
                    ))),
                    Some((Err(e), _)) => Err(e),
                    Some((Ok(_), db)) => db.write_block(&stored, &executed.changes, &code_hashes, &priors),
                }
            };
            match result {
                Ok(written) => {
                    synced = written.synced;
                    if let Some(cache) = &self.cache {
                        cache.committed(&executed.changes, &code_hashes, &written.wiped);
                    }
                }
                Err(e) => {
                    self.halt(Halt::CommitFailed { height: number, cause: e.to_string() });
                    return Err(e);
                }
            }
        }
        let write = start.elapsed();
        let mut inner = self.inner.write();
        if self.cache.is_none() {
            inner.state.apply(&executed.changes);
        }
        inner.push(stored);
        let keep = self.cache_blocks;
        inner.evict_to(keep);
        Ok(CommitInfo { app_hash: app, synced, write })
    }

    /// A consensus rule, not a storage check: a validator's block carries
    /// another validator's claim about an earlier app hash, signed by a
    /// quorum once finalized. If this node computed another, its state has
    /// diverged and it must stop (latched like any failed commit); every
    /// node applies it the same way, so a change here changes which
    /// blocks the network accepts.
    fn check_state_ref(&self, executed: &ExecutedBlock) -> Result<(), StoreError> {
        let Some(claim) = executed.block.header.state_ref else { return Ok(()) };
        let number = executed.block.header.number;
        let mine = if claim.height < number {
            // A failed read fails this commit, which halts like any failed
            // commit (and is not taken for a height never committed).
            match self.try_block(claim.height) {
                Ok(b) => b.map(|b| b.app_hash),
                Err(e) => {
                    self.halt(Halt::CommitFailed { height: number, cause: e.to_string() });
                    return Err(e);
                }
            }
        } else {
            None
        };
        let halt = match mine {
            Some(mine) if mine == claim.app_hash => return Ok(()),
            Some(mine) => Halt::Diverged { height: claim.height, ours: mine, theirs: claim.app_hash },
            None => Halt::CommitFailed {
                height: number,
                cause: format!("it refers to height {}, which this node has not committed", claim.height),
            },
        };
        self.halt(halt.clone());
        Err(StoreError::Halted(halt))
    }

    /// The code hash each account change leaves (what the change says for
    /// fresh accounts, otherwise the current one) and, with a database,
    /// what each change replaces (see [`Priors`]), read through the state
    /// cache: the executor has just read all of it.
    fn code_hashes_and_priors(&self, changes: &ChangeSet) -> Result<(Vec<B256>, Priors), StoreError> {
        if self.cache.is_none() {
            let inner = self.inner.read();
            let hashes = changes.accounts.iter().map(|c| inner.state.code_hash_after(c)).collect();
            return Ok((hashes, Priors::default()));
        }
        let mut hashes = Vec::with_capacity(changes.accounts.len());
        let mut priors = Priors {
            accounts: Vec::with_capacity(changes.accounts.len()),
            slots: Vec::with_capacity(changes.accounts.len()),
        };
        for c in &changes.accounts {
            let before = self.account(&c.address)?;
            let wiped = c.storage_cleared || c.deleted;
            hashes.push(match (&c.code, wiped) {
                (Some(code), _) => code.hash,
                (None, true) => crate::EMPTY_CODE_HASH,
                (None, false) => before.map_or(crate::EMPTY_CODE_HASH, |a| a.code_hash),
            });
            priors.accounts.push(before);
            let slots = if wiped {
                Vec::new()
            } else {
                c.storage.iter().map(|(slot, _)| self.storage(&c.address, slot)).collect::<Result<_, _>>()?
            };
            priors.slots.push(slots);
        }
        Ok((hashes, priors))
    }

    /// Latches a halt: every later commit fails with the first one. A halt
    /// that says this node's state is wrong ([`Halt::wrong_from`]) is also
    /// kept by [`Store::diverged`], even after another halt.
    pub fn halt(&self, halt: Halt) {
        let mut inner = self.inner.write();
        if let (Some(height), None) = (halt.wrong_from(), &inner.diverged) {
            inner.diverged = Some((height, halt.clone()));
        }
        inner.halted.get_or_insert(halt);
    }

    /// The first height whose state is known wrong, and the halt that
    /// said so (this node's app hash disagrees with what a quorum
    /// finalized, or it committed another block than the one finalized);
    /// `None` unless one latched.
    pub fn diverged(&self) -> Option<(u64, Halt)> {
        self.inner.read().diverged.clone()
    }
}
