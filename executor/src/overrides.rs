//! geth's state and block overrides for `eth_call`, `eth_estimateGas` and
//! `debug_traceCall`: a call runs as if some accounts had other balances,
//! nonces, code or storage, or its block another number, time, gas limit,
//! coinbase or base fee. Nothing is written: the overrides are a reader in
//! front of the state the call reads.

use std::collections::HashMap;

use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use alloy_rpc_types_eth::{state::StateOverride, BlockOverrides};
use sluice_messages::BlockHeader;
use sluice_state::{Account, StateReader, StoreError, EMPTY_CODE_HASH};

use crate::ExecError;

/// One account's overrides, checked.
#[derive(Debug, Clone, Default)]
struct Overridden {
    balance: Option<U256>,
    nonce: Option<u64>,
    /// The replacing code and its hash.
    code: Option<(B256, Bytes)>,
    /// `state`: every slot not named reads zero.
    replace_storage: bool,
    /// `state` or `stateDiff`: the slots named.
    slots: HashMap<U256, U256>,
}

/// A state reader with geth's account overrides applied on top of `inner`.
pub struct OverriddenState<'a> {
    inner: &'a dyn StateReader,
    accounts: HashMap<Address, Overridden>,
    codes: HashMap<B256, Bytes>,
}

impl<'a> OverriddenState<'a> {
    /// `inner` as seen through `overrides`; geth's errors for the
    /// combinations it refuses.
    pub fn new(inner: &'a dyn StateReader, overrides: &StateOverride) -> Result<Self, ExecError> {
        let mut accounts = HashMap::with_capacity(overrides.len());
        let mut codes = HashMap::new();
        for (address, o) in overrides {
            if o.state.is_some() && o.state_diff.is_some() {
                return Err(ExecError::InvalidCall(format!(
                    "account {address} has both 'state' and 'stateDiff'"
                )));
            }
            if o.move_precompile_to.is_some() {
                return Err(ExecError::InvalidCall("movePrecompileToAddress is not supported".into()));
            }
            let code = o.code.as_ref().map(|code| {
                let hash = if code.is_empty() { EMPTY_CODE_HASH } else { keccak256(code) };
                codes.insert(hash, code.clone());
                (hash, code.clone())
            });
            let named = o.state.as_ref().or(o.state_diff.as_ref());
            let slots = named
                .map(|m| {
                    m.iter().map(|(k, v)| (U256::from_be_bytes(k.0), U256::from_be_bytes(v.0))).collect()
                })
                .unwrap_or_default();
            accounts.insert(
                *address,
                Overridden {
                    balance: o.balance,
                    nonce: o.nonce,
                    code,
                    replace_storage: o.state.is_some(),
                    slots,
                },
            );
        }
        Ok(OverriddenState { inner, accounts, codes })
    }
}

impl StateReader for OverriddenState<'_> {
    fn account(&self, address: &Address) -> Result<Option<Account>, StoreError> {
        let found = self.inner.account(address)?;
        let Some(o) = self.accounts.get(address) else { return Ok(found) };
        // An overridden account exists, as in geth, even if it did not.
        let mut account =
            found.unwrap_or(Account { balance: U256::ZERO, nonce: 0, code_hash: EMPTY_CODE_HASH });
        if let Some(balance) = o.balance {
            account.balance = balance;
        }
        if let Some(nonce) = o.nonce {
            account.nonce = nonce;
        }
        if let Some((hash, _)) = &o.code {
            account.code_hash = *hash;
        }
        Ok(Some(account))
    }

    fn code(&self, hash: &B256) -> Result<Bytes, StoreError> {
        match self.codes.get(hash) {
            Some(code) => Ok(code.clone()),
            None => self.inner.code(hash),
        }
    }

    fn storage(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        match self.accounts.get(address) {
            Some(o) => match o.slots.get(slot) {
                Some(value) => Ok(*value),
                None if o.replace_storage => Ok(U256::ZERO),
                None => self.inner.storage(address, slot),
            },
            None => self.inner.storage(address, slot),
        }
    }

    fn block_hash(&self, number: u64) -> Result<B256, StoreError> {
        self.inner.block_hash(number)
    }
}

