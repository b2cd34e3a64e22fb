//! Scenarios: agreement, a partition that heals, repeated crashes, a
//! diverged validator, lossy links. Each prints its seed; `SIM_SEED=N`
//! replays one.

use std::{collections::HashMap, time::Duration};

use alloy_primitives::B256;

use super::{evidence_counted, link, run, sender, transfer, Sim, SKIP_TIMEOUT};
use crate::backend::Backend as _;
use sluice_store::Halt;

const MINUTE: Duration = Duration::from_secs(60);

/// Submits `count` transfers to each of `nodes`, from one sender per node
/// (so each sender's nonces stay on one validator, as with real clients).
fn submit(sim: &Sim, nodes: &[usize], count: u64, nonces: &mut HashMap<usize, u64>, sent: &mut Vec<B256>) {
    for &i in nodes {
        let s = sender(i);
        let next = nonces.entry(i).or_default();
        for _ in 0..count {
            let tx = transfer(&s, *next);
            sent.push(tx.hash);
            sim.backend(i).submit(tx);
            *next += 1;
        }
    }
}

#[test]
fn four_agree() {
    run("four_agree", 1, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        let all = [0, 1, 2, 3];
        submit(&sim, &all, 30, &mut nonces, &mut sent);
        sim.reach(&all, 10, MINUTE).await;
        submit(&sim, &all, 30, &mut nonces, &mut sent);
        sim.reach(&all, 50, 2 * MINUTE).await;
        sim.recorder.assert_identical(&all, 50);
        for i in all {
            sim.recorder.assert_receipts(i, &sent);
        }
    });
}

#[test]
fn partition_heals() {
    run("partition_heals", 2, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        let all = [0, 1, 2, 3];
        submit(&sim, &all, 20, &mut nonces, &mut sent);
        sim.reach(&all, 10, MINUTE).await;
        // 2 | 2: no side has a quorum of 3.
        sim.cut(&[0, 1], &[2, 3]).await;
        sim.sleep(Duration::from_secs(2)).await;
        let stalled = sim.max_head();
        submit(&sim, &all, 20, &mut nonces, &mut sent);
        sim.sleep(Duration::from_secs(30)).await;
        assert!(
            sim.max_head() <= stalled + 1,
            "finality went on without a quorum: {} > {stalled}",
            sim.max_head()
        );
        sim.link_all(link(10, 2, 100)).await;
        sim.reach(&all, stalled + 20, 2 * MINUTE).await;
        sim.recorder.assert_identical(&all, stalled + 20);
        for i in all {
            sim.recorder.assert_receipts(i, &sent);
        }
    });
}

#[test]
fn crash_restart_rejoins() {
    run("crash_restart_rejoins", 3, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        for i in 0..4 {
            sim.start(i, None).await;
        }
        // Load only on validators that stay up: a crash loses its mempool,
        // as a process would (and says so in its log).
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        let up = [0, 1, 2];
        let all = [0, 1, 2, 3];
        sim.reach(&all, 5, MINUTE).await;
        for round in 0..3 {
            submit(&sim, &up, 10, &mut nonces, &mut sent);
            sim.crash(3);
            let before = sim.recorder.head(0);
            sim.reach(&up, before + 5, MINUTE).await;
            sim.start(3, None).await;
            let target = sim.recorder.head(0) + 3;
            sim.reach(&all, target, 2 * MINUTE).await;
            eprintln!("round {round}: validator 3 rejoined at {target}");
        }
        let top = all.iter().map(|&i| sim.recorder.head(i)).min().unwrap_or(0);
        sim.recorder.assert_identical(&all, top);
        for i in all {
            sim.recorder.assert_receipts(i, &sent);
        }
    });
}

