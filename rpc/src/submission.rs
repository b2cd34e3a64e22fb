//! A batch element in the shape every transaction submission has
//! (`{"jsonrpc":"2.0","id":..,"method":"eth_sendRawTransaction",
//! "params":["0x.."]}`), read straight from the request's bytes.
//!
//! Read into a `serde_json::Value` tree, a submission allocates a map, its
//! keys, the method and a copy of the hex string before the hex is decoded:
//! at saturation that was most of the JSON-RPC layer's ~5 us per
//! transaction, and under overload every refused submission paid it too.
//! Here the fields borrow from the body and only the decoded bytes and the
//! id are allocated. Anything else (another method, other params, an id
//! of the wrong type, escapes in a string) is not this shape, and the
//! caller reads it the general way, which also words its errors: this is
//! a shortcut, never a second set of rules.

use alloy_primitives::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::{value::RawValue, Value};

use crate::params::hex_bytes;

/// The method this shortcut reads.
pub const METHOD: &str = "eth_sendRawTransaction";

#[derive(Deserialize)]
struct Shape<'a> {
    jsonrpc: &'a str,
    /// Absent (a notification) is `None`; `null` is `Some(Null)`.
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    method: &'a str,
    params: (&'a str,),
}

/// A present field as `Some`, even when it is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The call's id (`None`: a notification) and its transaction's bytes,
/// when `element` is a well-formed submission with valid hex; `None`
/// otherwise (the caller reads it as any other call).
pub fn read(element: &RawValue) -> Option<(Option<Value>, Bytes)> {
    let shape: Shape<'_> = serde_json::from_str(element.get()).ok()?;
    let id_ok = matches!(&shape.id, None | Some(Value::Null | Value::Number(_) | Value::String(_)));
    if shape.jsonrpc != "2.0" || shape.method != METHOD || !id_ok {
        return None;
    }
    let raw = hex_bytes(shape.params.0).ok()?;
    Some((shape.id, raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn reads_a_submission_and_keeps_its_id() {
        let el = raw(r#"{"jsonrpc":"2.0","id":7,"method":"eth_sendRawTransaction","params":["0x02ab"]}"#);
        let (id, bytes) = read(&el).unwrap();
        assert_eq!(id, Some(Value::from(7)));
        assert_eq!(bytes.as_ref(), &[0x02, 0xab]);
        let null_id =
            raw(r#"{"id":null,"params":["0x01"],"method":"eth_sendRawTransaction","jsonrpc":"2.0"}"#);
        assert_eq!(read(&null_id).unwrap().0, Some(Value::Null));
        let notification = raw(r#"{"jsonrpc":"2.0","method":"eth_sendRawTransaction","params":["0x01"]}"#);
        assert_eq!(read(&notification).unwrap().0, None);
    }

    #[test]
    fn anything_else_is_left_to_the_general_reader() {
        for text in [
            r#"{"jsonrpc":"1.0","id":1,"method":"eth_sendRawTransaction","params":["0x01"]}"#,
            r#"{"id":1,"method":"eth_sendRawTransaction","params":["0x01"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["0x01"]}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"eth_sendRawTransaction","params":["0x01"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x01","0x02"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x0"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0xzz"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["\u0030x01"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":"0x01"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"eth_sendRawTransaction","params":["0x01"]}"#,
            "42",
        ] {
            assert!(read(&raw(text)).is_none(), "{text}");
        }
    }
}
