//! The crate's one error type.
//!
//! Block execution only fails for reasons outside the block (the state could
//! not be read): a transaction that cannot be applied is skipped, never an
//! error. `eth_call` and `eth_estimateGas` additionally report why a call
//! could not run, in geth's wording so that RPC clients recognise them.

use alloy_primitives::Bytes;
use sluice_state::StoreError;

use crate::trace_limits::TraceOptionError;

/// Why execution, a call or a gas estimate failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Reading state failed; the block or call cannot be executed.
    #[error("state read failed: {0}")]
    Store(#[from] StoreError),
    /// A call request that cannot be executed at all (bad fee fields,
    /// insufficient funds when a gas price is given, gas below intrinsic...).
    #[error("{0}")]
    InvalidCall(String),
    /// Estimation: the call reverts even with the maximum gas allowance.
    #[error("{}", revert_message(output))]
    Reverted {
        /// The revert data.
        output: Bytes,
    },
    /// Estimation: the call runs out of gas even with the maximum allowance.
    #[error("gas required exceeds allowance ({0})")]
    GasExceedsAllowance(u64),
    /// Estimation: the call halts for a reason other than gas (invalid
    /// opcode, stack overflow...) even with the maximum allowance.
    #[error("{0}")]
    Halted(String),
    /// Tracing: the call passed its deadline or output bound
    /// (`trace_limits`); the message is geth's or names the limit.
    #[error("{0}")]
    TraceStopped(String),
    /// A trace option geth refuses; the message is geth's.
    #[error(transparent)]
    TraceOption(#[from] TraceOptionError),
    /// A call, estimate or access list passed its deadline; the message is
    /// geth's (`execution aborted (timeout = 5s)`).
    #[error("{0}")]
    Aborted(String),
}

/// Selector of Solidity's `Error(string)`.
const ERROR_SELECTOR: [u8; 4] = [0x08, 0xc3, 0x79, 0xa0];

/// Decodes the message of a Solidity `Error(string)` revert, if `output` is
/// one. Never panics on malformed data: it returns `None` instead.
pub fn revert_reason(output: &[u8]) -> Option<String> {
    let body = output.strip_prefix(&ERROR_SELECTOR)?;
    let word = |at: usize| -> Option<usize> {
        let w = body.get(at..at.checked_add(32)?)?;
        // Offsets and lengths beyond usize are malformed for our purposes.
        if w[..24].iter().any(|b| *b != 0) {
            return None;
        }
        usize::try_from(u64::from_be_bytes(w[24..].try_into().ok()?)).ok()
    };
    let offset = word(0)?;
    let len = word(offset)?;
    let start = offset.checked_add(32)?;
    let bytes = body.get(start..start.checked_add(len)?)?;
    String::from_utf8(bytes.to_vec()).ok()
}

/// geth's message for a revert: "execution reverted", with the decoded
/// reason when there is one.
pub fn revert_message(output: &[u8]) -> String {
    match revert_reason(output) {
        Some(reason) => format!("execution reverted: {reason}"),
        None => "execution reverted".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_error_string_and_tolerates_garbage() {
        let mut data = ERROR_SELECTOR.to_vec();
        let mut word = [0u8; 32];
        word[31] = 0x20;
        data.extend_from_slice(&word);
        word[31] = 3;
        data.extend_from_slice(&word);
        let mut text = [0u8; 32];
        text[..3].copy_from_slice(b"bad");
        data.extend_from_slice(&text);
        assert_eq!(revert_reason(&data).as_deref(), Some("bad"));
        assert_eq!(revert_message(&data), "execution reverted: bad");
        assert_eq!(revert_reason(&data[..40]), None);
        assert_eq!(revert_reason(&[0xff; 100]), None);
        let mut huge = ERROR_SELECTOR.to_vec();
        huge.extend_from_slice(&[0xff; 64]);
        assert_eq!(revert_reason(&huge), None);
        assert_eq!(revert_message(b""), "execution reverted");
    }
}