#[test]
fn diverged_node_halts() {
    run("diverged_node_halts", 4, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        for i in 0..4 {
            sim.start(i, if i == 2 { Some(10) } else { None }).await;
        }
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        let honest = [0, 1, 3];
        submit(&sim, &honest, 20, &mut nonces, &mut sent);
        sim.reach(&honest, 30, 3 * MINUTE).await;
        let halt = sim.backend(2).halted().expect("the diverged validator halted");
        // The first reference at or past the divergence that it checks.
        let at = match &halt {
            Halt::Diverged { height, ours, theirs } if ours != theirs => Some(*height),
            _ => None,
        };
        assert!(at.is_some_and(|h| h >= 10), "{halt}");
        let diverged = sim.backend(2).store.diverged().map(|(h, _)| h);
        assert_eq!(diverged, at, "latched as a divergence from the named height: state reads refused");
        assert!(sim.recorder.head(2) < 30, "a halted validator kept committing");
        sim.recorder.assert_identical(&honest, 30);
        for i in honest {
            sim.recorder.assert_receipts(i, &sent);
        }
    });
}

#[test]
fn lossy_links() {
    run("lossy_links", 5, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(40, 20, 90)).await;
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        let all = [0, 1, 2, 3];
        submit(&sim, &all, 20, &mut nonces, &mut sent);
        sim.reach(&all, 30, 5 * MINUTE).await;
        sim.recorder.assert_identical(&all, 30);
        for i in all {
            sim.recorder.assert_receipts(i, &sent);
        }
    });
}

/// The same seed gives the same run: every message, timer and random draw
/// (the runtime's auditor hashes them all), so a failing seed replays.
#[test]
fn a_seed_replays_exactly() {
    let once = || {
        run("a_seed_replays_exactly", 6, |ctx| async move {
            let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
            for i in 0..4 {
                sim.start(i, None).await;
            }
            let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
            submit(&sim, &[0, 1, 2, 3], 5, &mut nonces, &mut sent);
            sim.reach(&[0, 1, 2, 3], 10, MINUTE).await;
            sim.ctx.auditor().state()
        })
    };
    assert_eq!(once(), once());
}

/// Virtual seconds for every node in `nodes` to commit `blocks` more
/// blocks than the lowest of them has now.
async fn time_for(sim: &Sim, nodes: &[usize], blocks: u64) -> f64 {
    use commonware_runtime::Clock as _;
    let from = nodes.iter().map(|&i| sim.recorder.head(i)).min().unwrap_or(0);
    let start = sim.ctx.current();
    sim.reach(nodes, from + blocks, 5 * MINUTE).await;
    sim.ctx.current().duration_since(start).unwrap_or_default().as_secs_f64()
}

/// `n` validators whose leaders take 200 ms to build (the producer's
/// block time); the last one crashes. Until it has been silent for the
/// skip timeout its views each cost a leader timeout (1 s): at most two
/// of them. From then on its views are skipped at once, and over 100
/// heights the others keep >= 0.9x the all-up block rate (without skips,
/// ~0.4x with 4).
fn a_dead_leader_costs_once(n: usize, seed: u64) {
    run(&format!("a_dead_leader_costs_once_{n}"), seed, |ctx| async move {
        let mut sim = Sim::new(ctx, n, link(10, 2, 100)).await;
        sim.block_time = Duration::from_millis(200);
        for i in 0..n {
            sim.start(i, None).await;
        }
        let all: Vec<usize> = (0..n).collect();
        let up = &all[..n - 1];
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        submit(&sim, up, 20, &mut nonces, &mut sent);
        sim.reach(&all, 5, MINUTE).await;
        let all_up = 100.0 / time_for(&sim, &all, 100).await;
        sim.crash(n - 1);
        submit(&sim, up, 20, &mut nonces, &mut sent);
        let transition = time_for(&sim, up, 10).await;
        let one_down = 100.0 / time_for(&sim, up, 100).await;
        eprintln!(
            "{n} validators: {all_up:.2} blocks/s all up; after a crash, 10 blocks in {transition:.2} s, \
             then {one_down:.2} blocks/s ({:.2}x; skip after {SKIP_TIMEOUT:?})",
            one_down / all_up
        );
        assert!(
            transition <= 10.0 / all_up + 2.0 + 0.5,
            "the crashed leader cost more than two timeouts: 10 blocks in {transition:.2} s"
        );
        assert!(
            one_down >= 0.9 * all_up,
            "one validator down: {one_down:.2} blocks/s against {all_up:.2} all up"
        );
        let top = up.iter().map(|&i| sim.recorder.head(i)).min().unwrap_or(0);
        sim.recorder.assert_identical(up, top);
        for &i in up {
            sim.recorder.assert_receipts(i, &sent);
        }
    });
}

