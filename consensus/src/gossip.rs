//! Transaction dissemination: every transaction a validator admits from
//! its own clients reaches every other validator, so any validator's RPC
//! works for any wallet and every leader proposes every sender's
//! transactions.
//!
//! ```text
//!  RPC ─▶ admission ─▶ (admitted here) ─▶ Backend::outbound ─▶ batch ─▶ p2p channel TXS ─▶ every other validator
//!  p2p channel TXS ─▶ decode (bounded) ─▶ Backend::admit_from_peer ─▶ the same admission (never sent on)
//! ```
//!
//! One hop, no relaying: the p2p network connects every validator to every
//! other, and a validator sends only what its own clients gave it, so a
//! transaction crosses each link at most once. commonware's buffered
//! broadcast engine does not fit: it caches messages for fetch by digest
//! and delivers only what is subscribed to, while a receiver here does not
//! know what to ask for. The channel is the p2p layer's own all-recipient
//! send, rate limited per peer (`consensus.gossip_batches_per_second`).
//!
//! Losing a batch loses nothing: the validator that admitted a transaction
//! keeps it in its own pool and proposes it when it leads.

use std::time::Duration;

use alloy_primitives::Bytes;
use bytes::{Buf as _, BufMut as _};
use commonware_p2p::{Receiver, Recipients, Sender};
use commonware_runtime::Clock;

use crate::backend::Backend;

/// Channel number of transaction batches.
pub(crate) const CHANNEL: u64 = 5;

/// The bounds on what one validator sends and accepts.
#[derive(Debug, Clone, Copy)]
pub struct GossipLimits {
    /// Transactions in one batch, sent or accepted.
    pub batch_max_txs: usize,
    /// Encoded bytes of one batch, sent or accepted.
    pub batch_max_bytes: usize,
    /// The largest transaction accepted (the chain's rule).
    pub max_tx_bytes: usize,
    /// At least this long between two batches sent: with the per-peer
    /// quota, the most batches a second a peer sees from this one.
    pub interval: Duration,
}

/// Why a received batch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Ended inside a length or a transaction.
    #[error("truncated batch")]
    Truncated,
    /// More transactions than `batch_max_txs`.
    #[error("batch of {0} transactions is over the limit")]
    TooMany(u32),
    /// A transaction larger than the chain's limit, or empty.
    #[error("transaction of {0} bytes refused")]
    BadTx(usize),
    /// Bytes after the last transaction.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Encodes a batch: a u32 count, then each transaction as a u32 length
/// and its raw bytes (big endian).
pub(crate) fn encode(batch: &[Bytes]) -> Vec<u8> {
    let size = 4 + batch.iter().map(|t| 4 + t.len()).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.put_u32(batch.len() as u32);
    for tx in batch {
        out.put_u32(tx.len() as u32);
        out.put_slice(tx);
    }
    out
}

/// Decodes a batch, refusing anything over `limits` before allocating
/// for it.
pub(crate) fn decode(mut buf: &[u8], limits: &GossipLimits) -> Result<Vec<Bytes>, BatchError> {
    if buf.len() < 4 {
        return Err(BatchError::Truncated);
    }
    let count = buf.get_u32();
    if count as usize > limits.batch_max_txs {
        return Err(BatchError::TooMany(count));
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        if buf.len() < 4 {
            return Err(BatchError::Truncated);
        }
        let len = buf.get_u32() as usize;
        if len == 0 || len > limits.max_tx_bytes {
            return Err(BatchError::BadTx(len));
        }
        if buf.len() < len {
            return Err(BatchError::Truncated);
        }
        out.push(Bytes::copy_from_slice(&buf[..len]));
        buf.advance(len);
    }
    if !buf.is_empty() {
        return Err(BatchError::Trailing(buf.len()));
    }
    Ok(out)
}

/// How soon a follower's batch that reached no validator is sent again:
/// a redial takes 250 ms-1 s.
const UNREACHED_RETRY: Duration = Duration::from_millis(250);

