//! JSON-RPC 2.0 framing, shared by HTTP and WebSocket: one call or a
//! batch read from a body, each call answered by [`eth::dispatch`] (or the
//! transport's own methods), the replies written back.
//!
//! Limits, each from config: batch length and response size. JSON nesting
//! is bounded by serde_json's recursion limit (128), so deep nesting is a
//! parse error, not a stack overflow.

use std::time::Instant;

use alloy_primitives::{Bytes, B256};
use serde_json::{json, value::RawValue, Value};

use super::{
    error::{RpcError, INTERNAL_ERROR, INVALID_REQUEST, LIMIT_EXCEEDED, PARSE_ERROR},
    eth,
    params::Params,
    reply, submission, SharedState,
};
use sluice_txpool::TxError;

use crate::metrics as m;

fn error_response(id: Value, e: &RpcError) -> Value {
    metrics::counter!(m::RPC_ERRORS, "code" => e.code.to_string()).increment(1);
    json!({"jsonrpc": "2.0", "id": id, "error": e.to_json()})
}

/// Answers one request body exactly as the HTTP endpoint does, without
/// actix: the entry point for fuzzing (`fuzz/`) and in-process tests.
pub async fn handle_body(state: &SharedState, body: &[u8]) -> Option<Vec<u8>> {
    respond(state, body, &mut |_, _| None).await
}

/// Methods a transport answers itself, before [`eth::dispatch`] (the
/// WebSocket's `eth_subscribe`); `None` passes the call on.
pub(crate) type LocalMethods<'a> = &'a mut dyn FnMut(&str, Option<&Value>) -> Option<Result<Value, RpcError>>;

/// Answers a JSON-RPC body, one call or a batch, with every limit applied:
/// the reply, or `None` when nothing is to be sent (only notifications).
/// Shared by HTTP and WebSocket.
pub(crate) async fn respond(state: &SharedState, body: &[u8], local: LocalMethods<'_>) -> Option<Vec<u8>> {
    // A batch is read element by element from the body's bytes, so its
    // transaction submissions skip the `Value` tree (see
    // [`crate::submission`]); anything else is read into one.
    if let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(body) {
        if let Some(refused) = batch_len_refused(state, elements.len()) {
            return Some(refused);
        }
        let mut calls = Vec::with_capacity(elements.len());
        for element in elements {
            calls.push(match submission::read(element) {
                Some((id, raw)) => {
                    (Ok(Call { id, method: submission::METHOD.to_owned(), params: None }), Some(raw))
                }
                // Nesting past serde_json's limit inside an element fails
                // here: the whole body is a parse error, as when read at once.
                None => match serde_json::from_str::<Value>(element.get()) {
                    Ok(v) => read_call(v),
                    Err(e) => return Some(parse_error(&e)),
                },
            });
        }
        return answer_batch(state, calls, local).await;
    }
    let parsed: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some(parse_error(&e)),
    };
    let max = state.limits.max_response_bytes;
    match parsed {
        Value::Array(calls) => answer_batch(state, calls.into_iter().map(read_call).collect(), local).await,
        single => {
            let call = match Call::parse(single) {
                Ok(call) => call,
                Err(reply) => return Some(reply.to_string().into_bytes()),
            };
            let result = match answer_locally(local, &call) {
                Some(result) => result,
                None => dispatch_one(state, call.method, call.params).await,
            };
            // A notification is executed but not answered.
            let id = call.id?;
            let mut out = Vec::new();
            let mut tally = reply::Tally::default();
            reply::write(&mut out, &id, &result, &mut tally);
            tally.record();
            if out.len() > max {
                let err = RpcError::new(LIMIT_EXCEEDED, format!("response too large: limit {max} bytes"));
                return Some(error_response(id, &err).to_string().into_bytes());
            }
            Some(out)
        }
    }
}

