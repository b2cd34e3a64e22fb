//! The protobuf wire format, written as prost derives so that no `protoc` is
//! needed to build. `messages/proto/sluice.proto` is the same schema in
//! protobuf syntax, for other languages; a test keeps the tags in step.
//!
//! Fixed-size values (hashes, addresses, 256-bit words) travel as big-endian
//! bytes of their natural width.

use alloy_primitives::{Address, Bytes, B256, U256};

use crate::{AccountChange, BlockHeader, ChangeSet, CodeChange, Log, Receipt, SealedBlock, StateRef};

/// Why wire bytes could not be turned back into sluice's types.
#[derive(Debug, PartialEq, Eq)]
pub enum WireError {
    /// The protobuf itself is malformed.
    Decode(String),
    /// A fixed-width field has the wrong length.
    BadLength {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A required message field is absent.
    Missing(&'static str),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Decode(e) => write!(f, "protobuf decode error: {e}"),
            WireError::BadLength { field, len } => write!(f, "field {field} has bad length {len}"),
            WireError::Missing(field) => write!(f, "missing field {field}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Header of a block.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeaderProto {
    /// Height.
    #[prost(uint64, tag = "1")]
    pub number: u64,
    /// 32 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub parent_hash: Vec<u8>,
    /// Unix seconds.
    #[prost(uint64, tag = "3")]
    pub timestamp: u64,
    /// 20 bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub coinbase: Vec<u8>,
    /// Gas limit.
    #[prost(uint64, tag = "5")]
    pub gas_limit: u64,
    /// Base fee per gas.
    #[prost(uint64, tag = "6")]
    pub base_fee: u64,
    /// 32 bytes.
    #[prost(bytes = "vec", tag = "7")]
    pub tx_root: Vec<u8>,
    /// The state reference's height (absent with no reference).
    #[prost(uint64, tag = "8")]
    pub state_ref_height: u64,
    /// The state reference's app hash: 32 bytes, or empty with no
    /// reference. prost omits empty fields, so a header without a reference
    /// encodes exactly as before tags 8 and 9 existed.
    #[prost(bytes = "vec", tag = "9")]
    pub state_ref_app_hash: Vec<u8>,
}

/// A sealed block: header and raw transactions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BlockProto {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<HeaderProto>,
    /// Raw EIP-2718 transactions in order.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub txs: Vec<Vec<u8>>,
}

/// A log.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LogProto {
    /// 20 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub address: Vec<u8>,
    /// 32 bytes each.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub topics: Vec<Vec<u8>>,
    /// Data.
    #[prost(bytes = "vec", tag = "3")]
    pub data: Vec<u8>,
}

/// A receipt.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReceiptProto {
    /// 32 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub tx_hash: Vec<u8>,
    /// EIP-2718 type.
    #[prost(uint32, tag = "2")]
    pub tx_type: u32,
    /// Index among applied transactions.
    #[prost(uint32, tag = "3")]
    pub index: u32,
    /// 20 bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub from: Vec<u8>,
    /// 20 bytes, or empty for creation.
    #[prost(bytes = "vec", tag = "5")]
    pub to: Vec<u8>,
    /// 20 bytes, or empty.
    #[prost(bytes = "vec", tag = "6")]
    pub contract_address: Vec<u8>,
    /// Status.
    #[prost(bool, tag = "7")]
    pub success: bool,
    /// Gas used.
    #[prost(uint64, tag = "8")]
    pub gas_used: u64,
    /// Cumulative gas used.
    #[prost(uint64, tag = "9")]
    pub cumulative_gas_used: u64,
    /// 16 bytes big-endian.
    #[prost(bytes = "vec", tag = "10")]
    pub effective_gas_price: Vec<u8>,
    /// Logs.
    #[prost(message, repeated, tag = "11")]
    pub logs: Vec<LogProto>,
    /// Revert output.
    #[prost(bytes = "vec", tag = "12")]
    pub output: Vec<u8>,
}

/// One changed storage slot.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SlotProto {
    /// 32 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// 32 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// One changed account.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AccountChangeProto {
    /// 20 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub address: Vec<u8>,
    /// Deleted.
    #[prost(bool, tag = "2")]
    pub deleted: bool,
    /// 32 bytes.
    #[prost(bytes = "vec", tag = "3")]
    pub balance: Vec<u8>,
    /// Nonce.
    #[prost(uint64, tag = "4")]
    pub nonce: u64,
    /// New code (empty when unchanged).
    #[prost(bytes = "vec", tag = "5")]
    pub code: Vec<u8>,
    /// 32 bytes when `code` is set.
    #[prost(bytes = "vec", tag = "6")]
    pub code_hash: Vec<u8>,
    /// Storage wiped first.
    #[prost(bool, tag = "7")]
    pub storage_cleared: bool,
    /// Changed slots, sorted.
    #[prost(message, repeated, tag = "8")]
    pub storage: Vec<SlotProto>,
}

