//! Failpoints armed from configuration fire and are counted; a bad spec
//! stops the node from starting; the `debug_` namespace is unknown unless
//! enabled, and cannot be enabled on a non-loopback RPC address.

use std::process::Command;

use serde_json::json;

use crate::support::*;

#[test]
fn failpoints_from_the_environment_fire_and_are_counted() {
    let node = TestNode::start(
        &[("SLUICE_FAULTS__FAILPOINTS", "executor=panic*1; committer=error*1; preparer=delay(30)*1")],
        &["--block-time-ms", "20"],
    );
    // Off by default: geth's answer for a namespace that is not served.
    let e = node.call("debug_listFailpoints", json!([])).unwrap_err();
    assert_eq!(e["code"], -32601, "{e}");
    let to = random_signer().address();
    let hashes: Vec<_> = (0..3).map(|n| node.send(&transfer(&dev(0), n, to, 1)).unwrap()).collect();
    for h in &hashes {
        assert_eq!(node.receipt(h)["status"], "0x1");
    }
    let m = node.metrics();
    for (actor, action) in [("executor", "panic"), ("committer", "error"), ("preparer", "delay")] {
        let series = format!("sluice_faults_injected_total{{actor=\"{actor}\",action=\"{action}\"}} 1");
        assert!(m.contains(&series), "{series} missing");
    }
    assert!(m.contains("sluice_actor_restarts_total{actor=\"executor\"} 1"));
    assert!(m.contains("sluice_actor_restarts_total{actor=\"committer\"} 0"), "an error is not a restart");
    assert!(m.contains("sluice_store_halted 0"));
}

#[test]
fn bad_specs_and_public_debug_namespaces_are_refused() {
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let out = run(&[("SLUICE_FAULTS__DEBUG_RPC", "true")], &["config", "--rpc-addr", "0.0.0.0:8545"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("faults.debug_rpc needs a loopback rpc.addr"));
    let out = run(&[("SLUICE_FAULTS__DEBUG_RPC", "true")], &["config", "--rpc-addr", "127.0.0.1:8545"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = std::env::temp_dir().join(format!("sluice-badfp-{}", std::process::id()));
    let out = run(
        &[("SLUICE_FAULTS__FAILPOINTS", "executor=explode")],
        &[
            "node",
            "--data-dir",
            dir.to_str().unwrap(),
            "--rpc-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("faults.failpoints: invalid failpoint action \"explode\""), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn debug_namespace_arms_lists_and_clears() {
    let node = TestNode::start(&[("SLUICE_FAULTS__DEBUG_RPC", "true")], &["--block-time-ms", "20"]);
    let set = node.ok("debug_setFailpoint", json!(["mempool_shard.1", "stall(40)*3"]));
    assert_eq!(set, json!({"mempool_shard.1": "stall(40)*3"}));
    let e = node.call("debug_setFailpoint", json!(["committer", "explode"])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    let e = node.call("debug_setFailpoint", json!(["committer"])).unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    node.ok("debug_setFailpoint", json!(["producer", "delay(5)"]));
    assert_eq!(node.ok("debug_listFailpoints", json!([])).as_object().unwrap().len(), 2);
    assert_eq!(node.ok("debug_clearFailpoints", json!([])), true);
    assert_eq!(node.ok("debug_listFailpoints", json!([])), json!({}));
    // Disarmed: the pipeline runs as usual.
    let h = node.send(&transfer(&dev(1), 0, random_signer().address(), 1)).unwrap();
    assert_eq!(node.receipt(&h)["status"], "0x1");
}
