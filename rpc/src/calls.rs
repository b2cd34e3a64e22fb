//! The methods that run the EVM for a caller: `eth_call`,
//! `eth_estimateGas`, `eth_createAccessList` here, `eth_simulateV1`
//! ([`crate::simulate`]), `debug_trace*` ([`crate::trace`]), `trace_*`
//! ([`crate::parity`]) and Otterscan's re-executions
//! ([`crate::ots::CALL_METHODS`]). Each runs on the
//! call [`pool`](crate::pool), off the HTTP workers, with at most
//! `rpc.gas_cap` gas, within a deadline (`rpc.evm_timeout_ms`, or a geth
//! trace's own timeout, never past the request's) and with its EVM memory
//! bounded by `rpc.evm_memory_limit_bytes`.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{json, Value};
use sluice_executor::{
    call, create_access_list, estimate_gas,
    overrides::{override_header, OverriddenState},
    CallLimits, CallRequest, Deadline,
};
use sluice_messages::BlockHeader;
use sluice_store::StateReader;

use super::{
    error::{RpcError, SERVER_ERROR},
    format::hex_u64,
    params::Params,
    parity,
    selector::state_at,
    simulate, trace, RpcState,
};

/// The methods served here (the traces are in [`trace::METHODS`] and
/// [`parity::METHODS`], `eth_simulateV1` in [`simulate::METHODS`]).
pub const METHODS: &[&str] = &["eth_call", "eth_estimateGas", "eth_createAccessList"];

/// Whether `method` runs on the call pool.
pub fn is_call(method: &str) -> bool {
    METHODS.contains(&method) || simulate::METHODS.contains(&method) || traced(method)
}

/// Whether `method` re-executes a mined transaction or traces: it stops,
/// past its deadline, with a trace's words.
fn traced(method: &str) -> bool {
    trace::METHODS.contains(&method)
        || parity::METHODS.contains(&method)
        || crate::ots::CALL_METHODS.contains(&method)
}

/// Answers one of [`METHODS`], [`trace::METHODS`] or [`parity::METHODS`]
/// on the call pool, by `until` at the latest (what is left of the
/// request's time).
pub(crate) async fn dispatch(
    state: &Arc<RpcState>,
    method: &str,
    params: Option<&Value>,
    until: Instant,
) -> Result<Value, RpcError> {
    let own = if trace::METHODS.contains(&method) {
        trace::timeout(state, method, &Params::new(params)?)?
    } else {
        Duration::from_millis(state.limits.evm_timeout_ms)
    };
    let now = Instant::now();
    // The request's deadline, if sooner, is the call's timeout.
    let timeout = own.min(until.saturating_duration_since(now));
    let deadline = Deadline::at(now + timeout, timeout);
    // geth's words for a stopped trace and a stopped call (a parity trace,
    // on rpc.evm_timeout_ms, stops with a trace's words).
    let late = if traced(method) { "execution timeout".into() } else { deadline.message() };
    let (s, name, params, d) = (Arc::clone(state), method.to_owned(), params.cloned(), deadline.clone());
    state.calls.run(&deadline, late, move || run(&s, &name, params.as_ref(), &d)).await
}

/// Runs the call on this thread (a call worker).
fn run(s: &RpcState, method: &str, params: Option<&Value>, deadline: &Deadline) -> Result<Value, RpcError> {
    let p = Params::new(params)?;
    let limits =
        CallLimits { deadline: deadline.clone(), memory_limit_bytes: s.limits.evm_memory_limit_bytes };
    match method {
        "eth_estimateGas" => with_overrides(s, &p, |state, header, req| {
            Ok(hex_u64(estimate_gas(state, &s.exec, &limits, header, req)?))
        }),
        "eth_call" => with_overrides(s, &p, |state, header, req| {
            let out = call(state, &s.exec, &limits, header, req)?;
            if out.success {
                Ok(json!(out.output))
            } else if out.revert {
                Err(RpcError::reverted(&out.output))
            } else {
                Err(RpcError::new(SERVER_ERROR, out.halt_reason.unwrap_or_else(|| "execution halted".into())))
            }
        }),
        "eth_createAccessList" => {
            let req = capped(p.call(0)?, s);
            let at = state_at(s, p.block(1)?)?;
            value_funded(at.reader(s), &req)?;
            let header = &at.block(s).block.header;
            let out = create_access_list(at.reader(s), &s.exec, &limits, header, &req)?;
            let mut answer = json!({"accessList": out.access_list, "gasUsed": hex_u64(out.gas_used)});
            if let Some(error) = out.error {
                answer["error"] = json!(error);
            }
            Ok(answer)
        }
        other if parity::METHODS.contains(&other) => parity::call(s, other, &p, deadline),
        other if simulate::METHODS.contains(&other) => simulate::call(s, &p, &limits),
        other if crate::ots::CALL_METHODS.contains(&other) => crate::ots::call_traced(s, other, &p, deadline),
        other => trace::call(s, other, &p, deadline),
    }
}

/// Runs `f` on the call the parameters describe, as `eth_call` and
/// `eth_estimateGas` take it: the request (capped) at 0, the state at the
/// block at 1 with the state overrides at 2, and the block's header with
/// the block overrides at 3.
fn with_overrides<T>(
    s: &RpcState,
    p: &Params<'_>,
    f: impl FnOnce(&dyn StateReader, &BlockHeader, &CallRequest) -> Result<T, RpcError>,
) -> Result<T, RpcError> {
    let req = capped(p.call(0)?, s);
    let at = state_at(s, p.block(1)?)?;
    let state = OverriddenState::new(at.reader(s), &p.typed(2)?.unwrap_or_default())?;
    value_funded(&state, &req)?;
    let header = override_header(&at.block(s).block.header, &p.typed(3)?.unwrap_or_default())?;
    f(&state, &header, &req)
}

/// A call's gas: what it asks for, at most `rpc.gas_cap` (geth's
/// `--rpc.gascap`); when it asks for none, the block gas limit, at most the
/// same cap.
pub(crate) fn capped(mut req: CallRequest, s: &RpcState) -> CallRequest {
    let cap = s.limits.gas_cap;
    req.gas = Some(req.gas.map_or(s.rules.block_gas_limit.min(cap), |g| g.min(cap)));
    req
}

/// An unpriced call must still be able to pay its value, as in geth (whose
/// `buyGas` checks `balance >= gas * price + value` with a price of 0); the
/// executor waives every balance check for unpriced calls. Without this, an
/// estimate for a value the sender does not have succeeds, and web3.py (which
/// sends no fee fields) never sees "insufficient funds". Priced calls are
/// checked by the executor.
fn value_funded(state: &dyn StateReader, req: &CallRequest) -> Result<(), RpcError> {
    let priced =
        [req.gas_price, req.max_fee_per_gas, req.max_priority_fee_per_gas].iter().any(|f| f.unwrap_or(0) > 0);
    let value = req.value.unwrap_or_default();
    if priced || value.is_zero() {
        return Ok(());
    }
    let from = req.from.unwrap_or_default();
    let balance = state.account(&from)?.map(|a| a.balance).unwrap_or_default();
    if balance < value {
        return Err(RpcError::new(
            SERVER_ERROR,
            format!("insufficient funds for gas * price + value: address {from} have {balance} want {value}"),
        ));
    }
    Ok(())
}
