//! Every mailbox between stages holds its configured bound under load: with
//! every mailbox sized 1 and small blocks, a concurrent flood goes through
//! (slowly, nothing lost), and the stages sending into them found them full
//! and waited (a mailbox that did not hold its bound would never be full).

use std::collections::BTreeMap;

use serde_json::json;

use crate::support::*;

#[test]
fn every_mailbox_respects_its_bound_under_a_flood() {
    let node = TestNode::start(
        &[
            ("SLUICE_PIPELINE__ADMISSION_MAILBOX_MSGS", "1"),
            ("SLUICE_PIPELINE__SHARD_MAILBOX_MSGS", "1"),
            ("SLUICE_PIPELINE__PRODUCER_MAILBOX_MSGS", "1"),
            ("SLUICE_PIPELINE__PREPARE_MAILBOX_BLOCKS", "1"),
            ("SLUICE_PIPELINE__PREPARE_AHEAD_BLOCKS", "1"),
            ("SLUICE_PIPELINE__COMMIT_MAILBOX_BLOCKS", "1"),
        ],
        &["--block-time-ms", "20", "--max-block-txs", "3"],
    );
    let per_sender = 30u64;
    let url = node.url.clone();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                let s = dev(i);
                let to = random_signer().address();
                let mut hashes = Vec::new();
                for n in 0..per_sender {
                    let raw = transfer(&s, n, to, 1);
                    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw]});
                    let resp: serde_json::Value = serde_json::from_str(
                        &ureq::post(&url).set("content-type", "application/json").send_string(&body.to_string()).unwrap().into_string().unwrap(),
                    )
                    .unwrap();
                    assert!(resp.get("error").is_none(), "{resp}");
                    hashes.push(alloy_primitives::keccak256(&raw));
                }
                hashes
            })
        })
        .collect();
    let hashes: Vec<_> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    for h in &hashes {
        assert_eq!(node.receipt(h)["status"], "0x1");
    }
    // Let the sampler publish the final gauges.
    std::thread::sleep(std::time::Duration::from_millis(700));
    let text = node.metrics();
    let mut capacity = BTreeMap::new();
    let mut waits = BTreeMap::new();
    for line in text.lines() {
        let parse = |prefix: &str| -> Option<(String, f64)> {
            let rest = line.strip_prefix(prefix)?;
            let actor = rest.split('"').nth(1)?.to_string();
            Some((actor, rest.rsplit(' ').next()?.parse().ok()?))
        };
        // Several mailboxes per actor (shards): keep the worst.
        if let Some((a, v)) = parse("sluice_mailbox_capacity{") {
            let e = capacity.entry(a).or_insert(v);
            *e = f64::min(*e, v);
        }
        if let Some((a, v)) = parse("sluice_mailbox_waits_total{") {
            *waits.entry(a).or_insert(0.0) += v;
        }
    }
    for actor in ["nonce", "mempool_shard", "producer", "preparer", "executor", "committer"] {
        let cap = capacity.get(actor).copied().unwrap_or_else(|| panic!("no capacity for {actor}:\n{text}"));
        assert_eq!(cap, 1.0, "{actor} capacity comes from config");
        assert!(waits.contains_key(actor), "no waits counter for {actor}:\n{text}");
    }
    // Four clients at once into a nonce mailbox of one: their handlers
    // found it full and waited (backpressure), and no call failed.
    let nonce_waits = waits.get("nonce").copied().unwrap_or_default();
    assert!(nonce_waits > 0.0, "nobody waited for the nonce mailbox: {waits:?}");
    // Small blocks: the flood took many blocks, all committed. Idle blocks
    // keep the chain moving, so produced and committed heights are compared
    // within one scrape, until one finds the pipeline drained.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (produced, committed) = loop {
        let heights = node.produced_and_committed();
        if heights.0 == heights.1 || std::time::Instant::now() > deadline {
            break heights;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let committed = committed.unwrap();
    assert!(committed >= (hashes.len() / 3) as f64, "committed height {committed}");
    assert_eq!(produced, Some(committed), "every produced block is committed");
}
