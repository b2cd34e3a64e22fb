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
    recovery::Recovering,
    rpc::RpcState,
};

/// Admits one raw transaction; returns its hash (keccak of the raw bytes).
pub async fn send_raw_transaction(state: &RpcState, raw: Bytes) -> Result<B256, TxError> {
    let begun = begin(state, raw).await;
    finish(state, begun).await
}

/// A submission whose checks and sender recovery have started.
#[derive(Debug)]
pub struct Begun {
    received: Instant,
    recovering: Result<Recovering, TxError>,
}

/// Starts admitting `raw`: the node's own checks, then the transaction is
/// queued for recovery without waiting for it. The calls of a JSON-RPC
/// batch all begin before the first finishes, so the recovery threads work
/// through the batch while its calls are answered in order.
pub async fn begin(state: &RpcState, raw: Bytes) -> Begun {
    let received = Instant::now();
    let recovering = async {
        if !state.accepting.load(Ordering::Acquire) {
            return Err(TxError::Unavailable("node is shutting down"));
        }
        if state.store.halted().is_some() {
            // Nothing admitted now could ever be committed.
            return Err(TxError::Unavailable(
                "store halted after a failure (see the node log); writes stopped",
            ));
        }
        // A full pool refuses before the expensive part: recovering senders
        // only to refuse their transactions would take the CPU the pipeline
        // needs to drain the pool. (A racy read: the nonce actor still
        // enforces the bound exactly.)
        if state.pool.len() >= state.pool.max_txs() {
            return Err(TxError::TxPoolFull);
        }
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
        state.recovery.submit(raw, fault == Some(Action::Panic))
    }
    .await;
    Begun { received, recovering }
}

/// Finishes admitting a begun submission: waits for its recovery, reads the
/// sender's committed account and reserves its nonce.
pub async fn finish(state: &RpcState, begun: Begun) -> Result<B256, TxError> {
    let result = admit(state, begun).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.outcome(),
    };
    metrics::counter!(m::TX_ADMISSION, "result" => outcome).increment(1);
    result
}

async fn admit(state: &RpcState, begun: Begun) -> Result<B256, TxError> {
    let Begun { received, recovering } = begun;
    let tx = recovering?.wait().await?;
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
