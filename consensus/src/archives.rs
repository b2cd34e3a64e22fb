//! Marshal's finalized archives (blocks and certificates by height):
//! their layout and section size, the older layout refused, and the
//! keeper that prunes them behind the store's committed height and keeps
//! their metrics current.

use std::{
    num::NonZeroU64,
    path::{Path, PathBuf},
    sync::{atomic::AtomicU64, Arc},
    time::Duration,
};

use commonware_consensus::types::Height;
use commonware_macros::select;
use commonware_runtime::{buffer::paged::CacheRef, Clock, Storage};
use commonware_storage::{archive::prunable, translator::EightCap};
use commonware_utils::NZU64;

use crate::{
    behind::CatchUp,
    engine::{EngineError, IO_BUFFER},
};

/// Heights per section of marshal's finalized archives (blocks and
/// certificates by height) in archive mode (no retention). Every section
/// is a key file and a value file held open, with an in-memory index of 8
/// bytes per height plus each key's: 16,384 heights is about 55 minutes at
/// a 200 ms block time, so a node keeping everything opens four files (two
/// per archive) per ~55 minutes of chain rather than per minute. With a
/// retention, pruning drops whole sections (a retention of R heights keeps
/// between R and R + a section): see [`PRUNED_ARCHIVE_ITEMS_PER_SECTION`].
pub(crate) const ARCHIVE_ITEMS_PER_SECTION: NonZeroU64 = NZU64!(1 << 14);
/// Heights per section while a retention is kept (full mode): pruning
/// keeps at most this many heights beyond the retention (~3.4 minutes of
/// 200 ms blocks), so the archives' bytes flatten soon after the
/// retention is reached.
pub(crate) const PRUNED_ARCHIVE_ITEMS_PER_SECTION: NonZeroU64 = NZU64!(1 << 10);

/// The file in the consensus storage dir recording the archives' section
/// size: fixed for the life of their data (a section is a blob named by
/// its first height), whatever the mode of later starts.
const SECTION_FILE: &str = "archive-items-per-section";

/// The section size of the archives in `dir`: the recorded one, or, for new
/// archives, [`PRUNED_ARCHIVE_ITEMS_PER_SECTION`] with a retention and
/// [`ARCHIVE_ITEMS_PER_SECTION`] without, recorded for the next start.
pub(crate) fn archive_section(dir: &Path, retention: Option<NonZeroU64>) -> std::io::Result<NonZeroU64> {
    let file = dir.join(SECTION_FILE);
    match std::fs::read_to_string(&file) {
        Ok(text) => text.trim().parse::<NonZeroU64>().map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", file.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let section = if retention.is_some() {
                PRUNED_ARCHIVE_ITEMS_PER_SECTION
            } else {
                ARCHIVE_ITEMS_PER_SECTION
            };
            std::fs::create_dir_all(dir)?;
            std::fs::write(&file, section.to_string())?;
            Ok(section)
        }
        Err(e) => Err(e),
    }
}

/// How often the archive metrics are refreshed between prunes: they move
/// only as blocks are appended, so a few seconds is current enough.
const ARCHIVE_METRICS_INTERVAL: Duration = Duration::from_secs(5);
/// The finalized archives, by the name their partitions carry.
pub(crate) const ARCHIVES: [&str; 2] = ["finalizations", "blocks"];
/// The partitions an older sluice's immutable archives wrote, by suffix
/// after `{prefix}-{archive}-`: any of them holding a blob means the data
/// dir is of that layout.
const IMMUTABLE_PARTITIONS: [&str; 5] =
    ["freezer-table", "freezer-key", "freezer-value", "ordinal", "metadata"];
/// The kinds of partition of one prunable archive.
const PRUNABLE_PARTITIONS: [&str; 3] = ["metadata", "key", "value"];

/// The partition of `archive`'s `kind` (metadata, key, value). Named apart
/// from the immutable archives' partitions (`{prefix}-{archive}-metadata`
/// among them), so the two layouts never share a partition.
pub(crate) fn archive_partition(prefix: &str, archive: &str, kind: &str) -> String {
    format!("{prefix}-{archive}-prunable-{kind}")
}

