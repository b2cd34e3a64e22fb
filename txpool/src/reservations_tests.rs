//! The reservation engine against a plain in-memory committed state:
//! admission's rules, held transactions, a full pool, block progress,
//! a rebuild and expiry.

use std::time::Duration;

use super::*;

const A: Address = Address::repeat_byte(0xa1);
const B: Address = Address::repeat_byte(0xb2);
const C: Address = Address::repeat_byte(0xc3);
const SHARDS: usize = 4;
/// Bytes each test transaction counts for in the pool.
const SIZE: usize = 100;
/// The maximum cost of a transaction at [`FEE`] (21000 gas, no value).
const COST: u64 = 21_000 * FEE as u64;
const FEE: u128 = 100;
const LIFETIME: Duration = Duration::from_secs(10);
const DELEGATION_HASH: B256 = B256::repeat_byte(0xde);

/// A transaction of `sender` at `nonce` paying fee cap `fee` and tip `tip`.
fn priced(sender: Address, nonce: u64, fee: u128, tip: u128) -> RecoveredTx {
    crate::test_txs::priced(sender, nonce, fee, tip, SIZE)
}

fn tx(sender: Address, nonce: u64) -> RecoveredTx {
    priced(sender, nonce, FEE, 10)
}

/// Committed state as the store would give it.
#[derive(Default)]
struct State {
    head: u64,
    accounts: HashMap<Address, Account>,
}

impl State {
    fn set(&mut self, address: Address, nonce: u64, balance: u64) {
        let code_hash = self.accounts.get(&address).map_or(EMPTY_CODE_HASH, |a| a.code_hash);
        self.accounts.insert(address, Account { nonce, balance: U256::from(balance), code_hash });
    }
}

impl CommittedState for State {
    fn head(&self) -> u64 {
        self.head
    }
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        Ok(self.accounts.get(address).copied())
    }
    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        let mut code = vec![0xef, 0x01, 0x00];
        code.extend_from_slice(&[0x11; 20]);
        Ok(if *hash == DELEGATION_HASH { Bytes::from(code) } else { Bytes::new() })
    }
}

/// An engine with its shared handles, a committed state and the outbox of
/// what it staged.
struct Pool {
    engine: Reservations,
    state: State,
    pending: Arc<PendingTxs>,
    counters: Arc<PoolCounters>,
    out: Outbox,
}

impl Pool {
    /// Room for `max_txs` transactions, `per_sender` in flight each;
    /// senders A, B and C can pay a hundred transactions.
    fn new(max_txs: u64, per_sender: u32) -> Self {
        let pending = Arc::new(PendingTxs::default());
        let counters = Arc::new(PoolCounters::new(max_txs, u64::MAX));
        let limits = ReservationLimits {
            shards: SHARDS,
            max_txs_per_sender: per_sender,
            future: FutureLimits { per_sender: 2, total: 3, lifetime: LIFETIME, price_bump: 10 },
        };
        let cache = Arc::new(PreparedTxCache::new(64));
        let engine = Reservations::new(Arc::clone(&pending), Arc::clone(&counters), cache, limits, 0);
        let mut state = State::default();
        for sender in [A, B, C] {
            state.set(sender, 0, 100 * COST);
        }
        Pool { engine, state, pending, counters, out: Outbox::new(SHARDS) }
    }

    /// Admits `tx` as the nonce actor does: with admission's read of the
    /// committed account, then staging what was reserved and promoting
    /// what that let through.
    fn admit(&mut self, tx: RecoveredTx) -> Result<Admitted, TxError> {
        let account = self.state.account(&tx.sender).unwrap().unwrap_or_default();
        let committed = CommittedAccount {
            height: self.state.head,
            nonce: account.nonce,
            balance: account.balance,
            delegated: account.code_hash == DELEGATION_HASH,
        };
        let admitted = self.engine.admit(&self.state, &tx, committed, true, &mut self.out)?;
        match admitted {
            Admitted::Reserved => {
                let sender = tx.sender;
                self.engine.stage(tx, Some(0), &mut self.out);
                self.engine.promote(&self.state, &sender, &mut self.out);
            }
            Admitted::Replaced { old } => self.engine.stage_replacement(old, tx, &mut self.out),
            Admitted::Held => {}
        }
        Ok(admitted)
    }

    fn refusal(&mut self, tx: RecoveredTx) -> String {
        self.admit(tx).unwrap_err().to_string()
    }

