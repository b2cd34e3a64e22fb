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
    /// The file is not TOML of the expected shape.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's complaint (line, column, what was expected).
        source: toml::de::Error,
    },
    /// The file parses but its content is not a usable set.
    #[error("{path}: {source}")]
    Set {
        /// The file.
        path: String,
        /// The rule it breaks.
        source: ValidatorsError,
    },
    /// A key file is unusable (shared permissions, not a key, already
    /// there when writing a new one).
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// Why a public key written in a set file is unusable.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The text is not hex.
    #[error("not hex: {0}")]
    NotHex(#[source] hex::FromHexError),
    /// The bytes are not an ed25519 public key (wrong length, not a point
    /// of the curve).
    #[error("not an ed25519 public key: {0}")]
    NotPublicKey(#[source] commonware_codec::Error),
}

/// Why a validator set (or follower set) is unusable, whatever file it
/// came from: [`SetError::Set`] adds the path.
#[derive(Debug, thiserror::Error)]
pub enum ValidatorsError {
    /// A set without validators could never finalize a block.
    #[error("no [[validator]] entries")]
    NoValidators,
    /// A zero limit in the shared rules would make every block invalid.
    #[error("rules: block_gas_limit, max_block_txs, max_block_bytes and max_tx_size_bytes must be > 0")]
    ZeroLimit,
    /// A validator's public key is unusable.
    #[error("validator {name}: {source}")]
    ValidatorKey {
        /// The validator's name in the file.
        name: String,
        /// What is wrong with its key.
        source: KeyError,
    },
    /// A follower's public key is unusable.
    #[error("follower {name}: {source}")]
    FollowerKey {
        /// The follower's name in the file.
        name: String,
        /// What is wrong with its key.
        source: KeyError,
    },
    /// Two entries share a key: one node would hold two votes (or two
    /// peer slots).
    #[error("a public key appears twice")]
    DuplicateKey,
    /// Two validators share a p2p address: one could not be dialled.
    #[error("a p2p_addr appears twice")]
    DuplicateP2pAddr,
    /// A follower holding a validator's key could speak as it.
    #[error("follower {name} has a validator's key")]
    FollowerIsValidator {
        /// The follower's name in the file.
        name: String,
    },
    /// The set could not be written as TOML.
    #[error("{0}")]
    Encode(#[source] toml::ser::Error),
}

fn invalid(path: &Path, reason: impl Into<String>) -> SetError {
    SetError::Invalid { path: path.display().to_string(), reason: reason.into() }
}

fn io(path: &Path, source: std::io::Error) -> SetError {
    SetError::Io { path: path.display().to_string(), source }
}

fn parse(path: &Path, source: toml::de::Error) -> SetError {
    SetError::Parse { path: path.display().to_string(), source }
}

fn broken(path: &Path, source: ValidatorsError) -> SetError {
    SetError::Set { path: path.display().to_string(), source }
}

/// Parses a 32-byte ed25519 public key from hex.
pub fn parse_public_key(hex_key: &str) -> Result<PublicKey, KeyError> {
    let bytes = hex::decode(hex_key.trim_start_matches("0x")).map_err(KeyError::NotHex)?;
    PublicKey::decode(bytes::Bytes::from(bytes)).map_err(KeyError::NotPublicKey)
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
        let set: ValidatorSet = toml::from_str(&text).map_err(|e| parse(path, e))?;
        set.check().map_err(|e| broken(path, e))?;
        Ok((set, sluice_messages::keccak256(text.as_bytes())))
    }

    /// Writes the file; returns its hash.
    pub fn save(&self, path: &Path) -> Result<B256, SetError> {
        let text = self.to_toml().map_err(|e| broken(path, e))?;
        std::fs::write(path, &text).map_err(|e| io(path, e))?;
        Ok(sluice_messages::keccak256(text.as_bytes()))
    }

    /// The file's text.
    pub fn to_toml(&self) -> Result<String, ValidatorsError> {
        toml::to_string(self).map_err(ValidatorsError::Encode)
    }

    fn check(&self) -> Result<(), ValidatorsError> {
        if self.validator.is_empty() {
            return Err(ValidatorsError::NoValidators);
        }
        let r = &self.rules;
        if r.block_gas_limit == 0
            || r.max_block_txs == 0
            || r.max_block_bytes == 0
            || r.max_tx_size_bytes == 0
        {
            return Err(ValidatorsError::ZeroLimit);
        }
        let keys = self.public_keys()?;
        if keys.len() != self.validator.len() {
            return Err(ValidatorsError::DuplicateKey);
        }
        let mut addrs: Vec<_> = self.validator.iter().map(|v| v.p2p_addr).collect();
        addrs.sort();
        addrs.dedup();
        if addrs.len() != self.validator.len() {
            return Err(ValidatorsError::DuplicateP2pAddr);
        }
        Ok(())
    }

    /// The validators' keys, as consensus orders them.
    pub fn public_keys(&self) -> Result<Set<PublicKey>, ValidatorsError> {
        let mut keys = Vec::with_capacity(self.validator.len());
        for v in &self.validator {
            let key = parse_public_key(&v.public_key)
                .map_err(|source| ValidatorsError::ValidatorKey { name: v.name.clone(), source })?;
            keys.push(key);
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
        let set: FollowerSet = toml::from_str(&text).map_err(|e| parse(path, e))?;
        let voters = validators.public_keys().map_err(|e| broken(path, e))?;
        let keys = set.public_keys().map_err(|e| broken(path, e))?;
        if keys.len() != set.follower.len() {
            return Err(broken(path, ValidatorsError::DuplicateKey));
        }
        if let Some(f) = set.follower.iter().zip(keys.iter()).find(|(_, k)| voters.position(k).is_some()) {
            return Err(broken(path, ValidatorsError::FollowerIsValidator { name: f.0.name.clone() }));
        }
        Ok(set)
    }

    /// Writes the file.
    pub fn save(&self, path: &Path) -> Result<(), SetError> {
        let text = toml::to_string(self).map_err(|e| broken(path, ValidatorsError::Encode(e)))?;
        std::fs::write(path, text).map_err(|e| io(path, e))
    }

    /// The followers' keys.
    pub fn public_keys(&self) -> Result<Set<PublicKey>, ValidatorsError> {
        let mut keys = Vec::with_capacity(self.follower.len());
        for f in &self.follower {
            let key = parse_public_key(&f.public_key)
                .map_err(|source| ValidatorsError::FollowerKey { name: f.name.clone(), source })?;
            keys.push(key);
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

    /// Operators read these in the node's refusal to start: the texts are
    /// the ones the checks wrote as strings before they were typed.
    #[test]
    fn set_errors_read_as_before() {
        let not_hex = parse_public_key("0xzz").unwrap_err();
        assert!(matches!(not_hex, KeyError::NotHex(_)));
        assert!(not_hex.to_string().starts_with("not hex: "), "{not_hex}");
        let short = parse_public_key("0x0102").unwrap_err();
        assert!(matches!(short, KeyError::NotPublicKey(_)));
        assert!(short.to_string().starts_with("not an ed25519 public key: "), "{short}");
        let named = ValidatorsError::ValidatorKey { name: "v1".into(), source: not_hex };
        assert!(named.to_string().starts_with("validator v1: not hex: "), "{named}");
        let named = ValidatorsError::FollowerKey { name: "f0".into(), source: short };
        assert!(named.to_string().starts_with("follower f0: not an ed25519 public key: "), "{named}");
        let cases = [
            (ValidatorsError::NoValidators, "no [[validator]] entries"),
            (
                ValidatorsError::ZeroLimit,
                "rules: block_gas_limit, max_block_txs, max_block_bytes and max_tx_size_bytes must be > 0",
            ),
            (ValidatorsError::DuplicateKey, "a public key appears twice"),
            (ValidatorsError::DuplicateP2pAddr, "a p2p_addr appears twice"),
            (ValidatorsError::FollowerIsValidator { name: "f1".into() }, "follower f1 has a validator's key"),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
        let in_file = SetError::Set { path: "v.toml".into(), source: ValidatorsError::DuplicateKey };
        assert_eq!(in_file.to_string(), "v.toml: a public key appears twice");
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
