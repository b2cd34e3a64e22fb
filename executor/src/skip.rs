//! revm's refusals turned into [`SkipReason`]s.
//!
//! sluice-messages cannot depend on revm (it is plain data every crate
//! shares), so the conversion lives here, next to the executors that meet
//! the errors; it is a function rather than a `From` impl because neither
//! type is this crate's.

use std::fmt::Display;

use revm::context_interface::result::{EVMError, InvalidTransaction};
use sluice_messages::SkipReason;

/// Why revm refused a transaction before executing it, as data. The
/// reasons a block's transactions commonly meet get their own variant; any
/// other keeps revm's text, so that [`SkipReason`]'s `Display` prints what
/// `e.to_string()` printed.
pub(crate) fn refusal<D: Display>(e: EVMError<D, InvalidTransaction>) -> SkipReason {
    let invalid = match e {
        EVMError::Transaction(invalid) => invalid,
        // Not a transaction rule (a header rule, a custom or database
        // error): nothing to classify, the text is kept whole.
        other => return SkipReason::Other(other.to_string()),
    };
    match invalid {
        InvalidTransaction::NonceTooLow { tx, state } => SkipReason::NonceTooLow { tx, state },
        InvalidTransaction::NonceTooHigh { tx, state } => SkipReason::NonceTooHigh { tx, state },
        InvalidTransaction::LackOfFundForMaxFee { fee, balance } => {
            SkipReason::InsufficientFunds { fee: *fee, balance: *balance }
        }
        InvalidTransaction::CallGasCostMoreThanGasLimit { initial_gas, gas_limit } => {
            SkipReason::IntrinsicGasTooLow { intrinsic: initial_gas, gas_limit }
        }
        InvalidTransaction::GasPriceLessThanBasefee => SkipReason::FeeCapBelowBaseFee,
        InvalidTransaction::TxGasLimitGreaterThanCap { gas_limit, cap } => {
            SkipReason::GasLimitAboveCap { gas_limit, cap }
        }
        other => SkipReason::Refused(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::U256;

    use super::*;

    /// Each classified refusal prints exactly what revm's error printed, so
    /// the skip's text did not change when it became data.
    #[test]
    fn prints_what_revm_printed() {
        let cases = [
            InvalidTransaction::NonceTooLow { tx: 1, state: 2 },
            InvalidTransaction::NonceTooHigh { tx: 3, state: 1 },
            InvalidTransaction::LackOfFundForMaxFee {
                fee: Box::new(U256::from(21_000)),
                balance: Box::new(U256::from(7)),
            },
            InvalidTransaction::CallGasCostMoreThanGasLimit { initial_gas: 21_000, gas_limit: 20_000 },
            InvalidTransaction::GasPriceLessThanBasefee,
            InvalidTransaction::TxGasLimitGreaterThanCap { gas_limit: 1 << 25, cap: 1 << 24 },
            InvalidTransaction::InvalidChainId,
            InvalidTransaction::RejectCallerWithCode,
        ];
        for invalid in cases {
            let e = EVMError::<String, _>::Transaction(invalid);
            let text = e.to_string();
            let reason = refusal(e);
            assert!(!matches!(reason, SkipReason::Other(_)), "{reason:?}");
            assert_eq!(reason.to_string(), text);
        }
        let header = EVMError::<String, InvalidTransaction>::Header(
            revm::context_interface::result::InvalidHeader::PrevrandaoNotSet,
        );
        let text = header.to_string();
        assert_eq!(refusal(header), SkipReason::Other(text));
    }
}
