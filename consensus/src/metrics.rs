//! Metric names of the consensus stage (`sluice_consensus_*`), described
//! and zeroed at start so dashboards show 0 before the first event.

/// Latest view this validator entered.
pub const VIEW: &str = "sluice_consensus_view";
/// Highest finalized height marshal reported.
pub const FINALIZED_HEIGHT: &str = "sluice_consensus_finalized_height";
/// Finalized height minus committed height: blocks agreed but not yet
/// executed and committed here.
pub const LAG_BLOCKS: &str = "sluice_consensus_lag_blocks";
/// Seconds from a proposal's notarization to its finalization, as seen here.
pub const FINALIZE_SECONDS: &str = "sluice_consensus_notarized_to_finalized_seconds";
/// Verify verdicts on others' proposals, by `verdict` (accept, reject).
pub const VERIFY_TOTAL: &str = "sluice_consensus_verify_total";
/// Proposals this validator refused, by `reason`: `header`, `timestamp`,
/// `state_ref`, `block_gas` (declared gas past the block's), or the
/// admission label of the first transaction breaking a stateless rule
/// (`invalid`, `invalid_sender`, `chain_id`, `intrinsic_gas`, ...).
pub const PROPOSALS_REFUSED: &str = "sluice_consensus_proposals_refused_total";
/// Transactions of own proposals that lost their height, put back in the
/// mempool.
pub const REQUEUED_TXS: &str = "sluice_consensus_requeued_txs_total";
/// Proposals made empty on purpose, by `reason` (exec_lag, unresolved).
pub const EMPTY_PROPOSALS: &str = "sluice_consensus_empty_proposals_total";
/// Evidence of equivocation simplex verified and reported, by `kind`
/// (conflicting_notarize, conflicting_finalize, nullify_finalize).
pub const EVIDENCE_TOTAL: &str = "sluice_consensus_evidence_total";
/// The `kind` labels of [`EVIDENCE_TOTAL`].
pub const EVIDENCE_KINDS: [&str; 3] = ["conflicting_notarize", "conflicting_finalize", "nullify_finalize"];
/// Transactions of this node's clients sent to the other validators.
pub const GOSSIP_SENT_TXS: &str = "sluice_gossip_sent_txs_total";
/// Transaction batches sent to the other validators.
pub const GOSSIP_SENT_BATCHES: &str = "sluice_gossip_sent_batches_total";
/// Transactions received from other validators (before admission).
pub const GOSSIP_RECEIVED_TXS: &str = "sluice_gossip_received_txs_total";
/// Batches from other validators dropped whole: over a limit or malformed.
pub const GOSSIP_REFUSED_BATCHES: &str = "sluice_gossip_refused_batches_total";
/// Views this validator saw nullified (no block for them: the leader was
/// slow, down or cut off).
pub const NULLIFIED_VIEWS: &str = "sluice_consensus_nullified_views_total";
/// Unix time (seconds) this validator last saw a block finalized: the
/// dashboard shows the time since.
pub const LAST_FINALIZED_TIME: &str = "sluice_consensus_last_finalized_timestamp_seconds";
/// Validators this one is connected to.
pub const PEERS: &str = "sluice_consensus_peers_connected";
/// Followers connected to this validator (secondary p2p peers).
pub const FOLLOWERS: &str = "sluice_consensus_followers_connected";
/// Peer connections dropped because nothing (not even a ping) came over
/// them for `consensus.p2p_idle_timeout_ms`: a dead path, redialled.
pub const P2P_IDLE_DISCONNECTS: &str = "sluice_p2p_idle_disconnects_total";
/// Bytes on disk of marshal's finalized archives (blocks and their
/// finalizations): bounded by `archive_retention_blocks`, growing without
/// one.
pub const ARCHIVE_BYTES: &str = "sluice_consensus_archive_bytes";
/// First height of the oldest section marshal's block archive keeps:
/// peers catching up can backfill from here (0 before anything is stored).
pub const ARCHIVE_OLDEST_HEIGHT: &str = "sluice_consensus_archive_oldest_height";
/// Finalizations a follower received, by `outcome`: `accepted` (verified
/// and newer than any before; older ones are not counted), `forged` (did
/// not verify: the sender is blocked).
pub const FOLLOWER_FINALIZATIONS: &str = "sluice_follower_finalizations_total";
/// Finalized blocks left off this node's finalized-block feed, by
/// `reason`: `publisher_stopped` (the node is stopping).
pub const FEED_UNPUBLISHED: &str = "sluice_feed_unpublished_total";
/// Blocks this node's feed served without a certificate of their own
/// (backfilled: proven final by a certified descendant).
pub const FEED_UNCERTIFIED: &str = "sluice_feed_uncertified_total";
/// Upstream feed connections a follower left (failed, closed, silent,
/// lying or too far ahead), each followed by the next upstream.
pub const UPSTREAM_FAILURES: &str = "sluice_follower_upstream_failures_total";
/// Whether a follower over the feed is connected to an upstream now.
pub const UPSTREAM_CONNECTED: &str = "sluice_follower_upstream_connected";
/// Transactions a follower over the feed sent on to its upstream.
pub const UPSTREAM_FORWARDED_TXS: &str = "sluice_follower_forwarded_txs_total";
/// Highest height whose app hash a finalized reference confirmed.
pub const VERIFIED_HEIGHT: &str = "sluice_verified_height";

