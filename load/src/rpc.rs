//! A minimal JSON-RPC client over one keep-alive HTTP/1.1 connection.
//!
//! Each sender thread owns one [`Rpc`] (one `ureq::Agent` with a single
//! pooled connection), so "connections" on the command line is exactly the
//! number of TCP connections the target sees. Request bodies for
//! transactions are formatted by hand from pre-encoded hex, so the clock
//! only pays for the HTTP exchange and parsing the answer.

use std::{fmt::Write as _, io::Read as _, time::Duration};

use serde_json::Value;

use crate::LoadError;

/// Largest answer read (a block with 10,000 hashes is ~700 KB).
const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// One JSON-RPC endpoint over one keep-alive connection.
pub struct Rpc {
    agent: ureq::Agent,
    url: String,
}

/// A JSON-RPC error object: code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcFailure {
    /// The error code.
    pub code: i64,
    /// The error message.
    pub message: String,
}

/// One call's answer inside a batch.
pub type CallResult = Result<Value, RpcFailure>;

impl Rpc {
    /// A client for `url`; every request gives up after `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Rpc {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(5))
            .timeout(timeout)
            .max_idle_connections(1)
            .max_idle_connections_per_host(1)
            .build();
        Rpc { agent, url: url.to_string() }
    }

    /// The endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Posts a JSON body; returns the answer's bytes.
    pub fn post(&self, label: &str, body: &str) -> Result<Vec<u8>, LoadError> {
        let transport = |reason: String| LoadError::Transport {
            method: label.to_string(),
            url: self.url.clone(),
            reason,
        };
        let resp = match self.agent.post(&self.url).set("content-type", "application/json").send_string(body)
        {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                return Err(transport(format!(
                    "HTTP {code}: {}",
                    text.chars().take(200).collect::<String>()
                )));
            }
            Err(e) => return Err(transport(e.to_string())),
        };
        let mut buf = Vec::new();
        resp.into_reader()
            .take(MAX_ANSWER_BYTES)
            .read_to_end(&mut buf)
            .map_err(|e| transport(e.to_string()))?;
        Ok(buf)
    }

    /// One call; a JSON-RPC error becomes [`LoadError::Rpc`].
    pub fn call(&self, method: &str, params: Value) -> Result<Value, LoadError> {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let bytes = self.post(method, &body.to_string())?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| LoadError::BadAnswer { method: method.into(), detail: e.to_string() })?;
        match single_result(v) {
            Ok(r) => Ok(r),
            Err(f) => Err(LoadError::Rpc { method: method.into(), code: f.code, message: f.message }),
        }
    }

    /// A batch of calls; answers in the order of `calls` (matched by id, as
    /// JSON-RPC lets a server answer a batch in any order).
    pub fn batch(&self, label: &str, calls: &[(&str, Value)]) -> Result<Vec<CallResult>, LoadError> {
        let mut body = String::with_capacity(calls.len() * 96 + 2);
        body.push('[');
        for (i, (method, params)) in calls.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            let _ = write!(body, r#"{{"jsonrpc":"2.0","id":{i},"method":"{method}","params":{params}}}"#);
        }
        body.push(']');
        self.batch_body(label, &body, calls.len())
    }

    /// `eth_sendRawTransaction` for each pre-encoded `0x…` hex string, in
    /// one batch.
    pub fn send_raw_batch(&self, hexes: &[&str]) -> Result<Vec<CallResult>, LoadError> {
        let mut body = String::with_capacity(hexes.iter().map(|h| h.len() + 72).sum::<usize>() + 2);
        body.push('[');
        for (i, hex) in hexes.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            let _ = write!(
                body,
                r#"{{"jsonrpc":"2.0","id":{i},"method":"eth_sendRawTransaction","params":["{hex}"]}}"#
            );
        }
        body.push(']');
        self.batch_body("eth_sendRawTransaction", &body, hexes.len())
    }

    fn batch_body(&self, label: &str, body: &str, n: usize) -> Result<Vec<CallResult>, LoadError> {
        let bytes = self.post(label, body)?;
        parse_batch(label, &bytes, n)
    }
}

fn single_result(mut v: Value) -> CallResult {
    if let Some(err) = v.get_mut("error") {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err.get("message").and_then(Value::as_str).unwrap_or("").to_string();
        return Err(RpcFailure { code, message });
    }
    Ok(v.get_mut("result").map(Value::take).unwrap_or(Value::Null))
}

/// Splits a batch answer into per-call results, in request order.
pub fn parse_batch(label: &str, bytes: &[u8], n: usize) -> Result<Vec<CallResult>, LoadError> {
    let bad = |detail: String| LoadError::BadAnswer { method: label.to_string(), detail };
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    let Value::Array(items) = v else {
        // A whole-batch error (too large, parse error) is one object.
        return Err(bad(v.to_string().chars().take(300).collect()));
    };
    let mut out: Vec<Option<CallResult>> = vec![None; n];
    for item in items {
        let Some(id) = item.get("id").and_then(Value::as_u64).map(|i| i as usize).filter(|&i| i < n) else {
            return Err(bad(format!("answer without a valid id: {item}")));
        };
        out[id] = Some(single_result(item));
    }
    out.into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| bad(format!("no answer for call {i}"))))
        .collect()
}

/// Parses a `0x…` quantity.
pub fn quantity(method: &str, v: &Value) -> Result<u64, LoadError> {
    v.as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| LoadError::BadAnswer { method: method.into(), detail: format!("not a quantity: {v}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_answers_are_matched_by_id() {
        let text = br#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"txpool is full"}},
                        {"jsonrpc":"2.0","id":0,"result":"0xab"}]"#;
        let r = parse_batch("x", text, 2).unwrap();
        assert_eq!(r[0], Ok(Value::from("0xab")));
        assert_eq!(r[1], Err(RpcFailure { code: -32003, message: "txpool is full".into() }));
        assert!(parse_batch("x", text, 3).is_err(), "a missing answer is an error");
        assert!(parse_batch("x", br#"{"error":{"code":-32600}}"#, 1).is_err());
    }

    #[test]
    fn quantities_parse() {
        assert_eq!(quantity("m", &Value::from("0x1f")).unwrap(), 31);
        assert!(quantity("m", &Value::from("31")).is_err());
    }
}
