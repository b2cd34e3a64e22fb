//! Crashes: a validator that crashes and restarts rejoins and commits
//! what the others did, and a dead leader costs the others one timeout.

use std::{collections::HashMap, time::Duration};

use super::{link, run, submit, Sim, MINUTE, SKIP_TIMEOUT};

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
