//! Decoding JSON-RPC parameters: hex quantities, data, addresses, block
//! tags and call objects, each failure worded as geth's
//! `invalid argument N: ...`.

use alloy_eips::eip2930::AccessList;
use alloy_primitives::{Address, Bytes, B256, U256};
use serde_json::Value;
use sluice_executor::CallRequest;

use super::error::RpcError;

/// Why a parameter did not decode. Worded as geth words it: the message
/// follows `invalid argument N: ` in the JSON-RPC error (-32602).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// Not a JSON string where hex was expected.
    #[error("expected a hex string, got {0}")]
    NotHexString(String),
    /// Hex without its `0x`.
    #[error("hex string without 0x prefix")]
    MissingPrefix,
    /// Hex of the wrong length for a fixed-size value.
    #[error("hex string has length {got}, want {want} for {kind}")]
    WrongLength {
        /// Hex digits given.
        got: usize,
        /// Hex digits wanted.
        want: usize,
        /// geth's name of the type (`common.Address`, `common.Hash`).
        kind: &'static str,
    },
    /// Characters that are not hex digits.
    #[error("invalid hex string")]
    InvalidHex,
    /// Data of an odd number of hex digits.
    #[error("json: cannot unmarshal hex string of odd length into Go value of type hexutil.Bytes")]
    OddLength,
    /// A JSON number that is not a non-negative integer within 64 bits.
    #[error("invalid number {0}")]
    InvalidNumber(String),
    /// `0x` alone as a quantity.
    #[error("hex string \"0x\"")]
    EmptyQuantity,
    /// A quantity wider than the field (`bits`).
    #[error("hex number > {0} bits")]
    TooWide(u32),
    /// An EIP-1898 object with neither `blockHash` nor `blockNumber`.
    #[error("block object needs blockHash or blockNumber")]
    BlockObject,
    /// Neither a tag, a number nor a hash.
    #[error("invalid block number or tag {0}")]
    BlockTag(String),
    /// Another JSON type than the one expected (`what`).
    #[error("expected {what}, got {got}")]
    WrongType {
        /// What was expected (`an object`, `a boolean`...).
        what: &'static str,
        /// What was given, as JSON.
        got: String,
    },
    /// Both `data` and `input`, different.
    #[error("both \"data\" and \"input\" are set and not equal. Please use \"input\" to pass transaction call data")]
    DataAndInput,
    /// A legacy gas price beside EIP-1559 fees.
    #[error("both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified")]
    GasPriceAndFees,
    /// A member that serde could not decode (its message).
    #[error("{0}")]
    Decode(String),
    /// A member of an object or list (`name`) did not decode.
    #[error("{name}: {error}")]
    In {
        /// The member: a field name or `list[i]`.
        name: String,
        /// Why.
        error: Box<ParamError>,
    },
}

impl ParamError {
    /// This error, said of member `name`.
    pub fn of(self, name: impl Into<String>) -> Self {
        ParamError::In { name: name.into(), error: Box::new(self) }
    }

    /// `got` was not `what`.
    pub fn wrong_type(what: &'static str, got: &Value) -> Self {
        ParamError::WrongType { what, got: got.to_string() }
    }
}

/// The positional parameters of one call.
pub struct Params<'a> {
    items: &'a [Value],
}

/// A block selector: a tag, a number or a hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockId {
    /// `latest`, `safe`, `finalized` (all the committed head here: blocks
    /// are final once committed).
    Latest,
    /// `pending`: the head, plus in-flight nonces where that applies.
    Pending,
    /// `earliest`: genesis.
    Earliest,
    /// A height.
    Number(u64),
    /// A block hash.
    Hash(B256),
}

impl<'a> Params<'a> {
    /// Wraps the `params` member (absent or null means none).
    pub fn new(params: Option<&'a Value>) -> Result<Self, RpcError> {
        match params {
            None | Some(Value::Null) => Ok(Params { items: &[] }),
            Some(Value::Array(items)) => Ok(Params { items }),
            Some(_) => Err(RpcError::new(super::error::INVALID_PARAMS, "non-array args")),
        }
    }