/// `header` with geth's block overrides applied: `number`, `time`,
/// `gasLimit`, `feeRecipient`, `baseFeePerGas` and `prevRandao`; the
/// others (difficulty, blob base fee, beacon root, block hashes) are
/// refused by name rather than ignored.
pub fn override_header(header: &BlockHeader, o: &BlockOverrides) -> Result<BlockHeader, ExecError> {
    let unsupported = [
        ("difficulty", o.difficulty.is_some()),
        ("blobBaseFee", o.blob_base_fee.is_some()),
        ("beaconRoot", o.beacon_root.is_some()),
        ("blockHash", o.block_hash.is_some()),
    ];
    if let Some((name, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(ExecError::InvalidCall(format!("block override {name} is not supported")));
    }
    let too_big =
        |name: &str| ExecError::InvalidCall(format!("block override {name} does not fit in 64 bits"));
    let mut h = header.clone();
    if let Some(n) = o.number {
        h.number = u64::try_from(n).map_err(|_| too_big("number"))?;
    }
    if let Some(time) = o.time {
        h.timestamp = time;
    }
    if let Some(gas) = o.gas_limit {
        h.gas_limit = gas;
    }
    if let Some(coinbase) = o.coinbase {
        h.coinbase = coinbase;
    }
    if let Some(fee) = o.base_fee {
        h.base_fee = u64::try_from(fee).map_err(|_| too_big("baseFeePerGas"))?;
    }
    if let Some(random) = o.random {
        // PREVRANDAO reads the parent hash (env.rs); BLOCKHASH reads the
        // store, so this changes nothing else.
        h.parent_hash = random;
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use alloy_rpc_types_eth::state::AccountOverride;

    use super::*;
    use crate::testing::MemState;

    fn one(address: Address, o: AccountOverride) -> StateOverride {
        let mut m = StateOverride::default();
        m.insert(address, o);
        m
    }

    #[test]
    fn accounts_code_and_slots_read_as_overridden() {
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let mut base = MemState::new();
        base.set_account(a, U256::from(5), 3);
        base.set_storage(a, U256::from(1), U256::from(10));
        base.set_storage(a, U256::from(2), U256::from(20));
        let diff = [(B256::from(U256::from(1)), B256::from(U256::from(11)))].into_iter().collect();
        let o = AccountOverride {
            balance: Some(U256::from(7)),
            code: Some(Bytes::from_static(&[0x60, 0x00])),
            state_diff: Some(diff),
            ..Default::default()
        };
        let view = OverriddenState::new(&base, &one(a, o)).unwrap();
        let acct = view.account(&a).unwrap().unwrap();
        assert_eq!((acct.balance, acct.nonce), (U256::from(7), 3));
        assert_eq!(view.code(&acct.code_hash).unwrap(), Bytes::from_static(&[0x60, 0x00]));
        assert_eq!(view.storage(&a, &U256::from(1)).unwrap(), U256::from(11), "diffed");
        assert_eq!(view.storage(&a, &U256::from(2)).unwrap(), U256::from(20), "kept");
        assert_eq!(view.account(&b).unwrap(), None, "untouched");

        // `state` replaces the whole storage; an unknown account comes to be.
        let full = [(B256::from(U256::from(2)), B256::from(U256::from(22)))].into_iter().collect();
        let o = AccountOverride { state: Some(full), ..Default::default() };
        let view = OverriddenState::new(&base, &one(a, o)).unwrap();
        assert_eq!(view.storage(&a, &U256::from(1)).unwrap(), U256::ZERO, "replaced");
        assert_eq!(view.storage(&a, &U256::from(2)).unwrap(), U256::from(22));
        let o = AccountOverride { nonce: Some(9), ..Default::default() };
        let view = OverriddenState::new(&base, &one(b, o)).unwrap();
        assert_eq!(view.account(&b).unwrap().map(|x| x.nonce), Some(9));
    }

    #[test]
    fn geth_refuses_state_with_state_diff() {
        let o = AccountOverride {
            state: Some(Default::default()),
            state_diff: Some(Default::default()),
            ..Default::default()
        };
        let base = MemState::new();
        let a = Address::repeat_byte(1);
        let e = OverriddenState::new(&base, &one(a, o)).err().unwrap();
        assert_eq!(e.to_string(), format!("account {a} has both 'state' and 'stateDiff'"));
    }

    #[test]
    fn block_overrides_apply_or_are_refused_by_name() {
        let header = BlockHeader {
            number: 1,
            parent_hash: B256::ZERO,
            timestamp: 1,
            coinbase: Address::ZERO,
            gas_limit: 30_000_000,
            base_fee: 1,
            tx_root: B256::ZERO,
            state_ref: None,
        };
        let o = BlockOverrides {
            number: Some(U256::from(77)),
            time: Some(1234),
            coinbase: Some(Address::repeat_byte(9)),
            base_fee: Some(U256::from(3)),
            ..Default::default()
        };
        let h = override_header(&header, &o).unwrap();
        assert_eq!((h.number, h.timestamp, h.coinbase, h.base_fee), (77, 1234, Address::repeat_byte(9), 3));
        let o = BlockOverrides { difficulty: Some(U256::from(1)), ..Default::default() };
        assert_eq!(
            override_header(&header, &o).unwrap_err().to_string(),
            "block override difficulty is not supported"
        );
    }
}
