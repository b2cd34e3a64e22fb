//! A node started in validator mode, driven through its [`ValidatorPort`]
//! as consensus would: builds on request, deliveries acknowledged on
//! commit, restores, and a shutdown that drains once the port is gone.

use std::{sync::Arc, time::Instant};

use alloy_primitives::Address;
use sluice_config::Config;
use sluice_messages::{Parent, RecoveredTx, StateRef};
use sluice_store::StateReader;
use sluice_txpool::{recover_raw, Signer};
use tokio::sync::oneshot;

use super::*;
use crate::{
    protocol::{AdmitTx, CommittedAccount, NonceMsg},
    supervise::PROCESS_HOOKS,
};

fn config(name: &str) -> Config {
    let mut cfg = Config::default();
    cfg.store.data_dir = std::env::temp_dir().join(format!("sluice-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cfg.store.data_dir);
    cfg.rpc.addr = ([127, 0, 0, 1], 0).into();
    cfg.producer.block_time_ms = 50;
    cfg
}

fn transfer(signer: &Signer, nonce: u64, chain_id: u64) -> RecoveredTx {
    recover_raw(crate::test_support::signed_transfer(signer, nonce, chain_id)).unwrap()
}

/// Admits `tx` through the nonce actor, as RPC admission does.
async fn admit(node: &Node, tx: RecoveredTx) {
    let account = node.store.account(&tx.sender).unwrap().unwrap_or_default();
    let committed = CommittedAccount {
        height: node.store.head(),
        nonce: account.nonce,
        balance: account.balance,
        delegated: false,
    };
    let (reply, answer) = oneshot::channel();
    node.admission
        .nonce
        .send(NonceMsg::Admit {
            txs: vec![AdmitTx { tx, committed, hold_gaps: true, from_peer: false }],
            received: Instant::now(),
            reply,
        })
        .await
        .unwrap();
    for answer in answer.await.unwrap() {
        answer.unwrap();
    }
}

/// Delivers `block` and waits for its commit acknowledgement.
async fn deliver_and_commit(port: &ValidatorPort, block: Arc<sluice_messages::SealedBlock>) {
    let (acked, ack) = oneshot::channel();
    let number = block.header.number;
    port.deliver(
        block,
        Box::new(move || {
            let _ = acked.send(());
        }),
    )
    .await
    .unwrap();
    if ack.await.is_err() {
        panic!("block {number} never acknowledged; store halted: {:?}", port.store().halted());
    }
    let mut heads = port.committed();
    heads.wait_for(|h| *h >= number).await.unwrap();
    assert_eq!(port.store().head(), number);
}

async fn in_flight(node: &Node, address: Address) -> Option<u64> {
    let (reply, answer) = oneshot::channel();
    node.admission.nonce.send(NonceMsg::PendingNonce { address, reply }).await.unwrap();
    answer.await.unwrap()
}

#[actix_rt::test]
async fn a_validator_builds_on_request_and_acknowledges_each_commit() {
    let _hooks = PROCESS_HOOKS.lock().await;
    let cfg = config("validator-port");
    let (dir, chain_id) = (cfg.store.data_dir.clone(), cfg.chain.chain_id);
    let signer = dev_accounts::derive(&cfg.chain.mnemonic, 1).unwrap().remove(0);
    let (node, port) = Node::start_validator(cfg, "validators:test".into()).await.unwrap();
    let genesis = node.store.head_block();

    // An empty mempool: an empty block once block_time has passed.
    let parent = Parent { number: 0, hash: genesis.block.hash, timestamp: genesis.block.header.timestamp };
    let started = Instant::now();
    let first = port.build(parent, 7, None, Default::default()).await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(50), "waited for block_time");
    assert_eq!((first.block.header.number, first.block.header.timestamp), (1, 7));
    assert_eq!(first.block.header.parent_hash, genesis.block.hash);
    assert!(first.txs.is_empty() && first.block.txs.is_empty());
    deliver_and_commit(&port, Arc::clone(&first.block)).await;

    // A transaction waits; a proposal carrying it loses its height and
    // gives it back; the next proposal, built from another runtime on
    // another thread as consensus would, carries it again.
    admit(&node, transfer(&signer, 0, chain_id)).await;
    let parent = Parent { number: 1, hash: first.block.hash, timestamp: 7 };
    let lost = port.build(parent, 8, None, Default::default()).await.unwrap();
    assert_eq!(lost.txs.len(), 1);
    assert_eq!(node.admission.pool.len(), 0, "taken for the proposal");
    port.restore(lost.txs.clone()).await;
    let app_hash = node.store.block(1).unwrap().app_hash;
    let state_ref = Some(StateRef { height: 1, app_hash });
    let (sent, built) = oneshot::channel();
    let remote = port.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let reply = rt.block_on(remote.build(parent, 9, state_ref, Default::default()));
        let _ = sent.send(reply);
    });
    let second = built.await.unwrap().unwrap();
    assert_eq!(second.txs.iter().map(|t| t.hash).collect::<Vec<_>>(), vec![lost.txs[0].hash]);
    assert_eq!(second.block.header.state_ref, state_ref);
    assert_eq!(second.block.header.number, 2);
    deliver_and_commit(&port, Arc::clone(&second.block)).await;
    assert_eq!(node.store.account(&signer.address()).unwrap().map(|a| a.nonce), Some(1));
    assert_eq!(in_flight(&node, signer.address()).await, None, "nothing left in flight");
    assert_eq!(node.admission.pool.len(), 0);

    // Shutdown drains once the port (and its clones) are gone.
    port.close();
    node.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[actix_rt::test]
