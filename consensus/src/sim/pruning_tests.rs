//! Pruning: with a retention, marshal's archives stay bounded, a validator
//! behind by less than it catches up from them, and one behind by more
//! halts naming the oldest block the others serve.

use sluice_store::Halt;

use super::{link, run, Sim, MINUTE};
use crate::backend::Backend as _;

/// With a retention, each validator's archives keep a bounded window of
/// sections below its committed height, however long the chain: the
/// oldest section moves up with it and their number stays flat. Execution
/// still agrees everywhere.
#[test]
fn archives_stay_bounded_with_a_retention() {
    use super::ARCHIVE_SECTION;
    const RETENTION: u64 = 64;
    const TOP: u64 = 2_000;
    run("archives_stay_bounded_with_a_retention", 11, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        sim.archive_retention = std::num::NonZeroU64::new(RETENTION);
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let all = [0, 1, 2, 3];
        let section = ARCHIVE_SECTION.get();
        // Kept: from the section of (committed at the last prune - the
        // retention), pruned again every section of commits, up to the
        // finalized head's section (a few blocks past the committed one).
        let most = RETENTION / section + 4;
        let mut seen = 0;
        // Every 200 heights, from three retentions up.
        for target in (1..=TOP / 200).map(|k| k * 200) {
            sim.reach(&all, target, 5 * MINUTE).await;
            for i in all {
                let head = sim.recorder.head(i);
                for (partition, sections) in sim.archive_sections(i).await {
                    let oldest = *sections.first().unwrap_or_else(|| panic!("{partition}: nothing stored"));
                    assert!(
                        sections.len() as u64 <= most,
                        "{partition} at committed {head}: {} sections kept ({sections:?}), at most {most}",
                        sections.len()
                    );
                    assert!(
                        oldest + RETENTION + 2 * section >= head,
                        "{partition} at committed {head}: oldest section {oldest} was not pruned"
                    );
                    seen = seen.max(sections.len());
                }
            }
        }
        eprintln!("at most {seen} sections kept per partition up to height {TOP}");
        let top = all.iter().map(|&i| sim.recorder.head(i)).min().unwrap_or(0);
        assert!(top >= TOP);
        sim.recorder.assert_identical(&all, top);
    });
}

/// A validator cut off for fewer blocks than the others keep in their
/// pruned archives backfills from them after the heal and commits what
/// they committed.
#[test]
fn an_isolated_validator_catches_up_from_pruned_archives() {
    const RETENTION: u64 = 64;
    run("an_isolated_validator_catches_up_from_pruned_archives", 12, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        sim.archive_retention = std::num::NonZeroU64::new(RETENTION);
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let (all, others) = ([0, 1, 2, 3], [0, 1, 2]);
        // Well past the retention: the others have pruned.
        sim.reach(&all, 5 * RETENTION, 5 * MINUTE).await;
        sim.cut(&[3], &others).await;
        let cut_at = sim.recorder.head(3);
        sim.reach(&others, cut_at + RETENTION / 2, 2 * MINUTE).await;
        for i in others {
            let (partition, sections) = sim.archive_sections(i).await.remove(0);
            assert!(sections[0] > 0, "{partition} was never pruned: {sections:?}");
        }
        sim.link_all(link(10, 2, 100)).await;
        let head = sim.max_head();
        sim.reach(&all, head, 2 * MINUTE).await;
        sim.recorder.assert_identical(&all, head);
    });
}

/// Cut off for longer than the others keep blocks, a validator cannot
/// catch up (they no longer serve the blocks it needs next): once it hears
/// of the network's height again, it halts with an error naming the oldest
/// block they serve, rather than waiting forever.
#[test]
fn a_validator_behind_by_more_than_the_retention_halts_naming_the_oldest_block_served() {
    const RETENTION: u64 = 64;
    run("a_validator_behind_by_more_than_the_retention_halts", 13, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        sim.archive_retention = std::num::NonZeroU64::new(RETENTION);
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let (all, others) = ([0, 1, 2, 3], [0, 1, 2]);
        sim.reach(&all, 2 * RETENTION, 5 * MINUTE).await;
        sim.cut(&[3], &others).await;
        let cut_at = sim.recorder.head(3);
        // Far past what the others keep (the retention and a section).
        sim.reach(&others, cut_at + 4 * RETENTION, 5 * MINUTE).await;
        assert!(sim.backend(3).halted().is_none(), "cut off, it cannot know it is behind");
        sim.link_all(link(10, 2, 100)).await;
        let waited = 3 * MINUTE;
        let mut slept = std::time::Duration::ZERO;
        let why = loop {
            if let Some(halt) = sim.backend(3).halted() {
                assert!(matches!(halt, Halt::Consensus { .. }), "{halt}");
                break halt.to_string();
            }
            assert!(
                slept < waited,
                "validator 3 neither caught up nor halted: head {}",
                sim.recorder.head(3)
            );
            sim.sleep(std::time::Duration::from_secs(1)).await;
            slept += std::time::Duration::from_secs(1);
        };
        assert!(
            why.contains(&format!("committed block {}", sim.recorder.head(3)))
                && why.contains("the oldest block the others still serve is about"),
            "{why}"
        );
        // The others went on.
        let head = sim.max_head();
        sim.reach(&others, head + 10, MINUTE).await;
    });
}
