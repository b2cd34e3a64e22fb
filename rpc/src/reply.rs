//! Replies written straight into the response body, and their metrics
//! counted once per batch.
//!
//! Built as a `serde_json::Value` (a map, its keys, the id and result
//! copied in), printed, then copied into the body, a reply cost more than
//! reading its call: under 2x overload it was ~1.5 us a call, most of the
//! JSON-RPC layer's time, and most calls of a busy node are a submission's
//! hash or its refusal. Here a reply is serialized from borrowed parts
//! into the batch's buffer, and the per-call metrics of a batch's
//! submissions and errors are added up and recorded once.

use serde::Serialize;
use serde_json::Value;

use crate::{error::RpcError, metrics as m};

#[derive(Serialize)]
struct Success<'a, T> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: T,
}

#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: ErrorObject<'a>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

/// What every reply falls back to if its own could not be serialized (a
/// `Value` or a hash always can: this is only never a panic).
const UNWRITABLE: &[u8] =
    br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error: reply not serializable"}}"#;

/// The error codes of a batch's replies, counted once when it is done.
#[derive(Default)]
pub(crate) struct Tally {
    errors: Vec<(i64, u64)>,
}

impl Tally {
    fn error(&mut self, code: i64) {
        match self.errors.iter_mut().find(|(c, _)| *c == code) {
            Some((_, n)) => *n += 1,
            None => self.errors.push((code, 1)),
        }
    }

    /// Adds the batch's errors to `sluice_rpc_errors_total`.
    pub(crate) fn record(self) {
        for (code, n) in self.errors {
            metrics::counter!(m::RPC_ERRORS, "code" => code.to_string()).increment(n);
        }
    }
}

/// Appends the reply to call `id`: its result or its error (counted in
/// `tally`).
pub(crate) fn write<T: Serialize>(
    out: &mut Vec<u8>,
    id: &Value,
    result: &Result<T, RpcError>,
    tally: &mut Tally,
) {
    let start = out.len();
    let written = match result {
        Ok(result) => serde_json::to_writer(&mut *out, &Success { jsonrpc: "2.0", id, result }),
        Err(e) => {
            tally.error(e.code);
            let error = ErrorObject { code: e.code, message: &e.message, data: e.data.as_ref() };
            serde_json::to_writer(&mut *out, &Failure { jsonrpc: "2.0", id, error })
        }
    };
    if written.is_err() {
        out.truncate(start);
        out.extend_from_slice(UNWRITABLE);
    }
}

/// Appends a reply already built as a `Value` (a malformed call's error).
pub(crate) fn write_value(out: &mut Vec<u8>, reply: &Value) {
    let start = out.len();
    if serde_json::to_writer(&mut *out, reply).is_err() {
        out.truncate(start);
        out.extend_from_slice(UNWRITABLE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_are_json_rpc_2() {
        let mut out = Vec::new();
        let mut tally = Tally::default();
        write(&mut out, &json!(7), &Ok::<_, RpcError>("0xab"), &mut tally);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, json!({"jsonrpc": "2.0", "id": 7, "result": "0xab"}));

        out.clear();
        write(&mut out, &json!("x"), &Err::<(), _>(RpcError::new(-32003, "txpool is full")), &mut tally);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -32003, "message": "txpool is full"}})
        );

        out.clear();
        let reverted = RpcError { code: 3, message: "execution reverted".into(), data: Some(json!("0x01")) };
        write(&mut out, &Value::Null, &Err::<(), _>(reverted), &mut tally);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["error"], json!({"code": 3, "message": "execution reverted", "data": "0x01"}));
        assert_eq!(tally.errors, vec![(-32003, 1), (3, 1)]);
    }
}
