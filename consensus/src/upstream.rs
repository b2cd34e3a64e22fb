//! A follower over other nodes' finalized-block feeds (`follower.upstreams`)
//! rather than p2p: any validator or follower serving
//! `consensus_subscribe(["finalized", from])` will do, so followers can
//! follow followers and the validators' egress stays bounded.
//!
//! Nothing an upstream sends is trusted: each item's certificate is
//! verified against the validator set, its block must be the one the
//! certificate finalizes, and heights must follow one another from this
//! node's committed head. Verified blocks go to the same pipeline as a
//! validator's (state references checked, divergence halts), and are
//! published on this node's own feed, so others can follow it in turn.
//!
//! ```text
//!  upstream ws ──consensus_subscription──▶ check (certificate, block, height)
//!      ▲                                     ──▶ Backend::deliver (in order, waits for room)
//!      └── eth_sendRawTransaction batches ◀── Backend::outbound (this node's clients)
//! ```
//!
//! One OS thread, blocking on the socket with a short read timeout. An
//! upstream that fails (unreachable, closed, silent, lying, or no longer
//! keeping the next height) is left for the next one, with backoff; a
//! follower started before its upstreams waits for them and never exits.

use std::{
    net::TcpStream,
    sync::Arc,
    time::{Duration, Instant},
};

use alloy_primitives::Bytes;
use commonware_codec::Decode as _;
use commonware_consensus::simplex::{scheme::ed25519, types::Finalization};
use commonware_cryptography::{certificate::Verifier as _, keccak256::Digest};
use commonware_parallel::Sequential;
use serde_json::{json, Value};
use sluice_messages::{FinalizedItem, SealedBlock};
use sluice_state::Halt;
use tungstenite::{stream::MaybeTlsStream, Message, WebSocket};

use crate::{
    backend::Backend,
    block::{digest_of, BlockLimits, ChainBlock},
    metrics as m,
};

/// How long a read waits before the loop checks for stop and outbound
/// transactions: also the most a forwarded transaction waits to be sent.
const READ_TICK: Duration = Duration::from_millis(50);
/// An upstream that sends nothing for this long is left: even an idle
/// chain finalizes a block a second.
const SILENT: Duration = Duration::from_secs(10);
/// How long connecting to an upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The first wait after a failed upstream, doubled up to [`MAX_BACKOFF`]
/// while none works, reset once one delivers a block.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Transactions forwarded to the upstream in one JSON-RPC batch at most.
const FORWARD_BATCH: usize = 256;

/// What one upstream connection ended with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// The socket failed or the upstream closed it.
    #[error("connection: {0}")]
    Socket(String),
    /// The upstream answered something this node cannot use.
    #[error("{0}")]
    Protocol(String),
    /// The upstream sent an item that does not check: left for good (it
    /// is retried only after every other upstream).
    #[error("refused item at height {height}: {why}")]
    Refused {
        /// The height it claimed.
        height: u64,
        /// What did not check.
        why: ItemError,
    },
    /// The pipeline stopped: following ends.
    #[error("the pipeline stopped")]
    Stopped,
}