/// The answer to a body that is not JSON.
fn parse_error(e: &serde_json::Error) -> Vec<u8> {
    let err = RpcError::new(PARSE_ERROR, format!("parse error: {e}"));
    error_response(Value::Null, &err).to_string().into_bytes()
}

/// The answer to a batch of `len` calls when its length is refused: empty
/// or over `rpc.max_batch_len`.
fn batch_len_refused(state: &SharedState, len: usize) -> Option<Vec<u8>> {
    let err = if len == 0 {
        RpcError::new(INVALID_REQUEST, "empty batch")
    } else if len > state.limits.max_batch_len {
        RpcError::new(
            INVALID_REQUEST,
            format!("batch too large: {len} calls, limit {}", state.limits.max_batch_len),
        )
    } else {
        return None;
    };
    Some(error_response(Value::Null, &err).to_string().into_bytes())
}

/// A batch element read into a `Value`: the call (or the error answering
/// it), and its transaction's bytes if it submits one.
fn read_call(element: Value) -> (Result<Call, Value>, Option<Bytes>) {
    let call = Call::parse(element);
    let raw = match &call {
        Ok(c) if c.method == submission::METHOD => {
            Params::new(c.params.as_ref()).and_then(|p| p.bytes(0)).ok()
        }
        _ => None,
    };
    (call, raw)
}

/// Answers a batch of read calls, with its limits: the reply, or `None`
/// when it held only notifications.
async fn answer_batch(
    state: &SharedState,
    calls: Vec<(Result<Call, Value>, Option<Bytes>)>,
    local: LocalMethods<'_>,
) -> Option<Vec<u8>> {
    let max = state.limits.max_response_bytes;
    if let Some(refused) = batch_len_refused(state, calls.len()) {
        return Some(refused);
    }
    // The batch's submissions are admitted together, before any call is
    // answered: their senders are recovered in parallel and their nonces
    // reserved in one step, in the batch's order (a sender's nonces stay in
    // order). JSON-RPC lets a server handle a batch's calls in any order.
    let began = Instant::now();
    let mut raws = Vec::new();
    let mut slots = Vec::with_capacity(calls.len());
    let calls: Vec<Result<Call, Value>> = calls
        .into_iter()
        .map(|(call, raw)| {
            slots.push(raw.is_some());
            raws.extend(raw);
            call
        })
        .collect();
    let submitted = raws.len();
    let mut admitted =
        if raws.is_empty() { Vec::new() } else { state.pipeline.admit(raws, true).await }.into_iter();
    if submitted > 0 {
        // Every submission of the batch took the same time.
        let label = submission::METHOD;
        metrics::counter!(m::RPC_REQUESTS, "method" => label).increment(submitted as u64);
        metrics::histogram!(m::RPC_SECONDS, "method" => label)
            .record_many(began.elapsed().as_secs_f64(), submitted);
    }
    // Calls answered now (submissions, the transport's own methods,
    // malformed calls) are kept as they are; the rest go to `dispatch`
    // together: a call that waits on an actor (a pending nonce, the pool's
    // status) waits alongside the others instead of after them, so a batch
    // of 500 `eth_getTransactionCount(.., "pending")` (how clients resync
    // after `txpool is full`) wakes this worker a few times, not 500. The
    // replies keep the batch's order. Nothing more is held than before:
    // every reply was kept until the batch was answered anyway, and the
    // batch's length is bounded (`rpc.max_batch_len`).
    let mut answers = Vec::with_capacity(calls.len());
    let mut waiting = Vec::new();
    for (call, sent) in calls.into_iter().zip(slots) {
        answers.push(match call {
            Err(reply) => Answer::Framed(reply),
            Ok(Call { id, .. }) if sent => {
                let result = admitted.next().unwrap_or(Err(TxError::Unavailable("admission stopped")));
                Answer::Submitted(id, result)
            }
            Ok(call) => match answer_locally(&mut *local, &call) {
                Some(result) => Answer::Answered(call.id, result),
                None => {
                    waiting.push(dispatch_one(state, call.method, call.params));
                    Answer::Dispatched(call.id)
                }
            },
        });
    }
    let mut dispatched =
        if waiting.is_empty() { Vec::new() } else { futures::future::join_all(waiting).await }.into_iter();
    let mut out = Vec::with_capacity(answers.len() * 80);
    let mut tally = reply::Tally::default();
    out.push(b'[');
    for answer in answers {
        let mark = out.len();
        if mark > 1 {
            out.push(b',');
        }
        // A notification is executed but not answered.
        let wrote = match answer {
            Answer::Framed(v) => {
                reply::write_value(&mut out, &v);
                true
            }
            Answer::Submitted(Some(id), result) => {
                reply::write(&mut out, &id, &result.map_err(RpcError::from), &mut tally);
                true
            }
            Answer::Answered(Some(id), result) => {
                reply::write(&mut out, &id, &result, &mut tally);
                true
            }
            Answer::Dispatched(id) => {
                let result =
                    dispatched.next().unwrap_or_else(|| Err(RpcError::new(INTERNAL_ERROR, "lost reply")));
                if let Some(id) = &id {
                    reply::write(&mut out, id, &result, &mut tally);
                }
                id.is_some()
            }
            Answer::Submitted(None, _) | Answer::Answered(None, _) => false,
        };
        if !wrote {
            out.truncate(mark);
        }
        if out.len() + 1 > max {
            tally.record();
            let err = RpcError::new(LIMIT_EXCEEDED, format!("response too large: limit {max} bytes"));
            return Some(error_response(Value::Null, &err).to_string().into_bytes());
        }
    }
    tally.record();
    if out.len() == 1 {
        // Only notifications: JSON-RPC says answer nothing.
        return None;
    }
    out.push(b']');
    Some(out)
}

