//! Before the clock: the target's chain id and head, senders' nonces,
//! contract deploys and token mints, and the sender-recovery cost.

use std::time::{Duration, Instant};

use alloy_consensus::{TxEip1559, TypedTransaction};
use alloy_primitives::{hex, Address, Bytes, TxKind, B256, U256};
use serde_json::{json, Value};
use sluice_txpool::Signer;

use crate::{
    contracts,
    rpc::{quantity, Rpc},
    workload::{sign, Fees, PreTx, DEPLOY_GAS},
    LoadError,
};

/// Calls per setup batch (sluice's default limit is 1,000).
const SETUP_BATCH: usize = 500;
/// How long setup transactions may take to be mined.
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Refuses any endpoint not on the loopback interface: load is only ever
/// sent to this machine.
pub fn check_loopback(url: &str) -> Result<(), LoadError> {
    let rest =
        url.strip_prefix("http://").ok_or_else(|| LoadError::Args(format!("{url}: only http:// URLs")))?;
    let host_port = rest.split('/').next().unwrap_or("");
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.rsplit_once(':').map_or(host_port, |(h, _)| h),
    };
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        Ok(())
    } else {
        Err(LoadError::Args(format!("{url}: the target must be on the loopback interface (127.0.0.1)")))
    }
}

/// `eth_chainId`.
pub fn chain_id(rpc: &Rpc) -> Result<u64, LoadError> {
    quantity("eth_chainId", &rpc.call("eth_chainId", json!([]))?)
}

/// `eth_blockNumber`.
pub fn block_number(rpc: &Rpc) -> Result<u64, LoadError> {
    quantity("eth_blockNumber", &rpc.call("eth_blockNumber", json!([]))?)
}

/// Every address's pending nonce, in batches.
pub fn pending_nonces(rpc: &Rpc, addrs: &[Address]) -> Result<Vec<u64>, LoadError> {
    let mut out = Vec::with_capacity(addrs.len());
    for chunk in addrs.chunks(SETUP_BATCH) {
        let calls: Vec<(&str, Value)> =
            chunk.iter().map(|a| ("eth_getTransactionCount", json!([a, "pending"]))).collect();
        for answer in rpc.batch("eth_getTransactionCount", &calls)? {
            let v = answer.map_err(|f| LoadError::Rpc {
                method: "eth_getTransactionCount".into(),
                code: f.code,
                message: f.message,
            })?;
            out.push(quantity("eth_getTransactionCount", &v)?);
        }
    }
    Ok(out)
}

