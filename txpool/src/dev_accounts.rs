//! Dev accounts: keys derived from a BIP-39 mnemonic at
//! `m/44'/60'/0'/0/i`, exactly as anvil and hardhat derive them, so the
//! usual test keys work unchanged.
//!
//! The path's parent key is derived once; each account then costs one
//! HMAC-SHA512 and one public-key computation (~30 us), so 10,000 accounts
//! take a fraction of a second. That is why this is not
//! `alloy-signer-local`'s `MnemonicBuilder`: it derives each account from
//! the mnemonic, PBKDF2 (2,048 rounds) and the whole path included, which
//! for the load generator's 10,000+ accounts is tens of seconds. The test
//! below pins the result to anvil's well-known keys.

use crate::Signer;
use alloy_primitives::B256;
use hmac::{Hmac, Mac};
use secp256k1::{PublicKey, Scalar, SecretKey, SECP256K1};
use sha2::Sha512;

type HmacSha512 = Hmac<Sha512>;

/// Why keys could not be derived.
#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    /// A derived key is invalid (probability about 2^-127 per step).
    #[error("invalid key derived at index {0}")]
    InvalidKey(u32),
}

struct ExtendedKey {
    key: SecretKey,
    chain: [u8; 32],
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 64] {
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = match HmacSha512::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    for p in parts {
        mac.update(p);
    }
    let mut out = [0u8; 64];
    out.copy_from_slice(&mac.finalize().into_bytes());
    out
}

fn split(i: [u8; 64], at: u32) -> Result<([u8; 32], [u8; 32]), DeriveError> {
    let mut left = [0u8; 32];
    let mut right = [0u8; 32];
    left.copy_from_slice(&i[..32]);
    right.copy_from_slice(&i[32..]);
    if Scalar::from_be_bytes(left).is_err() {
        return Err(DeriveError::InvalidKey(at));
    }
    Ok((left, right))
}

impl ExtendedKey {
    fn master(seed: &[u8]) -> Result<Self, DeriveError> {
        let (key, chain) = split(hmac(b"Bitcoin seed", &[seed]), 0)?;
        let key = SecretKey::from_byte_array(key).map_err(|_| DeriveError::InvalidKey(0))?;
        Ok(ExtendedKey { key, chain })
    }

    fn child(&self, index: u32) -> Result<Self, DeriveError> {
        let i = if index >= 0x8000_0000 {
            hmac(&self.chain, &[&[0u8], &self.key.secret_bytes(), &index.to_be_bytes()])
        } else {
            let public = PublicKey::from_secret_key(SECP256K1, &self.key).serialize();
            hmac(&self.chain, &[&public, &index.to_be_bytes()])
        };
        let (tweak, chain) = split(i, index)?;
        let tweak = Scalar::from_be_bytes(tweak).map_err(|_| DeriveError::InvalidKey(index))?;
        let key = self.key.add_tweak(&tweak).map_err(|_| DeriveError::InvalidKey(index))?;
        Ok(ExtendedKey { key, chain })
    }
}

/// The first `count` accounts of `mnemonic` (empty passphrase).
pub fn derive(mnemonic: &str, count: u32) -> Result<Vec<Signer>, DeriveError> {
    let mut seed = [0u8; 64];
    pbkdf2::pbkdf2_hmac::<Sha512>(mnemonic.as_bytes(), b"mnemonic", 2048, &mut seed);
    let hardened = 0x8000_0000u32;
    let parent =
        ExtendedKey::master(&seed)?.child(44 | hardened)?.child(60 | hardened)?.child(hardened)?.child(0)?;
    (0..count)
        .map(|i| {
            let child = parent.child(i)?;
            Signer::from_bytes(&B256::from(child.key.secret_bytes())).ok_or(DeriveError::InvalidKey(i))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_mnemonic_gives_the_anvil_accounts() {
        let keys = derive("test test test test test test test test test test test junk", 10).unwrap();
        assert_eq!(keys.len(), 10);
        assert_eq!(format!("{}", keys[0].address()), "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
        assert_eq!(
            keys[0].secret(),
            "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80".parse::<B256>().unwrap()
        );
        assert_eq!(format!("{}", keys[1].address()), "0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
        assert_eq!(format!("{}", keys[9].address()), "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720");
    }
}
