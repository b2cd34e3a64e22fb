//! `eth_config` (EIP-7910): the rules the node runs, in the shape geth
//! answers (`internal/ethapi/api.go`).
//!
//! A sluice chain runs one spec from genesis on and schedules no fork, so
//! `current` describes that spec active since time 0, and `next` and
//! `last` are `null`, as geth and anvil answer for a chain with nothing
//! scheduled. Where sluice departs from a mainnet client it says so
//! rather than copying mainnet's values: `systemContracts` is empty,
//! because sluice makes none of the system calls (EIP-4788 beacon roots,
//! EIP-2935 block hashes, EIP-7002 / EIP-7251 requests) and deploys none
//! of those contracts.

use std::collections::BTreeMap;

use alloy_eips::eip7840::BlobParams;
use alloy_primitives::B256;
use serde_json::{json, Value};
use sluice_executor::{precompiles, Spec};

use super::format::hex_u64;

/// The blob parameters of `spec`'s `blobSchedule`: geth's defaults for the
/// fork (`params.Default{Cancun,Prague,Osaka}BlobConfig`; Osaka keeps
/// Prague's, only the BPO forks change them). sluice refuses blob
/// transactions on every spec, so no block holds a blob whatever these
/// say; they are answered because they are the fork's rules, the same
/// ones execution's blob base fee update fraction follows (`env.rs`).
pub fn blob_schedule(spec: Spec) -> BlobParams {
    match spec {
        Spec::Cancun => BlobParams::cancun(),
        Spec::Prague => BlobParams::prague(),
        Spec::Osaka => BlobParams::osaka(),
    }
}

/// EIP-2124's `FORK_HASH` of a chain whose every fork is active at
/// genesis: the CRC-32 of the genesis hash alone (forks at block or time 0
/// are left out of the checksum, as geth's `forkid.NewID` leaves them).
pub fn fork_hash(genesis_hash: &B256) -> [u8; 4] {
    crc32(genesis_hash.as_slice()).to_be_bytes()
}

/// CRC-32 (IEEE 802.3, reflected, as Go's `crc32.ChecksumIEEE`), bit by
/// bit: it runs over 32 bytes once per request, so a table would only add
/// code.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// The `eth_config` answer of a chain on `spec` with `chain_id` whose block
/// 0 hashes to `genesis_hash`.
pub fn answer(spec: Spec, chain_id: u64, genesis_hash: &B256) -> Value {
    let blobs = blob_schedule(spec);
    // Sorted by name, as geth's (a Go map, which encoding/json sorts).
    let precompiles: BTreeMap<&str, String> = precompiles::active(spec)
        .into_iter()
        .map(|(name, address)| (name, format!("{address:#x}")))
        .collect();
    let fork_id = fork_hash(genesis_hash);
    json!({
        "current": {
            // Every fork is active at genesis (geth's dev chain config has
            // each fork time at 0, and so answers 0 too).
            "activationTime": 0,
            "blobSchedule": {
                // A u64 for serde_json, which holds no larger integers; the
                // fractions are below 2^25.
                "baseFeeUpdateFraction": u64::try_from(blobs.update_fraction).unwrap_or(u64::MAX),
                "max": blobs.max_blob_count,
                "target": blobs.target_blob_count,
            },
            "chainId": hex_u64(chain_id),
            "forkId": format!("0x{}", alloy_primitives::hex::encode(fork_id)),
            "precompiles": precompiles,
            "systemContracts": {},
        },
        "next": null,
        "last": null,
    })
}

#[cfg(test)]
mod tests {
    use alloy_primitives::b256;

    use super::*;

    #[test]
    fn crc32_is_ieee() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn the_fork_hash_of_a_genesis_is_eip2124s() {
        // EIP-2124's first mainnet vector: no fork passed yet, so the hash
        // is the genesis hash's CRC-32 alone.
        let mainnet = b256!("d4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3");
        assert_eq!(fork_hash(&mainnet), [0xfc, 0x64, 0xec, 0x04]);
    }

    #[test]
    fn osaka_answers_its_precompiles_blobs_and_nothing_scheduled() {
        let genesis = B256::repeat_byte(7);
        let a = answer(Spec::Osaka, 31337, &genesis);
        assert_eq!(a["next"], Value::Null);
        assert_eq!(a["last"], Value::Null);
        let c = &a["current"];
        assert_eq!(c["activationTime"], json!(0));
        assert_eq!(c["chainId"], json!("0x7a69"));
        assert_eq!(c["forkId"], json!(format!("0x{}", alloy_primitives::hex::encode(fork_hash(&genesis)))));
        assert_eq!(c["forkId"].as_str().map(str::len), Some(10));
        assert_eq!(c["blobSchedule"], json!({"baseFeeUpdateFraction": 5_007_716, "max": 9, "target": 6}));
        assert_eq!(c["systemContracts"], json!({}));
        let p = &c["precompiles"];
        assert_eq!(p.as_object().map(|m| m.len()), Some(18));
        assert_eq!(p["ECREC"], json!("0x0000000000000000000000000000000000000001"));
        // Lower case, as geth and the EIP print addresses (not checksummed).
        assert_eq!(p["KZG_POINT_EVALUATION"], json!("0x000000000000000000000000000000000000000a"));
        assert_eq!(p["P256VERIFY"], json!("0x0000000000000000000000000000000000000100"));
        // Exactly the six members EIP-7910 defines, nothing more.
        let keys: Vec<&String> = c.as_object().map(|m| m.keys().collect()).unwrap_or_default();
        assert_eq!(keys.len(), 6);
    }

    #[test]
    fn prague_and_cancun_answer_their_own_rules() {
        let genesis = B256::ZERO;
        let prague = answer(Spec::Prague, 1, &genesis);
        let p = &prague["current"]["precompiles"];
        assert_eq!(p.as_object().map(|m| m.len()), Some(17));
        assert!(p.get("P256VERIFY").is_none());
        assert_eq!(p["BLS12_MAP_FP2_TO_G2"], json!("0x0000000000000000000000000000000000000011"));
        assert_eq!(
            prague["current"]["blobSchedule"],
            json!({"baseFeeUpdateFraction": 5_007_716, "max": 9, "target": 6})
        );
        assert_eq!(prague["current"]["chainId"], json!("0x1"));
        let cancun = answer(Spec::Cancun, 1, &genesis);
        assert_eq!(cancun["current"]["precompiles"].as_object().map(|m| m.len()), Some(10));
        assert_eq!(
            cancun["current"]["blobSchedule"],
            json!({"baseFeeUpdateFraction": 3_338_477, "max": 6, "target": 3})
        );
    }
}
