//! Dissemination between real validator processes: every sender talks to
//! validator 0 only, validator 0 is killed with SIGKILL 50 ms after its
//! last acceptance, and every transaction it accepted is included, on the
//! three that are left, exactly once.

use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256};
use serde_json::json;

use crate::{
    support::*,
    validators_agree_and_rejoin::{start_network, wait_network_up},
};

#[test]
fn what_one_validator_accepted_is_included_after_it_dies() {
    let (dir, mut nodes) = start_network("gossip");
    wait_network_up(&nodes);

    // Four senders, all on validator 0.
    let mut accepted: Vec<B256> = Vec::new();
    for sender in 0..4 {
        let s = dev(sender);
        for nonce in 0..10 {
            let raw = transfer(&s, nonce, Address::repeat_byte(0x50 + sender as u8), 1);
            accepted.push(nodes[0].send(&raw).unwrap_or_else(|e| panic!("send: {e}")));
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    nodes[0].kill9();

    // The other three are a quorum: each accepted transaction gets one
    // receipt there, whoever proposed it.
    let deadline = Instant::now() + Duration::from_secs(120);
    for hash in &accepted {
        loop {
            let r = nodes[3].ok("eth_getTransactionReceipt", json!([hash]));
            if !r.is_null() {
                assert_eq!(r["status"], "0x1", "{r}");
                break;
            }
            assert!(Instant::now() < deadline, "no receipt for {hash} on v3; log:\n{}", nodes[3].log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for sender in 0..4 {
        assert_eq!(nodes[3].nonce(dev(sender).address(), "latest"), 10, "sender {sender}: each nonce once");
    }
    // Each reached v3 from v0 (some also in a block v0 proposed before it
    // died: those copies were refused as known or stale, not counted ok).
    let received = nodes[3].metric("sluice_gossip_received_txs_total ").unwrap_or(0.0);
    assert!(received >= 40.0, "v3 received {received} of 40 from v0");
    for node in nodes.iter_mut().skip(1) {
        let status = node.terminate();
        assert!(status.success(), "a validator did not exit cleanly: {status}; log:\n{}", node.log());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
