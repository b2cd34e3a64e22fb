//! A follower beside four validators, as a p2p secondary peer: it executes
//! exactly what they finalize, refuses a forged finalization and blocks
//! its sender, and catches up after a crash.

use std::{collections::HashMap, time::Duration};

use commonware_p2p::{Recipients, Sender as _};

use super::{link, run, sender, transfer, Sim, QUOTA};
use crate::engine::channel;

const MINUTE: Duration = Duration::from_secs(60);

#[test]
fn a_follower_executes_what_the_validators_finalize() {
    run("a_follower_executes_what_the_validators_finalize", 11, |ctx| async move {
        // Nodes 0-3 validate, 4 follows, 5 is a secondary peer that lies.
        let mut sim = Sim::with_followers(ctx, 4, 2, link(10, 2, 100)).await;
        for i in 0..5 {
            sim.start(i, None).await;
        }
        let (validators, everyone) = ([0, 1, 2, 3], [0, 1, 2, 3, 4]);
        let (mut nonces, mut sent) = (HashMap::<usize, u64>::new(), Vec::new());
        let mut submit = |sim: &Sim, count: u64| {
            for &i in &validators {
                let next = nonces.entry(i).or_default();
                for _ in 0..count {
                    let tx = transfer(&sender(i), *next);
                    sent.push(tx.hash);
                    sim.backend(i).submit(tx);
                    *next += 1;
                }
            }
        };
        submit(&sim, 20);
        sim.reach(&everyone, 20, MINUTE).await;

        // A finalization with real signatures over another block, far
        // ahead of the chain: refused, and its sender blocked.
        let forged =
            crate::follower::tests::finalization(&sim.keys[..4], b"sluice-sim", 1_000_000, [7; 32], true);
        let mut rogue = sim.oracle.control(sim.pk(5)).register(channel::CERTIFICATES, QUOTA).await.unwrap().0;
        rogue.send(Recipients::One(sim.pk(4)), forged, true);
        sim.sleep(Duration::from_secs(1)).await;
        let blocked = sim.oracle.blocked().await.unwrap();
        assert!(blocked.contains(&(sim.pk(4), sim.pk(5))), "the forger is not blocked: {blocked:?}");

        // Down while the chain moves on, then back: it catches up.
        sim.crash(4);
        submit(&sim, 20);
        let crashed_at = sim.recorder.head(0);
        sim.reach(&validators, crashed_at + 30, MINUTE).await;
        sim.start(4, None).await;
        submit(&sim, 20);
        let target = sim.max_head() + 10;
        sim.reach(&everyone, target, 2 * MINUTE).await;
        sim.recorder.assert_identical(&everyone, target);
        sim.recorder.assert_receipts(4, &sent);
        assert_eq!(sim.recorder.head(5), 0, "the rogue is not a node");
    });
}
