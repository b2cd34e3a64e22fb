//! A seeded generator of blocks that stress the parallel executor: every
//! kind of conflict and skip the sequential executor defines results for.

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use sluice_executor::testing::MemState;
use sluice_messages::{PreparedBlock, PreparedTx};
use sluice_txpool::Signer;

use super::{erc20, *};

/// SplitMix64: small, seedable, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Contracts present at block start.
pub fn counter_addr() -> Address {
    Address::repeat_byte(0xc0)
}
pub fn token_addr() -> Address {
    Address::repeat_byte(0xe2)
}
pub fn reverter_addr() -> Address {
    Address::repeat_byte(0xde)
}
pub fn spinner_addr() -> Address {
    Address::repeat_byte(0x5b)
}
/// Runtime: SSTORE(0, BALANCE(COINBASE)), so its storage records what it saw.
pub fn coinbase_reader_addr() -> Address {
    Address::repeat_byte(0xcc)
}
const COINBASE_READER: &[u8] = &[0x41, 0x31, 0x60, 0x00, 0x55, 0x00];

/// Init code that self-destructs to its creator (EIP-6780: same transaction).
const SUICIDE_INIT: &[u8] = &[0x60, 0x01, 0x60, 0x00, 0x55, 0x33, 0xff];

fn key_signer(i: u64) -> Signer {
    let mut key = [0u8; 32];
    key[0] = 0x5e;
    key[24..].copy_from_slice(&i.to_be_bytes());
    Signer::from_bytes(&B256::from(key)).expect("valid key")
}

/// One generated scenario: the block-start state and the block.
pub struct Scenario {
    pub state: MemState,
    pub block: PreparedBlock,
}

struct Gen {
    rng: Rng,
    senders: Vec<Signer>,
    nonces: Vec<u64>,
    /// Funded later in the block: (signer, its next nonce).
    fresh: Vec<(Signer, u64)>,
    hot: Vec<Address>,
    holders: Vec<usize>,
    empties: Vec<Address>,
    txs: Vec<PreparedTx>,
    next_recipient: u64,
    /// No stale or skipped nonces.
    clean_nonces: bool,
    /// Whether to create, destroy and delegate.
    creations: bool,
    /// Whether to mix in transactions a Byzantine proposer could pack (see
    /// [`Gen::hostile`]).
    hostile: bool,
}

impl Gen {
    fn sender(&mut self) -> usize {
        self.rng.below(self.senders.len() as u64) as usize
    }

    /// The next nonce of sender `s`, sometimes stale or skipped ahead.
    fn nonce(&mut self, s: usize) -> u64 {
        let n = self.nonces[s];
        match self.rng.below(100) {
            0..=1 if n > 0 && !self.clean_nonces => n - 1,
            2..=3 if !self.clean_nonces => n + 1,
            _ => {
                self.nonces[s] += 1;
                n
            }
        }
    }

    fn fresh_address(&mut self) -> Address {
        self.next_recipient += 1;
        let mut a = [0u8; 20];
        a[0] = 0xa1;
        a[12..].copy_from_slice(&self.next_recipient.to_be_bytes());
        Address::from(a)
    }

    fn tx(&mut self, s: usize, to: TxKind, value: u128, input: Bytes, gas: u64) {
        let nonce = self.nonce(s);
        let tip = *self.rng.pick(&[0u128, 1, 2_000_000_000]);
        let tx = TxEip1559 {
            chain_id: CHAIN_ID,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: 10_000_000_000,
            max_priority_fee_per_gas: tip,
            to,
            value: U256::from(value),
            access_list: Default::default(),
            input,
        };
        let signer = &self.senders[s];
        self.txs.push(PreparedTx::ready(recovered(signer, TypedTransaction::Eip1559(tx))));
    }

