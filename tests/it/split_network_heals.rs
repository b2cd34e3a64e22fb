//! Four real validator processes, each in its own Linux network namespace,
//! their p2p links on one bridge and JSON-RPC on another. A partition moves
//! validators' p2p links to a second bridge: the cut is total, both ways,
//! and the connections already open go silent rather than closing (what a
//! pulled cable or a firewall does). Under light load, one sender per
//! validator:
//! - a 20 s 2|2 split, healed: blocks resume on all four within 3 s, and
//!   every transaction accepted during the split is included on all four
//!   within 5 s (asserted with room for CI's load: see the end);
//! - a validator isolated for 25 s, healed: at the others' head within 5 s;
//! - a follower (a fifth namespace) cut off for 30 s, healed: at the
//!   validators' head within 5 s;
//! - six splits of 3 s, each 2|2 or 3|1 with random sides: within 3 s of
//!   the last heal every validator is past the highest block of then;
//! - nothing accepted is lost, and every height has one block hash and
//!   `stateRoot` on all four and on the follower.
//!
//! Needs root (network namespaces, veth pairs, bridges): where they cannot
//! be created the test says SKIPPED and passes. Every namespace, link and
//! process it made is removed by name and PID, even when it fails.

use std::{
    net::IpAddr,
    path::PathBuf,
    process::Command,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use alloy_primitives::{Address, B256};
use serde_json::json;

use crate::{
    support::*,
    validators_agree_and_rejoin::{height, testnet_init, wait_network_up, CI_ENV},
};

/// Namespaces and bridges of one run, removed on drop.
struct Lab {
    /// Unique per run: names of namespaces, links and bridges carry it.
    tag: String,
    /// The second octet of this run's addresses (10.X.1.i p2p, 10.X.2.i RPC).
    net: u8,
    n: usize,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Lab {
    /// `n` namespaces, p2p bridge `A` (and the cut-off bridge `B`), RPC
    /// bridge `R` with the host on it; `Err` where that is not allowed.
    fn create(n: usize) -> Result<Lab, String> {
        let pid = std::process::id();
        let lab = Lab { tag: format!("{:04x}", pid & 0xffff), net: 100 + (pid % 100) as u8, n };
        lab.remove();
        lab.build().inspect_err(|_| lab.remove())?;
        Ok(lab)
    }

    fn build(&self) -> Result<(), String> {
        for b in ["A", "B", "R"] {
            let br = self.bridge(b);
            ip(&["link", "add", &br, "type", "bridge"])?;
            ip(&["link", "set", &br, "up"])?;
        }
        ip(&["addr", "add", &format!("10.{}.2.254/24", self.net), "dev", &self.bridge("R")])?;
        for i in 0..self.n {
            let ns = self.ns(i);
            ip(&["netns", "add", &ns])?;
            let (p, r) = (self.link("p", i), self.link("r", i));
            ip(&["link", "add", &p, "type", "veth", "peer", "name", "p2p", "netns", &ns])?;
            ip(&["link", "add", &r, "type", "veth", "peer", "name", "rpc", "netns", &ns])?;
            ip(&["link", "set", &p, "master", &self.bridge("A"), "up"])?;
            ip(&["link", "set", &r, "master", &self.bridge("R"), "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", self.p2p_ip(i)), "dev", "p2p"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", self.rpc_ip(i)), "dev", "rpc"])?;
            for dev in ["p2p", "rpc", "lo"] {
                ip(&["-n", &ns, "link", "set", dev, "up"])?;
            }
        }
        Ok(())
    }

    fn ns(&self, i: usize) -> String {
        format!("sluice-{}-{i}", self.tag)
    }
    fn bridge(&self, b: &str) -> String {
        format!("sl{}{b}", self.tag)
    }
    fn link(&self, kind: &str, i: usize) -> String {
        format!("sl{}{kind}{i}", self.tag)
    }
    fn p2p_ip(&self, i: usize) -> IpAddr {
        IpAddr::from([10, self.net, 1, i as u8 + 1])
    }
    fn rpc_ip(&self, i: usize) -> IpAddr {
        IpAddr::from([10, self.net, 2, i as u8 + 1])
    }

    /// Moves validators `side` to the other p2p bridge: they reach each
    /// other and no one else.
    fn cut(&self, side: &[usize]) {
        for &i in side {
            ip(&["link", "set", &self.link("p", i), "master", &self.bridge("B")]).expect("cut");
        }
    }

    fn heal(&self) {
        for i in 0..self.n {
            ip(&["link", "set", &self.link("p", i), "master", &self.bridge("A")]).expect("heal");
        }
    }

    /// Kills whatever still runs in the namespaces, then removes them and
    /// every link and bridge of this run; quiet about what is not there.
    fn remove(&self) {
        for i in 0..self.n {
            let ns = self.ns(i);
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
            let _ = ip(&["netns", "del", &ns]);
            let _ = ip(&["link", "del", &self.link("p", i)]);
            let _ = ip(&["link", "del", &self.link("r", i)]);
        }
        for b in ["A", "B", "R"] {
            let _ = ip(&["link", "del", &self.bridge(b)]);
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Light load: dev account `i` sends a transfer to validator `i` every
/// 200 ms until `stop`; returns (nonce, hash, when accepted) of each.
fn sender(i: usize, url: String, stop: Arc<AtomicBool>) -> JoinHandle<Vec<(u64, B256, Instant)>> {
    std::thread::spawn(move || {
        let s = dev(i);
        let to = Address::repeat_byte(0x50 + i as u8);
        let mut sent = Vec::new();
        let mut nonce = 0;
        while !stop.load(Ordering::Relaxed) {
            let raw = transfer(&s, nonce, to, 1);
            match rpc(&url, "eth_sendRawTransaction", json!([raw])) {
                Ok(v) => match v["result"].as_str().and_then(|h| h.parse().ok()) {
                    Some(hash) => {
                        sent.push((nonce, hash, Instant::now()));
                        nonce += 1;
                    }
                    None => panic!("validator {i} refused nonce {nonce}: {v}"),
                },
                Err(e) => panic!("validator {i} unreachable over RPC: {e}"),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        sent
    })
}

/// Nonce of `addr` at latest on `node`, or 0 when the node cannot answer.
fn latest_nonce(node: &TestNode, addr: Address) -> u64 {
    rpc(&node.url, "eth_getTransactionCount", json!([addr, "latest"]))
        .ok()
        .and_then(|v| {
            v["result"].as_str().and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
        })
        .unwrap_or(0)
}

/// Waits until `done` holds, polling every 50 ms; the time it took from
/// `since`, or panics naming `what` after `limit`.
fn within(since: Instant, limit: Duration, what: &str, mut done: impl FnMut() -> bool) -> Duration {
    loop {
        if done() {
            return since.elapsed();
        }
        assert!(since.elapsed() < limit * 6, "{what}: not within {:?} (waited {:?})", limit, since.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_split_network_heals_in_seconds_and_its_transactions_follow() {
    let lab = match Lab::create(5) {
        Ok(lab) => lab,
        Err(e) => {
            eprintln!(
                "SKIPPED a_split_network_heals_in_seconds: cannot create network namespaces here ({e})"
            );
            return;
        }
    };
    let dir: PathBuf = std::env::temp_dir().join(format!("sluice-net-split-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let hosts: Vec<String> = (0..4).map(|i| lab.p2p_ip(i).to_string()).collect();
    let follower_host = lab.p2p_ip(4).to_string();
    let configs = testnet_init(
        &dir,
        4,
        &["--hosts", &hosts.join(","), "--followers", "1", "--follower-hosts", &follower_host],
    );
    let mut nodes: Vec<TestNode> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let config = c.to_str().expect("utf-8 path");
            TestNode::start_in_netns(&lab.ns(i), lab.rpc_ip(i), &CI_ENV, &["--config", config])
        })
        .collect();
    let f0 = dir.join("f0").join("sluice.toml");
    let mut follower = TestNode::start_in_netns(
        &lab.ns(4),
        lab.rpc_ip(4),
        &CI_ENV,
        &["--config", f0.to_str().expect("utf-8")],
    );
    wait_network_up(&nodes);

    // Pings keep quiet links alive: no connection was dropped as idle.
    for n in &nodes {
        assert_eq!(n.metric("sluice_p2p_idle_disconnects_total").unwrap_or(0.0), 0.0, "a live link dropped");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> =
        nodes.iter().enumerate().map(|(i, n)| sender(i, n.url.clone(), stop.clone())).collect();
    std::thread::sleep(Duration::from_secs(3));

    // A 2|2 split: neither side has a quorum, so neither adds a block.
    lab.cut(&[2, 3]);
    std::thread::sleep(Duration::from_secs(20));
    let top = nodes.iter().map(height).max().unwrap_or(0);
    // What each sender had accepted when the split ended.
    let split_nonces: Vec<u64> =
        nodes.iter().enumerate().map(|(i, n)| n.nonce(dev(i).address(), "pending")).collect();
    let healed = Instant::now();
    lab.heal();
    let resumed = within(healed, Duration::from_secs(3), "blocks after the 2|2 heal", || {
        nodes.iter().all(|n| height(n) > top)
    });
    // Every transaction accepted during the split is in a block on all
    // four: each sender's nonce at latest has reached its pending one then.
    let included = within(healed, Duration::from_secs(5), "the split's transactions on all four", || {
        nodes.iter().all(|n| (0..4).all(|i| latest_nonce(n, dev(i).address()) >= split_nonces[i]))
    });

    // One validator isolated for 25 s while the other three go on. Its
    // silent connections are dropped after the idle timeout (2 s), not
    // when the kernel gives up on them minutes later.
    lab.cut(&[3]);
    let isolated = Instant::now();
    let dropped = within(isolated, Duration::from_secs(5), "the isolated validator's links dropped", || {
        nodes[3].metric("sluice_consensus_peers_connected ") == Some(0.0)
    });
    assert!(nodes[3].metric("sluice_p2p_idle_disconnects_total").unwrap_or(0.0) >= 1.0);
    std::thread::sleep(Duration::from_secs(25).saturating_sub(isolated.elapsed()));
    let head = height(&nodes[0]);
    let healed = Instant::now();
    lab.heal();
    let caught_up = within(healed, Duration::from_secs(5), "the isolated validator catching up", || {
        height(&nodes[3]) >= head
    });
    // The follower cut off for 30 s while the validators go on.
    within(Instant::now(), Duration::from_secs(10), "the follower connected", || {
        follower.metric("sluice_consensus_peers_connected ") == Some(4.0)
    });
    lab.cut(&[4]);
    std::thread::sleep(Duration::from_secs(30));
    let head = height(&nodes[0]);
    let healed = Instant::now();
    lab.heal();
    let follower_back = within(healed, Duration::from_secs(5), "the cut-off follower catching up", || {
        height(&follower) >= head
    });
    // Six splits of 3 s, each 2|2 or 3|1 with random sides, 0.5 s apart.
    let mut splits = Vec::new();
    for round in 0..6 {
        if round > 0 {
            std::thread::sleep(Duration::from_millis(500));
        }
        let mut order = vec![0, 1, 2, 3];
        rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rand::rng());
        let side = order[..if rand::random::<bool>() { 2 } else { 1 }].to_vec();
        lab.cut(&side);
        std::thread::sleep(Duration::from_secs(3));
        lab.heal();
        splits.push(side);
    }
    let top = nodes.iter().map(height).max().unwrap_or(0);
    let healed = Instant::now();
    let converged = within(healed, Duration::from_secs(3), "convergence after six short splits", || {
        nodes.iter().all(|n| height(n) > top)
    });

    eprintln!(
        "2|2 split healed: blocks after {resumed:?}, its transactions on all four after {included:?}; \
         isolated validator at the head after {caught_up:?} (its links dropped after {dropped:?}); \
         follower cut off 30 s at the head after {follower_back:?}; \
         six 3 s splits (cut off: {splits:?}): all past the last heal's head after {converged:?}"
    );
    // The goals are 3 s (blocks, convergence) and 5 s (transactions,
    // catch-up); run alone these take 0.8-2.2 s, and the simulation holds
    // the goals exactly. Here the bounds are 3x the goals: CI runs this
    // beside every other test on 2 cores, and the failure it guards
    // against took 27-30 s. Under that load a heal sometimes waits out one
    // certification timeout (4 s here: CI_ENV): the side whose links came
    // back first nullifies the next leader as inactive while the other
    // side votes for it (ARCHITECTURE.md, "A heal's slow case").
    let margin = 3;
    assert!(
        converged <= margin * Duration::from_secs(3),
        "converged {converged:?} after the last of six splits"
    );
    assert!(dropped <= Duration::from_secs(5), "idle links dropped only after {dropped:?}");
    assert!(resumed <= margin * Duration::from_secs(3), "blocks resumed {resumed:?} after the heal");
    assert!(included <= margin * Duration::from_secs(5), "the split's transactions took {included:?}");
    assert!(caught_up <= margin * Duration::from_secs(5), "the isolated validator took {caught_up:?}");
    assert!(follower_back <= margin * Duration::from_secs(5), "the cut-off follower took {follower_back:?}");

    // Nothing accepted is lost, every receipt succeeded, and all four agree.
    stop.store(true, Ordering::Relaxed);
    let sent: Vec<Vec<(u64, B256, Instant)>> =
        senders.into_iter().map(|h| h.join().expect("a sender panicked")).collect();
    let start = Instant::now();
    within(start, Duration::from_secs(15), "every accepted transaction on all four", || {
        nodes.iter().all(|n| (0..4).all(|i| latest_nonce(n, dev(i).address()) >= sent[i].len() as u64))
    });
    for (i, txs) in sent.iter().enumerate() {
        for (_, hash, _) in txs {
            for n in &nodes {
                assert_eq!(n.receipt(hash)["status"], "0x1", "validator {i}'s transfer {hash}");
            }
        }
    }
    let upto = nodes.iter().chain(std::iter::once(&follower)).map(height).min().unwrap_or(0);
    for h in 0..=upto {
        let ids: Vec<_> = nodes
            .iter()
            .chain(std::iter::once(&follower))
            .map(|n| {
                let b = n.ok("eth_getBlockByNumber", json!([format!("0x{h:x}"), false]));
                (b["hash"].to_string(), b["stateRoot"].to_string())
            })
            .collect();
        assert!(ids.iter().all(|x| *x == ids[0]), "nodes disagree at height {h}: {ids:?}");
    }
    for node in nodes.iter_mut().chain(std::iter::once(&mut follower)) {
        let status = node.terminate();
        assert!(status.success(), "a validator did not exit cleanly: {status}; log:\n{}", node.log());
    }
    drop(nodes);
    drop(follower);
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
}
