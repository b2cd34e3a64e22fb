//! What each transaction does, and pre-signing them on all cores before
//! the clock starts.

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{hex, Address, Bytes, TxKind, B256, U256};
use sluice_messages::keccak256;
use sluice_txpool::Signer;

use crate::{contracts, keys};

/// The kind of transaction a run sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// 1 wei to a fresh recipient per transaction (no two touch the same
    /// recipient).
    Transfer,
    /// Like `Transfer`, but with probability `rate` the recipient is the
    /// sender's pair partner (senders 2k and 2k+1), itself a busy sender:
    /// read-write conflicts between transactions of one block.
    Conflict {
        /// 0 to 1.
        rate: f64,
    },
    /// ERC-20-like `transfer(fresh recipient, 1)` on a token deployed at
    /// setup, from senders that minted at setup.
    Erc20 {
        /// The token.
        token: Address,
    },
    /// 1 wei to a random existing account among the first `accounts`
    /// synthetic accounts funded at genesis (`chain.synthetic_accounts`):
    /// state that does not grow, reads spread over all of it.
    Existing {
        /// How many synthetic accounts the chain has.
        accounts: u64,
    },
    /// `increment()` on one counter: every transaction writes one slot.
    Counter {
        /// The counter.
        counter: Address,
    },
    /// ERC-20-like `transfer(holder, 1)` on a token deployed at setup, where
    /// the holder is another of the run's senders (all minted at setup), so
    /// no account or slot is created: state does not grow. The holder is
    /// drawn from (seed, index) with [`holder`], never the sender itself
    /// unless it is the only one.
    Erc20Holders {
        /// The token.
        token: Address,
    },
    /// A mixed block, per transaction index by [`unit_draw`] `u`:
    /// - `u < 0.005` (0.5%, 1 in 200): a contract creation deploying the
    ///   counter (`TxKind::Create`, [`DEPLOY_GAS`]);
    /// - `0.005 <= u < 0.505` (50%): `transfer(holder, 1)` on `token`, as
    ///   [`Workload::Erc20Holders`];
    /// - `u >= 0.505` (49.5%): 1 wei to a fresh recipient, as
    ///   [`Workload::Transfer`].
    Mixed {
        /// The token, deployed and minted for every sender at setup.
        token: Address,
    },
}

/// Share of [`Workload::Mixed`] transactions that deploy a contract.
pub const MIXED_DEPLOY_SHARE: f64 = 0.005;
/// Share of [`Workload::Mixed`] transactions that are token transfers
/// among holders (the rest are native transfers to fresh recipients).
pub const MIXED_ERC20_SHARE: f64 = 0.5;

/// Gas and fee settings shared by every transaction of a run.
#[derive(Debug, Clone, Copy)]
pub struct Fees {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// `max_fee_per_gas`.
    pub max_fee_wei: u128,
    /// `max_priority_fee_per_gas`.
    pub tip_wei: u128,
}

/// Gas limit of a contract call (a token transfer into a fresh slot uses
/// ~52k; generous so a cold slot never runs out).
const CALL_GAS: u64 = 100_000;

/// Gas limit of a contract creation (deploying the counter uses ~55k;
/// generous so a larger contract from [`contracts`] fits too).
pub const DEPLOY_GAS: u64 = 500_000;

