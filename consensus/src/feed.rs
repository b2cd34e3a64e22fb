//! The finalized-block feed's source: every finalized block the forwarder
//! hands to the pipeline is published with its finalization certificate
//! (read back from marshal), both in consensus's encoding, through
//! [`Backend::publish_finalized`]; the node serves them over JSON-RPC
//! (`consensus_subscribe`, `consensus_getFinalized`) so that followers can
//! follow any node, checking each certificate against the validator set.
//!
//! Beside the pipeline's path: the forwarder hands each block to a bounded
//! queue (waiting for room, so the feed has no gaps: a follower of it
//! could not get past one), and this task asks marshal for the
//! certificate.

use std::sync::Arc;

use alloy_primitives::Bytes;
use commonware_codec::Encode as _;
use commonware_consensus::types::Height;
use sluice_messages::{FinalizedItem, SealedBlock};

use crate::{backend::Backend, block::ChainBlock, engine::MarshalMailbox, metrics as m};

/// Finalized blocks waiting for their certificate: a few seconds of
/// steady-state blocks, so the forwarder rarely waits.
pub(crate) const PUBLISH_QUEUE: usize = 64;

/// Publishes each block on `blocks` with its certificate, until the
/// forwarder stops.
pub(crate) async fn publish<B: Backend>(
    blocks: flume::Receiver<Arc<SealedBlock>>,
    marshal: MarshalMailbox,
    backend: B,
) {
    while let Ok(block) = blocks.recv_async().await {
        let height = block.header.number;
        // A block this node backfilled has no certificate of its own
        // (marshal fetched it as an ancestor of a finalized one): it goes
        // out without one, and a follower holds it until a certified
        // descendant proves it final (`upstream.rs`).
        let finalization = match marshal.get_finalization(Height::new(height)).await {
            Some(f) => Bytes::from(f.encode().to_vec()),
            None => {
                metrics::counter!(m::FEED_UNCERTIFIED).increment(1);
                Bytes::new()
            }
        };
        backend.publish_finalized(FinalizedItem {
            height,
            finalization,
            block: Bytes::from(ChainBlock(block).encode().to_vec()),
        });
    }
}
