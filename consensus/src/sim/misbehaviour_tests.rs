//! A misbehaving validator: one whose execution diverges halts, naming
//! the height, and one that equivocates is counted as evidence while the
//! honest ones agree.

use std::collections::HashMap;

use sluice_store::Halt;

use super::{evidence_counted, link, run, submit, Sim, MINUTE};
use crate::backend::Backend as _;

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
