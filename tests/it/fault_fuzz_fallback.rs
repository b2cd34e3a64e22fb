//! Bounded random and mutated input through the same entry points as the
//! cargo-fuzz targets in `fuzz/` (transaction admission's decoding and
//! checks, and a whole JSON-RPC request body), on stable Rust: nothing may
//! panic, every body gets a JSON-RPC answer with a standard code. Seeded
//! corpus plus mutations (bit flips, truncation, splicing, insertion), from
//! a printed seed; FUZZ_FALLBACK_SEED replays, FUZZ_FALLBACK_MS bounds the
//! time per target (default 1500).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use alloy_primitives::{Bytes, U256};
use rand::{Rng, RngCore, SeedableRng};
use serde_json::Value;
use sluice_rpc::RpcState;
use sluice_store::{Genesis, GenesisAccount, Store};
use sluice_txpool::{admit_stateless, AdmissionRules};

use crate::support::*;

fn budget() -> Duration {
    Duration::from_millis(std::env::var("FUZZ_FALLBACK_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500))
}

fn rules() -> AdmissionRules {
    AdmissionRules::new(CHAIN_ID, 1_000_000, BASE_FEE)
}

/// An RPC state without a running pipeline (`sluice_rpc::offline`):
/// submissions are checked and recovered, then answered "admission
/// stopped".
fn offline_state() -> Arc<RpcState> {
    let mut alloc = std::collections::BTreeMap::new();
    for i in 0..4 {
        alloc.insert(
            dev(i).address(),
            GenesisAccount { balance: U256::from(10u128.pow(21)), ..Default::default() },
        );
    }
    let genesis = Genesis {
        chain_id: CHAIN_ID,
        timestamp: 0,
        gas_limit: 1_000_000,
        base_fee: BASE_FEE as u64,
        coinbase: Default::default(),
        alloc,
        synthetic: Default::default(),
    };
    let mut limits = sluice_config::Config::default().rpc;
    limits.max_batch_len = 50;
    let exec = sluice_executor::ExecConfig { chain_id: CHAIN_ID, spec: sluice_executor::Spec::Prague };
    sluice_rpc::offline::offline_state(Arc::new(Store::new(&genesis)), rules(), exec, limits)
}

/// One random mutation of `input`, sometimes spliced with `other`.
fn mutate(rng: &mut impl Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        match rng.random_range(0..6) {
            0 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                v[i] = rng.random();
            }
            2 => v.truncate(rng.random_range(0..=v.len())),
            3 => {
                let i = rng.random_range(0..=v.len());
                let n = rng.random_range(1..8);
                let extra: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                v.splice(i..i, extra);
            }
            4 if !other.is_empty() => {
                let cut = rng.random_range(0..=v.len());
                let from = rng.random_range(0..other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            _ => {
                let n = rng.random_range(0..64);
                v = (0..n).map(|_| rng.random()).collect();
            }
        }
    }
    v
}

/// A recipient fixed, so that the hand-written seeds are the same bytes in
/// every run (signing is deterministic) and can be checked against the
/// committed corpus.
const SEED_TO: alloy_primitives::Address = alloy_primitives::Address::repeat_byte(0x5e);

/// The hand-written transaction seeds.
fn tx_seeds() -> Vec<Vec<u8>> {
    let to = SEED_TO;
    vec![
        transfer(&dev(0), 0, to, 1).to_vec(),
        legacy(&dev(1), 3, to, 7, Some(CHAIN_ID)).to_vec(),
        legacy(&dev(1), 3, to, 7, None).to_vec(),
        eip1559(&dev(2), 1, alloy_primitives::TxKind::Create, U256::ZERO, counter_initcode(), 200_000)
            .to_vec(),
    ]
}

/// The seeds and the committed corpus of the `tx_decode` target.
fn tx_corpus() -> Vec<Vec<u8>> {
    let mut c = tx_seeds();
    c.extend(
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/tx_decode"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read(e.path()).ok()),
    );
    c
}

/// The hand-written JSON-RPC body seeds.
fn rpc_seeds() -> Vec<Vec<u8>> {
    let raw = transfer(&dev(0), 0, SEED_TO, 1);
    [
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}"#.to_string(),
        r#"[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","method":"net_version"}]"#.into(),
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"eth_sendRawTransaction","params":["{raw}"]}}"#),
        r#"{"jsonrpc":"2.0","id":"x","method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}"#.into(),
        r#"{"jsonrpc":"2.0","id":3,"method":"eth_call","params":[{"to":"0x0000000000000000000000000000000000000001","data":"0x1234"},"latest"]}"#.into(),
        r#"{"jsonrpc":"2.0","id":4,"method":"eth_getLogs","params":[{"fromBlock":"0x0","toBlock":"latest","topics":[null]}]}"#.into(),
        r#"{"jsonrpc":"2.0","id":5,"method":"eth_feeHistory","params":["0x4","latest",[25,75]]}"#.into(),
        r#"{"jsonrpc":"2.0","id":6,"method":"eth_estimateGas","params":[{"from":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","value":"0x1"}]}"#.into(),
        r#"{"jsonrpc":"2.0","id":7,"method":"eth_getBlockByNumber","params":["0x0",true]}"#.into(),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect()
}

