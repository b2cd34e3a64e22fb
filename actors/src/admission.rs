//! RPC admission: the path of `eth_sendRawTransaction`.
//!
//! Runs on the HTTP worker threads: it hands the raw bytes to the recovery
//! stage (decoding, stateless checks and sender recovery, the most
//! expensive step, ~40 us, on their own threads: see [`crate::recovery`]),
//! reads the sender's committed account (so the nonce actor does not wait
//! on the store) and passes the transaction to the serialized nonce
//! reservation. A JSON-RPC batch goes through as one: every submission
//! starts recovery before any is awaited, their results come back together
//! and all of them reach the nonce actor in one message, so the batch pays
//! each wake-up and reply once instead of once per transaction.
//!
//! A full recovery queue is answered at once with `txpool is full`, and so
//! is, in a full mempool, a transaction paying no more than the cheapest
//! one it could evict (below it: `transaction underpriced`); sending to
//! the nonce actor waits while its mailbox is full (backpressure reaches
//! the client as latency).
//!
//! Every transaction the nonce actor accepted from a client is written to
//! the pending-transaction journal ([`crate::journal_writer`]) before its
//! hash is answered (one write for a whole JSON-RPC batch), so an answered
//! transaction survives a kill: the next start offers the journal again
//! through [`replay_journal`]. A failed write is answered -32603
//! `transaction journal: <cause>`.
//!
//! Admission is stateless, so a panic in it is contained per request: the
//! caller gets -32603, the restart is counted, and it never escalates (a
//! client must not be able to halt the node with a poison request).

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Instant,
};

use alloy_primitives::{keccak256, Address, Bytes, B256};
use serde_json::Value;
use sluice_messages::RecoveredTx;
use sluice_rpc::{error::RpcError, BoxFuture, Pipeline};
use sluice_store::{StateReader, Store};
use sluice_txpool::{decode_envelope, is_delegation, PoolCounters, Price, TxError};
use tokio::sync::oneshot;

use crate::{
    faults::{self, Action, Site},
    journal::Entry,
    journal_writer::JournalWriter,
    mailbox::MailboxSender,
    metrics as m,
    protocol::{AdmitTx, CommittedAccount, NonceMsg},
    recovery::{Batch, Recovered, Recovery},
};

/// The pipeline's entry, as the JSON-RPC server reaches it
/// ([`Pipeline`]): admission of raw transactions, and the nonce actor's
/// view of in-flight nonces.
pub struct Admission {
    /// Committed chain and state (the sender's account).
    pub store: Arc<Store>,
    /// The nonce actor's mailbox: the entry to the pipeline.
    pub nonce: MailboxSender<NonceMsg>,
    /// Where submitted transactions are checked and their senders recovered.
    pub recovery: Recovery,
    /// The mempool's occupancy: a full pool refuses submissions that
    /// could evict nothing before their senders are recovered.
    pub pool: Arc<PoolCounters>,
    /// False once shutdown began: new transactions are refused.
    pub accepting: AtomicBool,
    /// Where accepted transactions are made durable before they are
    /// answered; `None`: `mempool.journal = false`.
    pub journal: Option<JournalWriter>,
}

/// Where admitted transactions come from: only a client's are journaled
/// (a peer's are journaled by the validator its client reached; the
/// journal's own are in it already), and only a client's and the
/// journal's are sent on to peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A JSON-RPC client.
    Client,
    /// Another validator's gossip.
    Peer,
    /// The journal, offered again at start.
    Journal,
}

impl Pipeline for Admission {
    fn admit(&self, raws: Vec<Bytes>, hold_gaps: bool) -> BoxFuture<'_, Vec<Result<B256, TxError>>> {
        Box::pin(async move {
            let received = Instant::now();
            let mut batch = self.recovery.batch();
            for raw in raws {
                begin(self, raw, &mut batch).await;
            }
            let results = admit_all(self, batch.wait().await, received, hold_gaps, Origin::Client).await;
            count(m::TX_ADMISSION, &results);
            results
        })
    }

    fn pending_nonce(&self, address: Address) -> BoxFuture<'_, Result<Option<u64>, RpcError>> {
        Box::pin(async move {
            let stopped = || RpcError::new(sluice_rpc::error::SERVER_ERROR, "admission stopped");
            let (reply, rx) = oneshot::channel();
            self.nonce.send(NonceMsg::PendingNonce { address, reply }).await.map_err(|_| stopped())?;
            rx.await.map_err(|_| stopped())
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<(u64, u64), RpcError>> {
        Box::pin(async move {
            let stopped = || RpcError::new(sluice_rpc::error::SERVER_ERROR, "admission stopped");
            let (reply, rx) = oneshot::channel();
            self.nonce.send(NonceMsg::Status { reply }).await.map_err(|_| stopped())?;
            rx.await.map_err(|_| stopped())
        })
    }

    fn queued(&self) -> BoxFuture<'_, Result<Vec<sluice_messages::RecoveredTx>, RpcError>> {
        Box::pin(async move {
            let stopped = || RpcError::new(sluice_rpc::error::SERVER_ERROR, "admission stopped");
            let (reply, rx) = oneshot::channel();
            self.nonce.send(NonceMsg::Queued { reply }).await.map_err(|_| stopped())?;
            rx.await.map_err(|_| stopped())
        })
    }

    fn debug(&self, method: &str, params: Option<&Value>) -> Result<Value, RpcError> {
        faults::debug_rpc(method, params)
    }
}

