//! Transaction admission as plain Rust: decoding, validation, sender
//! recovery, the nonce book, mempool shards and the prepared-transaction
//! cache. The actors in `sluice-actors` drive these; nothing here knows about
//! actors or HTTP.
//!
//! # Layout
//! - [`error`]: [`TxError`], one variant per refusal, geth's wording, with
//!   its JSON-RPC code and metrics label.
//! - [`validate`]: [`AdmissionRules`], [`admit_stateless`], [`check_funds`],
//!   [`max_cost`].
//! - [`recover`]: EIP-2718 decoding and libsecp256k1 sender recovery.
//! - [`nonce`]: [`NonceBook`], gapless per-sender nonce reservations and
//!   their in-flight spend (the overdraft rule).
//! - [`reservations`]: [`Reservations`], the nonce stage's engine: the
//!   book, each sender's tail, the held queue and what a full pool evicts;
//!   it stages what the nonce actor then sends.
//! - [`pool`]: [`PoolCounters`] (global limits) and FIFO [`MempoolShard`]s.
//! - [`order`]: a block's order across the shards (tip, then admission).
//! - [`proposal`]: [`check_proposal_txs`], the stateless checks a validator
//!   applies to every transaction of another validator's proposal.
//! - [`cache`]: [`PreparedTxCache`], [`hash_batch`], [`prepare_block`].
//! - [`sign`]: a libsecp256k1 [`Signer`] for dev accounts, tests and load.
//!
//! # Admission, in order
//! ```text
//! raw bytes
//!   1. size <= max_tx_size_bytes                  (before decoding)
//!   2. keccak of the exact bytes = the tx hash
//!   3. EIP-2718 decode: legacy, 2930, 1559, 7702;  blob/unknown types refused;
//!      no trailing bytes
//!   4. type policy: 7702 only if allowed (Prague on), with a non-empty auth list
//!   5. EIP-155 protected, chain id matches
//!   6. nonce != u64::MAX
//!   7. gas limit <= block gas limit, <= 2^24 on Osaka (EIP-7825);
//!      initcode <= 49152 bytes (EIP-3860)
//!   8. gas limit >= intrinsic gas, then >= EIP-7623 floor (revm's numbers)
//!   9. tip <= fee cap; fee cap >= min_fee_per_gas (the base fee)
//!  10. signature in range, low s (EIP-2); sender recovered (libsecp256k1)
//!  -- stateful, by the caller --
//!  11. balance covers gas_limit * fee cap + value        (check_funds)
//!  12. nonce == sender's next; balance covers the in-flight max costs
//!      + this one (geth's overdraft rule); in-flight below limit
//!                                                      (NonceBook::reserve)
//!      a lower nonce still in flight: a replacement with geth's price
//!      bump (check_replacement, NonceBook::replace); a delegated (7702)
//!      sender: one in flight, no gap            (Reservations)
//!  13. room in the pool (PoolCounters::try_acquire), or, in a full pool,
//!      the cheapest other senders' last in-flight transactions it
//!      outbids evicted for it (Tails), else `transaction underpriced`
//!      or `txpool is full`; push to a shard, insert into the
//!      PreparedTxCache
//! ```
//! Cheap checks run first so spam costs little; recovery (~40 us) runs last.

// Tests may unwrap; the library itself is linted without this (the lib
// target is checked separately by `clippy --all-targets`).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cache;
pub mod error;
pub mod evict;
pub mod future;
pub mod nonce;
pub mod order;
pub mod pending;
pub mod pool;
pub mod proposal;
pub mod recover;
pub mod reservations;
pub mod sign;
#[cfg(test)]
mod test_txs;
pub mod validate;

pub mod dev_accounts;

pub use cache::{hash_batch, prepare_block, prepare_block_timed, PrepareTimings, PreparedTxCache};
pub use error::TxError;
pub use evict::{NoRoom, Price, Tail, Tails};
pub use future::{FutureLimits, FutureQueue};
pub use nonce::{Committed, NonceBook};
pub use order::{select, BlockBudget, Pooled, Selection, RESTORED_SEQ_LIMIT};
pub use pending::PendingTxs;
pub use pool::{MempoolShard, PoolCounters, Taken};
pub use proposal::{check_proposal_txs, ProposalError, PROPOSAL_REFUSAL_REASONS};
pub use recover::{decode_envelope, recover_raw, recover_sender};
pub use reservations::{
    is_delegation, Admitted, CommittedAccount, CommittedState, DropWhy, Dropped, Outbox, ReservationLimits,
    Reservations, Unstaged,
};
pub use sign::{address_of, Signer};
pub use validate::{
    admit_stateless, check_decoded, check_funds, check_replacement, intrinsic_gas, max_cost, AdmissionRules,
    IntrinsicGas, Spec,
};
