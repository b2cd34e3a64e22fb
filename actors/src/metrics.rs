//! Metric names, help texts and the Prometheus exporter.
//!
//! Names follow Prometheus conventions: the `sluice_` prefix, base units
//! (`_seconds`, `_bytes`), counters ending in `_total`. Histograms have real
//! buckets (not summaries) so `histogram_quantile` works in Grafana.

use std::net::SocketAddr;

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};

/// Messages waiting in an actor's mailbox (label `actor`).
pub const MAILBOX_DEPTH: &str = "sluice_mailbox_depth";
/// An actor's mailbox bound.
pub const MAILBOX_CAPACITY: &str = "sluice_mailbox_capacity";
/// The most messages ever seen waiting in an actor's mailbox.
pub const MAILBOX_HIGH_WATER: &str = "sluice_mailbox_high_water";
/// Messages refused because the mailbox was full.
pub const MAILBOX_REJECTED: &str = "sluice_mailbox_rejected_total";
/// Sends that found the actor's mailbox full and waited for room: the
/// backpressure the stage before experienced.
pub const MAILBOX_WAITS: &str = "sluice_mailbox_waits_total";
/// Messages handled by an actor.
pub const ACTOR_MESSAGES: &str = "sluice_actor_messages_total";
/// Time an actor spent handling one message.
pub const ACTOR_HANDLE_SECONDS: &str = "sluice_actor_handle_seconds";
/// Height of the last block sealed by the producer.
pub const PRODUCED_HEIGHT: &str = "sluice_pipeline_produced_height";
/// Height of the last block prepared (decoded, senders recovered).
pub const PREPARED_HEIGHT: &str = "sluice_pipeline_prepared_height";
/// Height of the last block executed.
pub const EXECUTED_HEIGHT: &str = "sluice_pipeline_executed_height";
/// Height of the last block committed.
pub const COMMITTED_HEIGHT: &str = "sluice_pipeline_committed_height";
/// Transactions per sealed block.
pub const BLOCK_TXS: &str = "sluice_block_txs";
/// Time between consecutive sealed blocks.
pub const BLOCK_INTERVAL_SECONDS: &str = "sluice_block_interval_seconds";
/// Gas used per executed block.
pub const BLOCK_GAS_USED: &str = "sluice_block_gas_used";
/// Transactions that could not be applied at their position.
pub const TXS_SKIPPED: &str = "sluice_txs_skipped_total";
/// Transactions included (applied) in committed blocks.
pub const TXS_INCLUDED: &str = "sluice_txs_included_total";
/// Failpoints fired, by actor and action.
pub const FAULTS_INJECTED: &str = "sluice_faults_injected_total";
/// Actors restarted in place after a contained panic, by actor.
pub const ACTOR_RESTARTS: &str = "sluice_actor_restarts_total";
/// Admitted transactions given up on (logged with their hash), by reason.
pub const TXS_DROPPED: &str = "sluice_txs_dropped_total";
/// `reason` of [`TXS_DROPPED`]: lost to an injected `drop` fault.
pub const DROP_FAULT: &str = "fault_drop";
/// `reason` of [`TXS_DROPPED`]: the node halted before they were committed.
pub const DROP_HALTED: &str = "halted";
/// `reason` of [`TXS_DROPPED`]: held for a nonce gap longer than
/// `mempool.future_tx_lifetime_ms`.
pub const DROP_FUTURE_EXPIRED: &str = "future_expired";
/// `reason` of [`TXS_DROPPED`]: held for a nonce gap that another
/// transaction filled, or refused when its gap filled (funds, limits).
pub const DROP_FUTURE_REFUSED: &str = "future_refused";
/// `reason` of [`TXS_DROPPED`]: held for a nonce gap and evicted from the
/// full queue by another sender's (its sender held the most).
pub const DROP_FUTURE_EVICTED: &str = "future_evicted";
/// `reason` of [`TXS_DROPPED`]: a sender's last in-flight transaction,
/// evicted from the full pool by another sender's better-paying one.
pub const DROP_EVICTED: &str = "evicted";
/// Transactions held for a nonce gap.
pub const MEMPOOL_FUTURE_TXS: &str = "sluice_mempool_future_txs";
/// `reason` of [`TXS_DROPPED`]: a failed proposal's transactions found the
/// producer's mailbox full (or closed) on their way back to the mempool.
pub const DROP_RESTORE_REFUSED: &str = "restore_refused";
/// `reason` of [`TXS_DROPPED`]: the nonce actor panicked after reserving a
/// transaction and before sending it to its shard (its client, if any, was
/// answered with an error).
pub const DROP_RESTARTED: &str = "restarted";
/// `reason` of [`TXS_DROPPED`]: a same-nonce replacement whose original
/// had already been taken for a block when the replacement reached its
/// shard (the original spends the nonce).
pub const DROP_REPLACED_TOO_LATE: &str = "replaced_too_late";
/// Time to execute a block.
pub const EXECUTE_SECONDS: &str = "sluice_execute_block_seconds";
/// Time to prepare a block.
pub const PREPARE_SECONDS: &str = "sluice_prepare_block_seconds";
/// Blocks executed, by path (label `path`: `scheduled`, `lanes`,
/// `journal`; `sequential` only for a node configured with the oracle)
/// and, for the in-order paths, why (label `reason`: `configured`,
/// `small_block`, `busy`, `gave_up_recently`, `unsupported`, `contention`;
/// absent on the parallel paths).
pub const OCC_BLOCKS: &str = "sluice_occ_blocks_total";
/// Transactions executed again on lanes, because a chunk before theirs
/// changed what they read.
pub const OCC_RERUNS: &str = "sluice_occ_reruns_total";
/// Times the one journal settled within a block: after a creation, a
/// self-destruct or an account that exists empty, around an EIP-7702
/// transaction (see `sluice_executor::journal`).
pub const OCC_SETTLES: &str = "sluice_occ_settles_total";
/// Time of each phase of parallel execution (label `phase`: speculate,
/// validate, merge; see `sluice_executor::ExecPath`).
pub const OCC_PHASE_SECONDS: &str = "sluice_occ_phase_seconds";
/// Time of each phase of block preparation (label `phase`: hash, lookup,
/// recover).
pub const PREPARE_PHASE_SECONDS: &str = "sluice_prepare_phase_seconds";
/// Prepared blocks waiting for the execution stage.
pub const PREPARED_AHEAD: &str = "sluice_prepare_blocks_ahead";
/// Time to commit a block (database write, sync and in-memory apply).
pub const COMMIT_SECONDS: &str = "sluice_store_commit_seconds";
/// Transactions offered to admission, by result.
pub const TX_ADMISSION: &str = "sluice_tx_admission_total";
/// Submissions the recovery stage checked (sender recovered or refused):
/// beside [`TX_ADMISSION`], how much of admission's most expensive step
/// went to transactions that were then refused anyway.
pub const RECOVERY_CHECKED: &str = "sluice_recovery_checked_total";
/// Time a transaction spends in nonce reservation.
pub const NONCE_RESERVE_SECONDS: &str = "sluice_nonce_reserve_seconds";
/// Transactions waiting in the mempool.
pub const MEMPOOL_TXS: &str = "sluice_mempool_txs";
/// Raw bytes waiting in the mempool.
pub const MEMPOOL_BYTES: &str = "sluice_mempool_bytes";
/// Transactions waiting per mempool shard (label `shard`).
pub const MEMPOOL_SHARD_TXS: &str = "sluice_mempool_shard_txs";
/// Transactions that left the mempool without being proposed here, by
/// `reason`: `included` (a committed block this node did not build
/// carried them).
pub const MEMPOOL_PRUNED: &str = "sluice_mempool_pruned_total";
/// Transactions another validator sent, by admission `result` (as
/// [`TX_ADMISSION`]; `already_known` for the copies of what is queued
/// here, `committed` for copies of what this node has committed).
pub const GOSSIP_ADMITTED: &str = "sluice_gossip_admitted_total";
/// Transactions admitted here from this node's clients that were not sent
/// to the other validators: `consensus.gossip_queue_txs` was full.
pub const GOSSIP_UNSENT: &str = "sluice_gossip_unsent_txs_total";
/// Senders with admitted, unexecuted transactions.
pub const NONCE_SENDERS: &str = "sluice_nonce_tracked_senders";
/// Prepared-transaction cache lookups that found the sender.
pub const CACHE_HITS: &str = "sluice_prepared_cache_hits_total";
/// Prepared-transaction cache lookups that had to recover.
pub const CACHE_MISSES: &str = "sluice_prepared_cache_misses_total";
/// Prepared-transaction cache entries evicted.
pub const CACHE_EVICTIONS: &str = "sluice_prepared_cache_evictions_total";
/// Prepared-transaction cache entries held.
pub const CACHE_SIZE: &str = "sluice_prepared_cache_entries";
/// Build information (labels `version`), always 1.
pub const BUILD_INFO: &str = "sluice_build_info";
/// Time to write (and sync) one block to the database, synced commits only.
pub const STORE_SYNC_SECONDS: &str = "sluice_store_sync_seconds";
/// Size of the database file.
pub const STORE_DB_BYTES: &str = "sluice_store_db_bytes";
/// Bytes on disk of each of the store's tables (`table`: blocks, results,
/// tx_index, accounts, ...): which one grows.
pub const STORE_TABLE_BYTES: &str = "sluice_store_table_bytes";
/// The oldest block kept (bodies, receipts; 0 while every block is kept).
pub const STORE_OLDEST_BLOCK: &str = "sluice_store_oldest_block";
/// The oldest block whose state can be read.
pub const STORE_OLDEST_STATE: &str = "sluice_store_oldest_state";
/// Height of the last app hash recorded in the hash vault.
pub const STORE_APP_HASH_HEIGHT: &str = "sluice_store_app_hash_height";
/// Bytes the state cache holds (accounts, storage, code).
pub const STATE_CACHE_BYTES: &str = "sluice_state_cache_bytes";
/// Current-state reads by the executor and admission (labels `kind`:
/// account, storage; `result`: hit, miss; a miss reads the database).
pub const STATE_CACHE_READS: &str = "sluice_state_cache_reads_total";
/// 1 while the store is halted after a failed commit.
pub const STORE_HALTED: &str = "sluice_store_halted";
/// Reads of the database (blocks, block hashes, transaction positions)
/// that failed with an I/O error and were answered with it, without
/// halting the store (`Store::read_errors`; damage still halts).
pub const STORE_READ_ERRORS: &str = "sluice_store_read_errors_total";
/// Bytes in the pending-transaction journal file.
pub const TXJOURNAL_BYTES: &str = "sluice_txjournal_bytes";
/// Time of one group commit to the journal (write and `fdatasync`).
pub const TXJOURNAL_SYNC_SECONDS: &str = "sluice_txjournal_sync_seconds";
/// Journaled transactions offered again at start, by admission result
/// (`committed`: already in a block, not offered).
pub const TXJOURNAL_REPLAYED: &str = "sluice_txjournal_replayed_total";
/// The prefix of the process metrics (`metrics-process`, the names
/// Prometheus's client libraries use): `sluice_process_cpu_seconds_total`
/// (a counter of whole seconds, for `rate()`), `_resident_memory_bytes`,
/// `_virtual_memory_bytes`, `_open_fds`, `_max_fds`, `_threads`,
/// `_start_time_seconds`.
pub const PROCESS_PREFIX: &str = "sluice_";

