//! Named failpoints, one per pipeline stage, for fault-injection tests.
//!
//! A failpoint is armed with an action: `panic`, `error`, `delay(MS)`,
//! `drop`, `stall(MS)`, optionally limited to the next K hits (`*K`) and,
//! for the mempool, to one shard (`mempool_shard.N`). What each action does
//! at each stage, and the test that proves the node survives it, is in
//! `FAULTS.md`.
//!
//! The registry is process-wide (like `fail-rs`), because failpoints are
//! reached from HTTP workers and from every arbiter, and an unarmed point
//! must cost one relaxed atomic load: each [`Failpoint`] is a static with an
//! `armed` flag read first; the lock behind it is taken only when armed.
//!
//! Armed from config at start (`faults.failpoints`, or
//! `SLUICE_FAULTS__FAILPOINTS`) and at run time through the `debug_`
//! JSON-RPC namespace ([`debug_rpc`]), which is off unless
//! `faults.debug_rpc` is set and the RPC address is a loopback one.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use parking_lot::{const_mutex, Mutex};
use serde_json::{json, Value};

use sluice_rpc::error::{RpcError, INVALID_PARAMS};

use crate::metrics as m;

/// A stage that has a failpoint (the `actor` metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// RPC admission (`eth_sendRawTransaction`, on the HTTP workers).
    Admission,
    /// Nonce reservation.
    Nonce,
    /// A mempool shard (every shard, or one with `mempool_shard.N`).
    MempoolShard,
    /// The block producer.
    Producer,
    /// Block preparation.
    Preparer,
    /// The execution stage (ordered execution).
    Executor,
    /// Store commit.
    Committer,
}

impl Site {
    /// Every site, in pipeline order.
    pub const ALL: [Site; 7] = [
        Site::Admission,
        Site::Nonce,
        Site::MempoolShard,
        Site::Producer,
        Site::Preparer,
        Site::Executor,
        Site::Committer,
    ];