/// Starts admitting `raw`: the node's own checks, then the transaction is
/// added to `batch` for recovery without waiting for it (or answered there
/// with why it was refused). Every submission of a JSON-RPC batch begins
/// before any is awaited, so the recovery threads work through the batch
/// together.
async fn begin(state: &Admission, raw: Bytes, batch: &mut Batch<'_>) {
    if !state.accepting.load(Ordering::Acquire) {
        return batch.refuse(TxError::Unavailable("node is shutting down"));
    }
    if let Some(reason) = state.store.halted() {
        // Nothing admitted now could ever be committed.
        return batch.refuse(TxError::StoreHalted(reason));
    }
    // Refused before anything is accepted: once the nonce actor took a
    // transaction it may be included whatever the answer says.
    if state.journal.as_ref().is_some_and(JournalWriter::is_full) {
        return batch.refuse(TxError::TxPoolFull);
    }
    // A full pool refuses what could evict nothing before the expensive
    // part: recovering senders only to refuse their transactions would
    // take the CPU the pipeline needs to drain the pool. Only then is the
    // transaction decoded here, for its price. (Racy reads: the nonce
    // actor decides exactly.)
    if state.pool.would_overflow(raw.len()) {
        let hash = keccak256(&raw);
        if let Ok(tx) = decode_envelope(&raw, hash) {
            if let Err(e) = state.pool.check_floor(Price::of(&tx)) {
                return batch.refuse(e);
            }
        }
    }
    let fault = faults::point(Site::Admission).fire();
    match fault {
        Some(Action::Delay(d)) => tokio::time::sleep(d).await,
        // Blocks this HTTP worker: every request on it waits, as if the
        // stage stopped taking from its queue.
        Some(Action::Stall(d)) => std::thread::sleep(d),
        Some(Action::Drop) => {
            return batch.refuse(TxError::Unavailable("request dropped (injected fault at admission)"))
        }
        Some(Action::Error) => {
            return batch.refuse(TxError::Unavailable("injected error at failpoint admission"))
        }
        Some(Action::Panic) | None => {}
    }
    batch.submit(raw, fault == Some(Action::Panic));
}

/// Finishes admitting recovered submissions, in order: reads each one's
/// sender's committed account, then reserves the nonces of all of them in
/// one message to the nonce actor; a client's accepted ones are then
/// journaled. Each one's hash (keccak of the raw bytes), or why it was
/// refused.
async fn admit_all(
    state: &Admission,
    recovered: Vec<Recovered>,
    received: Instant,
    hold_gaps: bool,
    origin: Origin,
) -> Vec<Result<B256, TxError>> {
    let from_peer = origin == Origin::Peer;
    let mut results = Vec::with_capacity(recovered.len());
    // Each accepted transaction's place in `results`, and what the journal
    // records of it (a client's only).
    let (mut txs, mut slots) = (Vec::new(), Vec::new());
    let journal = state.journal.as_ref().filter(|_| origin == Origin::Client);
    for tx in recovered {
        match tx.and_then(|tx| checked(state, tx)) {
            Ok((tx, committed)) => {
                let entry =
                    journal.map(|_| Entry { sender: tx.sender, nonce: tx.nonce(), raw: tx.raw.clone() });
                slots.push((results.len(), entry));
                results.push(Ok(tx.hash));
                txs.push(AdmitTx { tx, committed, hold_gaps, from_peer });
            }
            Err(e) => results.push(Err(e)),
        }
    }
    if txs.is_empty() {
        return results;
    }
    let stopped = || Err(TxError::Unavailable("admission stopped"));
    let (reply, rx) = oneshot::channel();
    let answers = match state.nonce.send(NonceMsg::Admit { txs, received, reply }).await {
        Ok(()) => rx.await.unwrap_or_else(|_| slots.iter().map(|_| stopped()).collect()),
        Err(_) => slots.iter().map(|_| stopped()).collect(),
    };
    let (mut accepted, mut entries) = (Vec::new(), Vec::new());
    for ((slot, entry), answer) in slots.into_iter().zip(answers) {
        match answer {
            Err(e) => results[slot] = Err(e),
            Ok(()) => {
                accepted.push(slot);
                entries.extend(entry);
            }
        }
    }
    if let Some(journal) = journal {
        if let Err(cause) = journal.write(entries).await {
            for slot in accepted {
                // TxError lives in sluice-txpool, which cannot name this
                // crate's error: it keeps the text clients are answered with.
                results[slot] = Err(TxError::Journal(cause.to_string()));
            }
        }
    }
    results
}