/// A finalized archive (blocks or certificates by height), pruned by
/// section of [`ARCHIVE_ITEMS_PER_SECTION`] heights (the simulation uses
/// smaller ones). Keys are block digests (keccak: uniform), so the first 8
/// bytes index them.
pub(crate) fn archive_config<C>(
    prefix: &str,
    name: &str,
    items_per_section: NonZeroU64,
    page_cache: &CacheRef,
    codec_config: C,
) -> prunable::Config<EightCap, C> {
    prunable::Config {
        translator: EightCap,
        metadata_partition: archive_partition(prefix, name, "metadata"),
        key_partition: archive_partition(prefix, name, "key"),
        key_page_cache: page_cache.clone(),
        value_partition: archive_partition(prefix, name, "value"),
        compression: None,
        codec_config,
        items_per_section,
        key_write_buffer: IO_BUFFER,
        value_write_buffer: IO_BUFFER,
        replay_buffer: IO_BUFFER,
    }
}

/// Refuses storage holding an older sluice's immutable archives: this build
/// cannot read them, and would otherwise start empty archives beside them
/// (the old ones never read again, never removed). `dir` names the storage
/// for the message.
pub(crate) async fn refuse_immutable_archives<E: Storage>(
    ctx: &E,
    prefix: &str,
    dir: Option<&Path>,
) -> Result<(), EngineError> {
    for archive in ARCHIVES {
        for kind in IMMUTABLE_PARTITIONS {
            let partition = format!("{prefix}-{archive}-{kind}");
            match ctx.scan(&partition).await {
                Ok(blobs) if !blobs.is_empty() => {
                    let dir = dir.map_or_else(|| "(in memory)".to_string(), |d| d.display().to_string());
                    return Err(EngineError::OlderArchives { dir, partition });
                }
                // Missing or empty: no immutable archive here.
                Ok(_) | Err(commonware_runtime::Error::PartitionMissing(_)) => {}
                Err(e) => return Err(EngineError::Scan { partition, source: e }),
            }
        }
    }
    Ok(())
}

/// Keeps marshal's finalized archives bounded: prunes them behind the
/// committed height as the store commits, and keeps the archive metrics
/// current.
pub(crate) struct ArchiveKeeper {
    /// The store's committed height, as it moves.
    pub(crate) committed: tokio::sync::watch::Receiver<u64>,
    /// The highest height finalized anywhere (marshal's tip).
    pub(crate) tip: Arc<AtomicU64>,
    /// Heights kept below the committed one; `None` keeps everything.
    pub(crate) retention: Option<NonZeroU64>,
    /// Heights per archive section (pruning's granularity).
    pub(crate) section: NonZeroU64,
    /// Prefix of the archives' partitions.
    pub(crate) prefix: String,
    /// Where the partitions are on disk, if they are (the size metric).
    pub(crate) dir: Option<PathBuf>,
}

impl ArchiveKeeper {
    /// Runs for the life of the validator (never returns: its handle
    /// ending would mean the validator stopped). `prune` asks marshal to
    /// drop what is below a height; `halt` stops the node when it fell
    /// further behind than its peers keep ([`crate::behind`]).
    pub(crate) async fn run<E: Clock + Storage>(
        mut self,
        ctx: E,
        prune: impl Fn(Height),
        halt: impl Fn(String),
    ) {
        let mut pruned_at = None;
        let mut watching = true;
        let mut refresh_at = ctx.current();
        let start = *self.committed.borrow();
        let mut catch_up =
            self.retention.map(|r| CatchUp::new(r, crate::behind::CATCH_UP_PATIENCE, start, ctx.current()));
        loop {
            let committed = *self.committed.borrow_and_update();
            let tip = self.tip.load(std::sync::atomic::Ordering::Acquire);
            if let Some(why) = catch_up.as_mut().and_then(|c| c.check(committed, tip, ctx.current())) {
                tracing::error!(reason = %why, "too far behind to catch up");
                halt(why);
            }
            if let Some(keep) = prune_target(committed, self.retention, self.section, pruned_at) {
                tracing::debug!(committed, keep, "pruning consensus archives");
                prune(Height::new(keep));
                pruned_at = Some(committed);
                // Marshal prunes on its own time: the refresh below shows
                // the previous prune, the next one this.
                refresh_at = ctx.current();
            }
            if ctx.current() >= refresh_at {
                self.refresh_metrics(&ctx).await;
                refresh_at = ctx.current() + ARCHIVE_METRICS_INTERVAL;
            }
            if watching {
                select! {
                    changed = self.committed.changed() => {
                        // The store stopped: nothing more to prune, but the
                        // metrics stay current until the validator stops.
                        watching = changed.is_ok();
                    },
                    _ = ctx.sleep_until(refresh_at) => {},
                }
            } else {
                ctx.sleep_until(refresh_at).await;
            }
        }
    }