/// Why a feed item does not check against this node's tail; each one
/// makes the follower leave that upstream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ItemError {
    /// Not the next height this node needs.
    #[error("expected height {expected}")]
    Height {
        /// The height this node needs next.
        expected: u64,
    },
    /// The block bytes do not decode within the chain's limits.
    #[error("block: {0}")]
    Block(#[source] commonware_codec::Error),
    /// The block inside claims another height than the item.
    #[error("the block is at height {number}")]
    BlockHeight {
        /// The block header's height.
        number: u64,
    },
    /// The block's parent is not this node's head (or the held block
    /// before it).
    #[error("the block does not extend {parent}")]
    Unlinked {
        /// The hash it should have named as parent.
        parent: alloy_primitives::B256,
    },
    /// Too many blocks held without a certificate: memory is bounded.
    #[error("more than {MAX_UNCERTIFIED} blocks in a row without a certificate")]
    TooManyUncertified,
    /// The certificate bytes do not decode.
    #[error("undecodable finalization: {0}")]
    Finalization(#[source] commonware_codec::Error),
    /// The certificate's signatures are not a quorum of the set.
    #[error("finalization does not verify against the validator set")]
    Unverified,
    /// The certificate is valid but finalizes another block.
    #[error("the block is not the one its certificate finalizes")]
    OtherBlock,
}

/// Blocks a follower holds without a certificate of their own, waiting
/// for a certified descendant: as many as a feed keeps by default.
pub(crate) const MAX_UNCERTIFIED: usize = 1024;

/// Where a follower over the feed stands: the next height to execute, the
/// hash of the block before it, and blocks received without their own
/// certificate (a node that backfilled them has none: marshal fetches a
/// finalized block's ancestors by digest), held until a certified
/// descendant proves them final by its parent hashes.
pub(crate) struct Tail {
    pub(crate) next: u64,
    pub(crate) last_hash: alloy_primitives::B256,
    pub(crate) pending: Vec<(FinalizedItem, Arc<SealedBlock>)>,
}

impl Tail {
    /// Takes one feed item; returns the blocks it proves final, in order
    /// (none while it waits for a certified descendant), or why the item
    /// is refused. Each block must be the next height and extend the one
    /// before it; a certificate must verify against the validator set and
    /// finalize exactly that block.
    pub(crate) fn take(
        &mut self,
        scheme: &ed25519::Scheme,
        limits: &BlockLimits,
        item: FinalizedItem,
    ) -> Result<Vec<(FinalizedItem, Arc<SealedBlock>)>, ItemError> {
        let expected = self.next + self.pending.len() as u64;
        if item.height != expected {
            return Err(ItemError::Height { expected });
        }
        let block = ChainBlock::decode_cfg(item.block.to_vec(), limits).map_err(ItemError::Block)?.0;
        if block.header.number != item.height {
            return Err(ItemError::BlockHeight { number: block.header.number });
        }
        let parent = self.pending.last().map_or(self.last_hash, |(_, b)| b.hash);
        if block.header.parent_hash != parent {
            return Err(ItemError::Unlinked { parent });
        }
        if item.finalization.is_empty() {
            if self.pending.len() >= MAX_UNCERTIFIED {
                return Err(ItemError::TooManyUncertified);
            }
            self.pending.push((item, block));
            return Ok(Vec::new());
        }
        let finalization = Finalization::<ed25519::Scheme, Digest>::decode_cfg(
            item.finalization.to_vec(),
            &scheme.certificate_codec_config(),
        )
        .map_err(ItemError::Finalization)?;
        if !finalization.verify(&mut commonware_utils::sys_rng(), scheme, &Sequential) {
            return Err(ItemError::Unverified);
        }
        if digest_of(&block.hash) != finalization.proposal.payload {
            return Err(ItemError::OtherBlock);
        }
        let mut done = std::mem::take(&mut self.pending);
        done.push((item, block));
        self.next += done.len() as u64;
        self.last_hash = done.last().map_or(self.last_hash, |(_, b)| b.hash);
        Ok(done)
    }
}

/// A follower's link to its upstreams.
pub(crate) struct Upstreams<B: Backend> {
    pub(crate) urls: Vec<String>,
    pub(crate) scheme: ed25519::Scheme,
    pub(crate) limits: BlockLimits,
    pub(crate) backend: B,
    /// Largest raw transaction this node admits (the batch's bound).
    pub(crate) max_tx_bytes: usize,
    /// The highest height an upstream said was finalized.
    pub(crate) highest: std::sync::atomic::AtomicU64,
}

impl<B: Backend> Upstreams<B> {
    /// Follows the upstreams in turn until `stopped` says so, the node
    /// halts or the pipeline closes.
    pub(crate) fn run(self, stopped: impl Fn() -> bool) {
        let committed = *self.backend.committed().borrow();
        let Some((last_hash, _)) = self.backend.committed_block(committed) else {
            self.backend.halt(Halt::Consensus {
                cause: format!("follower: committed block {committed} is not readable"),
            });
            return;
        };
        let mut tail = Tail { next: committed + 1, last_hash, pending: Vec::new() };
        let mut backoff = FIRST_BACKOFF;
        let mut forward = Forwarder::start(self.backend.clone(), self.max_tx_bytes);
        for url in self.urls.iter().cycle() {
            if stopped() || self.backend.halted().is_some() {
                return;
            }
            let before = tail.next;
            // What an upstream sent without a certificate is asked again
            // of the next one.
            tail.pending.clear();
            match self.follow(url, &mut tail, &mut forward, &stopped) {
                Ok(()) => return,
                Err(UpstreamError::Stopped) => return,
                Err(e) => {
                    metrics::counter!(m::UPSTREAM_FAILURES).increment(1);
                    tracing::warn!(upstream = %url, next = tail.next, error = %e, "upstream left; trying the next");
                }
            }
            backoff = if tail.next > before { FIRST_BACKOFF } else { (backoff * 2).min(MAX_BACKOFF) };
            let until = Instant::now() + backoff;
            while Instant::now() < until && !stopped() {
                std::thread::sleep(READ_TICK);
            }
        }
    }

    /// Follows one upstream from `next` until it fails or `stopped`.
    fn follow(
        &self,
        url: &str,
        tail: &mut Tail,
        forward: &mut Forwarder,
        stopped: &impl Fn() -> bool,
    ) -> Result<(), UpstreamError> {
        let mut ws = connect(url)?;
        let latest = call(&mut ws, 1, "consensus_getFinalized", json!(["latest"]))?;
        if let Some(h) = latest.get("height").and_then(Value::as_str).and_then(parse_quantity) {
            self.seen_finalized(h);
        }
        call(&mut ws, 2, "consensus_subscribe", json!(["finalized", format!("{:#x}", tail.next)]))?;
        tracing::info!(upstream = %url, from = tail.next, "following the upstream's finalized blocks");
        metrics::gauge!(m::UPSTREAM_CONNECTED).set(1.0);
        let result = self.read_items(&mut ws, tail, forward, stopped);
        metrics::gauge!(m::UPSTREAM_CONNECTED).set(0.0);
        let _ = ws.close(None);
        result
    }

    /// Reads notifications, delivering each checked block in order, and
    /// sends this node's clients' transactions on between reads.
    fn read_items(
        &self,
        ws: &mut WebSocket<MaybeTlsStream<TcpStream>>,
        tail: &mut Tail,
        forward: &mut Forwarder,
        stopped: &impl Fn() -> bool,
    ) -> Result<(), UpstreamError> {
        let mut heard = Instant::now();
        let mut request_id = 10u64;
        loop {
            if stopped() {
                return Ok(());
            }
            if let Some(batch) = forward.take() {
                request_id += 1;
                if let Err(e) = send_transactions(ws, request_id, &batch) {
                    // Sent again to whichever upstream comes next: this
                    // node never proposes what it admitted.
                    forward.unsent = Some(batch);
                    return Err(e);
                }
            }
            let text = match ws.read() {
                Ok(Message::Text(text)) => text,
                Ok(Message::Close(frame)) => {
                    let why = frame.map_or_else(|| "no reason".to_string(), |f| f.reason.to_string());
                    return Err(UpstreamError::Socket(format!("closed by the upstream: {why}")));
                }
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    if heard.elapsed() > SILENT {
                        return Err(UpstreamError::Socket(format!("nothing for {SILENT:?}")));
                    }
                    continue;
                }
                Err(e) => return Err(UpstreamError::Socket(e.to_string())),
            };
            heard = Instant::now();
            let msg: Value = serde_json::from_str(text.as_str())
                .map_err(|e| UpstreamError::Protocol(format!("not JSON: {e}")))?;
            if msg.get("method").and_then(Value::as_str) != Some("consensus_subscription") {
                // Answers to forwarded transactions: each was admitted or
                // refused there; this node answered its client already.
                continue;
            }
            let item = parse_item(&msg["params"]["result"])
                .ok_or_else(|| UpstreamError::Protocol(format!("malformed item: {msg}")))?;
            let height = item.height;
            let proven = tail.take(&self.scheme, &self.limits, item).map_err(|why| {
                metrics::counter!(m::FOLLOWER_FINALIZATIONS, "outcome" => "forged").increment(1);
                UpstreamError::Refused { height, why }
            })?;
            for (item, block) in proven {
                if !item.finalization.is_empty() {
                    metrics::counter!(m::FOLLOWER_FINALIZATIONS, "outcome" => "accepted").increment(1);
                }
                self.seen_finalized(item.height);
                futures::executor::block_on(self.backend.deliver(block, Box::new(|| {})))
                    .map_err(|_| UpstreamError::Stopped)?;
                self.backend.publish_finalized(item);
            }
        }
    }
}

