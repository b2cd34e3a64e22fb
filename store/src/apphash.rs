//! The chained app hash.
//!
//! `app_hash(N) = blake3(app_hash(N-1), N, block_hash(N), gas_used(N),
//! balances, nonces, code, deletions, storage clears, storage)`, each section
//! tagged and in the change set's canonical order (accounts by address, slots
//! by key). It is hashed straight from the change structures, never from a
//! re-encoding, so it costs one pass over the changes.

use alloy_primitives::{B256, U256};
use sluice_messages::ChangeSet;

/// Computes the app hash of a block from its predecessor's.
pub fn app_hash(prev: &B256, height: u64, block_hash: &B256, gas_used: u64, changes: &ChangeSet) -> B256 {
    let mut h = blake3::Hasher::new();
    h.update(b"sluice/app-hash/v1");
    h.update(prev.as_slice());
    h.update(&height.to_be_bytes());
    h.update(block_hash.as_slice());
    h.update(&gas_used.to_be_bytes());
    h.update(b"B");
    for a in &changes.accounts {
        h.update(a.address.as_slice());
        h.update(&a.balance.to_be_bytes::<32>());
    }
    h.update(b"N");
    for a in &changes.accounts {
        h.update(a.address.as_slice());
        h.update(&a.nonce.to_be_bytes());
    }
    h.update(b"C");
    for a in changes.accounts.iter() {
        if let Some(code) = &a.code {
            h.update(a.address.as_slice());
            h.update(code.hash.as_slice());
        }
    }
    h.update(b"D");
    for a in changes.accounts.iter().filter(|a| a.deleted) {
        h.update(a.address.as_slice());
    }
    h.update(b"X");
    for a in changes.accounts.iter().filter(|a| a.storage_cleared) {
        h.update(a.address.as_slice());
    }
    h.update(b"S");
    for a in &changes.accounts {
        for (k, v) in &a.storage {
            h.update(a.address.as_slice());
            h.update(&k.to_be_bytes::<32>());
            h.update(&v.to_be_bytes::<32>());
        }
    }
    B256::from(*h.finalize().as_bytes())
}

/// Genesis's app hash with its synthetic accounts folded in (unchanged when
/// there are none): they are never listed in a change set, but they are
/// state, so two chains that differ in them differ in app hash.
pub fn fold_synthetic(app: B256, synthetic: &crate::Synthetic) -> B256 {
    if synthetic.count == 0 {
        return app;
    }
    let mut h = blake3::Hasher::new();
    h.update(b"sluice/app-hash/synthetic/v1");
    h.update(app.as_slice());
    h.update(&synthetic.count.to_be_bytes());
    h.update(&synthetic.balance.to_be_bytes::<32>());
    B256::from(*h.finalize().as_bytes())
}

/// Total order used for storage keys in change sets (numeric).
pub fn slot_order(a: &U256, b: &U256) -> std::cmp::Ordering {
    a.cmp(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::Address;
    use sluice_messages::AccountChange;

    fn change(balance: u64) -> ChangeSet {
        ChangeSet {
            accounts: vec![AccountChange {
                address: Address::repeat_byte(1),
                deleted: false,
                balance: U256::from(balance),
                nonce: 0,
                code: None,
                storage_cleared: false,
                storage: vec![],
            }],
        }
    }

    #[test]
    fn every_input_changes_the_hash() {
        let base = app_hash(&B256::ZERO, 1, &B256::ZERO, 0, &change(1));
        assert_ne!(base, app_hash(&B256::repeat_byte(1), 1, &B256::ZERO, 0, &change(1)));
        assert_ne!(base, app_hash(&B256::ZERO, 2, &B256::ZERO, 0, &change(1)));
        assert_ne!(base, app_hash(&B256::ZERO, 1, &B256::repeat_byte(1), 0, &change(1)));
        assert_ne!(base, app_hash(&B256::ZERO, 1, &B256::ZERO, 1, &change(1)));
        assert_ne!(base, app_hash(&B256::ZERO, 1, &B256::ZERO, 0, &change(2)));
        assert_eq!(base, app_hash(&B256::ZERO, 1, &B256::ZERO, 0, &change(1)));
    }
}
