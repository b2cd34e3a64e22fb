//! Inclusion: transactions reach every leader and are included once, soon
//! after they arrive, even when the validator that admitted them dies.

use std::time::Duration;

use alloy_primitives::B256;

use super::{link, run, sender, transfer, Sim, MINUTE};

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
