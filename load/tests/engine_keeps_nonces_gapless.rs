//! The sender engine against a fake node with gapless nonces that refuses
//! every fifth transaction with `txpool is full`: every slot is counted
//! once (scheduled = dropped + admitted + rejected), no nonce gap is ever
//! sent twice, and each sender's admitted transactions are exactly its
//! next nonces. No real node needed; runs in well under a second.

#![allow(clippy::unwrap_used, missing_docs)]

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{atomic::Ordering::Relaxed, Arc, Mutex},
    time::{Duration, Instant},
};

use alloy_primitives::{hex, Address, Bytes};
use serde_json::{json, Value};
use sluice_load::{
    engine::{Worker, WorkerConfig},
    keys,
    schedule::Schedule,
    stats::{Counters, ErrorClass},
    workload::{presign, Fees, Workload},
};

#[derive(Default)]
struct FakeNode {
    next: HashMap<Address, u64>,
    attempts: u64,
}

impl FakeNode {
    fn answer(&mut self, call: &Value) -> Value {
        let id = call["id"].clone();
        let params = &call["params"];
        match call["method"].as_str().unwrap() {
            "eth_sendRawTransaction" => {
                let raw = hex::decode(params[0].as_str().unwrap().trim_start_matches("0x")).unwrap();
                let tx = sluice_txpool::recover_raw(Bytes::from(raw)).unwrap();
                let nonce = alloy_consensus::Transaction::nonce(&tx.tx);
                self.attempts += 1;
                let next = self.next.entry(tx.sender).or_default();
                if nonce > *next {
                    return json!({"jsonrpc":"2.0","id":id,"error":{"code":-32000,"message":format!("nonce too high: next nonce {next}, tx nonce {nonce}")}});
                }
                if nonce < *next {
                    return json!({"jsonrpc":"2.0","id":id,"error":{"code":-32000,"message":"nonce too low"}});
                }
                if self.attempts.is_multiple_of(5) {
                    return json!({"jsonrpc":"2.0","id":id,"error":{"code":-32003,"message":"txpool is full"}});
                }
                *next += 1;
                json!({"jsonrpc":"2.0","id":id,"result":tx.hash})
            }
            "eth_getTransactionCount" => {
                let addr: Address = params[0].as_str().unwrap().parse().unwrap();
                let n = self.next.get(&addr).copied().unwrap_or(0);
                json!({"jsonrpc":"2.0","id":id,"result":format!("{n:#x}")})
            }
            m => panic!("unexpected method {m}"),
        }
    }
}

fn serve(stream: TcpStream, node: Arc<Mutex<FakeNode>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return; // client closed the keep-alive connection
            }
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).unwrap();
        let calls: Vec<Value> = serde_json::from_slice(&body).unwrap();
        let answers: Vec<Value> = {
            let mut node = node.lock().unwrap();
            calls.iter().map(|c| node.answer(c)).collect()
        };
        let text = serde_json::to_string(&answers).unwrap();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            text.len()
        );
        // One write: a second small write would wait on a delayed ACK.
        out.write_all((head + &text).as_bytes()).unwrap();
    }
}

#[test]
fn refusals_are_resynced_and_every_slot_is_counted_once() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let node = Arc::new(Mutex::new(FakeNode::default()));
    {
        let node = node.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let node = node.clone();
                std::thread::spawn(move || serve(stream, node));
            }
        });
    }
    let signers = keys::seeded_keys(3, 12);
    let addrs: Vec<Address> = signers.iter().map(|s| s.address()).collect();
    let fees = Fees { chain_id: 31337, max_fee_wei: 2_000_000_000, tip_wei: 1 };
    let txs = presign(&Workload::Transfer, &fees, 3, &signers, &[0; 12], 240);
    let counters = Arc::new(Counters::default());
    let slots = 400u64;
    let cfg = WorkerConfig {
        url,
        batch: 16,
        batch_wait: Duration::from_millis(2),
        max_in_flight: 1000,
        schedule_end: None,
        deadline: Duration::from_secs(20),
        request_timeout: Duration::from_secs(5),
    };
    let t0 = Instant::now();
    let mut groups: Vec<Vec<_>> = vec![Vec::new(), Vec::new()];
    for s in txs {
        groups[s.sender % 2].push((addrs[s.sender], s));
    }
    let handles: Vec<_> = groups
        .into_iter()
        .zip(Schedule::split(Some(20_000.0), slots, 2))
        .map(|(g, sched)| {
            let w = Worker::new(cfg.clone(), sched, g, counters.clone());
            std::thread::spawn(move || w.run(t0))
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    let tally = counters.tally();
    assert_eq!(tally.scheduled, slots);
    assert!(tally.balanced(), "{tally:?}");
    assert!(counters.rejected(ErrorClass::TxpoolFull) > 0, "the fake node refused some");
    assert_eq!(counters.rejected(ErrorClass::NonceTooLow), 0, "nothing admitted is sent again");
    assert_eq!(counters.in_flight.load(Relaxed), 0);
    let admitted: usize = results.iter().map(|r| r.admitted.len()).sum();
    assert_eq!(admitted as u64, tally.admitted);
    assert!(results.iter().all(|r| r.hash_mismatches == 0));
    // Gapless: each sender's next nonce is exactly how many it got in.
    let node = node.lock().unwrap();
    assert_eq!(node.next.values().sum::<u64>(), tally.admitted);
    assert!(tally.admitted <= 240, "never more than the pre-signed transactions");
}