    /// The name used in specs and as the `actor` label.
    pub fn name(self) -> &'static str {
        match self {
            Site::Admission => "admission",
            Site::Nonce => "nonce",
            Site::MempoolShard => "mempool_shard",
            Site::Producer => "producer",
            Site::Preparer => "preparer",
            Site::Executor => "executor",
            Site::Committer => "committer",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a fired failpoint does. Its meaning at each stage is in `FAULTS.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Panic inside the handler (contained by the stage's supervisor).
    Panic,
    /// The stage's operation fails with an error.
    Error,
    /// The message is handled this much later.
    Delay(Duration),
    /// The message is lost.
    Drop,
    /// The stage handles the message, then takes nothing from its mailbox
    /// for this long.
    Stall(Duration),
}

impl Action {
    /// Every action's label, for metrics registered at zero.
    pub const LABELS: [&'static str; 5] = ["panic", "error", "delay", "drop", "stall"];

    /// The `action` metric label.
    pub fn label(self) -> &'static str {
        match self {
            Action::Panic => "panic",
            Action::Error => "error",
            Action::Delay(_) => "delay",
            Action::Drop => "drop",
            Action::Stall(_) => "stall",
        }
    }

    fn spec(self) -> String {
        match self {
            Action::Delay(d) => format!("delay({})", d.as_millis()),
            Action::Stall(d) => format!("stall({})", d.as_millis()),
            other => other.label().to_string(),
        }
    }
}

/// An armed failpoint: its action, how many more hits fire it (`None`:
/// every hit), and for the mempool the one shard it applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The action.
    pub action: Action,
    /// Hits left that fire; `None` fires forever.
    pub remaining: Option<u64>,
    /// Only this mempool shard (`None`: any).
    pub shard: Option<usize>,
}

/// Why a failpoint spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// No such site.
    #[error("unknown failpoint site {0:?}; sites: admission, nonce, mempool_shard[.N], producer, preparer, executor, committer")]
    UnknownSite(String),
    /// The action is not one of the known ones, or is malformed.
    #[error("invalid failpoint action {0:?}; actions: panic, error, delay(MS), drop, stall(MS), off, each optionally *K")]
    BadAction(String),
    /// An entry is not `site=action`.
    #[error("invalid failpoint entry {0:?}; expected site=action")]
    Syntax(String),
}

/// One stage's failpoint.
pub struct Failpoint {
    site: Site,
    armed: AtomicBool,
    spec: Mutex<Option<Spec>>,
}

static POINTS: [Failpoint; 7] = [
    Failpoint::new(Site::Admission),
    Failpoint::new(Site::Nonce),
    Failpoint::new(Site::MempoolShard),
    Failpoint::new(Site::Producer),
    Failpoint::new(Site::Preparer),
    Failpoint::new(Site::Executor),
    Failpoint::new(Site::Committer),
];

static DEBUG_RPC: AtomicBool = AtomicBool::new(false);

/// The failpoint of `site`.
pub fn point(site: Site) -> &'static Failpoint {
    &POINTS[site.index()]
}

impl Failpoint {
    const fn new(site: Site) -> Self {
        Failpoint { site, armed: AtomicBool::new(false), spec: const_mutex(None) }
    }

    /// The action to inject now, if armed. Unarmed, this is one relaxed
    /// atomic load.
    #[inline]
    pub fn fire(&self) -> Option<Action> {
        if !self.armed.load(Ordering::Relaxed) {
            return None;
        }
        self.fire_slow(None)
    }

    /// Like [`Failpoint::fire`], for mempool shard `index`.
    #[inline]
    pub fn fire_shard(&self, index: usize) -> Option<Action> {
        if !self.armed.load(Ordering::Relaxed) {
            return None;
        }
        self.fire_slow(Some(index))
    }

    #[cold]
    fn fire_slow(&self, shard: Option<usize>) -> Option<Action> {
        let mut slot = self.spec.lock();
        let spec = slot.as_mut()?;
        if let (Some(want), Some(got)) = (spec.shard, shard) {
            if want != got {
                return None;
            }
        }
        let action = spec.action;
        if let Some(left) = spec.remaining.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                *slot = None;
                self.armed.store(false, Ordering::Relaxed);
            }
        }
        drop(slot);
        let (actor, label) = (self.site.name(), action.label());
        metrics::counter!(m::FAULTS_INJECTED, "actor" => actor, "action" => label).increment(1);
        tracing::warn!(actor, action = label, ?shard, "failpoint fired");
        Some(action)
    }

    /// Arms (or, with `None`, disarms) the failpoint.
    pub fn set(&self, spec: Option<Spec>) {
        let mut slot = self.spec.lock();
        *slot = spec;
        self.armed.store(slot.is_some(), Ordering::Relaxed);
    }

    /// The armed spec, if any.
    pub fn get(&self) -> Option<Spec> {
        *self.spec.lock()
    }
}

/// Parses `site[.N]=action[(MS)][*K]`; the action `off` disarms.
pub fn parse_entry(entry: &str) -> Result<(Site, Option<Spec>), FaultError> {
    let (site, action) = entry.split_once('=').ok_or_else(|| FaultError::Syntax(entry.into()))?;
    let (site, shard) = match site.trim().split_once('.') {
        Some((name, n)) => {
            (name, Some(n.parse::<usize>().map_err(|_| FaultError::UnknownSite(site.into()))?))
        }
        None => (site.trim(), None),
    };
    let site = Site::ALL
        .into_iter()
        .find(|s| s.name() == site)
        .ok_or_else(|| FaultError::UnknownSite(site.into()))?;
    if shard.is_some() && site != Site::MempoolShard {
        return Err(FaultError::UnknownSite(entry.into()));
    }
    let bad = || FaultError::BadAction(action.trim().into());
    let (action, times) = match action.trim().split_once('*') {
        Some((a, k)) => (a.trim(), Some(k.trim().parse::<u64>().ok().filter(|k| *k > 0).ok_or_else(bad)?)),
        None => (action.trim(), None),
    };
    let millis = |name: &str| -> Result<Duration, FaultError> {
        let arg = action.strip_prefix(name).and_then(|a| a.strip_prefix('(')?.strip_suffix(')'));
        arg.and_then(|a| a.trim().parse::<u64>().ok()).map(Duration::from_millis).ok_or_else(bad)
    };
    let action = match action {
        "off" => return Ok((site, None)),
        "panic" => Action::Panic,
        "error" => Action::Error,
        "drop" => Action::Drop,
        a if a.starts_with("delay") => Action::Delay(millis("delay")?),
        a if a.starts_with("stall") => Action::Stall(millis("stall")?),
        _ => return Err(bad()),
    };
    Ok((site, Some(Spec { action, remaining: times, shard })))
}

/// Parses a list of entries separated by `;` or `,` (empty: none).
pub fn parse_list(list: &str) -> Result<Vec<(Site, Option<Spec>)>, FaultError> {
    list.split([';', ',']).map(str::trim).filter(|e| !e.is_empty()).map(parse_entry).collect()
}

/// Applies a parsed list.
pub fn apply(entries: &[(Site, Option<Spec>)]) {
    for (site, spec) in entries {
        point(*site).set(*spec);
    }
}

/// Disarms every failpoint.
pub fn clear_all() {
    for p in &POINTS {
        p.set(None);
    }
}

/// The armed failpoints as `site -> spec` text.
pub fn list() -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for p in &POINTS {
        if let Some(s) = p.get() {
            let name = match s.shard {
                Some(n) => format!("{}.{n}", p.site.name()),
                None => p.site.name().to_string(),
            };
            let times = s.remaining.map(|k| format!("*{k}")).unwrap_or_default();
            out.insert(name, Value::String(format!("{}{times}", s.action.spec())));
        }
    }
    out
}

/// Arms the configured failpoints, enables (or not) the `debug_`
/// namespace, and registers every fault metric at zero so dashboards show
/// each actor and action before anything fires.
pub fn install(failpoints: &str, debug_rpc: bool) -> Result<(), FaultError> {
    let entries = parse_list(failpoints)?;
    clear_all();
    apply(&entries);
    DEBUG_RPC.store(debug_rpc, Ordering::Relaxed);
    for site in Site::ALL {
        for action in Action::LABELS {
            metrics::counter!(m::FAULTS_INJECTED, "actor" => site.name(), "action" => action).increment(0);
        }
    }
    if !entries.is_empty() {
        tracing::warn!(failpoints, "failpoints armed at start");
    }
    Ok(())
}

/// The `debug_` namespace: `debug_setFailpoint(site, action)`,
/// `debug_clearFailpoints()`, `debug_listFailpoints()`. When the namespace
/// is off every `debug_` method is unknown, as in geth.
pub fn debug_rpc(method: &str, params: Option<&Value>) -> Result<Value, RpcError> {
    if !DEBUG_RPC.load(Ordering::Relaxed) {
        return Err(RpcError::method_not_found(method));
    }
    let arg = |i: usize| -> Result<&str, RpcError> {
        params
            .and_then(|p| p.get(i))
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::new(INVALID_PARAMS, format!("missing value for required argument {i}")))
    };
    match method {
        "debug_setFailpoint" => {
            let entry = format!("{}={}", arg(0)?, arg(1)?);
            let parsed = parse_entry(&entry).map_err(|e| RpcError::invalid_arg(1, e))?;
            apply(&[parsed]);
            tracing::warn!(%entry, "failpoint set over RPC");
            Ok(Value::Object(list()))
        }
        "debug_clearFailpoints" => {
            clear_all();
            Ok(json!(true))
        }
        "debug_listFailpoints" => Ok(Value::Object(list())),
        _ => Err(RpcError::method_not_found(method)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_counts_shards_and_durations() {
        let got = parse_list("executor=panic*2; mempool_shard.1=delay(50) ,committer=off").unwrap();
        assert_eq!(
            got[0],
            (Site::Executor, Some(Spec { action: Action::Panic, remaining: Some(2), shard: None }))
        );
        let delay = Action::Delay(Duration::from_millis(50));
        assert_eq!(
            got[1],
            (Site::MempoolShard, Some(Spec { action: delay, remaining: None, shard: Some(1) }))
        );
        assert_eq!(got[2], (Site::Committer, None));
        for bad in [
            "nowhere=panic",
            "executor=explode",
            "executor",
            "producer.1=drop",
            "preparer=delay",
            "nonce=drop*0",
        ] {
            assert!(parse_list(bad).is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn fail_next_k_times_then_disarm() {
        let _hooks = crate::supervise::PROCESS_HOOKS.blocking_lock();
        // Sites no other unit test arms (the registry is process-wide).
        let p = point(Site::Preparer);
        p.set(Some(Spec { action: Action::Error, remaining: Some(2), shard: None }));
        assert_eq!(p.fire(), Some(Action::Error));
        assert_eq!(p.fire(), Some(Action::Error));
        assert_eq!(p.fire(), None);
        assert!(p.get().is_none());
        let s = point(Site::MempoolShard);
        s.set(Some(Spec { action: Action::Drop, remaining: Some(1), shard: Some(3) }));
        assert_eq!(s.fire_shard(0), None, "another shard is not hit");
        assert_eq!(s.fire_shard(3), Some(Action::Drop));
        assert_eq!(s.fire_shard(3), None);
    }
}