    /// Sets the archive gauges: the oldest section the block archive keeps
    /// (listing a partition reads no blob) and, on disk, the archives'
    /// bytes.
    async fn refresh_metrics<E: Storage>(&self, ctx: &E) {
        let blocks_key = archive_partition(&self.prefix, "blocks", "key");
        if let Some(oldest) = archive_sections(ctx, &blocks_key).await.first() {
            metrics::gauge!(crate::metrics::ARCHIVE_OLDEST_HEIGHT).set(*oldest as f64);
        }
        if let Some(dir) = &self.dir {
            let bytes = archive_bytes(dir, &self.prefix);
            metrics::gauge!(crate::metrics::ARCHIVE_BYTES).set(bytes as f64);
        }
    }
}

/// The height below which to prune marshal's archives now, if any: only
/// with a retention, only once the committed height is past it, and only
/// once the committed height moved by a section since the last prune
/// (pruning drops whole sections, so a prune per block would mostly do
/// nothing). Always below the committed height: the forwarder replays
/// from the committed height up, and peers backfill from what is kept.
fn prune_target(
    committed: u64,
    retention: Option<NonZeroU64>,
    section: NonZeroU64,
    pruned_at: Option<u64>,
) -> Option<u64> {
    let keep = committed.checked_sub(retention?.get()).filter(|k| *k > 0)?;
    match pruned_at {
        Some(at) if committed < at.saturating_add(section.get()) => None,
        _ => Some(keep),
    }
}

/// The sections (their first heights, ascending) a prunable archive's
/// partition holds: each is one blob, named by its first height.
pub(crate) async fn archive_sections<E: Storage>(ctx: &E, partition: &str) -> Vec<u64> {
    let mut sections: Vec<u64> = match ctx.scan(partition).await {
        Ok(names) => names
            .iter()
            .filter_map(|n| <[u8; 8]>::try_from(n.as_slice()).ok())
            .map(u64::from_be_bytes)
            .collect(),
        Err(_) => Vec::new(),
    };
    sections.sort_unstable();
    sections
}