    /// Parameter `i`, or `None` if absent or null.
    pub fn opt(&self, i: usize) -> Option<&'a Value> {
        self.items.get(i).filter(|v| !v.is_null())
    }

    /// Parameter `i` as a `T` (serde), or `None` if absent or null.
    pub fn typed<T: serde::de::DeserializeOwned>(&self, i: usize) -> Result<Option<T>, RpcError> {
        self.opt(i).map(|v| T::deserialize(v).map_err(|e| RpcError::invalid_arg(i, e))).transpose()
    }

    /// Parameter `i`, required.
    pub fn req(&self, i: usize) -> Result<&'a Value, RpcError> {
        self.opt(i).ok_or_else(|| {
            RpcError::new(super::error::INVALID_PARAMS, format!("missing value for required argument {i}"))
        })
    }

    /// Fails when more than `n` parameters were given.
    pub fn at_most(&self, n: usize) -> Result<(), RpcError> {
        if self.items.len() > n {
            return Err(RpcError::new(
                super::error::INVALID_PARAMS,
                format!("too many arguments, want at most {n}"),
            ));
        }
        Ok(())
    }

    /// Required address.
    pub fn address(&self, i: usize) -> Result<Address, RpcError> {
        address(self.req(i)?).map_err(|e| RpcError::invalid_arg(i, e))
    }

    /// Required 32-byte hash.
    pub fn hash(&self, i: usize) -> Result<B256, RpcError> {
        hash(self.req(i)?).map_err(|e| RpcError::invalid_arg(i, e))
    }

    /// Required hex data.
    pub fn bytes(&self, i: usize) -> Result<Bytes, RpcError> {
        bytes(self.req(i)?).map_err(|e| RpcError::invalid_arg(i, e))
    }

    /// Required hex quantity.
    pub fn u64(&self, i: usize) -> Result<u64, RpcError> {
        quantity_u64(self.req(i)?).map_err(|e| RpcError::invalid_arg(i, e))
    }

    /// Required boolean.
    pub fn bool(&self, i: usize) -> Result<bool, RpcError> {
        self.req(i)?.as_bool().ok_or_else(|| RpcError::invalid_arg(i, "expected a boolean"))
    }

    /// Block selector at `i`, `latest` when absent.
    pub fn block(&self, i: usize) -> Result<BlockId, RpcError> {
        match self.opt(i) {
            None => Ok(BlockId::Latest),
            Some(v) => block_id(v).map_err(|e| RpcError::invalid_arg(i, e)),
        }
    }

    /// Call object at `i`.
    pub fn call(&self, i: usize) -> Result<CallRequest, RpcError> {
        call_request(self.req(i)?).map_err(|e| RpcError::invalid_arg(i, e))
    }
}

fn as_str(v: &Value) -> Result<&str, ParamError> {
    v.as_str().ok_or_else(|| ParamError::NotHexString(v.to_string()))
}

fn strip_0x(s: &str) -> Result<&str, ParamError> {
    s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).ok_or(ParamError::MissingPrefix)
}

/// A 20-byte address.
pub fn address(v: &Value) -> Result<Address, ParamError> {
    let s = as_str(v)?;
    let hex = strip_0x(s)?;
    if hex.len() != 40 {
        return Err(ParamError::WrongLength { got: hex.len(), want: 40, kind: "common.Address" });
    }
    // Mixed-case input is accepted without checksum validation, as geth does.
    s.to_ascii_lowercase().parse().map_err(|_| ParamError::InvalidHex)
}

/// A 32-byte hash.
pub fn hash(v: &Value) -> Result<B256, ParamError> {
    let s = as_str(v)?;
    let hex = strip_0x(s)?;
    if hex.len() != 64 {
        return Err(ParamError::WrongLength { got: hex.len(), want: 64, kind: "common.Hash" });
    }
    s.parse().map_err(|_| ParamError::InvalidHex)
}

/// Hex data of any length.
pub fn bytes(v: &Value) -> Result<Bytes, ParamError> {
    hex_bytes(as_str(v)?)
}

/// Hex data of any length, from the string itself.
pub fn hex_bytes(s: &str) -> Result<Bytes, ParamError> {
    let hex = strip_0x(s)?;
    if hex.len() % 2 == 1 {
        return Err(ParamError::OddLength);
    }
    alloy_primitives::hex::decode(hex).map(Bytes::from).map_err(|_| ParamError::InvalidHex)
}

/// A hex quantity up to 256 bits (leading zeros tolerated).
pub fn quantity(v: &Value) -> Result<U256, ParamError> {
    match v {
        // Some clients send small numbers as JSON numbers; accept them.
        Value::Number(n) => {
            n.as_u64().map(U256::from).ok_or_else(|| ParamError::InvalidNumber(n.to_string()))
        }
        _ => {
            let hex = strip_0x(as_str(v)?)?;
            if hex.is_empty() {
                return Err(ParamError::EmptyQuantity);
            }
            if hex.len() > 64 {
                return Err(ParamError::TooWide(256));
            }
            U256::from_str_radix(hex, 16).map_err(|_| ParamError::InvalidHex)
        }
    }
}

/// A hex quantity that fits in 64 bits.
pub fn quantity_u64(v: &Value) -> Result<u64, ParamError> {
    u64::try_from(quantity(v)?).map_err(|_| ParamError::TooWide(64))
}

