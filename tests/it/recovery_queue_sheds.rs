//! Submissions arriving faster than senders can be recovered: the recovery
//! stage's queue holds at most `pipeline.recovery_queue_txs`, the excess is
//! answered at once with `-32003 txpool is full` (not queued inside the
//! HTTP server), reads keep being answered, every admitted transaction is
//! included, and a refused one is admitted once the burst is over.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy_primitives::{keccak256, Bytes};
use serde_json::{json, Value};

use crate::{backpressure_txpool_full::genesis_for, support::*};

const CLIENTS: usize = 24;
const PER_CLIENT: usize = 25;
const QUEUE: usize = 2;

#[test]
fn a_burst_past_the_recovery_queue_is_shed_and_nothing_admitted_is_lost() {
    let senders: Vec<_> = (0..CLIENTS * PER_CLIENT).map(|_| random_signer()).collect();
    let dir = std::env::temp_dir().join(format!("sluice-recovery-{}", std::process::id()));
    let genesis = genesis_for(&dir, &senders);
    let queue = QUEUE.to_string();
    let node = TestNode::start(
        &[("SLUICE_PIPELINE__RECOVERY_WORKERS", "1"), ("SLUICE_PIPELINE__RECOVERY_QUEUE_TXS", &queue)],
        &["--genesis", genesis.to_str().unwrap()],
    );
    let sink = random_signer().address();
    let raws: Vec<Bytes> = senders.iter().map(|s| transfer(s, 0, sink, 1)).collect();
    let answers: Arc<Mutex<Vec<(usize, Value)>>> = Arc::default();
    // Many clients at once, each with a batch: their submissions wait for
    // recovery together, far more than the queue holds.
    std::thread::scope(|s| {
        for c in 0..CLIENTS {
            let (raws, answers, url) = (&raws, Arc::clone(&answers), node.url.clone());
            s.spawn(move || {
                let first = c * PER_CLIENT;
                let batch: Vec<Value> = (first..first + PER_CLIENT)
                    .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "eth_sendRawTransaction", "params": [raws[i]]}))
                    .collect();
                let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
                let body = Value::Array(batch).to_string();
                let reply = agent.post(&url).set("content-type", "application/json").send_string(&body);
                let reply: Value = serde_json::from_str(&reply.unwrap().into_string().unwrap()).unwrap();
                let mut answers = answers.lock().unwrap();
                for a in reply.as_array().unwrap() {
                    answers.push((a["id"].as_u64().unwrap() as usize, a.clone()));
                }
            });
        }
    });
    let answers = Arc::try_unwrap(answers).unwrap().into_inner().unwrap();
    assert_eq!(answers.len(), raws.len(), "every call answered");
    let (mut admitted, mut refused) = (Vec::new(), Vec::new());
    for (i, a) in &answers {
        match a.get("error") {
            None => admitted.push(*i),
            Some(e) => {
                assert_eq!(e["code"], -32003, "{e}");
                assert_eq!(e["message"], "txpool is full");
                refused.push(*i);
            }
        }
    }
    assert!(!refused.is_empty(), "{CLIENTS} clients at once past a queue of {QUEUE} must be shed");
    assert!(!admitted.is_empty(), "the stage still admits while it sheds");
    assert!(node.call("eth_blockNumber", json!([])).is_ok(), "reads are answered");
    for &i in &admitted {
        assert_eq!(node.receipt(&keccak256(&raws[i]))["status"], "0x1", "admitted tx {i} included");
    }
    // (Sampled every second; the receipts above took longer.) The bound
    // held: the queue never
    // held more than its capacity.
    let high = node.metric("sluice_mailbox_high_water{actor=\"recovery\"").expect("recovery mailbox metric");
    assert!(high <= QUEUE as f64, "recovery queue high-water {high} > {QUEUE}");
    for &i in &refused {
        assert!(
            node.ok("eth_getTransactionByHash", json!([keccak256(&raws[i])])).is_null(),
            "refused means not kept"
        );
    }
    // After the burst, a refused transaction gets through.
    let again = &raws[refused[0]];
    assert_eq!(node.receipt(&node.send(again).unwrap())["status"], "0x1");
    let _ = std::fs::remove_dir_all(dir);
}