/// Bytes on disk of the finalized archives' partitions under `dir` (the
/// tokio runtime keeps a partition as a directory of that name, a blob as
/// a file in it). Unreadable entries count as 0: a metric, not a check.
fn archive_bytes(dir: &Path, prefix: &str) -> u64 {
    ARCHIVES
        .iter()
        .flat_map(|archive| {
            PRUNABLE_PARTITIONS.iter().map(move |kind| archive_partition(prefix, archive, kind))
        })
        .filter_map(|partition| std::fs::read_dir(dir.join(partition)).ok())
        .flatten()
        .filter_map(|entry| entry.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    #[test]
    fn the_section_size_is_chosen_once_per_data_dir() {
        let dir = std::env::temp_dir().join(format!("sluice-archive-section-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let retention = NonZeroU64::new(2_000);
        assert_eq!(archive_section(&dir, retention).unwrap(), PRUNED_ARCHIVE_ITEMS_PER_SECTION);
        // A later start in archive mode reads the archives it finds.
        assert_eq!(archive_section(&dir, None).unwrap(), PRUNED_ARCHIVE_ITEMS_PER_SECTION);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(archive_section(&dir, None).unwrap(), ARCHIVE_ITEMS_PER_SECTION);
        std::fs::write(dir.join(SECTION_FILE), "zero").unwrap();
        assert!(archive_section(&dir, retention).is_err(), "a damaged record is an error");
        let _ = std::fs::remove_dir_all(&dir);
    }

    use commonware_cryptography::{
        sha256::{Digest, Sha256},
        Hasher as _,
    };
    use commonware_runtime::{deterministic, Runner as _, Supervisor as _};
    use commonware_storage::archive::{immutable, Archive as _};

    use super::*;
    use crate::engine::{PAGE_CACHE_PAGES, PAGE_SIZE};

    /// The finalized archive an older sluice wrote (its config, as it was).
    fn immutable_config(prefix: &str, name: &str, page_cache: &CacheRef) -> immutable::Config<()> {
        immutable::Config {
            metadata_partition: format!("{prefix}-{name}-metadata"),
            freezer_table_partition: format!("{prefix}-{name}-freezer-table"),
            freezer_table_initial_size: 1 << 16,
            freezer_table_resize_frequency: 4,
            freezer_table_resize_chunk_size: 1 << 12,
            freezer_key_partition: format!("{prefix}-{name}-freezer-key"),
            freezer_key_page_cache: page_cache.clone(),
            freezer_value_partition: format!("{prefix}-{name}-freezer-value"),
            freezer_value_target_size: 1 << 28,
            freezer_value_compression: None,
            ordinal_partition: format!("{prefix}-{name}-ordinal"),
            items_per_section: NZU64!(1 << 12),
            codec_config: (),
            replay_buffer: IO_BUFFER,
            freezer_key_write_buffer: IO_BUFFER,
            freezer_value_write_buffer: IO_BUFFER,
            ordinal_write_buffer: IO_BUFFER,
        }
    }

    fn key(i: u64) -> Digest {
        Sha256::hash(&[&i.to_be_bytes()])
    }

    #[test]
    fn an_older_sluices_immutable_archives_are_refused_by_name() {
        deterministic::Runner::default().start(|ctx| async move {
            let page_cache = CacheRef::new(PAGE_SIZE, PAGE_CACHE_PAGES);
            let old = immutable::Archive::<_, Digest, u64>::init(
                ctx.child("old"),
                immutable_config("sluice", "finalizations", &page_cache),
            )
            .await
            .unwrap();
            old.put(1, key(1), &7).await.unwrap().sync().await.unwrap();

            let dir = Path::new("/var/lib/sluice/consensus");
            let err = refuse_immutable_archives(&ctx, "sluice", Some(dir)).await.unwrap_err();
            assert!(matches!(err, EngineError::OlderArchives { .. }), "{err:?}");
            let why = err.to_string();
            for part in
                ["older sluice", "immutable archives", "remove /var/lib/sluice/consensus", "--data-dir"]
            {
                assert!(why.contains(part), "{part:?} missing from: {why}");
            }
            // Another validator's prefix is not this one's storage.
            refuse_immutable_archives(&ctx, "v1", Some(dir)).await.unwrap();
        });
    }

    #[test]
    fn this_builds_prunable_archives_are_not_refused() {
        deterministic::Runner::default().start(|ctx| async move {
            let page_cache = CacheRef::new(PAGE_SIZE, PAGE_CACHE_PAGES);
            for name in ARCHIVES {
                let archive = prunable::Archive::<_, _, Digest, u64>::init(
                    ctx.child(name),
                    archive_config("sluice", name, NZU64!(4), &page_cache, ()),
                )
                .await
                .unwrap();
                let mut archive = archive;
                for h in 1..=9 {
                    archive = archive.put(h, key(h), &h).await.unwrap();
                }
                archive.sync().await.unwrap();
            }
            refuse_immutable_archives(&ctx, "sluice", None).await.unwrap();
            // Nine heights in sections of four: sections 0, 4 and 8.
            let key_partition = archive_partition("sluice", "blocks", "key");
            assert_eq!(archive_sections(&ctx, &key_partition).await, vec![0, 4, 8]);
        });
    }

    #[test]
    fn prunes_below_the_retention_once_per_section() {
        let (retention, section) = (NonZeroU64::new(100), NZU64!(32));
        // Nothing without a retention, nor until the committed height is past it.
        assert_eq!(prune_target(10_000, None, section, None), None);
        assert_eq!(prune_target(100, retention, section, None), None);
        assert_eq!(prune_target(101, retention, section, None), Some(1));
        // Then again only once the committed height moved a section.
        assert_eq!(prune_target(132, retention, section, Some(101)), None);
        assert_eq!(prune_target(133, retention, section, Some(101)), Some(33));
        // At once after a restart (no prune yet), always below committed.
        let keep = prune_target(5_000, NonZeroU64::new(1), section, None).unwrap();
        assert_eq!(keep, 4_999);
    }
}
