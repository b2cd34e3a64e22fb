//! The one error type of transaction admission.
//!
//! Each variant's `Display` is geth's exact wording, because clients decide
//! what to do by matching on the text (ethers looks for /insufficient funds/
//! and /nonce/ + /too low/; foundry and viem show it to the user).

use alloy_primitives::{Address, U256};
use sluice_state::Halt;

/// Why a transaction was refused at admission (or could not be prepared for
/// a block).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    /// The raw bytes exceed the size limit; checked before decoding so an
    /// attacker cannot make us parse megabytes.
    #[error("oversized data: transaction size {size}, limit {limit}")]
    Oversized {
        /// Size of the raw transaction in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// Empty input or a lone type byte (geth's `errShortTypedTx`).
    #[error("typed transaction too short")]
    TypedTxTooShort,
    /// The RLP is malformed.
    #[error("rlp: {0}")]
    Rlp(alloy_rlp::Error),
    /// Bytes remain after a complete transaction (geth's RLP decoder says
    /// exactly this).
    #[error("rlp: input contains more than one value")]
    TrailingBytes,
    /// Blob (type 3) transactions, EIP-7702 when disabled, or an unknown
    /// type byte.
    #[error("transaction type not supported")]
    TypeNotSupported,
    /// An EIP-7702 transaction without authorizations (invalid by the EIP).
    #[error("EIP-7702 transaction with empty auth list")]
    EmptyAuthList,
    /// A legacy transaction signed without a chain id.
    #[error("only replay-protected (EIP-155) transactions allowed over RPC")]
    Unprotected,
    /// Signed for another chain.
    #[error("invalid chain id for signer: have {have} want {want}")]
    InvalidChainId {
        /// The transaction's chain id.
        have: u64,
        /// This node's chain id.
        want: u64,
    },
    /// The nonce is `u64::MAX`, so executing it would overflow the account
    /// nonce.
    #[error("nonce has max value")]
    NonceMax,
    /// The gas limit is above the block gas limit: it could never be
    /// included.
    #[error("exceeds block gas limit")]
    GasLimit,
    /// The gas limit is above EIP-7825's per-transaction cap (2^24, from
    /// Osaka on): no block could execute it, whatever the block gas limit
    /// (geth's `ErrGasLimitTooHigh` with the cap and the limit).
    #[error("transaction gas limit too high (cap: {cap}, tx: {gas})")]
    GasLimitTooHigh {
        /// The cap, 16,777,216.
        cap: u64,
        /// The transaction's gas limit.
        gas: u64,
    },
    /// A contract creation whose init code is above the EIP-3860 limit.
    #[error("max initcode size exceeded: code size {size}, limit {limit}")]
    MaxInitCodeSize {
        /// Init code length in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The gas limit does not cover the intrinsic gas.
    #[error("intrinsic gas too low: gas {gas}, minimum needed {needed}")]
    IntrinsicGas {
        /// The transaction's gas limit.
        gas: u64,
        /// Intrinsic gas as revm computes it.
        needed: u64,
    },
    /// The gas limit does not cover the EIP-7623 calldata floor (Prague).
    #[error("insufficient gas for floor data gas cost: gas {gas}, minimum needed {needed}")]
    FloorDataGas {
        /// The transaction's gas limit.
        gas: u64,
        /// The EIP-7623 floor.
        needed: u64,
    },
    /// `max_priority_fee_per_gas > max_fee_per_gas`.
    #[error("max priority fee per gas higher than max fee per gas")]
    TipAboveFeeCap,
    /// The fee cap (or legacy gas price) is below the node's minimum (the
    /// base fee). Geth's state-transition wording, which names the sender.
    #[error("max fee per gas less than block base fee: address {sender}, maxFeePerGas: {max_fee_per_gas}, baseFee: {base_fee}")]
    FeeCapTooLow {
        /// The recovered sender.
        sender: Address,
        /// The transaction's fee cap (gas price for legacy and EIP-2930).
        max_fee_per_gas: u128,
        /// The minimum the node accepts.
        base_fee: u128,
    },
    /// The signature does not recover (bad recovery id, r or s out of
    /// range, high s).
    #[error("invalid sender")]
    InvalidSender,
    /// The same transaction hash is already in the pool.
    #[error("already known")]
    AlreadyKnown,
    /// A same-sender, same-nonce transaction without geth's fee bump
    /// (`mempool.price_bump_percent` on both fee cap and tip) over the one
    /// it would replace (geth's `ErrReplaceUnderpriced`).
    #[error("replacement transaction underpriced")]
    ReplaceUnderpriced,
    /// The sender's code is an EIP-7702 delegation and it already has a
    /// transaction in flight (geth 1.15+'s `ErrInflightTxLimitReached`):
    /// the delegated code can spend the balance during any block, so the
    /// in-flight costs counted against it prove nothing, and a delegated
    /// sender could fill blocks with transactions execution then skips.
    #[error("in-flight transaction limit reached for delegated accounts")]
    InflightTxLimitReached,
    /// A delegated sender's transaction with a nonce gap (geth's
    /// `ErrOutOfOrderTxFromDelegated`): it is not held, for the same reason.
    #[error("gapped-nonce tx from delegated accounts")]
    OutOfOrderTxFromDelegated,
    /// The pool is full and the transaction pays less than the cheapest
    /// one it could evict (geth's `ErrUnderpriced`).
    #[error("transaction underpriced")]
    Underpriced,
    /// The global transaction-count or byte limit of the pool is reached,
    /// and nothing cheaper than the transaction can make room (geth's
    /// `ErrTxPoolOverflow`).
    #[error("txpool is full")]
    TxPoolFull,
    /// The nonce was already used or reserved.
    #[error("nonce too low: next nonce {next}, tx nonce {tx}")]
    NonceTooLow {
        /// The sender's next reservable nonce.
        next: u64,
        /// The transaction's nonce.
        tx: u64,
    },
    /// The nonce leaves a gap: sluice admits gapless nonces only.
    #[error("nonce too high: next nonce {next}, tx nonce {tx}")]
    NonceTooHigh {
        /// The sender's next reservable nonce.
        next: u64,
        /// The transaction's nonce.
        tx: u64,
    },
    /// The sender already has the maximum number of admitted, not yet
    /// executed transactions (geth's `ErrAccountLimitExceeded`).
    #[error("account limit exceeded: {in_flight} transactions in flight, limit {limit}")]
    SenderLimit {
        /// Transactions of this sender admitted and not yet executed.
        in_flight: u32,
        /// The per-sender limit.
        limit: u32,
    },
    /// The balance does not cover `gas_limit * max_fee + value`.
    #[error(
        "insufficient funds for gas * price + value: balance {balance}, tx cost {cost}, overshot {overshot}"
    )]
    InsufficientFunds {
        /// The sender's committed balance.
        balance: U256,
        /// The transaction's maximum cost.
        cost: U256,
        /// `cost - balance`.
        overshot: U256,
    },
    /// The balance covers this transaction's maximum cost but not on top
    /// of the maximum costs of the sender's in-flight transactions (geth's
    /// overdraft rule, `ValidateTransactionWithState`): admitting it would
    /// let a sender take block space that execution then skips unpaid.
    /// The overshot (`queued + cost - balance`) is computed for the message
    /// only, so the error stays within clippy's size bound.
    #[error(
        "insufficient funds for gas * price + value: balance {balance}, queued cost {queued}, tx cost {cost}, overshot {}",
        overshot(.balance, .queued, .cost)
    )]
    Overdraft {
        /// The sender's committed balance.
        balance: U256,
        /// Maximum costs of the sender's in-flight transactions that the
        /// balance does not reflect yet.
        queued: U256,
        /// This transaction's maximum cost.
        cost: U256,
    },
    /// EIP-3607: the sender has code (and it is not an EIP-7702
    /// delegation), so it cannot originate transactions.
    #[error("sender not an eoa: address {0}")]
    SenderNotEoa(Address),
    /// The node cannot take transactions right now (shutting down, or a
    /// pipeline stage stopped). Nothing was admitted.
    #[error("transaction admission unavailable: {0}")]
    Unavailable(&'static str),
    /// The store halted (why: a failed commit, damage, a wrong state):
    /// nothing admitted now could be committed.
    #[error("transaction admission unavailable: store halted: {0}; writes stopped")]
    StoreHalted(Halt),
    /// The transaction was accepted but could not be written to the
    /// pending-transaction journal (the cause), so the node cannot promise
    /// it survives a crash: not answered with its hash. It may still be
    /// included.
    #[error("transaction journal: {0}")]
    Journal(String),
}

