//! In-order execution with one revm journal kept across the block's
//! transactions: the way every block that does not run in parallel runs,
//! and where every parallel attempt that gives up ends. Equal to
//! [`crate::sequential`] on every block.
//!
//! [`crate::sequential`] finalizes every transaction into a fresh state map
//! and folds it into its block state, as revm's `transact_commit` does. revm 43's
//! journal can instead carry state from one transaction to the next
//! (`transact_one`: warmth and EIP-2200 original values are reset per
//! transaction by its transaction id, a rejected transaction is discarded),
//! so an account or slot used by many transactions is loaded once per
//! block, and nothing is allocated per transaction for state. The change set
//! is read off the journal once, at the end.
//!
//! # Settling
//!
//! The journal does not delete an account between transactions, so the two
//! would differ where a deletion is observable later in the same block: a
//! contract created or self-destructed (a re-created address starts with
//! empty storage), an account that existed while empty (EIP-161 deletes
//! it, with any storage, once touched), and an EIP-7702 authority touched
//! while empty (the refund depends on whether it "existed"). So the
//! journal *settles* right after a transaction that ran CREATE, CREATE2 or
//! SELFDESTRUCT (`watch.rs`), created a contract itself, or was served an
//! account that exists empty; and before and after an EIP-7702
//! transaction. Settling folds the journal into the sequential executor's
//! block state exactly as that transaction's commit would have (only the last
//! transaction can have created, destroyed or deleted anything), and the
//! block goes on with a fresh journal over the block state. An EIP-7702
//! transaction so runs alone on a fresh journal, as in the sequential
//! executor. A block without any of these never settles and reads its
//! change set off the one journal; one that settles reads it off the
//! block state. `tests/journal.rs` checks both against the oracle on the
//! randomized blocks.

mod start;
mod watch;

use revm::{
    context::Context,
    context_interface::result::EVMError,
    handler::{MainnetContext, MainnetEvm},
    Database, ExecuteEvm, MainBuilder, MainContext,
};
use sluice_messages::PreparedBlock;
use sluice_state::StateReader;

pub(crate) use start::{change_set, install, keep_tables, sets_code, take_tables, StartDb};

use crate::{
    block_state::BlockState,
    db::DbError,
    env::{block_env, cfg_env},
    sequential::Tally,
    BlockOutcome, ExecConfig, ExecError,
};

/// A database that says whether it served an account that exists empty.
trait ServesEmpty {
    /// Whether it did since the last time this was asked.
    fn took_empty(&mut self) -> bool;
}

impl ServesEmpty for StartDb<'_> {
    fn took_empty(&mut self) -> bool {
        StartDb::took_empty(self)
    }
}

impl ServesEmpty for BlockState<'_> {
    fn took_empty(&mut self) -> bool {
        BlockState::took_empty(self)
    }
}

/// Executes `block` on top of `state` in order on one journal, settling
/// where the module documentation says.
pub fn execute_block_one_journal(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
) -> Result<BlockOutcome, ExecError> {
    // The tables are not sized for the block (two accounts per transaction
    // at most): memory reserved and never used still costs a page fault per
    // page touched, and measured, growing them as needed is faster (ERC-20
    // transfers among 1,000 holders: ~5-20%; a counter every transaction
    // increments, 5,000 senders: ~10%). They are the thread's from its last
    // block, already grown to what that block needed (~1-2% measured).
    let tables = take_tables();
    let mut evm = evm(StartDb::with_tables(state, tables.start), cfg, block);
    let journal = &mut evm.ctx.journaled_state;
    install(&mut journal.inner, &mut journal.database, tables.state, tables.hot)?;
    // What loading the kept accounts served, and a note left by an
    // earlier block that failed, are not this block's transactions'.
    journal.database.took_empty();
    watch::took_place();
    let mut tally = Tally::new(block.txs.len());
    let mut next = 0;
    let settle = run(&mut evm, block, &mut tally, &mut next, false)?;
    let end = evm.finalize();
    if !settle {
        if let Some(changes) = change_set(&evm.ctx.journaled_state.database, &end)? {
            keep_tables(end, evm.ctx.journaled_state.database.take_tables());
            return Ok(tally.outcome(changes));
        }
        // A creation or deletion no watch saw: the settling above is
        // incomplete. Exact all the same, settling after every
        // transaction, from the block's start.
        debug_assert!(false, "the journal missed a creation or deletion");
        keep_tables(end, evm.ctx.journaled_state.database.take_tables());
        return settled(state, cfg, block, Tally::new(block.txs.len()), 0, None, true);
    }
    let from = Some(&end);
    let outcome = settled(state, cfg, block, tally, next, from, false);
    keep_tables(end, evm.ctx.journaled_state.database.take_tables());
    outcome
}

