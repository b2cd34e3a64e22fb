//! RPC admission: the path of `eth_sendRawTransaction`.
//!
//! Runs on the HTTP worker threads: it hands the raw bytes to the recovery
//! stage (decoding, stateless checks and sender recovery, the most
//! expensive step, ~40 us, on their own threads: see [`crate::recovery`]),
//! reads the sender's committed account (so the nonce actor does not wait
//! on the store) and passes the transaction to the serialized nonce
//! reservation.
//!
//! A full recovery queue or a full mempool is answered at once with
//! `txpool is full`; sending to the nonce actor waits while its mailbox is
//! full (backpressure reaches the client as latency).
//!
//! Admission is stateless, so a panic in it is contained per request: the
//! caller gets -32603, the restart is counted, and it never escalates (a
//! client must not be able to halt the node with a poison request).

use std::{sync::atomic::Ordering, time::Instant};

use alloy_primitives::{Bytes, B256};
use sluice_store::StateReader;
use sluice_txpool::TxError;
use tokio::sync::oneshot;

use crate::{
    faults::{self, Action, Site},
    metrics as m,
    protocol::{CommittedAccount, NonceMsg},
    rpc::RpcState,
};

/// Admits one raw transaction; returns its hash (keccak of the raw bytes).
pub async fn send_raw_transaction(state: &RpcState, raw: Bytes) -> Result<B256, TxError> {
    let result = admit(state, raw).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.outcome(),
    };
    metrics::counter!(m::TX_ADMISSION, "result" => outcome).increment(1);
    result
}

async fn admit(state: &RpcState, raw: Bytes) -> Result<B256, TxError> {
    if !state.accepting.load(Ordering::Acquire) {
        return Err(TxError::Unavailable("node is shutting down"));
    }
    if state.store.halted().is_some() {
        // Nothing admitted now could ever be committed.
        return Err(TxError::Unavailable("store halted after a failure (see the node log); writes stopped"));
    }
    let received = Instant::now();
    let fault = faults::point(Site::Admission).fire();
    match fault {
        Some(Action::Delay(d)) => tokio::time::sleep(d).await,
        // Blocks this HTTP worker: every request on it waits, as if the
        // stage stopped taking from its queue.
        Some(Action::Stall(d)) => std::thread::sleep(d),
        Some(Action::Drop) => {
            return Err(TxError::Unavailable("request dropped (injected fault at admission)"))
        }
        Some(Action::Error) => return Err(TxError::Unavailable("injected error at failpoint admission")),
        Some(Action::Panic) | None => {}
    }
    let tx = state.recovery.recover(raw, fault == Some(Action::Panic)).await?;
    let height = state.store.head();
    let account = state.store.account(&tx.sender).map_err(|_| TxError::Unavailable("state read failed"))?;
    if let Some(acct) = account {
        // EIP-3607: accounts with code cannot send, unless the code is an
        // EIP-7702 delegation.
        if acct.code_hash != sluice_store::EMPTY_CODE_HASH {
            let code =
                state.store.code(&acct.code_hash).map_err(|_| TxError::Unavailable("state read failed"))?;
            if !code.starts_with(&[0xef, 0x01, 0x00]) {
                return Err(TxError::SenderNotEoa(tx.sender));
            }
        }
    }
    let account = account.unwrap_or_default();
    let committed = CommittedAccount { height, nonce: account.nonce, balance: account.balance };
    let hash = tx.hash;
    let (reply, rx) = oneshot::channel();
    state
        .nonce
        .send(NonceMsg::Admit { tx, committed, received, reply })
        .await
        .map_err(|_| TxError::Unavailable("admission stopped"))?;
    rx.await.map_err(|_| TxError::Unavailable("admission stopped"))??;
    Ok(hash)
}
