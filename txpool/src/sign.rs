//! Signing with libsecp256k1, for dev accounts, tests and the load
//! generator. The node itself never signs.

use alloy_consensus::{SignableTransaction, TxEnvelope, TypedTransaction};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Address, Bytes, Signature, B256, U256};
use secp256k1::{Message, PublicKey, SecretKey, SECP256K1};

/// A private key with its address.
#[derive(Clone)]
pub struct Signer {
    key: SecretKey,
    address: Address,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Signer").field("address", &self.address).finish()
    }
}

/// The Ethereum address of a public key: the last 20 bytes of the keccak of
/// its uncompressed form without the 0x04 prefix.
pub fn address_of(public: &PublicKey) -> Address {
    let uncompressed = public.serialize_uncompressed();
    Address::from_slice(&sluice_messages::keccak256(&uncompressed[1..])[12..])
}

impl Signer {
    /// A signer from a 32-byte secret; `None` if it is not a valid key.
    pub fn from_bytes(secret: &B256) -> Option<Self> {
        let key = SecretKey::from_byte_array(secret.0).ok()?;
        let address = address_of(&PublicKey::from_secret_key(SECP256K1, &key));
        Some(Signer { key, address })
    }

    /// The signer's address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// The secret key bytes (for writing genesis files and key lists).
    pub fn secret(&self) -> B256 {
        B256::from(self.key.secret_bytes())
    }

    /// Signs a 32-byte digest, returning an Ethereum signature (low s, as
    /// libsecp256k1 always produces).
    pub fn sign_hash(&self, hash: &B256) -> Signature {
        let sig = SECP256K1.sign_ecdsa_recoverable(Message::from_digest(hash.0), &self.key);
        let (id, compact) = sig.serialize_compact();
        let r = U256::from_be_slice(&compact[..32]);
        let s = U256::from_be_slice(&compact[32..]);
        Signature::new(r, s, i32::from(id) == 1)
    }

    /// Signs a transaction and returns its envelope.
    pub fn sign_tx(&self, tx: TypedTransaction) -> TxEnvelope {
        let signature = self.sign_hash(&tx.signature_hash());
        TxEnvelope::new_unhashed(tx, signature)
    }

    /// Signs a transaction and returns its raw EIP-2718 bytes.
    pub fn sign_raw(&self, tx: TypedTransaction) -> Bytes {
        Bytes::from(self.sign_tx(tx).encoded_2718())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardhat_account_zero_has_its_well_known_address() {
        let key: B256 = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80".parse().unwrap();
        let signer = Signer::from_bytes(&key).unwrap();
        assert_eq!(
            signer.address(),
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266".parse::<Address>().unwrap()
        );
    }
}