/// The rest of the block from transaction `next` on, after the journal
/// settled holding `journal` (its end state, `None` if settling from the
/// block's start), settling again wherever needed (after every transaction
/// if `every`).
fn settled(
    state: &dyn StateReader,
    cfg: &ExecConfig,
    block: &PreparedBlock,
    mut tally: Tally,
    mut next: usize,
    journal: Option<&revm::state::EvmState>,
    every: bool,
) -> Result<BlockOutcome, ExecError> {
    // Typically a sender and a recipient per transaction, plus the coinbase.
    let mut block_state = BlockState::with_capacity(state, 2 * block.txs.len() + 1);
    if let Some(journal) = journal {
        block_state.commit_journal(journal)?;
    }
    let mut evm = evm(block_state, cfg, block);
    let mut settles = u32::from(journal.is_some());
    loop {
        let settle = run(&mut evm, block, &mut tally, &mut next, every)?;
        let end = evm.finalize();
        evm.ctx.journaled_state.database.commit_journal(&end)?;
        if !settle {
            break;
        }
        settles = settles.saturating_add(1);
    }
    let changes = evm.ctx.journaled_state.database.change_set()?;
    let mut outcome = tally.outcome(changes);
    outcome.stats.settles = settles;
    Ok(outcome)
}

/// An EVM for `block` over `db`, with the executors' instructions.
fn evm<DB: Database>(db: DB, cfg: &ExecConfig, block: &PreparedBlock) -> MainnetEvm<MainnetContext<DB>> {
    let header = &block.block.header;
    let mut evm = Context::mainnet()
        .with_db(db)
        .with_block(block_env(header, cfg.spec))
        .with_cfg(cfg_env(cfg))
        .build_mainnet();
    crate::keccak::install(&mut evm.instruction);
    watch::install(&mut evm.instruction);
    evm
}

/// Runs the block's transactions from `next` on `evm`'s journal until the
/// block's end (`false`) or until the journal must settle (`true`), after
/// every transaction if `every`. `next` is left at the first transaction
/// not run.
fn run<DB: Database<Error = DbError> + ServesEmpty>(
    evm: &mut MainnetEvm<MainnetContext<DB>>,
    block: &PreparedBlock,
    tally: &mut Tally,
    next: &mut usize,
    every: bool,
) -> Result<bool, ExecError> {
    let header = &block.block.header;
    let first = *next;
    while let Some(prepared) = block.txs.get(*next) {
        crate::prefetch::ahead(&block.txs, *next);
        // Checked here rather than in a pass over the block first: that
        // pass read every transaction from memory, ~50 us for 5,000.
        let alone = sets_code(prepared);
        if alone && *next > first {
            return Ok(true);
        }
        *next += 1;
        let Some((tx, env)) = tally.applicable(prepared, header.gas_limit) else {
            continue;
        };
        let creates = env.kind.is_create();
        match evm.transact_one(env) {
            Ok(result) => tally.applied(tx, header.base_fee, result),
            Err(EVMError::Database(e)) => return Err(e.into()),
            // Refused before execution: revm discarded the transaction's
            // journal entries, as in the sequential executor.
            Err(e) => tally.skipped.push((tx.hash, crate::skip::refusal(e))),
        }
        // Both asked every time: each forgets once asked.
        let watched = watch::took_place();
        let empty = evm.ctx.journaled_state.database.took_empty();
        if every || alone || creates || watched || empty {
            return Ok(true);
        }
    }
    Ok(false)
}
