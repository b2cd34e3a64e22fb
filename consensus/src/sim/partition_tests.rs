//! Partitions: no side without a quorum finalizes, and after the heal
//! blocks resume, an isolated validator catches up, and everything
//! accepted during the split is included.

use std::{collections::HashMap, time::Duration};

use super::{link, run, submit, Sim, MINUTE};

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