/// The seeds and the committed corpus of the `rpc_body` target.
fn rpc_corpus() -> Vec<Vec<u8>> {
    let mut c = rpc_seeds();
    c.extend(
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/rpc_body"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read(e.path()).ok()),
    );
    c
}

fn seed() -> u64 {
    let seed =
        std::env::var("FUZZ_FALLBACK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("fuzz fallback seed {seed}; replay with FUZZ_FALLBACK_SEED={seed}");
    seed
}

#[test]
fn mutated_transactions_never_panic_admission() {
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (corpus, rules) = (tx_corpus(), rules());
    let start = Instant::now();
    let (mut runs, mut admitted) = (0u64, 0u64);
    while start.elapsed() < budget() {
        let a = &corpus[rng.random_range(0..corpus.len())];
        let b = &corpus[rng.random_range(0..corpus.len())];
        let input = if rng.random_bool(0.1) {
            let mut v = vec![0u8; rng.random_range(0..300)];
            rng.fill_bytes(&mut v);
            v
        } else {
            mutate(&mut rng, a, b)
        };
        // A panic here fails the test with the seed printed above.
        if admit_stateless(Bytes::from(input), &rules).is_ok() {
            admitted += 1;
        }
        runs += 1;
    }
    println!("seed {seed}: {runs} transaction inputs, {admitted} still valid");
    assert!(runs > 100);
}

#[test]
fn mutated_json_rpc_bodies_always_get_a_json_rpc_answer() {
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (corpus, state) = (rpc_corpus(), offline_state());
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let start = Instant::now();
    let mut runs = 0u64;
    while start.elapsed() < budget() {
        let a = &corpus[rng.random_range(0..corpus.len())];
        let b = &corpus[rng.random_range(0..corpus.len())];
        let body = mutate(&mut rng, a, b);
        let answer = rt.block_on(sluice_rpc::framing::handle_body(&state, &body));
        if let Some(bytes) = answer {
            let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!("seed {seed}: answer is not JSON ({e}) for {:?}", String::from_utf8_lossy(&body))
            });
            let answers = match v {
                Value::Array(items) => items,
                one => vec![one],
            };
            for a in answers {
                assert_eq!(a["jsonrpc"], "2.0", "seed {seed}: {a}");
                if let Some(code) = a["error"]["code"].as_i64() {
                    let standard = [-32700, -32600, -32601, -32602, -32603, -32000, -32003, -32005, 3];
                    assert!(
                        standard.contains(&code),
                        "seed {seed}: code {code} for {:?}",
                        String::from_utf8_lossy(&body)
                    );
                } else {
                    assert!(a.get("result").is_some(), "seed {seed}: neither result nor error: {a}");
                }
            }
        }
        runs += 1;
    }
    println!("seed {seed}: {runs} JSON-RPC bodies");
    assert!(runs > 100);
}

/// The hand-written seeds above are in `fuzz/`'s committed corpus (as
/// `seed-<keccak>`), so that `fuzz/run.sh` starts from them:
/// `FUZZ_WRITE_CORPUS=1 cargo test --test it seed_corpus` writes them
/// after a change.
#[test]
fn the_seed_corpus_is_committed() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus");
    let write = std::env::var("FUZZ_WRITE_CORPUS").is_ok();
    for (target, seeds) in [("tx_decode", tx_seeds()), ("rpc_body", rpc_seeds())] {
        let dir = format!("{root}/{target}");
        for s in seeds {
            let path = format!("{dir}/seed-{}", alloy_primitives::keccak256(&s));
            if write {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &s).unwrap();
            }
            let committed = std::fs::read(&path).unwrap_or_default();
            assert!(
                committed == s,
                "{path} is missing or differs from its seed {:?}: FUZZ_WRITE_CORPUS=1 cargo test --test it \
                 seed_corpus writes it",
                String::from_utf8_lossy(&s)
            );
        }
    }
}
