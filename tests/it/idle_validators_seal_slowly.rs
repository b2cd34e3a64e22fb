//! An idle network of four real validators seals about one block a second
//! (each leader waits `consensus.empty_block_wait_ms` for a transaction
//! before an empty block), not one per block time, and a transaction sent
//! to any of them still goes into the next block.

use std::time::{Duration, Instant};

use alloy_primitives::Address;

use crate::{
    support::*,
    validators_agree_and_rejoin::{height, start_network, wait_network_up},
};

#[test]
fn an_idle_network_seals_about_one_block_a_second() {
    let (dir, mut nodes) = start_network("idle");
    wait_network_up(&nodes);

    // 100 ms block time (testnet init's here): without the wait, ~5 a second.
    let (h0, t0) = (height(&nodes[1]), Instant::now());
    std::thread::sleep(Duration::from_secs(8));
    let (h1, secs) = (height(&nodes[1]), t0.elapsed().as_secs_f64());
    let rate = (h1 - h0) as f64 / secs;
    assert!(rate <= 1.2, "idle: {} blocks in {secs:.1} s ({rate:.2} a second)", h1 - h0);
    assert!(h1 > h0, "the chain still moves when idle");

    // A transfer to any validator is proposed by the leader waiting for it.
    let sent = Instant::now();
    let hash = nodes[2].send(&transfer(&dev(0), 0, Address::repeat_byte(0x61), 1)).expect("accepted");
    let receipt = nodes[2].receipt(&hash);
    assert_eq!(receipt["status"], "0x1");
    eprintln!("idle: {rate:.2} blocks a second; a lone transfer's receipt after {:?}", sent.elapsed());

    for node in nodes.iter_mut() {
        let status = node.terminate();
        assert!(status.success(), "a validator did not exit cleanly: {status}; log:\n{}", node.log());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