#[test]
fn a_dead_leader_costs_once_of_four() {
    a_dead_leader_costs_once(4, 7);
}

#[test]
fn a_dead_leader_costs_once_of_ten() {
    a_dead_leader_costs_once(10, 8);
}

/// Validator 3 runs commonware's conflicter: it signs two notarizes and
/// two finalizes for every one it receives. The honest three agree, and
/// each counts the evidence. (Each then blocks the conflicter, so its
/// conflicting finalizes never arrive: simplex reports the first proof.)
#[test]
fn an_equivocating_validator_is_counted() {
    run("an_equivocating_validator_is_counted", 9, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        let before = evidence_counted("conflicting_notarize");
        let honest = [0, 1, 2];
        for i in honest {
            sim.start(i, None).await;
        }
        sim.start_conflicter(3).await;
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        submit(&sim, &honest, 20, &mut nonces, &mut sent);
        sim.reach(&honest, 20, 3 * MINUTE).await;
        sim.recorder.assert_identical(&honest, 20);
        for i in honest {
            sim.recorder.assert_receipts(i, &sent);
        }
        let after = evidence_counted("conflicting_notarize");
        assert!(after >= before + 3, "each honest validator counted the evidence: {before} -> {after}");
    });
}

#[test]
fn a_transaction_sent_to_every_validator_is_included_once() {
    run("a_transaction_sent_to_every_validator_is_included_once", 11, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let all = [0, 1, 2, 3];
        // Every sender's transactions to every validator, in waves, while
        // each leader proposes from its own copy of the pool.
        let mut sent = Vec::new();
        for wave in 0..3u64 {
            for s in 0..4 {
                for n in 0..20 {
                    let tx = transfer(&sender(s), wave * 20 + n);
                    sent.push(tx.hash);
                    for &i in &all {
                        sim.backend(i).submit(tx.clone());
                    }
                }
            }
            sim.reach(&all, (wave + 1) * 8, MINUTE).await;
        }
        sim.reach(&all, 40, 2 * MINUTE).await;
        sim.recorder.assert_identical(&all, 40);
        for i in all {
            // Twice would panic in the recorder; a copy proposed again
            // after another validator's block took it would be skipped.
            sim.recorder.assert_receipts(i, &sent);
            assert_eq!(sim.recorder.skipped(i), 0, "node {i} executed skipped entries");
        }
    });
}

/// Every sender's transactions go to validator 0 only; every validator
/// includes them all, once, most within two blocks of their arrival.
fn one_validator_receives_everything(n: usize, seed: u64) {
    run("one_validator_receives_everything", seed, |ctx| async move {
        let mut sim = Sim::new(ctx, n, link(10, 2, 100)).await;
        for i in 0..n {
            sim.start(i, None).await;
        }
        let all: Vec<usize> = (0..n).collect();
        sim.reach(&all, 3, MINUTE).await;
        let mut sent = Vec::new();
        for wave in 0..5u64 {
            for s in 0..4 {
                for k in 0..10 {
                    let tx = transfer(&sender(s), wave * 10 + k);
                    sent.push((tx.hash, sim.recorder.head(0)));
                    sim.backend(0).submit(tx);
                }
            }
            sim.sleep(Duration::from_millis(300)).await;
        }
        let target = sim.max_head() + 10;
        sim.reach(&all, target, 2 * MINUTE).await;
        sim.recorder.assert_identical(&all, target);
        let hashes: Vec<B256> = sent.iter().map(|(h, _)| *h).collect();
        let mut waited: Vec<u64> = Vec::new();
        for &i in &all {
            sim.recorder.assert_receipts(i, &hashes);
            assert_eq!(sim.recorder.skipped(i), 0, "node {i} executed skipped entries");
        }
        for (hash, head) in &sent {
            let at = sim.recorder.receipt_height(0, hash).expect("included");
            waited.push(at - head);
        }
        // Who proposed each block: every leader carried validator 0's
        // transactions, not only validator 0.
        waited.sort_unstable();
        let median = waited[waited.len() / 2];
        eprintln!(
            "{n} validators: blocks from arrival to inclusion, median {median}, max {}",
            waited[waited.len() - 1]
        );
        assert!(median <= 2, "median inclusion {median} blocks after arrival");
    });
}

