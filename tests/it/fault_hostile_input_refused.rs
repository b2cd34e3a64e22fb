//! Hostile input the other suites do not cover (FAULTS.md lists them all):
//! invalid signature recovery ids, a nonce of u64::MAX, and many idle
//! connections. Each is refused with a standard code and a geth-style
//! message, and the node keeps serving.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::{Duration, Instant},
};

use alloy_primitives::Bytes;
use serde_json::json;

use crate::support::*;

/// A valid EIP-1559 transfer whose r and s are both full 32 bytes, so the
/// recovery id is the byte right before them.
fn full_width_transfer(nonce: u64) -> Vec<u8> {
    let to = random_signer().address();
    (1u64..)
        .map(|wei| transfer(&dev(0), nonce, to, wei).to_vec())
        .find(|raw| raw.len() > 67 && raw[raw.len() - 66] == 0xa0 && raw[raw.len() - 33] == 0xa0)
        .expect("a full-width signature")
}

#[test]
fn invalid_recovery_ids_and_max_nonce_are_refused() {
    let node = TestNode::start(&[], &["--block-time-ms", "50"]);
    for y_parity in [0x02u8, 0x1b, 0x25] {
        let mut raw = full_width_transfer(0);
        let at = raw.len() - 67;
        raw[at] = y_parity;
        let e = node.send(&Bytes::from(raw)).expect_err("an invalid recovery id must be refused");
        assert_eq!(e["code"], -32000, "y_parity {y_parity}: {e}");
        // Refused while decoding, as geth refuses malformed RLP ("rlp: ..."),
        // before any signature arithmetic.
        assert_eq!(e["message"], "rlp: invalid bool value, must be 0 or 1", "y_parity {y_parity}");
    }
    let e = node.send(&transfer(&dev(0), u64::MAX, random_signer().address(), 1)).unwrap_err();
    assert_eq!((e["code"].as_i64(), e["message"].as_str()), (Some(-32000), Some("nonce has max value")));
    // Still serving, and the sender's real nonce 0 is untouched.
    let h = node.send(&transfer(&dev(0), 0, random_signer().address(), 1)).unwrap();
    assert_eq!(node.receipt(&h)["status"], "0x1");
}

#[test]
fn many_idle_connections_are_bounded_and_timed_out() {
    let node = TestNode::start(
        &[
            ("SLUICE_RPC__WORKERS", "1"),
            ("SLUICE_RPC__MAX_CONNECTIONS_PER_WORKER", "16"),
            ("SLUICE_RPC__CLIENT_REQUEST_TIMEOUT_MS", "500"),
        ],
        &[],
    );
    // The sampler publishes every 500 ms.
    std::thread::sleep(Duration::from_millis(700));
    let fds_before = node.metric("sluice_process_open_fds").unwrap_or(0.0);
    assert!(fds_before > 0.0, "the descriptor gauge is sampled");
    let addr = node.url.trim_start_matches("http://").to_string();
    // Three times the limit, each sending nothing at all.
    let mut idle: Vec<TcpStream> = (0..48)
        .map(|_| {
            let s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            s
        })
        .collect();
    // The node closes every one of them, a bounded batch at a time.
    let start = Instant::now();
    let mut closed = vec![false; idle.len()];
    while closed.iter().any(|c| !c) {
        assert!(start.elapsed() < Duration::from_secs(15), "idle connections were never dropped");
        for (i, s) in idle.iter_mut().enumerate() {
            if closed[i] {
                continue;
            }
            let mut buf = [0u8; 256];
            match s.read(&mut buf) {
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                // EOF, a 408 answer or a reset: dropped by the node.
                _ => closed[i] = true,
            }
        }
    }
    println!("48 idle connections dropped in {:?}", start.elapsed());
    // A real client is served afterwards, and the descriptors are released.
    let mut s = TcpStream::connect(&addr).unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}).to_string();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).unwrap();
    answer.push_str(&String::from_utf8_lossy(&buf[..n]));
    assert!(answer.contains("0x7a69"), "{answer}");
    drop(idle);
    std::thread::sleep(Duration::from_millis(600));
    let fds_after = node.metric("sluice_process_open_fds").unwrap_or(0.0);
    assert!(fds_after <= fds_before + 4.0, "descriptors leaked: {fds_before} -> {fds_after}");
}
