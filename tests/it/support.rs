//! Test harness: starts the real `sluice` binary on free ports in a
//! temporary data dir, and talks JSON-RPC to it over real HTTP.

use std::{
    io::{BufRead, BufReader},
    net::{IpAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

use alloy_consensus::{TxEip1559, TxLegacy, TypedTransaction};
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use serde_json::{json, Value};
use sluice_txpool::Signer;

/// The well-known first dev keys of the test mnemonic.
pub const DEV_KEYS: [&str; 4] = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
];

/// Chain id of test nodes.
pub const CHAIN_ID: u64 = 31337;
/// Base fee of test nodes (1 gwei).
pub const BASE_FEE: u128 = 1_000_000_000;

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A running node process; killed on drop.
pub struct TestNode {
    child: Option<Child>,
    /// Extra environment of every start.
    pub env: Vec<(String, String)>,
    /// Extra flags of every start.
    pub args: Vec<String>,
    /// JSON-RPC URL.
    pub url: String,
    /// Metrics URL.
    pub metrics_url: String,
    /// Data dir.
    pub dir: PathBuf,
    /// The network namespace the node runs in and the address it serves
    /// on there; `None`: the host's loopback.
    netns: Option<(String, IpAddr)>,
    /// The open-file limit (soft, hard) the node is started under, through
    /// `prlimit`; `None`: the test process's own.
    nofile: Option<(u64, u64)>,
    log: PathBuf,
}

impl TestNode {
    /// Starts a node with extra `SLUICE_*` environment variables and flags.
    pub fn start(env: &[(&str, &str)], args: &[&str]) -> TestNode {
        Self::start_in(None, None, env, args)
    }

    /// Starts a node under an open-file limit of `soft` and `hard`
    /// descriptors (through util-linux's `prlimit`, which execs the node in
    /// place, so its PID is the node's), as under systemd's default.
    pub fn start_with_nofile(soft: u64, hard: u64, env: &[(&str, &str)], args: &[&str]) -> TestNode {
        Self::start_in(None, Some((soft, hard)), env, args)
    }

    /// Starts a node inside network namespace `netns`, serving JSON-RPC and
    /// metrics on `ip` there (which the host must reach).
    pub fn start_in_netns(netns: &str, ip: IpAddr, env: &[(&str, &str)], args: &[&str]) -> TestNode {
        Self::start_in(Some((netns.to_string(), ip)), None, env, args)
    }

    fn start_in(
        netns: Option<(String, IpAddr)>,
        nofile: Option<(u64, u64)>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> TestNode {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sluice-it-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let log = dir.join("node.log");
        let (child, url, metrics_url) = Self::spawn(&dir, &env, &args, netns.as_ref(), nofile)
            .unwrap_or_else(|log| panic!("node exited before listening; log:\n{log}"));
        TestNode { child: Some(child), env, args, url, metrics_url, dir, netns, nofile, log }
    }

    /// The chain data dir.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Runs `sluice replay` on the (stopped) node's data dir and asserts that
    /// every block re-executes to the app hash recorded in the hash vault.
    /// `context` (a seed) prefixes failure messages.
    pub fn assert_replay_matches_vault(&self, context: &str) {
        let (ok, out) = self.replay();
        assert!(ok, "{context}: replay failed: {out}");
        assert!(out.contains("every app hash equals the hash vault"), "{context}: {out}");
    }

    /// Runs `sluice replay` on the (stopped) node's data dir: whether it
    /// succeeded, and its stdout followed by its stderr.
    pub fn replay(&self) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["replay", "--data-dir"])
            .arg(self.data_dir())
            .output()
            .expect("run sluice replay");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// The node's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the node with SIGKILL (no shutdown at all).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the node again on the same data dir with the same settings
    /// (after `kill9` or `terminate`); `Err(log)` if it refuses to start.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill9();
        let (child, url, metrics_url) =
            Self::spawn(&self.dir, &self.env, &self.args, self.netns.as_ref(), self.nofile)?;
        self.child = Some(child);
        self.url = url;
        self.metrics_url = metrics_url;
        Ok(())
    }

    /// Starts the binary; returns the process, its RPC URL and metrics URL,
    /// or the log when it exits before listening.
    fn spawn(
        dir: &Path,
        env: &[(String, String)],
        args: &[String],
        netns: Option<&(String, IpAddr)>,
        nofile: Option<(u64, u64)>,
    ) -> Result<(Child, String, String), String> {
        let metrics_port = free_port();
        let log = dir.join("node.log");
        let bin = env!("CARGO_BIN_EXE_sluice");
        // `ip netns exec` and `prlimit` exec the binary in place: the
        // child's PID is the node's, so kill and wait work as on the host.
        let mut wrappers: Vec<String> = Vec::new();
        let ip = match netns {
            None => IpAddr::from([127, 0, 0, 1]),
            Some((ns, ip)) => {
                wrappers.extend(["ip".into(), "netns".into(), "exec".into(), ns.clone()]);
                *ip
            }
        };
        if let Some((soft, hard)) = nofile {
            wrappers.extend(["prlimit".into(), format!("--nofile={soft}:{hard}"), "--".into()]);
        }
        let mut cmd = match wrappers.split_first() {
            None => Command::new(bin),
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(bin);
                cmd
            }
        };
        cmd.arg("node")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--rpc-addr")
            .arg(format!("{ip}:0"))
            .arg("--metrics-addr")
            .arg(format!("{ip}:{metrics_port}"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::OpenOptions::new().create(true).append(true).open(&log).expect("log file"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn sluice");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("sluice: JSON-RPC listening on ") {
                        break url.trim().to_string();
                    }
                }
                _ => {
                    let _ = child.wait();
                    return Err(std::fs::read_to_string(&log).unwrap_or_default());
                }
            }
        };
        // Keep draining stdout so the node never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok((child, url, format!("http://{ip}:{metrics_port}/metrics")))
    }

    /// Starts a node with default settings and a short block time.
    pub fn dev() -> TestNode {
        TestNode::start(&[], &["--block-time-ms", "50"])
    }

    /// The node's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "node did not exit within 30 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Posts a raw body; returns the HTTP status and body.
    pub fn post_raw(&self, body: &str) -> (u16, String) {
        match ureq::post(&self.url).set("content-type", "application/json").send_string(body) {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
            Err(e) => panic!("transport error: {e}"),
        }
    }

    /// Posts JSON and parses the JSON answer.
    pub fn post(&self, body: &Value) -> Value {
        let (status, text) = self.post_raw(&body.to_string());
        assert_eq!(status, 200, "HTTP {status}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON {e}: {text}"))
    }

    /// One call; `Ok(result)` or `Err(error object)`.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        let resp = self.post(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        match resp.get("error") {
            Some(e) => Err(e.clone()),
            None => Ok(resp["result"].clone()),
        }
    }

    /// One call that must succeed.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        self.call(method, params).unwrap_or_else(|e| panic!("{method} failed: {e}"))
    }

    /// Sends a raw transaction.
    pub fn send(&self, raw: &Bytes) -> Result<B256, Value> {
        self.call("eth_sendRawTransaction", json!([raw])).map(|v| v.as_str().unwrap().parse().unwrap())
    }

    /// Sends raw transactions in one JSON-RPC batch; the answers in the
    /// order of `raws` (each with its `result` or `error`).
    pub fn send_batch(&self, raws: &[Bytes]) -> Vec<Value> {
        let batch: Vec<Value> = raws
            .iter()
            .enumerate()
            .map(|(i, raw)| json!({"jsonrpc": "2.0", "id": i, "method": "eth_sendRawTransaction", "params": [raw]}))
            .collect();
        let answers = self.post(&Value::Array(batch));
        let mut out = vec![Value::Null; raws.len()];
        for a in answers.as_array().expect("a batch answer") {
            let i = a["id"].as_u64().expect("an id") as usize;
            out[i] = a.clone();
        }
        out
    }

    /// Waits (up to 30 s) for a receipt.
    pub fn receipt(&self, hash: &B256) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.ok("eth_getTransactionReceipt", json!([hash]));
            if !r.is_null() {
                return r;
            }
            assert!(Instant::now() < deadline, "no receipt for {hash}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Balance of an account.
    pub fn balance(&self, addr: Address) -> U256 {
        parse_u256(&self.ok("eth_getBalance", json!([addr, "latest"])))
    }

    /// Nonce of an account at `tag`.
    pub fn nonce(&self, addr: Address, tag: &str) -> u64 {
        parse_u64(&self.ok("eth_getTransactionCount", json!([addr, tag])))
    }

    /// The metrics text.
    pub fn metrics(&self) -> String {
        ureq::get(&self.metrics_url).call().expect("scrape").into_string().expect("metrics text")
    }

    /// The value of a metric line starting with `prefix` (name plus labels).
    pub fn metric(&self, prefix: &str) -> Option<f64> {
        metric_in(&self.metrics(), prefix)
    }

    /// The pipeline's produced and committed heights, from one scrape (two
    /// scrapes could straddle a block).
    pub fn produced_and_committed(&self) -> (Option<f64>, Option<f64>) {
        let text = self.metrics();
        (
            metric_in(&text, "sluice_pipeline_produced_height "),
            metric_in(&text, "sluice_pipeline_committed_height "),
        )
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One JSON-RPC call by URL, for threads; `Err` on transport failure (a
/// killed node) instead of panicking.
pub fn rpc(url: &str, method: &str, params: Value) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let text = ureq::post(url)
        .timeout(Duration::from_secs(10))
        .set("content-type", "application/json")
        .send_string(&body.to_string())
        .map_err(|e| e.to_string())?
        .into_string()
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// The value of the first line of metrics `text` starting with `prefix`.
pub fn metric_in(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// A hex quantity.
pub fn parse_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex string").trim_start_matches("0x"), 16).expect("hex u64")
}

/// A hex 256-bit quantity.
pub fn parse_u256(v: &Value) -> U256 {
    U256::from_str_radix(v.as_str().expect("hex string").trim_start_matches("0x"), 16).expect("hex u256")
}

/// Dev signer `i` (0..4).
pub fn dev(i: usize) -> Signer {
    Signer::from_bytes(&DEV_KEYS[i].parse().unwrap()).unwrap()
}

/// A fresh random signer (no funds).
pub fn random_signer() -> Signer {
    loop {
        if let Some(s) = Signer::from_bytes(&B256::from(rand::random::<[u8; 32]>())) {
            return s;
        }
    }
}

/// A signed EIP-1559 transaction.
pub fn eip1559(from: &Signer, nonce: u64, to: TxKind, value: U256, input: Bytes, gas: u64) -> Bytes {
    from.sign_raw(TypedTransaction::Eip1559(TxEip1559 {
        chain_id: CHAIN_ID,
        nonce,
        gas_limit: gas,
        max_fee_per_gas: 2 * BASE_FEE,
        max_priority_fee_per_gas: 1_000,
        to,
        value,
        input,
        access_list: Default::default(),
    }))
}

/// A signed EIP-1559 value transfer.
pub fn transfer(from: &Signer, nonce: u64, to: Address, wei: u64) -> Bytes {
    eip1559(from, nonce, TxKind::Call(to), U256::from(wei), Bytes::new(), 21_000)
}

/// A signed legacy (EIP-155) transaction.
pub fn legacy(from: &Signer, nonce: u64, to: Address, wei: u64, chain_id: Option<u64>) -> Bytes {
    from.sign_raw(TypedTransaction::Legacy(TxLegacy {
        chain_id,
        nonce,
        gas_price: 2 * BASE_FEE,
        gas_limit: 21_000,
        to: TxKind::Call(to),
        value: U256::from(wei),
        input: Bytes::new(),
    }))
}

pub use sluice_load::contracts::{counter_runtime, counter_topic};

/// Init code deploying [`counter_runtime`].
pub fn counter_initcode() -> Bytes {
    sluice_load::contracts::initcode(&counter_runtime())
}