/// A block's change set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChangeSetProto {
    /// Accounts sorted by address.
    #[prost(message, repeated, tag = "1")]
    pub accounts: Vec<AccountChangeProto>,
}

/// A committed block's results: receipts, their positions in the block,
/// gas used and the app hash.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BlockResultsProto {
    /// Receipts of applied transactions.
    #[prost(message, repeated, tag = "1")]
    pub receipts: Vec<ReceiptProto>,
    /// For each receipt, its transaction's index in the block.
    #[prost(uint32, repeated, tag = "2")]
    pub raw_index: Vec<u32>,
    /// Gas used.
    #[prost(uint64, tag = "3")]
    pub gas_used: u64,
    /// 32 bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub app_hash: Vec<u8>,
}

fn b256(field: &'static str, v: &[u8]) -> Result<B256, WireError> {
    B256::try_from(v).map_err(|_| WireError::BadLength { field, len: v.len() })
}

fn addr(field: &'static str, v: &[u8]) -> Result<Address, WireError> {
    Address::try_from(v).map_err(|_| WireError::BadLength { field, len: v.len() })
}

fn opt_addr(field: &'static str, v: &[u8]) -> Result<Option<Address>, WireError> {
    if v.is_empty() {
        Ok(None)
    } else {
        addr(field, v).map(Some)
    }
}

fn u256(field: &'static str, v: &[u8]) -> Result<U256, WireError> {
    U256::try_from_be_slice(v).filter(|_| v.len() == 32).ok_or(WireError::BadLength { field, len: v.len() })
}

impl From<&BlockHeader> for HeaderProto {
    fn from(h: &BlockHeader) -> Self {
        HeaderProto {
            number: h.number,
            parent_hash: h.parent_hash.to_vec(),
            timestamp: h.timestamp,
            coinbase: h.coinbase.to_vec(),
            gas_limit: h.gas_limit,
            base_fee: h.base_fee,
            tx_root: h.tx_root.to_vec(),
            state_ref_height: h.state_ref.map_or(0, |r| r.height),
            state_ref_app_hash: h.state_ref.map_or_else(Vec::new, |r| r.app_hash.to_vec()),
        }
    }
}

impl TryFrom<&HeaderProto> for BlockHeader {
    type Error = WireError;
    fn try_from(p: &HeaderProto) -> Result<Self, WireError> {
        Ok(BlockHeader {
            number: p.number,
            parent_hash: b256("parent_hash", &p.parent_hash)?,
            timestamp: p.timestamp,
            coinbase: addr("coinbase", &p.coinbase)?,
            gas_limit: p.gas_limit,
            base_fee: p.base_fee,
            tx_root: b256("tx_root", &p.tx_root)?,
            state_ref: match (p.state_ref_app_hash.is_empty(), p.state_ref_height) {
                (true, 0) => None,
                (true, _) => return Err(WireError::Missing("state_ref_app_hash")),
                (false, height) => {
                    Some(StateRef { height, app_hash: b256("state_ref_app_hash", &p.state_ref_app_hash)? })
                }
            },
        })
    }
}

impl BlockHeader {
    /// The header's hash: keccak of its protobuf encoding.
    pub fn hash(&self) -> B256 {
        crate::keccak256(&prost::Message::encode_to_vec(&HeaderProto::from(self)))
    }
}

impl From<&SealedBlock> for BlockProto {
    fn from(b: &SealedBlock) -> Self {
        BlockProto {
            header: Some(HeaderProto::from(&b.header)),
            txs: b.txs.iter().map(|t| t.to_vec()).collect(),
        }
    }
}

impl TryFrom<&BlockProto> for SealedBlock {
    type Error = WireError;
    fn try_from(p: &BlockProto) -> Result<Self, WireError> {
        let header = BlockHeader::try_from(p.header.as_ref().ok_or(WireError::Missing("header"))?)?;
        Ok(SealedBlock {
            hash: header.hash(),
            header,
            txs: p.txs.iter().map(|t| Bytes::copy_from_slice(t)).collect(),
        })
    }
}

