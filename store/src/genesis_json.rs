//! geth-style genesis JSON: `config.chainId`, `alloc` (balance, nonce, code,
//! storage), and optionally `timestamp`, `gasLimit`, `baseFeePerGas`,
//! `coinbase`. Numbers may be hex strings (`"0x10"`), decimal strings or JSON
//! numbers, as geth accepts.

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::{Address, Bytes, U256};
use serde::Deserialize;

use crate::{Genesis, GenesisAccount};

/// Why a genesis file was refused.
#[derive(Debug, thiserror::Error)]
pub enum GenesisError {
    /// Not JSON of the expected shape.
    #[error("genesis file is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A number or hex field does not parse.
    #[error("genesis field {field}: {reason}")]
    Field {
        /// Which field.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Deserialize)]
struct GethGenesis {
    #[serde(default)]
    config: GethChainConfig,
    #[serde(default)]
    alloc: HashMap<String, GethAccount>,
    timestamp: Option<serde_json::Value>,
    #[serde(rename = "gasLimit")]
    gas_limit: Option<serde_json::Value>,
    #[serde(rename = "baseFeePerGas")]
    base_fee: Option<serde_json::Value>,
    coinbase: Option<String>,
}

#[derive(Deserialize, Default)]
struct GethChainConfig {
    #[serde(rename = "chainId")]
    chain_id: Option<u64>,
}

#[derive(Deserialize)]
struct GethAccount {
    balance: Option<serde_json::Value>,
    nonce: Option<serde_json::Value>,
    code: Option<String>,
    #[serde(default)]
    storage: HashMap<String, String>,
}

fn err(field: &str, reason: impl ToString) -> GenesisError {
    GenesisError::Field { field: field.to_string(), reason: reason.to_string() }
}

fn parse_u256(field: &str, v: &serde_json::Value) -> Result<U256, GenesisError> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().map(U256::from).ok_or_else(|| err(field, "not a u64")),
        serde_json::Value::String(s) => {
            let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some("") => Ok(U256::ZERO),
                Some(hex) => U256::from_str_radix(hex, 16),
                None => U256::from_str_radix(s, 10),
            };
            parsed.map_err(|e| err(field, e))
        }
        _ => Err(err(field, "expected a number or a string")),
    }
}

fn parse_u64(field: &str, v: &serde_json::Value) -> Result<u64, GenesisError> {
    u64::try_from(parse_u256(field, v)?).map_err(|_| err(field, "does not fit in 64 bits"))
}

fn parse_slot(field: &str, s: &str) -> Result<U256, GenesisError> {
    parse_u256(field, &serde_json::Value::String(s.to_string()))
}

impl Genesis {
    /// Parses a geth-style genesis file. Values absent from the file are
    /// taken from `defaults` (the node's config); `config.chainId`, when
    /// present, wins over the configured chain id.
    pub fn from_geth_json(text: &str, defaults: &Genesis) -> Result<Genesis, GenesisError> {
        let g: GethGenesis = serde_json::from_str(text)?;
        let mut alloc = BTreeMap::new();
        for (addr, acct) in g.alloc {
            let field = format!("alloc.{addr}");
            let with_prefix = if addr.starts_with("0x") { addr.clone() } else { format!("0x{addr}") };
            let address: Address = with_prefix.parse().map_err(|e| err(&field, e))?;
            let mut storage = BTreeMap::new();
            for (k, v) in &acct.storage {
                let value = parse_slot(&field, v)?;
                if !value.is_zero() {
                    storage.insert(parse_slot(&field, k)?, value);
                }
            }
            let code: Bytes = match &acct.code {
                Some(c) if !c.is_empty() && c != "0x" => c.parse().map_err(|e| err(&field, e))?,
                _ => Bytes::new(),
            };
            let account = GenesisAccount {
                balance: acct
                    .balance
                    .as_ref()
                    .map(|b| parse_u256(&field, b))
                    .transpose()?
                    .unwrap_or_default(),
                nonce: acct.nonce.as_ref().map(|n| parse_u64(&field, n)).transpose()?.unwrap_or_default(),
                code,
                storage,
            };
            alloc.insert(address, account);
        }
        Ok(Genesis {
            chain_id: g.config.chain_id.unwrap_or(defaults.chain_id),
            timestamp: g
                .timestamp
                .as_ref()
                .map(|t| parse_u64("timestamp", t))
                .transpose()?
                .unwrap_or(defaults.timestamp),
            gas_limit: g
                .gas_limit
                .as_ref()
                .map(|t| parse_u64("gasLimit", t))
                .transpose()?
                .unwrap_or(defaults.gas_limit),
            base_fee: g
                .base_fee
                .as_ref()
                .map(|t| parse_u64("baseFeePerGas", t))
                .transpose()?
                .unwrap_or(defaults.base_fee),
            coinbase: match g.coinbase {
                Some(c) => c.parse().map_err(|e| err("coinbase", e))?,
                None => defaults.coinbase,
            },
            alloc,
            synthetic: defaults.synthetic,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Genesis {
        Genesis {
            chain_id: 1,
            timestamp: 5,
            gas_limit: 30_000_000,
            base_fee: 7,
            coinbase: Address::ZERO,
            alloc: BTreeMap::new(),
            synthetic: Default::default(),
        }
    }

    #[test]
    fn parses_geth_alloc_with_hex_and_decimal_numbers() {
        let text = r#"{
            "config": {"chainId": 1337},
            "alloc": {
                "0x1000000000000000000000000000000000000001": {"balance": "0x10", "nonce": "0x2"},
                "2000000000000000000000000000000000000002": {
                    "balance": "1000", "code": "0x6000",
                    "storage": {"0x01": "0x02", "0x03": "0x00"}
                }
            }
        }"#;
        let g = Genesis::from_geth_json(text, &defaults()).unwrap();
        assert_eq!(g.chain_id, 1337);
        assert_eq!(g.timestamp, 5);
        let a: Address = "0x1000000000000000000000000000000000000001".parse().unwrap();
        assert_eq!(g.alloc[&a].balance, U256::from(16));
        assert_eq!(g.alloc[&a].nonce, 2);
        let b: Address = "0x2000000000000000000000000000000000000002".parse().unwrap();
        assert_eq!(g.alloc[&b].balance, U256::from(1000));
        assert_eq!(g.alloc[&b].code.as_ref(), &[0x60, 0x00]);
        assert_eq!(g.alloc[&b].storage.len(), 1, "zero slots are dropped");
    }

    #[test]
    fn bad_fields_are_named() {
        let e = Genesis::from_geth_json(r#"{"alloc":{"0x12":{}}}"#, &defaults()).unwrap_err();
        assert!(e.to_string().contains("alloc.0x12"), "{e}");
        let e = Genesis::from_geth_json(
            r#"{"alloc":{"0x1000000000000000000000000000000000000001":{"balance":"zz"}}}"#,
            &defaults(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("alloc."), "{e}");
        assert!(Genesis::from_geth_json("[", &defaults()).is_err());
    }
}
