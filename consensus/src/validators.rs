//! The validator set file (`validators.toml`), identical on every
//! validator, and each validator's key file.
//!
//! The file holds everything consensus-critical: chain id, genesis hash,
//! the shared block rules and the validators (public key and address).
//! Its hash is checked at the p2p handshake: it is part of the namespace
//! every connection and every vote is signed under, so validators whose
//! files differ in anything cannot talk, and say so in their logs.

use std::{net::SocketAddr, path::Path};

use alloy_primitives::B256;
use commonware_codec::{DecodeExt as _, Encode as _};
use commonware_cryptography::{
    ed25519::{PrivateKey, PublicKey},
    Signer as _,
};
use commonware_utils::ordered::Set;
use serde::{Deserialize, Serialize};

use crate::rules::Rules;

/// One validator of the set (or one follower of `followers.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorEntry {
    /// A name for logs and tools (`v0`, ...).
    pub name: String,
    /// Its ed25519 public key, 32 bytes hex.
    pub public_key: String,
    /// Where it listens for other validators.
    pub p2p_addr: SocketAddr,
    /// Where it serves JSON-RPC (informational: load tools and tests).
    pub rpc_addr: SocketAddr,
}

/// The shared validator set file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatorSet {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// Hash of block 0: a node whose genesis differs refuses to start.
    pub genesis_hash: B256,
    /// The app hash after block 0, which (unlike the block hash) covers
    /// the genesis allocation.
    pub genesis_app_hash: B256,
    /// The shared block rules.
    pub rules: Rules,
    /// The validators, in the order `testnet init` wrote them.
    pub validator: Vec<ValidatorEntry>,
}

/// Why a validator set or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid validator set.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

fn invalid(path: &Path, reason: impl Into<String>) -> SetError {
    SetError::Invalid { path: path.display().to_string(), reason: reason.into() }
}

fn io(path: &Path, source: std::io::Error) -> SetError {
    SetError::Io { path: path.display().to_string(), source }
}

/// Parses a 32-byte ed25519 public key from hex.
pub fn parse_public_key(hex_key: &str) -> Result<PublicKey, String> {
    let bytes = hex::decode(hex_key.trim_start_matches("0x")).map_err(|e| format!("not hex: {e}"))?;
    PublicKey::decode(bytes::Bytes::from(bytes)).map_err(|e| format!("not an ed25519 public key: {e}"))
}

/// Hex of a private key's public key: how logs and files name a node.
pub fn public_key_of(key: &PrivateKey) -> String {
    public_key_hex(&key.public_key())
}

/// Hex of a public key, as the file stores it.
pub fn public_key_hex(key: &PublicKey) -> String {
    format!("0x{}", hex::encode(key.encode()))
}

impl ValidatorSet {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> Result<(ValidatorSet, B256), SetError> {
        let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
        let set: ValidatorSet = toml::from_str(&text).map_err(|e| invalid(path, e.to_string()))?;
        set.check().map_err(|reason| invalid(path, reason))?;
        Ok((set, sluice_messages::keccak256(text.as_bytes())))
    }

    /// Writes the file; returns its hash.
    pub fn save(&self, path: &Path) -> Result<B256, SetError> {
        let text = self.to_toml().map_err(|reason| invalid(path, reason))?;
        std::fs::write(path, &text).map_err(|e| io(path, e))?;
        Ok(sluice_messages::keccak256(text.as_bytes()))
    }

    /// The file's text.
    pub fn to_toml(&self) -> Result<String, String> {
        toml::to_string(self).map_err(|e| e.to_string())
    }

    fn check(&self) -> Result<(), String> {
        if self.validator.is_empty() {
            return Err("no [[validator]] entries".into());
        }
        let r = &self.rules;
        if r.block_gas_limit == 0
            || r.max_block_txs == 0
            || r.max_block_bytes == 0
            || r.max_tx_size_bytes == 0
        {
            return Err(
                "rules: block_gas_limit, max_block_txs, max_block_bytes and max_tx_size_bytes must be > 0"
                    .into(),
            );
        }
        let keys = self.public_keys()?;
        if keys.len() != self.validator.len() {
            return Err("a public key appears twice".into());
        }
        let mut addrs: Vec<_> = self.validator.iter().map(|v| v.p2p_addr).collect();
        addrs.sort();
        addrs.dedup();
        if addrs.len() != self.validator.len() {
            return Err("a p2p_addr appears twice".into());
        }
        Ok(())
    }

    /// The validators' keys, as consensus orders them.
    pub fn public_keys(&self) -> Result<Set<PublicKey>, String> {
        let mut keys = Vec::with_capacity(self.validator.len());
        for v in &self.validator {
            keys.push(parse_public_key(&v.public_key).map_err(|e| format!("validator {}: {e}", v.name))?);
        }
        Ok(Set::from_iter_dedup(keys))
    }