fn quantity_u128(v: &Value) -> Result<u128, ParamError> {
    u128::try_from(quantity(v)?).map_err(|_| ParamError::TooWide(128))
}

/// A block tag, number, or `{blockNumber}` / `{blockHash}` object (EIP-1898).
pub fn block_id(v: &Value) -> Result<BlockId, ParamError> {
    match v {
        Value::String(s) => match s.as_str() {
            "latest" | "safe" | "finalized" => Ok(BlockId::Latest),
            "pending" => Ok(BlockId::Pending),
            "earliest" => Ok(BlockId::Earliest),
            _ if s.len() == 66 => hash(v).map(BlockId::Hash),
            _ => quantity_u64(v).map(BlockId::Number),
        },
        Value::Object(o) => {
            if let Some(h) = o.get("blockHash") {
                hash(h).map(BlockId::Hash)
            } else if let Some(n) = o.get("blockNumber") {
                block_id(n)
            } else {
                Err(ParamError::BlockObject)
            }
        }
        Value::Number(_) => quantity_u64(v).map(BlockId::Number),
        _ => Err(ParamError::BlockTag(v.to_string())),
    }
}

fn field<'a>(o: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a Value> {
    o.get(name).filter(|v| !v.is_null())
}

/// An `eth_call` / `eth_estimateGas` transaction object.
pub fn call_request(v: &Value) -> Result<CallRequest, ParamError> {
    let o = v.as_object().ok_or_else(|| ParamError::wrong_type("a transaction object", v))?;
    let input = match (field(o, "input"), field(o, "data")) {
        (Some(i), Some(d)) if i != d => return Err(ParamError::DataAndInput),
        (Some(i), _) => bytes(i).map_err(|e| e.of("input"))?,
        (None, Some(d)) => bytes(d).map_err(|e| e.of("data"))?,
        (None, None) => Bytes::new(),
    };
    let access_list = match field(o, "accessList") {
        Some(a) => Some(
            serde_json::from_value::<AccessList>(a.clone())
                .map_err(|e| ParamError::Decode(e.to_string()).of("accessList"))?,
        ),
        None => None,
    };
    // Member `name`, decoded by `decode`, if present.
    fn opt<T>(
        o: &serde_json::Map<String, Value>,
        name: &str,
        decode: impl Fn(&Value) -> Result<T, ParamError>,
    ) -> Result<Option<T>, ParamError> {
        field(o, name).map(decode).transpose().map_err(|e| e.of(name))
    }
    let req = CallRequest {
        from: opt(o, "from", address)?,
        to: opt(o, "to", address)?,
        gas: opt(o, "gas", quantity_u64)?,
        gas_price: opt(o, "gasPrice", quantity_u128)?,
        max_fee_per_gas: opt(o, "maxFeePerGas", quantity_u128)?,
        max_priority_fee_per_gas: opt(o, "maxPriorityFeePerGas", quantity_u128)?,
        value: opt(o, "value", quantity)?,
        input,
        nonce: opt(o, "nonce", quantity_u64)?,
        access_list,
    };
    if req.gas_price.is_some() && (req.max_fee_per_gas.is_some() || req.max_priority_fee_per_gas.is_some()) {
        return Err(ParamError::GasPriceAndFees);
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_and_tags() {
        assert_eq!(quantity_u64(&json!("0x10")).unwrap(), 16);
        assert!(quantity_u64(&json!("10")).is_err());
        assert!(quantity_u64(&json!("0x")).is_err());
        assert!(quantity_u64(&json!("0x1ffffffffffffffff")).is_err());
        assert_eq!(block_id(&json!("latest")).unwrap(), BlockId::Latest);
        assert_eq!(block_id(&json!("0x2")).unwrap(), BlockId::Number(2));
        assert_eq!(block_id(&json!({"blockNumber": "0x3"})).unwrap(), BlockId::Number(3));
        assert!(block_id(&json!("nope")).is_err());
    }

    #[test]
    fn addresses_and_data() {
        assert!(address(&json!("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")).is_ok());
        assert_eq!(
            address(&json!("0x1234")).unwrap_err(),
            ParamError::WrongLength { got: 4, want: 40, kind: "common.Address" }
        );
        assert_eq!(bytes(&json!("0xabc")).unwrap_err(), ParamError::OddLength);
        assert_eq!(
            call_request(&json!({"gas": "0x"})).unwrap_err().to_string(),
            "gas: hex string \"0x\"",
            "a member's error names it"
        );
        assert!(bytes(&json!("0xzz")).is_err());
        let req = call_request(&json!({"to": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "data": "0x01"}))
            .unwrap();
        assert_eq!(req.input.as_ref(), &[1]);
        assert!(call_request(&json!({"gasPrice": "0x1", "maxFeePerGas": "0x1"})).is_err());
    }
}