    /// The nonces staged for `sender`'s shard, in order.
    fn staged(&self, sender: &Address) -> Vec<u64> {
        let shard = Reservations::shard_of(sender, SHARDS);
        self.out.txs[shard].iter().filter(|p| p.tx.sender == *sender).map(|p| p.tx.nonce()).collect()
    }

    /// A block included `count` of `sender`'s transactions, its next nonce
    /// now `nonce` (balance unchanged: nothing was spent).
    fn block(&mut self, sender: Address, count: u32, nonce: u64) {
        self.state.head += 1;
        let balance = self.state.accounts[&sender].balance.to::<u64>();
        self.state.set(sender, nonce, balance);
        let height = self.state.head;
        self.engine.executed(&self.state, height, &[(sender, count, nonce)], &mut self.out);
    }
}

#[test]
fn gapless_admission_numbers_in_arrival_order() {
    let mut pool = Pool::new(100, 16);
    for n in 0..3 {
        assert_eq!(pool.admit(tx(A, n)), Ok(Admitted::Reserved));
    }
    pool.admit(tx(B, 0)).unwrap();
    assert_eq!(pool.staged(&A), vec![0, 1, 2]);
    assert_eq!(pool.engine.next_nonce(&A), Some(3));
    assert_eq!((pool.counters.len(), pool.counters.bytes()), (4, 4 * SIZE as u64));
    let mut seqs: Vec<u64> = pool.out.txs.iter().flatten().map(|p| p.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (RESTORED_SEQ_LIMIT..RESTORED_SEQ_LIMIT + 4).collect::<Vec<_>>());
    assert!(pool.pending.contains(&tx(A, 1).hash));
    assert_eq!(pool.refusal(tx(A, 1)), "already known");
}

#[test]
fn nonce_too_low_is_refused_with_the_next_nonce() {
    let mut pool = Pool::new(100, 16);
    pool.state.set(A, 5, 100 * COST);
    assert_eq!(pool.refusal(tx(A, 4)), "nonce too low: next nonce 5, tx nonce 4");
    pool.admit(tx(A, 5)).unwrap();
    // No in-flight transaction at 4 to replace: still too low.
    assert_eq!(pool.refusal(priced(A, 4, 2 * FEE, 20)), "nonce too low: next nonce 6, tx nonce 4");
}

#[test]
fn nonce_too_high_is_held_then_promoted_when_the_gap_fills() {
    let mut pool = Pool::new(100, 16);
    assert_eq!(pool.admit(tx(A, 2)), Ok(Admitted::Held));
    assert_eq!(pool.admit(tx(A, 1)), Ok(Admitted::Held));
    assert_eq!((pool.engine.held(), pool.staged(&A).len()), (2, 0));
    assert_eq!(pool.refusal(tx(A, 2)), "already known");
    pool.admit(tx(A, 0)).unwrap();
    assert_eq!(pool.staged(&A), vec![0, 1, 2]);
    assert_eq!(pool.engine.held(), 0);
    assert_eq!(pool.out.promoted, vec![tx(A, 1).hash, tx(A, 2).hash], "nobody waits for these");
    let published: Vec<B256> = pool.out.admitted.iter().map(|t| t.hash).collect();
    assert_eq!(published, pool.out.promoted, "the caller publishes only what it admitted itself");
    // Without holding, a gap is refused.
    let (account, committed_at) = (pool.state.accounts[&B], pool.state.head);
    let committed =
        CommittedAccount { height: committed_at, nonce: 0, balance: account.balance, delegated: false };
    let refused = pool.engine.admit(&pool.state, &tx(B, 1), committed, false, &mut pool.out);
    assert_eq!(refused.unwrap_err().to_string(), "nonce too high: next nonce 0, tx nonce 1");
}

#[test]
fn a_block_fills_a_gap_or_takes_a_held_nonce() {
    let mut pool = Pool::new(100, 16);
    pool.admit(tx(A, 1)).unwrap();
    pool.admit(tx(B, 1)).unwrap();
    // A's nonce 0 came in a block from elsewhere: its held 1 goes on.
    pool.block(A, 0, 1);
    assert_eq!(pool.staged(&A), vec![1]);
    // B's nonce moved past its held 1: that one can never apply.
    pool.block(B, 0, 2);
    let dropped: Vec<_> = pool.out.dropped.iter().filter(|d| !d.txs.is_empty()).collect();
    assert_eq!(dropped.len(), 1);
    assert_eq!((dropped[0].txs[0].hash, &dropped[0].why), (tx(B, 1).hash, &DropWhy::NonceTaken));
    assert_eq!(pool.engine.held(), 0);
}

