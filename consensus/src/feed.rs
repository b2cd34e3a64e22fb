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
        let Some(finalization) = marshal.get_finalization(Height::new(height)).await else {
            // Marshal keeps a certificate for every height it delivered
            // (pruned only far below): a miss is worth a look, not a halt.
            tracing::debug!(height, "no finalization kept for a delivered block: not published");
            metrics::counter!(m::FEED_UNPUBLISHED, "reason" => "no_certificate").increment(1);
            continue;
        };
        backend.publish_finalized(FinalizedItem {
            height,
            finalization: Bytes::from(finalization.encode().to_vec()),
            block: Bytes::from(ChainBlock(block).encode().to_vec()),
        });
    }
}