#[test]
fn one_validator_receives_everything_of_four() {
    one_validator_receives_everything(4, 21);
}

#[test]
fn one_validator_receives_everything_of_ten() {
    one_validator_receives_everything(10, 22);
}

#[test]
fn the_receiving_validator_dies_right_after_admitting_and_nothing_is_lost() {
    run("the_receiving_validator_dies_right_after_admitting", 23, |ctx| async move {
        let mut sim = Sim::new(ctx, 4, link(10, 2, 100)).await;
        for i in 0..4 {
            sim.start(i, None).await;
        }
        let all = [0, 1, 2, 3];
        sim.reach(&all, 3, MINUTE).await;
        let mut sent = Vec::new();
        for s in 0..4 {
            for k in 0..25 {
                let tx = transfer(&sender(s), k);
                sent.push(tx.hash);
                sim.backend(0).submit(tx);
            }
        }
        // One batch interval and one link latency, then a crash: what was
        // admitted is already with the others.
        sim.sleep(Duration::from_millis(30)).await;
        sim.crash(0);
        let rest = [1, 2, 3];
        let target = sim.max_head() + 20;
        sim.reach(&rest, target, 2 * MINUTE).await;
        sim.recorder.assert_identical(&rest, target);
        for i in rest {
            sim.recorder.assert_receipts(i, &sent);
            assert_eq!(sim.recorder.skipped(i), 0, "node {i} executed skipped entries");
        }
    });
}

/// Virtual seconds from now until every node in `nodes` has committed
/// above `above`.
async fn resume_time(sim: &Sim, nodes: &[usize], above: u64, limit: Duration) -> f64 {
    use commonware_runtime::Clock as _;
    let start = sim.ctx.current();
    sim.reach(nodes, above + 1, limit).await;
    sim.ctx.current().duration_since(start).unwrap_or_default().as_secs_f64()
}

/// An even split (2|2 of four, 5|5 of ten: no side has a quorum) for
/// 20 s, then healed: how long until blocks resume on all, and until what
/// was accepted during the split is in.
fn a_split_network_resumes_after_the_heal(n: usize, seed: u64) {
    run("a_split_network_resumes_after_the_heal", seed, |ctx| async move {
        let mut sim = Sim::new(ctx, n, link(10, 2, 100)).await;
        for i in 0..n {
            sim.start(i, None).await;
        }
        let all: Vec<usize> = (0..n).collect();
        let (left, right) = all.split_at(n / 2);
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        submit(&sim, &all, 5, &mut nonces, &mut sent);
        sim.reach(&all, 10, MINUTE).await;
        sim.cut(left, right).await;
        sim.sleep(Duration::from_secs(1)).await;
        let mut during = Vec::new();
        submit(&sim, &all, 5, &mut nonces, &mut during);
        sim.sleep(Duration::from_secs(19)).await;
        let stalled = sim.max_head();
        sim.link_all(link(10, 2, 100)).await;
        let resumed = resume_time(&sim, &all, stalled, MINUTE).await;
        use commonware_runtime::Clock as _;
        let healed = sim.ctx.current();
        while all.iter().any(|&i| during.iter().any(|h| sim.recorder.receipt_height(i, h).is_none())) {
            sim.sleep(Duration::from_millis(100)).await;
            assert!(
                sim.ctx.current().duration_since(healed).unwrap_or_default() < MINUTE,
                "split txs never included"
            );
        }
        let included = resumed + sim.ctx.current().duration_since(healed).unwrap_or_default().as_secs_f64();
        eprintln!(
            "{}|{} split of 20 s: blocks resumed on all {n} {resumed:.2} s after the heal, split txs in {included:.2} s",
            left.len(),
            right.len()
        );
        assert!(resumed <= 3.0, "blocks resumed {resumed:.2} s after the heal");
        assert!(included <= 5.0, "split transactions included {included:.2} s after the heal");
    });
}

#[test]
fn a_split_network_of_four_resumes_after_the_heal() {
    a_split_network_resumes_after_the_heal(4, 31);
}

#[test]
fn a_split_network_of_ten_resumes_after_the_heal() {
    a_split_network_resumes_after_the_heal(10, 33);
}

