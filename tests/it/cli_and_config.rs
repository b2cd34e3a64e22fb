//! The command line documents every flag, and configuration layers apply in
//! order: embedded defaults < --config file < SLUICE_* env < flags.

use std::process::Command;

use serde_json::Value;

fn sluice(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run sluice")
}

#[test]
fn node_help_lists_every_flag() {
    let out = sluice(&["node", "--help"], &[]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config",
        "--data-dir",
        "--rpc-addr",
        "--metrics-addr",
        "--chain-id",
        "--block-time-ms",
        "--max-block-txs",
        "--idle-block-interval-ms",
        "--block-gas-limit",
        "--dev-accounts",
        "--genesis",
    ] {
        assert!(help.contains(flag), "{flag} missing from help:\n{help}");
    }
}

#[test]
fn layers_apply_in_order_and_bad_config_is_refused() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("node.toml");
    std::fs::write(&file, "[chain]\nchain_id = 7\n[mempool]\nmax_txs = 11\nshards = 2\n").unwrap();
    let out = sluice(
        &["config", "--config", file.to_str().unwrap(), "--chain-id", "9"],
        &[("SLUICE_MEMPOOL__MAX_TXS", "12"), ("SLUICE_CHAIN__CHAIN_ID", "8")],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cfg: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cfg["chain"]["chain_id"], 9, "flag wins");
    assert_eq!(cfg["mempool"]["max_txs"], 12, "env beats file");
    assert_eq!(cfg["mempool"]["shards"], 2, "file beats defaults");
    assert_eq!(cfg["producer"]["max_block_txs"], 5000, "defaults stay");
    assert_eq!(cfg["producer"]["idle_block_interval_ms"], 1000, "idle blocks on by default");
    let out = sluice(&["config", "--idle-block-interval-ms", "0"], &[]);
    let cfg: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cfg["producer"]["idle_block_interval_ms"], 0, "the flag turns them off");

    std::fs::write(&file, "[mempool]\nmax_txz = 1\n").unwrap();
    let out = sluice(&["config", "--config", file.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("max_txz"), "names the bad key");
    let _ = std::fs::remove_dir_all(dir);
}

/// `sluice node` without a validator set builds the chain it always did:
/// block 0 and its app hash are pinned, so any change to how a single
/// node's headers or genesis state hash shows here. (That headers without
/// a state reference encode exactly as before the field existed is proved
/// against the old encoding in `messages/src/wire.rs`.)
#[test]
fn single_node_genesis_and_headers_are_unchanged() {
    let node = crate::support::TestNode::dev();
    let b0 = node.ok("eth_getBlockByNumber", serde_json::json!(["0x0", false]));
    assert_eq!(b0["hash"], "0x6b4692ee6845d0fb50450b1ece07aa11447a79665bdc4ddbb8b0167dff66bdd6");
    assert_eq!(b0["stateRoot"], "0x264145d4a9bc66ea7353f87e677cf4b53cc3e6254af60958aa847b873afb6532");
}

/// `sluice config` never prints the mnemonic (it is every dev account's
/// key), the public one or one's own: it shows how many words it has.
#[test]
fn config_shows_the_mnemonic_redacted() {
    let own = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
    for (env, words) in [(vec![], 12), (vec![("SLUICE_CHAIN__MNEMONIC", own)], 12)] {
        let out = sluice(&["config"], &env);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("junk") && !text.contains("abandon"), "the mnemonic was printed:\n{text}");
        let cfg: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(cfg["chain"]["mnemonic"], format!("<redacted: {words} words>"));
    }
}

/// Starts `sluice node` with `args` and `env` and waits for its "listening"
/// line; returns the process, its JSON-RPC URL and its log file, or the log
/// if it exited first.
pub(crate) fn start_listening(
    args: &[&str],
    env: &[(&str, &str)],
    log: &std::path::Path,
) -> Result<(std::process::Child, String), String> {
    use std::io::BufRead as _;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("node").args(args).env("RUST_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("run sluice node");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(url) = line.strip_prefix("sluice: JSON-RPC listening on ") {
                    std::thread::spawn(move || for _ in lines {});
                    return Ok((child, url.trim().to_string()));
                }
            }
            _ => {
                let _ = child.wait();
                return Err(std::fs::read_to_string(log).unwrap_or_default());
            }
        }
    }
}

/// SIGTERM, then the exit status.
pub(crate) fn stop(mut child: std::process::Child) -> std::process::ExitStatus {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    child.wait().expect("wait")
}

/// Configuration that would open the node is refused, with what and how to
/// fix it: zero timeouts (guards off), a zero base fee (free spam), and an
/// RPC address other hosts reach while CORS is `*`, the public mnemonic's
/// accounts are funded or `debug` is served. The explicit opt-in starts
/// the node and says every risk in its log.
#[test]
fn configuration_that_would_open_the_node_is_refused_or_loud() {
    for (var, said) in [
        ("SLUICE_RPC__CLIENT_REQUEST_TIMEOUT_MS", "rpc.client_request_timeout_ms must be greater than 0"),
        ("SLUICE_RPC__KEEP_ALIVE_MS", "rpc.keep_alive_ms must be greater than 0"),
        ("SLUICE_MEMPOOL__FUTURE_TX_LIFETIME_MS", "mempool.future_tx_lifetime_ms must be greater than 0"),
        ("SLUICE_CHAIN__BASE_FEE_WEI", "chain.base_fee_wei must be greater than 0"),
    ] {
        let out = sluice(&["config"], &[(var, "0")]);
        assert!(!out.status.success(), "{var}=0 accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(said),
            "{var}=0: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let dir = std::env::temp_dir().join(format!("sluice-public-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let data = data.to_str().unwrap();
    let args = ["--rpc-addr", "0.0.0.0:0", "--metrics-addr", "127.0.0.1:0", "--data-dir", data];
    let out = sluice(&[&["node"][..], &args].concat(), &[]);
    assert!(!out.status.success(), "a node open to every host started");
    let err = String::from_utf8_lossy(&out.stderr);
    for said in [
        "rpc.addr 0.0.0.0:0 is not a loopback address",
        "rpc.cors_origins allows any origin",
        "public test mnemonic",
        "rpc.apis serves debug",
        "rpc.allow_unsafe_public_bind = true",
    ] {
        assert!(err.contains(said), "{said:?} missing: {err}");
    }
    assert!(!data_exists(data), "refused before anything was written");

    // Opted in: it starts, serves, and says each risk at start.
    let log = dir.join("node.log");
    let (child, url) = start_listening(&args, &[("SLUICE_RPC__ALLOW_UNSAFE_PUBLIC_BIND", "true")], &log)
        .unwrap_or_else(|log| panic!("the opt-in did not start the node: {log}"));
    let port = url.rsplit(':').next().unwrap().to_string();
    let chain_id =
        crate::support::rpc(&format!("http://127.0.0.1:{port}"), "eth_chainId", serde_json::json!([]));
    assert_eq!(chain_id.unwrap()["result"], "0x7a69");
    let text = std::fs::read_to_string(&log).unwrap();
    for said in ["rpc.cors_origins allows any origin", "public test mnemonic", "rpc.apis serves debug"] {
        assert!(text.lines().any(|l| l.contains("WARN") && l.contains(said)), "{said:?} not warned: {text}");
    }
    assert!(stop(child).success());
    let _ = std::fs::remove_dir_all(&dir);
}

fn data_exists(dir: &str) -> bool {
    std::path::Path::new(dir).exists()
}
