//! EIP-7934 (Osaka): a block's RLP encoding may not exceed
//! [`MAX_RLP_BLOCK_SIZE`]. Neither revm nor alloy carries the constant, so
//! it is geth's (`params.MaxRLPBlockSize`).
//!
//! sluice stores and gossips blocks in its own format, so the size is the
//! one the block would have as an Ethereum block: its transactions as the
//! body encodes them, plus [`BLOCK_RLP_OVERHEAD`] for the header and the
//! lists, a bound rather than the exact count (a header's RLP varies by a
//! few bytes with its numbers). The producer packs within it and
//! validators refuse a proposal past it, both with [`block_rlp_size`], so
//! an honest proposal always passes.

/// geth's `MaxBlockSize - BlockSizeSafetyMargin`: 10 MiB less 2 MiB for
/// the consensus layer's wrapping.
pub const MAX_RLP_BLOCK_SIZE: usize = 8_388_608;

/// A bound on everything in a block's RLP but its transactions: the header
/// (at most ~770 bytes with every field through Prague and 32 bytes of
/// extra data), the outer list, the transaction list's header, the empty
/// uncle and withdrawal lists.
pub const BLOCK_RLP_OVERHEAD: usize = 1024;

/// The length of a transaction's encoding in a block body, given its
/// EIP-2718 bytes: a legacy transaction is its own RLP list; a typed one is
/// an RLP string around its bytes (EIP-2718).
pub fn tx_rlp_len(raw: &[u8]) -> usize {
    match raw.first() {
        Some(&first) if first >= 0xc0 => raw.len(),
        _ => string_header_len(raw.len()) + raw.len(),
    }
}

/// A block's RLP size as EIP-7934 counts it, given its transactions'
/// EIP-2718 bytes: [`BLOCK_RLP_OVERHEAD`] plus [`tx_rlp_len`] of each.
pub fn block_rlp_size<'a>(txs: impl IntoIterator<Item = &'a [u8]>) -> usize {
    txs.into_iter().fold(BLOCK_RLP_OVERHEAD, |size, raw| size.saturating_add(tx_rlp_len(raw)))
}

/// The length of an RLP string header for `len` bytes (counting a single
/// byte below 0x80, which RLP writes bare, as one more: a bound).
fn string_header_len(len: usize) -> usize {
    if len < 56 {
        1
    } else {
        1 + (usize::BITS - len.leading_zeros()).div_ceil(8) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_transactions_count_their_string_header_and_legacy_ones_do_not() {
        assert_eq!(tx_rlp_len(&[0xf8; 100]), 100);
        assert_eq!(tx_rlp_len(&[0x02; 55]), 56);
        assert_eq!(tx_rlp_len(&[0x02; 56]), 58);
        assert_eq!(tx_rlp_len(&[0x02; 256]), 259);
        assert_eq!(tx_rlp_len(&vec![0x02; 70_000]), 70_004);
        let txs: [&[u8]; 2] = [&[0xf8; 100], &[0x02; 56]];
        assert_eq!(block_rlp_size(txs), BLOCK_RLP_OVERHEAD + 158);
        assert_eq!(MAX_RLP_BLOCK_SIZE, 10_485_760 - 2_097_152);
    }
}