/// Sends what this node admits from its own clients to `to` (a
/// validator: every other validator; a follower: the validators it is
/// connected to), a batch at a time, at most one batch per `interval`.
/// With `must_reach` (a follower, which never proposes what it admits) a
/// batch no peer took is sent again until one does, holding back the
/// rest (its queue then fills and admission answers `txpool is full`);
/// a validator proposes its own transactions anyway, so a batch lost to a
/// cut link costs nothing. Ends when the node stops.
pub(crate) async fn send_loop<E: Clock, B: Backend, S: Sender>(
    ctx: E,
    backend: B,
    mut sender: S,
    (to, must_reach): (Recipients<S::PublicKey>, bool),
    limits: GossipLimits,
) {
    // Room for the batch's own count.
    let max_bytes = limits.batch_max_bytes.saturating_sub(4);
    loop {
        let batch = backend.outbound(limits.batch_max_txs, max_bytes).await;
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let encoded = encode(&batch);
        let mut reached = sender.send(to.clone(), encoded.clone(), false);
        while must_reach && reached.is_empty() {
            ctx.sleep(UNREACHED_RETRY).await;
            reached = sender.send(to.clone(), encoded.clone(), false);
        }
        metrics::counter!(crate::metrics::GOSSIP_SENT_TXS).increment(n);
        metrics::counter!(crate::metrics::GOSSIP_SENT_BATCHES).increment(1);
        tracing::trace!(txs = n, peers = reached.len(), "sent a transaction batch");
        ctx.sleep(limits.interval).await;
    }
}

/// Admits what other validators send, as this node's own RPC would
/// (recovery, nonce rules, `already known`; a nonce gap, from a lost batch, is refused rather than held); never sends
/// it on. A batch that breaks the limits is dropped whole and logged.
pub(crate) async fn receive_loop<B: Backend, R: Receiver>(backend: B, mut receiver: R, limits: GossipLimits) {
    while let Ok((peer, msg)) = receiver.recv().await {
        let bytes = msg.as_ref();
        if bytes.len() > limits.batch_max_bytes {
            tracing::warn!(%peer, bytes = bytes.len(), "transaction batch over consensus.gossip_batch_max_bytes dropped");
            metrics::counter!(crate::metrics::GOSSIP_REFUSED_BATCHES).increment(1);
            continue;
        }
        match decode(bytes, &limits) {
            Ok(txs) => {
                metrics::counter!(crate::metrics::GOSSIP_RECEIVED_TXS).increment(txs.len() as u64);
                backend.admit_from_peer(txs).await;
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "malformed transaction batch dropped");
                metrics::counter!(crate::metrics::GOSSIP_REFUSED_BATCHES).increment(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: GossipLimits = GossipLimits {
        batch_max_txs: 3,
        batch_max_bytes: 1 << 10,
        max_tx_bytes: 8,
        interval: Duration::ZERO,
    };

    #[test]
    fn a_batch_round_trips() {
        let batch = vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cdefgh")];
        assert_eq!(decode(&encode(&batch), &LIMITS).unwrap(), batch);
        assert_eq!(decode(&encode(&[]), &LIMITS).unwrap(), Vec::<Bytes>::new());
    }

    #[test]
    fn a_batch_over_any_limit_is_refused() {
        let tx = Bytes::from_static(b"tx");
        assert_eq!(decode(&encode(&vec![tx.clone(); 4]), &LIMITS), Err(BatchError::TooMany(4)));
        assert_eq!(decode(&encode(&[Bytes::from_static(b"123456789")]), &LIMITS), Err(BatchError::BadTx(9)));
        assert_eq!(decode(&encode(&[Bytes::new()]), &LIMITS), Err(BatchError::BadTx(0)));
        let good = encode(&[tx.clone(), tx]);
        assert_eq!(decode(&good[..good.len() - 1], &LIMITS), Err(BatchError::Truncated));
        assert_eq!(decode(&good[..2], &LIMITS), Err(BatchError::Truncated));
        let mut long = good.clone();
        long.push(0);
        assert_eq!(decode(&long, &LIMITS), Err(BatchError::Trailing(1)));
        // A count claiming more than the bytes hold never allocates for it.
        let mut lying = Vec::new();
        lying.put_u32(3);
        assert_eq!(decode(&lying, &LIMITS), Err(BatchError::Truncated));
    }
}