impl From<&Receipt> for ReceiptProto {
    fn from(r: &Receipt) -> Self {
        ReceiptProto {
            tx_hash: r.tx_hash.to_vec(),
            tx_type: u32::from(r.tx_type),
            index: r.index,
            from: r.from.to_vec(),
            to: r.to.map(|a| a.to_vec()).unwrap_or_default(),
            contract_address: r.contract_address.map(|a| a.to_vec()).unwrap_or_default(),
            success: r.success,
            gas_used: r.gas_used,
            cumulative_gas_used: r.cumulative_gas_used,
            effective_gas_price: r.effective_gas_price.to_be_bytes().to_vec(),
            logs: r
                .logs
                .iter()
                .map(|l| LogProto {
                    address: l.address.to_vec(),
                    topics: l.topics.iter().map(|t| t.to_vec()).collect(),
                    data: l.data.to_vec(),
                })
                .collect(),
            output: r.output.to_vec(),
        }
    }
}

impl TryFrom<&ReceiptProto> for Receipt {
    type Error = WireError;
    fn try_from(p: &ReceiptProto) -> Result<Self, WireError> {
        let price: [u8; 16] = p.effective_gas_price.as_slice().try_into().map_err(|_| {
            WireError::BadLength { field: "effective_gas_price", len: p.effective_gas_price.len() }
        })?;
        let mut logs = Vec::with_capacity(p.logs.len());
        for l in &p.logs {
            logs.push(Log {
                address: addr("log.address", &l.address)?,
                topics: l.topics.iter().map(|t| b256("log.topic", t)).collect::<Result<_, _>>()?,
                data: Bytes::copy_from_slice(&l.data),
            });
        }
        Ok(Receipt {
            tx_hash: b256("tx_hash", &p.tx_hash)?,
            tx_type: u8::try_from(p.tx_type)
                .map_err(|_| WireError::BadLength { field: "tx_type", len: 4 })?,
            index: p.index,
            from: addr("from", &p.from)?,
            to: opt_addr("to", &p.to)?,
            contract_address: opt_addr("contract_address", &p.contract_address)?,
            success: p.success,
            gas_used: p.gas_used,
            cumulative_gas_used: p.cumulative_gas_used,
            effective_gas_price: u128::from_be_bytes(price),
            logs,
            output: Bytes::copy_from_slice(&p.output),
        })
    }
}