impl<B: Backend> Upstreams<B> {
    /// The upstream has finalized `height`: `eth_syncing` and the lag
    /// gauges learn it, as a p2p follower's sink tells them.
    fn seen_finalized(&self, height: u64) {
        self.backend.finalized(height);
        let height = self.highest.fetch_max(height, std::sync::atomic::Ordering::Relaxed).max(height);
        let committed = *self.backend.committed().borrow();
        metrics::gauge!(m::FINALIZED_HEIGHT).set(height as f64);
        metrics::gauge!(m::LAG_BLOCKS).set(height.saturating_sub(committed) as f64);
    }
}

/// Opens the WebSocket with bounded connect and read times.
fn connect(url: &str) -> Result<WebSocket<MaybeTlsStream<TcpStream>>, UpstreamError> {
    let socket = |e: String| UpstreamError::Socket(e);
    let uri: tungstenite::http::Uri = url.parse().map_err(|e| socket(format!("{url}: {e}")))?;
    let host = uri.host().ok_or_else(|| socket(format!("{url}: no host")))?;
    let port = uri.port_u16().unwrap_or(80);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| socket(e.to_string()))?
        .next()
        .ok_or_else(|| socket(format!("{url}: no address")))?;
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(|e| socket(e.to_string()))?;
    stream.set_read_timeout(Some(CONNECT_TIMEOUT)).map_err(|e| socket(e.to_string()))?;
    let _ = stream.set_nodelay(true);
    let (ws, _) =
        tungstenite::client(url, MaybeTlsStream::Plain(stream)).map_err(|e| socket(e.to_string()))?;
    if let MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(READ_TICK)).map_err(|e| socket(e.to_string()))?;
    }
    Ok(ws)
}

