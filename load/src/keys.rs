//! Sender keys: deterministic ones from a seed (for `sluice load genesis`
//! and runs against a node started from that genesis), or the mnemonic
//! accounts anvil and the dev node fund themselves.

use alloy_primitives::B256;
use sluice_messages::keccak256;
use sluice_txpool::Signer;

use crate::LoadError;

/// The mnemonic anvil, hardhat and sluice's dev node fund by default.
pub const TEST_MNEMONIC: &str = "test test test test test test test test test test test junk";

/// Domain separation, so seeded keys never collide with keys another tool
/// derives from the same small integers.
const KEY_DOMAIN: &[u8] = b"sluice-load/key";

/// The `index`-th key of `seed`: keccak(domain, seed, index, attempt), the
/// first attempt that is a valid secp256k1 secret (all but ~2^-128 are).
pub fn seeded_key(seed: u64, index: u64) -> Signer {
    let mut attempt: u64 = 0;
    loop {
        let mut buf = Vec::with_capacity(KEY_DOMAIN.len() + 24);
        buf.extend_from_slice(KEY_DOMAIN);
        buf.extend_from_slice(&seed.to_be_bytes());
        buf.extend_from_slice(&index.to_be_bytes());
        buf.extend_from_slice(&attempt.to_be_bytes());
        if let Some(signer) = Signer::from_bytes(&keccak256(&buf)) {
            return signer;
        }
        attempt += 1;
    }
}

/// `count` seeded keys, derived on all cores (each costs one public-key
/// computation, ~30 us).
pub fn seeded_keys(seed: u64, count: usize) -> Vec<Signer> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).max(1);
    let chunk = count.div_ceil(threads).max(1);
    let indices: Vec<u64> = (0..count as u64).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = indices
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(|&i| seeded_key(seed, i)).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

/// The first `count` accounts of the test mnemonic (anvil's `--accounts`,
/// sluice's `--dev-accounts`).
pub fn mnemonic_keys(count: u32) -> Result<Vec<Signer>, LoadError> {
    Ok(sluice_txpool::dev_accounts::derive(TEST_MNEMONIC, count)?)
}

/// A fresh recipient address for transfer `index` of a run: distinct per
/// transaction, owned by nobody, so every transfer creates an account.
pub fn recipient(seed: u64, index: u64) -> alloy_primitives::Address {
    let mut buf = [0u8; 24];
    buf[..8].copy_from_slice(&seed.to_be_bytes());
    buf[8..16].copy_from_slice(&index.to_be_bytes());
    buf[16..].copy_from_slice(b"recipien");
    let h: B256 = keccak256(&buf);
    alloy_primitives::Address::from_slice(&h[12..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_keys_are_deterministic_and_distinct() {
        let a = seeded_keys(7, 5);
        let b = seeded_keys(7, 5);
        assert_eq!(a.len(), 5);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.address(), y.address());
        }
        assert_ne!(a[0].address(), a[1].address());
        assert_ne!(seeded_key(8, 0).address(), a[0].address());
        assert_eq!(seeded_key(7, 3).address(), a[3].address());
    }
}