#[test]
fn overdraft_is_refused_with_geths_wording() {
    let mut pool = Pool::new(100, 16);
    pool.state.set(A, 0, COST / 2);
    assert_eq!(
        pool.refusal(tx(A, 0)),
        "insufficient funds for gas * price + value: balance 1050000, tx cost 2100000, overshot 1050000"
    );
    pool.state.set(A, 0, COST * 3 / 2);
    pool.admit(tx(A, 0)).unwrap();
    assert_eq!(
        pool.refusal(tx(A, 1)),
        "insufficient funds for gas * price + value: balance 3150000, queued cost 2100000, tx cost 2100000, overshot 1050000"
    );
    assert_eq!(pool.engine.next_nonce(&A), Some(1), "the refused one reserved nothing");
}

#[test]
fn block_progress_frees_in_flight_costs() {
    let mut pool = Pool::new(100, 16);
    pool.state.set(A, 0, COST * 5 / 2);
    pool.admit(tx(A, 0)).unwrap();
    pool.admit(tx(A, 1)).unwrap();
    assert!(pool.refusal(tx(A, 2)).contains("queued cost 4200000"));
    pool.block(A, 1, 1);
    assert_eq!(pool.admit(tx(A, 2)), Ok(Admitted::Reserved));
    assert_eq!(pool.engine.next_nonce(&A), Some(3));
}

#[test]
fn a_replacement_needs_the_price_bump() {
    let mut pool = Pool::new(100, 16);
    pool.admit(tx(A, 0)).unwrap();
    pool.admit(tx(A, 1)).unwrap();
    assert_eq!(pool.refusal(priced(A, 0, FEE + 5, 10)), "replacement transaction underpriced");
    let faster = priced(A, 0, FEE * 11 / 10, 11);
    assert_eq!(pool.admit(faster.clone()), Ok(Admitted::Replaced { old: tx(A, 0).hash }));
    let shard = Reservations::shard_of(&A, SHARDS);
    let replace: Vec<(B256, B256)> =
        pool.out.replace[shard].iter().map(|(old, new)| (*old, new.hash)).collect();
    assert_eq!(replace, vec![(tx(A, 0).hash, faster.hash)]);
    assert_eq!(pool.pending.by_nonce(&A, 0).map(|t| t.hash), Some(faster.hash));
    assert_eq!((pool.counters.len(), pool.engine.next_nonce(&A)), (2, Some(2)), "it takes no room");
}

#[test]
fn a_full_pool_evicts_a_cheaper_tail_for_a_better_newcomer_only() {
    let mut pool = Pool::new(2, 16);
    pool.admit(priced(A, 0, FEE, 10)).unwrap();
    pool.admit(priced(B, 0, 2 * FEE, 20)).unwrap();
    assert_eq!(pool.engine.floor(), Some(Price { tip: 10, fee_cap: FEE }));
    // Paying less than the cheapest, or the same: refused.
    assert_eq!(pool.refusal(priced(C, 0, FEE / 2, 5)), "transaction underpriced");
    assert_eq!(pool.refusal(priced(C, 0, FEE, 10)), "txpool is full");
    assert_eq!(pool.out.evict.iter().flatten().count(), 0);
    // Outbidding the cheapest tail (A's) takes its room.
    assert_eq!(pool.admit(priced(C, 0, 3 * FEE, 30)), Ok(Admitted::Reserved));
    let evicted: Vec<B256> = pool.out.evict.iter().flatten().map(|t| t.hash).collect();
    assert_eq!(evicted, vec![priced(A, 0, FEE, 10).hash]);
    assert!(pool.out.dropped.iter().any(|d| d.why == DropWhy::Evicted && d.txs.len() == 1));
    assert_eq!(pool.counters.len(), 2);
    assert!(!pool.pending.contains(&evicted[0]));
    assert_eq!(pool.engine.next_nonce(&A), None, "A may send its nonce 0 again");
}