/// Buckets for handle and request latencies: 10 us to 10 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 10.0,
];
/// Buckets for transactions per block.
const TX_COUNT_BUCKETS: &[f64] =
    &[1.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 10000.0];
/// Buckets for gas per block.
const GAS_BUCKETS: &[f64] = &[21_000.0, 1e5, 1e6, 5e6, 1e7, 3e7, 6e7, 1e8, 1.5e8, 3e8];

/// Installs the global recorder and serves `/metrics` on `addr` from its own
/// thread (so a busy pipeline never delays a scrape).
pub fn install(addr: SocketAddr) -> Result<(), BuildError> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(BLOCK_TXS.into()), TX_COUNT_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(BLOCK_GAS_USED.into()), GAS_BUCKETS)?
        .install()?;
    describe();
    zeros();
    // The JSON-RPC server's own families (it describes them itself).
    sluice_rpc::metrics::register();
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    Ok(())
}

/// Every family the dashboards query exists from the first scrape, at zero,
/// so a fresh node's panels show 0 rather than "No data". Families with a
/// label get one representative series (the dashboards sum over labels);
/// histograms are registered without an observation (count 0).
fn zeros() {
    let counters = [TXS_SKIPPED, TXS_INCLUDED, OCC_RERUNS, OCC_SETTLES, STORE_READ_ERRORS];
    for counter in counters.into_iter().chain([CACHE_HITS, CACHE_MISSES, CACHE_EVICTIONS]) {
        metrics::counter!(counter).increment(0);
    }
    // Heights are set to the store's head by the node as it starts.
    for gauge in [MEMPOOL_FUTURE_TXS, NONCE_SENDERS, PREPARED_AHEAD, CACHE_SIZE] {
        metrics::gauge!(gauge).set(0.0);
    }
    let histograms = [BLOCK_TXS, BLOCK_INTERVAL_SECONDS, BLOCK_GAS_USED, EXECUTE_SECONDS, PREPARE_SECONDS];
    for histogram in
        histograms.into_iter().chain([COMMIT_SECONDS, STORE_SYNC_SECONDS, TXJOURNAL_SYNC_SECONDS])
    {
        let _ = metrics::histogram!(histogram);
    }
    for phase in ["hash", "lookup", "recover"] {
        let _ = metrics::histogram!(PREPARE_PHASE_SECONDS, "phase" => phase);
    }
    metrics::counter!(OCC_BLOCKS, "path" => "scheduled").increment(0);
    metrics::gauge!(STATE_CACHE_BYTES).set(0.0);
    for kind in ["account", "storage"] {
        for result in ["hit", "miss"] {
            metrics::counter!(STATE_CACHE_READS, "kind" => kind, "result" => result).increment(0);
        }
    }
    metrics::counter!(TX_ADMISSION, "result" => "ok").increment(0);
    metrics::counter!(RECOVERY_CHECKED).increment(0);
    metrics::counter!(GOSSIP_ADMITTED, "result" => "ok").increment(0);
    metrics::counter!(GOSSIP_ADMITTED, "result" => "committed").increment(0);
    metrics::counter!(GOSSIP_UNSENT).increment(0);
    metrics::gauge!(TXJOURNAL_BYTES).set(0.0);
    metrics::counter!(TXJOURNAL_REPLAYED, "result" => "ok").increment(0);
    metrics::counter!(MEMPOOL_PRUNED, "reason" => "included").increment(0);
    let _ = metrics::histogram!(NONCE_RESERVE_SECONDS);
    for phase in ["speculate", "validate", "merge"] {
        let _ = metrics::histogram!(OCC_PHASE_SECONDS, "phase" => phase);
    }
}