/// One call, waiting (up to [`SILENT`]) for its answer.
fn call(
    ws: &mut WebSocket<MaybeTlsStream<TcpStream>>,
    id: u64,
    method: &str,
    params: Value,
) -> Result<Value, UpstreamError> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    ws.send(Message::text(body.to_string())).map_err(|e| UpstreamError::Socket(e.to_string()))?;
    let deadline = Instant::now() + SILENT;
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(text)) => {
                let msg: Value = serde_json::from_str(text.as_str())
                    .map_err(|e| UpstreamError::Protocol(format!("not JSON: {e}")))?;
                if msg.get("id") != Some(&json!(id)) {
                    continue;
                }
                if let Some(e) = msg.get("error") {
                    return Err(UpstreamError::Protocol(format!("{method}: {e}")));
                }
                return Ok(msg["result"].clone());
            }
            Ok(Message::Close(_)) => return Err(UpstreamError::Socket("closed".into())),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(UpstreamError::Socket(e.to_string())),
        }
    }
    Err(UpstreamError::Socket(format!("no answer to {method} within {SILENT:?}")))
}

/// Sends a batch of raw transactions as `eth_sendRawTransaction` calls.
fn send_transactions(
    ws: &mut WebSocket<MaybeTlsStream<TcpStream>>,
    first_id: u64,
    batch: &[Bytes],
) -> Result<(), UpstreamError> {
    let calls: Vec<Value> = batch
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            json!({"jsonrpc": "2.0", "id": first_id * 1_000_000 + i as u64, "method": "eth_sendRawTransaction", "params": [raw]})
        })
        .collect();
    metrics::counter!(m::UPSTREAM_FORWARDED_TXS).increment(batch.len() as u64);
    ws.send(Message::text(Value::Array(calls).to_string())).map_err(|e| UpstreamError::Socket(e.to_string()))
}

