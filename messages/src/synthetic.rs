//! Synthetic accounts: many funded accounts at genesis with addresses
//! anyone can compute, so a benchmark can fill state to millions of
//! accounts without a genesis file of that size, and a load generator can
//! send to random existing accounts among them.

use alloy_primitives::Address;

/// The address of synthetic account `index` (0-based): the last 20 bytes
/// of keccak256("sluice/synthetic/" ++ index as 8 big-endian bytes).
pub fn synthetic_address(index: u64) -> Address {
    let mut buf = [0u8; 25];
    buf[..17].copy_from_slice(b"sluice/synthetic/");
    buf[17..].copy_from_slice(&index.to_be_bytes());
    Address::from_slice(&crate::keccak256(&buf)[12..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_distinct_and_stable() {
        let a: std::collections::HashSet<Address> = (0..10_000).map(synthetic_address).collect();
        assert_eq!(a.len(), 10_000);
        assert_eq!(synthetic_address(0), synthetic_address(0));
    }
}
