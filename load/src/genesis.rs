//! `sluice load genesis`: a geth-style genesis funding the seeded sender
//! keys, readable by `sluice node --genesis` and `anvil --init`.

use std::fmt::Write as _;

use alloy_primitives::{Address, U256};

/// What the genesis file holds besides the accounts.
#[derive(Debug, Clone)]
pub struct GenesisSpec {
    /// `config.chainId`.
    pub chain_id: u64,
    /// Block 0's gas limit (anvil reads it; sluice takes its own config's).
    pub gas_limit: u64,
    /// Balance of every funded account, in wei.
    pub balance_wei: U256,
}

/// The genesis JSON for `accounts`. Written by hand (not through a map) so
/// the accounts keep their order and 100,000 of them cost one allocation.
pub fn genesis_json(spec: &GenesisSpec, accounts: &[Address]) -> String {
    let mut out = String::with_capacity(128 + accounts.len() * 80);
    // anvil's --init wants a complete geth config (fork blocks at 0, a
    // timestamp, difficulty); sluice reads only chainId and alloc. Every
    // fork up to Osaka (sluice's default rules) is active from block 0.
    let _ = write!(
        out,
        concat!(
            "{{\"config\":{{\"chainId\":{},\"homesteadBlock\":0,\"eip150Block\":0,",
            "\"eip155Block\":0,\"eip158Block\":0,\"byzantiumBlock\":0,\"constantinopleBlock\":0,",
            "\"petersburgBlock\":0,\"istanbulBlock\":0,\"berlinBlock\":0,\"londonBlock\":0,",
            "\"shanghaiTime\":0,\"cancunTime\":0,\"pragueTime\":0,\"osakaTime\":0,",
            "\"terminalTotalDifficulty\":0,\"terminalTotalDifficultyPassed\":true}},",
            "\"nonce\":\"0x0\",\"timestamp\":\"0x0\",\"extraData\":\"0x\",",
            "\"gasLimit\":\"{:#x}\",\"difficulty\":\"0x0\",\"baseFeePerGas\":\"0x3b9aca00\",",
            "\"alloc\":{{"
        ),
        spec.chain_id, spec.gas_limit
    );
    for (i, addr) in accounts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "\n\"{addr:#x}\":{{\"balance\":\"{:#x}\"}}", spec.balance_wei);
    }
    out.push_str("\n}}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn genesis_is_geth_json_with_every_account_funded() {
        let spec = GenesisSpec { chain_id: 31337, gas_limit: 150_000_000, balance_wei: U256::from(1000u64) };
        let accts = [Address::repeat_byte(1), Address::repeat_byte(2)];
        let text = genesis_json(&spec, &accts);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["config"]["chainId"], 31337);
        assert_eq!(v["config"]["osakaTime"], 0);
        assert_eq!(v["gasLimit"], "0x8f0d180");
        let alloc = v["alloc"].as_object().unwrap();
        assert_eq!(alloc.len(), 2);
        assert_eq!(alloc["0x0101010101010101010101010101010101010101"]["balance"], "0x3e8");
    }

    #[test]
    fn empty_genesis_is_still_valid_json() {
        let spec = GenesisSpec { chain_id: 1, gas_limit: 1, balance_wei: U256::ZERO };
        let v: serde_json::Value = serde_json::from_str(&genesis_json(&spec, &[])).unwrap();
        assert!(v["alloc"].as_object().unwrap().is_empty());
    }
}