/// Sends signed transactions in batches and waits for all their receipts;
/// returns the receipts. Any refusal or failed receipt stops setup.
pub fn send_and_wait(rpc: &Rpc, txs: &[PreTx]) -> Result<Vec<Value>, LoadError> {
    for chunk in txs.chunks(SETUP_BATCH) {
        let hexes: Vec<&str> = chunk.iter().map(|t| &*t.hex).collect();
        for answer in rpc.send_raw_batch(&hexes)? {
            if let Err(f) = answer {
                return Err(LoadError::Setup(format!(
                    "setup transaction refused: {} ({})",
                    f.message, f.code
                )));
            }
        }
    }
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut receipts: Vec<Value> = vec![Value::Null; txs.len()];
    loop {
        let missing: Vec<usize> = (0..txs.len()).filter(|&i| receipts[i].is_null()).collect();
        if missing.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            return Err(LoadError::Setup(format!("{} setup transactions not mined in 60 s", missing.len())));
        }
        for chunk in missing.chunks(SETUP_BATCH) {
            let calls: Vec<(&str, Value)> =
                chunk.iter().map(|&i| ("eth_getTransactionReceipt", json!([txs[i].hash]))).collect();
            for (&i, answer) in chunk.iter().zip(rpc.batch("eth_getTransactionReceipt", &calls)?) {
                receipts[i] = answer.unwrap_or(Value::Null);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(bad) = receipts.iter().find(|r| r.get("status").and_then(Value::as_str) != Some("0x1")) {
        return Err(LoadError::Setup(format!("a setup transaction failed: {bad}")));
    }
    Ok(receipts)
}

fn tx(fees: &Fees, nonce: u64, to: TxKind, gas_limit: u64, input: Bytes) -> TypedTransaction {
    TypedTransaction::Eip1559(TxEip1559 {
        chain_id: fees.chain_id,
        nonce,
        gas_limit,
        max_fee_per_gas: fees.max_fee_wei,
        max_priority_fee_per_gas: fees.tip_wei,
        to,
        value: U256::ZERO,
        access_list: Default::default(),
        input,
    })
}

/// Deploys `runtime` from `deployer`; returns the contract's address.
pub fn deploy(rpc: &Rpc, fees: &Fees, deployer: &Signer, runtime: &[u8]) -> Result<Address, LoadError> {
    let nonce = pending_nonces(rpc, &[deployer.address()])?.first().copied().unwrap_or(0);
    let create =
        sign(deployer, tx(fees, nonce, TxKind::Create, DEPLOY_GAS, contracts::initcode(runtime)), nonce);
    let receipts = send_and_wait(rpc, std::slice::from_ref(&create))?;
    let addr = receipts
        .first()
        .and_then(|r| r.get("contractAddress"))
        .and_then(Value::as_str)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| deployer.address().create(nonce));
    Ok(addr)
}

/// Every signer mints itself `amount` tokens (one transaction each).
pub fn mint_all(rpc: &Rpc, fees: &Fees, token: Address, signers: &[Signer]) -> Result<(), LoadError> {
    let addrs: Vec<Address> = signers.iter().map(Signer::address).collect();
    let nonces = pending_nonces(rpc, &addrs)?;
    let amount = U256::from(10u64).pow(U256::from(30u64));
    let mints: Vec<PreTx> = signers
        .iter()
        .zip(&nonces)
        .map(|(s, &n)| {
            let data = contracts::call_address_amount(contracts::MINT_SELECTOR, s.address(), amount);
            sign(s, tx(fees, n, TxKind::Call(token), 100_000, data), n)
        })
        .collect();
    send_and_wait(rpc, &mints).map(|_| ())
}

/// Microseconds per libsecp256k1 sender recovery, single-threaded, over
/// `sample` of the run's own signed transactions (what admission does).
pub fn recovery_cost_us(txs: &[&PreTx]) -> Option<f64> {
    let raws: Vec<Bytes> = txs
        .iter()
        .filter_map(|t| hex::decode(t.hex.trim_start_matches("0x")).ok())
        .map(Bytes::from)
        .collect();
    if raws.is_empty() {
        return None;
    }
    let start = Instant::now();
    let mut ok = 0usize;
    for raw in raws {
        if sluice_txpool::recover_raw(raw).is_ok() {
            ok += 1;
        }
    }
    (ok > 0).then(|| start.elapsed().as_secs_f64() * 1e6 / ok as f64)
}

/// Up to `n` receipts' statuses: (succeeded, checked).
pub fn sample_receipts(rpc: &Rpc, hashes: &[B256]) -> (usize, usize) {
    let calls: Vec<(&str, Value)> =
        hashes.iter().map(|h| ("eth_getTransactionReceipt", json!([h]))).collect();
    match rpc.batch("eth_getTransactionReceipt", &calls) {
        Ok(answers) => {
            let ok = answers
                .iter()
                .filter(|a| {
                    a.as_ref().ok().and_then(|r| r.get("status")).and_then(Value::as_str) == Some("0x1")
                })
                .count();
            (ok, answers.len())
        }
        Err(_) => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets_are_accepted() {
        assert!(check_loopback("http://127.0.0.1:8545").is_ok());
        assert!(check_loopback("http://localhost:8545/").is_ok());
        assert!(check_loopback("http://[::1]:8545").is_ok());
        assert!(check_loopback("http://127.0.0.2:1/metrics").is_ok());
        assert!(check_loopback("http://10.0.0.1:8545").is_err());
        assert!(check_loopback("http://example.com:8545").is_err());
        assert!(check_loopback("https://127.0.0.1:8545").is_err());
    }
}