impl From<&ChangeSet> for ChangeSetProto {
    fn from(c: &ChangeSet) -> Self {
        ChangeSetProto {
            accounts: c
                .accounts
                .iter()
                .map(|a| AccountChangeProto {
                    address: a.address.to_vec(),
                    deleted: a.deleted,
                    balance: a.balance.to_be_bytes::<32>().to_vec(),
                    nonce: a.nonce,
                    code: a.code.as_ref().map(|c| c.code.to_vec()).unwrap_or_default(),
                    code_hash: a.code.as_ref().map(|c| c.hash.to_vec()).unwrap_or_default(),
                    storage_cleared: a.storage_cleared,
                    storage: a
                        .storage
                        .iter()
                        .map(|(k, v)| SlotProto {
                            key: k.to_be_bytes::<32>().to_vec(),
                            value: v.to_be_bytes::<32>().to_vec(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl TryFrom<&ChangeSetProto> for ChangeSet {
    type Error = WireError;
    fn try_from(p: &ChangeSetProto) -> Result<Self, WireError> {
        let mut accounts = Vec::with_capacity(p.accounts.len());
        for a in &p.accounts {
            let code = if a.code_hash.is_empty() {
                None
            } else {
                Some(CodeChange {
                    hash: b256("code_hash", &a.code_hash)?,
                    code: Bytes::copy_from_slice(&a.code),
                })
            };
            let mut storage = Vec::with_capacity(a.storage.len());
            for s in &a.storage {
                storage.push((u256("slot.key", &s.key)?, u256("slot.value", &s.value)?));
            }
            accounts.push(AccountChange {
                address: addr("account.address", &a.address)?,
                deleted: a.deleted,
                balance: u256("account.balance", &a.balance)?,
                nonce: a.nonce,
                code,
                storage_cleared: a.storage_cleared,
                storage,
            });
        }
        Ok(ChangeSet { accounts })
    }
}

/// Decodes a protobuf message, mapping prost's error into [`WireError`].
pub fn decode<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, WireError> {
    M::decode(bytes).map_err(|e| WireError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn sample_block() -> SealedBlock {
        let header = BlockHeader {
            number: 7,
            parent_hash: B256::repeat_byte(1),
            timestamp: 1_700_000_000,
            coinbase: Address::repeat_byte(2),
            gas_limit: 30_000_000,
            base_fee: 1_000_000_000,
            tx_root: B256::repeat_byte(3),
            state_ref: None,
        };
        SealedBlock { hash: header.hash(), header, txs: vec![Bytes::from_static(b"\x02abc"), Bytes::new()] }
    }

    #[test]
    fn block_round_trips() {
        let b = sample_block();
        let bytes = BlockProto::from(&b).encode_to_vec();
        let back = SealedBlock::try_from(&decode::<BlockProto>(&bytes).unwrap()).unwrap();
        assert_eq!(back.header, b.header);
        assert_eq!(back.hash, b.hash);
        assert_eq!(back.txs, b.txs);
    }

    /// The header as encoded before tags 8 and 9 existed.
    #[derive(Clone, PartialEq, prost::Message)]
    struct HeaderV1 {
        #[prost(uint64, tag = "1")]
        number: u64,
        #[prost(bytes = "vec", tag = "2")]
        parent_hash: Vec<u8>,
        #[prost(uint64, tag = "3")]
        timestamp: u64,
        #[prost(bytes = "vec", tag = "4")]
        coinbase: Vec<u8>,
        #[prost(uint64, tag = "5")]
        gas_limit: u64,
        #[prost(uint64, tag = "6")]
        base_fee: u64,
        #[prost(bytes = "vec", tag = "7")]
        tx_root: Vec<u8>,
    }

    #[test]
    fn header_without_state_ref_hashes_as_before() {
        let h = sample_block().header;
        let v1 = HeaderV1 {
            number: h.number,
            parent_hash: h.parent_hash.to_vec(),
            timestamp: h.timestamp,
            coinbase: h.coinbase.to_vec(),
            gas_limit: h.gas_limit,
            base_fee: h.base_fee,
            tx_root: h.tx_root.to_vec(),
        };
        assert_eq!(HeaderProto::from(&h).encode_to_vec(), v1.encode_to_vec());
        assert_eq!(h.hash(), crate::keccak256(&v1.encode_to_vec()));
    }

    #[test]
    fn state_ref_round_trips_and_changes_the_hash() {
        let mut b = sample_block();
        let plain = b.header.hash();
        for height in [0, 5] {
            b.header.state_ref = Some(StateRef { height, app_hash: B256::repeat_byte(8) });
            let back = BlockHeader::try_from(&HeaderProto::from(&b.header)).unwrap();
            assert_eq!(back, b.header);
            assert_ne!(b.header.hash(), plain);
        }
        let mut bad = HeaderProto::from(&b.header);
        bad.state_ref_app_hash = vec![1; 31];
        assert!(BlockHeader::try_from(&bad).is_err());
        bad.state_ref_app_hash.clear();
        assert_eq!(BlockHeader::try_from(&bad), Err(WireError::Missing("state_ref_app_hash")));
    }

    #[test]
    fn receipt_and_changes_round_trip() {
        let r = Receipt {
            tx_hash: B256::repeat_byte(9),
            tx_type: 2,
            index: 3,
            from: Address::repeat_byte(4),
            to: None,
            contract_address: Some(Address::repeat_byte(5)),
            success: true,
            gas_used: 21_000,
            cumulative_gas_used: 42_000,
            effective_gas_price: 1_000_000_007,
            logs: vec![Log {
                address: Address::repeat_byte(6),
                topics: vec![B256::ZERO],
                data: Bytes::from_static(b"x"),
            }],
            output: Bytes::new(),
        };
        let back =
            Receipt::try_from(&decode::<ReceiptProto>(&ReceiptProto::from(&r).encode_to_vec()).unwrap())
                .unwrap();
        assert_eq!(back, r);

        let c = ChangeSet {
            accounts: vec![AccountChange {
                address: Address::repeat_byte(1),
                deleted: false,
                balance: U256::from(5),
                nonce: 1,
                code: Some(CodeChange { hash: B256::repeat_byte(7), code: Bytes::from_static(b"\x60\x00") }),
                storage_cleared: true,
                storage: vec![(U256::from(1), U256::from(2))],
            }],
        };
        let back = ChangeSet::try_from(
            &decode::<ChangeSetProto>(&ChangeSetProto::from(&c).encode_to_vec()).unwrap(),
        )
        .unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode::<BlockProto>(&[0xff, 0xff, 0xff]).is_err());
        let p = BlockProto {
            header: Some(HeaderProto { parent_hash: vec![1, 2], ..Default::default() }),
            txs: vec![],
        };
        assert!(matches!(SealedBlock::try_from(&p), Err(WireError::BadLength { field: "parent_hash", .. })));
        assert_eq!(SealedBlock::try_from(&BlockProto::default()).unwrap_err(), WireError::Missing("header"));
    }
}

#[cfg(test)]
#[path = "wire_tags_test.rs"]
mod wire_tags_test;