/// What an overdraft lacks: `queued + cost - balance` (saturating; an
/// overdraft has `queued + cost > balance`).
fn overshot(balance: &U256, queued: &U256, cost: &U256) -> U256 {
    queued.saturating_add(*cost).saturating_sub(*balance)
}

impl TxError {
    /// The JSON-RPC error code to answer with.
    ///
    /// Geth answers -32000 for every refused transaction, including
    /// undecodable ones ("rlp: ..."), and clients only look at the message;
    /// reth's -32003 ("transaction rejected") is kept for a full pool so load
    /// generators can tell backpressure from bad input.
    pub fn rpc_code(&self) -> i64 {
        match self {
            TxError::TxPoolFull => -32003,
            TxError::Unavailable(_) | TxError::StoreHalted(_) | TxError::Journal(_) => -32603,
            _ => -32000,
        }
    }

    /// A short label for the admission-outcome metric.
    pub fn outcome(&self) -> &'static str {
        match self {
            TxError::Oversized { .. } | TxError::MaxInitCodeSize { .. } => "oversized",
            TxError::TypedTxTooShort
            | TxError::Rlp(_)
            | TxError::TrailingBytes
            | TxError::EmptyAuthList
            | TxError::NonceMax => "invalid",
            TxError::TypeNotSupported => "type_not_supported",
            TxError::Unprotected => "unprotected",
            TxError::InvalidChainId { .. } => "chain_id",
            TxError::GasLimit | TxError::GasLimitTooHigh { .. } => "gas_limit",
            TxError::IntrinsicGas { .. } | TxError::FloorDataGas { .. } => "intrinsic_gas",
            TxError::TipAboveFeeCap => "tip_above_cap",
            TxError::FeeCapTooLow { .. } | TxError::ReplaceUnderpriced | TxError::Underpriced => {
                "underpriced"
            }
            TxError::InvalidSender => "invalid_sender",
            TxError::AlreadyKnown => "already_known",
            TxError::TxPoolFull => "txpool_full",
            TxError::NonceTooLow { .. } => "nonce_too_low",
            TxError::NonceTooHigh { .. } => "nonce_gap",
            TxError::SenderLimit { .. } => "sender_limit",
            TxError::InflightTxLimitReached | TxError::OutOfOrderTxFromDelegated => "delegated_limit",
            TxError::InsufficientFunds { .. } | TxError::Overdraft { .. } => "insufficient_funds",
            TxError::SenderNotEoa(_) => "sender_not_eoa",
            TxError::Unavailable(_) | TxError::StoreHalted(_) => "unavailable",
            TxError::Journal(_) => "journal",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_use_geth_wording() {
        let cases: [(TxError, &str); 14] = [
            (TxError::Underpriced, "transaction underpriced"),
            (
                TxError::GasLimitTooHigh { cap: 16_777_216, gas: 16_777_217 },
                "transaction gas limit too high (cap: 16777216, tx: 16777217)",
            ),
            (TxError::InflightTxLimitReached, "in-flight transaction limit reached for delegated accounts"),
            (TxError::OutOfOrderTxFromDelegated, "gapped-nonce tx from delegated accounts"),
            (TxError::ReplaceUnderpriced, "replacement transaction underpriced"),
            (TxError::NonceTooLow { next: 5, tx: 3 }, "nonce too low: next nonce 5, tx nonce 3"),
            (TxError::NonceTooHigh { next: 5, tx: 7 }, "nonce too high: next nonce 5, tx nonce 7"),
            (TxError::TxPoolFull, "txpool is full"),
            (TxError::AlreadyKnown, "already known"),
            (TxError::TrailingBytes, "rlp: input contains more than one value"),
            (TxError::InvalidChainId { have: 1, want: 2 }, "invalid chain id for signer: have 1 want 2"),
            (
                TxError::InsufficientFunds {
                    balance: U256::from(1),
                    cost: U256::from(3),
                    overshot: U256::from(2),
                },
                "insufficient funds for gas * price + value: balance 1, tx cost 3, overshot 2",
            ),
            (
                TxError::Overdraft {
                    balance: U256::from(5),
                    queued: U256::from(4),
                    cost: U256::from(3),
                },
                "insufficient funds for gas * price + value: balance 5, queued cost 4, tx cost 3, overshot 2",
            ),
            (
                TxError::FeeCapTooLow { sender: Address::ZERO, max_fee_per_gas: 1, base_fee: 7 },
                "max fee per gas less than block base fee: address 0x0000000000000000000000000000000000000000, maxFeePerGas: 1, baseFee: 7",
            ),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), text);
        }
    }

    #[test]
    fn only_a_full_pool_uses_the_rejected_code() {
        assert_eq!(TxError::TxPoolFull.rpc_code(), -32003);
        assert_eq!(TxError::TxPoolFull.outcome(), "txpool_full");
        let journal = TxError::Journal("No space left on device".into());
        assert_eq!(
            (journal.rpc_code(), journal.to_string()),
            (-32603, "transaction journal: No space left on device".into())
        );
        assert_eq!(TxError::TrailingBytes.rpc_code(), -32000);
        assert_eq!(TxError::InvalidSender.rpc_code(), -32000);
        let overdraft = TxError::Overdraft { balance: U256::ZERO, queued: U256::ZERO, cost: U256::from(1) };
        assert_eq!((overdraft.rpc_code(), overdraft.outcome()), (-32000, "insufficient_funds"));
    }
}
