//! JSON-RPC 2.0 framing, shared by HTTP and WebSocket: one call or a
//! batch read from a body, each call answered by [`eth::dispatch`] (or the
//! transport's own methods), the replies written back.
//!
//! Limits, each from config: batch length, response size and the
//! request's time (`rpc.batch_timeout_ms`, a batch's calls together: a
//! call it has no time left for answers -32002 `request timed out`, as
//! geth's batch timeout does). JSON nesting
//! is bounded by serde_json's recursion limit (128), so deep nesting is a
//! parse error, not a stack overflow.

use std::time::{Duration, Instant};

use alloy_primitives::Bytes;
use serde_json::{json, value::RawValue, Value};

use super::{
    error::{RpcError, INVALID_REQUEST, LIMIT_EXCEEDED, PARSE_ERROR, REQUEST_TIMED_OUT},
    eth,
    params::Params,
    reply, submission, CallContext, SharedState,
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
    respond(state, body, &mut |_, _| None, None).await
}

/// Methods a transport answers itself, before [`eth::dispatch`] (the
/// WebSocket's `eth_subscribe`); `None` passes the call on.
pub(crate) type LocalMethods<'a> = &'a mut dyn FnMut(&str, Option<&Value>) -> Option<Result<Value, RpcError>>;

/// Answers a JSON-RPC body, one call or a batch, with every limit applied:
/// the reply, or `None` when nothing is to be sent (only notifications).
/// Shared by HTTP and WebSocket; `client` is who sent it.
pub(crate) async fn respond(
    state: &SharedState,
    body: &[u8],
    local: LocalMethods<'_>,
    client: Option<std::net::IpAddr>,
) -> Option<Vec<u8>> {
    let until = Instant::now() + Duration::from_millis(state.limits.batch_timeout_ms);
    let ctx = CallContext { client, until };
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
        return answer_batch(state, calls, local, ctx).await;
    }
    let parsed: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some(parse_error(&e)),
    };
    let max = state.limits.max_response_bytes;
    match parsed {
        Value::Array(calls) => {
            answer_batch(state, calls.into_iter().map(read_call).collect(), local, ctx).await
        }
        single => {
            let call = match Call::parse(single) {
                Ok(call) => call,
                Err(reply) => return Some(reply.to_string().into_bytes()),
            };
            let result = match answer_locally(local, &call) {
                Some(result) => result,
                None => dispatch_one(state, call.method, call.params, ctx).await,
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
    ctx: CallContext,
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
    // One pass, in the batch's order: each call is answered as its reply is
    // written (submissions from what the batch admitted, the transport's
    // own methods and malformed calls at once, the rest by `dispatch` one
    // at a time), so the response limit stops a batch of heavy calls at the
    // first reply past it, with nothing run ahead of it or held beyond it.
    let mut out = Vec::with_capacity(calls.len() * 80);
    let mut tally = reply::Tally::default();
    out.push(b'[');
    for (call, sent) in calls.into_iter().zip(slots) {
        let mark = out.len();
        if mark > 1 {
            out.push(b',');
        }
        // A notification is executed but not answered.
        let wrote = match call {
            Err(v) => {
                reply::write_value(&mut out, &v);
                true
            }
            Ok(Call { id, .. }) if sent => {
                let result = admitted.next().unwrap_or(Err(TxError::Unavailable("admission stopped")));
                if let Some(id) = &id {
                    reply::write(&mut out, id, &result.map_err(RpcError::from), &mut tally);
                }
                id.is_some()
            }
            Ok(call) => {
                let result = match answer_locally(&mut *local, &call) {
                    Some(result) => result,
                    // The batch's time is spent: the rest are not run.
                    None if Instant::now() >= ctx.until => {
                        Err(RpcError::new(REQUEST_TIMED_OUT, "request timed out"))
                    }
                    None => dispatch_one(state, call.method, call.params, ctx).await,
                };
                if let Some(id) = &call.id {
                    reply::write(&mut out, id, &result, &mut tally);
                }
                call.id.is_some()
            }
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

/// Runs one call's method, within `ctx` (counted in the request metrics).
async fn dispatch_one(
    state: &SharedState,
    method: String,
    params: Option<Value>,
    ctx: CallContext,
) -> Result<Value, RpcError> {
    let start = Instant::now();
    let result = eth::dispatch(state, &method, params.as_ref(), &ctx).await;
    observe(&method, start);
    result
}

/// Counts one call of `method` and its latency since `start`.
fn observe(method: &str, start: Instant) {
    let label = eth::metric_label(method);
    metrics::counter!(m::RPC_REQUESTS, "method" => label).increment(1);
    metrics::histogram!(m::RPC_SECONDS, "method" => label).record(start.elapsed().as_secs_f64());
}
