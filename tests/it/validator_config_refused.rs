//! A validator whose configuration would make it disagree with the others
//! is refused at start, with an error that says what differs: a key not in
//! the validator set, block rules or genesis other than the set's, a data
//! dir of a single node, a p2p port in use. And `testnet init` refuses
//! arguments it cannot honour.

use std::{
    net::TcpListener,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use crate::{support::*, validators_agree_and_rejoin::testnet_init};

/// Starts `sluice node` and expects it to exit non-zero; returns stderr.
fn refused(config: &Path, data_dir: &Path, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["node", "--rpc-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data_dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let log = data_dir.with_extension("refused.log");
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("run sluice node");
    // A refusal is immediate; one that starts anyway is killed, not waited on.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("started although misconfigured: {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "started although misconfigured: {stderr}");
    stderr
}

#[test]
fn misconfigured_validators_are_refused_at_start() {
    let root = std::env::temp_dir().join(format!("sluice-badcfg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let a = testnet_init(&root.join("a"), 2, &[]);
    testnet_init(&root.join("b"), 2, &["--seed", "99"]);
    let data = root.join("data");

    // Another network's key.
    let key_b = root.join("b/v0/validator.key");
    let key_env = format!("{}", key_b.display());
    let err = refused(&a[0], &data, &[("SLUICE_CONSENSUS__KEY_FILE", &key_env)]);
    assert!(err.contains("is not one of the validators"), "{err}");

    // Rules and genesis other than the set's.
    let err = refused(&a[0], &data, &[("SLUICE_CHAIN__BASE_FEE_WEI", "7")]);
    assert!(err.contains("block rules differ"), "{err}");
    let err = refused(&a[0], &data, &[("SLUICE_CHAIN__DEV_ACCOUNTS", "3")]);
    assert!(err.contains("genesis") && err.contains("differs from the validator set"), "{err}");

    // A p2p port in use.
    let text = std::fs::read_to_string(&a[0]).unwrap();
    let p2p =
        text.lines().find_map(|l| l.strip_prefix("p2p_listen = ")).unwrap().trim_matches('"').to_string();
    let held = TcpListener::bind(&p2p).unwrap();
    let err = refused(&a[0], &data, &[]);
    assert!(err.contains("cannot listen for validators"), "{err}");
    drop(held);

    // A single node's data dir.
    let mut single = TestNode::dev();
    single.terminate();
    let err = refused(&a[0], &single.data_dir(), &[]);
    assert!(err.contains("single node"), "{err}");

    // Arguments init cannot honour.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["testnet", "init", "--validators", "3", "--hosts", "127.0.0.1,127.0.0.2", "--dir"])
        .arg(root.join("c"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--hosts gives 2 addresses for 3 validators"));
    let _ = std::fs::remove_dir_all(&root);
}

/// A validator set file that differs between validators (here by one
/// comment) is caught at the handshake: the set's hash is signed into it,
/// so the two never connect, make no block, and the odd one says why.
#[test]
fn a_differing_validator_set_file_never_connects_and_says_so() {
    let root = std::env::temp_dir().join(format!("sluice-setdiff-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let configs = testnet_init(&root, 2, &[]);
    let odd = root.join("odd-validators.toml");
    let mut text = std::fs::read_to_string(root.join("validators.toml")).unwrap();
    text.push_str("# edited by hand\n");
    std::fs::write(&odd, text).unwrap();
    let odd_env = odd.display().to_string();
    let a = crate::validators_agree_and_rejoin::start_validator(
        &configs[0],
        &[("SLUICE_CONSENSUS__VALIDATORS_FILE", &odd_env)],
    );
    let b = crate::validators_agree_and_rejoin::start_validator(&configs[1], &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !a.log().contains("no other validator connected") {
        assert!(Instant::now() < deadline, "no warning; log:\n{}", a.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(a.log().contains("same validators.toml"), "{}", a.log());
    for n in [&a, &b] {
        assert_eq!(
            n.ok("eth_blockNumber", serde_json::json!([])),
            "0x0",
            "two validators that disagree made a block"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// This machine's address toward the outside (not loopback), if it has one.
fn public_ip() -> Option<std::net::IpAddr> {
    // A connected UDP socket sends nothing; it only picks the route.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// `testnet init --hosts` with addresses other hosts reach writes what its
/// validators need there: no CORS `*`, and, as they fund the public
/// mnemonic's dev accounts, the explicit opt-in under a warning (also said
/// by init). Such a validator starts, serves on that address and warns;
/// without the opt-in it is refused, naming the public keys; with
/// `--dev-accounts 0` no opt-in is written or needed.
#[test]
fn validators_on_public_hosts_start_with_the_opt_in_init_writes() {
    let root = std::env::temp_dir().join(format!("sluice-pubhosts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);

    // What init writes and says, for hosts that need not exist here.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["testnet", "init", "--validators", "2", "--hosts", "10.9.9.1,10.9.9.2", "--dir"])
        .arg(root.join("lab"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("PUBLIC test mnemonic"), "init did not warn");
    let cfg = root.join("lab/v0/sluice.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    for line in
        ["cors_origins = \"\"", "allow_unsafe_public_bind = true", "# WARNING: [chain] funds 10 dev accounts"]
    {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    let config = |cfg: &Path, env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(["config", "--config"]).arg(cfg);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    assert!(config(&cfg, &[]).status.success(), "what init wrote is refused");
    let out = config(&cfg, &[("SLUICE_RPC__ALLOW_UNSAFE_PUBLIC_BIND", "false")]);
    assert!(!out.status.success(), "public keys on a public address accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("public test mnemonic") && !err.contains("cors_origins"), "{err}");

    // Without dev accounts, no opt-in.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["testnet", "init", "--validators", "2", "--dev-accounts", "0", "--hosts", "10.9.9.1,10.9.9.2"])
        .arg("--dir")
        .arg(root.join("lab0"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("WARNING"));
    let cfg = root.join("lab0/v0/sluice.toml");
    assert!(!std::fs::read_to_string(&cfg).unwrap().contains("allow_unsafe_public_bind"));
    assert!(config(&cfg, &[]).status.success());

    // One validator on this machine's own outside address really starts.
    let Some(ip) = public_ip() else {
        eprintln!("SKIPPED the start on a public address: this machine has none");
        let _ = std::fs::remove_dir_all(&root);
        return;
    };
    let configs = testnet_init(&root.join("net"), 1, &["--hosts", &ip.to_string()]);
    let log = root.join("v0.log");
    let (child, url) = crate::cli_and_config::start_listening(
        &["--config", configs[0].to_str().unwrap()],
        &crate::validators_agree_and_rejoin::CI_ENV,
        &log,
    )
    .unwrap_or_else(|log| panic!("the validator init wrote did not start: {log}"));
    assert!(url.contains(&ip.to_string()), "{url}");
    let answer = rpc(&url, "eth_chainId", serde_json::json!([])).unwrap();
    assert_eq!(answer["result"], "0x7a69", "{answer}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("WARN") && text.contains("public test mnemonic"), "{text}");
    assert!(crate::cli_and_config::stop(child).success());
    let _ = std::fs::remove_dir_all(&root);
}

/// A validator key is created owner-only and never overwritten (a rerun
/// of init on a used directory is refused before it writes anything); a
/// key file others can read is refused at start, naming `chmod 600`.
#[cfg(unix)]
#[test]
fn key_files_are_owner_only_and_never_overwritten() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = std::env::temp_dir().join(format!("sluice-keymode-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let configs = testnet_init(&root, 1, &[]);
    let key = root.join("v0/validator.key");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    let before = std::fs::read(&key).unwrap();
    let set_before = std::fs::read(root.join("validators.toml")).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["testnet", "init", "--validators", "1", "--seed", "5", "--dir"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(!out.status.success(), "init overwrote a validator key");
    assert!(String::from_utf8_lossy(&out.stderr).contains("never overwrites a validator key"));
    assert_eq!(std::fs::read(&key).unwrap(), before, "the key changed");
    assert_eq!(std::fs::read(root.join("validators.toml")).unwrap(), set_before, "the set changed");

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = refused(&configs[0], &root.join("data"), &[]);
    assert!(err.contains("its mode is 0644") && err.contains("chmod 600"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}