/// Journaled transactions handed to the nonce actor in one message while
/// the journal is offered again: one reply per chunk, and the recovery
/// queue is waited on rather than flooded.
const REPLAY_CHUNK: usize = 256;

/// Offers journaled transactions again, in the order they were written,
/// through the path a client's take (recovery, nonce rules, a nonce gap
/// held), without journaling them again: they are in the journal already.
/// Runs at start, before the RPC server opens. Those committed meanwhile are
/// refused (`nonce too low`) and dropped; every outcome is counted in
/// `sluice_txjournal_replayed_total{result}`. How many were admitted.
pub async fn replay_journal(state: &Admission, raws: Vec<Bytes>) -> usize {
    let mut admitted = 0;
    for chunk in raws.chunks(REPLAY_CHUNK) {
        let received = Instant::now();
        let mut batch = state.recovery.batch();
        for raw in chunk {
            batch.submit_waiting(raw.clone()).await;
        }
        let results = admit_all(state, batch.wait().await, received, true, Origin::Journal).await;
        admitted += results.iter().filter(|r| r.is_ok()).count();
        count(m::TXJOURNAL_REPLAYED, &results);
    }
    admitted
}

/// A recovered transaction with its sender's committed account, or why
/// it cannot be admitted.
fn checked(state: &Admission, tx: RecoveredTx) -> Result<(RecoveredTx, CommittedAccount), TxError> {
    let height = state.store.head();
    let account = state.store.account(&tx.sender).map_err(|_| TxError::Unavailable("state read failed"))?;
    let mut delegated = false;
    if let Some(acct) = account {
        // EIP-3607: accounts with code cannot send, unless the code is an
        // EIP-7702 delegation. Ordinary senders have no code: no read.
        if acct.code_hash != sluice_store::EMPTY_CODE_HASH {
            let code =
                state.store.code(&acct.code_hash).map_err(|_| TxError::Unavailable("state read failed"))?;
            if !code.starts_with(&[0xef, 0x01, 0x00]) {
                return Err(TxError::SenderNotEoa(tx.sender));
            }
            delegated = is_delegation(&code);
        }
    }
    let account = account.unwrap_or_default();
    Ok((tx, CommittedAccount { height, nonce: account.nonce, balance: account.balance, delegated }))
}

/// Counts outcomes in `counter{result}`, one increment per outcome seen
/// (a batch is mostly one outcome).
fn count(counter: &'static str, results: &[Result<B256, TxError>]) {
    let mut seen: Vec<(&'static str, u64)> = Vec::new();
    for r in results {
        let outcome = r.as_ref().map_or_else(TxError::outcome, |_| "ok");
        match seen.iter_mut().find(|(o, _)| *o == outcome) {
            Some((_, n)) => *n += 1,
            None => seen.push((outcome, 1)),
        }
    }
    for (outcome, n) in seen {
        metrics::counter!(counter, "result" => outcome).increment(n);
    }
}

/// Admits a batch another validator sent, in its order, as this node's
/// own RPC would (recovery, nonce rules, `already known` for what is here
/// already; but a nonce gap is refused, not held), and never sends it on. Unlike RPC it waits
/// for room in the recovery queue rather than refusing: the batch is
/// already here, and waiting slows the sender's channel instead.
/// Outcomes are counted in `sluice_gossip_admitted_total{result}`.
pub async fn admit_from_peer(state: &Admission, raws: Vec<Bytes>) {
    let received = Instant::now();
    let mut batch = state.recovery.batch();
    let mut committed = 0;
    for raw in raws {
        // A copy of what this node has committed already (its block came
        // before the batch): known by its hash, so refused before sender
        // recovery, the bulk of admission's cost. Under load a receiver got
        // a third to a half of its copies this late.
        if state.store.transaction(&sluice_messages::keccak256(&raw)).is_some() {
            committed += 1;
            continue;
        }
        if !state.accepting.load(Ordering::Acquire) {
            batch.refuse(TxError::Unavailable("node is shutting down"));
        } else if let Some(reason) = state.store.halted() {
            batch.refuse(TxError::StoreHalted(reason));
        } else {
            batch.submit_waiting(raw).await;
        }
    }
    if committed > 0 {
        metrics::counter!(m::GOSSIP_ADMITTED, "result" => "committed").increment(committed);
    }
    // A gap here means a batch from the same validator was lost (p2p
    // sends are unreliable): the rest of that sender's transactions
    // would wait for it in the future queue, filling it for everyone.
    // Refused instead; the validator that admitted them proposes them.
    let results = admit_all(state, batch.wait().await, received, false, Origin::Peer).await;
    count(m::GOSSIP_ADMITTED, &results);
}
