//! The load tool's one error enum: everything that stops a run.

use std::path::PathBuf;

/// Why a load run (or genesis writing) stopped.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The target could not be reached or answered with a non-200 status.
    #[error("{method} on {url}: {reason}")]
    Transport {
        /// The JSON-RPC method (or `batch`).
        method: String,
        /// The endpoint.
        url: String,
        /// What went wrong (status, I/O error).
        reason: String,
    },
    /// The target answered, but not with what the method promises.
    #[error("{method}: unexpected answer: {detail}")]
    BadAnswer {
        /// The JSON-RPC method.
        method: String,
        /// What was wrong with it.
        detail: String,
    },
    /// A JSON-RPC error during setup (deploys, nonce reads).
    #[error("{method}: JSON-RPC error {code}: {message}")]
    Rpc {
        /// The JSON-RPC method.
        method: String,
        /// The error code.
        code: i64,
        /// The error message.
        message: String,
    },
    /// A setup transaction did not reach a successful receipt in time.
    #[error("setup: {0}")]
    Setup(String),
    /// The command line asks for something impossible.
    #[error("invalid arguments: {0}")]
    Args(String),
    /// Deriving mnemonic keys failed.
    #[error("deriving mnemonic accounts: {0}")]
    Derive(#[from] sluice_txpool::dev_accounts::DeriveError),
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Serializing the summary failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl LoadError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LoadError::Io { path: path.into(), source }
    }
}
