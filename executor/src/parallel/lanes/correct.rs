//! Making a chunk final (steps 2 and 3 of the module documentation): correcting
//! its speculated runs once the chunks before it are final, then running
//! the rest of the chunk on the now exact state.
//!
//! A lane corrects its chunk as soon as the chunk before it is final, not
//! at the chunk's end: the transactions it runs after that read exact
//! state, so they never run again and are never undone or redone.

use std::sync::Mutex;

use alloy_primitives::U256;
use sluice_messages::{PreparedTx, SkipReason};

use super::{
    entry::{Dirty, Key},
    lane::{gas_limit, Lane, Res, Run, Stop, Val},
    Applied, Final, Shared,
};
use crate::parallel::threads::lock;

/// A chunk being made final: what is final of it so far.
pub(super) struct Making {
    /// The final values of what the final runs changed, in order (a key
    /// changed twice appears twice; applied in order, the last value wins).
    writes: Vec<(Key, Val)>,
    /// The rest of the chunk's [`Final`].
    out: Final,
    receipts: Vec<Applied>,
    /// Fees owed the coinbase and not credited yet. Only a run that read
    /// the coinbase needs them, so they are credited before such a run and
    /// at the end, not one lookup per transaction.
    fees: Option<U256>,
    /// The coinbase's key digest: what a run on exact state may have read
    /// stale (the fees not credited yet).
    coinbase: u64,
    /// `filters.before`: what the chunks before changed; a run on exact
    /// state that read it would have run again, had it been speculated
    /// (see `Final`).
    filters: Filters,
    /// Conflicts in the chunk, and in the block before it.
    conflicts: u32,
    prior_conflicts: u32,
}

/// The key sets a chunk is corrected with, kept by a worker from chunk to
/// chunk: a fresh one per chunk was ~1 us of allocating and zeroing, about
/// a tenth of a correction.
#[derive(Debug)]
pub(super) struct Filters {
    /// What the chunks before changed.
    before: Dirty,
    /// What the chunk's runs executed again changed (both executions).
    again: Dirty,
}

impl Filters {
    pub(super) fn new() -> Self {
        Filters { before: Dirty::new(), again: Dirty::new() }
    }
}

/// Makes `runs` (the chunk's first transactions `txs`, speculated on
/// `lane`) exact given the final chunks `before` it; the lane's state is
/// then exact after them, but for the fees in the returned [`Making`].
/// `writes` is an empty vector to take the chunk's values (one this
/// worker filled before, while it is still in its cache); `filters`, the
/// ones the worker's last [`Making::close`] gave back.
pub(super) fn correct(
    lane: &mut Lane<'_>,
    shared: &Shared<'_>,
    txs: &[PreparedTx],
    runs: &mut [Run],
    before: &[&Final],
    (mut writes, mut filters): (Vec<(Key, Val)>, Filters),
) -> Result<Making, Stop> {
    let before_writes: Vec<_> = before.iter().map(|c| lock(&c.writes)).collect();
    filters.before.clear();
    for (key, _) in before_writes.iter().flat_map(|w| w.iter()) {
        filters.before.insert(key.digest());
    }
    // Every chunk hands the coinbase on: it is in `filters.before`, but
    // only a run that read it is a conflict. A run is dirty if it read
    // the coinbase, or what the chunks before changed, or (once a run
    // was executed again) what such a run changed.
    let coinbase = Key::Account(lane.coinbase()).digest();
    let mut ran_again = false;
    let dirty = |d: u64, filters: &Filters, ran_again: bool| {
        d == coinbase || filters.before.contains(d) || (ran_again && filters.again.contains(d))
    };
    let first = runs.iter().position(|run| lane.read_any(run, |d| dirty(d, &filters, false)));
    if let Some(first) = first {
        for run in runs[first..].iter().rev() {
            lane.undo(run)?;
        }
    }
    for chunk_writes in &before_writes {
        lane.set_all(chunk_writes)?;
    }
    drop(before_writes);
    // Room for what the runs wrote as speculated, and for a few
    // transactions more (a few values each) and the coinbase: ~50 entries
    // of ~100 bytes, copied again each time the vector grew.
    writes.reserve(lane.writes_len() + 32);
    let (applied, gas_used) = before.last().map_or((0, 0), |c| (c.applied, c.gas_used));
    let mut making = Making {
        writes,
        out: Final {
            writes: Mutex::new(Vec::new()),
            receipts: Mutex::new(None),
            skipped: Vec::new(),
            applied,
            gas_used,
            reruns: 0,
            block_conflicts: 0,
        },
        receipts: Vec::with_capacity(runs.len()),
        fees: None,
        coinbase,
        filters,
        conflicts: 0,
        prior_conflicts: before.last().map_or(0, |c| c.block_conflicts),
    };
    for (i, prepared) in txs.iter().enumerate() {
        if first.is_some_and(|first| i >= first) {
            if lane.read_any(&runs[i], |d| dirty(d, &making.filters, ran_again)) {
                if !ran_again {
                    making.filters.again.clear();
                    ran_again = true;
                }
                let again = &mut making.filters.again;
                lane.written(&runs[i]).for_each(|(k, _)| again.insert(k.digest()));
                // It may read the coinbase: every earlier fee first.
                making.credit(lane)?;
                runs[i] = lane.execute(prepared)?;
                let again = &mut making.filters.again;
                lane.written(&runs[i]).for_each(|(k, _)| again.insert(k.digest()));
                making.out.reruns += 1;
                making.conflicts += 1;
            } else {
                lane.redo(&runs[i])?;
            }
        }
        making.take(lane, shared, i, prepared, &mut runs[i])?;
    }
    Ok(making)
}