/// `{height, finalization, block}` as the feed serves it.
fn parse_item(v: &Value) -> Option<FinalizedItem> {
    Some(FinalizedItem {
        height: parse_quantity(v.get("height")?.as_str()?)?,
        finalization: v.get("finalization")?.as_str()?.parse().ok()?,
        block: v.get("block")?.as_str()?.parse().ok()?,
    })
}

fn parse_quantity(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// This node's clients' transactions, waiting to go to the upstream: a
/// thread takes them off the backend's outbound queue (which waits for
/// the first) into a bounded channel the reading loop drains between
/// reads.
struct Forwarder {
    batches: flume::Receiver<Vec<Bytes>>,
    /// A batch the last upstream's socket failed to take: sent first.
    unsent: Option<Vec<Bytes>>,
    /// Dropped with the forwarder: its thread, waiting on the backend's
    /// queue, lets go of the backend at once (the pipeline cannot drain at
    /// shutdown while anything holds it).
    _stop: flume::Sender<()>,
}

impl Forwarder {
    fn start<B: Backend>(backend: B, max_tx_bytes: usize) -> Forwarder {
        let (tx, rx) = flume::bounded(4);
        let (stop, stopped) = flume::bounded::<()>(1);
        let spawned = std::thread::Builder::new().name("upstream-forward".into()).spawn(move || loop {
            let max_bytes = FORWARD_BATCH * (max_tx_bytes + 4);
            let next = futures::executor::block_on(futures::future::select(
                Box::pin(backend.outbound(FORWARD_BATCH, max_bytes)),
                stopped.recv_async(),
            ));
            let batch = match next {
                futures::future::Either::Left((batch, _)) => batch,
                futures::future::Either::Right(_) => return,
            };
            if batch.is_empty() || tx.send(batch).is_err() {
                return;
            }
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the transaction forwarder: transactions stay here");
        }
        Forwarder { batches: rx, unsent: None, _stop: stop }
    }

    fn take(&mut self) -> Option<Vec<Bytes>> {
        self.unsent.take().or_else(|| self.batches.try_recv().ok())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use alloy_primitives::B256;
    use commonware_codec::Encode as _;
    use commonware_cryptography::{ed25519::PrivateKey, Signer as _};
    use commonware_utils::ordered::Set;
    use sluice_messages::BlockHeader;

    use super::*;

    fn block(number: u64, parent_hash: B256) -> Arc<SealedBlock> {
        let header = BlockHeader {
            number,
            parent_hash,
            timestamp: number,
            coinbase: alloy_primitives::Address::ZERO,
            gas_limit: 30_000_000,
            base_fee: 1_000_000_000,
            tx_root: crate::block::tx_root(&[]),
            state_ref: None,
        };
        Arc::new(SealedBlock { hash: header.hash(), header, txs: Vec::new() })
    }

    fn limits() -> BlockLimits {
        crate::sim::rules().limits()
    }

    /// A finalization as the feed carries it (not wrapped as a certificate
    /// message): the follower tests' one, unwrapped.
    fn finalization(keys: &[PrivateKey], payload: [u8; 32], tamper: bool) -> Vec<u8> {
        use commonware_consensus::simplex::types::Certificate;
        let bytes = crate::follower::tests::finalization(keys, b"ns", 9, payload, tamper);
        let scheme =
            ed25519::Scheme::verifier(b"ns", Set::from_iter_dedup(keys.iter().map(|k| k.public_key())));
        match Certificate::<ed25519::Scheme, Digest>::decode_cfg(bytes, &scheme.certificate_codec_config())
            .unwrap()
        {
            Certificate::Finalization(f) => f.encode().to_vec(),
            _ => unreachable!("a finalization"),
        }
    }

    fn item(b: &Arc<SealedBlock>, finalization: Vec<u8>) -> FinalizedItem {
        FinalizedItem {
            height: b.header.number,
            finalization: finalization.into(),
            block: ChainBlock(Arc::clone(b)).encode().to_vec().into(),
        }
    }

    #[test]
    fn blocks_are_final_with_their_own_certificate_or_a_certified_descendants() {
        let keys: Vec<PrivateKey> = (0..4).map(PrivateKey::from_seed).collect();
        let scheme =
            ed25519::Scheme::verifier(b"ns", Set::from_iter_dedup(keys.iter().map(|k| k.public_key())));
        let b7 = block(7, B256::repeat_byte(1));
        let b8 = block(8, b7.hash);
        let b9 = block(9, b8.hash);
        let fresh = || Tail { next: 7, last_hash: B256::repeat_byte(1), pending: Vec::new() };

        let mut tail = fresh();
        let done = tail.take(&scheme, &limits(), item(&b7, finalization(&keys, b7.hash.0, false))).unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!((tail.next, tail.last_hash), (8, b7.hash));
        // Backfilled blocks come without one: held until a descendant's.
        assert!(tail.take(&scheme, &limits(), item(&b8, Vec::new())).unwrap().is_empty());
        let done = tail.take(&scheme, &limits(), item(&b9, finalization(&keys, b9.hash.0, false))).unwrap();
        assert_eq!(done.iter().map(|(_, b)| b.header.number).collect::<Vec<_>>(), [8, 9]);
        assert_eq!((tail.next, tail.last_hash), (10, b9.hash));

        let refused = |it: FinalizedItem| fresh().take(&scheme, &limits(), it).unwrap_err().to_string();
        assert!(refused(item(&b8, Vec::new())).contains("expected height 7"));
        let stranger = block(7, B256::repeat_byte(2));
        assert!(refused(item(&stranger, Vec::new())).contains("does not extend"));
        assert!(refused(item(&b7, finalization(&keys, b8.hash.0, false))).contains("not the one"));
        assert!(refused(item(&b7, finalization(&keys, b7.hash.0, true))).contains("does not verify"));
        let garbage = FinalizedItem { block: vec![1, 2, 3].into(), ..item(&b7, Vec::new()) };
        assert!(refused(garbage).starts_with("block:"));
        assert!(matches!(
            fresh().take(&scheme, &limits(), item(&b8, Vec::new())),
            Err(ItemError::Height { expected: 7 })
        ));
        // A certificate over a block whose parents were never linked to
        // this node's head proves nothing here.
        let mut tail = fresh();
        tail.take(&scheme, &limits(), item(&b7, Vec::new())).unwrap();
        let b8_other = block(8, B256::repeat_byte(3));
        assert!(tail
            .take(&scheme, &limits(), item(&b8_other, finalization(&keys, b8_other.hash.0, false)))
            .is_err());
    }

    #[test]
    fn items_parse_as_the_feed_serves_them() {
        let v = json!({"height": "0x1f", "finalization": "0x0102", "block": "0x03"});
        let item = parse_item(&v).unwrap();
        assert_eq!((item.height, item.finalization.len(), item.block.len()), (31, 2, 1));
        assert!(parse_item(&json!({"height": "31", "finalization": "0x", "block": "0x"})).is_none());
    }
}