    fn one(&mut self, pair_rate: u64) {
        // Checked before any draw: without it the seeds replay as before.
        if self.hostile && self.rng.chance(20) {
            return self.hostile_one();
        }
        let s = self.sender();
        let call = |a: Address| TxKind::Call(a);
        let roll = match self.rng.below(100) {
            // Creations, self-destructs, delegations and touches of
            // existing empty accounts (which delete them), when left out.
            69..=75 | 88..=89 | 92 if !self.creations => 99,
            roll => roll,
        };
        match roll {
            // Independent transfers.
            0..=24 => {
                let to = self.fresh_address();
                let gas = 21_000 + self.rng.below(3) * 10_000;
                let value = 1 + u128::from(self.rng.below(1000));
                self.tx(s, call(to), value, Bytes::new(), gas);
            }
            // Hot recipients, and pairs sharing a recipient.
            25..=39 => {
                let to =
                    if self.rng.chance(pair_rate) { *self.rng.pick(&self.hot) } else { self.fresh_address() };
                self.tx(s, call(to), 7, Bytes::new(), 21_000);
            }
            40..=47 => self.tx(s, call(counter_addr()), 0, Bytes::new(), 60_000),
            48..=59 => {
                let from = *self.rng.pick(&self.holders);
                let to_holder = *self.rng.pick(&self.holders);
                let to = self.senders[to_holder].address();
                let amount = self.rng.below(300);
                self.tx(from, call(token_addr()), 0, erc20::transfer_call(to, amount), 80_000);
            }
            // Funded, then spent later in the block.
            60..=64 => {
                let fresh = key_signer(1_000 + self.next_recipient);
                self.next_recipient += 1;
                self.tx(s, call(fresh.address()), ETH / 10, Bytes::new(), 21_000);
                self.fresh.push((fresh, 0));
            }
            65..=68 if !self.fresh.is_empty() => {
                let i = self.rng.below(self.fresh.len() as u64) as usize;
                let (signer, nonce) = &mut self.fresh[i];
                let to = *self.rng.pick(&self.hot);
                let tx = transfer(signer, *nonce, to, 1_000);
                *nonce += 1;
                self.txs.push(tx);
            }
            69..=72 => {
                let init = init_code(&[0x60, 0x07, 0x60, 0x01, 0x55], &counter_runtime());
                self.tx(s, TxKind::Create, 0, init, 200_000);
            }
            73..=75 => self.tx(s, TxKind::Create, 5_000, Bytes::from_static(SUICIDE_INIT), 100_000),
            76..=78 => self.tx(s, call(reverter_addr()), 3, Bytes::new(), 50_000),
            79..=80 => self.tx(s, call(spinner_addr()), 0, Bytes::new(), 40_000),
            81..=84 => self.tx(s, call(coinbase_reader_addr()), 0, Bytes::new(), 60_000),
            85..=87 => self.tx(s, call(coinbase()), 1_000_000, Bytes::new(), 21_000),
            88..=89 => {
                let to = *self.rng.pick(&self.empties);
                self.tx(s, call(to), 0, Bytes::new(), 21_000);
            }
            90 => self.tx(s, call(Address::with_last_byte(4)), 9, Bytes::from_static(b"hi"), 50_000),
            91 => self.txs.push(PreparedTx::Invalid { hash: B256::repeat_byte(0x1d), reason: "bad".into() }),
            92 if self.senders.len() > 1 => self.delegate(s),
            _ => {
                // A legacy transfer to a hot account.
                let nonce = self.nonce(s);
                let to = *self.rng.pick(&self.hot);
                self.txs.push(legacy(&self.senders[s], nonce, to, 11, 3_000_000_000));
            }
        }
    }

    /// One transaction of a block of plain transfers: fresh, hot and
    /// funded-then-spending recipients, and, when `anomalies`, now and then
    /// one that is not a plain transfer after all (to the coinbase, to code,
    /// a zero value).
    fn one_transfer(&mut self, anomalies: bool) {
        let s = self.sender();
        match self.rng.below(100) {
            0..=34 => {
                let to = self.fresh_address();
                let gas = 21_000 + self.rng.below(2) * 10_000;
                let value = 1 + u128::from(self.rng.below(1000));
                self.tx(s, TxKind::Call(to), value, Bytes::new(), gas);
            }
            35..=54 => {
                let to = *self.rng.pick(&self.hot);
                self.tx(s, TxKind::Call(to), 7, Bytes::new(), 21_000);
            }
            55..=64 => {
                let fresh = key_signer(1_000 + self.next_recipient);
                self.next_recipient += 1;
                self.tx(s, TxKind::Call(fresh.address()), ETH / 10, Bytes::new(), 21_000);
                self.fresh.push((fresh, 0));
            }
            65..=74 if !self.fresh.is_empty() => {
                let i = self.rng.below(self.fresh.len() as u64) as usize;
                let (signer, nonce) = &mut self.fresh[i];
                let to = self.senders[s].address();
                let tx = transfer(signer, *nonce, to, 1_000);
                *nonce += 1;
                self.txs.push(tx);
            }
            97 if anomalies => self.tx(s, TxKind::Call(coinbase()), 1_000, Bytes::new(), 21_000),
            98 if anomalies => self.tx(s, TxKind::Call(counter_addr()), 5, Bytes::new(), 60_000),
            99 if anomalies => self.tx(s, TxKind::Call(self.empties[0]), 0, Bytes::new(), 21_000),
            _ => {
                let nonce = self.nonce(s);
                let to = *self.rng.pick(&self.hot);
                self.txs.push(legacy(&self.senders[s], nonce, to, 11, 3_000_000_000));
            }
        }
    }

