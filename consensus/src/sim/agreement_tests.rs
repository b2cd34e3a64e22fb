//! Agreement: validators on good or lossy links commit the same blocks
//! with the same app hashes and a receipt for everything sent, and a seed
//! replays its run exactly.

use std::collections::HashMap;

use super::{link, run, submit, Sim, MINUTE};

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