/// One validator cut off for 25 s, then healed: how long until it is at
/// the others' head.
fn an_isolated_validator_catches_up_after_the_heal(n: usize, seed: u64) {
    run("an_isolated_validator_catches_up_after_the_heal", seed, |ctx| async move {
        let mut sim = Sim::new(ctx, n, link(10, 2, 100)).await;
        for i in 0..n {
            sim.start(i, None).await;
        }
        let all: Vec<usize> = (0..n).collect();
        let last = n - 1;
        sim.reach(&all, 5, MINUTE).await;
        sim.cut(&[last], &all[..last]).await;
        sim.sleep(Duration::from_secs(25)).await;
        let head = sim.max_head();
        let behind = head - sim.recorder.head(last).min(head);
        assert!(behind >= 10, "the others went on without it ({behind} blocks)");
        sim.link_all(link(10, 2, 100)).await;
        use commonware_runtime::Clock as _;
        let healed = sim.ctx.current();
        sim.reach(&[last], head, MINUTE).await;
        let took = sim.ctx.current().duration_since(healed).unwrap_or_default().as_secs_f64();
        eprintln!("{n} validators, one isolated 25 s ({behind} blocks behind): at the others' head {took:.2} s after the heal");
        assert!(took <= 5.0, "caught up {took:.2} s after the heal");
    });
}

#[test]
fn an_isolated_validator_of_four_catches_up_after_the_heal() {
    an_isolated_validator_catches_up_after_the_heal(4, 32);
}

#[test]
fn an_isolated_validator_of_ten_catches_up_after_the_heal() {
    an_isolated_validator_catches_up_after_the_heal(10, 34);
}

/// Six splits of 3 s each, one after another under load, each either even
/// (no quorum anywhere) or one validator against the rest, with the sides
/// drawn from the seed: within 3 s of the last heal every validator is
/// past the highest block any had then, nothing accepted is lost, and
/// every height has one block on all.
fn six_short_splits_converge(n: usize, seed: u64) {
    run("six_short_splits_converge", seed, |ctx| async move {
        let mut sim = Sim::new(ctx, n, link(10, 2, 100)).await;
        for i in 0..n {
            sim.start(i, None).await;
        }
        let all: Vec<usize> = (0..n).collect();
        let (mut nonces, mut sent) = (HashMap::new(), Vec::new());
        submit(&sim, &all, 3, &mut nonces, &mut sent);
        sim.reach(&all, 5, MINUTE).await;
        // The sides come from the seed (xorshift): a replayed seed replays them.
        let mut draw = super::seed(seed) | 1;
        let mut next = move || {
            draw ^= draw << 13;
            draw ^= draw >> 7;
            draw ^= draw << 17;
            draw as usize
        };
        for round in 0..6 {
            if round > 0 {
                sim.sleep(Duration::from_millis(500)).await;
            }
            let mut order = all.clone();
            for k in (1..n).rev() {
                order.swap(k, next() % (k + 1));
            }
            let at = if next() % 2 == 0 { n / 2 } else { 1 };
            let (left, right) = order.split_at(at);
            sim.cut(left, right).await;
            submit(&sim, &all, 3, &mut nonces, &mut sent);
            sim.sleep(Duration::from_secs(3)).await;
            sim.link_all(link(10, 2, 100)).await;
        }
        let top = sim.max_head();
        let converged = resume_time(&sim, &all, top, MINUTE).await;
        eprintln!(
            "{n} validators, six 3 s splits: all past the last heal's highest block {converged:.2} s later"
        );
        assert!(converged <= 3.0, "converged {converged:.2} s after the last heal");
        let target = sim.max_head() + 60;
        sim.reach(&all, target, 2 * MINUTE).await;
        sim.recorder.assert_identical(&all, target);
        for (k, h) in sent.iter().enumerate() {
            eprintln!("tx {k} {h}: {:?}", sim.recorder.receipt_height(0, h));
        }
        for i in all {
            sim.recorder.assert_receipts(i, &sent);
        }
    });
}

#[test]
fn six_short_splits_of_four_converge() {
    six_short_splits_converge(4, 35);
}

#[test]
fn six_short_splits_of_ten_converge() {
    six_short_splits_converge(10, 36);
}

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
