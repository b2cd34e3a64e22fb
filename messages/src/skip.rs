//! Why a block's transaction was not applied at its position.
//!
//! The executor refuses a transaction before it changes any state (revm's
//! validation, the block's remaining gas, an undecodable payload) and lists
//! it in the block's results instead of failing the block. The reason is
//! kept as data, so that callers can tell a nonce gap from missing funds
//! without parsing text; its [`Display`](fmt::Display) prints the text the
//! node has always logged (revm's wording, prefixed as revm prefixes it), so
//! logs and anything matching on them read the same.

use std::fmt;

use alloy_primitives::U256;

/// revm's prefix for a transaction validation error: kept in the text so
/// that a skip reads exactly as revm's error did before it became data.
const VALIDATION: &str = "transaction validation error";

/// Why a transaction was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The transaction's nonce is below the sender's: an earlier
    /// transaction already took it.
    NonceTooLow {
        /// The transaction's nonce.
        tx: u64,
        /// The sender's nonce in state.
        state: u64,
    },
    /// The transaction's nonce is above the sender's: a gap, typically after
    /// an earlier transaction of the sender was skipped.
    NonceTooHigh {
        /// The transaction's nonce.
        tx: u64,
        /// The sender's nonce in state.
        state: u64,
    },
    /// The sender cannot pay the maximum fee plus the value.
    InsufficientFunds {
        /// What the transaction may cost at most (gas limit times fee cap,
        /// plus value).
        fee: U256,
        /// The sender's balance.
        balance: U256,
    },
    /// The transaction's gas limit exceeds what is left of the block's.
    BlockGasReached {
        /// The transaction's gas limit.
        gas_limit: u64,
        /// The block's gas not used by the transactions before it.
        remaining: u64,
    },
    /// The gas limit does not cover the transaction's intrinsic cost.
    IntrinsicGasTooLow {
        /// The intrinsic cost.
        intrinsic: u64,
        /// The transaction's gas limit.
        gas_limit: u64,
    },
    /// The fee cap (or legacy gas price) is below the block's base fee.
    FeeCapBelowBaseFee,
    /// The gas limit is above the fork's per-transaction cap (EIP-7825).
    GasLimitAboveCap {
        /// The transaction's gas limit.
        gas_limit: u64,
        /// The cap.
        cap: u64,
    },
    /// Another of revm's transaction validation rules refused it; the text
    /// is revm's description of the rule.
    Refused(String),
    /// Anything else (undecodable or duplicate at preparation, an
    /// unsupported type, a header rule); the text is printed as it is.
    Other(String),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NonceTooLow { tx, state } => {
                write!(f, "{VALIDATION}: nonce {tx} too low, expected {state}")
            }
            SkipReason::NonceTooHigh { tx, state } => {
                write!(f, "{VALIDATION}: nonce {tx} too high, expected {state}")
            }
            SkipReason::InsufficientFunds { fee, balance } => {
                write!(f, "{VALIDATION}: lack of funds ({balance}) for max fee ({fee})")
            }
            SkipReason::BlockGasReached { gas_limit, remaining } => {
                write!(f, "gas limit {gas_limit} exceeds remaining block gas {remaining}")
            }
            SkipReason::IntrinsicGasTooLow { intrinsic, gas_limit } => {
                write!(f, "{VALIDATION}: call gas cost ({intrinsic}) exceeds the gas limit ({gas_limit})")
            }
            SkipReason::FeeCapBelowBaseFee => write!(f, "{VALIDATION}: gas price is less than basefee"),
            SkipReason::GasLimitAboveCap { gas_limit, cap } => {
                write!(f, "{VALIDATION}: transaction gas limit ({gas_limit}) is greater than the cap ({cap})")
            }
            SkipReason::Refused(rule) => write!(f, "{VALIDATION}: {rule}"),
            SkipReason::Other(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the ones revm's errors printed before skips became
    /// data (copied from revm 43's `Display` impls): logs must not change.
    #[test]
    fn prints_the_text_logged_before() {
        let cases = [
            (SkipReason::NonceTooLow { tx: 1, state: 2 }, "transaction validation error: nonce 1 too low, expected 2"),
            (SkipReason::NonceTooHigh { tx: 2, state: 1 }, "transaction validation error: nonce 2 too high, expected 1"),
            (
                SkipReason::InsufficientFunds { fee: U256::from(21_000), balance: U256::from(5) },
                "transaction validation error: lack of funds (5) for max fee (21000)",
            ),
            (
                SkipReason::BlockGasReached { gas_limit: 30_000, remaining: 29_000 },
                "gas limit 30000 exceeds remaining block gas 29000",
            ),
            (
                SkipReason::IntrinsicGasTooLow { intrinsic: 21_000, gas_limit: 20_000 },
                "transaction validation error: call gas cost (21000) exceeds the gas limit (20000)",
            ),
            (SkipReason::FeeCapBelowBaseFee, "transaction validation error: gas price is less than basefee"),
            (
                SkipReason::GasLimitAboveCap { gas_limit: 1 << 25, cap: 1 << 24 },
                "transaction validation error: transaction gas limit (33554432) is greater than the cap (16777216)",
            ),
            (SkipReason::Refused("invalid chain ID".into()), "transaction validation error: invalid chain ID"),
            (SkipReason::Other("undecodable".into()), "undecodable"),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text);
        }
    }
}