impl Making {
    /// Runs the chunk's next transaction, `prepared` at offset `i`, on the
    /// lane's exact state: final as it runs (run again only if it read the
    /// coinbase before fees owed it were credited).
    pub(super) fn exact(
        &mut self,
        lane: &mut Lane<'_>,
        shared: &Shared<'_>,
        i: usize,
        prepared: &PreparedTx,
    ) -> Result<(), Stop> {
        let mut run = lane.execute(prepared)?;
        self.conflicts += u32::from(lane.read_any(&run, |d| self.filters.before.contains(d)));
        if self.fees.is_some() && lane.read_any(&run, |d| d == self.coinbase) {
            lane.undo(&run)?;
            self.credit(lane)?;
            run = lane.execute(prepared)?;
        }
        self.take(lane, shared, i, prepared, &mut run)
    }

    /// The chunk's final values and the receipts still to build, once its
    /// last transaction is taken; and the filters, for the worker's next
    /// chunk.
    pub(super) fn close(mut self, lane: &mut Lane<'_>) -> Result<(Final, Vec<Applied>, Filters), Stop> {
        self.credit(lane)?;
        let coinbase = Key::Account(lane.coinbase());
        self.writes.push((coinbase, lane.value(coinbase)));
        self.out.writes = Mutex::new(self.writes);
        self.out.block_conflicts = self.prior_conflicts + self.conflicts;
        Ok((self.out, self.receipts, self.filters))
    }

    /// Credits the fees owed the coinbase so far.
    fn credit(&mut self, lane: &mut Lane<'_>) -> Result<(), Stop> {
        match self.fees.take() {
            Some(fee) => lane.credit(fee),
            None => Ok(()),
        }
    }

    /// Takes the final `run` of `prepared`, at offset `i` in the chunk: its
    /// values, its receipt's place, its fee.
    fn take(
        &mut self,
        lane: &Lane<'_>,
        shared: &Shared<'_>,
        i: usize,
        prepared: &PreparedTx,
        run: &mut Run,
    ) -> Result<(), Stop> {
        let out = &mut self.out;
        let block_gas = shared.block.block.header.gas_limit;
        if gas_limit(prepared).is_some_and(|limit| limit > block_gas.saturating_sub(out.gas_used)) {
            // Skipped in order for want of block gas: rare, not modelled.
            return Err(Stop::Decline);
        }
        self.writes.extend(lane.written(run));
        match (prepared, std::mem::replace(&mut run.res, Res::Static(SkipReason::Other(String::new())))) {
            (PreparedTx::Ready(_), Res::Applied { result, fee }) => {
                out.gas_used = out.gas_used.saturating_add(result.tx_gas_used());
                self.receipts.push((i, out.applied, out.gas_used, result));
                out.applied += 1;
                self.fees = Some(self.fees.unwrap_or_default().saturating_add(fee));
            }
            (_, Res::Refused(reason) | Res::Static(reason)) => out.skipped.push((prepared.hash(), reason)),
            (PreparedTx::Invalid { .. }, Res::Applied { .. }) => return Err(Stop::Decline),
        }
        Ok(())
    }
}
