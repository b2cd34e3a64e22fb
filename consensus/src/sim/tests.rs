//! Scenarios: agreement, a partition that heals, repeated crashes, a
//! diverged validator, lossy links. Each prints its seed; `SIM_SEED=N`
//! replays one.

use std::{collections::HashMap, time::Duration};

use alloy_primitives::B256;

use super::{link, run, sender, transfer, Sim};
use crate::backend::Backend as _;

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
        let reason = sim.backend(2).halted().expect("the diverged validator halted");
        assert!(reason.contains("app hash mismatch at height 10"), "{reason}");
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
