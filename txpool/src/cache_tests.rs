//! Cache eviction and counting, batch hashing, block preparation.

use super::*;
use crate::{recover::recover_raw, sign::Signer};
use alloy_consensus::{TxEip1559, TxLegacy};
use alloy_primitives::{Address, TxKind, U256};

const CHAIN: u64 = 7;

fn signer(i: u8) -> Signer {
    Signer::from_bytes(&B256::repeat_byte(i.max(1))).unwrap()
}

fn raw(from: u8, nonce: u64) -> Bytes {
    signer(from).sign_raw(
        TxEip1559 {
            chain_id: CHAIN,
            nonce,
            gas_limit: 21_000,
            max_fee_per_gas: 1_000_000_000,
            to: TxKind::Call(Address::repeat_byte(0xcc)),
            value: U256::from(nonce),
            ..Default::default()
        }
        .into(),
    )
}

/// Transactions whose hashes all fall in one cache shard.
fn same_shard(n: usize) -> Vec<RecoveredTx> {
    let mut out: Vec<RecoveredTx> = Vec::new();
    let mut nonce = 0;
    while out.len() < n {
        let tx = recover_raw(raw(1, nonce)).unwrap();
        if (tx.hash[0] as usize).is_multiple_of(SHARDS) {
            out.push(tx);
        }
        nonce += 1;
    }
    out
}

#[test]
fn hash_batch_matches_keccak_for_every_size_and_worker_count() {
    let many: Vec<Bytes> =
        (0..5000u32).map(|i| Bytes::from(i.to_be_bytes().repeat(1 + i as usize % 40))).collect();
    for n in [0usize, 1, 2, 17, 5000] {
        let raws = &many[..n];
        let expected: Vec<B256> = raws.iter().map(|r| sluice_messages::keccak256(r)).collect();
        for workers in [1, 2, 3] {
            assert_eq!(hash_batch(raws, workers), expected, "n={n} workers={workers}");
        }
    }
}

#[test]
fn chunks_cover_everything_with_at_most_workers_ranges() {
    for (len, workers) in [(5000, 3), (200, 2), (127, 2), (128, 2), (1, 8), (0, 3)] {
        let chunk = chunk_len(len, workers, MIN_HASHES_PER_WORKER);
        assert!(chunk >= 1);
        assert!(len.div_ceil(chunk) <= workers.max(1), "len={len} workers={workers}");
        if len < 2 * MIN_HASHES_PER_WORKER {
            assert!(chunk >= len, "too little work to split: len={len}");
        }
    }
}

#[test]
fn evicts_the_oldest_entry_of_a_full_shard() {
    let cache = PreparedTxCache::new(3 * SHARDS);
    assert_eq!(cache.capacity(), 3 * SHARDS);
    let txs = same_shard(5);
    for tx in &txs[..3] {
        cache.insert(tx);
    }
    cache.insert(&txs[0]); // already cached: no change in order
    cache.insert(&txs[3]);
    assert_eq!(cache.evictions(), 1);
    assert!(cache.get(&txs[0].hash, CHAIN).is_none(), "oldest evicted first");
    assert!(cache.get(&txs[1].hash, CHAIN).is_some());
    cache.insert(&txs[4]);
    assert!(cache.get(&txs[1].hash, CHAIN).is_none());
    for tx in &txs[2..] {
        assert_eq!(cache.get(&tx.hash, CHAIN).map(|t| t.sender), Some(tx.sender));
    }
    assert_eq!((cache.len(), cache.evictions()), (3, 2));
}

#[test]
fn counts_hits_and_misses_and_does_not_remove() {
    let cache = PreparedTxCache::new(100);
    let tx = recover_raw(raw(2, 0)).unwrap();
    cache.insert(&tx);
    assert!(cache.get(&tx.hash, CHAIN).is_some());
    assert!(cache.get(&tx.hash, CHAIN).is_some());
    assert!(cache.get(&B256::repeat_byte(1), CHAIN).is_none());
    assert_eq!((cache.hits(), cache.misses()), (2, 1));
}

#[test]
fn refuses_other_chains_and_unprotected_legacy() {
    let cache = PreparedTxCache::new(100);
    let tx = recover_raw(raw(3, 0)).unwrap();
    cache.insert(&tx);
    assert!(cache.get(&tx.hash, CHAIN + 1).is_none());
    let legacy = TxLegacy {
        chain_id: None,
        gas_price: 1,
        gas_limit: 21_000,
        to: TxKind::Call(Address::ZERO),
        ..Default::default()
    };
    let unprotected = recover_raw(signer(3).sign_raw(legacy.into())).unwrap();
    cache.insert(&unprotected);
    assert!(cache.get(&unprotected.hash, CHAIN).is_none());
    assert_eq!((cache.hits(), cache.misses()), (0, 2));
}

/// A comparable view of a prepared block.
fn summary(block: &[PreparedTx]) -> Vec<(B256, Option<Address>, String)> {
    block
        .iter()
        .map(|p| match p {
            PreparedTx::Ready(tx) => (tx.hash, Some(tx.sender), String::new()),
            PreparedTx::Invalid { hash, reason } => (*hash, None, reason.clone()),
        })
        .collect()
}

fn block_raws() -> Vec<Bytes> {
    let mut raws: Vec<Bytes> = (0..300u64).map(|n| raw((n % 5) as u8 + 1, n)).collect();
    raws.insert(10, Bytes::from_static(&[0x02, 0xc1, 0x80])); // undecodable
    let dup = raws[3].clone();
    raws.push(dup); // second copy of a valid tx
    raws
}

#[test]
fn prepare_block_is_the_same_with_and_without_the_cache() {
    let raws = block_raws();
    let cold = PreparedTxCache::new(1000);
    let warm = PreparedTxCache::new(1000);
    for r in raws.iter().step_by(2) {
        if let Ok(tx) = recover_raw(r.clone()) {
            warm.insert(&tx);
        }
    }
    let expected = summary(&prepare_block(&raws, &cold, CHAIN, 1));
    for workers in [1, 2, 3] {
        assert_eq!(summary(&prepare_block(&raws, &cold, CHAIN, workers)), expected);
        assert_eq!(summary(&prepare_block(&raws, &warm, CHAIN, workers)), expected);
    }
    assert!(warm.hits() > 0);
    assert_eq!(cold.hits(), 0);
    assert_eq!(expected.len(), raws.len());
    assert!(expected[10].2.starts_with("rlp: "), "{}", expected[10].2);
    assert_eq!(expected[4].1, Some(signer(5).address()));
    for (i, raw) in raws.iter().enumerate() {
        assert_eq!(expected[i].0, sluice_messages::keccak256(raw));
    }
}

#[test]
fn duplicate_in_block_resolves_the_first_copy_only() {
    let raws = block_raws();
    let cache = PreparedTxCache::new(1000);
    // The duplicated tx is cached: the second copy must still be refused.
    cache.insert(&recover_raw(raws[3].clone()).unwrap());
    let block = prepare_block(&raws, &cache, CHAIN, 2);
    assert!(matches!(&block[3], PreparedTx::Ready(tx) if tx.sender == signer(4).address()));
    match block.last() {
        Some(PreparedTx::Invalid { hash, reason }) => {
            assert_eq!(*hash, block[3].hash());
            assert_eq!(reason, DUPLICATE_IN_BLOCK);
        }
        other => panic!("expected the duplicate to be invalid, got {other:?}"),
    }
    let ready = block.iter().filter(|p| matches!(p, PreparedTx::Ready(_))).count();
    assert_eq!(ready, 300);
}