    /// A transaction a Byzantine proposer could pack into a block that
    /// validators refuse to verify today only partly, or that state alone
    /// makes inapplicable: every one must be skipped or fail exactly as the
    /// sequential executor does it, never panic.
    fn hostile_one(&mut self) {
        let s = self.sender();
        let signer = self.senders[s].clone();
        let to = self.fresh_address();
        let base = TxEip1559 {
            chain_id: CHAIN_ID,
            nonce: self.nonces[s],
            gas_limit: 21_000,
            max_fee_per_gas: 10_000_000_000,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(to),
            value: U256::from(1),
            access_list: Default::default(),
            input: Bytes::new(),
        };
        let tx = match self.rng.below(13) {
            // More than the sender holds (50 ETH), or more than any balance.
            0 => TxEip1559 { value: U256::from(60 * ETH), ..base },
            1 => TxEip1559 { value: U256::MAX, ..base },
            // Gas times fee cap alone past the balance.
            2 => TxEip1559 { gas_limit: 10_000_000, max_fee_per_gas: u128::from(u64::MAX) * 1_000, ..base },
            // An unfunded sender.
            3 => {
                let poor = key_signer(5_000_000 + self.rng.below(1_000));
                let tx = TxEip1559 { nonce: 0, ..base };
                self.txs.push(PreparedTx::ready(recovered(&poor, TypedTransaction::Eip1559(tx))));
                return;
            }
            // Nonce gaps, far ahead, and the largest nonce.
            4 => TxEip1559 { nonce: base.nonce + 2 + self.rng.below(5), ..base },
            5 => TxEip1559 { nonce: u64::MAX, ..base },
            // Gas below intrinsic: plain, and with calldata.
            6 => TxEip1559 { gas_limit: 20_999, ..base },
            7 => TxEip1559 { input: Bytes::from(vec![0xff; 256]), ..base },
            // A call that runs out of gas in a loop, and one that reverts.
            8 => TxEip1559 {
                to: TxKind::Call(spinner_addr()),
                gas_limit: 30_000 + self.rng.below(200_000),
                ..base
            },
            9 => TxEip1559 { to: TxKind::Call(reverter_addr()), gas_limit: 22_000, ..base },
            // Fees a block should never carry: cap below the base fee, tip
            // above the cap; another chain; more gas than the block.
            10 => TxEip1559 { max_fee_per_gas: u128::from(BASE_FEE) - 1, ..base },
            11 => TxEip1559 { max_priority_fee_per_gas: 20_000_000_000, ..base },
            _ => match self.rng.below(4) {
                0 => TxEip1559 { chain_id: CHAIN_ID + 1, ..base },
                1 => TxEip1559 { gas_limit: GAS_LIMIT + 1, ..base },
                // Within the block, past Osaka's per-transaction cap
                // (EIP-7825): refused at execution.
                2 => TxEip1559 { gas_limit: (1 << 24) + 1, ..base },
                // A creation whose init code runs out of gas.
                _ => TxEip1559 {
                    to: TxKind::Create,
                    gas_limit: 60_000,
                    input: init_code(&[0x5b, 0x60, 0x00, 0x56], &counter_runtime()),
                    ..base
                },
            },
        };
        // Either it consumes the nonce (and the next honest one is
        // stale, which is the point) or it is skipped; which one is the
        // executor's to decide, so the honest generator keeps counting
        // from the nonce it planned.
        if self.rng.chance(50) {
            self.nonces[s] = self.nonces[s].saturating_add(1);
        }
        self.txs.push(PreparedTx::ready(recovered(&signer, TypedTransaction::Eip1559(tx))));
        // Now and then the same transaction again, later in the block.
        if self.rng.chance(10) {
            if let Some(again) = self.txs.last().cloned() {
                self.txs.push(again);
            }
        }
    }