impl Workload {
    /// The unsigned transaction number `index` of the run, from `sender`
    /// (index `sender_idx` among `senders`) at `nonce`.
    pub fn build(
        &self,
        fees: &Fees,
        seed: u64,
        index: u64,
        nonce: u64,
        sender_idx: usize,
        senders: &[Address],
    ) -> TypedTransaction {
        let native = |to| (TxKind::Call(to), 21_000, Bytes::new(), U256::from(1));
        let token_transfer = |token, to| {
            let data = contracts::call_address_amount(contracts::TRANSFER_SELECTOR, to, U256::from(1));
            (TxKind::Call(token), CALL_GAS, data, U256::ZERO)
        };
        let to_holder = |token| token_transfer(token, holder(seed, index, sender_idx, senders));
        let (to, gas, input, value) = match *self {
            Workload::Transfer => native(keys::recipient(seed, index)),
            Workload::Conflict { rate } => {
                let partner = senders.get(sender_idx ^ 1).copied();
                native(match partner {
                    Some(p) if unit_draw(seed, index) < rate => p,
                    _ => keys::recipient(seed, index),
                })
            }
            Workload::Existing { accounts } => {
                let pick = (unit_draw(seed, index) * accounts as f64) as u64;
                native(sluice_messages::synthetic_address(pick.min(accounts.saturating_sub(1))))
            }
            Workload::Erc20 { token } => token_transfer(token, keys::recipient(seed, index)),
            Workload::Counter { counter } => (TxKind::Call(counter), CALL_GAS, Bytes::new(), U256::ZERO),
            Workload::Erc20Holders { token } => to_holder(token),
            Workload::Mixed { token } => {
                let u = unit_draw(seed, index);
                if u < MIXED_DEPLOY_SHARE {
                    let init = contracts::initcode(&contracts::counter_runtime());
                    (TxKind::Create, DEPLOY_GAS, init, U256::ZERO)
                } else if u < MIXED_DEPLOY_SHARE + MIXED_ERC20_SHARE {
                    to_holder(token)
                } else {
                    native(keys::recipient(seed, index))
                }
            }
        };
        TypedTransaction::Eip1559(TxEip1559 {
            chain_id: fees.chain_id,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: fees.max_fee_wei,
            max_priority_fee_per_gas: fees.tip_wei,
            to,
            value,
            access_list: Default::default(),
            input,
        })
    }
}

/// A deterministic draw in [0, 1) for transaction `index`.
pub fn unit_draw(seed: u64, index: u64) -> f64 {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&seed.to_be_bytes());
    buf[8..].copy_from_slice(&index.to_be_bytes());
    let h = keccak256(&buf);
    let mut top = [0u8; 8];
    top.copy_from_slice(&h[..8]);
    (u64::from_be_bytes(top) >> 11) as f64 / (1u64 << 53) as f64
}

/// The token holder transaction `index` of sender `sender_idx` pays: another
/// of `senders`, drawn from (seed, index) independently of [`unit_draw`]
/// (so [`Workload::Mixed`]'s choice of kind does not bias it), never the
/// sender itself unless it is the only one. The senders are the holders:
/// setup minted for every one of them.
pub fn holder(seed: u64, index: u64, sender_idx: usize, senders: &[Address]) -> Address {
    let n = senders.len();
    if n < 2 {
        return senders.first().copied().unwrap_or_default();
    }
    let mut buf = [0u8; 22];
    buf[..8].copy_from_slice(&seed.to_be_bytes());
    buf[8..16].copy_from_slice(&index.to_be_bytes());
    buf[16..].copy_from_slice(b"holder");
    let h = keccak256(&buf);
    let mut top = [0u8; 8];
    top.copy_from_slice(&h[..8]);
    // An offset in 1..n from the sender: any other sender, never itself.
    let offset = 1 + (u64::from_be_bytes(top) % (n as u64 - 1)) as usize;
    senders[(sender_idx % n + offset) % n]
}

/// A signed transaction ready to send.
#[derive(Debug, Clone)]
pub struct PreTx {
    /// Its nonce.
    pub nonce: u64,
    /// `0x` + hex of the raw EIP-2718 bytes: the JSON string sent.
    pub hex: Box<str>,
    /// keccak of the raw bytes: what the node must answer, and what block
    /// scanning looks for.
    pub hash: B256,
}

/// One sender's pre-signed transactions, in nonce order.
#[derive(Debug)]
pub struct SenderTxs {
    /// Index into the run's signers.
    pub sender: usize,
    /// Consecutive nonces from the sender's pending nonce.
    pub txs: Vec<PreTx>,
}

