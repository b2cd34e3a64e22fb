//! The block consensus agrees on: sluice's sealed block, in commonware's
//! codec.
//!
//! Marshal needs a canonical encoding (`decode(encode(b)) == b`, every
//! other encoding rejected), which prost does not promise, so the wire form
//! here is commonware-codec: the header's fields at fixed width, then a
//! count and each raw transaction length-prefixed. The digest is sluice's
//! own header hash (keccak of the header's protobuf), so a block has one
//! name everywhere: in consensus, over RPC, in the store.
//!
//! The digest covers only the header; the body is bound to it by
//! `tx_root`, which decoding recomputes and checks. That check is what makes
//! a block received by broadcast or backfill the block its digest names.

use std::sync::Arc;

use alloy_primitives::{Address, Bytes, B256};
use bytes::{Buf as _, BufMut};
use commonware_codec::{varint::UInt, Buf, EncodeSize, Error, Read, ReadExt, Write};
use commonware_consensus::{types::Height, Block, BoundedBlock, Heightable};
use commonware_cryptography::{keccak256::Digest, Digestible};
use sluice_messages::{BlockHeader, SealedBlock, StateRef};

/// A sealed block as consensus carries it.
#[derive(Debug, Clone)]
pub struct ChainBlock(pub Arc<SealedBlock>);

/// Limits applied while decoding a block from a peer, from the validator
/// set's shared rules.
#[derive(Debug, Clone, Copy)]
pub struct BlockLimits {
    /// Most transactions in a block.
    pub max_txs: usize,
    /// Most bytes in one raw transaction.
    pub max_tx_bytes: usize,
    /// Most raw bytes of transactions in a block.
    pub max_block_bytes: usize,
}

/// The digest consensus uses for a sluice hash.
pub(crate) fn digest_of(hash: &B256) -> Digest {
    Digest(hash.0)
}

/// Keccak over the concatenated keccaks of the raw transactions: the
/// header's `tx_root`, as the producer computes it.
pub fn tx_root(txs: &[Bytes]) -> B256 {
    let mut hashes = Vec::with_capacity(txs.len() * 32);
    for tx in txs {
        hashes.extend_from_slice(sluice_messages::keccak256(tx).as_slice());
    }
    sluice_messages::keccak256(&hashes)
}

/// Fixed part of the encoding: number, parent, timestamp, coinbase, gas
/// limit, base fee, tx root, then the state reference's flag, height and
/// hash (always written, zero when absent, so the header has one width).
const HEADER_BYTES: usize = 8 + 32 + 8 + 20 + 8 + 8 + 32 + 1 + 8 + 32;

impl Write for ChainBlock {
    fn write(&self, buf: &mut impl BufMut) {
        let h = &self.0.header;
        buf.put_u64(h.number);
        buf.put_slice(h.parent_hash.as_slice());
        buf.put_u64(h.timestamp);
        buf.put_slice(h.coinbase.as_slice());
        buf.put_u64(h.gas_limit);
        buf.put_u64(h.base_fee);
        buf.put_slice(h.tx_root.as_slice());
        match h.state_ref {
            Some(r) => {
                buf.put_u8(1);
                buf.put_u64(r.height);
                buf.put_slice(r.app_hash.as_slice());
            }
            None => {
                buf.put_u8(0);
                buf.put_u64(0);
                buf.put_slice(B256::ZERO.as_slice());
            }
        }
        UInt(self.0.txs.len() as u64).write(buf);
        for tx in &self.0.txs {
            UInt(tx.len() as u64).write(buf);
            buf.put_slice(tx);
        }
    }
}

impl EncodeSize for ChainBlock {
    fn encode_size(&self) -> usize {
        let txs = &self.0.txs;
        HEADER_BYTES
            + UInt(txs.len() as u64).encode_size()
            + txs.iter().map(|t| UInt(t.len() as u64).encode_size() + t.len()).sum::<usize>()
    }
}

fn take<const N: usize>(buf: &mut impl Buf) -> Result<[u8; N], Error> {
    if buf.remaining() < N {
        return Err(Error::EndOfBuffer);
    }
    let mut out = [0u8; N];
    buf.copy_to_slice(&mut out);
    Ok(out)
}

fn u64_of(buf: &mut impl Buf) -> Result<u64, Error> {
    Ok(u64::from_be_bytes(take::<8>(buf)?))
}

impl Read for ChainBlock {
    type Cfg = BlockLimits;

