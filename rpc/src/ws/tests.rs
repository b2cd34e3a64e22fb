//! Unit tests: subscription ids and the per-connection subscription
//! limit. The sockets themselves are exercised end to end by the node's
//! integration tests (`tests/it`, `websocket` and `subscri`).

use serde_json::Value;

use super::subscriptions::{subscription_id, Subscriptions};
use crate::error::LIMIT_EXCEEDED;

#[test]
fn ids_are_unique_and_geth_shaped() {
    let (a, b) = (subscription_id(), subscription_id());
    assert_ne!(a, b);
    assert_eq!(a.len(), 34);
    assert!(a.starts_with("0x"));
}

#[test]
fn subscription_limit_and_unsubscribe() {
    let mut subs = Subscriptions { list: Vec::new(), limit: 2, feed_limit: 1 };
    let heads = serde_json::json!(["newHeads"]);
    let id = subs.subscribe(Some(&heads), (5, 0)).unwrap_or_default();
    assert!(subs.subscribe(Some(&serde_json::json!(["logs", {"address": []}])), (5, 0)).is_ok());
    let err = subs.subscribe(Some(&heads), (5, 0)).err().map(|e| e.code);
    assert_eq!(err, Some(LIMIT_EXCEEDED));
    assert_eq!(subs.list[0].first_block, 6);
    assert_eq!(subs.unsubscribe(Some(&serde_json::json!([id]))).ok(), Some(Value::Bool(true)));
    assert!(subs.unsubscribe(Some(&serde_json::json!(["0x00"]))).is_err());
    assert!(subs.subscribe(Some(&serde_json::json!(["newPendingTransactions", "yes"])), (5, 0)).is_err());
    assert!(subs.subscribe(Some(&serde_json::json!(["syncing"])), (5, 0)).is_err());
}
