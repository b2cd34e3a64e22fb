//! Resources that outside load can exhaust do not halt the node: started
//! under a low open-file soft limit (systemd's default is 1024; 256 here),
//! the node raises it to the hard limit, and while a few hundred idle
//! connections are held it answers reads of old, unknown and random
//! blocks and transactions, includes transfers, and its store never halts
//! (a read that fails is answered and counted, never latched).

use std::{
    net::TcpStream,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use alloy_primitives::B256;
use serde_json::json;

use crate::support::*;

/// The soft and hard open-file limits the node is started under.
const SOFT: u64 = 256;
const HARD: u64 = 4096;
/// Idle connections held against the RPC port: more than the soft limit
/// the node started with.
const IDLE_CONNECTIONS: usize = 300;

/// The soft limit of "Max open files" in /proc/<pid>/limits.
fn soft_nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    line.trim_start_matches("Max open files").split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn a_connection_flood_under_a_low_fd_limit_does_not_halt_the_store() {
    let node = TestNode::start_with_nofile(
        SOFT,
        HARD,
        // Two blocks in memory: every older block is read from the
        // database, as an RPC caller's old blocks are.
        &[("SLUICE_STORE__CACHE_BLOCKS", "2"), ("SLUICE_PRODUCER__IDLE_BLOCK_INTERVAL_MS", "20")],
        &["--block-time-ms", "20"],
    );
    let pid = node.pid().unwrap();
    assert_eq!(
        soft_nofile(pid),
        HARD,
        "the node raises its soft limit to the hard limit; log:\n{}",
        node.log()
    );
    let log = node.log();
    assert!(log.contains("raised the open-file soft limit"), "{log}");
    assert!(log.contains("database file cache sized within the open-file limit"), "{log}");

    // Old blocks to read from disk.
    let deadline = Instant::now() + Duration::from_secs(30);
    while parse_u64(&node.ok("eth_blockNumber", json!([]))) < 40 {
        assert!(Instant::now() < deadline, "no blocks sealed; log:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }

    // The flood: idle connections, re-opened every 2 s (before the node's
    // request timeout drops them), from a thread of their own.
    let addr = node.url.trim_start_matches("http://").to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let (addr, stop) = (addr.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut held = 0;
            while !stop.load(Ordering::Relaxed) {
                let conns: Vec<TcpStream> =
                    (0..IDLE_CONNECTIONS).filter_map(|_| TcpStream::connect(&addr).ok()).collect();
                held = held.max(conns.len());
                let until = Instant::now() + Duration::from_secs(2);
                while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            held
        })
    };
    std::thread::sleep(Duration::from_millis(500));

    // Reads an RPC caller may make: old blocks (from disk), unknown
    // heights and hashes, random transaction hashes.
    let head = parse_u64(&node.ok("eth_blockNumber", json!([])));
    for round in 0..3u8 {
        for n in 1..head.min(40) {
            let b = node.ok("eth_getBlockByNumber", json!([format!("{n:#x}"), true]));
            assert_eq!(parse_u64(&b["number"]), n, "round {round}: block {n}");
        }
        for i in 0..50u8 {
            let random = alloy_primitives::keccak256([round, i]);
            assert!(node.ok("eth_getTransactionByHash", json!([random])).is_null());
            assert!(node.ok("eth_getBlockByHash", json!([random, false])).is_null());
            let unknown = format!("{:#x}", head + 1_000_000 + u64::from(i));
            assert!(node.ok("eth_getBlockByNumber", json!([unknown, false])).is_null());
        }
    }

    // Transfers still reach receipts.
    let from = dev(0);
    let to = random_signer().address();
    let hashes: Vec<B256> = (0..5).map(|n| node.send(&transfer(&from, n, to, 1_000)).unwrap()).collect();
    for h in &hashes {
        assert_eq!(node.receipt(h)["status"], "0x1");
        // Found again by hash while the flood goes on.
        assert_eq!(node.ok("eth_getTransactionByHash", json!([h]))["hash"], json!(h));
    }

    stop.store(true, Ordering::Relaxed);
    let held = flood.join().unwrap();
    assert!(held as u64 > SOFT, "the flood held only {held} connections at once");
    // The sampler publishes every 500 ms.
    std::thread::sleep(Duration::from_millis(700));
    let metrics = node.metrics();
    assert_eq!(metric_in(&metrics, "sluice_store_halted "), Some(0.0), "log:\n{}", node.log());
    assert_eq!(
        metric_in(&metrics, "sluice_store_read_errors_total "),
        Some(0.0),
        "no read failed within the raised limit; log:\n{}",
        node.log()
    );
}

#[test]
fn the_connection_cap_fits_within_half_the_open_file_limit() {
    // A hard limit of 200: the node cannot raise past it, so one worker's
    // 512 connections would not fit beside the database's files.
    let node = TestNode::start_with_nofile(200, 200, &[("SLUICE_RPC__WORKERS", "1")], &[]);
    node.ok("eth_blockNumber", json!([]));
    let log = node.log();
    assert!(log.contains("rpc.max_connections_per_worker lowered to fit half the open-file limit"), "{log}");
    assert!(log.contains("fitted=100"), "{log}");
}