    fn read_cfg(buf: &mut impl Buf, cfg: &BlockLimits) -> Result<Self, Error> {
        let number = u64_of(buf)?;
        let parent_hash = B256::from(take::<32>(buf)?);
        let timestamp = u64_of(buf)?;
        let coinbase = Address::from(take::<20>(buf)?);
        let gas_limit = u64_of(buf)?;
        let base_fee = u64_of(buf)?;
        let root = B256::from(take::<32>(buf)?);
        let flag = take::<1>(buf)?[0];
        let ref_height = u64_of(buf)?;
        let ref_hash = B256::from(take::<32>(buf)?);
        let state_ref = match flag {
            0 if ref_height == 0 && ref_hash == B256::ZERO => None,
            // An absent reference has one encoding: all zero.
            0 => return Err(Error::Invalid("ChainBlock", "non-zero absent state reference")),
            1 => Some(StateRef { height: ref_height, app_hash: ref_hash }),
            _ => return Err(Error::InvalidBool),
        };
        let count: u64 = UInt::<u64>::read(buf)?.into();
        let count = usize::try_from(count).map_err(|_| Error::InvalidLength(usize::MAX))?;
        if count > cfg.max_txs {
            return Err(Error::InvalidLength(count));
        }
        let mut txs = Vec::with_capacity(count);
        let mut total = 0usize;
        for _ in 0..count {
            let len: u64 = UInt::<u64>::read(buf)?.into();
            let len = usize::try_from(len).map_err(|_| Error::InvalidLength(usize::MAX))?;
            total = total.saturating_add(len);
            if len > cfg.max_tx_bytes || total > cfg.max_block_bytes {
                return Err(Error::InvalidLength(len));
            }
            if buf.remaining() < len {
                return Err(Error::EndOfBuffer);
            }
            txs.push(buf.copy_to_bytes(len).into());
        }
        if tx_root(&txs) != root {
            return Err(Error::Invalid("ChainBlock", "tx_root does not match the transactions"));
        }
        let header = BlockHeader {
            number,
            parent_hash,
            timestamp,
            coinbase,
            gas_limit,
            base_fee,
            tx_root: root,
            state_ref,
        };
        Ok(ChainBlock(Arc::new(SealedBlock { hash: header.hash(), header, txs })))
    }
}

impl Digestible for ChainBlock {
    type Digest = Digest;

    fn digest(&self) -> Digest {
        digest_of(&self.0.hash)
    }
}

impl Heightable for ChainBlock {
    fn height(&self) -> Height {
        Height::new(self.0.header.number)
    }
}

impl Block for ChainBlock {
    fn parent(&self) -> Digest {
        digest_of(&self.0.header.parent_hash)
    }
}

impl BoundedBlock for ChainBlock {
    fn max_encode_size(cfg: &BlockLimits) -> usize {
        let per_tx = UInt(cfg.max_tx_bytes as u64).encode_size();
        HEADER_BYTES + UInt(cfg.max_txs as u64).encode_size() + cfg.max_block_bytes + cfg.max_txs * per_tx
    }
}

#[cfg(test)]
mod tests {
    use commonware_codec::{Decode, Encode};

    use super::*;

    const LIMITS: BlockLimits = BlockLimits { max_txs: 10, max_tx_bytes: 64, max_block_bytes: 256 };

    fn block(txs: Vec<Bytes>, state_ref: Option<StateRef>) -> ChainBlock {
        let header = BlockHeader {
            number: 3,
            parent_hash: B256::repeat_byte(1),
            timestamp: 99,
            coinbase: Address::repeat_byte(2),
            gas_limit: 30_000_000,
            base_fee: 7,
            tx_root: tx_root(&txs),
            state_ref,
        };
        ChainBlock(Arc::new(SealedBlock { hash: header.hash(), header, txs }))
    }

    #[test]
    fn round_trips_with_and_without_a_reference() {
        let txs = vec![Bytes::from_static(b"\x02abc"), Bytes::new()];
        for r in [None, Some(StateRef { height: 0, app_hash: B256::repeat_byte(9) })] {
            let b = block(txs.clone(), r);
            let bytes = b.encode();
            assert_eq!(bytes.len(), b.encode_size());
            let back = ChainBlock::decode_cfg(bytes, &LIMITS).unwrap();
            assert_eq!(back.0.header, b.0.header);
            assert_eq!(back.0.hash, b.0.hash);
            assert_eq!(back.0.txs, b.0.txs);
            assert_eq!(back.digest(), b.digest());
        }
    }

    #[test]
    fn a_body_that_does_not_match_its_root_is_refused() {
        let b = block(vec![Bytes::from_static(b"one")], None);
        let mut bytes = b.encode().to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(ChainBlock::decode_cfg(bytes.clone(), &LIMITS).is_err());
    }

    #[test]
    fn limits_and_alternate_encodings_are_refused() {
        let big = block(vec![Bytes::from(vec![0u8; 65])], None);
        assert!(ChainBlock::decode_cfg(big.encode(), &LIMITS).is_err());
        let many = block(vec![Bytes::new(); 11], None);
        assert!(ChainBlock::decode_cfg(many.encode(), &LIMITS).is_err());
        // An absent reference with a stray height is another encoding of
        // the same block: refused.
        let mut bytes = block(vec![], None).encode().to_vec();
        bytes[HEADER_BYTES - 33] = 1;
        assert!(ChainBlock::decode_cfg(bytes.clone(), &LIMITS).is_err());
        // Trailing bytes.
        let mut bytes = block(vec![], None).encode().to_vec();
        bytes.push(0);
        assert!(ChainBlock::decode_cfg(bytes.clone(), &LIMITS).is_err());
    }

    #[test]
    fn bounded_size_covers_the_largest_block() {
        let txs = vec![Bytes::from(vec![0u8; 25]); 10];
        let b = block(txs, Some(StateRef { height: u64::MAX, app_hash: B256::ZERO }));
        assert!(b.encode_size() <= ChainBlock::max_encode_size(&LIMITS));
    }
}