/// A batch call's answer, before it is written.
enum Answer {
    /// A malformed call: its error reply, built when it was read.
    Framed(Value),
    /// A submission the batch admitted: its hash, or why it was refused.
    Submitted(Option<Value>, Result<B256, TxError>),
    /// Answered by the transport itself.
    Answered(Option<Value>, Result<Value, RpcError>),
    /// Answered by [`eth::dispatch`]: the next of the batch's dispatched.
    Dispatched(Option<Value>),
}

/// A call whose framing is valid.
struct Call {
    /// As sent (`None`: a notification).
    id: Option<Value>,
    method: String,
    params: Option<Value>,
}

impl Call {
    /// The call, or the error response for a malformed one.
    fn parse(call: Value) -> Result<Call, Value> {
        let Value::Object(mut obj) = call else {
            return Err(error_response(Value::Null, &RpcError::new(INVALID_REQUEST, "invalid request")));
        };
        let id = obj.remove("id");
        let id_ok = matches!(&id, None | Some(Value::Null | Value::Number(_) | Value::String(_)));
        let reply_id = id.clone().filter(|_| id_ok).unwrap_or(Value::Null);
        if !id_ok || obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(error_response(reply_id, &RpcError::new(INVALID_REQUEST, "invalid request")));
        }
        let Some(method) = obj.get("method").and_then(Value::as_str).map(str::to_owned) else {
            return Err(error_response(reply_id, &RpcError::new(INVALID_REQUEST, "invalid request")));
        };
        Ok(Call { id, method, params: obj.remove("params") })
    }
}

/// The transport's own answer to `call`, if it is one of its methods
/// (counted in the request metrics).
fn answer_locally(local: LocalMethods<'_>, call: &Call) -> Option<Result<Value, RpcError>> {
    let start = Instant::now();
    let result = local(&call.method, call.params.as_ref())?;
    observe(&call.method, start);
    Some(result)
}

/// Runs one call's method (counted in the request metrics).
async fn dispatch_one(state: &SharedState, method: String, params: Option<Value>) -> Result<Value, RpcError> {
    let start = Instant::now();
    let result = eth::dispatch(state, &method, params.as_ref()).await;
    observe(&method, start);
    result
}