    /// The entry whose key is `key`'s.
    pub fn entry_of(&self, key: &PrivateKey) -> Option<&ValidatorEntry> {
        let public = public_key_hex(&key.public_key());
        self.validator.iter().find(|v| v.public_key.eq_ignore_ascii_case(&public))
    }
}

/// The followers validators accept as p2p secondary peers
/// (`followers.toml`): they receive blocks and certificates and send their
/// clients' transactions, never vote. Not part of the validator set's
/// hash, so adding one changes no vote (validators reread it at restart).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowerSet {
    /// The followers (`name`, `public_key`, `p2p_addr`: the address its
    /// connections come from; `rpc_addr`: informational).
    #[serde(default)]
    pub follower: Vec<ValidatorEntry>,
}

impl FollowerSet {
    /// Reads the file and checks it against the validator set: valid keys,
    /// none twice, none a validator's (a follower holding a validator's
    /// key could speak as it).
    pub fn load(path: &Path, validators: &ValidatorSet) -> Result<FollowerSet, SetError> {
        let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
        let set: FollowerSet = toml::from_str(&text).map_err(|e| invalid(path, e.to_string()))?;
        let voters = validators.public_keys().map_err(|reason| invalid(path, reason))?;
        let keys = set.public_keys().map_err(|reason| invalid(path, reason))?;
        if keys.len() != set.follower.len() {
            return Err(invalid(path, "a public key appears twice"));
        }
        if let Some(f) = set.follower.iter().zip(keys.iter()).find(|(_, k)| voters.position(k).is_some()) {
            return Err(invalid(path, format!("follower {} has a validator's key", f.0.name)));
        }
        Ok(set)
    }

    /// Writes the file.
    pub fn save(&self, path: &Path) -> Result<(), SetError> {
        let text = toml::to_string(self).map_err(|e| invalid(path, e.to_string()))?;
        std::fs::write(path, text).map_err(|e| io(path, e))
    }

    /// The followers' keys.
    pub fn public_keys(&self) -> Result<Set<PublicKey>, String> {
        let mut keys = Vec::with_capacity(self.follower.len());
        for f in &self.follower {
            keys.push(parse_public_key(&f.public_key).map_err(|e| format!("follower {}: {e}", f.name))?);
        }
        Ok(Set::from_iter_dedup(keys))
    }
}

/// Reads a key file: the ed25519 private key, 32 bytes hex. A file that
/// its group or others may read or write is refused: whoever can read the
/// key can sign as this validator.
pub fn load_key(path: &Path) -> Result<PrivateKey, SetError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).map_err(|e| io(path, e))?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(invalid(
                path,
                format!(
                    "a validator key must be readable by its owner only, but its mode is {mode:04o}; \
                     run `chmod 600 {}`",
                    path.display()
                ),
            ));
        }
    }
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let bytes = hex::decode(text.trim().trim_start_matches("0x"))
        .map_err(|e| invalid(path, format!("not hex: {e}")))?;
    PrivateKey::decode(bytes::Bytes::from(bytes))
        .map_err(|e| invalid(path, format!("not an ed25519 private key: {e}")))
}

/// Writes a new key file, readable by its owner only from the moment it
/// exists (created with mode 0600, never widened by the umask and narrowed
/// later). An existing file is never overwritten: it may be a validator's
/// identity.
pub fn save_key(path: &Path, key: &PrivateKey) -> Result<(), SetError> {
    use std::io::Write as _;
    let text = format!("0x{}\n", hex::encode(key.encode()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            invalid(
                path,
                "a key file is already there and is never overwritten; remove it, or write elsewhere",
            )
        } else {
            io(path, e)
        }
    })?;
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(|e| io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sluice-key-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[cfg(unix)]
    #[test]
    fn key_files_are_created_owner_only_and_a_shared_one_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch("mode");
        let path = dir.join("validator.key");
        let key = PrivateKey::from_seed(7);
        save_key(&path, &key).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load_key(&path).unwrap().public_key(), key.public_key());

        // Never overwritten.
        let err = save_key(&path, &PrivateKey::from_seed(8)).unwrap_err().to_string();
        assert!(err.contains("never overwritten"), "{err}");
        assert_eq!(load_key(&path).unwrap().public_key(), key.public_key(), "the first key is still there");

        // Readable by others: refused, naming the fix.
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = load_key(&path).unwrap_err().to_string();
            assert!(err.contains(&format!("its mode is {mode:04o}")) && err.contains("chmod 600"), "{err}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(
            load_key(&path).unwrap().public_key(),
            key.public_key(),
            "read-only for its owner is fine"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