async fn a_build_whose_requester_left_loses_no_transaction() {
    let _hooks = PROCESS_HOOKS.lock().await;
    let cfg = config("validator-abandon");
    let (dir, chain_id) = (cfg.store.data_dir.clone(), cfg.chain.chain_id);
    let signer = dev_accounts::derive(&cfg.chain.mnemonic, 1).unwrap().remove(0);
    let (node, port) = Node::start_validator(cfg, "validators:test".into()).await.unwrap();
    let genesis = node.store.head_block();
    let parent = Parent { number: 0, hash: genesis.block.hash, timestamp: 0 };
    admit(&node, transfer(&signer, 0, chain_id)).await;
    // The requester gives up while the build waits for block_time.
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(5),
        port.build(parent, 1, None, Default::default()),
    )
    .await;
    assert!(gave_up.is_err());
    let reply = port.build(parent, 1, None, Default::default()).await.unwrap();
    assert_eq!(reply.txs.len(), 1, "the transaction is still there for the next proposal");
    port.restore(reply.txs).await;
    drop(port);
    node.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[actix_rt::test]
async fn a_block_that_is_not_committed_is_never_acknowledged() {
    let _hooks = PROCESS_HOOKS.lock().await;
    let mut cfg = config("validator-halt");
    cfg.store.inject_commit_failure_at_height = 1;
    let dir = cfg.store.data_dir.clone();
    let (node, port) = Node::start_validator(cfg, "validators:test".into()).await.unwrap();
    let genesis = node.store.head_block();
    let parent = Parent { number: 0, hash: genesis.block.hash, timestamp: 0 };
    let block = port.build(parent, 1, None, Default::default()).await.unwrap().block;
    let (acked, ack) = oneshot::channel::<()>();
    port.deliver(
        block,
        Box::new(move || {
            let _ = acked.send(());
        }),
    )
    .await
    .unwrap();
    // Dropped unfired once the failed commit let go of it: never a false
    // acknowledgement for a block the store does not hold.
    let dropped = ack.await;
    assert!(dropped.is_err());
    assert!(port.store().halted().is_some());
    assert_eq!(*port.committed().borrow(), 0);
    port.close();
    assert!(matches!(node.shutdown().await, Err(NodeError::Halted(_))));
    let _ = std::fs::remove_dir_all(dir);
}

/// A block another validator proposed on `parent`, carrying `txs`.
fn foreign_block(parent: &Parent, txs: &[&RecoveredTx], cfg: &Config) -> Arc<sluice_messages::SealedBlock> {
    let hashes: Vec<u8> = txs.iter().flat_map(|t| t.hash.0).collect();
    let header = sluice_messages::BlockHeader {
        number: parent.number + 1,
        parent_hash: parent.hash,
        timestamp: parent.timestamp,
        coinbase: Address::repeat_byte(0xc0),
        gas_limit: cfg.chain.block_gas_limit,
        base_fee: cfg.chain.base_fee_wei,
        tx_root: sluice_messages::keccak256(&hashes),
        state_ref: None,
    };
    Arc::new(sluice_messages::SealedBlock {
        hash: header.hash(),
        header,
        txs: txs.iter().map(|t| t.raw.clone()).collect(),
    })
}