/// Describes every metric and sets it to zero.
pub fn describe() {
    metrics::describe_gauge!(VIEW, "Latest consensus view entered");
    metrics::describe_gauge!(FINALIZED_HEIGHT, "Highest finalized height");
    metrics::describe_gauge!(LAG_BLOCKS, "Finalized minus committed height");
    metrics::describe_histogram!(FINALIZE_SECONDS, "Notarization to finalization, seconds");
    metrics::describe_counter!(VERIFY_TOTAL, "Verify verdicts on proposals");
    metrics::describe_counter!(REQUEUED_TXS, "Transactions put back after a proposal lost its height");
    metrics::describe_counter!(EMPTY_PROPOSALS, "Proposals made empty on purpose");
    metrics::describe_counter!(EVIDENCE_TOTAL, "Conflicting votes seen, by kind");
    metrics::describe_gauge!(PEERS, "Validators connected");
    metrics::describe_gauge!(FOLLOWERS, "Followers connected (secondary p2p peers)");
    metrics::describe_counter!(NULLIFIED_VIEWS, "Views nullified (no block)");
    metrics::describe_gauge!(LAST_FINALIZED_TIME, "Unix time of the last finalization seen");
    metrics::counter!(NULLIFIED_VIEWS).increment(0);
    metrics::describe_counter!(P2P_IDLE_DISCONNECTS, "Peer connections dropped after the idle timeout");
    metrics::counter!(P2P_IDLE_DISCONNECTS).increment(0);
    metrics::gauge!(LAST_FINALIZED_TIME).set(unix_now());
    metrics::describe_counter!(GOSSIP_SENT_TXS, "Transactions sent to the other validators");
    metrics::describe_counter!(GOSSIP_SENT_BATCHES, "Transaction batches sent to the other validators");
    metrics::describe_counter!(GOSSIP_RECEIVED_TXS, "Transactions received from other validators");
    metrics::describe_counter!(
        GOSSIP_REFUSED_BATCHES,
        "Transaction batches dropped: over a limit or malformed"
    );
    for c in [GOSSIP_SENT_TXS, GOSSIP_SENT_BATCHES, GOSSIP_RECEIVED_TXS, GOSSIP_REFUSED_BATCHES] {
        metrics::counter!(c).increment(0);
    }
    metrics::describe_gauge!(VERIFIED_HEIGHT, "Highest height confirmed by a finalized reference");
    metrics::describe_gauge!(ARCHIVE_BYTES, "Bytes of consensus's finalized archives on disk");
    metrics::describe_gauge!(
        ARCHIVE_OLDEST_HEIGHT,
        "Oldest height section kept in consensus's block archive"
    );
    for g in [
        VIEW,
        FINALIZED_HEIGHT,
        LAG_BLOCKS,
        PEERS,
        FOLLOWERS,
        VERIFIED_HEIGHT,
        ARCHIVE_BYTES,
        ARCHIVE_OLDEST_HEIGHT,
    ] {
        metrics::gauge!(g).set(0.0);
    }
    for verdict in ["accept", "reject"] {
        metrics::counter!(VERIFY_TOTAL, "verdict" => verdict).increment(0);
    }
    metrics::describe_counter!(PROPOSALS_REFUSED, "Proposals refused by this validator, by reason");
    let checks = ["header", "timestamp", "state_ref"];
    for reason in checks.into_iter().chain(sluice_txpool::PROPOSAL_REFUSAL_REASONS) {
        metrics::counter!(PROPOSALS_REFUSED, "reason" => reason).increment(0);
    }
    for reason in ["exec_lag", "unresolved"] {
        metrics::counter!(EMPTY_PROPOSALS, "reason" => reason).increment(0);
    }
    metrics::counter!(REQUEUED_TXS).increment(0);
    for kind in EVIDENCE_KINDS {
        metrics::counter!(EVIDENCE_TOTAL, "kind" => kind).increment(0);
    }
    metrics::describe_counter!(FOLLOWER_FINALIZATIONS, "Finalizations a follower received, by outcome");
    for outcome in ["accepted", "forged"] {
        metrics::counter!(FOLLOWER_FINALIZATIONS, "outcome" => outcome).increment(0);
    }
    metrics::describe_counter!(UPSTREAM_FAILURES, "Upstream feed connections a follower left");
    metrics::describe_gauge!(UPSTREAM_CONNECTED, "Follower connected to an upstream feed (1) or not (0)");
    metrics::describe_counter!(UPSTREAM_FORWARDED_TXS, "Transactions a follower sent on to its upstream");
    metrics::counter!(UPSTREAM_FAILURES).increment(0);
    metrics::counter!(UPSTREAM_FORWARDED_TXS).increment(0);
    metrics::gauge!(UPSTREAM_CONNECTED).set(0.0);
    metrics::describe_counter!(FEED_UNPUBLISHED, "Finalized blocks left off the feed, by reason");
    metrics::counter!(FEED_UNPUBLISHED, "reason" => "publisher_stopped").increment(0);
    metrics::describe_counter!(FEED_UNCERTIFIED, "Feed blocks served without a certificate of their own");
    metrics::counter!(FEED_UNCERTIFIED).increment(0);
    // Registered without an observation: count 0 from the first scrape.
    let _ = metrics::histogram!(FINALIZE_SECONDS);
}

/// Seconds since the Unix epoch, now (0 if the clock is before it).
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