fn describe() {
    describe_gauge!(MAILBOX_DEPTH, "Messages waiting in the actor's mailbox");
    describe_gauge!(MAILBOX_CAPACITY, "The actor's mailbox bound");
    describe_gauge!(MAILBOX_HIGH_WATER, "Most messages ever seen waiting in the actor's mailbox");
    describe_counter!(MAILBOX_REJECTED, "Messages refused because the actor's mailbox was full");
    describe_counter!(MAILBOX_WAITS, "Sends that found the actor's mailbox full and waited for room");
    describe_counter!(ACTOR_MESSAGES, "Messages handled by the actor");
    describe_histogram!(ACTOR_HANDLE_SECONDS, Unit::Seconds, "Time the actor spent handling one message");
    describe_gauge!(PRODUCED_HEIGHT, "Height of the last block sealed by the producer");
    describe_gauge!(PREPARED_HEIGHT, "Height of the last prepared block");
    describe_gauge!(EXECUTED_HEIGHT, "Height of the last executed block");
    describe_gauge!(COMMITTED_HEIGHT, "Height of the last committed block");
    describe_histogram!(BLOCK_TXS, "Transactions per sealed block");
    describe_histogram!(BLOCK_INTERVAL_SECONDS, Unit::Seconds, "Time between consecutive sealed blocks");
    describe_histogram!(BLOCK_GAS_USED, "Gas used per executed block");
    describe_counter!(TXS_SKIPPED, "Transactions that could not be applied at their position in a block");
    describe_counter!(TXS_INCLUDED, "Transactions applied in committed blocks");
    describe_counter!(FAULTS_INJECTED, "Failpoints fired, by actor and action");
    describe_counter!(ACTOR_RESTARTS, "Actors restarted in place after a contained panic");
    describe_counter!(
        TXS_DROPPED,
        "Admitted transactions given up on, by reason (each logged with its hash)"
    );
    describe_histogram!(EXECUTE_SECONDS, Unit::Seconds, "Time to execute one block");
    describe_histogram!(PREPARE_SECONDS, Unit::Seconds, "Time to prepare one block");
    describe_counter!(OCC_BLOCKS, "Blocks executed, by path (scheduled, lanes, journal) and why in order");
    describe_counter!(OCC_RERUNS, "Transactions executed again on lanes");
    describe_counter!(
        OCC_SETTLES,
        "Times the one journal settled within a block (creations, self-destructs, EIP-7702, empty accounts)"
    );
    describe_histogram!(OCC_PHASE_SECONDS, Unit::Seconds, "Time of each phase of parallel execution");
    describe_histogram!(PREPARE_PHASE_SECONDS, Unit::Seconds, "Time of each phase of block preparation");
    describe_gauge!(PREPARED_AHEAD, "Prepared blocks waiting for the execution stage");
    describe_histogram!(COMMIT_SECONDS, Unit::Seconds, "Time to commit one block");
    describe_counter!(TX_ADMISSION, "Transactions offered to admission, by result");
    describe_counter!(
        RECOVERY_CHECKED,
        "Submissions checked by the recovery stage (decode, checks, sender recovery)"
    );
    describe_histogram!(NONCE_RESERVE_SECONDS, Unit::Seconds, "Time from submission to nonce reservation");
    describe_gauge!(MEMPOOL_TXS, "Transactions waiting in the mempool");
    describe_gauge!(MEMPOOL_FUTURE_TXS, "Transactions held for a nonce gap (queued)");
    describe_gauge!(MEMPOOL_BYTES, Unit::Bytes, "Raw bytes waiting in the mempool");
    describe_gauge!(MEMPOOL_SHARD_TXS, "Transactions waiting per mempool shard");
    describe_counter!(
        MEMPOOL_PRUNED,
        "Transactions that left the mempool because a block already holds them, by reason"
    );
    describe_counter!(GOSSIP_ADMITTED, "Transactions other validators sent, by admission result");
    describe_counter!(
        GOSSIP_UNSENT,
        "Transactions admitted here but not sent to the other validators (queue full)"
    );
    describe_gauge!(NONCE_SENDERS, "Senders with admitted, unexecuted transactions");
    describe_counter!(CACHE_HITS, "Prepared-transaction cache hits");
    describe_counter!(CACHE_MISSES, "Prepared-transaction cache misses");
    describe_counter!(CACHE_EVICTIONS, "Prepared-transaction cache evictions");
    describe_gauge!(CACHE_SIZE, "Prepared-transaction cache entries");
    describe_gauge!(BUILD_INFO, "Build information; always 1");
    describe_histogram!(
        STORE_SYNC_SECONDS,
        Unit::Seconds,
        "Time to write and sync one block to the database"
    );
    describe_gauge!(TXJOURNAL_BYTES, Unit::Bytes, "Bytes in the pending-transaction journal file");
    describe_histogram!(
        TXJOURNAL_SYNC_SECONDS,
        Unit::Seconds,
        "Time of one group commit to the transaction journal (write and fdatasync)"
    );
    describe_counter!(
        TXJOURNAL_REPLAYED,
        "Journaled transactions offered again at start, by admission result (committed: already in a block)"
    );
    describe_gauge!(STORE_DB_BYTES, Unit::Bytes, "Size of the database file");
    describe_gauge!(STORE_TABLE_BYTES, Unit::Bytes, "Bytes on disk of each of the store's tables");
    describe_gauge!(STORE_OLDEST_BLOCK, "The oldest block kept (0 while every block is kept)");
    describe_gauge!(STORE_OLDEST_STATE, "The oldest block whose state can be read");
    describe_gauge!(
        STATE_CACHE_BYTES,
        Unit::Bytes,
        "Bytes held by the current-state cache (accounts, storage, code)"
    );
    describe_counter!(
        STATE_CACHE_READS,
        "Current-state reads by kind and whether the cache answered (hit) or the database did (miss)"
    );
    describe_gauge!(STORE_APP_HASH_HEIGHT, "Height of the last app hash recorded in the hash vault");
    describe_gauge!(
        STORE_HALTED,
        "1 while the store is halted (failed commit, or an actor failing too often)"
    );
    describe_counter!(
        STORE_READ_ERRORS,
        "Database reads that failed with an I/O error and were answered with it, without halting the store"
    );
}

/// Per-actor counters and histogram handles, resolved once so handling a
/// message costs two clock reads and two atomic updates.
#[derive(Clone)]
pub struct ActorMetrics {
    messages: metrics::Counter,
    handle: metrics::Histogram,
}

impl ActorMetrics {
    /// Handles for `actor`.
    pub fn new(actor: &'static str) -> Self {
        ActorMetrics {
            messages: metrics::counter!(ACTOR_MESSAGES, "actor" => actor),
            handle: metrics::histogram!(ACTOR_HANDLE_SECONDS, "actor" => actor),
        }
    }

    /// Records one handled message that started at `start`.
    pub fn handled(&self, start: std::time::Instant) {
        self.messages.increment(1);
        self.handle.record(start.elapsed().as_secs_f64());
    }
}