    /// EIP-7702: sender `s` sponsors another sender's delegation to the counter.
    fn delegate(&mut self, s: usize) {
        let a = (s + 1) % self.senders.len();
        let authority_nonce = self.nonces[a];
        self.nonces[a] += 1;
        let nonce = self.nonce(s);
        let (sponsor, authority) = (&self.senders[s], &self.senders[a]);
        self.txs.push(delegation(
            (sponsor, nonce),
            (authority, authority_nonce),
            counter_addr(),
            authority.address(),
        ));
    }
}

/// A block of `len` transactions for `seed`.
pub fn scenario(seed: u64, len: usize) -> Scenario {
    build(seed, len, None, true)
}

/// Like [`scenario`], without contract creations, self-destructs,
/// EIP-7702 delegations and touches of existing empty accounts: nothing is
/// deleted (except, in some seeds, an existing empty coinbase).
pub fn scenario_without_creations(seed: u64, len: usize) -> Scenario {
    build(seed, len, None, false)
}

/// Like [`scenario`], with about one transaction in five hostile: funds
/// short, nonce gaps, gas below intrinsic, out-of-gas loops, reverts, fees
/// below the base fee, another chain, duplicates (see `Gen::hostile_one`).
pub fn hostile_scenario(seed: u64, len: usize) -> Scenario {
    build_with(seed, len, None, true, true)
}

/// A block of `len` plain transfers for `seed`: a third of the seeds clean
/// (every transaction applies), the others with stale or skipped nonces and
/// the odd transaction that is not a plain transfer after all.
pub fn transfer_scenario(seed: u64, len: usize) -> Scenario {
    build(seed, len, Some(!seed.is_multiple_of(3)), true)
}

/// `transfers`: `None` for the mixed generator, `Some(anomalies)` for
/// plain transfers only; `creations`: whether contracts are created,
/// destroyed and delegated to.
fn build(seed: u64, len: usize, transfers: Option<bool>, creations: bool) -> Scenario {
    build_with(seed, len, transfers, creations, false)
}

fn build_with(seed: u64, len: usize, transfers: Option<bool>, creations: bool, hostile: bool) -> Scenario {
    let mut rng = Rng::new(seed);
    // Mostly many senders; sometimes a few, so that nonce chains dominate.
    let sender_count = if rng.chance(20) { 2 + rng.below(6) } else { 16 + rng.below(48) } as usize;
    let senders: Vec<Signer> = (0..sender_count as u64).map(key_signer).collect();
    let mut state = MemState::new();
    for s in &senders {
        state.set_account(s.address(), U256::from(50 * ETH), 0);
    }
    state.set_code(counter_addr(), counter_runtime());
    state.set_storage(counter_addr(), U256::ZERO, U256::from(rng.below(5)));
    state.set_code(token_addr(), erc20::runtime());
    let holders: Vec<usize> = (0..sender_count.min(1 + rng.below(6) as usize)).collect();
    for h in &holders {
        state.set_storage(token_addr(), erc20::balance_slot(senders[*h].address()), U256::from(10_000));
    }
    state.set_code(reverter_addr(), reverter_runtime());
    state.set_code(spinner_addr(), spinner_runtime());
    state.set_code(coinbase_reader_addr(), Bytes::from_static(COINBASE_READER));
    let empties: Vec<Address> = (0..3).map(|i| Address::repeat_byte(0xe0 + i)).collect();
    for e in &empties {
        state.set_account(*e, U256::ZERO, 0);
    }
    // The coinbase: absent (most seeds), funded, or an existing empty
    // account (which the parallel engine hands to the sequential one).
    match rng.below(10) {
        0..=5 => {}
        6..=8 => {
            state.set_account(coinbase(), U256::from(ETH), 0);
        }
        _ => {
            state.set_account(coinbase(), U256::ZERO, 0);
        }
    }
    let hot: Vec<Address> = (0..1 + rng.below(4)).map(|i| Address::repeat_byte(0x70 + i as u8)).collect();
    let pair_rate = rng.below(101);
    let mut g = Gen {
        rng,
        nonces: vec![0; senders.len()],
        senders,
        fresh: Vec::new(),
        hot,
        holders,
        empties,
        txs: Vec::with_capacity(len),
        next_recipient: seed << 20,
        clean_nonces: transfers == Some(false),
        creations,
        hostile,
    };
    while g.txs.len() < len {
        match transfers {
            None => g.one(pair_rate),
            Some(anomalies) => g.one_transfer(anomalies),
        }
    }
    // Sometimes a block gas limit that runs out part way through.
    let gas_limit = if g.rng.chance(15) { 21_000 * len as u64 } else { GAS_LIMIT };
    Scenario { state, block: block(1 + seed % 7, gas_limit, g.txs) }
}
