//! A follower's check of a proposal's transactions: junk a Byzantine
//! leader could pack is refused before any vote, an honest block passes.

use std::sync::Arc;

use alloy_consensus::{TxEip1559, TxEnvelope, TypedTransaction};
use alloy_eips::eip2718::Encodable2718 as _;
use alloy_primitives::{Address, Bytes, Signature, U256};
use commonware_runtime::Supervisor as _;
use sluice_messages::{BlockHeader, SealedBlock, StateRef};

use super::{genesis, rules, sender, transfer, Recorder, SimBackend, CHAIN_ID};
use crate::{
    app::{Refusal, SluiceApp},
    block::tx_root,
};

/// Checks a block of `txs` on genesis, as a follower's `verify` does.
fn verdict(txs: Vec<Bytes>) -> Result<(), Refusal> {
    super::run("verify", 1, |ctx| async move {
        let g = genesis(4);
        let (parent, genesis_app_hash) = sluice_store::genesis_sealed(&g);
        let backend = SimBackend::new(
            0,
            ctx.child("backend"),
            std::time::Duration::ZERO,
            &g,
            Recorder::default(),
            None,
        );
        let r = rules();
        let app = SluiceApp {
            backend,
            proposals: Arc::default(),
            rules: r,
            coinbase: Address::ZERO,
            max_exec_lag_blocks: 8,
            genesis_app_hash,
            tx_rules: sluice_txpool::AdmissionRules::for_proposals(
                CHAIN_ID,
                sluice_messages::Spec::Osaka,
                r.block_gas_limit,
                r.base_fee_wei,
                r.max_tx_size_bytes,
            ),
            verify_workers: 2,
        };
        let header = BlockHeader {
            number: 1,
            parent_hash: parent.hash,
            timestamp: parent.header.timestamp,
            coinbase: Address::ZERO,
            gas_limit: r.block_gas_limit,
            base_fee: r.base_fee_wei,
            tx_root: tx_root(&txs),
            state_ref: Some(StateRef { height: 0, app_hash: genesis_app_hash }),
        };
        let block = SealedBlock { hash: header.hash(), header, txs };
        app.check(&ctx, &block, &parent).await
    })
}

fn honest(n: u64) -> Vec<Bytes> {
    (0..n).map(|i| transfer(&sender(0), i).raw).collect()
}

fn tx(nonce: u64) -> TxEip1559 {
    super::transfer_tx(nonce)
}

fn signed(t: TxEip1559) -> Bytes {
    sender(1).sign_raw(TypedTransaction::Eip1559(t))
}

/// Honest transfers, then `junk`: refused with `reason`.
fn refused(junk: Bytes, reason: &str) {
    let mut txs = honest(3);
    txs.push(junk);
    match verdict(txs) {
        Err(r) => assert_eq!(r.reason(), reason, "{r:?}"),
        Ok(()) => panic!("a proposal with junk ({reason}) was accepted"),
    }
}

#[test]
fn an_honest_proposal_is_accepted() {
    verdict(honest(20)).expect("honest transfers");
    verdict(Vec::new()).expect("an empty block");
}

#[test]
fn a_proposal_with_an_undecodable_transaction_is_refused() {
    refused(Bytes::from(vec![0xab; 3000]), "invalid");
    let mut trailing = signed(tx(0)).to_vec();
    trailing.push(0x80);
    refused(Bytes::from(trailing), "invalid");
    // A blob transaction's type byte.
    refused(Bytes::from(vec![3, 0xc0]), "type_not_supported");
}

#[test]
fn a_proposal_with_a_bad_signature_is_refused() {
    let sig = Signature::new(U256::from(7), U256::from(7), false);
    let bad = TxEnvelope::new_unhashed(tx(0).into(), sig).encoded_2718();
    refused(Bytes::from(bad), "invalid_sender");
}

#[test]
fn a_proposal_with_another_chains_transaction_is_refused() {
    refused(signed(TxEip1559 { chain_id: CHAIN_ID + 1, ..tx(0) }), "chain_id");
}

#[test]
fn a_proposal_with_gas_below_intrinsic_is_refused() {
    refused(signed(TxEip1559 { gas_limit: 20_000, ..tx(0) }), "intrinsic_gas");
    // Calldata raises the intrinsic cost above the plain 21,000.
    refused(signed(TxEip1559 { input: vec![1u8; 1000].into(), ..tx(0) }), "intrinsic_gas");
}

#[test]
fn a_proposal_declaring_more_gas_than_the_block_is_refused() {
    let limit = rules().block_gas_limit;
    // Each fits a block alone; together they do not.
    let half = |n| signed(TxEip1559 { gas_limit: limit / 2 + 1, ..tx(n) });
    match verdict(vec![half(0), half(1)]) {
        Err(r) => assert_eq!(r.reason(), "block_gas", "{r:?}"),
        Ok(()) => panic!("declared gas over the block limit was accepted"),
    }
    verdict(vec![half(0)]).expect("one fits");
}