#[actix_rt::test]
async fn what_the_chain_already_holds_is_never_proposed_and_leaves_the_pool_on_commit() {
    let _hooks = PROCESS_HOOKS.lock().await;
    let cfg = config("validator-prune");
    let (dir, chain_id) = (cfg.store.data_dir.clone(), cfg.chain.chain_id);
    let signers = dev_accounts::derive(&cfg.chain.mnemonic, 2).unwrap();
    let (a0, a1, b0) = (
        transfer(&signers[0], 0, chain_id),
        transfer(&signers[0], 1, chain_id),
        transfer(&signers[1], 0, chain_id),
    );
    let (node, port) = Node::start_validator(cfg.clone(), "validators:test".into()).await.unwrap();
    for tx in [&a0, &a1, &b0] {
        admit(&node, tx.clone()).await;
    }
    assert_eq!(node.admission.pool.len(), 3);

    // Another validator's block carries a0 (the same transaction was sent
    // there too): committed here, it leaves this pool from wherever it is.
    let genesis = node.store.head_block();
    let parent = Parent { number: 0, hash: genesis.block.hash, timestamp: genesis.block.header.timestamp };
    let first = foreign_block(&parent, &[&a0], &cfg);
    deliver_and_commit(&port, Arc::clone(&first)).await;
    // The shard drops it after the commit (before any later take).
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while node.admission.pool.len() != 2 && Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(node.admission.pool.len(), 2, "a0 pruned on commit");

    // A proposal on a chain whose newest block (not committed here yet)
    // carries b0 leaves b0 out, and keeps it queued: that block may yet
    // lose its height.
    let parent = Parent { number: 1, hash: first.hash, timestamp: first.header.timestamp };
    let exclude: Arc<alloy_primitives::map::B256Set> = Arc::new([b0.hash].into_iter().collect());
    let built = port.build(parent, 9, None, exclude).await.unwrap();
    assert_eq!(built.txs.iter().map(|t| t.hash).collect::<Vec<_>>(), vec![a1.hash]);
    assert_eq!(node.admission.pool.len(), 1, "b0 kept while its block is not final");
    deliver_and_commit(&port, Arc::clone(&built.block)).await;
    let receipts = node.store.block(2).unwrap().receipts.len();
    assert_eq!(receipts, 1, "a1 applied, nothing skipped");
    // The block carrying b0 lost its height: the next proposal takes b0.
    let top = node.store.head_block();
    let parent = Parent { number: 2, hash: top.block.hash, timestamp: top.block.header.timestamp };
    let built = port.build(parent, 10, None, Arc::default()).await.unwrap();
    assert_eq!(built.txs.iter().map(|t| t.hash).collect::<Vec<_>>(), vec![b0.hash]);
    deliver_and_commit(&port, Arc::clone(&built.block)).await;
    assert_eq!(node.admission.pool.len(), 0, "b0 included");

    // A peer's copy of a0, which is committed here, is refused by its hash
    // before sender recovery, and counted as such.
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshots = recorder.snapshotter();
    {
        let _here = metrics::set_default_local_recorder(&recorder);
        port.admit_from_peer(vec![a0.raw.clone()]).await;
    }
    let committed: Vec<String> = snapshots
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| format!("{:?} {value:?}", key.key()))
        .collect();
    assert!(
        committed
            .iter()
            .any(|k| k.contains("gossip_admitted") && k.contains("committed") && k.ends_with("Counter(1)")),
        "{committed:?}"
    );
    assert_eq!(node.admission.pool.len(), 0);

    port.close();
    node.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[actix_rt::test]
async fn what_clients_send_queues_for_the_other_validators_within_the_batch_bounds() {
    let _hooks = PROCESS_HOOKS.lock().await;
    let mut cfg = config("validator-outbound");
    cfg.consensus.gossip_queue_txs = 4;
    let (dir, chain_id) = (cfg.store.data_dir.clone(), cfg.chain.chain_id);
    let signer = dev_accounts::derive(&cfg.chain.mnemonic, 1).unwrap().remove(0);
    let (node, port) = Node::start_validator(cfg, "validators:test".into()).await.unwrap();
    let txs: Vec<RecoveredTx> = (0..6).map(|n| transfer(&signer, n, chain_id)).collect();
    for tx in &txs {
        admit(&node, tx.clone()).await;
    }
    let size = txs[0].raw.len();
    // Four fit the queue; the other two stay here only.
    let first = port.outbound(3, usize::MAX).await;
    assert_eq!(first, txs[..3].iter().map(|t| t.raw.clone()).collect::<Vec<_>>(), "at most 3, in order");
    let second = port.outbound(10, 2 * (size + 4) - 1).await;
    assert_eq!(second.len(), 1, "the bytes hold only one");
    let rest =
        tokio::time::timeout(std::time::Duration::from_millis(100), port.outbound(10, usize::MAX)).await;
    assert!(rest.is_err(), "the queue held 4: nothing more to send");
    // What another validator sends is admitted here and never queued.
    let other = dev_accounts::derive(&node_mnemonic(), 2).unwrap().remove(1);
    port.admit_from_peer(vec![transfer(&other, 0, chain_id).raw, txs[5].raw.clone()]).await;
    assert_eq!(node.admission.pool.len(), 7, "the peer's one is new, our own is known");
    let none =
        tokio::time::timeout(std::time::Duration::from_millis(100), port.outbound(10, usize::MAX)).await;
    assert!(none.is_err(), "a peer's transaction is never sent on");
    port.close();
    node.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

fn node_mnemonic() -> String {
    Config::default().chain.mnemonic
}