/// How many of `total` transactions sender `i` of `senders` gets: an even
/// split, the first `total % senders` getting one more.
pub fn share(total: u64, senders: usize, i: usize) -> u64 {
    let n = senders.max(1) as u64;
    total / n + u64::from((i as u64) < total % n)
}

/// Signs `total` transactions spread over `signers` (starting at each one's
/// `nonces[i]`), on all cores. Transaction numbers interleave senders
/// (number k belongs to sender k % n), so recipients differ per number.
pub fn presign(
    workload: &Workload,
    fees: &Fees,
    seed: u64,
    signers: &[Signer],
    nonces: &[u64],
    total: u64,
) -> Vec<SenderTxs> {
    let addresses: Vec<Address> = signers.iter().map(Signer::address).collect();
    let n = signers.len();
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).max(1);
    let chunk = n.div_ceil(threads).max(1);
    let indices: Vec<usize> = (0..n).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = indices
            .chunks(chunk)
            .map(|part| {
                let addresses = &addresses;
                s.spawn(move || {
                    part.iter()
                        .map(|&i| {
                            let count = share(total, n, i);
                            let txs = (0..count)
                                .map(|j| {
                                    let nonce = nonces[i] + j;
                                    let index = j * n as u64 + i as u64;
                                    let tx = workload.build(fees, seed, index, nonce, i, addresses);
                                    sign(&signers[i], tx, nonce)
                                })
                                .collect();
                            SenderTxs { sender: i, txs }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

/// Signs one transaction.
pub fn sign(signer: &Signer, tx: TypedTransaction, nonce: u64) -> PreTx {
    let raw = signer.sign_raw(tx);
    PreTx { nonce, hash: keccak256(&raw), hex: format!("0x{}", hex::encode(&raw)).into_boxed_str() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        let total: u64 = (0..7).map(|i| share(100, 7, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(share(100, 7, 0), 15);
        assert_eq!(share(100, 7, 6), 14);
        assert_eq!(share(3, 10, 5), 0);
    }

    #[test]
    fn conflict_rate_sends_to_the_partner() {
        let signers = keys::seeded_keys(1, 4);
        let addrs: Vec<Address> = signers.iter().map(Signer::address).collect();
        let fees = Fees { chain_id: 31337, max_fee_wei: 2, tip_wei: 1 };
        let to = |w: Workload, i: u64| match w.build(&fees, 9, i, 0, 0, &addrs) {
            TypedTransaction::Eip1559(tx) => tx.to.to().copied(),
            _ => None,
        };
        let always = Workload::Conflict { rate: 1.0 };
        let never = Workload::Conflict { rate: 0.0 };
        assert_eq!(to(always, 3), Some(addrs[1]));
        assert_ne!(to(never, 3), Some(addrs[1]));
        let hits = (0..1000).filter(|i| unit_draw(9, *i) < 0.3).count();
        assert!((200..400).contains(&hits), "{hits} of 1000 draws under 0.3");
    }

    fn fees() -> Fees {
        Fees { chain_id: 31337, max_fee_wei: 2, tip_wei: 1 }
    }

    fn eip1559(tx: TypedTransaction) -> TxEip1559 {
        match tx {
            TypedTransaction::Eip1559(tx) => tx,
            other => panic!("not EIP-1559: {other:?}"),
        }
    }

    /// The recipient of a token `transfer(to, amount)` call, and the amount.
    fn transfer_args(input: &[u8]) -> (Address, U256) {
        assert_eq!(input.len(), 68);
        assert_eq!(&input[..4], &contracts::TRANSFER_SELECTOR);
        assert_eq!(&input[4..16], &[0u8; 12]);
        (Address::from_slice(&input[16..36]), U256::from_be_slice(&input[36..68]))
    }

    #[test]
    fn erc20_holders_pay_another_sender_never_a_fresh_address() {
        let token = Address::repeat_byte(0x70);
        let addrs: Vec<Address> = keys::seeded_keys(3, 5).iter().map(Signer::address).collect();
        let w = Workload::Erc20Holders { token };
        let mut paid = std::collections::HashSet::new();
        for index in 0..2000u64 {
            let sender = (index % 5) as usize;
            let tx = eip1559(w.build(&fees(), 3, index, index / 5, sender, &addrs));
            assert_eq!(tx.to, TxKind::Call(token));
            assert_eq!(tx.value, U256::ZERO);
            let (to, amount) = transfer_args(&tx.input);
            assert_eq!(amount, U256::from(1));
            assert!(addrs.contains(&to), "index {index}: {to} is not a holder");
            assert_ne!(to, addrs[sender], "index {index}: sends to itself");
            assert_ne!(to, keys::recipient(3, index));
            paid.insert(to);
            // Deterministic in (seed, index).
            assert_eq!(tx, eip1559(w.build(&fees(), 3, index, index / 5, sender, &addrs)));
        }
        assert_eq!(paid.len(), 5, "every holder is paid by someone");
        // A lone sender can only pay itself.
        let tx = eip1559(w.build(&fees(), 3, 0, 0, 0, &addrs[..1]));
        assert_eq!(transfer_args(&tx.input).0, addrs[0]);
    }

    #[test]
    fn mixed_proportions_and_kinds() {
        let token = Address::repeat_byte(0x70);
        let addrs: Vec<Address> = keys::seeded_keys(4, 7).iter().map(Signer::address).collect();
        let w = Workload::Mixed { token };
        let (mut deploys, mut erc20, mut native) = (0u32, 0u32, 0u32);
        let total = 10_000u64;
        for index in 0..total {
            let sender = (index % 7) as usize;
            let tx = eip1559(w.build(&fees(), 4, index, 0, sender, &addrs));
            match tx.to {
                TxKind::Create => {
                    deploys += 1;
                    assert!(!tx.input.is_empty());
                    assert_eq!(tx.input, contracts::initcode(&contracts::counter_runtime()));
                    assert_eq!(tx.gas_limit, DEPLOY_GAS);
                    assert_eq!(tx.value, U256::ZERO);
                }
                TxKind::Call(to) if to == token => {
                    erc20 += 1;
                    let (holder, amount) = transfer_args(&tx.input);
                    assert!(addrs.contains(&holder) && holder != addrs[sender]);
                    assert_eq!(amount, U256::from(1));
                }
                TxKind::Call(to) => {
                    native += 1;
                    assert_eq!(to, keys::recipient(4, index));
                    assert_eq!(tx.value, U256::from(1));
                    assert!(tx.input.is_empty());
                    assert_eq!(tx.gas_limit, 21_000);
                }
            }
        }
        assert_eq!(u64::from(deploys + erc20 + native), total);
        // Expected 50, 5,000 and 4,950 (binomial sd ~7, ~50, ~50).
        assert!((25..=80).contains(&deploys), "{deploys} deploys of {total}");
        assert!((4_800..=5_200).contains(&erc20), "{erc20} token transfers of {total}");
        assert!((4_750..=5_150).contains(&native), "{native} native transfers of {total}");
    }

    #[test]
    fn presigned_nonces_are_consecutive_per_sender() {
        let signers = keys::seeded_keys(2, 3);
        let fees = Fees { chain_id: 31337, max_fee_wei: 2_000_000_000, tip_wei: 1 };
        let out = presign(&Workload::Transfer, &fees, 2, &signers, &[5, 0, 9], 7);
        assert_eq!(out.iter().map(|s| s.txs.len()).sum::<usize>(), 7);
        let s0 = out.iter().find(|s| s.sender == 0).unwrap();
        assert_eq!(s0.txs.iter().map(|t| t.nonce).collect::<Vec<_>>(), vec![5, 6, 7]);
        let raw = hex::decode(&s0.txs[0].hex[2..]).unwrap();
        let rec = sluice_txpool::recover_raw(raw.into()).unwrap();
        assert_eq!(rec.sender, signers[0].address());
        assert_eq!(rec.hash, s0.txs[0].hash);
    }
}
