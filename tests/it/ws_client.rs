//! A blocking WebSocket JSON-RPC client (tungstenite) for the WebSocket
//! tests: calls, subscription notifications, and how a connection ended.

use std::{
    collections::VecDeque,
    net::TcpStream,
    time::{Duration, Instant},
};

use serde_json::{json, Value};
use tungstenite::{protocol::frame::coding::CloseCode, stream::MaybeTlsStream, Message, WebSocket};

use crate::support::TestNode;

/// How a connection ended, seen from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The node sent a close frame with this code.
    Closed(u16),
    /// The socket ended without a close frame.
    Eof,
    /// Still open when the wait ran out.
    Open,
}

/// One WebSocket connection speaking JSON-RPC.
pub struct Ws {
    sock: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Notifications read while waiting for an answer.
    notes: VecDeque<Value>,
}

/// `ws://` on the node's HTTP port.
pub fn ws_url(node: &TestNode) -> String {
    format!("{}/", node.url.replacen("http://", "ws://", 1))
}

impl Ws {
    /// Opens a connection (the handshake must succeed).
    pub fn connect(node: &TestNode) -> Ws {
        Ws::try_connect(node).unwrap_or_else(|e| panic!("WebSocket handshake failed: {e}"))
    }

    /// Opens a connection, or the handshake error (e.g. HTTP 503).
    pub fn try_connect(node: &TestNode) -> Result<Ws, tungstenite::Error> {
        let (sock, _) = tungstenite::connect(ws_url(node))?;
        let ws = Ws { sock, next_id: 1, notes: VecDeque::new() };
        ws.set_read_timeout(Duration::from_secs(10));
        Ok(ws)
    }

    fn set_read_timeout(&self, d: Duration) {
        if let MaybeTlsStream::Plain(s) = self.sock.get_ref() {
            s.set_read_timeout(Some(d)).unwrap();
        }
    }

    /// Sends a text frame.
    pub fn send_text(&mut self, text: String) {
        self.sock.send(Message::text(text)).unwrap();
    }

    /// Reads one JSON message; `None` on a read timeout.
    fn read_json(&mut self) -> Option<Value> {
        loop {
            match self.sock.read() {
                Ok(Message::Text(t)) => return Some(serde_json::from_str(t.as_str()).unwrap()),
                Ok(Message::Close(c)) => panic!("closed by the node: {c:?}"),
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    return None
                }
                Err(e) => panic!("WebSocket read: {e}"),
            }
        }
    }

    /// Sends raw JSON and returns the next non-notification answer.
    pub fn request(&mut self, body: &Value) -> Value {
        self.send_text(body.to_string());
        loop {
            let v = self.read_json().expect("no answer within 10 s");
            if v.get("method") == Some(&json!("eth_subscription")) {
                self.notes.push_back(v);
            } else {
                return v;
            }
        }
    }

    /// One call: `Ok(result)` or `Err(error object)`.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id;
        self.next_id += 1;
        let resp = self.request(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        assert_eq!(resp["id"], json!(id), "answers come in order: {resp}");
        match resp.get("error") {
            Some(e) => Err(e.clone()),
            None => Ok(resp["result"].clone()),
        }
    }

    /// `eth_subscribe`; returns the subscription id.
    pub fn subscribe(&mut self, params: Value) -> String {
        let id = self.call("eth_subscribe", params).unwrap();
        id.as_str().unwrap().to_string()
    }

    /// The next notification: `(subscription id, result)`, or `None` if none
    /// arrives within `wait`.
    pub fn next_note(&mut self, wait: Duration) -> Option<(String, Value)> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(n) = self.notes.pop_front() {
                let p = &n["params"];
                return Some((p["subscription"].as_str().unwrap().to_string(), p["result"].clone()));
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.set_read_timeout(left.max(Duration::from_millis(1)));
            match self.read_json() {
                // eth_subscription, or consensus_subscription (the feed).
                Some(v) if v["method"].as_str().is_some_and(|m| m.ends_with("_subscription")) => {
                    self.notes.push_back(v)
                }
                Some(v) => panic!("unexpected answer {v}"),
                None => {}
            }
        }
    }

    /// Reads (and drops) everything until the connection ends or `wait`
    /// runs out. Returns how it ended and how many notifications came first.
    pub fn drain_until_end(&mut self, wait: Duration) -> (Ended, usize) {
        let deadline = Instant::now() + wait;
        let mut notes = self.notes.len();
        self.notes.clear();
        loop {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return (Ended::Open, notes);
            };
            self.set_read_timeout(left.max(Duration::from_millis(1)));
            match self.sock.read() {
                Ok(Message::Text(_)) => notes += 1,
                Ok(Message::Close(frame)) => {
                    return (Ended::Closed(frame.map_or(1005, |f| u16::from(f.code))), notes);
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return (Ended::Eof, notes)
                }
                Err(_) => return (Ended::Eof, notes),
            }
        }
    }

    /// Closes from the client side and waits for the node's close frame.
    pub fn close(mut self) {
        let _ = self
            .sock
            .close(Some(tungstenite::protocol::CloseFrame { code: CloseCode::Normal, reason: "bye".into() }));
        let _ = self.drain_until_end(Duration::from_secs(5));
    }
}
