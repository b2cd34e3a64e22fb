//! The load generator's contract workloads against a real node: the shared
//! token of `sluice_load::contracts` is deployed, minted for every sender
//! and transferred (`erc20-holders`), and the `mixed` workload deploys the
//! shared counter among token and native transfers; every admitted
//! transaction is included, with its receipt's hash as sent.

use std::process::Command;

use serde_json::Value;

use crate::support::*;

#[test]
fn contract_workloads_are_all_included() {
    let node = TestNode::dev();
    for workload in ["erc20-holders", "mixed"] {
        let json = node.dir.join(format!("load-{workload}.json"));
        let json_arg = json.to_string_lossy().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["load", "--url", &node.url, "--workload", workload, "--mnemonic-accounts", "4"])
            .args(["--tps", "200", "--duration-s", "2", "--recovery-sample", "0", "--json", &json_arg])
            .output()
            .expect("sluice load runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{workload}: sluice load failed\n{stderr}\nnode log:\n{}", node.log());
        let report: Value = serde_json::from_slice(&std::fs::read(&json).expect("the JSON summary"))
            .expect("the summary is JSON");
        let admitted = report["admitted"].as_u64().unwrap_or(0);
        assert!(admitted >= 100, "{workload}: {report}");
        assert_eq!(report["included"].as_u64(), Some(admitted), "{workload}: {report}");
        assert_eq!(report["admitted_not_included"], 0, "{workload}: {report}");
        assert_eq!(report["hash_mismatches"], 0, "{workload}: {report}");
        let sampled = &report["receipts_ok_sampled"];
        assert!(sampled[1].as_u64().unwrap_or(0) > 0 && sampled[0] == sampled[1], "{workload}: {report}");
    }
}