#[test]
fn per_sender_limit() {
    let mut pool = Pool::new(100, 2);
    pool.admit(tx(A, 0)).unwrap();
    pool.admit(tx(A, 1)).unwrap();
    assert_eq!(pool.refusal(tx(A, 2)), "account limit exceeded: 2 transactions in flight, limit 2");
    pool.admit(tx(B, 0)).unwrap();
}

#[test]
fn a_delegated_sender_gets_one_in_flight() {
    let mut pool = Pool::new(100, 16);
    pool.state.accounts.get_mut(&A).unwrap().code_hash = DELEGATION_HASH;
    assert_eq!(pool.refusal(tx(A, 1)), "gapped-nonce tx from delegated accounts");
    pool.admit(tx(A, 0)).unwrap();
    assert_eq!(pool.refusal(tx(A, 1)), "in-flight transaction limit reached for delegated accounts");
    // A replacement of the one in flight is still taken.
    assert!(matches!(pool.admit(priced(A, 0, 2 * FEE, 20)), Ok(Admitted::Replaced { .. })));
    pool.block(A, 1, 1);
    assert_eq!(pool.admit(tx(A, 1)), Ok(Admitted::Reserved));
}

#[test]
fn a_rebuild_after_a_panic_gives_the_same_book() {
    let mut pool = Pool::new(100, 16);
    pool.state.set(C, 0, COST * 5 / 2);
    for n in 0..3 {
        pool.admit(tx(A, n)).unwrap();
    }
    pool.admit(priced(B, 0, 2 * FEE, 20)).unwrap();
    pool.admit(tx(C, 0)).unwrap();
    pool.admit(tx(C, 1)).unwrap();
    let before = ([A, B, C].map(|s| pool.engine.next_nonce(&s)), pool.engine.senders(), pool.engine.floor());
    // What a batch staged when it panicked is taken back: only it is lost.
    let mut batch = Outbox::new(SHARDS);
    std::mem::swap(&mut batch, &mut pool.out);
    pool.admit(tx(A, 3)).unwrap();
    let lost = std::mem::replace(&mut pool.out, batch);
    let unstaged = pool.engine.unstage(lost);
    assert_eq!(unstaged.answered, vec![tx(A, 3).hash]);
    assert!(!pool.pending.contains(&tx(A, 3).hash));
    assert_eq!(pool.counters.len(), 6);

    pool.state.head = 7;
    assert_eq!(pool.engine.rebuild(&pool.state), (3, 7));
    let after = ([A, B, C].map(|s| pool.engine.next_nonce(&s)), pool.engine.senders(), pool.engine.floor());
    assert_eq!(after, before);
    assert_eq!(after.0, [Some(3), Some(1), Some(2)]);
    // The in-flight costs came back with it.
    assert!(pool.refusal(tx(C, 2)).contains("queued cost 4200000"));
    // A block at or below the rebuild's height is already in the book.
    pool.engine.executed(&pool.state, 7, &[(A, 1, 1)], &mut pool.out);
    assert_eq!(pool.engine.next_nonce(&A), Some(3));
    pool.admit(tx(A, 3)).unwrap();
}

#[test]
fn held_transactions_expire_and_a_full_held_queue_evicts() {
    let mut pool = Pool::new(100, 16);
    pool.admit(tx(A, 1)).unwrap();
    pool.admit(tx(A, 2)).unwrap();
    assert_eq!(pool.refusal(tx(A, 3)), "account limit exceeded: 2 transactions in flight, limit 2");
    // The queue holds 3 in all: full, a sender holding as much as the
    // one that holds most is refused, another pushes out the most's last.
    pool.admit(tx(B, 1)).unwrap();
    assert_eq!(pool.refusal(tx(B, 2)), "txpool is full");
    pool.admit(tx(C, 1)).unwrap();
    let evicted: Vec<_> =
        pool.out.dropped.iter().filter(|d| d.why == DropWhy::HeldQueueFull).flat_map(|d| &d.txs).collect();
    assert_eq!(evicted.iter().map(|t| t.hash).collect::<Vec<_>>(), vec![tx(A, 2).hash]);
    assert_eq!(pool.engine.held(), 3);
    assert!(pool.engine.expire(Instant::now()).is_empty(), "not yet");
    let expired = pool.engine.expire(Instant::now() + LIFETIME + Duration::from_millis(1));
    assert_eq!(expired.len(), 3);
    assert_eq!(pool.engine.held(), 0);
    pool.admit(tx(C, 2)).unwrap();
    assert_eq!(pool.engine.drain_held().len(), 1);
}