/// Counts one call of `method` and its latency since `start`.
fn observe(method: &str, start: Instant) {
    let label = eth::metric_label(method);
    metrics::counter!(m::RPC_REQUESTS, "method" => label).increment(1);
    metrics::histogram!(m::RPC_SECONDS, "method" => label).record(start.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use alloy_primitives::{Address, Bytes, B256};
    use serde_json::{json, Value};
    use sluice_store::{Genesis, Store};
    use sluice_txpool::{AdmissionRules, TxError};
    use tokio::sync::Barrier;

    use super::*;
    use crate::{
        pipeline::{BoxFuture, Pipeline},
        RpcState,
    };

    /// A pipeline whose pending-nonce reads each wait (up to 5 s) until
    /// `Barrier`'s count of them wait at once: only answered concurrently
    /// can a batch of them all succeed.
    struct Rendezvous(Barrier);

    impl Pipeline for Rendezvous {
        fn admit(&self, raws: Vec<Bytes>, _: bool) -> BoxFuture<'_, Vec<Result<B256, TxError>>> {
            Box::pin(async move { raws.iter().map(|_| Err(TxError::Unavailable("offline"))).collect() })
        }
        fn pending_nonce(&self, _: Address) -> BoxFuture<'_, Result<Option<u64>, RpcError>> {
            Box::pin(async move {
                match tokio::time::timeout(Duration::from_secs(5), self.0.wait()).await {
                    Ok(_) => Ok(Some(7)),
                    Err(_) => Err(RpcError::new(-32000, "waited alone")),
                }
            })
        }
        fn status(&self) -> BoxFuture<'_, Result<(u64, u64), RpcError>> {
            Box::pin(async { Ok((0, 0)) })
        }
        fn queued(&self) -> BoxFuture<'_, Result<Vec<sluice_messages::RecoveredTx>, RpcError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn debug(&self, method: &str, _: Option<&Value>) -> Result<Value, RpcError> {
            Err(RpcError::new(-32601, format!("the method {method} does not exist/is not available")))
        }
    }

    fn state(pipeline: Rendezvous) -> SharedState {
        let genesis = Genesis {
            chain_id: 31337,
            timestamp: 0,
            gas_limit: 30_000_000,
            base_fee: 1_000_000_000,
            coinbase: Address::ZERO,
            alloc: Default::default(),
            synthetic: Default::default(),
        };
        let limits = sluice_config::Config::default().rpc;
        let exec = sluice_executor::ExecConfig { chain_id: 31337, spec: sluice_executor::Spec::Prague };
        Arc::new(RpcState::new(
            Arc::new(Store::new(&genesis)),
            Arc::new(pipeline),
            AdmissionRules::new(31337, 30_000_000, 1_000_000_000),
            exec,
            limits,
            crate::events::ChainEvents::new(0, 1024),
        ))
    }

    /// Clients resync after `txpool is full` with a batch of pending-nonce
    /// reads; each waits on the nonce actor, so they are answered together,
    /// not one round trip after another (in the batch's order).
    #[test]
    fn a_batchs_calls_wait_together() {
        const N: usize = 20;
        let state = state(Rendezvous(Barrier::new(N)));
        let batch: Vec<Value> = (0..N)
            .map(|i| {
                let addr = format!("0x{:040x}", i + 1);
                json!({"jsonrpc": "2.0", "id": i, "method": "eth_getTransactionCount", "params": [addr, "pending"]})
            })
            .collect();
        let body = serde_json::to_vec(&batch).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let reply = rt.block_on(handle_body(&state, &body)).unwrap();
        let reply: Vec<Value> = serde_json::from_slice(&reply).unwrap();
        assert_eq!(reply.len(), N);
        for (i, r) in reply.iter().enumerate() {
            assert_eq!(r["id"], i, "the batch's order: {r}");
            assert_eq!(r["result"], "0x7", "{r}");
        }
    }
}
